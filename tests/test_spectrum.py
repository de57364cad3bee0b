"""The released trace and the de-noised spectrum (docs/privacy.rst §6).

The trace rides with the covariance release at its σ, at no cost (the joint
sensitivity is the covariance's alone); the spectrum's estimator is
post-processing, checked for its mathematics (spikes, pure noise, scale) and
for what the estimators report.
"""

import math

import numpy as np
import pytest
import scipy.linalg
from scipy import stats
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA

import sklearn_dppca._complex_gauss_pca as complex_module
import sklearn_dppca._matrix_free as matrix_free_module
import sklearn_dppca._private_pca as private_module
from sklearn_dppca import CoherentPowerPCA, ComplexGaussPCA, PrivatePCA
from sklearn_dppca._spectrum import (
    FLOOR_MARGIN,
    denoised_spectrum,
    kernel_floor,
    resolved_weights,
)
from sklearn_dppca.audit import audit, gaussian_mu_lower
from sklearn_dppca.datasets import load_real_dataset
from sklearn_dppca.noise import goe_noise, gue_noise, make_generator
from sklearn_dppca.privacy import gdp_epsilon

from .test_private_pca import gram_of, principal_sin, released_matrix

pytestmark = pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")


# ------------------------------------------------------------- the trace
@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize(
    "Est, module, kernel",
    [(PrivatePCA, private_module, "add_goe_noise"),
     (ComplexGaussPCA, complex_module, "add_gue_noise")],
    ids=["private", "complex"],
)
def test_trace_is_released_with_the_covariance_sigma(monkeypatch, Est, module,
                                                     kernel, center):
    """The trace's noise is one N(0, σ²) draw with the covariance kernel's σ
    (σ = √2 C²/μ_cov), after the kernel; the spectrum gets exact trace +
    that draw."""
    drawn, seen = {}, {}
    real_kernel, real_dense = getattr(module, kernel), matrix_free_module.dense_noise

    def kernel_spy(rng, matrix, sigma):
        drawn["kernel"] = sigma
        return real_kernel(rng, matrix, sigma)

    def dense_spy(rng, shape, sigma):
        assert "kernel" in drawn  # drawn after the covariance's noise
        z = real_dense(rng, shape, sigma)
        drawn["trace"] = (sigma, float(z))
        return z

    real_spectrum = Est._spectrum

    def spectrum_spy(self, eigvals, sigma=0.0, trace=None, rest=None, **kwargs):
        seen.update(sigma=sigma, trace=trace)
        return real_spectrum(self, eigvals, sigma, trace, rest, **kwargs)

    monkeypatch.setattr(module, kernel, kernel_spy)
    monkeypatch.setattr(matrix_free_module, "dense_noise", dense_spy)  # the trace
    monkeypatch.setattr(Est, "_spectrum", spectrum_spy)
    X = np.random.default_rng(1).normal(size=(500, 5)) * 0.4 + 0.2
    C = 0.8
    pca = Est(epsilon=0.7, data_norm=C, center=center, random_state=3).fit(X)
    mu_cov = pca._privacy_plan(*X.shape).mus["covariance"]
    sigma = math.sqrt(2.0) * C**2 / mu_cov
    assert drawn["kernel"] == pytest.approx(sigma, rel=1e-12)
    assert drawn["trace"][0] == drawn["kernel"] == seen["sigma"]
    exact = np.trace(gram_of(X, C, pca.mean_ if center else None))
    value, sd = seen["trace"]
    assert value == pytest.approx(exact + drawn["trace"][1], rel=1e-12)
    assert sd == drawn["kernel"]


def test_trace_noise_is_standard_normal_over_fits(monkeypatch):
    """Across fits the trace's noise, over σ, is N(0, 1) (KS test)."""
    values = []
    real_dense = matrix_free_module.dense_noise

    def dense_spy(rng, shape, sigma):
        z = real_dense(rng, shape, sigma)
        values.append(float(z) / sigma)
        return z

    monkeypatch.setattr(matrix_free_module, "dense_noise", dense_spy)
    X = np.random.default_rng(2).normal(size=(200, 3)) * 0.3
    for seed in range(300):
        PrivatePCA(epsilon=1.0, data_norm=1.0, center=False, random_state=seed).fit(X)
    assert stats.kstest(values, "norm").pvalue > 1e-3


