"""What a fitted model does with wide and sparse rows (issue 31): ``score``,
``score_samples`` and the private search's validation scores need no
``d × d`` matrix and never densify sparse rows beyond a block.

Each is checked against the formula it replaces (the model's precision
matrix; :func:`clip_rows` of the densified rows) and for its memory at a
width where the old way needed gigabytes.
"""

import math
import tracemalloc
import warnings

import numpy as np
import pytest
from scipy import sparse

from sklearn_dppca import (
    BudgetAccountant,
    CoherentPowerPCA,
    ComplexGaussPCA,
    PrivatePCA,
)
from sklearn_dppca._row_maps import clip_rows, clipped_projections
from sklearn_dppca._search_run import _cumulative_gains
from sklearn_dppca.model_selection import PrivateGridSearchCV, captured_variance_rows

pytestmark = pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")


def rows(n, d, seed=0, density=0.2):
    """Sparse non-negative rows with a non-zero mean (CSR)."""
    X = sparse.random(n, d, density=density, random_state=seed, format="csr")
    X.data *= 2.0
    return X


def fit(Est, X, k, **params):
    return Est(k, epsilon=2.0, delta=1e-6, data_norm=3.0, random_state=0,
               accountant=BudgetAccountant(), **params).fit(X)


def precision_form(model, X):
    """The old computation: ``c P cᵀ`` with the model's ``d × d``
    precision, and its log-determinant."""
    centred = np.asarray(X, dtype=np.float64) - model.mean_
    precision = model._host_precision()
    _, variance, residual = model._floored_model()
    d, k = X.shape[1], variance.shape[0]
    logdet = np.log(variance).sum() + (d - k) * math.log(residual)
    quad = np.einsum("ij,ij->i", centred, centred @ precision)
    return -0.5 * (quad + d * math.log(2 * math.pi) + logdet)


@pytest.mark.parametrize("Est", [PrivatePCA, ComplexGaussPCA, CoherentPowerPCA])
@pytest.mark.parametrize("k", [0, 3, 12])
@pytest.mark.parametrize("whiten", [False, True])
def test_score_samples_is_the_precision_form(Est, k, whiten):
    if Est is CoherentPowerPCA and k == 0:
        pytest.skip("CoherentPowerPCA needs at least one component")
    X = rows(600, 12).toarray()
    model = fit(Est, X, k, whiten=whiten)
    expected = precision_form(model, X)
    np.testing.assert_allclose(model.score_samples(X), expected, rtol=1e-9)
    assert model.score(X) == pytest.approx(expected.mean(), rel=1e-9)
    # float32 rows: the same, computed in float64, returned in float32
    got = model.score_samples(X.astype(np.float32))
    np.testing.assert_allclose(got, precision_form(model, X.astype(np.float32)),
                               rtol=1e-5)


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_sparse_rows_score_as_their_dense_copy(fmt):
    X = rows(800, 40, seed=1)
    model = fit(PrivatePCA, X, 5)
    Z = X.asformat(fmt)
    before = Z.copy()
    np.testing.assert_allclose(model.score_samples(Z), model.score_samples(X.toarray()),
                               rtol=1e-10)
    assert model.score(Z) == pytest.approx(model.score(X.toarray()), rel=1e-10)
    assert (Z != before).nnz == 0  # the caller's matrix is unchanged
    # a square that overflows: -inf as dense, not inf - inf = NaN (review 50)
    far = X[:3].toarray()
    far[1, 0] = 1e160
    np.testing.assert_allclose(model.score_samples(sparse.csr_matrix(far)),
                               model.score_samples(far), rtol=1e-12)
    assert model.score_samples(far)[1] == -np.inf
    # a product with mean_ that overflows: non_finite="clip" maps inf to
    # 1.8e308, whose term beside a mean of 3 is inf - inf (review 52)
    shifted = PrivatePCA(2, data_norm=10.0, non_finite="clip",
                         accountant=BudgetAccountant()).fit(3.0 + X[:400].toarray())
    row = np.full((2, X.shape[1]), 3.0)
    row[0, 0] = np.inf
    np.testing.assert_allclose(shifted.score_samples(sparse.csr_matrix(row)),
                               shifted.score_samples(row), rtol=1e-8)


