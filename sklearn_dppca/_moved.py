r"""Rows with the origin moved to a far private mean (:data:`~sklearn_dppca.
_norm_plan.FAR_MEAN` norm bounds or more from it), so that the covariance's
clipping is computed on explicitly centred rows (docs/privacy.rst §5).

In memory the rows are never copied whole: :class:`MovedRows` is ``X``
less the public centre as the passes read it, a block at a time (a copy of
800 MB at 10⁶ × 100 took 1.8 s of a 2.4 s ``data_norm="auto"`` fit in
fresh pages from the kernel; mend 101). A Dask array is moved lazily, chunk
by chunk, and an Array API array on its device.
"""

import numpy as np
from scipy import sparse

from ._array_api import ArrayAPIRows, like
from ._blocks import _csr_rows
from ._dask import ChunkedRows
from ._norm_plan import FAR_MEAN, SPARSE_MARGIN, expansion_margin
from ._reported import _engine, _rebound
from ._rows import InMemoryRows
from ._stats import _dense


class MovedRows:
    r"""The rows :math:`x_i - c` of ``X`` (a dense array or a CSR matrix) for a
    public centre :math:`c`, never held whole.

    Indexed by rows as an array (``X[a:b]``, ``X[indices]``), it returns
    those rows as a new C-contiguous float64 array: sparse rows densified,
    less :math:`c`, computed in the rows' dtype (float32 rows: the float32
    difference, as ``X - c`` rounds it) and stored in float64, as every
    pass reads rows. The values are those of the copy ``X - c`` that the
    fit made before (so the released values are the same function of the
    data, to the order of the sums): each row's norm is computed from the
    centred row, never from an expansion of :math:`\|x - c\|^2`. Anything
    that would read it whole (``np.asarray``) is refused.

    The passes hold a block of it at a time, a float64 block a thread, in
    at most ``threads`` threads (``_threads._n_threads``): as many blocks as
    the memory plan counts
    (:meth:`~sklearn_dppca._paths._PathMixin._moved_threads`).

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
    centre : ndarray of shape (n_features,)
        In the rows' dtype.
    threads : int or None
        The most threads of a pass over it (None: no cap).
    """

    ndim = 2
    dtype = np.dtype(np.float64)  # what a read returns

    def __init__(self, X, centre, threads=None):
        self.base = X
        self.centre = np.asarray(centre, dtype=X.dtype)
        self.shape = X.shape
        self.threads = threads

    def __getitem__(self, rows):
        if isinstance(rows, tuple):
            raise TypeError("MovedRows are indexed by rows only")
        X = self.base
        if (isinstance(rows, slice) and rows.step in (None, 1)
                and sparse.issparse(X) and X.format == "csr"):
            start, stop, _ = rows.indices(X.shape[0])
            block = _csr_rows(X, start, max(start, stop)).toarray()  # no CSR copy
        else:
            block = _dense(X[rows])
        if (block.dtype == np.float64 and block.flags.owndata
                and block.flags.c_contiguous and block.flags.writeable):
            out = block  # a copy already (fancy indexing, densified)
        else:
            out = np.empty(block.shape, dtype=np.float64)
        # the loop of the rows' dtype, then stored in float64
        return np.subtract(block, self.centre, out=out)

    def __array__(self, *args, **kwargs):
        raise TypeError("MovedRows are read a block of rows at a time, never "
                        "whole")


def translate_if_far(mean, data_norm, data, offset, dtype, first_pass=True,
                     room=None, need=0, threads=None):
    r"""``(mean, data, offset)``: the private mean in the rows' coordinates,
    after moving the origin to it when it is far (:data:`FAR_MEAN`).

    The new origin is the mean rounded to the data's dtype: a public point
    (post-processing of the release), added to ``offset``, so the
    covariance is centred on exactly the ``mean_`` reported. In memory the
    rows become :class:`MovedRows` (no copy: each pass centres the block it
    reads); a Dask array stays lazy; an Array API array is moved on its
    device. With ``first_pass``, the in-memory rows' first pass (their
    norms) is redone for the Gram matrix.

    The passes over moved rows hold a float64 block a thread, in at most
    ``threads`` threads: the plan counts them for dense input. Sparse
    input's blocks become dense there (or its box's dense copy is read by
    copied blocks), ``need`` bytes beyond the plan: where they exceed the
    ``room`` ``memory_limit`` leaves, the rows stay where they are, centred by the
    passes' expansion of :math:`\lVert x - m \rVert^2`, while its round-off
    margin :math:`\gamma (2 \lVert m \rVert + C)^2` is below
    :data:`SPARSE_MARGIN` of :math:`C^2`, else are refused after the charge
    (a function of the released mean and public values): beyond it every
    row was clipped (review 62: the scatter's trace at 0.17 of its value,
    silently). Dense rows were copied whole before, beyond the limit on the
    noisy power path (review 71), and then kept and expanded where the copy
    did not fit.
    """
    norm = float(np.linalg.norm(mean))
    if not norm > FAR_MEAN * data_norm:
        return mean, data, offset
    engine = _engine(data)
    n, d = engine.X.shape
    if isinstance(engine, InMemoryRows) and room is not None and need > room:
        if expansion_margin(d, norm, data_norm) <= SPARSE_MARGIN:  # within it
            return mean, data, offset
        raise MemoryError(
            f"The released mean lies so far from the origin (over {FAR_MEAN:g} "
            "norm bounds) that the rows must be centred on it in dense "
            f"blocks of about {need / 2.0**30:.3g} GiB, more than "
            "memory_limit leaves; the budget of this fit was spent. Centre the "
            "rows on a public point near them first (a column of years minus a "
            "public year), or raise memory_limit.")
    centre = np.asarray(mean, dtype=dtype)
    if isinstance(engine, ChunkedRows):  # CSR chunks densified, as in memory
        moved = ChunkedRows(engine.X.map_blocks(
            _moved, centre, dtype=engine.X.dtype,
            meta=np.empty((0, 0), dtype=engine.X.dtype)))
    elif isinstance(engine, ArrayAPIRows):  # on the device, in its namespace
        moved = ArrayAPIRows(engine.X - like(centre, engine.X), engine.xp,
                             engine.device)
    else:
        moved = moved_in_memory(engine, centre, threads)
    # whether the passes form a raw Gram matrix stays the fit's choice
    # (not on the matrix-free paths, nor with "auto": clipped_gram)
    if hasattr(engine, "with_gram"):
        moved.with_gram = engine.with_gram
    data = _rebound(data, moved)
    if first_pass and not isinstance(engine, ChunkedRows):
        data.first_pass(data_norm, with_sum=False)
    return np.zeros_like(mean), data, offset + centre.astype(np.float64)


def moved_in_memory(engine, centre, threads=None):
    """In-memory rows (an :class:`InMemoryRows`) moved to ``centre``: an
    engine over :class:`MovedRows` (passes in at most ``threads`` threads,
    and at most ``engine``'s: the count its plan read)."""
    return InMemoryRows(MovedRows(engine.X, centre, threads),
                        getattr(engine, "threads", None))


def _moved(chunk, centre):
    """A chunk of rows, dense, with the origin moved to ``centre`` (a CSR
    chunk minus an array would be an ``np.matrix``, which the passes read
    as rows of one)."""
    return _dense(chunk) - centre
