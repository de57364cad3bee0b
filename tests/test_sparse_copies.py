"""Copies of sparse rows that a fit makes before its passes (mend 124):
``non_finite="clip"``'s map of the stored values is in the memory plan, from
public values only (the shape, the dtype, the parameter: never the count of
stored entries), and a fit whose copies pass ``memory_limit`` is refused
before the charge."""

import numpy as np
import pytest
from scipy import sparse

from sklearn_dppca import PrivatePCA
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
    peaked at 1.4 times it. Now a copy of the values alone, counted at
    ``n d`` values; the release is that of the values mapped first, and
    ``X`` is not modified."""
    X = _rows_with_non_finite(fmt)
    n, d = X.shape
    before = X.copy()

    def estimator(**params):
        return PrivatePCA(2, data_norm=5.0, random_state=0,
                          accountant=BudgetAccountant(), **params)

    est = estimator(non_finite="clip")
    peak = traced_peak(est, X)
    assert peak <= est._memory_needed(n, d) + est._copy_bytes
    assert est._copy_bytes >= n * d * 8
    np.testing.assert_array_equal(X.data, before.data)  # NaN where NaN was
    np.testing.assert_array_equal(X.indices, before.indices)
    np.testing.assert_array_equal(X.indptr, before.indptr)
    mapped = X.copy()
    mapped.data = np.nan_to_num(mapped.data)
    reference = traced_peak(estimator(), mapped)  # the map's copy is not needed
    np.testing.assert_array_equal(est.components_, estimator().fit(mapped).components_)
    accountant = BudgetAccountant()
    limit = 0.5 * (peak + reference)
    with pytest.raises(MemoryError, match="copy of the sparse rows' values"):
        est.set_params(memory_limit=limit, accountant=accountant).fit(X)
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
