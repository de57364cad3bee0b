"""PrivatePCA (and the interface it shares): sensitivity, calibration, utility,
sklearn parity and bad input."""

import functools
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import sparse, stats
from sklearn.base import clone
from sklearn.decomposition import PCA
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_dppca import (
    BudgetAccountant,
    CoherentPowerPCA,
    ComplexGaussPCA,
    PrivacyLeakWarning,
    PrivatePCA,
    SolverParameterWarning,
)
from sklearn_dppca._base import MEAN_BUDGET_SHARE
from sklearn_dppca._stats import clipped_gram, first_pass
from sklearn_dppca.privacy import gdp_mu

from .conftest import make_planted

pytestmark = pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")

# Utility and sklearn parity are tested on the one-shot mechanisms here (and the
# subspace variant of ComplexGaussPCA); the
# shared interface on every estimator (CoherentPowerPCA with fixed (R, T), fast).
SubspaceGauss = functools.partial(ComplexGaussPCA, target="subspace")
SubspaceGauss.__name__ = "ComplexGaussPCA"
ESTIMATORS = [PrivatePCA, ComplexGaussPCA, SubspaceGauss]


def FixedPower(n_components=1, **params):
    """CoherentPowerPCA with fixed (R, T), of one component unless given
    (with every component its iterations are refused)."""
    return CoherentPowerPCA(n_components, **{"clip_radius": 0.1, "n_iter": 2, **params})


FixedPower.__name__ = "CoherentPowerPCA"
INTERFACE = ESTIMATORS + [FixedPower]


def principal_sin(estimate, truth):
    """Largest principal angle's sine between row-space ``estimate`` and ``truth``."""
    residual = truth - estimate.T @ (estimate @ truth)
    return np.linalg.norm(residual, 2)


def symmetric_coordinates(S):
    """Coordinates of symmetric S in the orthonormal basis {E_ii, (E_ij+E_ji)/√2}."""
    upper = np.triu_indices(S.shape[0], 1)
    return np.r_[np.diag(S), math.sqrt(2.0) * S[upper]]


