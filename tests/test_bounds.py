"""Norm bounds without a guess: data_norm="auto" (a noisy tree) and bounds=."""

import math
import warnings

import numpy as np
import pytest
from scipy import sparse, stats

from sklearn_dppca import (
    BudgetAccountant,
    CoherentPowerPCA,
    ComplexGaussPCA,
    PrivacyLeakWarning,
    PrivatePCA,
    _bounds,
)
from sklearn_dppca._bounds import (
    BINS_PER_OCTAVE,
    BOUND_BUDGET_SHARE,
    choose_bound,
    cumulative_counts,
    cumulative_variances,
    descend_bound,
    norm_grid,
    release_tree,
    tree_levels,
    tree_sensitivity,
)
from sklearn_dppca._stats import _clip_scales, _sq_norms
from sklearn_dppca.audit import (
    audit,
    mean_statistic,
    neighbouring_datasets,
    scatter_statistic,
)
from sklearn_dppca.metrics import principal_angle_sin
from sklearn_dppca.privacy import gdp_mu

# Fits are seeded (never flaky); a seed warns that the fit is not private.
pytestmark = pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")

STEP = 2.0 ** (1.0 / BINS_PER_OCTAVE)


def exact_nodes(counts):
    """The tree's nodes without noise, all levels in one vector."""
    return np.concatenate(release_tree(counts, math.inf, np.random.default_rng(0)))


def leaf_counts(norms, edges):
    n_leaves = 2 ** tree_levels(edges.shape[0])
    X = np.asarray(norms, dtype=float)[:, None]
    return _bounds._norm_counts(X, None, edges**2, n_leaves)


def test_grid_is_geometric_and_covers_the_range():
    edges = norm_grid((1e-3, 1e3))
    assert edges[0] == pytest.approx(1e-3) and edges[-1] == pytest.approx(1e3)
    ratios = edges[1:] / edges[:-1]
    assert np.all(ratios <= STEP * (1 + 1e-12)) and np.allclose(ratios, ratios[0])


@pytest.mark.parametrize("bad", [
    (0.0, 1.0), (2.0, 1.0), (1.0, 1.0), (-1.0, 1.0), (1.0,), (1.0, 2.0, 3.0),
    (math.nan, 1.0), (1.0, math.inf), ("a", 2.0), 5.0, (True, 2.0),
])
def test_bad_norm_range_is_refused_clearly(bad):
    with pytest.raises(ValueError, match="norm_range must be two finite numbers"):
        norm_grid(bad)
    X = np.random.default_rng(0).normal(size=(20, 3))
    acc = BudgetAccountant()
    with pytest.raises(ValueError, match="norm_range"):
        PrivatePCA(data_norm="auto", norm_range=bad, accountant=acc).fit(X)
    assert acc.n_charges == 0


def test_norm_range_beyond_the_dtype_is_refused():
    X = np.ones((20, 3), dtype=np.float32)
    with pytest.raises(ValueError, match="too large for float32"):
        PrivatePCA(data_norm="auto", norm_range=(1.0, 1e20)).fit(X)


def test_tree_sensitivity_on_rows_moving_between_extreme_bins():
    """A row moving from the first to the last bin changes every level by √2."""
    edges = norm_grid((1.0, 2.0**10))  # 41 bins, 64 leaves, 6 levels
    levels = tree_levels(edges.shape[0])
    rng = np.random.default_rng(1)
    rest = rng.uniform(0.5, 2.0**11, size=200)
    for moved in [(0.0, 1e30), (1.0, 2.0**10), (0.0, 1.0 + 1e-9)]:
        a = exact_nodes(leaf_counts(np.r_[rest, moved[0]], edges))
        b = exact_nodes(leaf_counts(np.r_[rest, moved[1]], edges))
        distance = np.linalg.norm(a - b)
        assert distance <= tree_sensitivity(levels) + 1e-12
    # the extreme bins share no node below the root: the bound is attained
    a = exact_nodes(leaf_counts(np.r_[rest, 0.0], edges))
    b = exact_nodes(leaf_counts(np.r_[rest, 1e30], edges))
    assert np.linalg.norm(a - b) == pytest.approx(math.sqrt(2 * levels))
    # random replacements never exceed it
    for _ in range(200):
        x, y = rng.uniform(0, 2.0**11, size=2)
        a = exact_nodes(leaf_counts(np.r_[rest, x], edges))
        b = exact_nodes(leaf_counts(np.r_[rest, y], edges))
        assert np.linalg.norm(a - b) <= tree_sensitivity(levels) + 1e-12


