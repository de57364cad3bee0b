"""The statistics of ``data_norm="auto"``: the rows' norms counted on the
grid of candidate bounds, around a centre, with the clipped sums a step of
the private mean needs (:func:`_around`), one pass over the rows on every
engine (:func:`_pass_around`). Exact, never released without noise: the
releases are in ``_bounds``."""

from typing import NamedTuple

import numpy as np
from scipy import sparse

from ._blocks import block_ranges, sparse_rows
from ._dask import ChunkedRows, map_reduce
from ._norm_plan import EXPAND_REACH
from ._reported import _engine
from ._rows import InMemoryRows
from ._stats import (
    _SCAN_BYTES,
    _as_float64,
    _clip_scales,
    _dense,
    _norm_margin,
    _rescaled_norms,
    _scan_rows,
    _sq_norms,
    dense_parts,
    iter_blocks,
)


# ------------------------------------------------------- statistics of rows
def _blocks(X, sq, norms=True, keep=None):
    r"""(``block``, :math:`\|x\|^2` of its rows) over ``X``; norms from
    ``sq`` if given, ``None`` if not asked for (``norms=False``); those
    computed are written into ``keep`` too if given (a vector of the rows).

    Blocks of a few megabytes (``_scan_rows``): the passes of the bounds
    centre every block into a temporary, which at that size stays in cache
    (2× faster than 32 MB blocks at 2e5 × 50). Blocks of a dense float64
    array are views, in either layout (a column-major Dask partition is not
    copied whole first); other dense rows (float32) are cast a part at a
    time, the parts those of :func:`iter_blocks`'s blocks (the same values):
    the cast of a whole 32 MiB block, held while the next was cast, peaked
    at two blocks where the plan counts one a core (mend 116). Sparse rows,
    which :func:`_around` never makes dense whole, come in blocks of about
    :data:`_SCAN_BYTES` / 16 stored entries (at least as many rows as dense
    ones): blocks of two rows of a 100 000-wide CSR made its pass one of
    Python calls.
    """
    step = _scan_rows(X.shape[1])
    if sparse_rows(X) and X.shape[0]:
        per_row = max(X.nnz / X.shape[0], 1.0)
        step = max(step, int(_SCAN_BYTES // (16 * per_row)))
    if sq is None and keep is not None:  # the norms computed into keep
        for block, block_sq in _blocks(X, None):
            kept = block_sq
            if not sparse.issparse(block) and not block.flags.c_contiguous:
                # as row_sq_norms computes them, on C-ordered rows: NumPy sums
                # a strided (column-major) view's rows in another order, and
                # the kept norms differed in their last bits (review 104 F4);
                # the bins keep the view's, as before the norms were kept
                kept = _sq_norms(np.ascontiguousarray(block))
            keep[:block.shape[0]], keep = kept, keep[block.shape[0]:]
            yield block, block_sq
        return
    if isinstance(X, np.ndarray) and X.dtype == np.float64:
        for a in range(0, X.shape[0], step):
            part = X[a:a + step]
            yield part, (sq[a:a + part.shape[0]] if sq is not None else
                         _sq_norms(part) if norms else None)
        return
    if isinstance(X, np.ndarray):  # float32 or integer rows: a part cast at once
        for start, stop in block_ranges(X):
            for a in range(start, stop, step):
                part = _as_float64(X[a:min(a + step, stop)])
                yield part, (_sq_norms(part) if sq is None
                             else sq[a:a + part.shape[0]])
                del part
        return
    for start, stop, block in iter_blocks(X):
        for a in range(0, stop - start, step):
            part = block[a:a + step]
            yield part, (_sq_norms(part) if sq is None
                         else sq[start + a:start + a + part.shape[0]])


def _centred_sq(block, block_sq, centre):
    r""":math:`(\mathrm{rows}, \|\mathrm{rows}\|^2)` of a block centred on
    ``centre``, explicitly.

    :math:`x - c` is formed row by row: the expansion
    :math:`\|x\|^2 - 2 x \cdot c + \|c\|^2` cancels catastrophically (an
    error of about :math:`10^{-16} \|c\|^2`) once the centre is far from the
    origin compared with the bound, which the mean steps of ``"auto"`` make
    the usual case. ``centre`` None: the block and its stored squared norms.
    """
    if centre is None or not centre.any():  # x − 0 is x
        return block, block_sq
    rows = _dense(block) - centre
    return rows, _sq_norms(rows)


def _norm_counts(X, centre, sq_edges, sq=None):
    r"""Rows per bin of :math:`\|x - \mathrm{centre}\|` (``centre`` None: of
    :math:`\|x\|`), the rows beyond the last edge in the last bin:
    :func:`_around`'s counts as the searches see them."""
    return _around(X, centre, sq_edges, sq=sq).searched()


class Around(NamedTuple):
    r"""What one pass says about the rows around a centre :math:`c`, on the
    grid.

    Bins :math:`0, \ldots, B - 1` as :func:`_norm_counts`'s, and bin
    :math:`B` for the rows beyond the grid's last value (``inf`` where a
    norm overflows). Exact statistics: the fit releases only functions of
    them with noise.
    """

    counts: np.ndarray  # (B + 1,) rows per bin of ‖x − c‖
    sums: np.ndarray  # (B + 1, d) Σ (x − c) per bin, or (0,) if not asked for
    units: np.ndarray  # (B + 1, d) Σ (x − c)/‖x − c‖ per bin, or (0,)
    fixed: np.ndarray  # (d,) Σ clip_radius(x − c) at a given radius, or (0,)

    def searched(self):
        """Rows per bin :math:`j < B`, the last also holding the rows beyond
        the grid: the bins the searches see."""
        counts = self.counts[:-1].copy()
        counts[-1] += self.counts[-1]
        return counts

    def cumulative(self):
        r"""Rows in bins :math:`\le j` for :math:`j < B` (the last is
        :math:`n`): the searches' counts."""
        return np.cumsum(self.searched())

    def clipped_sum(self, k, edges):
        r""":math:`\sum \operatorname{clip}_{u_k}(x - c)`: exact
        post-processing of the bins.

        A row in bin :math:`j \le k` has :math:`\|x - c\| \le u_j \le u_k`
        (with the margin for round-off of :func:`_around`) and is its own
        clip; a row in bin :math:`j > k` has
        :math:`\|x - c\| > u_{j-1} \ge u_k` and is clipped to
        :math:`u_k (x - c)/\|x - c\|`. So the sum has every term of norm at
        most :math:`u_k`: L2 sensitivity :math:`2 u_k` (docs/privacy.rst §3).
        """
        return self.sums[:k + 1].sum(axis=0) + edges[k] * self.units[k + 1:].sum(axis=0)


_NOTHING = np.zeros(0)
# squared norms this large may overflow with their margin: centred explicitly
_NEAR_OVERFLOW = np.finfo(np.float64).max / 4


class _Tally:
    r"""The accumulators of one :func:`_around` pass: the counts, the sums
    per bin (allocated once a pass, never a :math:`B \times d` array a
    block) and the clipped sum; for sparse rows summed uncentred, the
    multiples of the centre that :meth:`done` takes off once."""

    def __init__(self, n_bins, d, sums, radius):
        self.counts = np.zeros(n_bins, dtype=np.int64)
        self.sums = np.zeros((n_bins, d)) if sums else _NOTHING
        self.units = np.zeros((n_bins, d)) if sums else _NOTHING
        self.fixed = np.zeros(d) if radius is not None else _NOTHING
        # Σ 1 and Σ scale per bin of the rows summed as x (not x − c), and
        # Σ clip scale of them: x − c summed as Σ x − (Σ 1) c
        self.shift = np.zeros((2, n_bins)) if sums else _NOTHING
        self.fixed_shift = 0.0

    def done(self, centre):
        if centre is not None and self.fixed.size:
            self.fixed -= self.fixed_shift * centre
        if centre is not None and self.sums.size:
            for j in np.flatnonzero(self.shift[0]):  # a d-vector at a time
                self.sums[j] -= self.shift[0, j] * centre
                self.units[j] -= self.shift[1, j] * centre
        return Around(self.counts, self.sums, self.units, self.fixed)


def _around(X, centre, sq_edges, sums=False, radius=None, sq=None, keep=None):
    r"""The rows around ``centre`` (None: the origin) in one pass: an
    :class:`Around`, with the per-bin sums if ``sums`` and
    :math:`\sum \operatorname{clip}_{\mathrm{radius}}(x - c)` if ``radius``
    is given.

    Counts: a row goes to the first bin whose edge is at least its computed
    norm (bin :math:`B` beyond the last edge), so every row is counted in
    exactly one bin whatever its norm, and a count of rows in bins
    :math:`\le j` has sensitivity 1. The per-bin sums place each row by its
    norm enlarged by the round-off margin of
    :func:`~sklearn_dppca._stats._clip_scales`
    (:math:`\|x - c\|^2 (1 + \gamma)`), and its unit vector divides by that
    enlarged norm: a row summed as unclipped at :math:`u_k` has a true norm
    at most :math:`u_k`, and a unit vector a true norm at most 1, so every
    clipped sum assembled from them has terms of norm at most its radius
    (:meth:`Around.clipped_sum`). Dense rows are centred explicitly
    (:func:`_centred_sq`); sparse rows stay sparse
    (:func:`_sparse_centred_sq`), the rows whose norm that cannot give
    within the margin centred explicitly a few at a time. ``sq``: the rows'
    squared norms, computed (and the rows checked finite) if not given, and
    then written into ``keep`` if given and the pass is around the origin.

    Counts and one clipped sum of a dense array around a centre within
    :data:`EXPAND_REACH` radii of the origin (the first step on every row of
    "The first rows") take the norms from
    :math:`\|x\|^2 - 2 x \cdot c + \|c\|^2` instead, without centring a copy
    of each block: their round-off, about
    :math:`(d + 8) \varepsilon (\|x\| + \|c\|)^2`, is far below a grid step
    for the rows near the radius, the sum's scales keep their margin for it
    (:func:`_clip_scales`), and a count of rows in bins :math:`\le j` has
    sensitivity 1 however a row's bin is computed.

    Work: :math:`O(\mathrm{rows} \cdot d)` for dense rows,
    :math:`O(\mathrm{nnz})` for sparse ones, and :math:`O(B \cdot d)` once
    a pass for the sums (review 78: a dense :math:`2B \times d` product a
    block kept a 20 000 × 100 000 CSR fit at 0.05% busy for hours).
    """
    n_bins, d = sq_edges.shape[0] + 1, X.shape[1]
    if (not sums and radius is not None and centre is not None
            and isinstance(X, np.ndarray)
            and np.linalg.norm(centre) <= EXPAND_REACH * radius):
        return _around_expanded(X, centre, sq_edges, radius, sq)
    tally = _Tally(n_bins, d, sums, radius)
    # around a centre, the centred rows' norms (which check them finite too)
    raw = centre is None or not centre.any()
    if raw:
        centre = None
    else:
        with np.errstate(over="ignore"):
            centre_sq = centre @ centre
    for block, block_sq in _blocks(X, sq, norms=raw, keep=keep if raw else None):
        if not sparse.issparse(block):
            rows, rows_sq = _centred_sq(block, block_sq, centre)
            _count(tally, rows, rows_sq, sq_edges, sums, radius)
            continue
        if centre is None:
            rows, rows_sq = block, block_sq
        else:  # x stays sparse: x − c is summed as Σ x − (Σ 1) c
            rows, rows_sq = _sparse_centred_sq(block, centre)
        slow = ~np.isfinite(rows_sq)
        if centre is not None:  # the norm within its margin, not overflowing
            slow |= ((rows_sq < centre_sq) | (rows_sq > _NEAR_OVERFLOW)
                     | (2 * np.diff(rows.indptr) > d + 13))
        if slow.any():  # overflowing or near the centre: centred explicitly
            for part, dense in dense_parts(block, np.flatnonzero(slow), centre):
                _count(tally, dense, _sq_norms(dense), sq_edges, sums, radius)
            fast = np.flatnonzero(~slow)
            rows, rows_sq = rows[fast], rows_sq[fast]
        _count(tally, rows, rows_sq, sq_edges, sums, radius,
               shifted=centre is not None)
    return tally.done(centre)


def _sparse_centred_sq(block, centre):
    r"""(the rows in double precision, canonical CSR;
    :math:`\|x - c\|^2`) of sparse rows, in :math:`O(\mathrm{nnz})`:
    :math:`\sum_{j \in \mathrm{nz}(x)} (x_j - c_j)^2 +
    (\|c\|^2 - \sum_{j \in \mathrm{nz}(x)} c_j^2)`.

    The second term cancels when :math:`c` lies mostly on the row's
    nonzeros; its error is at most about :math:`(d + \mathrm{nnz}) u
    \|c\|^2`, and the first's :math:`(\mathrm{nnz} + 3) u` of itself
    (:math:`u = \varepsilon / 2`). On the rows where the result is at least
    :math:`\|c\|^2` the whole error is at most :math:`(d + 2 \mathrm{nnz} +
    3) u` of the result, within :func:`_norm_margin`'s :math:`(d + 8)
    \varepsilon = (2d + 16) u`, the margin the explicit centring has, where
    :math:`2 \mathrm{nnz} \le d + 13` (the caller centres the other rows
    explicitly: review 81 measured fuller rows at 0.96 of the margin). Entries
    ``inf`` or NaN give a norm that is not finite (centred explicitly, and
    checked there)."""
    rows = sparse.csr_matrix(block, dtype=np.float64, copy=True)
    rows.sum_duplicates()
    m = rows.shape[0]
    owner = np.repeat(np.arange(m), np.diff(rows.indptr))
    near = centre[rows.indices]
    with np.errstate(over="ignore", invalid="ignore"):
        nz = np.bincount(owner, weights=(rows.data - near) ** 2, minlength=m)
        rest = centre @ centre - np.bincount(owner, weights=near * near, minlength=m)
        return rows, nz + rest


def _count(tally, rows, rows_sq, sq_edges, sums, radius, shifted=False):
    r"""Add rows (dense, or sparse of finite norms) with their
    :math:`\|x - c\|^2` to ``tally``; ``shifted``: the rows are :math:`x`,
    not :math:`x - c` (:meth:`_Tally.done` takes off the centre)."""
    n_bins = tally.counts.shape[0]
    place = np.searchsorted(sq_edges, rows_sq)
    tally.counts += np.bincount(place, minlength=n_bins)
    if radius is not None:
        scale = _clip_scales(rows, rows_sq, radius)
        tally.fixed += np.asarray(rows.T @ scale).ravel()
        tally.fixed_shift += scale.sum() if shifted else 0.0
    if not sums:
        return
    with np.errstate(over="ignore"):
        enlarged = rows_sq * (1.0 + _norm_margin(rows, rows_sq))
    # the bin of the enlarged norm: the count's, or the next where the margin
    # crosses an edge (a grid step, ×√2, is far wider than 1 + γ; a wider
    # crossing is searched): 27% faster a pass than a second search
    last = np.append(sq_edges, np.inf)
    index = place + (enlarged > last[place])
    beyond = np.flatnonzero(enlarged > last[index])
    index[beyond] = np.searchsorted(sq_edges, enlarged[beyond])
    with np.errstate(divide="ignore"):
        scale = 1.0 / np.sqrt(enlarged)  # 1/inf = 0: redone below
    scale[enlarged == 0.0] = 0.0
    huge = np.flatnonzero(~np.isfinite(enlarged))
    if huge.size:  # ‖x − c‖² overflows (dense rows): x/‖x‖ from rescaled rows
        top, unit = _rescaled_norms(_dense(rows[huge]))
        scale[huge] = (1.0 / top) / (unit * (1.0 + _norm_margin(rows, rows_sq)))
    _add_bin_sums(rows, index, scale, tally.sums, tally.units)
    if shifted:
        tally.shift[0] += np.bincount(index, minlength=n_bins)
        tally.shift[1] += np.bincount(index, weights=scale, minlength=n_bins)


def _add_bin_sums(rows, index, scale, bin_sums, units):
    r"""Add, per bin ``index``, :math:`\sum \mathrm{rows}` to ``bin_sums`` and
    :math:`\sum \mathrm{scale} \cdot \mathrm{rows}` to ``units``: one product
    of the rows with a sparse indicator of the bins the block uses
    (:math:`2 b \times \mathrm{rows}`, two values per row), O(rows · d) for
    dense rows and O(nnz) for sparse ones, whose product stays sparse and
    is added entry by entry. The indicator is built column by column (a row's
    two entries are a column), in O(rows), without sorting: for dense rows
    SciPy's product then reads each row once, in order, and adds it to its
    two bins, the same sums in the same order as a row-major indicator
    (bitwise), 2.3× faster on 2 621 × 100 blocks. (A dense indicator cost
    O(bins · rows · d); the product with every bin's indicator, made dense,
    O(bins · d) a block: review 78. Sorting the rows by bin and summing runs
    was 2.3× slower than the row-major indicator on 16 384 × 100 blocks.)"""
    m = rows.shape[0]
    if m == 0:
        return
    present = np.bincount(index, minlength=bin_sums.shape[0]) > 0
    used = np.flatnonzero(present)
    u, where = used.shape[0], (np.cumsum(present) - 1)[index]
    entries, values = np.empty(2 * m, dtype=np.intp), np.ones(2 * m)
    entries[0::2], entries[1::2], values[1::2] = where, u + where, scale
    indicator = sparse.csc_matrix((values, entries, np.arange(0, 2 * m + 1, 2)),
                                  shape=(2 * u, m))
    if sparse.issparse(rows):
        both = (indicator.tocsr() @ rows).tocoo()
        lower = both.row < u
        np.add.at(bin_sums, (used[both.row[lower]], both.col[lower]),
                  both.data[lower])
        upper = ~lower
        np.add.at(units, (used[both.row[upper] - u], both.col[upper]),
                  both.data[upper])
        return
    both = indicator @ rows
    bin_sums[used] += both[:u]
    units[used] += both[u:]


def _around_expanded(X, centre, sq_edges, radius, sq):
    r""":func:`_around`'s counts and
    :math:`\sum \operatorname{clip}_{\mathrm{radius}}(x - c)`, the norms
    around :math:`c` by expansion (no centred copy of the blocks)."""
    counts = np.zeros(sq_edges.shape[0] + 1, dtype=np.int64)
    fixed = np.zeros(X.shape[1])
    for block, block_sq in _blocks(X, sq):
        with np.errstate(over="ignore", invalid="ignore"):
            rows_sq = np.maximum(block_sq - 2.0 * (block @ centre) + centre @ centre,
                                 0.0)
        counts += np.bincount(np.searchsorted(sq_edges, rows_sq),
                              minlength=counts.shape[0])
        scale = _clip_scales(block, block_sq, radius, centre)
        fixed += scale @ block - scale.sum() * centre
    return Around(counts, _NOTHING, _NOTHING, fixed)


def _reduce(data, function, *args):
    """``function(X, *args)`` on the rows of ``data``, summed over Dask chunks.

    In memory, the squared norms of the rows (read once, before the charge)
    are passed on; if not known yet, those a pass around the origin computes
    are kept for the later passes (the Gram's first pass: issue 34), a
    vector of the rows that :data:`~sklearn_dppca._paths.ROW_VECTOR_BYTES`
    counts.
    """
    data = _engine(data)
    if isinstance(data, ChunkedRows):
        return map_reduce(data.X, function, *args)
    keep = None
    if data.sq_norms is None and args[0] is None and isinstance(data, InMemoryRows):
        keep = np.empty(data.X.shape[0])
    out = function(data.X, *args, sq=data.sq_norms, keep=keep)
    if keep is not None:
        data.sq_norms = keep
    return out


def _pass_around(data, centre, edges, sums=False, radius=None):
    """One pass over the rows: :func:`_around` on every engine."""
    return Around(*_reduce(data, _around, centre, edges**2, sums, radius))


