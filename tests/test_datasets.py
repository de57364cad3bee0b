"""Tests of the synthetic generator and the real-data loaders."""

import numpy as np
import pytest
from scipy import sparse
from sklearn.decomposition import PCA

from sklearn_dppca.datasets import (
    REAL_DATASETS,
    STANDARDISED_NORM_FACTOR,
    load_digits_for_pca,
    load_real_dataset,
    make_coherent_low_rank,
    make_genotypes,
)
from sklearn_dppca.metrics import coherence, principal_angle_sin

N, D, K = 2000, 20, 3


def generate(**kwargs):
    params = dict(n_samples=N, n_features=D, n_components=K, random_state=0)
    params.update(kwargs)
    return make_coherent_low_rank(**params, return_info=True)


def row_norms(X):
    return np.linalg.norm(X, axis=1)


# --------------------------------------------------------------------------
# make_coherent_low_rank: shapes, determinism, norm bound
# --------------------------------------------------------------------------
def test_shapes_and_info():
    X, V, info = generate(coherence=0.2)
    assert X.shape == (N, D) and X.dtype == np.float64
    assert V.shape == (K, D)
    assert info.eigenvalues.shape == (D,)
    assert info.singular_values.shape == (K,)
    assert info.left_singular_vectors.shape == (N, K)
    assert info.n_signal_rows == round(K / 0.2**2)
    out = make_coherent_low_rank(N, D, K, random_state=0)
    assert isinstance(out, tuple) and len(out) == 2


def test_deterministic_for_an_int_seed():
    a = make_coherent_low_rank(500, 10, 2, coherence=0.3, random_state=42)
    b = make_coherent_low_rank(500, 10, 2, coherence=0.3, random_state=42)
    c = make_coherent_low_rank(500, 10, 2, coherence=0.3, random_state=43)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])
    g = make_coherent_low_rank(500, 10, 2, random_state=np.random.default_rng(7))
    h = make_coherent_low_rank(500, 10, 2, random_state=np.random.default_rng(7))
    np.testing.assert_array_equal(g[0], h[0])


@pytest.mark.parametrize("data_norm", [1.0, 3.5])
@pytest.mark.parametrize("coh", [None, 0.05, 0.5])
def test_rows_lie_in_the_ball_and_fill_it(data_norm, coh):
    X, _, _ = generate(coherence=coh, data_norm=data_norm)
    norms = row_norms(X)
    assert norms.max() <= data_norm * (1 + 1e-12)
    assert norms.max() == pytest.approx(data_norm)  # the longest row is on it


def test_noise_free_data_is_exactly_rank_k():
    X, V, info = generate(eigengap=1.0, coherence=0.1)
    U, s = info.left_singular_vectors, info.singular_values
    np.testing.assert_allclose(X, (U * s) @ V, atol=1e-14)
    assert info.noise_std == 0.0
    assert np.linalg.matrix_rank(X) == K


def test_projections_on_the_components_are_exactly_the_signal():
    X, V, info = generate(eigengap=0.3, spread=4.0)
    U, s = info.left_singular_vectors, info.singular_values
    np.testing.assert_allclose(X @ V.T, U * s, atol=1e-12)
    np.testing.assert_allclose(U.T @ U, np.eye(K), atol=1e-12)
    np.testing.assert_allclose(U.sum(axis=0), 0.0, atol=1e-12)  # mean zero


