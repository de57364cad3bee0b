"""Clipped statistics of the rows, computed in row blocks.

These are the only functions that read the data. They return exact
(non-private) sums; the estimators add the noise. Rows are clipped to the
norm bound ``C`` (``x ↦ x · min(1, C/‖x‖)``), never rejected
(ALGORITHMS.md §1), and no full copy of ``X`` is ever made: a dense block is
copied only when it must be (float32 input, non C-contiguous layout, or rows
that are clipped), and the Gram matrix is accumulated with BLAS ``syrk``,
which does half the flops of ``X.T @ X``.
"""

import numpy as np
from scipy import sparse
from scipy.linalg.blas import dsyrk

# Rows per block: about 4 MiB of float64 per block keeps a block in cache
# between the passes made over it, and is large enough for BLAS to run at speed.
_BLOCK_BYTES = 4 * 2**20


def _block_rows(n_features):
    return max(256, _BLOCK_BYTES // (8 * max(n_features, 1)))


def iter_blocks(X):
    """Yield ``(start, stop, block)`` with blocks of rows as float64 arrays.

    Dense blocks are views of ``X`` when ``X`` is C-contiguous float64 and
    small copies otherwise; sparse blocks are CSR.
    """
    n, d = X.shape
    step = _block_rows(d)
    for start in range(0, n, step):
        stop = min(start + step, n)
        block = X[start:stop]
        if sparse.issparse(block):
            block = block.astype(np.float64, copy=False)
        else:
            block = np.ascontiguousarray(block, dtype=np.float64)
        yield start, stop, block


def _sq_norms(block):
    """Squared row norms of a block; ``inf`` where ``‖x‖²`` overflows."""
    if sparse.issparse(block):
        return np.asarray(block.multiply(block).sum(axis=1)).ravel()
    with np.errstate(over="ignore"):
        return np.einsum("ij,ij->i", block, block)


def _robust_norms(rows):
    """Row norms of a dense array without overflow (rescaled by the max entry)."""
    scale = np.max(np.abs(rows), axis=1, keepdims=True)
    scale[scale == 0.0] = 1.0
    return np.linalg.norm(rows / scale, axis=1) * scale[:, 0]


def _clip_scales(block, sq, data_norm, mean=None):
    """``min(1, C/‖x − m‖)`` for each row of a block (1 for rows inside the ball).

    ``‖x − m‖² = ‖x‖² − 2 x·m + ‖m‖²`` from the stored ``‖x‖²``; rows where
    that overflows are measured directly.
    """
    if mean is not None:
        with np.errstate(over="ignore", invalid="ignore"):
            sq = np.maximum(sq - 2.0 * (block @ mean) + mean @ mean, 0.0)
    with np.errstate(divide="ignore"):
        scale = np.where(sq > data_norm**2, data_norm / np.sqrt(sq), 1.0)
    bad = np.flatnonzero(~np.isfinite(sq))
    if bad.size:
        rows = block[bad]
        rows = rows.toarray() if sparse.issparse(rows) else rows
        if mean is not None:
            rows = rows - mean
        scale[bad] = np.minimum(1.0, data_norm / _robust_norms(rows))
    return scale


def max_row_norm(X, sq_norms):
    """Largest row norm of ``X``, exact even where ``‖x‖²`` overflowed."""
    largest = float(np.max(sq_norms))
    if np.isfinite(largest):
        return float(np.sqrt(largest))
    bad = np.flatnonzero(~np.isfinite(sq_norms))
    rows = X[bad]
    return float(_robust_norms(rows.toarray() if sparse.issparse(rows) else rows).max())


def row_sq_norms(X):
    """Squared L2 norm of every row of ``X`` (float64, one pass in blocks).

    ``inf`` marks a finite row whose squared norm overflows; the functions
    below measure such rows directly.
    """
    out = np.empty(X.shape[0])
    for start, stop, block in iter_blocks(X):
        out[start:stop] = _sq_norms(block)
    return out


def clipped_sum(X, data_norm, sq_norms):
    """``Σ clip_C(x_i)``: L2 sensitivity ``2C`` under replacement of one row.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
    data_norm : float
    sq_norms : ndarray of shape (n_samples,)
        Squared row norms of ``X`` (from :func:`row_sq_norms`).
    """
    total = np.zeros(X.shape[1])
    for start, stop, block in iter_blocks(X):
        total += block.T @ _clip_scales(block, sq_norms[start:stop], data_norm)
    return total


def clipped_gram(X, data_norm, sq_norms, mean=None):
    """``Σ y_i y_iᵀ`` with ``y_i = clip_C(x_i − m)``, and how many rows were clipped.

    Frobenius sensitivity ``√2 C²``: ``‖aaᵀ − bbᵀ‖_F² = ‖a‖⁴ + ‖b‖⁴ −
    2(a·b)² ≤ 2C⁴`` for rows of norm ≤ C (ALGORITHMS.md §3).

    With weights ``w_i = s_i²`` (``s_i`` the clipping scale of ``x_i − m``),
    ``Σ y yᵀ = Σ w x xᵀ − u mᵀ − m uᵀ + (Σ w) m mᵀ`` with ``u = Σ w x``. The
    first term is one ``syrk`` per block on the rows as they are (or on the
    rescaled rows ``s_i x_i`` of a block where some row is clipped), so ``X``
    is never centred in memory. The centring terms are exact up to round-off
    of order ``1e-16 n C²`` because ``‖m‖`` is at most about ``C``.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
    data_norm : float
    sq_norms : ndarray of shape (n_samples,)
        Squared row norms of ``X``.
    mean : ndarray of shape (n_features,) or None
        Public centre ``m`` (already released), or ``None`` for no centring.

    Returns
    -------
    gram : ndarray of shape (n_features, n_features)
        Symmetric, float64.
    n_clipped : int
        Rows whose norm exceeded ``data_norm`` (not released; for diagnostics).
    """
    d = X.shape[1]
    gram = np.zeros((d, d), order="F")
    u = np.zeros(d)
    weight_sum = 0.0
    n_clipped = 0
    for start, stop, block in iter_blocks(X):
        scale = _clip_scales(block, sq_norms[start:stop], data_norm, mean)
        clipped = scale < 1.0
        n_clipped += int(np.count_nonzero(clipped))
        if clipped.any():
            weights = scale * scale
            rows = _scale_rows(block, scale)
        else:
            weights = None
            rows = block
        if mean is not None and weights is None:
            u += np.asarray(block.sum(axis=0)).ravel()
            weight_sum += stop - start
        elif mean is not None:
            u += block.T @ weights
            weight_sum += float(weights.sum())
        _add_gram(gram, rows)
    gram = np.triu(gram)
    gram += np.triu(gram, 1).T
    if mean is not None:
        cross = np.outer(u, mean)
        gram -= cross + cross.T  # a sum, so that gram stays exactly symmetric
        gram += weight_sum * np.outer(mean, mean)
    return np.ascontiguousarray(gram), n_clipped


def _scale_rows(block, scale):
    if sparse.issparse(block):
        return sparse.diags_array(scale) @ block
    return block * scale[:, None]


def _add_gram(gram, rows):
    """``gram += rowsᵀ rows`` (upper triangle only for dense rows)."""
    if sparse.issparse(rows):
        gram += (rows.T @ rows).toarray()
    elif rows.shape[0]:
        # rows is C-contiguous, so rows.T is Fortran-ordered: no copy is made,
        # and syrk accumulates into gram in place (beta=1, overwrite_c).
        dsyrk(1.0, rows.T, beta=1.0, c=gram, trans=0, lower=0, overwrite_c=1)
