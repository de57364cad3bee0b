"""Sparse rows that store a cell more than once (mend 131): read a block at a
time with their duplicates summed as SciPy sums them (``_blocks.BoxedCSR``
with ``summed``), never a summed copy of every value, which was held for the
whole fit beside a plan that counted none of it (mend 124's r12: 2.07 times
the plan)."""

import warnings

import numpy as np
import pytest
from scipy import sparse

from sklearn_dppca import CoherentPowerPCA, PrivatePCA, _blocks
from sklearn_dppca._blocks import BoxedCSR
from sklearn_dppca._rows import InMemoryRows
from sklearn_dppca.privacy import BudgetAccountant

from .test_matrix_free import traced_peak


def _stored_again(n, d, density, seed=0, copies=4):
    """CSR rows whose cells are each stored 1 to ``copies`` times, in no
    order within a row, and the canonical matrix SciPy reads them as."""
    rng = np.random.default_rng(seed)
    base = sparse.random(n, d, density=density, format="csr", random_state=seed)
    times = rng.integers(1, copies + 1, size=base.nnz)
    rows = np.repeat(np.repeat(np.arange(n), np.diff(base.indptr)), times)
    columns = np.repeat(base.indices, times)
    values = rng.normal(0.0, 0.4, size=rows.size)
    shuffled = rng.permutation(rows.size)
    order = shuffled[np.argsort(rows[shuffled], kind="stable")]
    X = sparse.csr_matrix((values[order], columns[order].astype(np.int32),
                           np.r_[0, np.cumsum(np.bincount(rows, minlength=n))]),
                          shape=(n, d))
    summed = X.copy()
    summed.sum_duplicates()
    return X, summed


