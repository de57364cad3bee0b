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