# --------------------------------------------------------------------------
# make_coherent_low_rank: the population spectrum
# --------------------------------------------------------------------------
@pytest.mark.parametrize("eigengap", [0.2, 0.5, 1.0])
@pytest.mark.parametrize("spread", [1.0, 10.0])
def test_population_spectrum(eigengap, spread):
    X, V, info = generate(eigengap=eigengap, spread=spread, coherence=0.1)
    lam = info.eigenvalues
    top, rest = lam[:K], lam[K:]
    assert top[0] / top[-1] == pytest.approx(spread)
    np.testing.assert_allclose(top[1:] / top[:-1], spread ** (-1 / (K - 1)))
    assert (top[-1] - rest[0]) / top[-1] == pytest.approx(eigengap)
    np.testing.assert_allclose(rest, rest[0])
    assert info.noise_std**2 == pytest.approx(rest[0])
    np.testing.assert_allclose(info.singular_values**2 / N, top)

    # the population covariance built from V and the spectrum ...
    np.testing.assert_allclose(V @ V.T, np.eye(K), atol=1e-12)
    cov = (V.T * (top - rest[0])) @ V + rest[0] * np.eye(D)
    w, vecs = np.linalg.eigh(cov)
    np.testing.assert_allclose(w[::-1], lam, rtol=1e-10, atol=1e-15)
    # ... has the components as its top-k eigenvectors
    assert principal_angle_sin(vecs[:, -K:].T, V) < 1e-10
    if spread > 1.0:  # distinct eigenvalues: each direction, in order
        overlaps = np.abs(vecs[:, ::-1][:, :K].T @ V.T)
        np.testing.assert_allclose(overlaps, np.eye(K), atol=1e-10)


def test_sample_matches_the_population():
    X, V, info = generate(n_samples=20_000, eigengap=0.5, spread=3.0)
    lam = info.eigenvalues
    second_moment = X.T @ X / X.shape[0]
    # exactly the top-k eigenvalues along V (noise is orthogonal to V) ...
    np.testing.assert_allclose(
        V @ second_moment @ V.T, np.diag(lam[:K]), rtol=1e-10, atol=1e-14
    )
    # ... the noise level on average in the complement ...
    complement = np.eye(D) - V.T @ V
    assert np.trace(complement @ second_moment) / (D - K) == pytest.approx(
        lam[K], rel=0.02
    )
    # ... and the sample's top-k eigenspace is V's
    _, vecs = np.linalg.eigh(second_moment)
    assert principal_angle_sin(vecs[:, -K:].T, V) < 0.05
    np.testing.assert_allclose(X.mean(axis=0) @ V.T, 0.0, atol=1e-12)


# --------------------------------------------------------------------------
# make_coherent_low_rank: realised coherence tracks the request
# --------------------------------------------------------------------------
@pytest.mark.parametrize("spread", [1.0, 10.0])
@pytest.mark.parametrize("target", [np.sqrt(K / N), 0.1, 0.3, 0.6, 1.0])
def test_realised_coherence_tracks_the_request(target, spread):
    X, _, info = generate(coherence=target, spread=spread, eigengap=0.5)
    realised = coherence(X, n_components=K)
    assert target / 2 <= realised <= 2 * target
    assert target / 2 <= info.coherence <= 2 * target


def test_incoherent_default_is_at_the_gaussian_level():
    X, _, info = generate(coherence=None)
    expected = np.sqrt(2 * np.log(N * K) / N)
    assert expected / 2 <= coherence(X, n_components=K) <= 2 * expected
    assert info.n_signal_rows == N


def test_coherence_orders_the_datasets():
    values = [
        coherence(generate(coherence=c)[0], n_components=K)
        for c in (np.sqrt(K / N), 0.05, 0.2, 0.8)
    ]
    assert values == sorted(values)