def _same_csr(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype
    for a, b in ((got.data, want.data), (got.indices, want.indices),
                 (got.indptr, want.indptr)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_rows_stored_twice_are_read_summed_a_block_at_a_time(monkeypatch, dtype):
    """The fit's rows of a CSR matrix that stores cells twice are a lazy
    view (before: a summed copy of the matrix whole): each block, read in
    parts of a few entries, holds the values, indices and index pointers of
    SciPy's sum of the matrix whole bit for bit (in float64 unless
    float32), rows given by index and the first rows too; ``X`` is not
    modified."""
    monkeypatch.setattr(_blocks, "SUMMED_PART_ENTRIES", 97)
    X, _ = _stored_again(3000, 30, 0.3)
    X, expected = as_dtype_and_summed(X, dtype)
    before = X.copy()
    assert expected.nnz < X.nnz
    rows = InMemoryRows(X).X
    assert isinstance(rows, BoxedCSR) and rows.dtype == expected.dtype
    assert rows.nnz == expected.nnz
    np.testing.assert_array_equal(rows.indptr, expected.indptr)
    for a, b in [(0, 1), (0, 1100), (1100, 2999), (2999, 3000)]:
        _same_csr(rows[a:b], expected[a:b])
    _same_csr(rows[np.array([7, 2, 2900])], expected[[7, 2, 2900]])
    _same_csr(rows.head(40)[0:40], expected[:40])
    _same_csr(before, X)
    np.testing.assert_array_equal(rows.toarray(), expected.toarray())


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_rows_stored_twice_peak_within_the_plan(fmt):
    """Mend 124's r12: each entry of 10⁵ × 60 CSR rows stored twice (as two
    halves). The summed copy of every value, held for the whole fit and in
    no plan, made it peak at 2.07 times its plan (116.5 MB for 56.2); a
    limit between them was not refused. The rows are summed a block at a
    time now: the peak is within the plan, a limit 15% above the plan fits,
    the release is that of the summed rows bit for bit, ``X`` is not
    modified."""
    base = sparse.random(100_000, 60, density=0.5, format="csr", random_state=0) * 0.1
    n, d = base.shape
    count = np.diff(base.indptr)
    first = np.arange(base.nnz) + base.indptr[np.repeat(np.arange(n), count)]
    again = first + np.repeat(count, count)
    X = sparse.csr_matrix((np.zeros(2 * base.nnz), np.zeros(2 * base.nnz, np.int32),
                           np.r_[0, np.cumsum(2 * count)]), shape=(n, d))
    X.data[first] = X.data[again] = base.data / 2
    X.indices[first] = X.indices[again] = base.indices
    X = X.asformat(fmt)
    before = X.copy()

    def estimator(**params):
        return PrivatePCA(2, data_norm=5.0, random_state=0,
                          accountant=BudgetAccountant(), **params)

    est = estimator()
    peak = traced_peak(est, X)
    plan = est._memory_needed(n, d) + est._copy_bytes
    assert peak <= plan
    limited = estimator(memory_limit=1.15 * plan).fit(X)  # not refused
    reference = estimator().fit(base.asformat(fmt))  # halves sum exactly
    for name in ("components_", "mean_", "explained_variance_"):
        np.testing.assert_array_equal(getattr(est, name), getattr(reference, name))
        np.testing.assert_array_equal(getattr(limited, name), getattr(reference, name))
    _same_csr(X.tocsr(), before.tocsr())


@pytest.mark.parametrize("fmt", ["csr", "csc"])
@pytest.mark.parametrize("params", [
    {},
    {"non_finite": "clip", "bounds": (-2.0, 2.0)},
    {"bounds": (0.5, 3.0)},
    {"data_norm": "auto"},
    {"path": "matrix_free", "svd_solver": "randomized"},
])
def test_rows_stored_twice_release_the_summed_rows(monkeypatch, fmt, params):
    """Read in many blocks of many parts, the rows that store cells 1 to 4
    times release what their sum (the canonical matrix) releases, bit for
    bit: the summed copy's release, which a fit gave before."""
    monkeypatch.setattr(_blocks, "SPARSE_BLOCK_ENTRIES", 3000)
    monkeypatch.setattr(_blocks, "SUMMED_PART_ENTRIES", 400)
    X, summed = _stored_again(4000, 25, 0.3, seed=3)
    X.data[::301] = np.nan if params.get("non_finite") else X.data[::301]
    X = X.asformat(fmt)  # CSC: its columns' duplicates, summed as SciPy does
    summed = X.copy()
    summed.sum_duplicates()

    def fit(rows, make=PrivatePCA):
        kwargs = {"data_norm": 2.0, **params}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return make(3, random_state=0, accountant=BudgetAccountant(),
                        **kwargs).fit(rows)

    for make in (PrivatePCA, CoherentPowerPCA):
        if make is CoherentPowerPCA and "path" in params:
            continue
        est, reference = fit(X, make), fit(summed, make)
        for name in ("components_", "mean_", "explained_variance_"):
            np.testing.assert_array_equal(getattr(est, name),
                                          getattr(reference, name))


def as_dtype_and_summed(X, dtype):
    """``X`` (CSR storing cells twice) with its values in ``dtype`` (cast by
    NumPy: SciPy's astype to another dtype returns the duplicates summed;
    integers scaled by 1000), and SciPy's sum of it in float64 (float32
    for float32), the summed rows a fit reads."""
    values = X.data * 1000 if dtype == np.int64 else X.data
    X = sparse.csr_matrix((values.astype(dtype), X.indices, X.indptr), shape=X.shape)
    expected = sparse.csr_matrix((X.data.astype(
        np.float32 if dtype == np.float32 else np.float64), X.indices.copy(),
        X.indptr.copy()), shape=X.shape)
    expected.sum_duplicates()
    return X, expected


def test_a_sum_of_duplicates_beyond_a_float_is_infinite():
    """A cell stored as ``1e308, 1e308`` is read as their sum, infinite:
    refused under ``non_finite="raise"`` (the check reads the summed
    values), mapped to the largest float under ``"clip"``."""
    X, _ = _stored_again(500, 6, 0.5, seed=4, copies=1)
    Y = X.tolil()
    Y[3, 2] = 1e308
    Y = Y.tocsr()
    lo = Y.indptr[3]
    twice = sparse.csr_matrix((np.insert(Y.data, lo, 1e308),
                               np.insert(Y.indices, lo, 2),
                               np.r_[Y.indptr[:4], Y.indptr[4:] + 1]), shape=Y.shape)

    def pca(**params):
        return PrivatePCA(2, data_norm=2.0, random_state=0,
                          accountant=BudgetAccountant(), **params)

    with pytest.raises(ValueError, match="infinity"):
        pca().fit(twice)
    with pytest.raises(ValueError, match="infinity"):
        pca(bounds=(-2.0, 2.0)).fit(twice)
    largest = Y.copy()
    largest[3, 2] = np.finfo(np.float64).max
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est, reference = pca(non_finite="clip").fit(twice), pca().fit(largest)
    np.testing.assert_array_equal(est.components_, reference.components_)


def test_fit_transform_reads_cells_stored_twice_as_transform_does():
    """``fit_transform`` sums a cell stored twice before ``non_finite="clip"``'s
    map, as ``transform`` (and the fit) read it: a cell stored as a number
    and NaN is NaN, mapped to 0."""
    X = sparse.random(400, 6, density=0.5, format="csr", random_state=0)
    first = X.indptr[1]  # row 0 stores its first cell again, as NaN
    twice = sparse.csr_matrix(
        (np.r_[X.data[:first], np.nan, X.data[first:]],
         np.r_[X.indices[:first], X.indices[0], X.indices[first:]],
         np.r_[0, X.indptr[1:] + 1]), shape=X.shape)
    params = dict(n_components=2, data_norm=3.0, random_state=0, non_finite="clip")
    def pca():
        return PrivatePCA(accountant=BudgetAccountant(), **params)

    np.testing.assert_array_equal(pca().fit_transform(twice),
                                  pca().fit(twice).transform(twice))


def test_the_scan_of_a_row_longer_than_a_block_holds_its_width(monkeypatch):
    """``summed_indptr`` marks a row's cells in ``d`` booleans where a row
    fills a block, never keys of every entry it stores (review 111 F1: a
    row storing a cell 4·10⁶ times took 96 MB in the scan, in no plan); its
    index pointers are those of SciPy's sum, whatever the blocks."""
    import tracemalloc

    from sklearn_dppca import _rows

    X = sparse.random(300, 20, density=0.3, format="csr", random_state=0)
    m = 10**6  # row 0 stores cell (0, 0) a million times
    long = sparse.csr_matrix(
        (np.r_[np.ones(m), X.data[X.indptr[1]:]],
         np.r_[np.zeros(m, dtype=X.indices.dtype), X.indices[X.indptr[1]:]],
         np.r_[0, X.indptr[1:] - X.indptr[1] + m]), shape=X.shape)
    summed = long.copy()
    summed.sum_duplicates()
    tracemalloc.start()
    try:
        lines = _rows.summed_indptr(long)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10**6 and np.array_equal(lines, summed.indptr)
    monkeypatch.setattr(_blocks, "SPARSE_BLOCK_ENTRIES", 3)  # one row a block
    assert np.array_equal(_rows.summed_indptr(long), summed.indptr)
    assert _rows.summed_indptr(X) is None