def test_score_at_a_wide_shape_needs_no_d_by_d_matrix():
    """d = 20 000: the precision matrix alone would take 3.2 GB, the rows
    densified 160 MB; the score takes a few n × k arrays."""
    X = rows(1000, 20_000, seed=2, density=0.002)
    model = fit(PrivatePCA, X, 5, path="noisy_power")
    tracemalloc.start()
    try:
        score = model.score(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert math.isfinite(score)
    assert peak < 16 * 2**20, peak
    dense = X[:200].toarray()  # the block-wise dense path agrees on a slice
    np.testing.assert_allclose(model.score_samples(dense), model.score_samples(X[:200]),
                               rtol=1e-10)


# --- the search's validation scores ----------------------------------------
@pytest.mark.parametrize("scale", [1e-200, 1.0, 1e200])
def test_sparse_clipped_projections_equal_clip_rows(scale):
    X = rows(400, 30, seed=3) * scale
    X.data[:4] = [1e300, -1e300, 5e-324, -3.0]
    rng = np.random.default_rng(0)
    basis = np.linalg.qr(rng.standard_normal((30, 4)))[0]
    before = X.copy()
    for centre in (0.0, np.asarray(X.mean(axis=0)).ravel()):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no overflow, no warning
            expected = clip_rows(X.toarray(), 0.5 * scale, centre) @ basis
            for Z in (X, X.tocsc(), X.toarray()):
                got = clipped_projections(Z, 0.5 * scale, centre, basis)
                np.testing.assert_allclose(got, expected, rtol=1e-12,
                                           atol=1e-13 * np.abs(expected).max())
    assert (X != before).nnz == 0


def test_validation_scores_of_wide_sparse_rows_stay_sparse():
    """The captured variance of 2 000 validation rows of 10⁵ features:
    1.6 GB densified, a few MB as they are."""
    # a Generator: scipy's sparse.random with an int seed permutes all
    # 2 * 10**8 cells (27 s) to draw the 20 000 entries
    X = rows(2000, 100_000, seed=np.random.default_rng(4), density=1e-4)
    rng = np.random.default_rng(1)
    components = np.linalg.qr(rng.standard_normal((100_000, 4)))[0].T
    mean = np.full(100_000, 1e-4)
    tracemalloc.start()
    try:
        scores = captured_variance_rows(X, mean, components, 1.0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 * 2**20, peak
    assert np.all((scores >= 0.0) & (scores <= 1.0))
    head = X[:50]
    np.testing.assert_allclose(
        captured_variance_rows(head, mean, components, 1.0),
        captured_variance_rows(head.toarray(), mean, components, 1.0), rtol=1e-10)

    class Step:  # what _cumulative_gains reads of a fitted step
        data_norm_, mean_, components_ = 1.0, mean, components

    gains = _cumulative_gains(X, Step)
    assert gains[-1] == pytest.approx(scores.sum(), rel=1e-9)


def test_a_search_on_sparse_rows_is_the_search_on_their_dense_copy():
    X = rows(1500, 60, seed=5, density=0.1)
    results = []
    for Z in (X, X.toarray()):
        search = PrivateGridSearchCV(
            PrivatePCA(data_norm=2.0), {"n_components": [2, 4, 8]}, epsilon=2.0,
            cv=3, random_state=0, accountant=BudgetAccountant()).fit(Z)
        results.append(search.cv_results_["mean_test_score"])
    np.testing.assert_allclose(results[0], results[1], rtol=1e-8)


def test_dask_rows_score_lazily_chunk_by_chunk():
    """A Dask array is scored chunk by chunk, as it is transformed: never
    gathered into memory; NaN refused when computed (``non_finite="raise"``)."""
    da = pytest.importorskip("dask.array")
    X = rows(1200, 30, seed=6).toarray()
    D = da.from_array(X, chunks=(250, 30))
    model = fit(PrivatePCA, X, 4)
    lazy = model.score_samples(D)
    assert isinstance(lazy, da.Array)
    np.testing.assert_allclose(lazy.compute(), model.score_samples(X), rtol=1e-12)
    assert model.score(D) == pytest.approx(model.score(X), rel=1e-12)
    clean = X.copy()
    X[700, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.score(da.from_array(X, chunks=(250, 30)))
    # transform and inverse_transform refuse them as in memory (review 50:
    # they returned NaN rows silently)
    for bad in (np.nan, np.inf):
        X[700, 3] = bad
        with pytest.raises(ValueError, match="NaN|infinity"):
            model.transform(da.from_array(X, chunks=(250, 30))).compute()
        Z = model.transform(clean)
        Z[700, 0] = bad
        with pytest.raises(ValueError, match="NaN|infinity"):
            model.inverse_transform(da.from_array(Z, chunks=(250, 4))).compute()
    with pytest.raises(TypeError, match="dense data is required"):
        model.inverse_transform(  # CSR chunks: a matmul error before
            da.from_array(model.transform(clean), chunks=(250, 4)).map_blocks(
                sparse.csr_matrix))
    clip = model.set_params(non_finite="clip")
    np.testing.assert_allclose(clip.transform(da.from_array(X, chunks=(250, 30))),
                               clip.transform(X))


@pytest.mark.parametrize("d, expected", [(300, None), (2100, 4)])
def test_shared_fold_fits_of_wide_rows_keep_the_largest_k(d, expected, monkeypatch):
    """A grid over n_components shares one fold fit per fold: with every
    component below SHARED_FULL_FEATURES features, at the grid's largest k
    from there on (a d × d eigendecomposition and the dense path avoided;
    its floor the fit's noise_variance_)."""
    from sklearn_dppca import _search_run

    assert _search_run.SHARED_FULL_FEATURES == 2048
    made = []
    fit_candidate = _search_run._fit_candidate

    def recording(*args, **kwargs):
        fitted = fit_candidate(*args, **kwargs)
        made.append((kwargs.get("full"), fitted.n_components))
        return fitted

    monkeypatch.setattr(_search_run, "_fit_candidate", recording)
    X = rows(400, d, seed=7, density=0.02)
    search = PrivateGridSearchCV(
        PrivatePCA(data_norm=2.0, svd_solver="randomized"),
        {"n_components": [2, 4]}, epsilon=2.0, cv=3,
        accountant=BudgetAccountant()).fit(X)
    folds = made[:3]  # then the refit, with the chosen k
    assert all(fitted_k == expected for _, fitted_k in folds)
    assert all(np.isfinite(search.cv_results_["mean_test_score"]))
    assert search.best_estimator_.n_components in (2, 4)


@pytest.mark.parametrize("Est, name", [(PrivatePCA, "get_covariance"),
                                       (PrivatePCA, "get_precision"),
                                       (ComplexGaussPCA, "covariance_approximation_")])
def test_a_d_by_d_result_over_memory_limit_is_refused_clearly(Est, name):
    """The model's d × d results are refused with a clear error over
    ``memory_limit`` (a post-fit ``set_params``), never run out of memory
    part-way; score needs no such matrix and still runs."""
    X = rows(300, 400, seed=8).toarray()
    model = fit(Est, X, 3).set_params(memory_limit=2e6)  # 2.4 MB needed
    with pytest.raises(MemoryError, match=f"{name} returns a 400 × 400 matrix"):
        value = getattr(model, name)
        value() if callable(value) else None
    assert math.isfinite(model.score(X))
    model.set_params(memory_limit="auto")
    value = getattr(model, name)
    assert (value() if callable(value) else value).shape == (400, 400)


def test_a_search_on_a_dask_array_scores_it_chunk_by_chunk():
    """The search's validation rows and its finiteness check stay lazy on a
    Dask array (never gathered); the search is the one on the same rows in
    memory."""
    da = pytest.importorskip("dask.array")
    from sklearn_dppca._search_run import _all_finite, _host

    X = rows(1500, 40, seed=9).toarray()
    D = da.from_array(X, chunks=(200, 40))
    assert isinstance(_host(D), da.Array) and isinstance(_host(D, "clip"), da.Array)
    bad = X.copy()
    bad[1300, 2] = np.nan
    assert _all_finite(D) and not _all_finite(da.from_array(bad, chunks=(200, 40)))
    results = []
    for Z in (D, X):
        search = PrivateGridSearchCV(
            PrivatePCA(data_norm=2.0), {"n_components": [2, 4]}, epsilon=2.0,
            cv=3, random_state=0, accountant=BudgetAccountant()).fit(Z)
        results.append(search.cv_results_["mean_test_score"])
    np.testing.assert_allclose(results[0], results[1], rtol=1e-8)
