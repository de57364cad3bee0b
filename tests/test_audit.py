"""Privacy audits: no release path beats its claimed ε, and the audit has teeth."""

import math

import numpy as np
import pytest

from sklearn_dppca import CoherentPowerPCA, ComplexGaussPCA, PrivatePCA
from sklearn_dppca._base import MEAN_BUDGET_SHARE
from sklearn_dppca.audit import (
    audit,
    clopper_pearson_epsilon,
    gaussian_mu_lower,
    mean_statistic,
    neighbouring_datasets,
    scatter_statistic,
    subspace_statistic,
)
from sklearn_dppca.privacy import gdp_mu

pytestmark = pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")

EPSILON, DELTA = 1.0, 1e-5


class HalfNoisePCA(PrivatePCA):
    """A broken mechanism: claims (ε, δ) but adds half the covariance noise."""

    def _privacy_plan(self, n_samples, n_features):
        plan = super()._privacy_plan(n_samples, n_features)
        mus = dict(plan.mus, covariance=2.0 * plan.mus["covariance"])
        return plan._replace(mus=mus)


def orthogonal(n=4000):
    return neighbouring_datasets(n, 3, kind="orthogonal", scale=0.7)


def opposite(n=400):
    return neighbouring_datasets(n, 3, kind="opposite")


def test_audit_catches_an_under_noised_mechanism():
    """Half the σ on the covariance: the Gaussian test's lower bound exceeds ε."""
    X, Y = orthogonal()
    broken = HalfNoisePCA(epsilon=EPSILON, delta=DELTA, data_norm=1.0)
    result = audit(broken, X, Y, scatter_statistic, n_fits=400, random_state=1)
    assert result.epsilon_gaussian > EPSILON
    honest = PrivatePCA(epsilon=EPSILON, delta=DELTA, data_norm=1.0)
    result = audit(honest, X, Y, scatter_statistic, n_fits=400, random_state=1)
    assert result.epsilon_lower <= EPSILON


@pytest.mark.parametrize("Est", [PrivatePCA, ComplexGaussPCA])
@pytest.mark.parametrize("center", [True, False])
def test_covariance_release_never_beats_its_claim(Est, center):
    X, Y = orthogonal()
    est = Est(epsilon=EPSILON, delta=DELTA, data_norm=1.0, center=center)
    n_fits = 800
    result = audit(est, X, Y, scatter_statistic, n_fits=n_fits, random_state=2)
    assert result.epsilon_lower <= EPSILON
    # the test is sharp: it measures the covariance release's μ (exactly
    # calibrated), to within 3 standard errors
    expected = gdp_mu(EPSILON, DELTA) * math.sqrt(1.0 - MEAN_BUDGET_SHARE * center)
    assert abs(result.mu_estimate - expected) < 3 * math.sqrt(2.0 / n_fits)


@pytest.mark.parametrize(
    "est",
    [
        PrivatePCA(epsilon=EPSILON, delta=DELTA, data_norm=1.0),
        ComplexGaussPCA(epsilon=EPSILON, delta=DELTA, data_norm=1.0),
        CoherentPowerPCA(2, epsilon=EPSILON, delta=DELTA, data_norm=1.0,
                         clip_radius=0.1, n_iter=2),
    ],
    ids=["private", "complex", "coherent"],
)
def test_mean_release_never_beats_its_claim(est):
    X, Y = opposite()
    n_fits = 800
    result = audit(est, X, Y, mean_statistic(0), n_fits=n_fits, random_state=3)
    assert result.epsilon_lower <= EPSILON
    # the mean release's μ (its share of the budget) is what the test measures
    share = est._budget_shares()["mean"]
    expected = gdp_mu(EPSILON, DELTA) * math.sqrt(share)
    assert abs(result.mu_estimate - expected) < 3 * math.sqrt(2.0 / n_fits)


@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize(
    "params, n_fits",
    [({"clip_radius": 0.1, "n_iter": 3}, 300), ({}, 150),
     ({"selection": "repetition", "n_iter_max": 2}, 60), ({"start": "random"}, 150)],
    ids=["fixed", "gdp", "repetition", "random start"],
)
def test_power_method_never_beats_its_claim(params, n_fits, center):
    est = CoherentPowerPCA(2, epsilon=EPSILON, delta=DELTA, data_norm=1.0,
                           center=center, **params)
    X, Y = neighbouring_datasets(300, 3, kind="orthogonal", scale=0.3)
    result = audit(est, X, Y, subspace_statistic, n_fits=n_fits, random_state=4)
    assert result.epsilon_lower <= EPSILON


