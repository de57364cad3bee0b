r"""Clipped statistics of the rows, computed in row blocks.

These are the only functions that read the data. They return exact
(non-private) sums; the estimators add the noise. Rows are clipped to the
norm bound :math:`C` (:math:`x \mapsto x \cdot \min(1, C/\|x\|)`), never
rejected (docs/privacy.rst §1), and no full copy of ``X`` is ever made: a
dense block is copied only when it must be (float32 input, a non
C-contiguous layout, rows of huge norm), and the Gram matrix of a block is
``block.T @ block``, which NumPy computes with BLAS ``syrk`` (half the
flops of a general product).

The first pass reads every row once; on data of 128 MiB or more, in parallel
threads over contiguous row ranges, each computing the norms, the clipped sum
and the raw Gram matrix of its rows while they are in its core's cache. The
centred, re-clipped statistic then re-reads only the rows that the centring
may clip.

All BLAS calls here go through NumPy: interleaving them with SciPy's BLAS,
a separate OpenBLAS with its own spinning thread pool, was measured to halve
the throughput of both on two cores.
"""

import functools
from typing import NamedTuple, Optional

import numpy as np
from scipy import linalg, sparse
from sklearn.utils import assert_all_finite

from ._blocks import (  # noqa: F401 - the passes' blocks, imported from here too
    _BLOCK_BYTES,
    _MIN_BLOCK_ROWS,
    SPARSE_BLOCK_ENTRIES,
    _as_float64,
    _block_rows,
    _csr_rows,
    _ranges,
    _row_ranges,
    iter_blocks,
)
from ._threads import _IN_CHUNK_TASK, _map_ranges, _n_threads

# The first pass scans rows in blocks of about 2 MiB, which stay in a core's
# L2 cache through the norms, the sums and the projections, and adds the Gram
# matrix of runs of at least 8 MiB and 16·d rows (syrk is slow on short runs:
# 262-row runs took 1.4× as long as 16 000-row runs at d = 1000). Measured on
# two cores at 300 000 × 100 and 100 000 × 300, 1000, 3000; runs of rows that
# must be copied (float32, other layouts, CSR) are capped at one block.
_SCAN_BYTES = 2 * 2**20
_RUN_BYTES = 8 * 2**20
_RUN_ROWS_PER_FEATURE = 16
# Corrections of the raw Gram matrix are applied in syrk calls of at least
# this many rows (and about _RUN_BYTES), from a buffer of that size.
_MIN_CORRECTION_ROWS = 1024
# Rows of norm at most this many times C enter the raw Gram matrix of the first
# pass, and a clipped one is later corrected by subtracting part of its outer
# product: the round-off of that subtraction is at most ~1e-16 (8C)² per row.
_RAW_NORM_FACTOR = 8.0