# ---------------------------------------------------------------- sensitivity
def neighbours(a, b, seed=0, n=50, d=6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 0.3
    X1, X2 = X.copy(), X.copy()
    X1[7], X2[7] = a, b
    return X1, X2


def gram_of(X, bound, mean=None):
    return clipped_gram(X, bound, mean)[0]


@pytest.mark.parametrize(
    "a, b, expected",
    [
        (np.eye(6)[0], np.eye(6)[1], math.sqrt(2.0)),  # orthogonal unit rows
        (np.eye(6)[0] * 50.0, np.eye(6)[1] * 9.0, math.sqrt(2.0)),  # clipped first
        (np.eye(6)[0], -np.eye(6)[0], 0.0),  # a = −b: same outer product
    ],
)
def test_gram_sensitivity_on_adversarial_rows(a, b, expected):
    """‖ΔΣyyᵀ‖_F reaches √2 C² at orthogonal boundary rows and never exceeds it."""
    X1, X2 = neighbours(a, b)
    diff = gram_of(X1, 1.0) - gram_of(X2, 1.0)
    assert np.linalg.norm(diff) == pytest.approx(expected, abs=1e-12)


def test_sum_sensitivity_is_two_at_opposite_rows():
    """‖ΔΣ clip(x)‖ reaches 2C for a = −b (the mean's sensitivity)."""
    X1, X2 = neighbours(np.eye(6)[0] * 5, -np.eye(6)[0] * 5)
    s1 = first_pass(X1, 1.0).clipped_sum
    s2 = first_pass(X2, 1.0).clipped_sum
    assert np.linalg.norm(s1 - s2) == pytest.approx(2.0, abs=1e-12)


def test_gram_sensitivity_bound_holds_for_random_and_centred_pairs():
    """Over many random replacements (any scale, any centre) ‖ΔG‖_F ≤ √2 C²."""
    rng = np.random.default_rng(1)
    worst = 0.0
    for trial in range(300):
        a, b = rng.normal(size=(2, 6)) * rng.choice([0.1, 1.0, 30.0], size=(2, 1))
        X1, X2 = neighbours(a, b, seed=trial)
        mean = rng.normal(size=6) * 0.3 if trial % 2 else None
        bound = 2.0
        diff = gram_of(X1, bound, mean) - gram_of(X2, bound, mean)
        worst = max(worst, np.linalg.norm(diff) / bound**2)
    assert worst <= math.sqrt(2.0) + 1e-9
    assert worst > 1.2  # the search does get near the bound


# --------------------------------------------------------------- calibration
def released_matrix(pca):
    """Reconstruct the released noisy scatter matrix from a k = d fit (its
    eigenvalues are ``noisy_variance_``; ``explained_variance_`` is their
    de-noised estimate)."""
    variance = pca.noisy_variance_ * (pca.n_samples_ - 1)
    return (pca.components_.T * variance) @ pca.components_


@pytest.mark.parametrize("center", [False, True])
def test_covariance_noise_is_calibrated(center):
    """The released matrix minus the exact statistic has i.i.d. N(0, σ²) coordinates.

    σ = √2 C² / μ_cov with μ_cov = μ* (or √0.9 μ* with centring), μ* = gdp_mu(ε, δ).
    Data with a large spectrum keeps the noisy matrix positive definite, so the
    k = d fit releases it exactly.
    """
    rng = np.random.default_rng(3)
    d, n, bound, eps, delta = 8, 4000, 2.0, 0.5, 1e-5
    X = rng.normal(size=(n, d)) * 0.5
    share = 1.0 - MEAN_BUDGET_SHARE if center else 1.0
    sigma = math.sqrt(2.0) * bound**2 / (gdp_mu(eps, delta) * math.sqrt(share))
    coords, mean_errors = [], []
    for seed in range(40):
        pca = PrivatePCA(
            epsilon=eps, delta=delta, data_norm=bound, center=center, random_state=seed
        ).fit(X)
        exact = gram_of(X, bound, pca.mean_ if center else None)
        coords.append(symmetric_coordinates(released_matrix(pca) - exact))
        mean_errors.append(pca.mean_ - first_pass(X, bound).clipped_sum / n)
    z = np.concatenate(coords) / sigma
    assert stats.kstest(z, "norm").pvalue > 1e-3
    # variance within a chi-square interval with margin (1440 coordinates)
    assert abs(z.var() - 1.0) < 5 * math.sqrt(2.0 / z.size)
    if center:
        sigma_mean = 2.0 * bound / (gdp_mu(eps, delta) * math.sqrt(MEAN_BUDGET_SHARE))
        zm = np.concatenate(mean_errors) * n / sigma_mean
        assert stats.kstest(zm, "norm").pvalue > 1e-3
    else:
        assert not np.any(np.concatenate(mean_errors)[:0])


def test_privacy_spent_is_the_requested_budget():
    X, _ = make_planted(500, 5, seed=0)
    for center in (True, False):
        pca = PrivatePCA(epsilon=0.7, delta=1e-7, data_norm=1.0, center=center).fit(X)
        eps, delta = pca.privacy_spent_
        assert eps == pytest.approx(0.7, rel=1e-9) and delta == 1e-7


# ------------------------------------------------------------------- utility
@pytest.mark.parametrize("Est", ESTIMATORS)
def test_recovers_planted_subspace_at_epsilon_one(Est):
    """ε = 1 on 100 000 rows recovers a planted 3-D subspace (sin θ ≪ 1).

    Theory: sin θ ≈ √d σ / (n (λ_3 − λ_4)) ≈ 0.003 here; we allow 10×.
    """
    X, basis = make_planted(n=100_000, d=20, seed=4)
    pca = Est(n_components=3, epsilon=1.0, data_norm=1.0, random_state=0).fit(X)
    assert principal_sin(pca.components_, basis) < 0.03
    assert pca.explained_variance_ratio_.sum() > 0.5


def test_error_shrinks_like_one_over_epsilon():
    """Averaged over seeds, sin θ at ε = 0.1 is several times that at ε = 1."""
    X, basis = make_planted(n=5000, d=20, seed=5)
    errors = {}
    for eps in (0.1, 1.0):
        errors[eps] = np.mean(
            [
                principal_sin(
                    PrivatePCA(3, epsilon=eps, data_norm=1.0, random_state=s)
                    .fit(X)
                    .components_,
                    basis,
                )
                for s in range(10)
            ]
        )
    assert errors[0.1] > 3 * errors[1.0]


@pytest.mark.parametrize("Est", ESTIMATORS)
def test_large_epsilon_reproduces_sklearn(Est, planted):
    """At ε = 1e7 every attribute matches PCA(svd_solver='covariance_eigh')."""
    X, _ = planted
    ours = Est(3, epsilon=1e7, data_norm=10.0, random_state=0).fit(X)
    ref = PCA(3, svd_solver="covariance_eigh").fit(X)
    np.testing.assert_allclose(ours.components_, ref.components_, atol=1e-3)
    spectrum = ("explained_variance_", "explained_variance_ratio_", "singular_values_")
    for name in spectrum:
        np.testing.assert_allclose(getattr(ours, name), getattr(ref, name), rtol=1e-3)
    np.testing.assert_allclose(ours.mean_, ref.mean_, atol=1e-4)
    assert ours.noise_variance_ == pytest.approx(ref.noise_variance_, rel=1e-2)
    np.testing.assert_allclose(ours.transform(X), ref.transform(X), atol=1e-3)
    assert ours.score(X) == pytest.approx(ref.score(X), rel=1e-3)
    np.testing.assert_allclose(ours.get_covariance(), ref.get_covariance(), atol=1e-5)


# ---------------------------------------------------------------- interface
@pytest.mark.parametrize("Est", INTERFACE)
def test_invariants(Est, planted):
    X, _ = planted
    pca = Est(5, epsilon=1.0, data_norm=1.0, random_state=0).fit(X)
    C = pca.components_
    np.testing.assert_allclose(C @ C.T, np.eye(5), atol=1e-12)
    assert np.all(np.diff(pca.explained_variance_) <= 0)
    on_span = pca.mean_ + np.random.default_rng(0).normal(size=(30, 5)) @ C
    np.testing.assert_allclose(pca.inverse_transform(pca.transform(on_span)), on_span)
    np.testing.assert_allclose(
        pca.get_covariance() @ pca.get_precision(), np.eye(X.shape[1]), atol=1e-8
    )
    white = Est(5, whiten=True, data_norm=1.0, random_state=0).fit(X)
    np.testing.assert_allclose(
        white.inverse_transform(white.transform(on_span)), on_span, atol=1e-10
    )
    # the planted directions (the others hold noise-inflated variances)
    np.testing.assert_allclose(white.transform(X).std(0)[:3], 1.0, rtol=0.05)


@pytest.mark.parametrize("Est", ESTIMATORS)
def test_n_components_options(Est, planted):
    X, _ = planted
    assert Est(data_norm=1.0).fit(X).n_components_ == X.shape[1]
    assert Est(data_norm=1.0).fit(X[:5]).n_components_ == 5  # min(n, d)
    pca = Est(0.6, epsilon=5.0, data_norm=1.0, random_state=0).fit(X)
    ratios = pca.explained_variance_ratio_
    assert ratios.sum() > 0.6 and ratios[:-1].sum() <= 0.6
    full = Est(epsilon=5.0, data_norm=1.0, random_state=0).fit(X)
    assert full.explained_variance_ratio_.sum() == pytest.approx(1.0)
    assert full.noise_variance_ == 0.0


@pytest.mark.parametrize("Est", INTERFACE)
def test_fixed_seed_is_reproducible_and_none_is_not(Est, planted):
    X, _ = planted
    a = Est(3, data_norm=1.0, random_state=7).fit(X).components_
    b = Est(3, data_norm=1.0, random_state=7).fit(X).components_
    c = Est(3, epsilon=0.1, data_norm=1.0).fit(X).explained_variance_
    d = Est(3, epsilon=0.1, data_norm=1.0).fit(X).explained_variance_
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(c, d)


@pytest.mark.parametrize("Est", INTERFACE)
def test_pandas_in_and_out(Est, planted):
    X, _ = planted
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    pca = Est(2, data_norm=1.0).set_output(transform="pandas").fit(frame)
    out = pca.transform(frame)
    assert isinstance(out, pd.DataFrame)
    prefix = Est.__name__.lower()
    assert list(out.columns) == [f"{prefix}0", f"{prefix}1"]
    assert list(pca.feature_names_in_) == list(frame.columns)
    np.testing.assert_array_equal(pca.get_feature_names_out(), out.columns)


@pytest.mark.parametrize("Est", INTERFACE)
def test_float32_in_float32_out(Est, planted):
    X, _ = planted
    pca = Est(3, data_norm=1.0).fit(X.astype(np.float32))
    assert pca.transform(X.astype(np.float32)).dtype == np.float32
    for name in ("components_", "explained_variance_", "mean_", "singular_values_"):
        assert getattr(pca, name).dtype == np.float32


@pytest.mark.parametrize("Est", INTERFACE)
def test_sparse_equals_dense_with_the_same_seed(Est, planted):
    X, _ = planted
    X = np.where(np.abs(X) > 0.1, X, 0.0)
    dense = Est(3, data_norm=0.5, random_state=0).fit(X)
    for fmt in (sparse.csr_matrix, sparse.csc_matrix, sparse.csr_array):
        sp = Est(3, data_norm=0.5, random_state=0).fit(fmt(X))
        np.testing.assert_allclose(sp.components_, dense.components_, atol=1e-9)
        np.testing.assert_allclose(sp.transform(fmt(X)), dense.transform(X), atol=1e-9)


@pytest.mark.parametrize("Est", INTERFACE)
def test_clipping_is_applied(Est):
    """A row far beyond data_norm acts exactly like the same row clipped to it."""
    X, _ = make_planted(2000, 6, seed=2)
    far, clipped = X.copy(), X.copy()
    far[0] = X[0] / np.linalg.norm(X[0]) * 1e6
    clipped[0] = X[0] / np.linalg.norm(X[0])
    fits = [
        Est(3, data_norm=1.0, center=False, random_state=0).fit(Z)
        for Z in (far, clipped)
    ]
    np.testing.assert_allclose(fits[0].components_, fits[1].components_, atol=1e-10)
    np.testing.assert_allclose(
        fits[0].explained_variance_, fits[1].explained_variance_, rtol=1e-10
    )


@pytest.mark.parametrize("Est", INTERFACE)
def test_grid_search_without_scorer(Est, planted):
    X, _ = planted
    acc = BudgetAccountant()
    search = GridSearchCV(
        Est(data_norm=1.0, accountant=acc), {"n_components": [1, 3]}, cv=3
    ).fit(X)
    assert search.best_params_["n_components"] == 3
    assert acc.n_charges == 7
    pipe = make_pipeline(StandardScaler(), Est(2, data_norm=5.0)).fit(X)
    assert pipe.transform(X).shape == (len(X), 2)


# ---------------------------------------------------------------- warnings
@pytest.mark.filterwarnings("error::sklearn_dppca.PrivacyLeakWarning")
@pytest.mark.parametrize("Est", INTERFACE)
def test_private_configuration_raises_no_leak_warning(Est, planted):
    X, _ = planted
    Est(2, data_norm=1.0).fit(X)


@pytest.mark.filterwarnings("default::sklearn_dppca.PrivacyLeakWarning")
@pytest.mark.parametrize("Est", INTERFACE)
def test_unsafe_configurations_warn(Est, planted):
    X, _ = planted
    with pytest.warns(PrivacyLeakWarning, match="NOT differentially private"):
        pca = Est(2).fit(X)
    assert pca.data_norm is None
    assert pca.data_norm_ == pytest.approx(np.linalg.norm(X, axis=1).max())
    with pytest.warns(PrivacyLeakWarning, match="random_state"):
        Est(2, data_norm=1.0, random_state=0).fit(X)


# --------------------------------------------------------------- bad input
GOOD = np.random.default_rng(0).normal(size=(20, 4))


def with_value(value, where=(3, 1)):
    X = GOOD.copy()
    X[where] = value
    return X


@pytest.mark.parametrize(
    "X, error, match",
    [
        (with_value(np.nan), ValueError, "NaN"),
        (with_value(np.inf), ValueError, "infinity"),
        (np.empty((0, 4)), ValueError, "0 sample"),
        (np.empty((5, 0)), ValueError, "0 feature"),
        (GOOD[0], ValueError, "2D array"),
        (GOOD[:1], ValueError, "1 sample"),
        (GOOD + 1j, ValueError, "[Cc]omplex"),
        (np.array([["a", "b"], ["c", "d"]]), ValueError, "not a number"),
        ([[1.0, 2.0], [3.0]], ValueError, "inhomogeneous|sequence"),
    ],
)
@pytest.mark.parametrize("Est", INTERFACE)
def test_bad_data_is_refused_clearly(Est, X, error, match):
    with pytest.raises(error, match=match):
        Est(data_norm=1.0).fit(X)


@pytest.mark.parametrize(
    "params",
    [
        {"epsilon": 0.0},
        {"epsilon": -1.0},
        {"epsilon": np.nan},
        {"delta": 0.0},
        {"delta": 1.0},
        {"data_norm": 0.0},
        {"data_norm": -2.0},
        {"data_norm": np.inf},
        {"n_components": -1},
        {"n_components": 1.5},
        {"n_components": "auto"},
        {"center": "yes"},
        {"accountant": "default"},
        {"copy": "no"},
        {"svd_solver": "lobpcg"},
    ],
)
@pytest.mark.parametrize("Est", INTERFACE)
def test_bad_parameters_raise_invalid_parameter_error(Est, params):
    with pytest.raises(InvalidParameterError):
        Est(**params).fit(GOOD)


@pytest.mark.parametrize(
    "params",
    [
        {"epsilon": np.inf},
        {"n_components": 0},
        {"n_components": "mle"},
        {"tol": 1e-3},
        {"iterated_power": 3},
    ],
)
def test_coherent_power_refuses_what_it_cannot_plan(params):
    """No fraction-free k, non-private run or randomized-solver knobs there."""
    with pytest.raises((InvalidParameterError, TypeError)):
        FixedPower(**params).fit(GOOD)


@pytest.mark.parametrize("Est", INTERFACE)
def test_too_many_components_and_wrong_widths(Est):
    low = 1 if Est is FixedPower else 0
    with pytest.raises(ValueError, match=f"n_components=5 must be between {low} and"):
        Est(5, data_norm=1.0).fit(GOOD)
    pca = Est(2, data_norm=1.0).fit(GOOD)
    with pytest.raises(ValueError, match="features"):
        pca.transform(GOOD[:, :3])
    with pytest.raises(ValueError, match="n_components_=2"):
        pca.inverse_transform(GOOD[:, :3])
    with pytest.raises(ValueError, match="features"):
        pca.score(sparse.csr_matrix(GOOD[:, :3]))


@pytest.mark.parametrize("Est", INTERFACE)
def test_callers_arrays_are_never_modified(Est, planted):
    X, _ = planted
    for Z in (X.copy(), np.asfortranarray(X), X.astype(np.float32)):
        before = Z.copy()
        Z.setflags(write=False)
        pca = Est(3, data_norm=0.5).fit(Z)
        pca.transform(Z)
        pca.score(Z)
        np.testing.assert_array_equal(Z, before)


@pytest.mark.parametrize("Est", INTERFACE)
def test_refused_fit_is_not_charged_and_leaves_state(Est, planted):
    X, _ = planted
    acc = BudgetAccountant(epsilon=1.0)
    pca = Est(2, epsilon=0.9, data_norm=1.0, accountant=acc).fit(X)
    components = pca.components_.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from sklearn_dppca import BudgetExceededError

        with pytest.raises(BudgetExceededError):
            pca.set_params(epsilon=0.5).fit(X)
    assert acc.n_charges == 1
    np.testing.assert_array_equal(pca.components_, components)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("data_norm", [1.0, None])
@pytest.mark.parametrize("Est", INTERFACE)
def test_failed_fit_on_bad_data_is_not_charged(Est, bad, data_norm):
    """Finiteness is checked in the first pass; the charge comes after it."""
    acc = BudgetAccountant()
    with pytest.raises(ValueError, match="NaN|infinity"):
        Est(data_norm=data_norm, accountant=acc).fit(with_value(bad, (17, 2)))
    assert acc.n_charges == 0


@pytest.mark.parametrize("Est", INTERFACE)
def test_huge_finite_rows_are_clipped_not_refused(Est):
    X = GOOD.copy()
    X[4] = 1e200
    pca = Est(2, data_norm=1.0, random_state=0).fit(X)
    assert np.all(np.isfinite(pca.components_)) and np.isfinite(pca.mean_).all()


# ------------------------------------------- non_finite (issue 30, item 2)
def _with_non_finite(X):
    X = X.copy()
    X[3, 1], X[8, 0], X[8, 2], X[11] = np.nan, np.inf, -np.inf, -np.inf
    return X


@pytest.mark.parametrize("Est", INTERFACE)
def test_non_finite_raise_is_the_default_and_names_the_value(Est):
    assert Est().non_finite == "raise"
    acc = BudgetAccountant()
    for bad, name in ((np.nan, "NaN"), (np.inf, "infinity"), (-np.inf, "infinity")):
        with pytest.raises(ValueError, match=name):
            Est(data_norm=1.0, accountant=acc).fit(with_value(bad, (17, 2)))
    assert acc.n_charges == 0


@pytest.mark.parametrize("Est", INTERFACE)
def test_non_finite_clip_is_nan_to_num_before_the_fit(Est):
    """non_finite="clip" is exactly np.nan_to_num of each value (NaN → 0,
    ±inf → ±the dtype's largest value), then the usual clipping; the caller's
    array is never modified, dense or sparse."""
    X, _ = make_planted(300, 5, seed=4)
    bad = _with_non_finite(X)
    before = bad.copy()
    acc = BudgetAccountant()
    params = dict(n_components=2, data_norm=1.0, random_state=0)
    clip = Est(**params, non_finite="clip", accountant=acc).fit(bad)
    ref = Est(**params).fit(np.nan_to_num(bad))
    np.testing.assert_array_equal(clip.components_, ref.components_)
    np.testing.assert_array_equal(clip.mean_, ref.mean_)
    np.testing.assert_array_equal(clip.explained_variance_, ref.explained_variance_)
    np.testing.assert_array_equal(bad, before)  # NaN in the same places too
    assert acc.n_charges == 1
    with np.errstate(over="ignore"):  # rows of ±max project beyond float64
        np.testing.assert_array_equal(clip.transform(bad),
                                      ref.transform(np.nan_to_num(bad)))
    for fmt in (sparse.csr_matrix, sparse.csc_matrix):
        Z = fmt(bad)
        data = Z.data.copy()
        sp = Est(**params, non_finite="clip").fit(Z)
        np.testing.assert_allclose(sp.components_, ref.components_, atol=1e-9)
        np.testing.assert_array_equal(Z.data, data)
    b32 = bad.astype(np.float32)
    f32 = Est(**params, non_finite="clip").fit(b32)
    ref32 = Est(**params).fit(np.nan_to_num(b32))  # float32's largest value
    np.testing.assert_array_equal(f32.components_, ref32.components_)


@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("Est", INTERFACE)
def test_non_finite_clip_row_of_inf_is_the_row_of_max_clipped_to_c(Est, sign):
    """A row of ±inf becomes a row of ±finfo.max (its norm overflows, which
    the rows engines measure safely) and is then clipped to data_norm like
    any row: the same fit as that row, and as the row scaled to norm C."""
    X, _ = make_planted(400, 4, seed=5)
    inf, top, at_c = X.copy(), X.copy(), X.copy()
    inf[9] = sign * np.inf
    top[9] = sign * np.finfo(np.float64).max
    at_c[9] = sign * 0.5  # norm 1 = data_norm: unchanged by the clipping
    params = dict(n_components=2, data_norm=1.0, center=False, random_state=0)
    fits = [Est(**params, non_finite="clip").fit(Z) for Z in (inf, top, at_c)]
    for fit in fits[1:]:
        np.testing.assert_allclose(fit.components_, fits[0].components_,
                                   atol=1e-10)
        np.testing.assert_allclose(fit.explained_variance_,
                                   fits[0].explained_variance_, rtol=1e-10)


def test_non_finite_clip_rows_are_clipped_to_the_bound_exactly():
    """Sensitivity: a mapped row counts as a row of norm at most C. Without
    noise (epsilon=inf) and without centring, the released scatter of a
    dataset with a row of ±inf is that of the row scaled to norm C."""
    X, _ = make_planted(200, 3, seed=6)
    bad, clipped = X.copy(), X.copy()
    bad[0] = [np.inf, -np.inf, np.nan]
    clipped[0] = [2.0 / math.sqrt(2.0), -2.0 / math.sqrt(2.0), 0.0]  # C = 2
    params = dict(n_components=3, epsilon=math.inf, data_norm=2.0, center=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        got = PrivatePCA(**params, non_finite="clip").fit(bad)
        want = PrivatePCA(**params).fit(clipped)
    np.testing.assert_allclose(got.explained_variance_, want.explained_variance_,
                               rtol=1e-12)
    np.testing.assert_allclose(np.abs(got.components_), np.abs(want.components_),
                               atol=1e-10)


def test_non_finite_is_validated():
    with pytest.raises(InvalidParameterError, match="non_finite"):
        PrivatePCA(data_norm=1.0, non_finite="zero").fit(GOOD)


# ------------------------------------------------------------------ drop-in
SOLVER_PARAMS = dict(
    copy=False, svd_solver="full", tol=1e-3, iterated_power=3, n_oversamples=20,
    power_iteration_normalizer="QR",
)


@pytest.mark.parametrize("Est", ESTIMATORS)
def test_sklearn_solver_parameters_are_stored_and_only_copy_is_warned(Est, planted):
    """Issue 31: svd_solver and its parameters choose how the released matrix
    is eigendecomposed (post-processing); copy has no effect and is warned."""
    X, _ = planted
    pca = Est(2, data_norm=1.0, **SOLVER_PARAMS)
    assert {k: pca.get_params()[k] for k in SOLVER_PARAMS} == SOLVER_PARAMS
    assert clone(pca).get_params() == pca.get_params()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pca.fit(X)
    user = [str(w.message) for w in caught if w.category is SolverParameterWarning]
    assert len(user) == 1 and user[0].startswith("copy=False has no effect")
    assert "never modifies X" in user[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", SolverParameterWarning)
        for solver in ("auto", "full", "covariance_eigh", "arpack", "randomized"):
            Est(2, data_norm=1.0, svd_solver=solver, tol=0.0, copy=True,
                iterated_power=2, n_oversamples=3,
                power_iteration_normalizer="none").fit(X)


def test_coherent_power_takes_copy_and_svd_solver():
    pca = FixedPower(2, data_norm=1.0, copy=False, svd_solver="randomized")
    assert pca.get_params()["svd_solver"] == "randomized"
    with pytest.warns(UserWarning, match="copy=False, svd_solver='randomized' have"):
        pca.fit(GOOD)


@pytest.mark.parametrize("given, named, unnamed", [
    ({"svd_solver": "arpack"}, "no solver choice applies", "copy"),
    ({"copy": False}, "copy is moot", "solver choice"),
    ({"copy": False, "svd_solver": "full"},
     "no solver choice applies and it never modifies X (copy is moot)",
     None),
])
def test_coherent_power_names_the_reasons_of_the_parameters_given(given, named,
                                                                  unnamed):
    """Review 70 F11: svd_solver alone was told that "copy is moot", though
    copy was never passed: the warning gives only the given ones' reasons."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        FixedPower(2, data_norm=1.0, **given).fit(GOOD)
    user = [str(w.message) for w in caught if w.category is SolverParameterWarning]
    assert len(user) == 1 and named in user[0]
    assert unnamed is None or unnamed not in user[0]


@pytest.mark.parametrize(
    "params",
    [{"tol": -1.0}, {"iterated_power": -1}, {"iterated_power": "many"},
     {"n_oversamples": 0}, {"power_iteration_normalizer": "qr"}],
)
def test_sklearn_solver_parameters_are_validated_like_sklearn(params):
    with pytest.raises(InvalidParameterError):
        PrivatePCA(**params).fit(GOOD)
    with pytest.raises(InvalidParameterError):
        PCA(**params).fit(GOOD)


def test_solver_parameters_and_infinite_epsilon_in_grid_search(planted):
    """A grid over ε can hold the non-private baseline, charged to an unlimited
    accountant that clone shares."""
    X, _ = planted
    acc = BudgetAccountant()
    grid = GridSearchCV(
        PrivatePCA(3, data_norm=1.0, accountant=acc),
        {"epsilon": [1.0, math.inf], "svd_solver": ["auto", "full"]},
        cv=2,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        grid.fit(X)
    assert np.all(np.isfinite(grid.cv_results_["mean_test_score"]))
    assert grid.cv_results_["param_epsilon"].tolist().count(math.inf) == 2
    assert acc.spent[0] == math.inf and acc.n_charges == 2 * 4 + 1


def test_mle_matches_sklearn_at_huge_epsilon():
    rng = np.random.default_rng(1)
    cases = []
    for true_k in (1, 2, 4):
        latent = rng.normal(size=(2000, true_k)) * np.linspace(3.0, 1.0, true_k)
        X = latent @ rng.normal(size=(true_k, 8)) + 0.1 * rng.normal(size=(2000, 8))
        cases.append(X)
    cases.append(rng.normal(size=(600, 10)))
    for X in cases:
        bound = 2.0 * np.linalg.norm(X, axis=1).max()
        for Est in ESTIMATORS:
            pca = Est("mle", epsilon=1e9, data_norm=bound, random_state=0).fit(X)
            assert pca.n_components_ == PCA("mle").fit(X).n_components_
            assert pca.components_.shape == (pca.n_components_, X.shape[1])


def test_minka_equals_sklearns_infer_dimension_on_spectra():
    from sklearn.decomposition._pca import _assess_dimension, _infer_dimension

    from sklearn_dppca._spectrum import minka_dimension, minka_log_evidence

    rng = np.random.default_rng(0)
    for trial in range(150):
        d = int(rng.integers(2, 25))
        n = int(rng.integers(d, 400))
        spectrum = np.sort(rng.exponential(size=d) ** rng.uniform(0.5, 4))[::-1]
        spectrum /= spectrum[0]
        if trial % 4 == 0:  # a rank-deficient spectrum (exact zeros)
            spectrum[rng.integers(1, d):] = 0.0
        ours = minka_log_evidence(spectrum, n)
        theirs = np.array(
            [-np.inf] + [_assess_dimension(spectrum, r, n) for r in range(1, d)]
        )
        np.testing.assert_allclose(ours, theirs, rtol=1e-10)
        assert minka_dimension(spectrum, n) == _infer_dimension(spectrum, n)
    # scale-invariant (scikit-learn's absolute 1e-15 floor is not)
    assert minka_dimension(spectrum * 1e-20, n) == minka_dimension(spectrum, n)


def test_mle_needs_as_many_samples_as_features():
    with pytest.raises(ValueError, match="'mle' is only supported if n_samples >="):
        PrivatePCA("mle", data_norm=1.0).fit(np.ones((5, 6)))


@pytest.mark.parametrize("Est", ESTIMATORS)
def test_zero_components(Est, planted):
    X, _ = planted
    pca = Est(0, data_norm=1.0).fit(X)
    assert pca.n_components_ == 0 and pca.components_.shape == (0, X.shape[1])
    assert pca.transform(X).shape == (X.shape[0], 0)
    assert pca.get_feature_names_out().shape == (0,)
    assert pca.noise_variance_ > 0 and np.isfinite(pca.score(X))
    exact = Est(0, epsilon=math.inf, center=True).fit(X)
    assert exact.noise_variance_ == pytest.approx(PCA(0).fit(X).noise_variance_)


# ---------------------------------------------------- the non-private fit
@pytest.mark.parametrize("Est", ESTIMATORS)
def test_infinite_epsilon_is_the_clipped_exact_fit(Est, planted):
    """epsilon=inf: no noise; the rows clipped as requested (raw for the mean,
    centred for the covariance), else exactly scikit-learn's computation."""
    X, _ = planted
    X = X.copy()
    X[:20] *= 5.0  # rows beyond the bound
    C = 0.5
    with pytest.warns(PrivacyLeakWarning, match="epsilon=inf"):
        pca = Est(3, epsilon=math.inf, data_norm=C).fit(X)

    def clip(rows):
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return rows * np.minimum(1.0, C / norms)

    mean = clip(X).mean(axis=0)
    Y = clip(X - mean)
    values, vectors = np.linalg.eigh(Y.T @ Y)
    np.testing.assert_allclose(pca.mean_, mean, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(
        pca.explained_variance_, values[::-1][:3] / (X.shape[0] - 1), rtol=1e-9
    )
    np.testing.assert_allclose(
        np.abs(pca.components_), np.abs(vectors[:, ::-1][:, :3].T), atol=1e-8
    )
    assert pca.privacy_spent_ == (math.inf, 1e-6) and pca.data_norm_ == C


@pytest.mark.parametrize("Est", INTERFACE[:3])
def test_infinite_epsilon_is_refused_by_any_finite_budget(Est):
    """Refused before the data is read: NaN data raises the budget error."""
    from sklearn_dppca import BudgetExceededError

    acc = BudgetAccountant(epsilon=1e6)
    with pytest.raises(BudgetExceededError, match="epsilon=inf"):
        Est(epsilon=math.inf, accountant=acc).fit(with_value(np.nan, (3, 1)))
    assert acc.n_charges == 0 and acc.spent == (0.0, 0.0)
    unlimited = BudgetAccountant()
    unlimited.spend(mu=gdp_mu(1.0, 1e-6))
    Est(2, epsilon=math.inf, accountant=unlimited).fit(GOOD)
    assert unlimited.spent == (math.inf, 1e-6) and unlimited.n_charges == 2
    with pytest.raises(BudgetExceededError):  # nothing more fits in a spent budget
        BudgetAccountant(epsilon=1.0).check(mu=math.inf)


# ----------------------------------------------------------- float limits
@pytest.mark.parametrize("epsilon", [0.1, 0.7, 1.0, 2.5, 8.0])
@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("Est", INTERFACE)
def test_privacy_spent_shows_the_request_exactly(Est, epsilon, center):
    pca = Est(2, epsilon=epsilon, data_norm=1.0, center=center).fit(GOOD)
    assert pca.privacy_spent_ == (epsilon, 1e-6)
    assert repr(pca.privacy_spent_) == f"({epsilon!r}, 1e-06)"


def test_reported_spend_is_never_less_than_spent():
    from sklearn_dppca._base import reported_spend

    assert reported_spend((1.0000000000000022, 1e-6), 1.0) == (1.0, 1e-6)
    assert reported_spend((1.0 - 1e-12, 1e-6), 1.0) == (1.0, 1e-6)
    assert reported_spend((1.01, 1e-6), 1.0) == (1.01, 1e-6)  # a real excess
    assert reported_spend((0.5, 1e-6), 1.0) == (0.5, 1e-6)
    assert reported_spend((math.inf, 1e-6), math.inf) == (math.inf, 1e-6)


@pytest.mark.parametrize(
    "dtype, too_small, fine",
    [(np.float64, 1e-101, 1e-99), (np.float32, 1e-16, 1e-14)],
)
@pytest.mark.parametrize("Est", INTERFACE)
def test_data_norm_underflow_is_refused(Est, dtype, too_small, fine):
    """Below the limit C² and σ ∝ C² would round to 0; above it the release
    is the unit-scale release (same seed), scaled: nothing rounded away."""
    X = (GOOD * fine).astype(dtype)
    with pytest.raises(ValueError, match="too small for .* data.*underflow"):
        Est(2, data_norm=too_small).fit(X)
    with pytest.raises(ValueError, match="too small"):  # the estimate as well
        Est(2).fit((GOOD * too_small / 10).astype(dtype))
    pca = Est(2, data_norm=fine, epsilon=1.0, random_state=0).fit(X)
    unit = Est(2, data_norm=1.0, epsilon=1.0, random_state=0).fit(GOOD)
    rtol = 1e-9 if dtype is np.float64 else 1e-4
    np.testing.assert_allclose(
        pca.explained_variance_.astype(np.float64) / fine**2,
        unit.explained_variance_, rtol=rtol, atol=1e-12,
    )
    np.testing.assert_allclose(
        pca.mean_.astype(np.float64) / fine, unit.mean_, rtol=rtol
    )
    if dtype is np.float64:  # float32 data is fine at the float64 limit's scale
        Est(2, data_norm=1e-50).fit((GOOD * 1e-50).astype(np.float64))


# ------------------------------------------- issue 30: noise that underflows
@pytest.mark.parametrize("estimator", [
    PrivatePCA(1, data_norm=1e-100, epsilon=1e300),
    PrivatePCA(1, data_norm=1e-100, epsilon=1e300, center=False),
    ComplexGaussPCA(1, data_norm=1e-100, epsilon=1e300),
], ids=["PrivatePCA", "no centring", "ComplexGaussPCA"])
def test_a_budget_whose_noise_would_underflow_is_refused_before_the_charge(
        estimator):
    """σ = √2 C²/μ* is 0 at C = 1e-100 and ε = 1e300: the covariance was
    released exactly. Refused, from public values, before any charge."""
    budget = BudgetAccountant()
    X = np.random.default_rng(0).normal(size=(40, 3)) * 1e-101
    with pytest.raises(ValueError, match="normal"):
        clone(estimator).set_params(accountant=budget).fit(X)
    assert budget.n_charges == 0


# ------------------------------------------- issue 31: the truncated solvers
def _spiked(n=3000, d=600, seed=0, spikes=(12.0, 9.0, 7.0)):
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.normal(size=(d, 3)))[0]
    X = rng.normal(size=(n, 3)) * spikes @ basis.T
    X += 0.2 * rng.normal(size=(n, d))
    return X / np.linalg.norm(X, axis=1).max(), basis


@pytest.mark.parametrize("Est", [PrivatePCA, ComplexGaussPCA])
@pytest.mark.parametrize("solver", ["randomized", "arpack"])
def test_a_truncated_solver_eigendecomposes_the_same_release(Est, solver,
                                                              monkeypatch):
    """The top k of the same noisy matrix, without every eigenpair: the
    components agree with the full solver's, the total variance is exact,
    and the spectrum's estimates from tr M̂ and ‖M̂‖_F agree with those from
    every eigenvalue. (Spikes well above the noise's edge: one near it
    converges slowly in the randomized range finder, as in scikit-learn.)"""
    X, basis = _spiked()
    full = Est(3, epsilon=4.0, data_norm=1.0, svd_solver="full",
               random_state=0).fit(X)
    real_eigh = np.linalg.eigh

    def no_full_eigh(matrix, *args, **kwargs):
        assert matrix.shape[0] < X.shape[1], "every eigenpair was computed"
        return real_eigh(matrix, *args, **kwargs)

    monkeypatch.setattr(np.linalg, "eigh", no_full_eigh)
    monkeypatch.setattr(np.linalg, "eigvalsh", no_full_eigh)
    part = Est(3, epsilon=4.0, data_norm=1.0, svd_solver=solver,
               random_state=0).fit(X)
    assert part._fit_svd_solver == solver
    # ARPACK converges to the same eigenpairs; the range finder to within
    # what its passes resolve, far below the noise's own error
    gap = principal_sin(part.components_, full.components_.T)
    assert gap < (1e-6 if solver == "arpack" else 0.1)
    assert principal_sin(part.components_, basis) <= (
        principal_sin(full.components_, basis) + 0.01)
    assert part.total_variance_ == pytest.approx(full.total_variance_, rel=1e-9)
    np.testing.assert_allclose(part.explained_variance_, full.explained_variance_,
                               rtol=1e-2)
    assert part.noise_variance_ == pytest.approx(full.noise_variance_, rel=1e-2)
    np.testing.assert_allclose(part.explained_variance_ratio_,
                               full.explained_variance_ratio_, rtol=1e-2)
    # the model the spectrum defines: the same to the solver's accuracy
    cov_full, cov_part = full.get_covariance(), part.get_covariance()
    assert np.linalg.norm(cov_part - cov_full) <= 0.05 * np.linalg.norm(cov_full)
    assert part.score(X) == pytest.approx(full.score(X), rel=1e-2)


@pytest.mark.parametrize("solver", ["randomized", "arpack"])
@pytest.mark.parametrize("n_components", ["mle", 0.5, 0])
def test_a_truncated_solver_refuses_what_scikit_learn_refuses(solver, n_components):
    """scikit-learn's rules, before any charge."""
    X, _ = _spiked(n=200, d=20)
    budget = BudgetAccountant()
    with pytest.raises(ValueError, match=f"svd_solver='{solver}'"):
        PrivatePCA(n_components, data_norm=1.0, svd_solver=solver,
                   accountant=budget).fit(X)
    with pytest.raises(ValueError, match="strictly less than"):
        PrivatePCA(20, data_norm=1.0, svd_solver="arpack", accountant=budget).fit(X)
    assert budget.n_charges == 0


def test_auto_takes_the_randomized_top_k_on_wide_data():
    """scikit-learn's rule: 2 000 × 1 000 with k = 3 is randomized, and as
    good as every eigenpair."""
    X, basis = _spiked(n=2000, d=1000, spikes=(30.0, 24.0, 20.0))
    pca = PrivatePCA(3, epsilon=10.0, data_norm=1.0, random_state=0).fit(X)
    assert pca._fit_svd_solver == "randomized"
    full = PrivatePCA(3, epsilon=10.0, data_norm=1.0, random_state=0,
                      svd_solver="full").fit(X)
    assert principal_sin(full.components_, basis) < 0.5
    assert principal_sin(pca.components_, basis) <= (
        principal_sin(full.components_, basis) + 0.01)


@pytest.mark.parametrize("Est", [PrivatePCA, ComplexGaussPCA, FixedPower])
def test_a_fit_whose_matrices_cannot_fit_is_refused_before_the_charge(Est,
                                                                      monkeypatch):
    """Issue 31, item 4: the d × d matrices' memory is known from public
    values before the data is read; a fit that could not hold them is
    refused then, not out of memory after its charge."""
    from sklearn_dppca import _paths

    X, _ = _spiked(n=200, d=40)
    budget = BudgetAccountant()
    est = Est(2, data_norm=1.0, accountant=budget, path="dense")
    needed = est._memory_needed(*X.shape)
    assert needed >= 2 * 8 * 40 * 40
    monkeypatch.setattr(_paths, "physical_memory", lambda: needed)
    with pytest.raises(MemoryError, match="refused before reading the data"):
        est.fit(X)
    assert budget.n_charges == 0
    monkeypatch.setattr(_paths, "physical_memory", lambda: 2 * needed)
    est.fit(X)
    assert budget.n_charges == 1
    # a truncated solver needs fewer of them; every eigenpair, LAPACK's
    # copy, eigenvectors and workspace (a review measured 5.4–5.6 d²: three
    # had let a fit admitted under a limit run out of memory after its charge)
    # beside them, the pass's blocks of rows (here all 2 000 rows) and three
    # of the noise's blocks of 2**22 entries
    buffers = 8 * (5000 * 2000 + 3 * (2**22 + 5000))
    wide = PrivatePCA(5, svd_solver="randomized")
    assert wide._memory_needed(2000, 5000) == 2 * 8 * 5000**2 + buffers
    assert PrivatePCA(5, svd_solver="full")._memory_needed(2000, 5000) == (
        6 * 8 * 5000**2 + buffers)


def test_wide_rows_form_the_gram_matrix_once_after_the_centre(monkeypatch):
    """On wide dense rows in memory (d ≥ 2 048) the first pass forms no raw
    Gram matrix: the clipped, centred rows' Gram matrix is formed once, after
    the released bound and centre. The same release as the raw matrix with a
    correction per clipped row (here every row, centred on a noisy mean, is
    clipped)."""
    import sklearn_dppca._base as base
    import sklearn_dppca._stats as stats
    import sklearn_dppca._threads as threads

    assert threads.wide(2048) and not threads.wide(2047)
    rng = np.random.default_rng(0)
    # 300 columns taken as wide: two full eigh of 2 048 took 12 s (86 s loaded)
    X = rng.normal(size=(200, 300))
    monkeypatch.setattr(base, "wide", lambda d: True)
    C = float(np.quantile(np.linalg.norm(X, axis=1), 0.5))
    seen = []
    first_pass = stats.first_pass

    def spy(*args, with_gram=True, **kwargs):
        seen.append(with_gram)
        return first_pass(*args, with_gram=with_gram, **kwargs)

    monkeypatch.setattr("sklearn_dppca._rows.first_pass", spy)
    params = dict(n_components=3, epsilon=2.0, data_norm=C, path="dense",
                  svd_solver="full", random_state=0,
                  accountant=BudgetAccountant())
    once = PrivatePCA(**params).fit(X)
    assert seen == [False]
    monkeypatch.setattr(base, "wide", lambda d: False)
    raw = PrivatePCA(**params).fit(X)
    assert seen == [False, True]
    np.testing.assert_allclose(once.components_, raw.components_, atol=1e-8)
    np.testing.assert_allclose(once.explained_variance_, raw.explained_variance_,
                               rtol=1e-10)
