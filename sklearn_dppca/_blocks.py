"""Blocks of rows: how the passes cut ``X`` (dense rows by their number,
CSR rows by their stored entries too), and the float64 blocks they read."""

import numpy as np
from scipy import sparse
from sklearn.utils import assert_all_finite

try:  # the kernels of SciPy's sum_duplicates, on arrays it is given
    from scipy.sparse._sparsetools import csr_sort_indices, csr_sum_duplicates
except ImportError:  # pragma: no cover - a SciPy without them: its method
    csr_sort_indices = csr_sum_duplicates = None

# Rows per block: about 32 MiB of float64, and at least 2048 rows, because
# syrk runs at full speed only when a block has thousands of rows (512-row
# blocks measured 4× slower at d = 1000).
_BLOCK_BYTES = 32 * 2**20
_MIN_BLOCK_ROWS = 2048


def _ranges(start, stop, step):
    """Consecutive ``(a, b)`` of at most ``step`` rows covering ``[start, stop)``."""
    for a in range(start, stop, step):
        yield a, min(a + step, stop)


def _block_rows(n_features):
    return max(_MIN_BLOCK_ROWS, _BLOCK_BYTES // (8 * max(n_features, 1)))


#: Stored entries of a block of CSR rows at most (or one row): each copy a
#: pass makes of a block (SciPy's slice, the float64 cast, the squares of
#: the norms) takes 12 bytes an entry (a value and its column index), so a
#: copy takes at most 8 MiB, public whatever the density (the plan counts
#: three a thread; with 32 MiB copies, 200 MB planned for 20 000 × 500 rows
#: of 20 000 entries). At 1% of 2·10⁴ columns a block is 3 500 rows.
#: Blocks of rows alone held 2 048 × d entries at any density: dense-valued
#: CSR peaked at 3.4 times the plan, and the plan counted a dense block of
#: 2 048 × d on very sparse rows (1.8 GB where 122 MB were used; review 62).
SPARSE_BLOCK_ENTRIES = _BLOCK_BYTES // 48


def sparse_rows(X):
    """Whether ``X`` is sparse rows: a SciPy sparse matrix or
    :class:`BoxedCSR`."""
    return sparse.issparse(X) or isinstance(X, BoxedCSR)


def _csr_like(X):
    return (sparse.issparse(X) and X.format == "csr") or isinstance(X, BoxedCSR)


def _row_ranges(X, start, stop, rows, entries=None):
    """Consecutive ``(a, b)`` covering ``[start, stop)``: at most ``rows``
    rows each and, for CSR ``X``, at most ``entries`` stored entries
    (:data:`SPARSE_BLOCK_ENTRIES` where None), or one row."""
    if not _csr_like(X):
        yield from _ranges(start, stop, rows)
        return
    entries = SPARSE_BLOCK_ENTRIES if entries is None else entries
    indptr, a = X.indptr, start
    while a < stop:
        last = np.searchsorted(indptr, indptr[a] + entries, "right")
        b = max(a + 1, min(a + rows, stop, int(last) - 1))
        yield a, b
        a = b


def _as_float64(rows):
    """Rows as float64: a C-contiguous array (a view when possible) or CSR."""
    if sparse.issparse(rows):
        return rows.astype(np.float64, copy=False)
    return np.ascontiguousarray(rows, dtype=np.float64)


def iter_blocks(X, any_layout=False):
    """Yield ``(start, stop, block)`` with blocks of rows as float64 arrays.

    Dense blocks are views of ``X`` when ``X`` is C-contiguous float64 and
    copies of one block otherwise; sparse blocks are CSR, read-only views of
    a float64 CSR ``X`` (:func:`_csr_rows`). ``any_layout``: views of a
    column-major float64 ``X`` too, for a pass whose every use of a block
    takes either layout (BLAS products, NumPy's element-wise operations).
    """
    for start, stop in block_ranges(X):
        yield start, stop, read_block(X, start, stop, any_layout)


def block_ranges(X):
    """The ``(start, stop)`` of :func:`iter_blocks`'s blocks."""
    return _row_ranges(X, 0, X.shape[0], _block_rows(X.shape[1]))


def column_major(X):
    """Whether ``X`` is a column-major float64 array (a Parquet partition),
    read in place by a pass whose every use of it takes either layout."""
    return isinstance(X, np.ndarray) and X.dtype == np.float64 \
        and X.flags.f_contiguous


def read_block(X, start, stop, any_layout=False):
    """Rows ``start:stop`` of ``X`` as :func:`iter_blocks` reads them."""
    if any_layout and column_major(X):
        return X[start:stop]  # a view, its columns strided
    if sparse.issparse(X) and X.format == "csr" and X.dtype == np.float64:
        return _csr_rows(X, start, stop)
    return _as_float64(X[start:stop])


def _csr_rows(X, start, stop):
    """Rows ``start:stop`` of the CSR matrix ``X``, their entries read-only
    views of ``X``'s: SciPy's slice copies them (on 10⁵ × 2·10⁴ rows at 1%,
    0.8 s of a matrix-free fit's 27 s went to those copies), and no pass may
    write into the caller's matrix."""
    lo, hi = X.indptr[start], X.indptr[stop]
    data, indices = X.data[lo:hi], X.indices[lo:hi]
    data.flags.writeable = indices.flags.writeable = False
    # set after construction: SciPy's constructor copies a short view
    block = type(X)((stop - start, X.shape[1]), dtype=X.dtype)
    block.data, block.indices = data, indices
    block.indptr = (X.indptr[start:stop + 1] - lo).astype(X.indptr.dtype)
    return block


#: Stored entries of the rows of ``X`` that :func:`_summed_block` copies and
#: sums at a time (or one row): a 64th of a block's, beside the block.
SUMMED_PART_ENTRIES = SPARSE_BLOCK_ENTRIES // 64


def summed_block_bytes(n_features, itemsize):
    """Bytes a thread's read of a block of rows whose duplicates are summed
    (:func:`_summed_block`) holds beyond what the passes' plan counts of a
    block (``_paths._sparse_blocks``: three copies of 12 bytes an entry, the
    first a slice that a float64 CSR matrix's views no longer make, whose
    place the summed block takes; mapped and clipped in place there): a
    part of the rows as stored (at most :data:`SUMMED_PART_ENTRIES`
    entries, or one row of ``n_features``), its values and indices, and
    SciPy's sort of a row (16 bytes an entry). Public: whether cells are
    stored twice is not, so every in-memory sparse fit's plan counts it
    (``_base._box_copies``). A row that stores more entries than that is
    summed a piece at a time into ``n_features`` values and booleans
    (:func:`_summed_line`), within the count."""
    return (itemsize + 8 + 16) * _longest_part(n_features)


def _longest_part(width):
    """Stored entries of the longest line :func:`_summed_block` copies and
    sums by SciPy's ``sum_duplicates``: a longer one is summed in pieces
    (:func:`_summed_line`)."""
    return max(SUMMED_PART_ENTRIES, width)


def _summed_line(X, line, dtype, data, indices):
    """Line ``line`` of the CSR matrix ``X``, longer than
    :func:`_longest_part`, with each cell stored once, into ``data`` and
    ``indices`` (as long as its summed line): its entries read a piece of
    half :data:`SUMMED_PART_ENTRIES` at a time and added in the order they
    are stored (:func:`numpy.add.at`) into ``X.shape[1]`` values starting
    at -0.0 (so that a cell stored once keeps its value, -0.0 included) and
    marked in as many booleans; never a copy of the line whole (one row
    storing a cell 4·10⁶ times took 48 MB, in no plan). SciPy sums a line
    in its stored order where ``X``'s lines are all in order (the same sum,
    bit for bit) and otherwise in the order of its unstable sort: a cell
    stored three times or more there may differ in its last bits. ``X`` is
    never written."""
    lo, hi = int(X.indptr[line]), int(X.indptr[line + 1])
    total = np.full(X.shape[1], -0.0, dtype=dtype)
    seen = np.zeros(X.shape[1], dtype=bool)
    piece = max(1, SUMMED_PART_ENTRIES // 2)
    for a in range(lo, hi, piece):
        columns = X.indices[a:min(hi, a + piece)]
        np.add.at(total, columns, X.data[a:min(hi, a + piece)].astype(dtype))
        seen[columns] = True
    indices[...] = np.flatnonzero(seen)
    np.take(total, indices, out=data)


def _summed_part(X, a, b, dtype, in_order):
    """``(data, indices)`` of rows ``a:b`` of the CSR matrix ``X`` in
    ``dtype`` with their duplicates summed: SciPy's ``sum_duplicates`` on a
    copy of them (each row sorted unless ``in_order``, then summed), its
    kernels run on the copied arrays where SciPy has them, without the
    matrices its method builds and checks (mend 136: 85 µs a part, 7 times
    the sum on 10⁵ × 100 rows). Bit for bit the same: the same kernels."""
    lo, hi = X.indptr[a], X.indptr[b]
    values = X.data[lo:hi].astype(dtype)  # copies: summed in place
    columns = X.indices[lo:hi].copy()
    starts = (X.indptr[a:b + 1] - lo).astype(columns.dtype)
    if csr_sum_duplicates is None or dtype not in (np.float32, np.float64):
        part = type(X)((values, columns, starts), shape=(b - a, X.shape[1]),
                       copy=False)  # a SciPy without them (tested)
        part.has_sorted_indices = in_order
        part.sum_duplicates()
        return part.data, part.indices
    if not in_order:
        csr_sort_indices(b - a, starts, columns, values)
    csr_sum_duplicates(b - a, X.shape[1], starts, columns, values)
    return values[:starts[-1]], columns[:starts[-1]]


def _summed_block(X, start, stop, dtype, lines, in_order):
    """Rows ``start:stop`` of the CSR matrix ``X`` in ``dtype`` with each
    cell stored once (``lines``: the index pointers of the summed rows): the
    stored rows copied a part of at most :data:`SUMMED_PART_ENTRIES` entries
    (or one row, summed in pieces where longer than :func:`_longest_part`:
    :func:`_summed_line`) at a time, their duplicates summed by SciPy
    (``sum_duplicates``: each row sorted, unless ``in_order`` says ``X``'s
    rows all are, then summed, on its own), into the block's own arrays.
    Row by row SciPy's sum of ``X`` whole, bit for bit: the copy it
    replaces (``_rows.summed_entries``, held for the whole fit, in no
    plan). ``X`` is never written."""
    lo = lines[start]
    data = np.empty(lines[stop] - lo, dtype=dtype)
    indices = np.empty(lines[stop] - lo, dtype=X.indices.dtype)
    longest = _longest_part(X.shape[1])
    for a, b in _row_ranges(X, start, stop, stop - start, SUMMED_PART_ENTRIES):
        if b == a + 1 and X.indptr[b] - X.indptr[a] > longest:
            _summed_line(X, a, dtype, data[lines[a] - lo:lines[b] - lo],
                         indices[lines[a] - lo:lines[b] - lo])
            continue
        part = _summed_part(X, a, b, dtype, in_order)
        data[lines[a] - lo:lines[b] - lo] = part[0]
        indices[lines[a] - lo:lines[b] - lo] = part[1]
    block = type(X)((stop - start, X.shape[1]), dtype=dtype)
    block.data, block.indices = data, indices
    block.indptr = (lines[start:stop + 1] - lo).astype(X.indptr.dtype)
    block.has_canonical_format = True
    return block


#: Stored entries clipped (or mapped) at a time by :class:`BoxedCSR`: its
#: temporaries, the bounds of that many entries (or the masks of
#: :func:`numpy.nan_to_num`), are arrays of at most 2 MiB.
CLIP_ENTRIES = 2**18


def clip_into(out, values, columns, lower, upper):
    """``out[:] = clip(values, lower[columns], upper[columns])``, in runs of
    :data:`CLIP_ENTRIES` entries (two temporaries of that length)."""
    for a in range(0, values.size, CLIP_ENTRIES):
        part = columns[a:a + CLIP_ENTRIES]
        np.clip(values[a:a + CLIP_ENTRIES], lower[part], upper[part],
                out=out[a:a + CLIP_ENTRIES])
    return out


def map_into(out, values):
    """``out[:] = numpy.nan_to_num(values)`` (NaN to 0, ±inf to ± the
    dtype's largest finite value: ``non_finite="clip"``'s map, bit for bit),
    in runs of :data:`CLIP_ENTRIES` entries (its masks of that length)."""
    for a in range(0, values.size, CLIP_ENTRIES):
        run = out[a:a + CLIP_ENTRIES]
        if out is not values:
            run[...] = values[a:a + CLIP_ENTRIES]
        np.nan_to_num(run, copy=False)
    return out


def _row_numbers(rows, n_rows):
    """Rows given by index (numbers, maybe negative, or a mask) as their
    numbers, without an array of every row's (read per block of a pass)."""
    rows = np.asarray(rows)
    if rows.dtype == bool:
        return np.flatnonzero(rows)
    return np.where(rows < 0, rows + n_rows, rows)


class BoxedCSR:
    """The rows of a CSR matrix mapped by ``non_finite="clip"``'s map
    (``mapped``: :func:`numpy.nan_to_num`) and/or clipped into a box that
    holds 0 (its zeros stay zeros), never held whole: indexed by rows
    (``X[a:b]``, ``X[indices]``) it returns those rows as a CSR matrix of
    ``X``'s dtype whose values are a mapped, then clipped copy (a slice's
    indices are read-only views of ``X``'s), the same values in the same
    order as a mapped (``_pca_model._mapped_values``), then clipped copy of
    ``X`` whole (``_box.clipped_entries``) gives. The passes read a block
    at a time (:data:`SPARSE_BLOCK_ENTRIES` stored entries, or one row):
    the memory plan counts a block's values a thread
    (``_base._copies_of_rows``), never a copy of every value (mend 129: the
    map's copy counted at ``n d`` values refused wide fits). ``X`` is never
    written. Anything that would read it whole (``np.asarray``) is refused.

    Parameters
    ----------
    X : CSR matrix of shape (n_samples, n_features)
    lower, upper : ndarray of shape (n_features,), or None (no box)
        The box, in ``X``'s dtype (exact: ``_box.inward_box``).
    mapped : bool, default=False
        Whether the values are mapped by :func:`numpy.nan_to_num` first.
    summed : tuple (lines, in_order), or None
        For an ``X`` that stores a cell more than once: the index pointers
        of its rows with each cell stored once, and whether ``X``'s rows
        are all in order. A block is then read with its duplicates summed
        before the map and the box (:func:`_summed_block`; in float64
        unless ``X`` is float32), as SciPy's sum of ``X`` whole gives them,
        a block at a time, never a summed copy of every value (mend 131).
    """

    ndim = 2
    format = "csr"

    def __init__(self, X, lower=None, upper=None, mapped=False, summed=None):
        self.base, self.summed = X, summed
        self.shape, self.dtype = X.shape, X.dtype
        if summed is not None and X.dtype != np.float32:
            self.dtype = np.dtype(np.float64)
        self.boxed = lower is not None
        if self.boxed:
            lower = np.asarray(lower).astype(self.dtype)
            upper = np.asarray(upper).astype(self.dtype)
        self.lower, self.upper, self.mapped = lower, upper, mapped

    def clipped(self, lower, upper):
        """These rows clipped into the box ``[lower, upper]`` too (after the
        sum and the map, if any): lazily, no copy."""
        return BoxedCSR(self.base, lower, upper, self.mapped, self.summed)

    def toarray(self):
        """The rows, dense (a new array, filled a block at a time)."""
        dense = np.zeros(self.shape, dtype=self.dtype)
        for a, b in _row_ranges(self, 0, self.shape[0],
                                _block_rows(self.shape[1])):
            self[a:b].toarray(out=dense[a:b])
        return dense

    @property
    def indptr(self):
        """``X``'s index pointers (read-only): where its blocks fall."""
        indptr = (self.base.indptr if self.summed is None else self.summed[0]).view()
        indptr.flags.writeable = False
        return indptr

    @property
    def nnz(self):
        return self.base.nnz if self.summed is None else int(self.summed[0][-1])

    def __getitem__(self, rows):
        if isinstance(rows, tuple):
            raise TypeError("BoxedCSR rows are indexed by rows only")
        X = self.base
        if isinstance(rows, slice) and rows.step in (None, 1):
            start, stop, _ = rows.indices(X.shape[0])
            if self.summed is not None:  # a copy: mapped and clipped in place
                block = _summed_block(X, start, max(start, stop), self.dtype,
                                      *self.summed)
                values = block.data
            else:
                block = _csr_rows(X, start, max(start, stop))  # views: no copy
                values = np.empty_like(block.data)
        elif self.summed is not None and self._long_rows(rows):
            # each row as a slice sums it (a long one in pieces), read alike
            block = sparse.vstack(
                [_summed_block(X, r, r + 1, self.dtype, *self.summed)
                 for r in _row_numbers(rows, X.shape[0])], format="csr",
                dtype=self.dtype)
            values = block.data
        else:
            block = X[rows]  # a copy: mapped and clipped in place
            if self.summed is not None:  # each row summed as in X whole
                # NumPy's cast: SciPy's astype to another dtype sums first
                block.data = block.data.astype(self.dtype, copy=False)
                block.has_sorted_indices = self.summed[1]
                block.sum_duplicates()
            values = block.data
        source = block.data
        if self.mapped:
            source = map_into(values, source)
        if self.boxed:
            source = clip_into(values, source, block.indices, self.lower,
                               self.upper)
        elif source is not values:  # neither: a copy all the same
            values[...] = source
        block.data = values
        return block

    def _long_rows(self, rows):
        """Whether the rows ``rows`` (by index) hold one that
        :func:`_summed_block` sums in pieces (:func:`_summed_line`)."""
        rows = _row_numbers(rows, self.shape[0])
        indptr = self.base.indptr
        return bool(np.any(indptr[rows + 1] - indptr[rows]
                           > _longest_part(self.shape[1])))

    def head(self, n_rows):
        """The first ``n_rows`` rows, boxed (views of ``X``, no copy)."""
        n_rows = min(n_rows, self.shape[0])
        summed = self.summed and (self.summed[0][:n_rows + 1], self.summed[1])
        return BoxedCSR(_csr_rows(self.base, 0, n_rows), self.lower,
                        self.upper, self.mapped, summed)

    def check_finite(self):
        """Refuse a NaN or infinite value (scikit-learn's ``ValueError``)
        among the rows' values as summed, before the box: none when mapped
        (finite). Summed, they are read a block at a time (a sum may
        overflow: the cell is then infinite, refused as any other)."""
        if self.mapped:
            return
        if self.summed is None:
            assert_all_finite(self.base.data, input_name="X")
            return
        rows = BoxedCSR(self.base, summed=self.summed)
        for a, b in _row_ranges(rows, 0, self.shape[0], _block_rows(self.shape[1])):
            assert_all_finite(rows[a:b].data, input_name="X")

    def __array__(self, *args, **kwargs):
        raise TypeError("BoxedCSR rows are read a block of rows at a time, "
                        "never whole")