def test_norms_of_zero_and_beyond_the_grid_land_in_the_end_bins():
    edges = norm_grid((1.0, 100.0))
    counts = leaf_counts([0.0, 0.5, 1.0, 100.0, 101.0, 1e300], edges)
    assert counts[0] == 3 and counts[edges.shape[0] - 1] == 3
    assert counts.sum() == 6
    # a row whose squared norm overflows is in the last bin too
    X = np.array([[1e200, 1e200], [0.0, 0.0]])
    n_leaves = 2 ** tree_levels(edges.shape[0])
    got = _bounds._norm_counts(X, None, edges**2, n_leaves)
    assert got[0] == 1 and got[edges.shape[0] - 1] == 1


def test_cumulative_counts_are_exact_without_noise():
    rng = np.random.default_rng(2)
    counts = rng.integers(0, 50, size=64)
    levels = release_tree(counts, math.inf, rng)
    np.testing.assert_allclose(
        cumulative_counts(levels, counts.sum()), np.cumsum(counts)
    )


def test_release_noise_matches_the_plan():
    """Every node carries N(0, σ²), σ = √(2L)/μ; cumulative errors ≤ σ√L."""
    rng = np.random.default_rng(3)
    counts = np.zeros(32)
    mu = 0.5
    sigma = tree_sensitivity(5) / mu
    draws = np.array([np.concatenate(release_tree(counts, mu, rng))
                      for _ in range(400)])
    assert draws.shape[1] == 16 + 8 + 4 + 2 + 32 - 32 + 32  # 62 nodes
    var = draws.var(axis=0, ddof=1).mean()
    # the mean of 62 sample variances of 400 draws: 1.5% relative std
    assert var == pytest.approx(sigma**2, rel=0.08)
    assert abs(draws.mean()) < 5 * sigma / math.sqrt(draws.size)
    errors = np.array([
        cumulative_counts(release_tree(counts, mu, rng), 0.0) for _ in range(300)
    ])
    assert np.all(errors.std(axis=0) <= sigma * math.sqrt(5) * 1.15)


def test_choose_bound_takes_the_first_crossing_and_falls_back_to_the_last_bin():
    edges = np.array([1.0, 2.0, 4.0, 8.0])
    assert choose_bound(edges, np.array([1, 5, 9, 10, 10, 10.0]), 9) == 2
    assert choose_bound(edges, np.array([1, 2, 3, 4, 20, 20.0]), 9) == 3


def test_descent_finds_a_tight_cluster_and_gives_up_on_a_drowned_tree():
    """The mean steps' reader: a node of the data's norms, or None if unsure."""
    edges = norm_grid((1e-8, 1e12))
    n_leaves = 2 ** tree_levels(edges.shape[0])
    counts = leaf_counts(np.full(400, 300.0), edges)  # every row in one bin
    where = int(np.flatnonzero(counts)[0])
    rng = np.random.default_rng(11)
    for mu, found in ((0.07, 0), (0.01, 0)):
        sigma = tree_sensitivity(tree_levels(edges.shape[0])) / mu
        hits = 0
        for _ in range(40):
            levels = release_tree(counts, mu, rng)
            estimates = cumulative_counts(levels, 400)
            sds = sigma * np.sqrt(cumulative_variances(levels))
            j = descend_bound(edges, estimates, sds, 200.0)
            if j is None:
                continue
            hits += 1
            # the node it stops in holds the data's bin and spans ≤ 16 leaves
            assert abs(j - where) < 16
            found += abs(j - where) <= 8
        if mu == 0.07:  # n/σ ≈ 7: the tree is read, and near the data
            assert hits >= 30 and found >= 30
        else:  # n/σ ≈ 1: drowned, the first crossing is kept
            assert hits <= 4
    # variances: 0 for the whole range, ht/(h + t) ≤ L/2 elsewhere
    var = cumulative_variances(release_tree(counts, 1.0, rng))
    assert var[-1] == 0 and var.shape == (n_leaves,)
    assert np.all(var[:-1] > 0) and np.all(var <= tree_levels(n_leaves) / 2)