def joint_excess(a, b):
    """‖aaᵀ − bbᵀ‖_F² + (‖a‖² − ‖b‖²)²: the pair's squared sensitivity (σ units)."""
    scatter = np.outer(a, a) - np.outer(b, b)
    return float(np.sum(scatter**2) + (a @ a - b @ b) ** 2)


def test_joint_sensitivity_is_the_covariance_alone():
    """‖aaᵀ − bbᵀ‖_F² + (‖a‖² − ‖b‖²)² ≤ 2C⁴ for rows of norm ≤ C, attained by
    orthogonal rows of norm C (the trace still) and by (C e₁, 0): so the trace
    at the covariance's σ adds nothing to μ = √2 C²/σ, and any smaller σ_t
    would (at (C e₁, 0) it gives C⁴/σ² + C⁴/σ_t² > 2C⁴/σ²)."""
    rng = np.random.default_rng(0)
    C, d = 1.7, 6
    worst = 0.0
    for _ in range(20_000):
        a, b = rng.normal(size=(2, d))
        a *= C * rng.choice([0.0, 0.5, 1.0, rng.uniform()]) / np.linalg.norm(a)
        if rng.uniform() < 0.3:  # near-orthogonal and near-parallel pairs
            b = b - (b @ a) / max(a @ a, 1e-300) * a * rng.uniform(0.9, 1.1)
        b *= C * rng.choice([0.0, 0.5, 1.0, rng.uniform()]) / np.linalg.norm(b)
        worst = max(worst, joint_excess(a, b))
    assert worst <= 2 * C**4 * (1 + 1e-12)
    e = np.eye(d)
    assert joint_excess(C * e[0], C * e[1]) == pytest.approx(2 * C**4)
    assert joint_excess(C * e[0], 0 * e[0]) == pytest.approx(2 * C**4)
    # any p, q in [0, C²] on the grid: 2p² + 2q² − 2pq ≤ 2 max(p, q)²
    p, q = np.meshgrid(np.linspace(0, C**2, 101), np.linspace(0, C**2, 101))
    assert np.all(2 * p**2 + 2 * q**2 - 2 * p * q <= 2 * C**4 * (1 + 1e-12))


class TracePCA(PrivatePCA):
    """PrivatePCA keeping its released trace for the audit's statistic."""

    def _spectrum(self, eigvals, sigma=0.0, trace=None, **kwargs):
        self.released_trace_ = trace[0]
        return super()._spectrum(eigvals, sigma, trace, **kwargs)


def diagonal_plus_trace(estimator):
    """``M̂₁₁ + T̃``: on neighbours (C e₁ vs 0) it moves by 2C² with noise
    variance 2σ², so its Gaussian test measures μ = √2 C²/σ, the claim."""
    return float(released_matrix(estimator)[0, 0] + estimator.released_trace_)


diagonal_plus_trace.gaussian = True