# --------------------------------------------------------------------------
# make_coherent_low_rank: validation
# --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n_samples=1), "n_samples"),
        (dict(n_samples=100.0), "n_samples"),
        (dict(n_features=1), "n_features"),
        (dict(n_components=0), "n_components"),
        (dict(n_components=D), "n_components"),
        (dict(n_components=True), "n_components"),
        (dict(coherence=0.0), "coherence"),
        (dict(coherence=1.5), "coherence"),
        (dict(coherence=0.5 * np.sqrt(K / N)), r"√\(k/n\)"),
        (dict(coherence="high"), "coherence"),
        (dict(eigengap=0.0), "eigengap"),
        (dict(eigengap=1.1), "eigengap"),
        (dict(spread=0.5), "spread"),
        (dict(spread=np.inf), "spread"),
        (dict(data_norm=0.0), "data_norm"),
        (dict(data_norm=np.nan), "data_norm"),
        (dict(data_norm=1e155), "data_norm"),  # its square: not a float
        (dict(random_state="seed"), "random_state"),
        (dict(random_state=-1), "random_state must be a non-negative int"),
        (dict(return_info="no"), "return_info must be a bool"),
        (dict(data_norm=1e-150, spread=1e10, return_info=True), "underflow"),
    ],
)
def test_invalid_parameters(kwargs, match):
    params = dict(n_samples=N, n_features=D, n_components=K, random_state=0)
    params.update(kwargs)
    with pytest.raises(ValueError, match=match):
        make_coherent_low_rank(**params)


def test_smallest_coherence_is_accepted():
    X, _, info = generate(coherence=np.sqrt(K / N))
    assert info.n_signal_rows == N


# --------------------------------------------------------------------------
# make_genotypes
# --------------------------------------------------------------------------
def test_genotypes_shapes_values_and_balanced_labels():
    X, populations = make_genotypes(301, 500, 3, random_state=0)
    assert isinstance(X, np.ndarray) and X.shape == (301, 500)
    assert X.dtype == np.float64
    assert set(np.unique(X).tolist()) == {0.0, 1.0, 2.0}
    assert populations.shape == (301,)
    assert sorted(np.bincount(populations).tolist()) == [100, 100, 101]
    assert not np.array_equal(populations, np.sort(populations))  # random order
    X32, _ = make_genotypes(50, 40, 2, dtype=np.float32, random_state=0)
    assert X32.dtype == np.float32


def test_genotypes_deterministic_for_an_int_seed():
    a = make_genotypes(200, 300, random_state=42)
    b = make_genotypes(200, 300, random_state=42)
    c = make_genotypes(200, 300, random_state=43)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_genotypes_sparse_equals_dense(dtype):
    # 3 000 columns: several row blocks, so the blocks are stacked in order
    dense, labels = make_genotypes(1200, 3000, 4, random_state=1, dtype=dtype)
    csr, labels_csr = make_genotypes(1200, 3000, 4, sparse=True, random_state=1,
                                     dtype=dtype)
    assert sparse.issparse(csr) and csr.format == "csr" and csr.dtype == dtype
    np.testing.assert_array_equal(csr.toarray(), dense)
    np.testing.assert_array_equal(labels_csr, labels)
    assert csr.nnz == np.count_nonzero(dense)


def test_genotypes_follow_the_balding_nichols_model():
    fst, maf_range = 0.1, (0.1, 0.4)
    X, populations, info = make_genotypes(
        3000, 4000, 2, fst=fst, maf_range=maf_range, return_info=True,
        random_state=0)
    p, freqs = info.ancestral_frequencies, info.population_frequencies
    assert p.shape == (4000,) and freqs.shape == (2, 4000)
    assert maf_range[0] <= p.min() and p.max() <= maf_range[1]
    # drift: Var(p_kj − p_j) = F p_j (1 − p_j), averaged over the variants
    drift = np.mean((freqs - p) ** 2) / np.mean(p * (1 - p))
    assert drift == pytest.approx(fst, rel=0.1)
    # Binomial(2, p_kj): each population's mean genotype is 2 p_kj
    for k in range(2):
        mean = X[populations == k].mean(axis=0)
        assert np.abs(mean - 2 * freqs[k]).mean() < 0.03


