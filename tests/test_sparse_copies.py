"""Copies of sparse rows that a fit makes before its passes (mend 124):
``non_finite="clip"``'s map of the stored values is in the memory plan, from
public values only (the shape, the dtype, the parameter: never the count of
stored entries), and a fit whose copies pass ``memory_limit`` is refused
before the charge."""

import numpy as np
import pytest
from scipy import sparse

from sklearn_dppca import PrivatePCA
from sklearn_dppca._blocks import BoxedCSR
from sklearn_dppca._rows import InMemoryRows
from sklearn_dppca.privacy import BudgetAccountant

from .test_matrix_free import traced_peak


def _rows_with_non_finite(fmt="csr"):
    X = sparse.random(100_000, 60, density=0.5, format=fmt, random_state=0) * 0.1
    X.data[::1000] = np.nan
    X.data[1::1000] = np.inf
    X.data[2::1000] = -np.inf
    return X


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_the_map_of_non_finite_sparse_values_is_in_the_plan(fmt):
    """``non_finite="clip"`` copied a sparse matrix whole (its indices too,
    and masks as long as its values) with nothing in the plan: a CSR fit
    peaked at 1.4 times it. Mend 124 copied the values alone, counted at
    ``n d`` values; now (mend 129) the passes map the block of rows they
    read, counted at a block a thread, never ``n d`` values. The release is
    that of the values mapped first, and ``X`` is not modified."""
    X = _rows_with_non_finite(fmt)
    n, d = X.shape
    before = X.copy()

    def estimator(**params):
        return PrivatePCA(2, data_norm=5.0, random_state=0,
                          accountant=BudgetAccountant(), **params)

    est = estimator(non_finite="clip")
    peak = traced_peak(est, X)
    plan = est._memory_needed(n, d) + est._copy_bytes
    assert peak <= plan
    np.testing.assert_array_equal(X.data, before.data)  # NaN where NaN was
    np.testing.assert_array_equal(X.indices, before.indices)
    np.testing.assert_array_equal(X.indptr, before.indptr)
    mapped = X.copy()
    mapped.data = np.nan_to_num(mapped.data)
    reference = estimator().fit(mapped)
    np.testing.assert_array_equal(est.components_, reference.components_)
    # the map's part of the plan: a block a thread, not n d values
    assert 0 < est._copy_bytes - reference._copy_bytes < n * d * 8 / 2
    accountant = BudgetAccountant()
    with pytest.raises(MemoryError, match="mapped copy of the values of the block"):
        est.set_params(memory_limit=plan - 1, accountant=accountant).fit(X)
    assert accountant.spent[0] == 0.0  # refused before the charge


def _out_of_order(X):
    """``X`` (CSR) with each row's column indices reversed: every cell stored
    once, not in SciPy's canonical order."""
    Y = X.copy()
    for i in range(Y.shape[0]):
        lo, hi = Y.indptr[i], Y.indptr[i + 1]
        Y.indices[lo:hi] = Y.indices[lo:hi][::-1].copy()
        Y.data[lo:hi] = Y.data[lo:hi][::-1].copy()
    Y.has_sorted_indices = False
    assert not Y.has_canonical_format
    return Y


def test_rows_whose_indices_are_out_of_order_are_read_as_they_are():
    """CSR rows whose cells are each stored once, out of order, were copied
    whole and sorted (``_rows.summed_entries``) for the whole fit, beside a
    plan that counts no such copy: 2 times it. No pass needs sorted indices:
    they are read as they are, within the plan, with the canonical matrix's
    release to rounding, and not modified."""
    X = sparse.random(100_000, 60, density=0.5, format="csr", random_state=0) * 0.1
    Y = _out_of_order(X)
    n, d = Y.shape
    before = (Y.data.copy(), Y.indices.copy(), Y.indptr.copy())

    def estimator():
        return PrivatePCA(2, data_norm=5.0, random_state=0,
                          accountant=BudgetAccountant())

    est = estimator()
    assert traced_peak(est, Y) <= est._memory_needed(n, d) + est._copy_bytes
    for got, want in zip((Y.data, Y.indices, Y.indptr), before):
        np.testing.assert_array_equal(got, want)
    reference = estimator().fit(X)
    np.testing.assert_allclose(est.components_, reference.components_, atol=1e-9)
    np.testing.assert_allclose(est.mean_, reference.mean_, atol=1e-12)


def test_stores_twice_finds_a_cell_stored_twice_in_any_block():
    """The scan of ``summed_entries``: a duplicate in the last block, or a
    row with more entries than cells, is found; out of order alone is not
    one."""
    from sklearn_dppca._rows import stores_twice

    X = sparse.random(50_000, 40, density=0.9, format="csr", random_state=1)
    assert not stores_twice(X) and not stores_twice(_out_of_order(X[:2000]))
    Y = X.copy()
    lo = Y.indptr[-2]
    Y.indices[lo + 1] = Y.indices[lo]  # the last row stores a cell twice
    assert stores_twice(Y) and stores_twice(Y.T.tocsr().T)
    wide = sparse.csr_matrix((np.ones(3), np.array([0, 1, 0]), np.array([0, 3])),
                             shape=(1, 2))
    assert stores_twice(wide) and stores_twice(wide.tocsc())