def test_bounds_on_known_distributions():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=4000), rng.normal(size=4000) + 1.0
    mu = gaussian_mu_lower(a, b)
    assert 0.9 < mu < 1.0
    assert gaussian_mu_lower(a, rng.normal(size=4000)) < 0.1
    eps = clopper_pearson_epsilon(a, b, delta=1e-5)
    # a 1-GDP pair is (ε, δ)-DP only for ε ≈ 3.9 at δ = 1e-5: the bound is below
    assert 0.5 < eps < 3.9
    assert clopper_pearson_epsilon(a, a + 0.0, delta=1e-5) < 0.3
    assert math.isfinite(eps)


def test_selection_path_never_beats_its_claim():
    """The private choice of (R, T) itself runs (h > 0) and stays within its ε."""
    X, Y = neighbouring_datasets(2000, 3, kind="orthogonal", scale=0.0)
    rng = np.random.default_rng(5)
    background = rng.normal(size=(1999, 3)) * [0.6, 0.25, 0.1]
    X[1:], Y[1:] = background, background
    est = CoherentPowerPCA(1, epsilon=4.0, delta=DELTA, data_norm=1.0, n_iter_max=2,
                           selection="repetition")
    probe = est.set_params(random_state=0).fit(X)
    assert probe.branch_ == "repetition"  # the selection runs on this data
    result = audit(est.set_params(random_state=None), X, Y, subspace_statistic,
                   n_fits=40, random_state=6)
    assert result.epsilon_lower <= 4.0


def test_power_branch_of_the_default_never_beats_its_claim(monkeypatch):
    """The default's power branch (forced: the rule's thresholds only decide
    utility, the branch itself is chosen from released values) and its
    go/no-go stay within ε on the adversarial pair."""
    import sklearn_dppca._coherent_power_pca as cpp

    monkeypatch.setattr(cpp, "KAPPA_MAX", math.inf)
    monkeypatch.setattr(cpp, "WARM_START", math.inf)
    monkeypatch.setattr(cpp, "GAIN_MAX", math.inf)
    monkeypatch.setattr(cpp, "ENERGY_RATIO", -math.inf)
    X, Y = neighbouring_datasets(2000, 3, kind="orthogonal", scale=0.0)
    background = np.random.default_rng(7).normal(size=(1999, 3)) * [0.6, 0.25, 0.1]
    X[1:], Y[1:] = background, background
    est = CoherentPowerPCA(1, epsilon=EPSILON, delta=DELTA, data_norm=1.0)
    probe = est.set_params(random_state=0).fit(X)
    assert probe.branch_ in ("power", "init")
    result = audit(est.set_params(random_state=None), X, Y, subspace_statistic,
                   n_fits=150, random_state=8)
    assert result.epsilon_lower <= EPSILON


@pytest.mark.parametrize("data_norm", [1.0, "auto"])
def test_failed_fits_on_neighbouring_first_rows_show_nothing_uncharged(data_norm):
    """Issue 30, item 1: many fits on neighbouring first rows, each
    interrupted at its first pass over every row (a user's Ctrl-C). What an
    interrupted fit showed is a release unless it was charged: the statistic
    is the number of progress lines an *uncharged* fit showed (−1 for a
    charged one, whose output the accountant counts). Every fit that could
    show a step of the first rows is charged, so the two samples agree and
    the audit's lower bound on the ε of the uncharged failures is 0 (before,
    they showed the mean steps, whose number is a release, uncharged)."""
    from sklearn_dppca import BudgetAccountant

    rng = np.random.default_rng(3)
    X = rng.normal(size=(140_000, 4)) * 0.05 + 0.02  # the first 32 768 rows lead
    X_prime = X.copy()
    X_prime[0] = -10.0

    def shown_uncharged(rows):
        accountant, lines = BudgetAccountant(), []

        def progress(line):
            lines.append(line)
            if line.startswith("pass 1"):
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            PrivatePCA(2, epsilon=EPSILON, data_norm=data_norm,
                       accountant=accountant)._fit(rows, progress=progress)
        return len(lines) if accountant.n_charges == 0 else -1

    samples = [np.array([shown_uncharged(rows) for _ in range(60)])
               for rows in (X, X_prime)]
    assert clopper_pearson_epsilon(*samples, DELTA) == 0.0
    # the charge follows the first rows' read, before their first release
    # and so before the pass over every row
    assert all(np.all(s == -1) for s in samples)