def test_audit_of_the_covariance_with_its_trace_is_sharp():
    """End to end: the best test of the pair, on the neighbours where both
    move, finds the covariance's μ and no more (ε_lower ≤ ε; a 95% bound of a
    sharp test, so about one seed in twenty would exceed ε by chance: 3000
    fits measure μ = 0.271 against the claimed 0.268)."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(3000, 3)) * 0.35
    Y = X.copy()
    X[0], Y[0] = [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]
    epsilon, delta, n_fits = 1.0, 1e-5, 400
    est = TracePCA(epsilon=epsilon, delta=delta, data_norm=1.0, center=False)
    result = audit(est, X, Y, diagonal_plus_trace, n_fits=n_fits, random_state=1)
    assert result.epsilon_lower <= epsilon
    mu = est._privacy_plan(*X.shape).mus["covariance"]
    assert abs(result.mu_estimate - mu) < 3 * math.sqrt(2.0 / n_fits)


def test_gaussian_bound_tool_sees_the_trace_alone_at_its_share():
    """The trace alone moves by C² against noise σ: μ = μ_cov/√2 (it is the
    pair, not the trace, that costs μ_cov)."""
    rng = np.random.default_rng(6)
    sigma, n = 3.0, 4000
    a = rng.normal(size=n) * sigma
    b = rng.normal(size=n) * sigma + 1.0  # C² = 1
    assert gaussian_mu_lower(a, b) < 1.0 / sigma


# ---------------------------------------------------------- the estimator
def spike(d, theta, sigma, seed, bulk=0.0):
    M = np.diag(np.r_[theta, np.full(d - 1, bulk)])
    noisy = M + goe_noise(make_generator(seed), d, sigma)
    return M, noisy


def test_spike_is_de_biased():
    """One spike θ above the BBP threshold √d τ: the released eigenvalue is
    θ + dτ²/θ; θ̂ recovers θ and η̂ the variance along the noisy eigenvector,
    θ cos² = θ − dτ²/θ (and the oracle v̂ᵀ M v̂)."""
    d, sigma, theta = 100, 1.0, 20.0
    tau2 = sigma**2 / 2
    raw, explained, captured, oracle = [], [], [], []
    for seed in range(30):
        M, noisy = spike(d, theta, sigma, seed)
        lam, vec = np.linalg.eigh(noisy)
        e, c, r = denoised_spectrum(lam, sigma, d, (np.trace(M), sigma))
        assert r >= 1
        raw.append(lam[-1])
        explained.append(e[0])
        captured.append(c[0])
        oracle.append(vec[:, -1] @ M @ vec[:, -1])
    assert np.mean(raw) == pytest.approx(theta + d * tau2 / theta, rel=0.03)
    assert np.mean(explained) == pytest.approx(theta, rel=0.03)
    assert np.mean(captured) == pytest.approx(theta - d * tau2 / theta, rel=0.05)
    assert np.mean(captured) == pytest.approx(np.mean(oracle), rel=0.05)


@pytest.mark.parametrize("level", [0.0, 3.0])
def test_pure_noise_is_flattened_to_the_total(level):
    """M = cI: nothing stands out of the noise, and every rank gets about the
    released total's mean, c (the top noise eigenvalue, 2√d τ ≈ 6.3 above, is
    pulled down to within a fraction of σ)."""
    d, sigma = 40, 1.0
    tops = []
    for seed in range(50):
        lam = np.linalg.eigvalsh(level * np.eye(d) + goe_noise(
            make_generator(seed), d, sigma))
        e, c, r = denoised_spectrum(lam, sigma, d, (level * d, sigma))
        tops.append(c[0] - level)
        assert abs(np.mean(c) - level) < 4 * sigma / math.sqrt(d) + 1e-12
    assert np.mean(tops) < 0.5 * sigma
    assert np.max(tops) < 3 * sigma


def test_lists_are_ordered_non_negative_and_keep_the_total():
    rng = np.random.default_rng(7)
    for _ in range(50):
        d = int(rng.integers(2, 60))
        values = np.sort(rng.exponential(size=d) * rng.uniform(0, 20, size=d))
        M = np.diag(values)
        sigma = rng.uniform(0.05, 3.0)
        lam = np.linalg.eigvalsh(M + goe_noise(make_generator(int(rng.integers(1e9))),
                                               d, sigma))
        m = int(rng.integers(1, d + 1))
        e, c, r = denoised_spectrum(lam, sigma, m, (np.trace(M), sigma))
        assert e.shape == c.shape == (m,) and 0 <= r <= m - 1
        for v in (e, c):
            assert np.all(v >= 0) and np.all(np.diff(v) <= 1e-12 * max(v.max(), 1))
        # nothing clamped: both lists sum to the same combined total
        if e.min() > 0 and c.min() > 0:
            assert e.sum() == pytest.approx(c.sum(), rel=1e-9)


def test_exact_without_noise_and_scale_free():
    lam = np.array([5.0, 2.0, 1.0, -1e-15])
    e, c, r = denoised_spectrum(lam, 0.0, 3)
    np.testing.assert_array_equal(e, [5.0, 2.0, 1.0])
    np.testing.assert_array_equal(c, e)
    assert r == 3
    M, noisy = spike(30, 15.0, 1.0, seed=3, bulk=0.5)
    lam = np.linalg.eigvalsh(noisy)
    ref = denoised_spectrum(lam, 1.0, 30, (np.trace(M) + 0.3, 1.0))
    for scale in (1e-150, 1e150):
        got = denoised_spectrum(lam * scale, scale, 30, ((np.trace(M) + 0.3) * scale,
                                                         scale))
        np.testing.assert_allclose(got[0], ref[0] * scale, rtol=1e-12)
        np.testing.assert_allclose(got[1], ref[1] * scale, rtol=1e-12)
        assert got[2] == ref[2]


def test_resolved_weights_on_a_pure_goe_and_a_spike():
    """The top of pure noise crosses the bulk's edge often but gets a small
    weight (full weight, three Tracy–Widom sd beyond, about 0.1% of the
    time); a strong spike gets weight 1."""
    for d in (13, 200):
        tops = []
        for s in range(300):
            w = resolved_weights(np.linalg.eigvalsh(goe_noise(
                make_generator(s), d, 1.0))[::-1], 1.0)
            tops.append(w[0] if w.size else 0.0)
        tops = np.array(tops)
        assert 0.02 < np.mean(tops > 0) < 0.35
        assert np.mean(tops) < 0.1 and np.mean(tops == 1.0) < 0.01
    _, noisy = spike(50, 30.0, 1.0, seed=0)
    np.testing.assert_array_equal(
        resolved_weights(np.linalg.eigvalsh(noisy)[::-1], 1.0), [1.0])


# ------------------------------------------------------ what is reported
def test_readme_digits_ratios_estimate_sklearns():
    """Issue 23's target: the README's digits fit at ε = 1, 20 seeds, top-2
    ratios within 20% of scikit-learn's (they were half of them)."""
    X = load_digits().data / 16.0
    truth = PCA(2).fit(X).explained_variance_ratio_
    ratios = np.array([
        PrivatePCA(2, epsilon=1.0, delta=1e-6, data_norm=4.0, random_state=s)
        .fit(X).explained_variance_ratio_ for s in range(20)])
    np.testing.assert_allclose(ratios.mean(axis=0), truth, rtol=0.20)
    # and what the components capture is the smaller share the docs describe
    fit = PrivatePCA(epsilon=1.0, data_norm=4.0, random_state=0).fit(X)
    assert np.all(fit.captured_variance_[:2] < fit.explained_variance_[:2])
    assert fit.explained_variance_ratio_.sum() == pytest.approx(1.0)
    assert fit.total_variance_ == pytest.approx(fit.explained_variance_.sum())