# A Dask worker's task reads blocks of 8 MiB (in the 32 MiB L3 cache shared by
# two cores): with 2 MiB blocks, the pass of "auto"'s norm counts took 72 ms
# per 170 000 × 100 partition in a worker process, 34 ms with 8 MiB (the many
# short NumPy calls of small blocks wait on the worker's other threads for
# the GIL), against 23 ms either way in a plain process.
_CHUNK_SCAN_BYTES = 8 * 2**20
def _scan_rows(n_features):
    scan = _CHUNK_SCAN_BYTES if _IN_CHUNK_TASK.get() else _SCAN_BYTES
    return max(scan // (8 * max(n_features, 1)), 1)


def _sq_norms(block):
    r"""Squared row norms of a block; ``inf`` where :math:`\|x\|^2` overflows.

    Also the finiteness check of the data (NumPy's NaN and inf propagate to
    the norm), so that no separate pass over ``X`` is needed for it: a row
    whose squared norm is not finite is checked entry by entry, and a NaN or
    an infinite entry raises scikit-learn's usual ``ValueError``.
    """
    if sparse.issparse(block):
        sq = np.asarray(block.multiply(block).sum(axis=1)).ravel()
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            sq = np.einsum("ij,ij->i", block, block)
    bad = np.flatnonzero(~np.isfinite(sq))
    if bad.size:
        with np.errstate(over="ignore", invalid="ignore"):  # its sum may overflow
            assert_all_finite(block[bad], input_name="X")
    return sq


def _rescaled_norms(rows):
    r""":math:`(m, \|x/m\|)` per row of a dense array, :math:`m = \max |x|`:
    no overflow.

    The norm is :math:`m \cdot \|x/m\|`; a ratio :math:`C/\|x\|` is
    :math:`(C/m)/\|x/m\|`, exact even when :math:`\|x\|` itself overflows.
    """
    top = np.max(np.abs(rows), axis=1)
    top[top == 0.0] = 1.0
    return top, np.linalg.norm(rows / top[:, None], axis=1)


def _dense(rows):
    return rows.toarray() if sparse.issparse(rows) else rows


def dense_parts(block, rows, centre=None):
    """Yield ``(part, dense)``: the rows ``rows`` (indices) of ``block``,
    dense and less ``centre``, a few at a time (at most
    :data:`_SCAN_BYTES` of them): the rows of huge norm that a pass
    measures on their own. A block's such rows densified at once held up
    to four 2 048 × d arrays beside the plan's one (review 62: a CSR fit
    with one entry of 1e200 a row peaked at 3.6 times its plan)."""
    step = max(1, _SCAN_BYTES // (8 * max(block.shape[1], 1)))
    for a, b in _ranges(0, len(rows), step):
        part = rows[a:b]
        dense = _dense(block[part])
        yield part, (dense if centre is None else dense - centre)


def _norm_margin(block, sq):
    r""":math:`\gamma`: a bound on the relative error of a computed squared
    norm.

    A dot product of :math:`d` terms errs by at most :math:`d \cdot u`
    relative to the sum of the absolute terms (:math:`u = \mathrm{eps}/2`,
    the unit round-off of the lower of the two precisions);
    :math:`(d + 8) \cdot \mathrm{eps}` covers it with the roundings of the
    centring and of the scaling on top, with room to spare.
    """
    eps = max(np.finfo(block.dtype).eps, np.finfo(sq.dtype).eps)
    return (block.shape[1] + 8) * float(eps)


def _clip_scales(block, sq, data_norm, mean=None):
    r""":math:`\min(1, C/\|x - m\|)` for each row of a block (1 for rows
    inside the ball).

    :math:`\|x - m\|^2 = \|x\|^2 - 2 x \cdot m + \|m\|^2` from the stored
    :math:`\|x\|^2`; rows where that overflows are measured directly.

    The scales leave a margin for round-off, so that every scaled row has a
    true norm at most :math:`C` (the sensitivities of docs/privacy.rst §3 are
    proven for that): each computed :math:`\|x - m\|^2` errs by at most
    :math:`\gamma (\|x\| + \|m\|)^2` (:func:`_norm_margin`), and a row is
    scaled by :math:`C / \sqrt{\text{computed} + \text{that bound}}`
    wherever the sum exceeds :math:`C^2`. Rows within :math:`10^{-14}`
    (relative) of the bound are therefore shrunk by that much; rows far
    inside are untouched.
    """
    gamma = _norm_margin(block, sq)
    with np.errstate(over="ignore", invalid="ignore"):
        if mean is None:
            bound = sq * (1.0 + gamma)
        else:
            reach = (np.sqrt(sq) + np.linalg.norm(mean)) ** 2
            sq = np.maximum(sq - 2.0 * (block @ mean) + mean @ mean, 0.0)
            bound = sq + gamma * reach
    scale = np.ones(sq.shape[0])
    over = np.flatnonzero(bound > data_norm**2)  # inf included, NaN never here
    scale[over] = data_norm / np.sqrt(bound[over])
    finfo = np.finfo(np.float32 if block.dtype == np.float32 else np.float64)
    for part, rows in dense_parts(block, np.flatnonzero(~np.isfinite(bound)), mean):
        top, unit = _rescaled_norms(rows)
        with np.errstate(under="ignore"):
            scale[part] = subnormal_safe(
                np.minimum(1.0, (data_norm / top) / (unit * (1.0 + gamma))), finfo)
    return scale


def subnormal_safe(scale, finfo, xp=np):
    r"""Scales below ``finfo``'s smallest normal number less two subnormal
    steps, floored at 0 (``xp``: NumPy, or an Array API namespace and its
    ``finfo``; the Array API engine applies the same rule).

    A row of huge norm with a small bound (:math:`10^{308}` and :math:`C =
    10^{-15}`) has a subnormal scale :math:`C/\|x\|`: each of its two
    roundings (and its cast to float32 for a float32 block's products)
    errs by up to a subnormal step, a relative error far beyond the
    margin's (25% measured: the scaled row's true norm was 1.25 C). Two
    steps less keep every scaled row within :math:`C`; a row beyond
    :math:`10^{300} C` may become 0, a row of norm at most :math:`C` as
    well."""
    step = finfo.smallest_normal * finfo.eps  # the smallest subnormal
    return xp.where(scale < finfo.smallest_normal,
                    xp.maximum(scale - 2 * step, xp.zeros_like(scale)), scale)


def row_sq_norms(X, threads=None):
    """Squared L2 norm of every row of ``X`` (float64, one pass in blocks, in
    at most ``threads`` threads: :func:`_n_threads`).

    ``inf`` marks a finite row whose squared norm overflows; the functions
    below measure such rows directly.
    """
    out = np.empty(X.shape[0])

    def fill(start, stop):
        for a, b in _row_ranges(X, start, stop, _block_rows(X.shape[1])):
            out[a:b] = _sq_norms(_as_float64(X[a:b]))

    _map_ranges(fill, X.shape[0], _n_threads(X, threads))
    return out


def max_row_norm(X, sq_norms):
    r"""Largest row norm of ``X``, exact even where :math:`\|x\|^2`
    overflowed."""
    largest = float(np.max(sq_norms))
    if np.isfinite(largest):
        return float(np.sqrt(largest))
    largest = 0.0
    for _, rows in dense_parts(X, np.flatnonzero(~np.isfinite(sq_norms))):
        top, unit = _rescaled_norms(rows)
        with np.errstate(over="ignore"):  # inf only when the norm itself overflows
            largest = max(largest, float((top * unit).max()))
    return largest


def clipped_sum(X, data_norm):
    r""":math:`\sum \operatorname{clip}_C(x_i)` alone (sensitivity
    :math:`2C`): one cheap pass, no Gram matrix.

    For passes that need only the private mean's statistic (a Dask chunk);
    :func:`first_pass` computes it together with everything else.
    """
    total = np.zeros(X.shape[1])
    for _, _, block in iter_blocks(X):
        total += block.T @ _clip_scales(block, _sq_norms(block), data_norm)
    return total


class FirstPass(NamedTuple):
    """What one pass over the rows leaves for the centred Gram matrix."""

    sq_norms: np.ndarray  # ‖x_i‖² for every row (inf where it overflows)
    clipped_sum: Optional[np.ndarray]  # Σ clip_C(x_i), if asked for
    gram: np.ndarray  # Σ x xᵀ over the rows of norm ≤ 8C (d × d)
    total: np.ndarray  # Σ x over the same rows
    count: int  # how many rows that is
    direction: Optional[np.ndarray]  # unit vector v near the clipped mean's
    projections: Optional[np.ndarray]  # x_i · v for every row


def first_pass(X, data_norm, sq_norms=None, with_sum=True, direction=None,
               with_gram=True, threads=None):
    r"""One pass over the rows: norms, the clipped sum and the raw Gram matrix.

    :math:`\sum \operatorname{clip}_C(x_i)` has L2 sensitivity :math:`2C`
    under replacement of one row (docs/privacy.rst §3); it gives the private
    mean. The raw Gram matrix of the rows of norm at most :math:`8C` is
    computed in the same pass, while the rows are in cache, so that
    :func:`clipped_gram` needs to revisit only the rows that the centring may
    clip. Rows beyond :math:`8C` are left out here and added back, clipped,
    by :func:`clipped_gram`: subtracting their raw outer product later would
    lose all precision.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
    data_norm : float
    sq_norms : ndarray of shape (n_samples,), optional
        Squared row norms of ``X`` if already known; computed otherwise.
    with_sum : bool, default=True
        Whether to compute :math:`\sum \operatorname{clip}_C(x_i)`.
    direction : ndarray of shape (n_features,), optional
        A unit vector :math:`v` for the projections :math:`x_i \cdot v` (the
        direction of a centre already known); with ``with_sum`` and none
        given, the direction of the clipped sum of the first rows.
    with_gram : bool, default=True
        Whether to compute the raw Gram matrix (``gram`` is None otherwise:
        the matrix-free path never forms a :math:`d \times d` matrix).
    threads : int, optional
        The most threads of the pass (the plan's count: :func:`_n_threads`).

    Returns
    -------
    FirstPass
    """
    n, d = X.shape
    known = sq_norms is not None
    sq_norms = sq_norms if known else np.empty(n)
    # x·v for a direction v near the private mean's, kept to tell, after the
    # mean is released, which rows the centring cannot clip without reading
    # them again (see clipped_gram). The clipped mean of the first rows gives v.
    if with_sum and direction is None:
        direction = _lead_direction(X, data_norm)
    projections = None if direction is None else np.empty(n)
    max_raw_sq = (_RAW_NORM_FACTOR * data_norm) ** 2
    n_threads = _n_threads(X, threads)
    # float64 C-contiguous rows are read as views (MovedRows: as copies)
    view = isinstance(X, np.ndarray) and X.dtype == np.float64 and X.flags.c_contiguous
    if n_threads > 1:  # single-threaded syrk, best on runs from the L2 cache
        run_rows = max(_RUN_BYTES // (8 * d), _RUN_ROWS_PER_FEATURE * d, 1)
    else:  # one multi-threaded syrk (~10% faster than one per block)
        run_rows = max(n, 1)  # a Dask chunk may be empty
    scan_rows = _scan_rows(d)
    if not view:  # runs are copies: at most a block each, and without a Gram
        # matrix (no syrk to feed) a scan block: float32 or moved rows
        # (MovedRows) held a block beside the noisy power path's arrays
        run_rows = min(run_rows, _block_rows(d) if with_gram else scan_rows)

    def scan(start, stop):
        sums, count = np.zeros((2, d)), 0
        gram = product = None
        if with_gram:
            gram, product = np.zeros((d, d)), np.empty((d, d))
        for run_start, run_stop in _row_ranges(X, start, stop, run_rows):
            run = _as_float64(X[run_start:run_stop])  # a view of float64 rows
            step = scan_rows if not sparse.issparse(run) else run.shape[0]
            for a, b in _ranges(0, run.shape[0], step):
                block, rows = run[a:b], slice(run_start + a, run_start + b)
                if not known:
                    sq_norms[rows] = _sq_norms(block)
                sq = sq_norms[rows]
                # Σ s x with s the clipping scales (1 for most rows), and
                # Σ x over included rows from it: Σ s x + Σ (1{included} − s) x,
                # whose weights vanish except on the few clipped rows.
                scale = _clip_scales(block, sq, data_norm)
                sums[0] += np.asarray(scale @ block)
                fix = np.flatnonzero(scale < 1.0)
                if fix.size:
                    weight = (sq[fix] <= max_raw_sq) - scale[fix]  # False for inf
                    # a sparse block stays sparse: at small bounds most rows
                    # are clipped, and a dense copy of them is d floats each
                    sums[1] += np.asarray(weight @ block[fix]).ravel()
                if direction is not None:
                    # rows too large for this product are re-read in clipped_gram
                    with np.errstate(over="ignore", invalid="ignore"):
                        projections[rows] = block @ direction
            included = sq_norms[run_start:run_stop] <= max_raw_sq
            n_included = int(np.count_nonzero(included))
            count += n_included
            if with_gram and n_included == len(included):
                _add_gram(gram, run, product)
            elif with_gram:  # copy the included rows a block at a time, not the run
                for a, b in _ranges(0, len(included), _block_rows(d)):
                    _add_gram(gram, run[a:b][included[a:b]], product)
            del run, block  # a copied run is freed before the next is made
        return sums, gram, count

    parts = _map_ranges(scan, n, n_threads)
    sums = sum(part[0] for part in parts)
    return FirstPass(
        sq_norms=sq_norms,
        clipped_sum=sums[0] if with_sum else None,
        # clipped_gram symmetrises it
        gram=_added([part[1] for part in parts]) if with_gram else None,
        total=sums[0] + sums[1],
        count=sum(part[2] for part in parts),
        direction=direction,
        projections=projections,
    )


def unit_direction(centre):
    r""":math:`c/\|c\|`, or None for the origin (``centre`` 0 or None): the
    projections that tell, from the first pass, which rows clipping around
    :math:`c` can touch (exactly:
    :math:`\|x - c\|^2 = \|x\|^2 - 2\|c\| x \cdot v + \|c\|^2`)."""
    size = 0.0 if centre is None else float(np.linalg.norm(centre))
    return centre / size if size > 0.0 else None


def centred_sums(X, data_norm, centre, first=None, threads=None):
    r""":math:`(\sum y y^\top, \sum y)`,
    :math:`y = \operatorname{clip}_C(x - c)`, by row blocks: the first pass
    (computed with the projections on :math:`c/\|c\|` if not given), then
    :func:`clipped_gram` (sensitivities :math:`\sqrt{2} C^2` and
    :math:`2C`), in at most ``threads`` threads (:func:`_n_threads`)."""
    if first is None:
        first = first_pass(X, data_norm, with_sum=False,
                           direction=unit_direction(centre), threads=threads)
    gram, _, total = clipped_gram(X, data_norm, centre, first, with_sum=True,
                                  threads=threads)
    return gram, total


def weighted_gram(X, data_norm, centre):
    r""":math:`(\sum y y^\top, \sum y)`,
    :math:`y = \operatorname{clip}_C(x - c)`, of a dense chunk of rows, or
    ``None`` if it does not apply.

    For a dense float64 chunk in either contiguous layout (a Dask partition
    read from Parquet is column-major), never copied whole: the squared
    norms (the finiteness check) and the clipping scales :math:`s` around
    :math:`c` (:func:`_clip_scales`, with its margin for round-off, so every
    :math:`y` has norm at most :math:`C`: sensitivities :math:`\sqrt{2} C^2`
    and :math:`2C`) in whole-array operations, then, with :math:`w = s^2`,
    :math:`\sum y y^\top = \sum w x x^\top - u c^\top - c u^\top +
    (\sum w) c c^\top` (:math:`u = \sum w x`) and
    :math:`\sum y = \sum s x - (\sum s) c`. :math:`\sum w x x^\top` is
    :math:`X^\top X` less :math:`(1 - w) x x^\top` over the clipped rows
    when they are at most an eighth of the chunk (the sums likewise
    corrected), and otherwise the Gram matrix of the rows scaled by
    :math:`s`, a block of a few megabytes at a time: one syrk either way.
    The branch is a data-dependent path kept for speed (either branch alone
    costs 14 % to 3× more on some data): its time shows which ran, outside
    the threat model (docs/security.rst, "Timing and resources"). The
    expansion errs by about :math:`10^{-16} n (\|c\| + \|x\|)^2`, so it
    applies only when every row has :math:`\|x\| \le 8C + \|c\|`
    (:math:`\|c\| \le 32C`, ``FAR_MEAN`` in ``_norm_plan``): otherwise
    ``None``, and :func:`first_pass` and :func:`clipped_gram` leave the far
    rows out of their raw sums.
    """
    if sparse.issparse(X) or X.dtype != np.float64 or not (
            X.flags.c_contiguous or X.flags.f_contiguous):
        return None
    n, d = X.shape
    reach = 0.0 if centre is None else float(np.linalg.norm(centre))
    sq = _sq_norms(X)
    if not np.all(sq <= (_RAW_NORM_FACTOR * data_norm + reach) ** 2):
        return None
    scale = _clip_scales(X, sq, data_norm, centre)
    clipped = np.flatnonzero(scale < 1.0)
    if 8 * clipped.size <= n:
        gram = X.T @ X  # syrk, either layout
        total = np.ones(n) @ X
        u, weights = total.copy(), np.full(2, float(n))
        if clipped.size:  # the few clipped rows, copied
            rows, s = X[clipped], scale[clipped]
            shrunk = rows * np.sqrt(1.0 - s * s)[:, None]
            gram -= shrunk.T @ shrunk
            change = np.stack([s - 1.0, s * s - 1.0])
            total, u = np.stack([total, u]) + change @ rows
            weights += change.sum(axis=1)
    else:
        gram, sums = np.zeros((d, d)), np.zeros((2, d))
        for a, b in _ranges(0, n, _scan_rows(d)):
            scaled = X[a:b] * scale[a:b, None]  # a copy of the block
            gram += scaled.T @ scaled
            sums += np.stack([np.ones(b - a), scale[a:b]]) @ scaled  # Σ s x, Σ w x
        (total, u), weights = sums, np.array([scale.sum(), scale @ scale])
    if centre is not None:
        add_outer(gram, 2.0 * u - weights[1] * centre, centre, -1.0)
        total = total - weights[0] * centre
    return _symmetric(gram), total


def _lead_direction(X, data_norm):
    """Unit vector along the clipped sum of the first rows (0 if that is 0)."""
    first = max(_MIN_BLOCK_ROWS, _scan_rows(X.shape[1]))
    block = _as_float64(X[:next(_row_ranges(X, 0, X.shape[0], first), (0, 0))[1]])
    total = np.asarray(_clip_scales(block, _sq_norms(block), data_norm) @ block)
    size = np.linalg.norm(total)
    return total / size if size > 0 else np.zeros(X.shape[1])


def clipped_gram(X, data_norm, mean=None, first=None, with_sum=False,
                 threads=None):
    r""":math:`\sum y_i y_i^\top` with
    :math:`y_i = \operatorname{clip}_C(x_i - m)`, and how many rows were
    clipped.

    Frobenius sensitivity :math:`\sqrt{2} C^2`:
    :math:`\|a a^\top - b b^\top\|_F^2 = \|a\|^4 + \|b\|^4 - 2 (a \cdot b)^2
    \le 2 C^4` for rows of norm :math:`\le C` (docs/privacy.rst §3).

    With :math:`s_i` the clipping scale of :math:`x_i - m` and
    :math:`w_i = s_i^2`, :math:`\sum y y^\top = \sum w x x^\top - u m^\top -
    m u^\top + (\sum w) m m^\top` with :math:`u = \sum w x`, so ``X`` is
    never centred in memory. :math:`\sum w x x^\top` starts from the raw Gram
    matrix of :func:`first_pass` and is corrected on the few rows that can be
    clipped, which are the only rows read again: an upper bound of
    :math:`\|x - m\|` from :math:`\|x\|` and :math:`x \cdot v` (both from the
    first pass, :math:`v` near the direction of :math:`m`) rules the others
    out. The correction is :math:`-(1 - w) x x^\top` for a clipped row of the
    raw sum and :math:`+(s x)(s x)^\top` for a row left out of it. The
    round-off of these subtractions is of order :math:`10^{-16} n (C +
    \|m\|)^2`, with :math:`\|m\|` up to ``FAR_MEAN`` (32) times :math:`C`
    (the rows are moved beyond: ``_moved.translate_if_far``): not
    accounted for in the sensitivity (docs/security.rst, "Floating point").

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
    data_norm : float
    mean : ndarray of shape (n_features,) or None
        Public centre :math:`m` (already released), or ``None`` for no
        centring.
    first : FirstPass, optional
        The result of :func:`first_pass` on ``X``; computed if not given.
    with_sum : bool, default=False
        Also return :math:`\sum y_i` (sensitivity :math:`2C`), from the same
        corrections: :math:`\sum s x - (\sum s) m` with :math:`s` the
        clipping scales. ``threads``: the most threads (:func:`_n_threads`).

    Returns
    -------
    gram : ndarray of shape (n_features, n_features)
        Symmetric, float64.
    n_clipped : int
        Rows whose norm exceeded ``data_norm`` (not released; for diagnostics).
    total : ndarray of shape (n_features,)
        :math:`\sum y_i`; only with ``with_sum``.
    """
    if first is None:
        first = first_pass(X, data_norm, with_sum=False, threads=threads)
    d = X.shape[1]
    sq = first.sq_norms
    max_raw_sq = (_RAW_NORM_FACTOR * data_norm) ** 2
    limit = data_norm * (1.0 - 1e-9)  # so that round-off never skips a clipped row
    if mean is not None and first.direction is not None:
        # m = α v + r with r ⊥ v: ‖x − m‖² ≤ ‖x‖² − 2α x·v + 2‖x‖‖r‖ + ‖m‖²
        alpha = float(mean @ first.direction)
        rest = float(np.linalg.norm(mean - alpha * first.direction))

    def maybe_clipped(start, stop):
        with np.errstate(over="ignore", invalid="ignore"):
            if mean is None:
                return ~(sq[start:stop] <= limit**2)
            norms = np.sqrt(sq[start:stop])
            if first.direction is None:
                return ~(norms + np.linalg.norm(mean) <= limit)
            upper_sq = sq[start:stop] - 2.0 * alpha * first.projections[start:stop]
            upper_sq += 2.0 * rest * norms
            return ~(upper_sq <= limit**2 - mean @ mean)

    scan_rows = _scan_rows(d)

    def correct(start, stop, target=None):
        corrections = _Corrections(d, stop - start, target)
        raw = sq[start:stop] <= max_raw_sq
        candidate = maybe_clipped(start, stop) | ~raw
        for a, b in _row_ranges(X, start, stop, _block_rows(d)):
            idx = np.flatnonzero(candidate[a - start : b - start])
            if 8 * idx.size <= b - a:  # few candidates: read them alone
                rows = _dense(_as_float64(X[a + idx]))
                scale = _clip_scales(rows, sq[a + idx], data_norm, mean)
                corrections.add(rows, scale, raw[a - start + idx])
                continue
            # many candidates (a mean far from 0): measure whole scan blocks,
            # one product with m each, and keep only the rows really clipped
            for c, e in _ranges(a, b, scan_rows):
                block = _as_float64(X[c:e])
                scale = _clip_scales(block, sq[c:e], data_norm, mean)
                keep = np.flatnonzero((scale < 1.0) | ~raw[c - start : e - start])
                rows = block if keep.size == e - c else block[keep]  # all: no copy
                corrections.add(_dense(rows), scale[keep], raw[c - start + keep])
                del block, rows  # a copied block is freed before the next is made
        corrections.flush()
        return corrections

    n_threads = _n_threads(X, threads)
    if first.gram is None:
        # no raw Gram matrix (the bound was released after the first pass,
        # and many rows may be clipped): Σ w x xᵀ from every row at once
        parts = _map_ranges(functools.partial(
            _weighted_sums, X, sq, data_norm, mean), X.shape[0], n_threads)
        gram, raw = _added([part.gram for part in parts]), _Sums(0.0, 0.0)
    else:
        gram = first.gram.copy()  # first.gram stays as it was
        # one thread: its corrections go into the copy itself (no third d × d)
        target = gram if n_threads == 1 else None
        parts = _map_ranges(functools.partial(correct, target=target),
                            X.shape[0], n_threads)
        for part in parts:
            if part.gram is not None and part.gram is not gram:
                gram += part.gram
        raw = _Sums(first.total, first.count)
    if mean is not None:
        # Σ w (x − m)(x − m)ᵀ = Σ w x xᵀ − a mᵀ − m aᵀ with a = u − (W/2) m, the
        # symmetric part of Σ w x xᵀ − 2 a mᵀ, taken below
        u = raw.total + sum(part.u for part in parts)
        weight_sum = raw.count + sum(part.weight_sum for part in parts)
        add_outer(gram, 2.0 * u - weight_sum * mean, mean, -1.0)
    result = _symmetric(gram), sum(part.n_clipped for part in parts)
    if not with_sum:
        return result
    # Σ s x − (Σ s) m: the raw rows' sum and count, corrected on the rows read
    # again as Σ w x is (_Corrections.add)
    total = raw.total + sum(part.v for part in parts)
    if mean is not None:
        total = total - (raw.count + sum(part.scale_sum for part in parts)) * mean
    return (*result, total)


class _Sums(NamedTuple):
    r"""The raw rows' :math:`\sum x` and count that corrections start from."""

    total: object
    count: float


class _Weighted(NamedTuple):
    """:func:`_weighted_sums` of a range of rows (the fields
    :class:`_Corrections` gathers, over every row)."""

    gram: np.ndarray
    u: np.ndarray
    weight_sum: float
    v: np.ndarray
    scale_sum: float
    n_clipped: int


def _weighted_sums(X, sq, data_norm, mean, start, stop):
    r""":math:`\sum w x x^\top`, :math:`\sum w x`, :math:`\sum w`,
    :math:`\sum s x`, :math:`\sum s` over rows ``start:stop``, :math:`s` the
    clipping scales of :math:`x - m` and :math:`w = s^2`: one Gram product of
    the rows scaled by :math:`s` (sparse rows stay sparse), never a centred
    copy. Blocks of half the pass's rows, scaled in place where they are a
    copy already (float32 or another layout): a thread holds one block-sized
    array beyond its view of the rows, as the memory plan counts (a scaled
    copy of a full block, and of its float64 copy, took 1.2–2.6 times the
    plan with ``data_norm="auto"``: review 60)."""
    d = X.shape[1]
    gram, buffer = np.zeros((d, d)), np.empty((d, d))
    u, v = np.zeros(d), np.zeros(d)
    weight_sum = scale_sum = 0.0
    n_clipped = 0
    for a, b in _row_ranges(X, start, stop, max(_MIN_BLOCK_ROWS, _block_rows(d) // 2)):
        block = _as_float64(X[a:b])
        scale = _clip_scales(block, sq[a:b], data_norm, mean)
        n_clipped += int(np.count_nonzero(scale < 1.0))
        if sparse.issparse(block):
            scaled = block.multiply(scale[:, None]).tocsr()
        elif isinstance(X, np.ndarray) and np.may_share_memory(block, X):
            scaled = block * scale[:, None]
        else:  # our own copy
            block *= scale[:, None]
            scaled = block
        _add_gram(gram, scaled, buffer)
        u += np.asarray(scale @ scaled).ravel()
        v += np.asarray(scaled.sum(axis=0)).ravel()
        weight_sum += float(scale @ scale)
        scale_sum += float(scale.sum())
        del block, scaled  # freed before the next block is made
    return _Weighted(gram, u, weight_sum, v, scale_sum, n_clipped)


class _Corrections:
    r"""What the clipping of centred rows changes in :math:`\sum x x^\top`,
    :math:`\sum x` and :math:`n`.

    For each row read again, with :math:`s` its clipping scale and
    :math:`w = s^2`: a row inside the raw sum and clipped adds
    :math:`-(1 - w) x x^\top`, a row left out of it (norm beyond :math:`8C`)
    adds :math:`+(s x)(s x)^\top`, never squaring :math:`s` alone; ``u`` and
    ``weight_sum`` gather the matching changes of :math:`\sum w x` and
    :math:`\sum w`, ``v`` and ``scale_sum`` those of :math:`\sum s x` and
    :math:`\sum s`.

    The rank-one updates are copied into one buffer per sign, of about 8 MiB
    and at least 1024 rows (at most an eighth of the rows to read, when there
    are more than 8192), and applied a full buffer at a time: one d × d
    product (syrk) per flush, not per block, and no more memory than the
    buffers however many rows are clipped. ``gram`` stays ``None`` until there
    is something to add.
    """

    def __init__(self, n_features, n_rows, target=None):
        self.gram = target  # a d × d matrix to add to, or None: made when needed
        self.u = np.zeros(n_features)
        self.weight_sum = 0.0
        self.v = np.zeros(n_features)
        self.scale_sum = 0.0
        self.n_clipped = 0
        self.n_features = n_features
        limit = max(_RUN_BYTES // (8 * n_features), _MIN_CORRECTION_ROWS)
        # and no more than an eighth of the rows to read, or all of few rows
        limit = min(limit, max(n_rows // 8, _MIN_CORRECTION_ROWS), n_rows)
        self.limit = max(limit, 1)
        self.buffers = {}
        self.sizes = {1.0: 0, -1.0: 0}
        self.half = False  # gram's lower triangle alone is up to date

    def add(self, rows, scale, inside):
        """Correct for ``rows`` (dense float64, not written to), their scales
        and raw-sum flags. The rows of each kind are scaled straight into the
        buffer (no copy of them where they are all of one kind: every row of
        a block far from the origin is clipped and outside the raw sum)."""
        clipped = scale < 1.0
        self.n_clipped += int(np.count_nonzero(clipped))
        fix = inside & clipped
        if fix.any():
            part = rows if fix.all() else rows[fix]
            shrink = np.sqrt(1.0 - scale[fix] ** 2)
            self._update(part, -1.0, shrink)
            self.u -= part.T @ (shrink * shrink)
            self.weight_sum -= float(np.sum(shrink * shrink))
            self.v += part.T @ (scale[fix] - 1.0)
            self.scale_sum += float(np.sum(scale[fix] - 1.0))
        if not inside.all():
            out = ~inside
            part, factor = ((rows, scale) if not inside.any()
                            else (rows[out], scale[out]))
            self._update(part, 1.0, factor, sums=True)
            self.weight_sum += float(np.sum(factor**2))
            self.scale_sum += float(np.sum(factor))

    def _update(self, rows, sign, factor, sums=False):
        r"""Buffer :math:`\mathtt{gram} \mathrel{+}= \mathtt{sign} \cdot
        (f \odot \mathtt{rows})^\top (f \odot \mathtt{rows})`, each row
        scaled by its ``factor`` :math:`f` as it is written into the buffer;
        with ``sums``, ``u`` and ``v`` gain :math:`\sum f (f x)` and
        :math:`\sum f x` from the scaled rows (:math:`f^2` alone may
        underflow where :math:`f x` does not)."""
        done = 0
        while done < rows.shape[0]:
            size = self.sizes[sign]
            taken = min(rows.shape[0] - done, self.limit - size)
            scaled = self._buffer(sign, size + taken)[size : size + taken]
            np.multiply(rows[done : done + taken], factor[done : done + taken, None],
                        out=scaled)
            if sums:
                self.u += scaled.T @ factor[done : done + taken]
                self.v += scaled.sum(axis=0)
            self.sizes[sign] = size + taken
            done += taken
            if self.sizes[sign] == self.limit:
                self._apply(sign)

    def _buffer(self, sign, n_rows):
        """The buffer of ``sign``, grown (doubling, up to the limit) to ``n_rows``.

        Few corrections (the usual case) then take little memory.
        """
        buffer = self.buffers.get(sign)
        if buffer is None or buffer.shape[0] < n_rows:
            size = min(max(2 * n_rows, 256), self.limit)
            grown = np.empty((size, self.n_features))
            if buffer is not None:
                grown[: self.sizes[sign]] = buffer[: self.sizes[sign]]
            self.buffers[sign] = buffer = grown
        return buffer

    def _apply(self, sign):
        if not self.sizes[sign]:
            return
        rows = self.buffers[sign][: self.sizes[sign]]
        self.sizes[sign] = 0
        if self.gram is not None and self.gram.flags.c_contiguous:
            # into the matrix itself: Gᵀ is Fortran-ordered, and BLAS's syrk
            # adds sign · rowsᵀ rows to its upper triangle (Gram's lower) in
            # place, half a product's flops; flush() copies it to the other
            target = self.gram.T
            out = linalg.blas.dsyrk(sign, rows.T, beta=1.0, c=target,
                                    overwrite_c=True)
            if not np.shares_memory(out, target):  # BLAS worked on a copy
                target[...] = out
            self.half = True
            return
        product = rows.T @ rows  # syrk
        if sign < 0:
            np.negative(product, out=product)
        if self.gram is None:
            self.gram = product
        else:
            self.gram += product

    def flush(self):
        """Apply what is buffered to ``gram`` (whole: both triangles)."""
        for sign in self.sizes:
            self._apply(sign)
        if self.half:
            _mirror_lower(self.gram)
            self.half = False


def _mirror_lower(matrix):
    """Copy the lower triangle of a square matrix onto its upper one, in
    place, a band of rows at a time."""
    for a, b in _bands(matrix.shape[0]):
        block = matrix[a:b, a:b]
        upper = np.triu_indices(b - a, 1)
        block[upper] = block.T[upper]
        matrix[a:b, b:] = matrix[b:, a:b].T
    return matrix


def _bands(d):
    r"""Row bands ``(a, b)`` of a :math:`d \times d` matrix, of about
    ``_RUN_BYTES`` each: the temporaries of the in-place updates below."""
    return _ranges(0, d, max(1, _RUN_BYTES // (8 * max(d, 1))))


def _symmetric(matrix):
    r""":math:`(A + A^\top)/2`, in place, a band of rows at a time (no second
    d × d array): exactly symmetric, as addition commutes (each pair gets the
    same value)."""
    for a, b in _bands(matrix.shape[0]):
        band = matrix[a:b, a:] + matrix[a:, a:b].T
        band *= 0.5
        matrix[a:b, a:] = band
        matrix[a:, a:b] = band.T
    return matrix


def add_outer(matrix, x, y, alpha=1.0):
    r""":math:`\mathtt{matrix} \mathrel{+}= \alpha \, x y^\top`, in place, a
    band of rows at a time (no d × d temporary). Returns ``matrix``."""
    for a, b in _bands(matrix.shape[0]):
        matrix[a:b] += np.outer(alpha * x[a:b], y)
    return matrix


def _added(matrices):
    """The sum of a list of arrays, into the first (no copy of one alone)."""
    total = matrices[0]
    for other in matrices[1:]:
        total += other
    return total


def _add_gram(gram, rows, buffer):
    r""":math:`\mathtt{gram} \mathrel{+}= \mathtt{rows}^\top \mathtt{rows}`.
    Dense rows: NumPy's syrk into ``buffer``, then added. Sparse rows: the
    sparse product's stored entries added into ``gram`` where they fall (a
    CSR product has no duplicate entries), never a dense copy of it: on wide
    sparse data each run's product would otherwise be written out whole,
    :math:`d^2` entries, to add a few. The product is formed by bands of
    :math:`d/5` of its rows: a band's entries with their flat indices
    (about 36 bytes an entry) then take at most the :math:`8 d^2` bytes of
    ``buffer``, which sparse rows leave untouched (the whole product at
    once, with its indices, was measured at 4.5 such matrices)."""
    if sparse.issparse(rows):
        d = gram.shape[1]
        left, rows = rows.T.tocsr(), rows.tocsr()
        flat = gram.reshape(-1)
        for a, b in _ranges(0, d, max(1, d // 5)):
            product = left[a:b] @ rows  # rows a:b of the product, CSR
            if product.nnz:
                where = np.repeat(np.arange(a, b, dtype=np.int64) * d,
                                  np.diff(product.indptr))
                where += product.indices
                flat[where] += product.data
        return gram
    np.matmul(rows.T, rows, out=buffer)
    gram += buffer
    return gram
