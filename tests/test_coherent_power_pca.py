"""CoherentPowerPCA: sensitivities, the floor, the accounting, the iteration."""

import math

import numpy as np
import pytest
from sklearn.decomposition import PCA

from sklearn_dppca import BudgetAccountant, CoherentPowerPCA
from sklearn_dppca._base import budget_shares
from sklearn_dppca._coherent_power_pca import (
    AUTO_SHARES,
    preconditioner,
    selection_rdp,
)
from sklearn_dppca._stats import CentredRows, first_pass
from sklearn_dppca.privacy import DEFAULT_ORDERS, rdp_to_epsilon

from .conftest import make_planted
from .test_private_pca import principal_sin

pytestmark = pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")


def unit_rows(X, bound=1.0, mean=None):
    return CentredRows(X, bound, mean, first_pass(X, bound, with_sum=False).sq_norms)


def products(X, W, radius):
    return unit_rows(X).clipped_products(W[:, None, :], [radius])[0][:, 0]


# ---------------------------------------------------------------- sensitivity
def test_clipped_product_sensitivity_approaches_two_r_and_never_exceeds_it():
    """‖Δ Σ a Clip_R(aᵀW)‖_F ≤ 2R; rows nearly equal whose products point in
    opposite directions (W huge across them) come arbitrarily close."""
    R, d = 0.3, 5
    base = np.random.default_rng(0).normal(size=(40, d)) * 0.1
    v = np.eye(2)[0]
    worst = 0.0
    for phi in (0.3, 0.1, 0.01):
        a = np.eye(d)[0]
        b = math.cos(phi) * np.eye(d)[0] + math.sin(phi) * np.eye(d)[1]
        # aᵀW = v, bᵀW ∝ −v: W sends e1 to v and e2 to a huge −v
        W = np.outer(np.eye(d)[0], v) - np.outer(np.eye(d)[1], v) * 1e6
        X1, X2 = base.copy(), base.copy()
        X1[3], X2[3] = a, b
        diff = products(X1, W, R) - products(X2, W, R)
        worst = max(worst, np.linalg.norm(diff) / R)
    assert worst > 1.999 and worst <= 2.0 + 1e-12
    rng = np.random.default_rng(1)
    for trial in range(200):
        W = rng.normal(size=(d, 2)) * rng.choice([0.1, 10.0, 1e4])
        X1, X2 = base.copy(), base.copy()
        X1[3], X2[3] = rng.normal(size=(2, d)) * rng.choice([0.5, 5.0])
        diff = products(X1, W, R) - products(X2, W, R)
        assert np.linalg.norm(diff) <= 2 * R + 1e-12


def test_projected_gram_sensitivity_is_sqrt_two():
    """‖Xᵀ(aaᵀ − bbᵀ)X‖_F reaches √2 for orthonormal X and a, b its columns."""
    X, _ = np.linalg.qr(np.random.default_rng(2).normal(size=(6, 3)))
    a, b = X[:, 0], X[:, 1]
    delta = X.T @ (np.outer(a, a) - np.outer(b, b)) @ X
    assert np.linalg.norm(delta) == pytest.approx(math.sqrt(2.0))


def test_clipping_counts_and_radius(planted):
    X, _ = planted
    W = np.linalg.qr(np.random.default_rng(0).normal(size=(X.shape[1], 2)))[0]
    out, counts = unit_rows(X).clipped_products(
        np.stack([W, W], axis=1), [1e-3, 1e3]
    )
    assert counts[0] > 0.9 * len(X) and counts[1] == 0
    A = X.copy()  # all rows already within the unit ball
    np.testing.assert_allclose(out[:, 1], A.T @ (A @ W), atol=1e-10)


# --------------------------------------------------------------------- floor
@pytest.mark.parametrize("seed", range(10))
def test_floor_makes_the_preconditioner_well_defined(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, 6))
    G = rng.normal(size=(k, k)) * rng.choice([1e-3, 1.0, 1e3])
    H = (G + G.T) / 2 - rng.choice([0.0, 1e3]) * np.eye(k)  # possibly negative
    floor = 0.5
    B = preconditioner(H, floor)
    assert np.all(np.isfinite(B)) and np.allclose(B, B.T)
    values, vectors = np.linalg.eigh(H)
    floored = (vectors * np.maximum(values, floor)) @ vectors.T
    np.testing.assert_allclose(B @ floored @ B, np.eye(k), atol=1e-8)
    assert np.linalg.norm(B, 2) <= floor**-0.5 + 1e-12


# -------------------------------------------------------------- accounting
def test_fixed_fit_spends_exactly_its_budget():
    X, _ = make_planted(3000, 8, seed=1)
    acc = BudgetAccountant(epsilon=1.0)
    pca = CoherentPowerPCA(
        2, epsilon=1.0, data_norm=1.0, clip_radius=0.05, n_iter=3, accountant=acc
    ).fit(X)
    assert pca.privacy_spent_[0] == pytest.approx(1.0, rel=1e-9)
    assert acc.spent[0] == pytest.approx(1.0, rel=1e-9)