def unit_ball(name):
    data = load_real_dataset(name)
    X = np.asarray(data.data, dtype=np.float64) / data.data_norm
    return X / np.maximum(np.linalg.norm(X, axis=1), 1.0)[:, None]


@pytest.mark.parametrize("rho", [0.01, 1.0])
def test_covariance_shrinks_the_noise_on_small_data(rho):
    """Issue 23's small-n protocol (center=False, data_norm=1, XᵀX/n): the
    released covariance is well below the raw release's error and the zero
    matrix's."""
    X = unit_ball("digits")
    n, d = X.shape
    truth = X.T @ X / n
    epsilon = gdp_epsilon(math.sqrt(2 * rho), 1e-6)
    shipped, raw = [], []
    for seed in range(10):
        est = PrivatePCA(epsilon=epsilon, data_norm=1.0, center=False,
                         random_state=seed).fit(X)
        V = est.components_.T
        shipped.append(np.linalg.norm(est.get_covariance() * (n - 1) / n - truth))
        before = (V * np.maximum(est.noisy_variance_, 0)) @ V.T * (n - 1) / n
        raw.append(np.linalg.norm(before - truth))
    assert np.mean(shipped) < 0.7 * np.mean(raw)
    assert np.mean(shipped) < 0.5 * np.linalg.norm(truth)


def test_components_do_not_depend_on_the_trace(monkeypatch):
    """The trace is drawn after the covariance's noise: replacing its draw
    changes the spectrum, never the components (so sin θ is unchanged)."""
    X, _ = np.random.default_rng(8).normal(size=(2000, 8)) * 0.3, None
    ref = PrivatePCA(4, data_norm=1.0, random_state=2).fit(X)
    monkeypatch.setattr(matrix_free_module, "dense_noise",  # the trace's draw
                        lambda rng, shape, sigma: np.asarray(1e3 * sigma))
    moved = PrivatePCA(4, data_norm=1.0, random_state=2).fit(X)
    np.testing.assert_array_equal(moved.components_, ref.components_)
    np.testing.assert_array_equal(moved.noisy_variance_, ref.noisy_variance_)
    assert moved.total_variance_ > ref.total_variance_