def test_mean_steps_move_on_a_small_shifted_dataset():
    """442 rows shifted by 100: the first crossing stalled the mean at 0."""
    from sklearn_dppca.datasets import load_real_dataset

    X = load_real_dataset("diabetes").data
    for seed in range(3):
        pca = PrivatePCA(2, epsilon=3.0, delta=1e-6, data_norm="auto",
                         accountant=BudgetAccountant(), random_state=seed).fit(X + 100)
        assert np.linalg.norm(pca.mean_ - X.mean(axis=0) - 100) < 3.0
        assert pca.data_norm_ < 10.0


@pytest.mark.parametrize("quantile", [0.5, 0.9, 1.0])
def test_bound_is_within_one_grid_step_of_the_quantile_at_large_epsilon(quantile):
    rng = np.random.default_rng(4)
    X = rng.standard_t(3, size=(3000, 4)) * 5.0  # heavy-tailed norms
    norms = np.linalg.norm(X, axis=1)
    true = np.quantile(norms, quantile, method="inverted_cdf")
    pca = PrivatePCA(2, epsilon=1e5, data_norm="auto", norm_quantile=quantile,
                     center=False, accountant=BudgetAccountant(), random_state=0).fit(X)
    assert true / STEP <= pca.data_norm_ <= true * STEP**2
    frac = np.mean(norms > pca.data_norm_)
    assert pca.clipped_fraction_ == pytest.approx(frac, abs=0.01)


def test_rows_of_norm_zero_and_beyond_the_grid():
    X = np.zeros((200, 3))
    pca = PrivatePCA(1, epsilon=1e4, data_norm="auto", norm_range=(0.1, 10.0),
                     accountant=BudgetAccountant(), random_state=0).fit(X)
    assert pca.data_norm_ == pytest.approx(0.1)
    assert np.all(np.isfinite(pca.components_))
    X = np.full((200, 3), 1e8)
    X[::2] *= -1
    pca = PrivatePCA(1, epsilon=1e4, data_norm="auto", norm_range=(0.1, 10.0),
                     accountant=BudgetAccountant(), random_state=0).fit(X)
    assert pca.data_norm_ == pytest.approx(10.0)


class Recorder:
    """Records the σ of every Gaussian draw of a fit (through noise.dense_noise)."""

    def __init__(self, monkeypatch):
        self.calls = []
        original = _bounds.dense_noise

        def spy(rng, shape, sigma):
            self.calls.append((shape, sigma))
            return original(rng, shape, sigma)

        monkeypatch.setattr(_bounds, "dense_noise", spy)


@pytest.mark.parametrize("center", [True, False])
def test_whole_fit_spends_exactly_the_request_in_one_charge(monkeypatch, center):
    """The μ of every release (from its σ and sensitivity) composes to μ*."""
    record = Recorder(monkeypatch)
    import sklearn_dppca._private_pca as module

    covariance = []
    original = module.goe_noise

    def goe_spy(rng, d, sigma):
        covariance.append(sigma)
        return original(rng, d, sigma)

    monkeypatch.setattr(module, "goe_noise", goe_spy)
    rng = np.random.default_rng(5)
    X = rng.normal(size=(500, 3)) + 40.0
    acc = BudgetAccountant(epsilon=2.0, delta=1e-6)
    pca = PrivatePCA(2, epsilon=2.0, delta=1e-6, data_norm="auto",
                     norm_range=(0.5, 500.0), center=center, accountant=acc,
                     random_state=0).fit(X)
    assert acc.n_charges == 1
    assert acc.spent == pytest.approx((2.0, 1e-6), rel=1e-9)
    assert pca.privacy_spent_ == pytest.approx((2.0, 1e-6), rel=1e-9)
    levels = tree_levels(norm_grid((0.5, 500.0)).shape[0])
    mu_sq, radii = 0.0, []
    for shape, sigma in record.calls:
        if shape == 2**levels:  # a tree's leaves: one μ for its L levels
            mu_sq += (tree_sensitivity(levels) / sigma) ** 2
        elif shape == 3:  # a mean step: sensitivity 2·radius
            radii.append(sigma)
    n_trees = len(_bounds.MEAN_STEPS) + 1 if center else 1
    assert sum(shape == 2**levels for shape, _ in record.calls) == n_trees
    assert len(radii) == (len(_bounds.MEAN_STEPS) if center else 0)
    mu_star = gdp_mu(2.0, 1e-6)
    assert mu_sq == pytest.approx(BOUND_BUDGET_SHARE * mu_star**2, rel=1e-9)
    # the covariance's noise uses the released bound, at its scaled share
    (sigma_cov,) = covariance
    mu_cov = math.sqrt(2.0) * pca.data_norm_**2 / sigma_cov
    plan = pca._privacy_plan(500, 3)
    expected = plan.mus["covariance"] * math.sqrt(1 - BOUND_BUDGET_SHARE)
    assert mu_cov == pytest.approx(expected, rel=1e-9)