def test_non_finite_clip_on_wide_sparse_rows_maps_a_block_at_a_time():
    """Wide CSR with NaN and inf under ``non_finite="clip"``: the map's copy
    was counted at ``n d`` values (mend 124), so a limit that the fit's
    passes keep (its plan with a block a thread mapped) refused it (here
    800 MB counted for 1.2 MB of values). The passes map the block of rows
    they read (mend 129): the fit runs within that limit, its traced peak
    within the plan, its release that of the values mapped first, and ``X``
    is not modified."""
    X = sparse.random(2_000, 50_000, density=0.001, format="csr",
                      random_state=0)
    X.data[::101] = np.nan
    X.data[1::103] = np.inf
    X.data[2::107] = -np.inf
    n, d = X.shape
    before = X.copy()

    def estimator(**params):
        return PrivatePCA(2, data_norm=1.0, random_state=0,
                          accountant=BudgetAccountant(), **params)

    # above the plan (118 MB on two cores), below n d values (800 MB)
    limit = n * d * 8 // 2
    est = estimator(non_finite="clip", memory_limit=limit)
    peak = traced_peak(est, X)
    plan = est._memory_needed(n, d) + est._copy_bytes
    assert peak <= plan <= limit
    np.testing.assert_array_equal(X.data, before.data)  # NaN where NaN was
    np.testing.assert_array_equal(X.indices, before.indices)
    mapped = X.copy()
    mapped.data = np.nan_to_num(mapped.data)
    reference = estimator().fit(mapped)
    for name in ("components_", "mean_", "explained_variance_", "noise_variance_"):
        np.testing.assert_array_equal(getattr(est, name), getattr(reference, name))


@pytest.mark.parametrize("fmt", ["csr", "csc"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("bounds", [None, (-2.0, 2.0), (0.5, 3.0)])
def test_rows_mapped_a_block_at_a_time_release_the_mapped_rows(fmt, dtype, bounds):
    """The lazy map (mend 129), alone, composed with a box that keeps zeros
    (map, then clip, a block at a time) or with one that densifies them,
    releases what the rows mapped first release; ``X`` is not modified."""
    X = _small_non_finite(fmt, dtype)
    before = X.copy()
    mapped = X.copy()
    mapped.data = np.nan_to_num(mapped.data)

    def fit(rows, non_finite):
        return PrivatePCA(3, data_norm=4.0, bounds=bounds, random_state=0,
                          non_finite=non_finite,
                          accountant=BudgetAccountant()).fit(rows)

    est, reference = fit(X, "clip"), fit(mapped, "raise")
    for name in ("components_", "mean_", "explained_variance_", "noise_variance_"):
        np.testing.assert_array_equal(getattr(est, name), getattr(reference, name))
    np.testing.assert_array_equal(X.data, before.data)


def _small_non_finite(fmt="csr", dtype=np.float64):
    X = sparse.random(600, 30, density=0.2, format="csr", random_state=2) * 3
    X.data[::17] = np.nan
    X.data[1::13] = np.inf
    X.data[2::11] = -np.inf
    return X.astype(dtype).asformat(fmt)


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_rows_mapped_lazily_read_as_the_mapped_copy(fmt):
    """:class:`InMemoryRows` with the map reads, block by block, the values
    the mapped copy held (NaN 0, inf the largest float), never writing
    ``X``; rows that store a cell twice are summed, then mapped (NaN + 0.5
    is NaN, then 0), a block at a time (mend 131), as a fit reads them:
    docs/privacy.rst sums the duplicates before anything else reads them
    (a fit summed ``X`` whole first, ``saturate_big_numbers``; this class
    alone mapped first, an order no fit took)."""
    X = _small_non_finite(fmt).tocsr()
    rows = InMemoryRows(X.asformat(fmt), mapped=True).X
    assert isinstance(rows, BoxedCSR)
    expected = X.copy()
    expected.data = np.nan_to_num(expected.data)
    got = sparse.vstack([rows[a:b] for a, b in [(0, 250), (250, 600)]])
    assert (got != expected).nnz == 0 and np.isfinite(got.data).all()
    assert (rows[np.array([5, 3])] != expected[[5, 3]]).nnz == 0
    assert np.isnan(X.data).any()  # X as given
    first = X.indptr[:-1][np.diff(X.indptr) > 0]
    rows_of = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    keep = np.diff(X.indptr) > 0  # each row's first cell stored again
    where = np.r_[np.arange(X.nnz), first]
    order = np.argsort(np.r_[rows_of, rows_of[first]], kind="stable")
    twice = sparse.csr_matrix(
        (np.r_[X.data, np.full(first.size, 0.5)][order], X.indices[where][order],
         np.r_[0, np.cumsum(np.diff(X.indptr) + keep)]), shape=X.shape)
    summed = InMemoryRows(twice.asformat(fmt), mapped=True).X
    expected = twice.copy()
    expected.sum_duplicates()
    expected.data = np.nan_to_num(expected.data)
    assert isinstance(summed, BoxedCSR)  # CSC: summed in its CSR copy, mapped lazily
    got = sparse.vstack([summed[a:b] for a, b in [(0, 250), (250, 600)]])
    assert (got != expected).nnz == 0 and np.isfinite(got.data).all()


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_fit_transform_maps_non_finite_sparse_rows_as_transform_does(fmt):
    """Since the passes map sparse rows a block at a time (mend 129), the X
    that ``_fit`` returns is the validated, unmapped one: ``fit_transform``
    projected its NaN (a NaN row of scores), where ``fit().transform()`` maps
    it, and a Pipeline's private head after PrivatePCA then failed on that
    NaN after PrivatePCA's charge (review 110 F1)."""
    X = _rows_with_non_finite(fmt)
    params = dict(n_components=2, data_norm=5.0, random_state=0, non_finite="clip")
    scores = PrivatePCA(accountant=BudgetAccountant(), **params).fit_transform(X)
    again = PrivatePCA(accountant=BudgetAccountant(), **params).fit(X).transform(X)
    assert not np.isnan(scores).any()
    np.testing.assert_array_equal(scores, again)
