"""The clipped statistics equal their definitions on every input layout."""

import numpy as np
import pytest
from scipy import sparse

from sklearn_dppca._stats import clipped_gram, first_pass, max_row_norm, row_sq_norms


def clip(rows, bound):
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return rows * np.where(norms > bound, bound / norms, 1.0)


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 7)) + [0.5, 0, 0, 1, 0, 0, 0]
    X[::50] *= 40.0  # some rows far beyond the bound
    return X


@pytest.mark.parametrize("layout", ["C", "F", "float32", "csr", "csc-as-csr"])
@pytest.mark.parametrize("centre", [False, True])
def test_clipped_gram_and_sum_match_definition(data, layout, centre):
    X = data
    if layout == "F":
        X = np.asfortranarray(X)
    elif layout == "float32":
        X = X.astype(np.float32)
    elif layout == "csr":
        X = sparse.csr_matrix(np.where(np.abs(X) > 1.0, X, 0.0))
    elif layout == "csc-as-csr":
        X = sparse.csc_matrix(np.where(np.abs(X) > 1.0, X, 0.0)).tocsr()
    dense = X.toarray() if sparse.issparse(X) else np.asarray(X, dtype=np.float64)
    bound = 3.0
    mean = np.array([0.4, -0.1, 0.0, 0.9, 0.0, 0.2, 0.0]) if centre else None
    sq = row_sq_norms(X)
    np.testing.assert_allclose(sq, (dense**2).sum(1), rtol=1e-6)

    gram, n_clipped = clipped_gram(X, bound, mean)
    Y = clip(dense - (0.0 if mean is None else mean), bound)
    np.testing.assert_allclose(gram, Y.T @ Y, rtol=1e-9, atol=1e-8)
    assert np.array_equal(gram, gram.T)
    shifted = dense - (0.0 if mean is None else mean)
    assert n_clipped == int((np.linalg.norm(shifted, axis=1) > bound).sum())

    np.testing.assert_allclose(
        first_pass(X, bound).clipped_sum, clip(dense, bound).sum(0), rtol=1e-9, atol=1e-9
    )


def test_huge_rows_do_not_overflow():
    """Rows whose squared norm overflows float64 are clipped, not turned to inf."""
    X = np.array([[1e200, 1e200], [0.3, 0.4], [-1e300, 0.0]])
    sq = row_sq_norms(X)
    assert max_row_norm(X, sq) == pytest.approx(1e300)
    gram, n_clipped = clipped_gram(X, 1.0)
    for mean in (None, np.array([0.1, -0.2])):
        centred, _ = clipped_gram(X, 1.0, mean)
        assert np.all(np.isfinite(centred))
    Y = np.array([[2**-0.5, 2**-0.5], [0.3, 0.4], [-1.0, 0.0]])
    np.testing.assert_allclose(gram, Y.T @ Y, atol=1e-12)
    assert n_clipped == 2
    np.testing.assert_allclose(first_pass(X, 1.0).clipped_sum, Y.sum(0), atol=1e-12)


def test_inputs_are_not_modified(data):
    X = data.copy()
    X.setflags(write=False)  # read-only: any write would raise
    clipped_gram(X, 2.0, np.ones(7) * 0.1, first_pass(X, 2.0))
    np.testing.assert_array_equal(X, data)