def test_rdp_plan_refuses_auto_before_any_charge():
    X = np.random.default_rng(6).normal(size=(100, 4))
    acc = BudgetAccountant()
    with pytest.raises(ValueError, match='data_norm="auto" composes exactly only'):
        CoherentPowerPCA(2, data_norm="auto", selection="repetition",
                         accountant=acc).fit(X)
    assert acc.n_charges == 0


@pytest.mark.parametrize("make", [
    lambda: PrivatePCA(2),
    lambda: ComplexGaussPCA(2),
    lambda: CoherentPowerPCA(2, clip_radius=1.0, n_iter=2),
    lambda: CoherentPowerPCA(2),  # the default automatic mode is exact GDP too
])
def test_every_estimator_fits_with_auto(make):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(2000, 5)) * [5, 3, 1, 1, 1]
    est = make().set_params(epsilon=50.0, data_norm="auto",
                            accountant=BudgetAccountant(), random_state=0).fit(X)
    true = np.eye(5)[:2]
    assert principal_angle_sin(est.components_, true) < 0.3
    assert 2.0 < est.data_norm_ < 20.0 and est.mean_norm_ > 0


def test_auto_on_a_shifted_copy_fits_as_well():
    """The mean's steps lose the offset: X + 2000 is fitted with X's bound."""
    rng = np.random.default_rng(8)
    X = rng.normal(size=(20000, 6)) * [4, 2, 1, 1, 1, 1]
    true = np.eye(6)[:2]
    errors = {}
    for shift in (0.0, 2000.0):
        pca = PrivatePCA(2, epsilon=3.0, data_norm="auto",
                         accountant=BudgetAccountant(), random_state=0).fit(X + shift)
        errors[shift] = principal_angle_sin(pca.components_, true)
        assert pca.data_norm_ < 20.0
        np.testing.assert_allclose(pca.mean_, shift, atol=0.5)
    assert errors[2000.0] < 0.1 and errors[0.0] < 0.1


def test_auto_with_a_dask_array_matches_numpy():
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(9)
    X = rng.normal(size=(3000, 4)) + 10.0
    kw = dict(epsilon=5.0, data_norm="auto", random_state=0)
    with pytest.warns(PrivacyLeakWarning):  # the fixed seed
        a = PrivatePCA(2, **kw, accountant=BudgetAccountant()).fit(X)
        b = PrivatePCA(2, **kw, accountant=BudgetAccountant()).fit(
            da.from_array(X, chunks=(700, 4)))
    assert a.data_norm_ == b.data_norm_ and a.mean_norm_ == b.mean_norm_
    np.testing.assert_allclose(a.mean_, b.mean_, rtol=1e-9)
    np.testing.assert_allclose(a.components_, b.components_, atol=1e-8)


# --------------------------------------------------------------- the box
def test_box_clips_rows_and_gives_the_bound_without_a_leak():
    rng = np.random.default_rng(10)
    X = rng.uniform(0, 16, size=(1000, 4))
    X[0] = [1e6, -1e6, 3, 3]  # outside the box: clipped into it
    before = X.copy()
    with warnings_as_errors():  # no seed here: a seed warns
        pca = PrivatePCA(2, epsilon=1e4, bounds=(0, 16),
                         accountant=BudgetAccountant()).fit(X)
    np.testing.assert_array_equal(X, before)  # the caller's array is untouched
    assert pca.data_norm_ == pytest.approx(math.sqrt(4) * 8.0)
    assert pca.mean_norm_ == pytest.approx(16.0)
    clipped = np.clip(X, 0, 16)
    np.testing.assert_allclose(pca.mean_, clipped.mean(0), atol=0.01)