@pytest.mark.parametrize("center", [True, False])
def test_automatic_fit_spends_exactly_its_budget_and_matches_dp_accounting(center):
    """The accountant's total equals the direct RDP computation, and Google's
    dp-accounting (RepeatAndSelectDpEvent, geometric = shape 1) agrees."""
    dp = pytest.importorskip("dp_accounting")
    X, _ = make_planted(2000, 6, seed=1)
    acc = BudgetAccountant(epsilon=2.0, delta=1e-6)
    pca = CoherentPowerPCA(
        2, epsilon=2.0, data_norm=1.0, center=center, accountant=acc, random_state=0
    )
    pca.fit(X)
    assert pca.privacy_spent_[0] == pytest.approx(2.0, rel=1e-6)
    assert acc.spent[0] == pytest.approx(2.0, rel=1e-6)

    plan = pca._privacy_plan(len(X), X.shape[1])
    shares = budget_shares(AUTO_SHARES, center)
    extra = plan.extra
    # recover ρ from a share: init μ² = 2 w ρ
    rho = plan.mus["init"] ** 2 / (2 * shares["init"])
    direct = rdp_to_epsilon(selection_rdp(rho, shares, extra["theta"]), 1e-6)[0]
    assert direct == pytest.approx(2.0, rel=1e-6)

    from dp_accounting import dp_event

    gaussian = dp_event.GaussianDpEvent
    outside = [gaussian(1.0 / plan.mus[name]) for name in plan.mus]
    # one trial: T iterations with μ² = 6/Δ² each, Δ = χ√T, i.e. μ² = 6/χ²,
    # then the score with μ = 1/ζ
    trial = dp_event.ComposedDpEvent(
        [gaussian(extra["chi"] / math.sqrt(6.0)), gaussian(extra["zeta"])]
    )
    repeated = dp_event.RepeatAndSelectDpEvent(trial, 1.0 / extra["theta"], 1)
    oracle = dp.rdp.RdpAccountant(orders=list(DEFAULT_ORDERS[DEFAULT_ORDERS > 1.01]))
    oracle.compose(dp_event.ComposedDpEvent(outside + [repeated]))
    theirs = oracle.get_epsilon(1e-6)
    # ours also minimises over λ̂ = 1 in the repetition bound, so ours ≤ theirs
    assert direct <= theirs * (1 + 1e-6)
    assert theirs == pytest.approx(direct, rel=0.05)


# ---------------------------------------------------------------- iteration
def test_without_clipping_and_noise_the_iteration_is_the_block_power_method():
    X, _ = make_planted(3000, 10, seed=3)
    rows = unit_rows(X)
    gram = X.T @ X
    start = np.linalg.qr(np.random.default_rng(0).normal(size=(10, 3)))[0]
    est = CoherentPowerPCA()
    final, _ = est._iterate(
        rows, gram, start, [1e3], [4], [1e-12], [1e-9], np.random.default_rng(1)
    )
    expected = start
    for _ in range(4):
        expected = np.linalg.qr(gram @ expected)[0]
    assert principal_sin(final[0].T, expected) < 1e-8


@pytest.mark.parametrize("auto", [False, True])
def test_large_epsilon_reproduces_sklearn(planted, auto):
    X, _ = planted
    params = {} if auto else {"clip_radius": 0.1, "n_iter": 3}
    ours = CoherentPowerPCA(
        3, epsilon=1e7, data_norm=10.0, random_state=0, **params
    ).fit(X)
    ref = PCA(3, svd_solver="covariance_eigh").fit(X)
    assert principal_sin(ours.components_, ref.components_.T) < 1e-3
    np.testing.assert_allclose(
        ours.explained_variance_, ref.explained_variance_, rtol=1e-3
    )
    np.testing.assert_allclose(ours.transform(X), ref.transform(X), atol=1e-3)


def test_automatic_selection_recovers_planted_subspace(planted):
    X, basis = planted
    pca = CoherentPowerPCA(3, epsilon=3.0, data_norm=1.0, random_state=0).fit(X)
    assert pca.n_trials_ >= 1 and pca.selection_score_ is not None
    assert pca.clip_radius_ > 0 and 1 <= pca.n_iter_ <= 32
    assert principal_sin(pca.components_, basis) < 0.1
    assert 0 <= pca.n_clipped_ <= len(X) + 100


def test_no_gap_returns_the_initialisation():
    """With too little data for the budget, h ≤ 0: the init is the answer."""
    X, _ = make_planted(200, 10, seed=0)
    pca = CoherentPowerPCA(3, epsilon=0.1, data_norm=1.0, random_state=0).fit(X)
    assert pca.n_iter_ == 0 and pca.n_trials_ == 0
    assert principal_sin(pca.components_, pca.init_components_.T) < 1e-10


def test_parallel_blocks_and_verbose_give_the_same_fit(planted, capsys, monkeypatch):
    import sklearn_dppca._stats as stats

    monkeypatch.setattr(stats, "_BLOCK_BYTES", 4096 * 8 * 12)
    monkeypatch.setattr(stats, "_MIN_BLOCK_ROWS", 4096)
    X, _ = planted
    params = dict(epsilon=2.0, data_norm=1.0, random_state=0, max_iter=4)
    one = CoherentPowerPCA(3, n_jobs=1, **params).fit(X)
    two = CoherentPowerPCA(3, n_jobs=2, verbose=1, **params).fit(X)
    np.testing.assert_allclose(one.components_, two.components_, atol=1e-9)
    assert "trial 1/" in capsys.readouterr().err
