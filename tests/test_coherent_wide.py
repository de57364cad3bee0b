"""CoherentPowerPCA's noisy power path (issue 31): no ``d × d`` matrix.

The initialisation is the noisy power method's release, each power
iteration's preconditioner comes from a released ``k × k`` matrix
``Ĥ = XᵀMX + GOE`` (sensitivity √2 in unit-ball units), and the fallback
continues the noisy power method. The tests recover every release's σ from
the draws and recompose the charge for each branch, audit the fixed mode,
and check the path's choice, its refusals, its accuracy against the dense
path and that NumPy, CSR and Dask input give one answer under one seed.
"""

import math

import dask.array as da
import numpy as np
import pytest
from scipy import sparse

import sklearn_dppca._coherent_power_pca as coherent
import sklearn_dppca._private_pca as private_pca
from sklearn_dppca import BudgetAccountant, CoherentPowerPCA
from sklearn_dppca._base import budget_shares
from sklearn_dppca.audit import audit, neighbouring_datasets, subspace_statistic
from sklearn_dppca.datasets import make_coherent_low_rank
from sklearn_dppca.metrics import principal_angle_sin
from sklearn_dppca.privacy import gdp_mu

pytestmark = pytest.mark.filterwarnings(
    "ignore::sklearn_dppca.PrivacyLeakWarning",
    "ignore::sklearn_dppca.NoisyReleaseWarning")


def wide(**params):
    params.setdefault("accountant", BudgetAccountant())
    params.setdefault("data_norm", 1.0)
    return CoherentPowerPCA(path="noisy_power", **params)


@pytest.fixture(scope="module")
def spikes():
    X, _ = make_coherent_low_rank(20_000, 200, 3, eigengap=0.7, spread=3.0,
                                  data_norm=1.0, random_state=0)
    centred = X - X.mean(axis=0)
    reference = np.linalg.eigh(centred.T @ centred)[1][:, ::-1][:, :3].T
    return X, reference


def record_releases(monkeypatch):
    """Every Gaussian draw of the fit but the count's, as ``(kind, σ,
    shape)``: the noisy power passes and trace, the clipping test, the power
    steps' ``Z`` and the ``k × k`` matrices."""
    draws = []
    real_add, real_pp_draw = private_pca.add_dense_noise, private_pca.dense_noise
    real_draw, real_goe = coherent.dense_noise, coherent.goe_noise

    def adding(rng, matrix, sigma):
        draws.append(("pass", sigma, matrix.shape))
        return real_add(rng, matrix, sigma)

    def trace(rng, shape, sigma):
        draws.append(("trace", sigma, shape))
        return real_pp_draw(rng, shape, sigma)

    def drawing(rng, shape, sigma):
        draws.append(("test" if shape == () else "Z", sigma, shape))
        return real_draw(rng, shape, sigma)

    def goe(rng, k, sigma):
        draws.append(("H", sigma, (k, k)))
        return real_goe(rng, k, sigma)

    monkeypatch.setattr(private_pca, "add_dense_noise", adding)
    monkeypatch.setattr(private_pca, "dense_noise", trace)
    monkeypatch.setattr(coherent, "dense_noise", drawing)
    monkeypatch.setattr(coherent, "goe_noise", goe)
    return draws


def composed(draws, radius, test_radii=()):
    """Σ μ² of the recorded releases, from their stated sensitivities
    (unit-ball units): a pass and a ``k × k`` matrix √2, ``Z`` 2R, the
    clipping test R² (in ``test_radii`` order); the trace rides with its
    pass."""
    total, tests = 0.0, list(test_radii)
    for kind, sigma, _ in draws:
        if kind in ("pass", "H"):
            total += (math.sqrt(2.0) / sigma) ** 2
        elif kind == "Z":
            total += (2.0 * radius / sigma) ** 2
        elif kind == "test":
            total += (tests.pop(0) ** 2 / sigma) ** 2
    return total


def test_fixed_mode_releases_compose_to_the_charge(monkeypatch, spikes):
    X, _ = spikes
    draws = record_releases(monkeypatch)
    est = wide(n_components=3, epsilon=2.0, clip_radius=0.05, n_iter=3,
               center=False, random_state=0).fit(X)
    assert est.path_ == "noisy_power" and est.branch_ == "fixed"
    kinds = [kind for kind, _, _ in draws]
    assert kinds == ["pass"] * coherent.WIDE_PASSES + ["trace"] + ["H", "Z"] * 3 + ["H"]
    assert all(shape == (200, 13) for kind, _, shape in draws if kind == "pass")
    shares = budget_shares(coherent.FIXED_SHARES, False)
    mu = gdp_mu(2.0, 1e-6)
    mu_count = mu * math.sqrt(shares["count"])
    total = composed(draws, 0.05) + mu_count**2
    assert math.isclose(math.sqrt(total), mu, rel_tol=1e-9)
    assert est.privacy_spent_ == (2.0, 1e-6)
    assert est.n_clipped_ is not None