@pytest.mark.parametrize("Est", [PrivatePCA, ComplexGaussPCA])
def test_model_is_the_captured_variances(Est):
    """get_covariance, get_precision and score_samples are one Gaussian model:
    captured variances on the components, noise_variance_ elsewhere; with k at
    least the resolved ranks it does not depend on k."""
    X, _ = np.random.default_rng(9).normal(size=(3000, 10)) * np.r_[
        [0.5, 0.3], np.full(8, 0.05)], None
    full = Est(epsilon=2.0, data_norm=2.0, random_state=1).fit(X)
    cov = full.get_covariance()
    C = full.components_
    np.testing.assert_allclose(cov, (C.T * full.captured_variance_) @ C, atol=1e-12)
    np.testing.assert_allclose(cov @ full.get_precision(), np.eye(10), atol=1e-8)
    logpdf = stats.multivariate_normal(full.mean_, cov).logpdf(X[:50])
    np.testing.assert_allclose(full.score_samples(X[:50]), logpdf, rtol=1e-9)
    if Est is PrivatePCA:
        for k in range(3, 10):
            part = Est(k, epsilon=2.0, data_norm=2.0, random_state=1).fit(X)
            np.testing.assert_allclose(part.get_covariance(), cov, atol=1e-12)


def test_power_method_reports_the_same_kind_of_spectrum():
    """CoherentPowerPCA: de-noised from its released covariance (no trace
    release), the ratios sum to at most 1 and nothing is negative."""
    X, _ = np.random.default_rng(10).normal(size=(4000, 12)) * np.r_[
        [0.5, 0.3], np.full(10, 0.05)], None
    est = CoherentPowerPCA(3, epsilon=2.0, data_norm=2.0, random_state=0).fit(X)
    assert est.explained_variance_[0] >= est.captured_variance_[0]
    assert est.explained_variance_ratio_.sum() <= 1.0 + 1e-12
    assert est.total_variance_ > 0 and np.all(est.explained_variance_ >= 0)
    exact = CoherentPowerPCA(3, epsilon=1e9, data_norm=20.0, clip_radius=1e3,
                             n_iter=1, random_state=0).fit(X)
    np.testing.assert_allclose(exact.explained_variance_,
                               PCA(3).fit(X).explained_variance_, rtol=1e-2)


@pytest.mark.parametrize("Est", [PrivatePCA, ComplexGaussPCA])
def test_the_gue_bulk_is_twice_as_wide_as_the_goes(Est):
    """The GUE kernel's off-diagonal entries have E|H_ij|² = σ² (σ²/2 in each
    part), so its bulk's edge is at 2√d σ, not the GOE's √(2d) σ. Taken for a
    GOE, ComplexGaussPCA counted the noise beyond √(2d) σ as resolved
    spikes: on 2 000 × 400 rows its total variance came out 15 times the
    data's. Both estimators' totals now agree with the data's."""
    rng = np.random.default_rng(0)
    basis = np.linalg.qr(rng.normal(size=(400, 3)))[0]
    X = rng.normal(size=(2000, 3)) * [5.0, 4.0, 3.0] @ basis.T
    X += 0.3 * rng.normal(size=X.shape)
    X /= np.linalg.norm(X, axis=1).max()
    truth = np.trace(np.cov(X, rowvar=False))
    fit = Est(3, epsilon=5.0, data_norm=1.0, random_state=1).fit(X)
    assert fit.total_variance_ == pytest.approx(truth, rel=0.05)
    sk = np.linalg.eigvalsh(np.cov(X, rowvar=False))[::-1]
    assert fit.noise_variance_ == pytest.approx(sk[3:].mean(), rel=0.5)


