"""The fit's plan names every release, its μ and its pass.

Every estimator and path lists its releases before any row is read
(``_BasePrivatePCA._releases``, told to a progress hook's ``planned``). The
list composes to the charge along the costliest branch, and each release it
names is made in a pass that the fit announces.
"""

import math
import warnings

import numpy as np
import pytest

from sklearn_dppca import (
    BudgetAccountant,
    CoherentPowerPCA,
    ComplexGaussPCA,
    PrivatePCA,
)
from sklearn_dppca._releases import Release, composed_mu
from sklearn_dppca.privacy import gdp_mu


class _Seen:
    """A progress hook keeping the planned releases and the announced lines."""

    def __init__(self):
        self.lines, self.releases = [], None

    def __call__(self, line):
        self.lines.append(line)

    def planned(self, releases):
        assert self.lines == [], "the plan is told before the first pass"
        self.releases = list(releases)


def _rows(n=3000, d=20, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d)) + 5.0


CASES = {
    "private": lambda: PrivatePCA(n_components=3, data_norm=30),
    "private, uncentred": lambda: PrivatePCA(n_components=3, data_norm=30,
                                             center=False),
    "private, auto": lambda: PrivatePCA(n_components=3, data_norm="auto"),
    "private, auto, uncentred": lambda: PrivatePCA(
        n_components=3, data_norm="auto", center=False),
    "private, box": lambda: PrivatePCA(n_components=3, bounds=(0.0, 10.0)),
    "private, box, auto": lambda: PrivatePCA(n_components=3, bounds=(0.0, 10.0),
                                             data_norm="auto"),
    "private, matrix-free": lambda: PrivatePCA(
        n_components=3, data_norm=30, path="matrix_free", svd_solver="randomized"),
    "private, noisy power": lambda: PrivatePCA(
        n_components=3, data_norm=30, path="noisy_power", svd_solver="randomized"),
    "complex": lambda: ComplexGaussPCA(n_components=3, data_norm=30),
    "coherent": lambda: CoherentPowerPCA(n_components=3, data_norm=30),
    "coherent, all components": lambda: CoherentPowerPCA(data_norm=30),
    "coherent, fixed": lambda: CoherentPowerPCA(
        n_components=3, data_norm=30, clip_radius=0.05, n_iter=3),
    "coherent, noisy power": lambda: CoherentPowerPCA(
        n_components=3, data_norm=30, path="noisy_power"),
    "coherent, noisy power, fixed": lambda: CoherentPowerPCA(
        n_components=3, data_norm=30, path="noisy_power", clip_radius=0.05,
        n_iter=2),
    "coherent, random start": lambda: CoherentPowerPCA(
        n_components=3, data_norm=30, start="random"),
    "coherent, random start, auto": lambda: CoherentPowerPCA(
        n_components=3, data_norm="auto", start="random"),
    "coherent, repetition": lambda: CoherentPowerPCA(
        n_components=3, data_norm=30, selection="repetition"),
}


def _fit_seen(estimator, X):
    seen = _Seen()
    estimator.set_params(epsilon=1.0, delta=1e-6, random_state=0,
                         accountant=BudgetAccountant(100.0, 0.1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimator._fit(X, progress=seen)
    return seen


def _taken(release, estimator):
    """Whether the release's branch ran (the power branch's "init" outcome
    ran its iterations and go/no-go too)."""
    branch = getattr(estimator, "branch_", None)
    return release.branch is None or release.branch == (
        "power" if branch in ("power", "init") else branch)


@pytest.mark.parametrize("case", list(CASES))
def test_the_plan_composes_to_the_charge_and_names_the_passes_made(case):
    estimator = CASES[case]()
    seen = _fit_seen(estimator, _rows())
    releases = seen.releases
    assert releases and all(isinstance(r, Release) for r in releases)
    names = [r.name for r in releases]
    assert len(set(names)) == len(names)
    # composed along the costliest branch: exactly the charge (GDP plans)
    if case == "coherent, repetition":
        assert composed_mu(releases) is None  # charged in Rényi DP
        assert releases[-1].draws is None  # the trials' number is secret
    elif case == "coherent, all components":
        # k = d: no clipping test, so the fallback always runs, with the
        # test's share: what it is charged, exactly
        assert names == ["mean", "init", "fallback"]
        assert composed_mu(releases) == pytest.approx(gdp_mu(1.0, 1e-6), rel=1e-12)
    else:
        assert composed_mu(releases) == pytest.approx(gdp_mu(1.0, 1e-6), rel=1e-12)
        # the branches are alternatives of equal μ²
        branches = {}
        for r in releases:
            if r.branch is not None:
                branches[r.branch] = branches.get(r.branch, 0.0) + r.mu**2
        assert len(set(np.round(list(branches.values()), 12))) <= 1
    # a centred fit releases its mean first; an uncentred one none
    assert ("mean" in names) == estimator.center
    # each release that ran perturbs a pass the fit announced
    for r in releases:
        if r.draws is not None and _taken(r, estimator):
            assert any(r.reads in line for line in seen.lines), (r, seen.lines)


def test_a_repetition_over_every_component_is_refused_uncharged():
    """With n_components >= d there is nothing for selection="repetition"
    to select and no trial would run: refused before the charge rather
    than charged the selection's whole cost."""
    budget = BudgetAccountant()
    with pytest.raises(ValueError, match="no trial would run"):
        CoherentPowerPCA(data_norm=30, selection="repetition",
                         accountant=budget).fit(_rows())
    assert budget.n_charges == 0


def test_the_plan_is_the_same_for_rows_of_the_same_shape():
    """Public values only: another table of the same shape, one with a far
    larger row, gives the same plan."""
    X = _rows()
    other = _rows(seed=1)
    other[0] = 1e6
    for case in ("private, auto", "coherent", "private, noisy power"):
        assert (_fit_seen(CASES[case](), X).releases
                == _fit_seen(CASES[case](), other).releases)


def test_the_noisy_power_method_draws_what_its_plan_names():
    """PrivatePCA's noisy power method makes the passes its plan counts."""
    for passes in (2, 5):
        estimator = CASES["private, noisy power"]().set_params(iterated_power=passes)
        seen = _fit_seen(estimator, _rows())
        (covariance,) = [r for r in seen.releases if r.name == "covariance"]
        assert covariance.draws == passes
        assert sum("products" in line for line in seen.lines) == passes


def test_the_first_rows_centre_is_planned_as_two_releases_of_one_sum():
    """With the first rows' centre (ComplexGaussPCA on many rows), the mean's
    share is the pilot's release and two of the centred pass's sum."""
    seen = _fit_seen(ComplexGaussPCA(n_components=2, data_norm=10),
                     _rows(n=140_000, d=5))
    names = [r.name for r in seen.releases]
    assert names == ["mean", "centring", "covariance"]
    assert seen.releases[1].draws == 2
    assert seen.lines[0].startswith("the first ")  # the pilot's rows
    assert composed_mu(seen.releases) == pytest.approx(gdp_mu(1.0, 1e-6))


def test_release_lines_name_mu_draws_branch_and_pass():
    line = Release("step", 0.5, "power-method products", draws=3,
                   branch="power").line()
    assert line == ("release step (if power): mu=0.5 in 3 draws; "
                    "pass: power-method products")
    assert "at most 4 draws" in Release("mean", 1.0, "x", draws=4, at_most=True).line()
    assert "secret number" in Release("trials", None, "x", draws=None).line()
    assert composed_mu([Release("a", 3.0, "x"), Release("b", 4.0, "x", branch="p"),
                        Release("c", 1.0, "x", branch="q")]) == math.hypot(3.0, 4.0)
