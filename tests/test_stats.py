"""The clipped statistics equal their definitions on every input layout."""

import numpy as np
import pytest
from scipy import sparse

from sklearn_dppca._stats import (
    clipped_gram,
    clipped_sum,
    first_pass,
    max_row_norm,
    row_sq_norms,
)


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

    for total in (first_pass(X, bound).clipped_sum, clipped_sum(X, bound)):
        np.testing.assert_allclose(
            total, clip(dense, bound).sum(0), rtol=1e-9, atol=1e-9
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


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 64 rows, so that every multi-block path runs on small data."""
    import sklearn_dppca._stats as stats

    monkeypatch.setattr(stats, "_BLOCK_BYTES", 64 * 8 * 7)
    monkeypatch.setattr(stats, "_MIN_BLOCK_ROWS", 64)


@pytest.mark.parametrize("layout", ["C", "float32", "csr"])
@pytest.mark.parametrize("shift", [0.0, 2.5])
def test_multi_block_paths_match_definition(small_blocks, layout, shift):
    """Many blocks, a mean far from 0, rows in (C, 8C] and beyond 8C, sorted rows.

    The first block's clipped mean (the direction used to skip rows that the
    centring cannot clip) points away from the final mean, and the bound must
    still never skip a clipped row.
    """
    rng = np.random.default_rng(7)
    X = rng.normal(size=(1500, 7))
    X[:64] += 3.0 * np.eye(7)[2]  # the first block leans another way
    X += shift * np.eye(7)[0]
    X[5::97] *= 3.0  # moderately clipped rows
    X[9::211] *= 1e3  # rows beyond 8C
    dense = X
    if layout == "float32":
        X = X.astype(np.float32)
        dense = X.astype(np.float64)
    elif layout == "csr":
        X = sparse.csr_matrix(X)
    bound = 2.0
    first = first_pass(X, bound)
    np.testing.assert_allclose(
        first.clipped_sum, clip(dense, bound).sum(0), rtol=1e-9, atol=1e-9
    )
    mean = first.clipped_sum / len(dense) + 0.1
    gram, n_clipped = clipped_gram(X, bound, mean, first)
    Y = clip(dense - mean, bound)
    np.testing.assert_allclose(gram, Y.T @ Y, rtol=1e-9, atol=1e-8)
    assert n_clipped == int((np.linalg.norm(dense - mean, axis=1) > bound).sum())
