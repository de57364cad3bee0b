"""ComplexGaussPCA: the Hermitian kernel, the real-projection lemma, k = d,
and the matrix-free path (the GUE kernel never formed)."""

import numpy as np
import pytest
from scipy import sparse, stats

from sklearn_dppca import BudgetAccountant, ComplexGaussPCA, PrivatePCA
from sklearn_dppca._complex_gauss_pca import hermitian_release, real_rank_k
from sklearn_dppca._rows import ImplicitScatter
from sklearn_dppca._stats import clipped_gram
from sklearn_dppca.audit import audit, neighbouring_datasets, subspace_statistic
from sklearn_dppca.noise import (
    ImplicitGOE,
    ImplicitGUE,
    add_goe_noise,
    goe_noise,
    make_generator,
)
from sklearn_dppca.privacy import gdp_mu

from .conftest import make_planted
from .test_matrix_free import paths_over_seeds, spiked, traced_peak
from .test_private_pca import principal_sin, released_matrix, symmetric_coordinates

pytestmark = pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")


def test_imaginary_noise_is_antisymmetric_and_independent_of_the_data():
    """Same seed, different data: the noise M̂ − M is the same matrix."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=(50, 6))
    b = rng.normal(size=(80, 6)) * 3.0
    noise_a = hermitian_release(a.T @ a, 0.7, make_generator(5)) - a.T @ a
    noise_b = hermitian_release(b.T @ b, 0.7, make_generator(5)) - b.T @ b
    np.testing.assert_allclose(noise_a, noise_b, atol=1e-12)
    np.testing.assert_array_equal(noise_a.imag, -noise_a.imag.T)
    assert np.all(np.diag(noise_a.imag) == 0)


def test_real_part_is_exactly_the_goe_kernel():
    """Re H equals PrivatePCA's GOE draw from the same state; hence same law."""
    sigma = 1.3
    coords = []
    for seed in range(30):
        hermitian = hermitian_release(np.zeros((12, 12)), sigma, make_generator(seed))
        real = add_goe_noise(make_generator(seed), np.zeros((12, 12)), sigma)
        np.testing.assert_array_equal(hermitian.real, real)
        np.testing.assert_allclose(real, goe_noise(make_generator(seed), 12, sigma),
                                   rtol=1e-12, atol=1e-14)
        coords.append(symmetric_coordinates(hermitian.real) / sigma)
    z = np.concatenate(coords)
    assert stats.kstest(z, "norm").pvalue > 1e-3


def random_psd(rng, d, decay):
    basis, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return (basis * decay ** np.arange(d)) @ basis.T * 50.0


def best_rank_k(matrix, k):
    values, vectors = np.linalg.eigh(matrix)
    top = vectors[:, -k:]
    return (top * values[-k:]) @ top.T


@pytest.mark.parametrize("seed", range(20))
def test_real_projection_lemma(seed):
    """‖Ψ − M_k‖_F ≤ 2‖Ψ̂ − M_k‖_F, Ψ the best real rank-k of Re Ψ̂ (privacy.rst §6)."""
    rng = np.random.default_rng(seed)
    d = int(rng.integers(4, 25))
    k = int(rng.integers(1, d))
    M = random_psd(rng, d, decay=rng.uniform(0.5, 0.99))
    noisy = hermitian_release(M, rng.uniform(0.1, 10.0), make_generator(seed))
    values, vectors = np.linalg.eigh(noisy)
    values, basis = values[-k:], vectors[:, -k:]
    psi_hat = (basis * values) @ basis.conj().T
    psi_values, psi_vectors = real_rank_k(basis, values)
    psi = (psi_vectors * psi_values) @ psi_vectors.T
    target = best_rank_k(M, k)
    assert np.linalg.norm(psi - target) <= 2 * np.linalg.norm(psi_hat - target) + 1e-9
    # the low-rank route equals the direct eigendecomposition of Re Ψ̂
    np.testing.assert_allclose(psi, best_rank_k(psi_hat.real, k), atol=1e-8)


