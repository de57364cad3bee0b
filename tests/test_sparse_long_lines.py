"""Sparse lines that store their cells many times (mend 132): a CSR row
longer than the part of rows the plan counts (``_blocks._summed_line``: a
piece at a time into ``d`` values) and CSC columns storing cells 3+ times
(``_rows.summed_csr``: summed a part of columns at a time into the CSR
copy), each a copy of every entry it stored before, in no plan."""

import warnings

import numpy as np
import pytest
from scipy import sparse

from sklearn_dppca import PrivatePCA, _blocks
from sklearn_dppca._rows import InMemoryRows, summed_csr
from sklearn_dppca.privacy import BudgetAccountant

from .test_matrix_free import traced_peak
from .test_sparse_duplicates import as_dtype_and_summed


def _pca(**params):
    return PrivatePCA(2, data_norm=5.0, random_state=0,
                      accountant=BudgetAccountant(), **params)


def _same(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype
    for a, b in ((got.data, want.data), (got.indices, want.indices),
                 (got.indptr, want.indptr)):
        np.testing.assert_array_equal(a, b)


def _long_row(m=2_000_000):
    """3000 × 20 CSR rows whose row 0 stores cell (0, 0) ``m`` times more."""
    base = sparse.random(3000, 20, density=0.3, format="csr", random_state=0)
    count = np.diff(base.indptr).copy()
    count[0] += m
    return sparse.csr_matrix(
        (np.r_[np.full(m, 0.25e-6), base.data],
         np.r_[np.zeros(m, np.int32), base.indices], np.r_[0, np.cumsum(count)]),
        shape=base.shape)


def test_a_row_longer_than_its_part_is_summed_within_the_plan():
    """Review 111: a row storing a cell 4·10⁶ times was copied whole when
    its block was summed (48.5 MB traced for a plan of 5.2 MB; here 2·10⁶
    times). It is summed a piece at a time into ``d`` values: the peak is
    within the plan, the release is the summed rows' bit for bit (rows in
    order: SciPy sums them in the order stored), ``X`` is not modified."""
    _fits_within_the_plan_as_summed(_long_row())


def _fits_within_the_plan_as_summed(X):
    """The fit on ``X`` peaks within its plan and releases what the fit on
    ``X`` summed does, bit for bit; ``X`` is not modified."""
    n, d = X.shape
    before = X.copy()
    est = _pca()
    peak = traced_peak(est, X)
    assert peak <= est._memory_needed(n, d) + est._copy_bytes
    summed = X.copy()
    summed.sum_duplicates()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = _pca().fit(summed)
    for name in ("components_", "mean_", "explained_variance_", "noise_variance_"):
        np.testing.assert_array_equal(getattr(est, name), getattr(reference, name))
    _same(X, before)


def _stored_again(n, d, seed, shuffle):
    """CSR rows storing cells 1-4 times (row 0 and row 7 far more), in order
    within each row or not, as raw arrays (SciPy's constructor sums none)."""
    rng = np.random.default_rng(seed)
    base = sparse.random(n, d, density=0.3, format="csr", random_state=seed)
    times = rng.integers(1, 5, size=base.nnz)
    times[:base.indptr[1]] += 50
    times[base.indptr[7]:base.indptr[8]] += 30
    rows = np.repeat(np.repeat(np.arange(n), np.diff(base.indptr)), times)
    columns = np.repeat(base.indices, times)
    values = rng.normal(0.0, 0.4, size=rows.size)
    order = np.arange(rows.size)
    if shuffle:
        mixed = rng.permutation(rows.size)
        order = mixed[np.argsort(rows[mixed], kind="stable")]
    return sparse.csr_matrix((values[order], columns[order].astype(np.int32),
                              np.r_[0, np.cumsum(np.bincount(rows, minlength=n))]),
                             shape=(n, d))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
@pytest.mark.parametrize("shuffle", [False, True])
def test_long_rows_are_read_summed_in_pieces(monkeypatch, dtype, shuffle):
    """Rows longer than their counted part are SciPy's sum of ``X`` whole
    bit for bit where ``X``'s rows are in order (a sum in the order stored),
    to rounding otherwise (SciPy sums a cell in the order of its unstable
    sort); read by index, a row is read as its slice reads it."""
    monkeypatch.setattr(_blocks, "SUMMED_PART_ENTRIES", 40)
    X = _stored_again(600, 15, 2, shuffle)
    X, expected = as_dtype_and_summed(X, dtype)
    before = X.copy()
    rows = InMemoryRows(X).X
    for a, b in [(0, 1), (0, 10), (5, 600), (7, 8)]:
        got, want = rows[a:b], expected[a:b]
        if shuffle:
            np.testing.assert_array_equal(got.indices, want.indices)
            np.testing.assert_array_equal(got.indptr, want.indptr)
            np.testing.assert_allclose(got.data, want.data, rtol=1e-5)
        else:
            _same(got, want)
    picked = np.array([7, 2, 0, 300])
    _same(rows[picked], sparse.vstack([rows[r:r + 1] for r in picked], format="csr"))
    _same(rows[picked - 600], rows[picked])  # negative numbers
    mask = np.zeros(600, dtype=bool)
    mask[[0, 7, 300]] = True
    _same(rows[mask], rows[np.array([0, 7, 300])])
    _same(before, X)


def _csc_stored(copies, n=60_000, d=30, shuffle=False, density=1.0):
    """Review 111 F2: CSC whose every cell is stored ``copies`` times."""
    base = sparse.random(n, d, density=density, format="csc", random_state=0) * 0.1
    count = np.diff(base.indptr)
    rows = np.repeat(base.indices, copies)
    if shuffle:  # each column's entries out of order
        rng = np.random.default_rng(0)
        for j in range(d):
            lo, hi = copies * base.indptr[j], copies * base.indptr[j + 1]
            rows[lo:hi] = rng.permutation(rows[lo:hi])
    return sparse.csc_matrix((np.repeat(base.data / copies, copies), rows,
                              np.r_[0, np.cumsum(copies * count)]), shape=(n, d))


def test_csc_storing_cells_4_times_peaks_within_the_plan():
    """Review 111 F2: CSC storing each cell 4 times was summed on a copy of
    every entry it stores before its CSR copy was made: 93.6 MB traced for
    a plan of 76.8 MB. Its columns are summed a part at a time into the CSR
    copy the plan counts: within the plan, the release is the summed
    matrix's bit for bit, ``X`` is not modified."""
    _fits_within_the_plan_as_summed(_csc_stored(4))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("n, density", [(400, 0.2), (40, 1.0)])
def test_summed_csr_is_scipys_sum_then_tocsr(monkeypatch, dtype, shuffle, n, density):
    """``summed_csr`` gives the arrays of SciPy's sum of the CSC matrix
    whole, then ``tocsr``, in many parts of columns: bit for bit where the
    columns are in order or none stores more than ``n`` entries (summed by
    SciPy), to rounding where one does out of order (summed in pieces in
    the order stored, SciPy's sort unstable); ``X.tocsr()`` where each cell
    is stored once; ``X`` is not modified."""
    from sklearn_dppca._rows import summed_csr

    monkeypatch.setattr(_blocks, "SUMMED_PART_ENTRIES", 50)
    X = _csc_stored(3, n=n, d=12, shuffle=shuffle, density=density)
    X.data[::7] *= -3.0
    X = sparse.csc_matrix(((X.data * 1000).astype(dtype), X.indices, X.indptr),
                          shape=X.shape)
    before = X.copy()
    summed = X.astype(np.float32 if dtype == np.float32 else np.float64, copy=True)
    summed.sum_duplicates()
    got, want = summed_csr(X), summed.tocsr()
    if shuffle and n == 40:
        np.testing.assert_array_equal(got.indices, want.indices)
        np.testing.assert_array_equal(got.indptr, want.indptr)
        np.testing.assert_allclose(got.data, want.data, rtol=1e-5)
    else:
        _same(got, want)
    assert got.has_canonical_format
    _same(X, before)
    once = summed.astype(dtype)  # each cell stored once: X.tocsr()
    _same(summed_csr(once), once.tocsr())
    assert isinstance(summed_csr(sparse.csc_array(X)), sparse.csr_array)


@pytest.mark.parametrize("copies", [1, 2])
def test_a_csc_array_with_int64_indices_is_copied_within_the_plan(copies):
    """Review 117 F1: SciPy's tocsr keeps a csc_array's int64 indices, which
    the plan counted at 4 bytes, and summed_csr's csr_matrix copied its
    int64 indices down to int32 beside them: 1.16 times the plan either
    way. The plan counts the input's index width; summed_csr writes the
    width the plan counts."""
    X = sparse.csc_array(_csc_stored(copies, n=20_000, d=100))
    X.indices, X.indptr = X.indices.astype(np.int64), X.indptr.astype(np.int64)
    _fits_within_the_plan_as_summed(X)
    if copies > 1:  # written at the plan's width, in X's kind: no copy down
        summed = summed_csr(X)
        assert type(summed) is sparse.csr_array
        assert summed.indices.dtype == summed.indptr.dtype == np.int32


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("block", [30, 10**6])
@pytest.mark.parametrize("kernels", [True, False])
def test_summed_csr_counts_rows_in_its_scan_of_columns(monkeypatch, shuffle, block,
                                                       kernels):
    """Mend 136: ``summed_csr`` counts the summed rows' entries in the scan
    that finds the cells stored twice (``summed_indptr``'s ``dropped``), a
    block of columns at a time or one long column marked in booleans
    (``block`` entries), and places a part of columns (one column, or many
    sorted by row) into the CSR arrays once: SciPy's sum then ``tocsr``.
    Its parts are summed by SciPy's kernels on their arrays, or, where
    ``kernels`` is False (a SciPy without them), by its method."""
    from sklearn_dppca import _rows

    if not kernels:
        monkeypatch.setattr(_blocks, "csr_sum_duplicates", None)
    monkeypatch.setattr(_blocks, "SPARSE_BLOCK_ENTRIES", block)
    monkeypatch.setattr(_rows, "SPARSE_BLOCK_ENTRIES", block)
    for part in (50, 10**6):
        monkeypatch.setattr(_blocks, "SUMMED_PART_ENTRIES", part)
        X = _csc_stored(3, n=40, d=12, shuffle=shuffle, density=0.6)
        X.data[::5] *= -3.0
        summed = X.copy()
        summed.sum_duplicates()
        got, want = summed_csr(X), summed.tocsr()
        np.testing.assert_array_equal(got.indices, want.indices)
        np.testing.assert_array_equal(got.indptr, want.indptr)
        np.testing.assert_allclose(got.data, want.data, rtol=1e-12)
        if not shuffle:
            _same(got, want)
