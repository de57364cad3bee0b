"""ComplexGaussPCA: the Hermitian kernel, the real-projection lemma, k = d."""

import numpy as np
import pytest
from scipy import stats

from sklearn_dppca import ComplexGaussPCA, PrivatePCA
from sklearn_dppca._complex_gauss_pca import hermitian_release, real_rank_k
from sklearn_dppca.noise import add_goe_noise, goe_noise, make_generator

from .conftest import make_planted
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