def test_box_per_feature_and_given_data_norm():
    rng = np.random.default_rng(11)
    lower, upper = np.array([0.0, -1.0, 10.0]), np.array([2.0, 1.0, 30.0])
    X = rng.uniform(lower, upper, size=(500, 3))
    pca = PrivatePCA(2, epsilon=1e4, bounds=(lower, upper), data_norm=12.0,
                     accountant=BudgetAccountant(), random_state=0).fit(X)
    assert pca.data_norm_ == 12.0
    assert pca.mean_norm_ == pytest.approx(math.sqrt(102))  # min(box radius, 12)
    np.testing.assert_allclose(pca.mean_, X.mean(0), atol=0.05)
    pca.set_params(data_norm=5.0).fit(X)
    assert pca.mean_norm_ == 5.0
    # without centring the box is measured around 0
    pca = PrivatePCA(2, epsilon=1e4, bounds=(lower, upper), center=False,
                     accountant=BudgetAccountant(), random_state=0).fit(X)
    assert pca.data_norm_ == pytest.approx(math.sqrt(4 + 1 + 900))
    np.testing.assert_array_equal(pca.mean_, 0.0)


def test_box_with_auto_bounds_the_centred_rows():
    rng = np.random.default_rng(12)
    X = 2000.0 + rng.normal(size=(3000, 3)) * [3, 1, 1]
    pca = PrivatePCA(1, epsilon=1e3, bounds=(1900, 2100), data_norm="auto",
                     norm_quantile=1.0, accountant=BudgetAccountant(),
                     random_state=0).fit(X)
    centred = np.linalg.norm(X - X.mean(0), axis=1).max()
    assert centred / STEP <= pca.data_norm_ <= centred * STEP**2
    assert principal_angle_sin(pca.components_, np.eye(3)[:1]) < 0.1


def test_box_on_sparse_input():
    rng = np.random.default_rng(13)
    dense = rng.uniform(-1, 3, size=(400, 5)) * (rng.random((400, 5)) < 0.3)
    kw = dict(epsilon=1e4, accountant=BudgetAccountant(), center=False,
              random_state=0)
    with pytest.warns(PrivacyLeakWarning):  # the fixed seed: same noise
        a = PrivatePCA(2, bounds=(-0.5, 2.0), **kw).fit(sparse.csr_matrix(dense))
        b = PrivatePCA(2, bounds=(-0.5, 2.0), **kw).fit(dense)
    np.testing.assert_allclose(a.components_, b.components_, atol=1e-9)
    c = PrivatePCA(2, bounds=(0.5, 2.0), epsilon=1e4, random_state=0,
                   accountant=BudgetAccountant()).fit(sparse.csr_matrix(dense))
    assert c.data_norm_ == pytest.approx(math.sqrt(5) * 0.75)


@pytest.mark.parametrize("bad, match", [
    ((1, 2, 3), "pair"),
    ((np.zeros(2), np.ones(3)), "length"),
    ((1.0, 0.0), "lower must be <="),
    ((1.0, 1.0), "at least one feature"),
    ((0.0, math.inf), "finite"),
])
def test_bad_bounds_are_refused_before_any_charge(bad, match):
    X = np.ones((20, 3))
    acc = BudgetAccountant()
    with pytest.raises(ValueError, match=match):
        PrivatePCA(bounds=bad, accountant=acc).fit(X)
    assert acc.n_charges == 0


def test_huge_boxes_and_estimates_are_refused_clearly():
    X = np.r_[np.full((3, 4), 1e250), np.eye(4)]
    for params in ({"data_norm": None}, {"bounds": (-1e200, 1e200)}):
        with pytest.raises(ValueError, match="too large for float64"):
            PrivatePCA(accountant=BudgetAccountant(), **params).fit(X)


def test_none_warns_and_points_to_auto():
    X = np.random.default_rng(14).normal(size=(50, 3))
    with pytest.warns(PrivacyLeakWarning, match='data_norm="auto"'):
        PrivatePCA(accountant=BudgetAccountant()).fit(X)