def test_genotypes_public_norm_bound():
    X, _, info = make_genotypes(2000, 3000, return_info=True, random_state=0)
    norms = np.linalg.norm(X, axis=1)
    # the bound is a model quantity: mean + 4 sd of the squared norm
    assert norms.max() <= info.data_norm < 1.1 * norms.max()
    assert info.data_norm <= 2 * np.sqrt(3000)
    # the same parameters give the same bound, whatever the draw
    other = make_genotypes(10, 3000, return_info=True, random_state=5)[2]
    assert other.data_norm == info.data_norm


def test_genotypes_populations_separate_in_the_top_two_components():
    X, populations = make_genotypes(300, 2000, 3, fst=0.05, random_state=0)
    Z = PCA(2, svd_solver="full").fit_transform(X)
    centres = np.array([Z[populations == k].mean(axis=0) for k in range(3)])
    nearest = np.argmin(((Z[:, None, :] - centres) ** 2).sum(axis=2), axis=1)
    assert np.mean(nearest == populations) >= 0.95


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n_samples=0), "n_samples"),
        (dict(n_variants=0), "n_variants"),
        (dict(n_populations=0), "n_populations"),
        (dict(n_samples=2, n_populations=3), "n_populations"),
        (dict(fst=0.0), "fst"),
        (dict(fst=1.0), "fst"),
        (dict(fst=1e-310), "fst"),  # subnormal: (1 - F) / F overflows
        (dict(maf_range=(0.0, 0.5)), "maf_range"),
        (dict(maf_range=(0.3, 0.2)), "maf_range"),
        (dict(maf_range=(0.1, 0.6)), "maf_range"),
        (dict(maf_range=0.1), "maf_range"),
        (dict(sparse="yes"), "sparse"),
        (dict(dtype=np.int8), "dtype"),
        (dict(dtype="floatx"), "got 'floatx'"),
        (dict(dtype=np.float16, sparse=True), "sparse=True takes dtype float32"),
        (dict(return_info="no"), "return_info must be a bool"),
        (dict(random_state="seed"), "random_state"),
    ],
)
def test_genotypes_invalid_parameters(kwargs, match):
    params = dict(n_samples=30, n_variants=20, random_state=0)
    params.update(kwargs)
    with pytest.raises(ValueError, match=match):
        make_genotypes(**params)


# --------------------------------------------------------------------------
# Real data
# --------------------------------------------------------------------------
SHAPES = {
    "digits": (1797, 64),
    "breast_cancer": (569, 30),
    "wine": (178, 13),
    "diabetes": (442, 10),
}


@pytest.mark.parametrize("name", REAL_DATASETS)
def test_loaders_return_finite_scaled_data(name):
    bunch = load_real_dataset(name)
    X = bunch.data
    assert X.shape == SHAPES[name] and X.dtype == np.float64
    assert np.all(np.isfinite(X))
    assert len(bunch.feature_names) == X.shape[1]
    assert bunch.target.shape == (X.shape[0],)
    assert isinstance(bunch.description, str) and bunch.description
    assert bunch.data_norm > 0
    # few rows lie beyond the recommended norm bound
    assert np.mean(row_norms(X) > bunch.data_norm) < 0.05
    if bunch.public_scaling:
        assert "public" in bunch.description
    else:
        assert "NOT private" in bunch.description
        assert bunch.data_norm == pytest.approx(
            STANDARDISED_NORM_FACTOR * np.sqrt(X.shape[1])
        )
        np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=1e-12)
        np.testing.assert_allclose(X.std(axis=0), 1.0)


def test_digits_use_the_public_pixel_range():
    digits = load_digits_for_pca()
    X = digits.data
    assert digits.public_scaling
    assert X.min() >= 0.0 and X.max() <= 1.0
    assert digits.data_norm == 8.0
    assert row_norms(X).max() <= digits.data_norm
    np.testing.assert_array_equal(X, load_real_dataset("digits").data)


@pytest.mark.parametrize("name", ["iris", "DIGITS", None])
def test_unknown_dataset(name):
    with pytest.raises(ValueError, match="name must be one of"):
        load_real_dataset(name)