@pytest.mark.parametrize("branch", ["power", "fallback"])
def test_gdp_branches_compose_to_the_charge(monkeypatch, spikes, branch):
    """Either branch of selection="gdp" spends the same μ²: the power
    iterations and the two k × k matrices of the go/no-go, or the noisy
    power method's further passes."""
    X, _ = spikes
    if branch == "power":  # every criterion passes
        for name, value in (("ENERGY_RATIO", -np.inf), ("WARM_START", np.inf),
                            ("KAPPA_MAX", np.inf), ("GAIN_MAX", np.inf)):
            monkeypatch.setattr(coherent, name, value)
    else:
        monkeypatch.setattr(coherent, "ENERGY_RATIO", np.inf)
    draws = record_releases(monkeypatch)
    est = wide(n_components=3, epsilon=2.0, center=False, random_state=0).fit(X)
    assert est.branch_ in ((branch,) if branch == "fallback" else ("power", "init"))
    n = X.shape[0]
    radius = math.sqrt(3 / n)
    plan = est._privacy_plan(n, 200)
    floor = coherent.floor_level(math.sqrt(6.0) / plan.mus["step"], 3,
                                 coherent.GDP_ITERATIONS, est.failure_prob)
    test_radii = [2.0 * math.sqrt(3 / n), floor**-0.5]
    total = composed(draws, radius, test_radii)
    assert math.isclose(math.sqrt(total), gdp_mu(2.0, 1e-6), rel_tol=1e-9)
    kinds = [kind for kind, _, _ in draws]
    if branch == "fallback":
        passes = coherent.WIDE_PASSES + coherent.WIDE_FALLBACK_PASSES
        assert kinds.count("pass") == passes
    else:
        assert kinds.count("H") == coherent.GDP_ITERATIONS + 2


def test_an_audit_of_the_fixed_mode_finds_no_more_than_its_claim():
    X, Y = neighbouring_datasets(300, 12, kind="orthogonal", scale=0.3)
    params = dict(epsilon=1.0, delta=1e-5, data_norm=1.0, clip_radius=0.5,
                  n_iter=2, path="noisy_power")
    result = audit(CoherentPowerPCA(1, **params), X, Y, subspace_statistic,
                   n_fits=200, random_state=3)
    assert result.epsilon_lower <= 1.0


@pytest.mark.parametrize("params", [
    dict(clip_radius=0.05, n_iter=2), dict()])
def test_numpy_csr_and_dask_give_one_answer(params):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 40)) * np.r_[3.0, 2.0, 1.5, np.full(37, 0.3)]
    X /= np.linalg.norm(X, axis=1).max()
    fits = [wide(n_components=3, epsilon=3.0, random_state=1, **params).fit(data)
            for data in (X, sparse.csr_matrix(X), da.from_array(X, chunks=(700, 40)))]
    for other in fits[1:]:
        assert other.branch_ == fits[0].branch_
        np.testing.assert_allclose(other.components_, fits[0].components_,
                                   atol=1e-8)


def test_refused_before_the_charge_where_it_cannot_run():
    X = np.random.default_rng(0).normal(size=(500, 12))
    for params, match in ((dict(selection="repetition", n_components=1), "selection"),
                          (dict(n_components=3), "below n_features")):
        budget = BudgetAccountant()
        with pytest.raises(ValueError, match=match):
            wide(accountant=budget, **params).fit(X)
        assert budget.n_charges == 0


def test_auto_takes_it_only_where_the_dense_matrices_do_not_fit():
    X = np.random.default_rng(0).normal(size=(500, 3000))
    X /= np.linalg.norm(X, axis=1).max()
    fits = {limit: CoherentPowerPCA(3, data_norm=1.0, accountant=BudgetAccountant(),
                                    memory_limit=limit, random_state=0,
                                    start="covariance").fit(X)
            for limit in ("auto", 50e6)}  # the dense matrices: 216 MB
    assert fits["auto"].path_ == "dense"
    assert fits[50e6].path_ == "noisy_power"


def test_power_iterations_recover_the_dense_paths_accuracy(spikes):
    """At a budget where the dense initialisation is accurate, a fixed (R, T)
    on the noisy power path comes within 1.5× of the dense path's sin θ:
    the iterations make up for the weaker initialisation."""
    X, reference = spikes
    errors = {}
    for path in ("dense", "noisy_power"):
        errors[path] = np.mean([principal_angle_sin(CoherentPowerPCA(
            3, epsilon=30.0, data_norm=1.0, clip_radius=0.02, n_iter=2, path=path,
            random_state=seed, accountant=BudgetAccountant()).fit(X).components_,
            reference) for seed in range(3)])
    assert errors["noisy_power"] <= 1.5 * errors["dense"] + 0.02