# ------------------------------------------------------------- the audit
@pytest.mark.parametrize("statistic", [mean_statistic(0), scatter_statistic])
def test_audit_of_auto_never_beats_its_claim(statistic):
    """The whole "auto" pipeline on neighbours that move a row across the grid."""
    X, Y = neighbouring_datasets(400, 3, kind="opposite", scale=0.5)
    est = PrivatePCA(epsilon=1.0, delta=1e-5, data_norm="auto",
                     norm_range=(0.1, 2.0))
    result = audit(est, X, Y, statistic, n_fits=300, random_state=15)
    assert result.epsilon_lower <= 1.0


def test_audit_of_the_tree_alone_attains_its_mu():
    """A leaf of the tree on extreme neighbours: the Gaussian test finds ≤ μ."""
    edges = norm_grid((1.0, 16.0))
    n_leaves = 2 ** tree_levels(edges.shape[0])
    rest = np.linspace(1, 16, 100)
    a = leaf_counts(np.r_[rest, 0.0], edges)
    b = leaf_counts(np.r_[rest, 1e9], edges)
    mu = 1.0
    rng = np.random.default_rng(16)
    sa = np.array([release_tree(a, mu, rng)[0][0] for _ in range(2000)])
    sb = np.array([release_tree(b, mu, rng)[0][0] for _ in range(2000)])
    sigma = tree_sensitivity(tree_levels(n_leaves)) / mu
    # one leaf moves by 1: its own μ is 1/σ, at most the tree's μ
    t = stats.ttest_ind(sa, sb)
    assert t.pvalue < 1e-6
    assert abs(sa.mean() - sb.mean()) / sigma <= mu


class warnings_as_errors:
    """No warning at all may be raised inside (a box needs no data_norm)."""

    def __enter__(self):
        import warnings

        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("error")

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)


# ------------------------------------- rows far from the origin (review)
def _fit_quietly(estimator, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)  # the fixed seed
        return estimator.fit(X)


@pytest.mark.parametrize("offset, seed", [(1e8, 0), (1e9, 1)])
def test_auto_bound_clips_rows_far_from_the_origin(offset, seed, monkeypatch):
    """data_norm="auto" moves the private mean onto the data (MEAN_STEPS).
    Clipping around it with ‖x − m‖² = ‖x‖² − 2x·m + ‖m‖² (_stats._clip_scales)
    cancels catastrophically when ‖m‖ ≫ C, so rows would escape the bound
    every sensitivity (√2 C², 2C, 2R) is calibrated for; the trees' binning
    with the same expansion collapsed the bound to the grid's bottom. The
    bounds step now centres its trees and mean steps explicitly and moves the
    origin to a far private mean (FAR_MEAN) before the covariance pass: the
    rows the Gram matrix sees, clipped as the engine clips them, stay within
    data_norm_, and the fit finds the principal axes."""
    import sklearn_dppca._bounds as bounds_module

    seen = {}
    release = bounds_module.NormBounds.release

    def spy(self, plan, rng):
        out = release(self, plan, rng)
        seen["rows"], seen["mean"] = self.data, out[0]
        return out

    monkeypatch.setattr(bounds_module.NormBounds, "release", spy)
    rng = np.random.default_rng(seed)
    n, d = 20_000, 4
    X = offset / np.sqrt(d) + rng.normal(size=(n, d)) * [3.0, 2.0, 1.0, 1.0]
    pca = _fit_quietly(
        PrivatePCA(2, epsilon=5.0, data_norm="auto", random_state=1,
                   accountant=BudgetAccountant()), X
    )
    bound = pca.data_norm_
    assert 1.0 < bound < 10.0  # around the median centred norm, not collapsed
    rows, mean = seen["rows"].X, seen["mean"]
    # the clipping of the covariance pass, as the engine computes it
    scale = _clip_scales(rows, _sq_norms(rows), bound, mean)
    effective = np.linalg.norm(rows - mean, axis=1) * scale
    assert effective.max() <= bound * (1 + 1e-9)
    # the top axes are the first two coordinates (variances 9 and 4)
    top = np.abs(pca.components_[:, :2]).sum(axis=1)
    assert (top > 0.95).all()