def _release(d, spikes, sigma, seed=0, hermitian=False):
    """A released matrix's structure: a positive semidefinite scatter with
    ``spikes`` (in units of the kernel's edge, σ√(2d) for the GOE kernel, 2σ√d
    for the GUE one) on a small bulk, plus the kernel."""
    rng = np.random.default_rng(seed)
    edge = -kernel_floor(sigma, d, hermitian) / FLOOR_MARGIN
    basis = np.linalg.qr(rng.normal(size=(d, len(spikes))))[0]
    rows = rng.normal(size=(3 * d, d)) * math.sqrt(0.1 * edge / (3 * d))
    scatter = rows.T @ rows + (basis * np.asarray(spikes) * edge) @ basis.T
    noise = gue_noise if hermitian else goe_noise
    return scatter + noise(make_generator(seed), d, sigma), basis


def _sin(vectors, exact):
    """Largest principal angle's sine between two (d, k) orthonormal bases,
    real or complex."""
    cosines = np.linalg.svd(exact.conj().T @ vectors, compute_uv=False)
    return math.sqrt(max(0.0, 1.0 - cosines.min() ** 2))


class _Counted:
    """A matrix that counts its products with blocks."""

    def __init__(self, matrix):
        self.matrix, self.shape, self.dtype = matrix, matrix.shape, matrix.dtype
        self.products = 0

    def __matmul__(self, block):
        self.products += 1
        return self.matrix @ block


@pytest.mark.parametrize("k", [3, 60])
def test_the_filtered_solver_counts_its_products(k):
    """With a floor and both parameters "auto", 11 products (8 where k ≥ d/10)
    instead of the range finder's 16 (10), and as many as the path's cost
    model is told; an explicit iterated_power runs the range finder."""
    from sklearn_dppca._spectrum import solver_products, top_eigenpairs

    matrix, _ = _release(400, (3.0, 2.0), 1.0)
    counted = _Counted(matrix)
    top_eigenpairs(counted, k, "randomized", np.random.default_rng(0),
                   floor=kernel_floor(1.0, 400))
    assert counted.products == solver_products(k, 400, filtered=True)
    assert counted.products == (11 if k < 40 else 8)
    counted = _Counted(matrix)
    top_eigenpairs(counted, k, "randomized", np.random.default_rng(0),
                   floor=kernel_floor(1.0, 400), iterated_power=7)
    assert counted.products == 16 == solver_products(k, 400, iterated_power=7,
                                                     filtered=True)


def test_the_filtered_solver_finds_the_top_eigenpairs_of_a_release():
    """Spikes out of the noise: the eigenpairs of the matrix itself, the
    values to a relative 1e-6 and the vectors to a sine of 1e-3; without a
    floor the range finder runs (a different basis, the same pairs)."""
    from sklearn_dppca._spectrum import top_eigenpairs

    d, sigma = 500, 1.0
    matrix, _ = _release(d, (4.0, 3.0, 2.0), sigma)
    exact_values, exact_vectors = np.linalg.eigh(matrix)
    values, vectors = top_eigenpairs(matrix, 3, "randomized",
                                     np.random.default_rng(1),
                                     floor=kernel_floor(sigma, d),
                                     shift=-np.trace(matrix) / d)
    np.testing.assert_allclose(values, exact_values[::-1][:3], rtol=1e-6)
    assert principal_sin(vectors.T, exact_vectors[:, ::-1][:, :3]) < 1e-3
    np.testing.assert_allclose(vectors.T @ vectors, np.eye(3), atol=1e-10)


@pytest.mark.parametrize("hermitian", [False, True])
@pytest.mark.parametrize("spikes, near_edge", [((0.8, 0.6, 0.5), True),
                                                ((1.6, 1.35, 1.2), False)])
