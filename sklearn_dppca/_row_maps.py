"""Public maps of rows after a fit: each row clipped around a centre, and
its projection on a basis, by blocks of rows (dense, sparse without
densifying, Dask by chunk). For scores and predictions computed from
released values; a release's own clipping is ``_stats``'s
(:func:`~sklearn_dppca._stats._clip_scales`, with its round-off margin).
"""

import numpy as np
from scipy import sparse

from ._dask import is_dask_collection
from ._norm_plan import SPARSE_MARGIN, expansion_margin
from ._rows import summed_entries
from ._stats import _BLOCK_BYTES, _dense, _ranges, _rescaled_norms


def clip_rows(rows, bound, centre=0.0):
    r""":math:`\operatorname{clip}_C(x_i - m)` of each row
    (``docs/privacy.rst`` §1), without overflow: :math:`x_i` and :math:`m`
    are first divided by the row's largest magnitude :math:`s_i`, so
    :math:`u_i = (x_i - m)/s_i` has entries of at most 2, and
    :math:`\operatorname{clip}_C(x_i - m) = u_i \cdot \min(s_i, C/\|u_i\|)`.
    Entries near 1e300 neither overflow nor warn, so nothing here depends on
    how extreme a row is beyond its clipped value. For public maps of rows
    (scores, predictions); the releases' own clipping keeps a round-off
    margin (:func:`_clip_scales`)."""
    rows = np.asarray(rows, dtype=np.float64)
    centre = np.asarray(centre, dtype=np.float64)
    with np.errstate(over="ignore", under="ignore"):
        scale = np.maximum(np.max(np.abs(rows), axis=1, initial=0.0),
                           np.max(np.abs(centre), initial=0.0))
        scale = np.where(scale > 0.0, scale, 1.0)[:, None]
        unit = rows / scale - centre / scale
        norms = np.linalg.norm(unit, axis=1)[:, None]
        return unit * np.minimum(scale, bound / np.maximum(norms, np.finfo(float).tiny))


def clipped_projections(rows, bound, centre, basis):
    r"""``clip_rows(rows, bound, centre) @ basis`` in memory
    :math:`O(n k)` beside a block of rows (:func:`row_spans`): sparse rows
    never densified (CSC rows are read as CSR), a Dask array chunk by chunk.

    On a sparse row the same scaled quantities as :func:`clip_rows`, with
    the centring implicit: for :math:`x_s = x/s` (stored values only,
    :math:`s` the larger of the row's and the centre's largest magnitude),
    :math:`\tilde m = m/\max|m|` and :math:`r = \max|m|/s \le 1`,
    :math:`u = x_s - r\tilde m` has :math:`\|u\|^2 = \|x_s\|^2 - 2r\,x_s
    \cdot \tilde m + r^2\|\tilde m\|^2` and :math:`u B = x_s B - r\,\tilde m
    B`: every term at most :math:`O(d)`, so nothing overflows. Rounding may
    leave a projection a hair above ``bound``: the scores built on it clip
    their per-row values to :math:`[0, C^2]`, which keeps their bound exact.
    """
    basis = np.asarray(basis, dtype=np.float64)
    if is_dask_collection(rows):  # a Dask array (all columns per chunk): by chunk
        return rows.map_blocks(clipped_projections, bound, centre, basis,
                               chunks=(rows.chunks[0], (basis.shape[1],)),
                               dtype=np.float64).compute()
    thin = sparse.issparse(rows)
    rows = summed_entries(rows.tocsr()) if thin else np.asarray(rows)
    centre = np.broadcast_to(np.asarray(centre, dtype=np.float64), (rows.shape[1],))
    out = np.empty((rows.shape[0], basis.shape[1]))
    # far from the origin the expansion's round-off swamps C²: densified by
    # blocks there (review 66: scores of timestamps off by a third of C²)
    top, unit = _rescaled_norms(centre[None, :])  # ‖m‖ without overflow
    norm = float(top[0]) * float(unit[0])
    dense = thin and expansion_margin(rows.shape[1], norm, bound) > SPARSE_MARGIN
    for a, b in row_spans(rows, dense):
        if thin and not dense:
            out[a:b] = _clipped_sparse(rows[a:b], bound, centre, basis)
        else:
            out[a:b] = clip_rows(_dense(rows[a:b]), bound, centre) @ basis
    return out


#: Bytes of the spans of a Dask chunk's rows that :func:`summed_over_rows`
#: maps at a time: the per-row map's temporaries (about three copies of
#: the span) stay small beside the chunk itself.
SUM_SPAN_BYTES = 4 * 2**20


def summed_over_rows(rows, per_row, width):
    """``per_row(rows).sum(axis=0)``, where ``per_row`` maps a block of rows
    to an ``(n_block, width)`` array of per-row values: a Dask array's
    chunks are each reduced to their length-``width`` sum in their own task
    (by spans of :data:`SUM_SPAN_BYTES`) and only those sums are computed
    here (``n_chunks × width`` values, then added), so no array with a
    value per row is ever gathered (review 100 F3)."""
    if not is_dask_collection(rows):
        return per_row(rows).sum(axis=0)

    def chunk_sum(block):
        total = np.zeros((1, width))
        for a, b in row_spans(block, block_bytes=SUM_SPAN_BYTES):
            total += per_row(block[a:b]).sum(axis=0)
        return total

    sums = rows.map_blocks(chunk_sum, chunks=((1,) * len(rows.chunks[0]), (width,)),
                           dtype=np.float64, meta=np.empty((0, 0)))
    return np.asarray(sums.compute(), dtype=np.float64).sum(axis=0)


def row_spans(rows, dense=False, block_bytes=_BLOCK_BYTES):
    """Consecutive ``(a, b)`` covering the rows in blocks of about
    ``block_bytes`` (32 MiB): of dense entries (or ``dense`` copies of
    sparse rows), or of a CSR matrix's stored values and indices."""
    n = rows.shape[0]
    if sparse.issparse(rows) and not dense:
        per_row = 16.0 * max(rows.nnz / max(n, 1), 1.0)
    else:
        per_row = 8.0 * max(rows.shape[1], 1)
    return _ranges(0, n, max(1, int(block_bytes // per_row)))


def _clipped_sparse(block, bound, centre, basis):
    """:func:`clipped_projections` of a block of CSR rows (a copy is scaled)."""
    block = sparse.csr_matrix(block, dtype=np.float64, copy=True)
    block.sum_duplicates()
    top = float(np.max(np.abs(centre), initial=0.0))
    with np.errstate(over="ignore", under="ignore"):
        scale = np.maximum(abs(block).max(axis=1).toarray().ravel(), top)
        scale = np.where(scale > 0.0, scale, 1.0)
        block.data /= np.repeat(scale, np.diff(block.indptr))
        ratio = top / scale
        unit_centre = centre / top if top > 0.0 else np.zeros_like(centre)
        squares = np.asarray(block.multiply(block).sum(axis=1)).ravel()
        squares += ratio * (ratio * (unit_centre @ unit_centre)
                            - 2.0 * (block @ unit_centre))
        norms = np.sqrt(np.maximum(squares, 0.0))
        projected = block @ basis - np.outer(ratio, unit_centre @ basis)
        factor = np.minimum(scale, bound / np.maximum(norms, np.finfo(float).tiny))
        return projected * factor[:, None]