def test_all_components_reproduce_the_real_release():
    """k = d: Ψ is Re M̂ — PrivatePCA's release with the same seed."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(4000, 8)) * 0.5
    complex_fit = ComplexGaussPCA(epsilon=0.5, data_norm=2.0, random_state=11).fit(X)
    real_fit = PrivatePCA(epsilon=0.5, data_norm=2.0, random_state=11).fit(X)
    np.testing.assert_allclose(
        complex_fit.covariance_approximation_ * (len(X) - 1),
        released_matrix(real_fit),
        rtol=1e-9,
        atol=1e-7,
    )
    np.testing.assert_array_equal(complex_fit.mean_, real_fit.mean_)
    assert complex_fit.privacy_spent_ == real_fit.privacy_spent_


@pytest.mark.parametrize("target", ["covariance", "subspace"])
def test_covariance_approximation_is_consistent(planted, target):
    X, basis = planted
    pca = ComplexGaussPCA(3, target=target, data_norm=1.0, random_state=0).fit(X)
    psi = pca.covariance_approximation_
    assert np.linalg.matrix_rank(psi) == 3
    np.testing.assert_allclose(psi, psi.T)
    C = pca.components_
    np.testing.assert_allclose(C @ C.T, np.eye(3), atol=1e-10)
    # Ψ as released (its own eigenvalues); the model puts the de-noised
    # captured variances on the same components
    np.testing.assert_allclose(psi, (C.T * pca.noisy_variance_) @ C, atol=1e-12)
    assert np.all(pca.captured_variance_ >= pca.noise_variance_)
    model = (C.T * pca.captured_variance_) @ C
    expected = model + pca.noise_variance_ * (np.eye(X.shape[1]) - C.T @ C)
    np.testing.assert_allclose(pca.get_covariance(), expected, atol=1e-12)
    assert principal_sin(C, basis) < 0.1


def test_subspace_target_at_epsilon_one_recovers_planted_subspace():
    X, basis = make_planted(n=100_000, d=20, seed=4)
    pca = ComplexGaussPCA(3, target="subspace", data_norm=1.0, random_state=0).fit(X)
    assert principal_sin(pca.components_, basis) < 0.03


def test_rank_k_error_is_within_the_lemma_of_the_real_mechanism():
    """On a planted spectrum both mechanisms land near M_k, at the same budget."""
    X, _ = make_planted(n=20_000, d=12, seed=8)
    centred = X - X.mean(0)
    target = best_rank_k(centred.T @ centred / (len(X) - 1), 3)
    errors = {}
    for est in (PrivatePCA, ComplexGaussPCA):
        fits = [est(3, data_norm=1.0, random_state=s).fit(X) for s in range(5)]
        errors[est] = np.mean(
            [
                np.linalg.norm(
                    (f.components_.T * f.explained_variance_) @ f.components_ - target
                )
                for f in fits
            ]
        )
    scale = np.linalg.norm(target)
    assert errors[ComplexGaussPCA] < 0.05 * scale
    assert errors[PrivatePCA] < 0.05 * scale


# --- the matrix-free path (issue 31) -----------------------------------------
def test_the_implicit_gue_kernel_has_the_gue_law_and_is_one_matrix():
    """``ImplicitGUE``: exactly Hermitian, its real part the ``ImplicitGOE``
    drawn from the same generator state (PrivatePCA's matrix-free kernel),
    its imaginary part antisymmetric with independent entries; entries of
    the law of ``gue_noise`` (σ²/2 off the diagonal, each part; σ² on it);
    the same matrix whatever the threads and the cache."""
    sigma, d = 2.0, 900
    H = ImplicitGUE(make_generator(0), d, sigma, block=256, n_threads=2)
    dense = H @ np.eye(d)
    np.testing.assert_array_equal(dense, dense.conj().T)
    assert not np.any(np.diag(dense).imag)
    real = ImplicitGOE(make_generator(0), d, sigma, block=256) @ np.eye(d)
    np.testing.assert_array_equal(dense.real, real)
    upper = np.triu_indices(d, 1)
    for part in (dense.real[upper], dense.imag[upper]):
        assert abs(part.var() / (sigma**2 / 2) - 1.0) < 0.02
    assert abs(np.diag(dense).real.var() / sigma**2 - 1.0) < 0.2
    assert abs(np.corrcoef(dense.real[upper], dense.imag[upper])[0, 1]) < 0.01
    assert np.isclose(H.trace(), np.trace(dense).real, rtol=1e-9)
    V = (np.random.default_rng(1).standard_normal((d, 4))
         + 1j * np.random.default_rng(2).standard_normal((d, 4)))
    again = ImplicitGUE(make_generator(0), d, sigma, block=256,
                        cache_bytes=2**30) @ V
    atol = 1e-5 * np.abs(again).max()  # single-precision products
    np.testing.assert_allclose(again, dense @ V, rtol=0, atol=atol)
    np.testing.assert_allclose(H @ V, again, rtol=0, atol=atol)


def cg_mf(k=3, **params):
    params.setdefault("accountant", BudgetAccountant())
    params.setdefault("path", "matrix_free")
    params.setdefault("svd_solver", "randomized")
    return ComplexGaussPCA(k, **params)


@pytest.mark.parametrize("target", ["covariance", "subspace"])
def test_without_noise_the_matrix_free_fit_is_the_dense_one(target):
    """The same release and post-processing: with ε = ∞ (no noise) the two
    paths' components, spectra and Ψ agree to the solvers' accuracy."""
    X, _ = spiked(1500, 400, seed=3)
    fits = [cg_mf(epsilon=np.inf, data_norm=1.5, target=target, path=path,
                  random_state=0).fit(X) for path in ("dense", "matrix_free")]
    dense, free = fits
    assert (dense.path_, free.path_) == ("dense", "matrix_free")
    np.testing.assert_allclose(np.abs(free.components_ @ dense.components_.T),
                               np.eye(3), atol=1e-6)
    np.testing.assert_allclose(free.explained_variance_, dense.explained_variance_,
                               rtol=1e-6)
    np.testing.assert_allclose(free.covariance_approximation_,
                               dense.covariance_approximation_, atol=1e-9)


def test_with_noise_the_paths_agree_in_accuracy_and_spectrum():
    """The same mechanism: over seeds, the matrix-free fit's error and
    spectrum match the dense path's with the same solver."""
    X, basis = spiked(3000, 600, k=3, seed=2)
    errors, spectra, _ = paths_over_seeds(X, basis, ("dense", "matrix_free"),
                                          estimator=ComplexGaussPCA)
    assert errors["dense"] < 0.5
    assert abs(errors["matrix_free"] - errors["dense"]) < 0.05
    assert np.allclose(spectra["matrix_free"], spectra["dense"], rtol=0.05)


class MaterialisedGauss(ComplexGaussPCA):
    """Keeps the Hermitian release of a matrix-free fit, materialised, and
    the exact scatter matrix it stands for."""

    def _truncated_eigenpairs(self, noisy, sigma, trace, rng):
        result = super()._truncated_eigenpairs(noisy, sigma, trace, rng)
        if isinstance(noisy, ImplicitScatter):
            self.released_ = noisy @ np.eye(noisy.shape[0], dtype=complex)
            self.exact_ = noisy.rows.data_norm ** 2 * clipped_gram(
                noisy.rows.X, noisy.rows.data_norm, noisy.rows.mean)[0]
        return result


def test_the_matrix_free_release_is_calibrated_to_its_share():
    """μ recovered from the draw: the real part of ``M̂ − G`` is the GOE
    kernel of ``σ = √2 C² / μ_cov``, ``μ_cov = √0.9 μ*`` (PrivatePCA's), the
    imaginary part independent of the data, of the same scale."""
    X, _ = spiked(2000, 1000, seed=1)
    est = MaterialisedGauss(3, epsilon=1.0, delta=1e-6, data_norm=1.5,
                            svd_solver="randomized", path="matrix_free",
                            accountant=BudgetAccountant(), random_state=0).fit(X)
    noise = est.released_ - est.exact_
    assert np.allclose(noise, noise.conj().T, atol=1e-9)
    upper = np.triu_indices(1000, 1)
    expected = gdp_mu(1.0, 1e-6) * np.sqrt(0.9)
    for part in (noise.real[upper], noise.imag[upper]):
        mu = np.sqrt(2.0) * 1.5**2 / (part.std() * np.sqrt(2.0))
        assert abs(mu / expected - 1.0) < 0.01


def test_an_audit_of_the_matrix_free_release_finds_no_more_than_its_claim():
    """Black-box audit at ε = 1 of the released components (neighbours
    differing in one row, orthogonal to the others): below the claim."""
    X, Y = neighbouring_datasets(300, 3, kind="orthogonal", scale=0.3)
    est = ComplexGaussPCA(1, epsilon=1.0, delta=1e-5, data_norm=1.0,
                          svd_solver="randomized", n_oversamples=1,
                          path="matrix_free")
    result = audit(est, X, Y, subspace_statistic, n_fits=300, random_state=9)
    assert result.epsilon_lower <= 1.0


def test_numpy_csr_and_dask_give_the_same_matrix_free_fit():
    da = pytest.importorskip("dask.array")
    X, _ = spiked(1200, 300, seed=4)
    X[X < 0.02] = 0.0
    fits = [cg_mf(epsilon=1.0, data_norm=1.5, random_state=11).fit(data)
            for data in (X, sparse.csr_matrix(X), da.from_array(X, chunks=(400, 300)))]
    for other in fits[1:]:
        assert other.path_ == "matrix_free"
        np.testing.assert_allclose(other.components_, fits[0].components_, atol=1e-6)
        np.testing.assert_allclose(other.explained_variance_,
                                   fits[0].explained_variance_)


def test_the_path_is_chosen_before_the_charge_and_refusals_name_the_one_that_fits():
    X, _ = spiked(300, 2000)
    budget = BudgetAccountant()
    with pytest.raises(ValueError, match="path='matrix_free' needs"):
        cg_mf(data_norm=1.5, svd_solver="full", accountant=budget).fit(X)
    with pytest.raises(ValueError, match="path"):
        ComplexGaussPCA(3, path="noisy_power").fit(X)
    dense_bytes = cg_mf()._memory_needed(300, 2000, "dense")
    with pytest.raises(MemoryError, match=r"ComplexGaussPCA\(.*path='matrix_free'"):
        cg_mf(data_norm=1.5, path="dense", memory_limit=dense_bytes - 1,
              accountant=budget).fit(X)
    assert budget.n_charges == 0
    # "auto" where the dense matrices do not fit: the matrix-free path, even
    # with a kernel cache too small for every block (there is no other)
    limit = min(dense_bytes, 8 * cg_mf()._kernel_bytes(2000)) - 1
    est = cg_mf(epsilon=1.0, data_norm=1.5, path="auto", memory_limit=limit,
                random_state=0).fit(X)
    assert est.path_ == "matrix_free"
    assert est._kernel_cache(2000) < est._kernel_bytes(2000)
    # and where they fit on a small problem, the dense one
    small = cg_mf(epsilon=1.0, data_norm=1.5, path="auto", random_state=0)
    small.fit(X[:, :100])
    assert small.path_ == "dense"


def test_matrix_free_memory_grows_as_d_k_and_psi_is_not_kept():
    """A fraction of one complex d × d matrix (256 MB at d = 4 000) at the
    traced peak; Ψ is computed when read, not kept by the fit."""
    X, _ = spiked(600, 4000, seed=6)
    est = cg_mf(5, epsilon=1.0, data_norm=1.5, random_state=0, memory_limit=1e8)
    peak = traced_peak(est, X)
    assert est.path_ == "matrix_free"
    assert peak < est._memory_needed(600, 4000) < 0.3 * 16 * 4000**2
    assert "covariance_approximation_" not in vars(est)
    with pytest.raises(MemoryError, match="over this estimator's memory_limit"):
        est.covariance_approximation_  # 128 MB, over the fit's 100 MB
    psi = est.set_params(memory_limit="auto").covariance_approximation_
    expected = (est.components_.T @ np.diag(np.maximum(est.noisy_variance_, 0))
                @ est.components_)
    # every entry, compared 250 rows at a time: assert_allclose's temporaries
    # of the whole 4 000 × 4 000 (complex) pair took 3 s
    assert psi.shape == expected.shape
    for a in range(0, psi.shape[0], 250):
        np.testing.assert_allclose(psi[a:a + 250], expected[a:a + 250], atol=1e-12)
    assert not hasattr(ComplexGaussPCA(), "covariance_approximation_")