def test_the_filtered_solver_is_as_accurate_in_fewer_products(spikes, near_edge,
                                                              hermitian):
    """Over four seeds, the filtered solver's 11 products against the range
    finder's 16, on the exact top 3 of the matrix (PrivatePCA's GOE kernel
    and ComplexGaussPCA's GUE one). Where the top eigenvalues stand just
    above the bulk (a private release's resolved ones: 1.27, 1.17 and 1.15
    times the kernel's edge, the bulk's at 1.13), it comes much closer
    (measured 0.38 against 0.66 with the GOE kernel, 0.35 against 0.60 with
    the GUE one); where they stand well out of it, both converge (below
    0.01)."""
    from sklearn_dppca._spectrum import top_eigenpairs

    d, sigma = 800, 1.0
    floor = kernel_floor(sigma, d, hermitian)
    filtered, finder = [], []
    for seed in range(4):
        matrix, _ = _release(d, spikes, sigma, seed=seed, hermitian=hermitian)
        # only the top 3 of the 800 eigenvectors: LAPACK's subset driver
        exact = scipy.linalg.eigh(matrix, subset_by_index=[d - 3, d - 1])[1][:, ::-1]
        shift = -np.trace(matrix).real / d
        for out, extra in ((filtered, {"floor": floor}),
                           (finder, {"iterated_power": 7})):
            vectors = top_eigenpairs(matrix, 3, "randomized",
                                     np.random.default_rng(seed + 10),
                                     shift=shift, **extra)[1]
            out.append(_sin(vectors, exact))
    if near_edge:
        assert np.mean(filtered) < 0.8 * np.mean(finder)
    else:
        assert max(filtered) < 0.03 and max(finder) < 0.03


def test_the_floor_is_below_every_release():
    """kernel_floor lies below the smallest eigenvalue of the GOE and GUE
    kernels (and so of a positive semidefinite scatter plus one), on every
    draw; and, from
    a few hundred features on, within a tenth of the semicircle's edge."""
    for noise, hermitian in ((goe_noise, False), (gue_noise, True)):
        for d in (50, 300):
            floor = kernel_floor(2.0, d, hermitian)
            for seed in range(20):
                smallest = np.linalg.eigvalsh(noise(make_generator(seed), d, 2.0))[0]
                assert floor < smallest
                if d >= 300:
                    assert smallest < 0.9 * floor / FLOOR_MARGIN


@pytest.mark.parametrize("Est, options", [
    (PrivatePCA, {"svd_solver": "arpack"}),
    (PrivatePCA, {"svd_solver": "randomized"}),
    (PrivatePCA, {"svd_solver": "randomized", "iterated_power": 1}),
    (PrivatePCA, {"path": "matrix_free"}),
    (ComplexGaussPCA, {"svd_solver": "randomized"}),
    (ComplexGaussPCA, {"path": "matrix_free"}),
    (CoherentPowerPCA, {}),
])
@pytest.mark.parametrize("scale", [1e-100, 1e100])
def test_truncated_solvers_hold_at_any_admitted_norm_bound(Est, options, scale):
    """The squares of the eigenvalues the truncated solvers leave out, and
    the filtered solver's spread, were summed in the release's units: at a
    bound of 1e100 they overflowed and at 1e-100 they underflowed, and the
    fit failed after its charge (review 59). Scaled rows with a scaled bound
    now give the scaled release of the same seed."""
    X = np.random.default_rng(0).standard_normal((600, 80)) * np.linspace(3, 0.1, 80)
    X /= np.linalg.norm(X, axis=1).max()
    fits = [Est(4, epsilon=1.0, data_norm=c, random_state=1, **options).fit(X * c)
            for c in (1.0, scale)]
    np.testing.assert_allclose(fits[1].explained_variance_ / scale**2,
                               fits[0].explained_variance_, rtol=1e-6)
    np.testing.assert_allclose(fits[1].noise_variance_ / scale**2,
                               fits[0].noise_variance_, rtol=1e-6)
    assert principal_sin(fits[0].components_, fits[1].components_.T) < 1e-6


def test_arpack_without_noise_holds_at_a_tiny_norm_bound():
    """At epsilon=inf (no noise scale) ARPACK ran on the matrix itself, whose
    entries near 1e-200 underflow its tolerances: components 0.086 from
    scikit-learn's (review 60). It now runs in units of the mean diagonal."""
    X = np.random.default_rng(0).standard_normal((500, 40)) * np.linspace(3, 0.1, 40)
    X /= np.linalg.norm(X, axis=1).max()
    ref = PCA(5, svd_solver="arpack").fit(X)
    with pytest.warns(Warning):
        est = PrivatePCA(5, epsilon=math.inf, data_norm=1e-100,
                         svd_solver="arpack").fit(X * 1e-100)
    np.testing.assert_allclose(est.explained_variance_ / 1e-200,
                               ref.explained_variance_, rtol=1e-8)
    assert principal_sin(ref.components_, est.components_.T) < 1e-8
