"""The in-memory engine: the rows behind one interface, and the released
covariance as an operator.

:class:`InMemoryRows` is the engine of a NumPy array or a SciPy sparse
matrix (the Dask and Array API engines, ``_dask`` and ``_array_api``, have
the same interface): the first pass, the Gram matrix and, once the bound and
the centre are released, :class:`CentredRows`, the rows as the releases see
them. :class:`ImplicitScatter` is the released matrix of the matrix-free
path, never formed. Every statistic they return is exact and computed by
the functions of ``_stats``; the estimators add the noise.
"""

from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext

import numpy as np
from joblib import effective_n_jobs
from scipy import sparse
from sklearn.utils import assert_all_finite

try:  # the kernel SciPy's sparse @ runs, adding into an array it is given
    from scipy.sparse._sparsetools import csc_matvecs as _csc_matvecs
except ImportError:  # pragma: no cover - a SciPy without it: by bands
    _csc_matvecs = None

from . import _blocks
from ._blocks import (
    SPARSE_BLOCK_ENTRIES,
    BoxedCSR,
    _csr_rows,
    _row_ranges,
    block_ranges,
    read_block,
    sparse_rows,
)
from ._stats import (
    _SCAN_BYTES,
    _clip_scales,
    _ranges,
    _rescaled_norms,
    add_outer,
    centred_sums,
    clipped_gram,
    clipped_sum,
    dense_parts,
    first_pass,
    iter_blocks,
    max_row_norm,
    row_sq_norms,
    unit_direction,
)
from ._threads import _SINGLE_THREADED_BLAS, blas_threads


class CentredRows:
    r"""The rows as the releases see them:
    :math:`a_i = \operatorname{clip}_C(x_i - m) / C`.

    Rows in the unit ball (docs/privacy.rst §1), never materialised all at
    once: each pass builds them one block at a time from ``X``, the public
    centre :math:`m` and the stored squared norms of the first pass.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
    data_norm : float
    mean : ndarray of shape (n_features,) or None
    sq_norms : ndarray of shape (n_samples,)
    any_layout : bool
        Read the blocks of a column-major float64 ``X`` as views, not copies
        (:func:`~sklearn_dppca._blocks.iter_blocks`): a Dask partition read
        from Parquet, never copied into row-major order.
    """

    def __init__(self, X, data_norm, mean, sq_norms, any_layout=False):
        self.X = X
        self.data_norm = data_norm
        self.mean = mean
        self.sq_norms = sq_norms
        self.any_layout = any_layout
        # s_i / C, computed by the first pass that needs them (clipped_energy's
        # or clipped_products'), kept for the next: an n-vector of the plan's
        # ROW_VECTOR_BYTES (the clipping test and the first power step each
        # computed them: a read of the rows and the scales' arithmetic more)
        self._unit_scales = None

    def clipped_energy(self, W, radii):
        r""":math:`q(R_j) = \sum_i \min(\|a_i^\top W\|^2, R_j^2)` for each
        radius, one pass.

        Each term lies in :math:`[0, R^2]`, so replacing one row moves
        :math:`q(R)` by at most :math:`R^2`: its L2 sensitivity is
        :math:`R^2` (for any public :math:`W`).

        Parameters
        ----------
        W : ndarray of shape (n_features, k)
        radii : ndarray of shape (n_radii,)

        Returns
        -------
        q : ndarray of shape (n_radii,)
            Exact (released only with noise).
        """
        radii = np.asarray(radii, dtype=float)
        centre = np.zeros(W.shape[0]) if self.mean is None else self.mean
        shift = centre @ W
        total = np.zeros(radii.shape)
        # the unit scales, kept for the passes that follow (clipped_products)
        known = self._unit_scales is not None
        units = self._unit_scales if known else np.empty(self.X.shape[0])
        for start, stop, block in iter_blocks(self.X, self.any_layout):
            unit = units[start:stop]
            if not known:  # as clipped_products computes them: the same numbers
                unit[...] = _clip_scales(
                    block, self.sq_norms[start:stop], self.data_norm, self.mean
                ) / self.data_norm
            with np.errstate(over="ignore", invalid="ignore"):
                products = np.asarray(block @ W)  # a fresh array: in place
                products -= shift
                products *= unit[:, None]
            bad = _nonfinite_rows(products)
            # x W overflowed (rows of huge norm): centre and scale first
            for part, rows in dense_parts(block, bad, centre):
                products[part] = (rows * unit[part, None]) @ W
            total += _energy_terms(products, radii)
            del block  # a copied block is freed before the next is read
        self._unit_scales = units  # complete: kept for the next pass
        return total

    #: Whether :meth:`energy_then_products` reads the rows once for both.
    fuses_first_step = False

    def energy_then_products(self, W_test, test_radii, W, radii, n_jobs=None):
        """The clipping test's :meth:`clipped_energy` now, and the first power
        step's :meth:`clipped_products` as a callable, ``(q, products)``.

        ``CoherentPowerPCA`` knows its first step's :math:`W` before the test
        (the preconditioner comes from the released initialisation), but
        releases those products only if the test chooses the power branch.
        In memory a pass is cheap to repeat, so the products' pass runs only
        when ``products()`` is called; an engine whose every pass reads the
        rows from disk computes both in one (``fuses_first_step``).
        """
        return self.clipped_energy(W_test, test_radii), (
            lambda: self.clipped_products(W, radii, n_jobs))

    def sq_norm_sum(self):
        r""":math:`\sum_i \|a_i\|^2`, one pass: the trace of
        :math:`\sum a a^\top` (each term in :math:`[0, 1]`), exact and
        released only with noise.

        :math:`\|a_i\|^2 = t_i^2 \|x_i - m\|^2` with the clipping scales
        :math:`t_i` and
        :math:`\|x_i - m\|^2 = \|x_i\|^2 - 2 x_i \cdot m + \|m\|^2` from the
        stored norms (no copy of a block); rows where that overflows are
        measured on their own, rescaled. Each term is capped at 1 against
        round-off, so the sum's sensitivity is 1 whatever the rounding.
        """
        total = 0.0
        centre = self.mean
        for start, stop, block in iter_blocks(self.X, self.any_layout):
            sq = self.sq_norms[start:stop]
            unit = _clip_scales(block, sq, self.data_norm, centre) / self.data_norm
            with np.errstate(over="ignore", invalid="ignore", under="ignore"):
                if centre is not None:
                    sq = np.maximum(sq - 2.0 * np.asarray(block @ centre).ravel()
                                    + centre @ centre, 0.0)
                terms = unit * unit * sq
            bad = np.flatnonzero(~np.isfinite(terms))
            for part, rows in dense_parts(block, bad, centre):  # ‖x‖² overflowed
                top, norms = _rescaled_norms(rows)
                with np.errstate(under="ignore"):
                    terms[part] = (unit[part] * top * norms) ** 2
            total += float(np.minimum(terms, 1.0).sum())
            del block  # a copied block is freed before the next is read
        return total

    def clipped_products(self, W, radii, n_jobs=None, energy=None):
        r""":math:`\sum_i a_i \operatorname{Clip}_{R_j}(a_i^\top W_j)` for
        several trials :math:`j` in one pass.

        :math:`\operatorname{Clip}_R(y) = y \cdot \min(1, R/\|y\|)` and
        :math:`\operatorname{Clip}_R(0) = 0`. The sum has Frobenius
        sensitivity :math:`2R` under replacement of one row (each term has
        norm at most :math:`\|a\| R \le R`; docs/privacy.rst §3).

        With :math:`a_i = t_i (x_i - m)`, :math:`t_i = s_i / C`, the products
        are :math:`t_i (x_i W - m W)` and the sum is
        :math:`X^\top Q - m (\sum_i q_i)^\top` with
        :math:`q_i = t_i \operatorname{Clip}(a_i^\top W)`: two products with
        the rows of ``X`` as they are, never a centred copy. The scales
        :math:`t_i` are computed on the first call and kept (one number per
        row).

        Parameters
        ----------
        W : ndarray of shape (n_features, n_trials, k)
            The matrices :math:`W_j = X_j B_j` of the trials, side by side.
        radii : ndarray of shape (n_trials,)
            Clipping radius :math:`R_j` of each trial.
        n_jobs : int or None
            Blocks processed in parallel threads (scikit-learn's meaning:
            joblib's ``effective_n_jobs``), always threads of ours, whatever
            joblib's backend (:meth:`_threaded`). None is one thread, never
            joblib's context count: the fit's plan (``_jobs``) counts the
            threads its caller passes (review 104 F2: PrivatePCA's passes ran
            in ``parallel_config(n_jobs=8)``'s 8 threads, planned for 1);
            ``CoherentPowerPCA`` passes ``effective_n_jobs(n_jobs)``, as its
            plan reads it.
        energy : (W_test, test_radii) or None
            Also :meth:`clipped_energy` of ``W_test`` at ``test_radii``, in
            the same pass: one product of each block with ``W`` and
            ``W_test`` side by side, one computation of its clipping scales
            (the out-of-core pass of the clipping test and the first power
            step).

        Returns
        -------
        products : ndarray of shape (n_features, n_trials, k)
        n_clipped : ndarray of shape (n_trials,)
            Rows whose product was clipped, per trial (not released as is).
        q : ndarray of shape (n_test_radii,)
            With ``energy`` only: :meth:`clipped_energy`'s value.
        """
        d, n_trials, k = W.shape
        width = n_trials * k
        flat = W.reshape(d, width)
        test_radii = None
        if energy is not None:  # the test's columns after the trials'
            flat = np.hstack([flat, energy[0]])
            test_radii = np.asarray(energy[1], dtype=float)
        if sparse_rows(self.X):  # else SciPy copies it for every block
            flat = np.ascontiguousarray(flat)
        radii = np.asarray(radii, dtype=float)
        known = self._unit_scales is not None
        units = self._unit_scales if known else np.empty(self.X.shape[0])
        centre = np.zeros(d) if self.mean is None else self.mean
        shift = centre @ flat  # m W

        def one_block(start, stop, block, into=None, slot=None):
            unit = units[start:stop]
            if not known:
                scale = _clip_scales(block, self.sq_norms[start:stop],
                                     self.data_norm, self.mean)
                unit[...] = scale / self.data_norm
            with np.errstate(over="ignore", invalid="ignore"):
                if slot is None or slot[0] is None:  # sparse: SciPy's own array
                    products = np.asarray(block @ flat)
                else:
                    products = np.matmul(block, flat, out=slot[0][:stop - start])
            bad = _nonfinite_rows(products)
            products -= shift
            products *= unit[:, None]
            # x W overflowed (rows of huge norm): centre and scale first
            for part, rows in dense_parts(block, bad, centre):
                products[part] = (rows * unit[part, None]) @ flat
            q = None
            if test_radii is not None:  # the test's columns: clipped_energy's sum
                q = _energy_terms(products[:, width:], test_radii)
                products = products[:, :width]
            products = products.reshape(-1, n_trials, k)
            norms = np.sqrt(np.einsum("bjk,bjk->bj", products, products))
            # a margin for the rounding of the computed norms (over k entries),
            # as for the rows (_clip_scales): every clipped y has norm ≤ R
            norms *= 1.0 + (k + 8) * np.finfo(np.float64).eps
            over = norms > radii
            with np.errstate(divide="ignore", invalid="ignore"):
                factor = np.where(over, radii / norms, 1.0)
            explicit = _explicit_terms(block, centre, unit, radii, products, factor)
            coef = factor * unit[:, None]
            if explicit is not None:  # those terms are not in XᵀQ − m Σ qᵀ
                coef[explicit[0]] = 0.0
            products *= coef[:, :, None]
            products = products.reshape(-1, n_trials * k)
            if slot is not None:  # a thread's part, added by the caller
                part = slot[1]
                if sparse.issparse(block):
                    part[...] = 0.0
                    _add_transposed_product(part, block, products)
                else:
                    np.matmul(block.T, products, out=part)
                if explicit is not None:
                    part += explicit[1]
                return part, products.sum(0), over.sum(0), q
            _add_transposed_product(into, block, products)
            if explicit is not None:
                into += explicit[1]
            return None, products.sum(0), over.sum(axis=0), q

        # threads of ours, if any, each with a single-threaded BLAS (two-threaded
        # BLAS in two threads measured 1.3× slower than one thread)
        threads = 1 if n_jobs is None else effective_n_jobs(n_jobs)
        # each block's d × (trials · k) sum added as it comes (never one per
        # block held at once: n / 2048 of them on many rows); the centring's
        # − m (Σ q)ᵀ once at the end, in place (no d × (trials · k) temporary)
        total, counts = np.zeros((d, width)), np.zeros(n_trials, dtype=int)
        q_sum = np.zeros(width)
        q_test = None if test_radii is None else np.zeros(test_radii.shape)
        ranges = list(block_ranges(self.X)) if threads > 1 else []
        threads = min(threads, len(ranges))  # at most one a block
        if threads > 1:
            for q_part, count, q in self._threaded(one_block, ranges, threads, total,
                                                   flat.shape[1]):
                q_sum += q_part
                counts += count
                if q is not None:
                    q_test += q
        else:
            for item in iter_blocks(self.X, self.any_layout):
                _, q_part, count, q = one_block(*item, into=total)
                del item  # a copied block is freed before the next is read
                q_sum += q_part
                counts += count
                if q is not None:
                    q_test += q
        if self.mean is not None:
            add_outer(total, centre, q_sum, -1.0)
        self._unit_scales = units  # complete: kept for the next call
        if q_test is not None:
            return total.reshape(d, n_trials, k), counts, q_test
        return total.reshape(d, n_trials, k), counts

    def _threaded(self, one_block, ranges, n_threads, total, columns):
        r"""A pass of :meth:`clipped_products` in ``n_threads`` threads of ours,
        each with a single-threaded BLAS: thread :math:`t` takes the blocks
        :math:`t, t + T, \ldots` of ``ranges`` (:func:`block_ranges`) and adds
        their parts into a sum of its own (thread 0 into ``total``, which gets
        the others' in their order: a pass is reproducible for a given thread
        count, and its sums those of one thread, to rounding). Each thread
        writes its block's products (``columns`` wide) and its part into
        arrays the calling thread allocated: :data:`~sklearn_dppca._paths.
        PASS_PRODUCTS` and :data:`~sklearn_dppca._paths.PASS_PARTS` count them.
        Returns each thread's other sums, ``(q_sum, counts, q)``.

        It was joblib's ``Parallel(prefer="threads", return_as="generator")``:
        a fresh pool a pass, whose threads allocated every array of a block in
        their own glibc arena, which keeps what it frees (up to 8 arenas a
        core): at :math:`d = 1\,500`, :math:`n = 3\,000`, :math:`k = 1\,100`
        (``CoherentPowerPCA(path="noisy_power", n_jobs=2)``, three iterations)
        the fit peaked at 14–19 :math:`d^2` (RSS; NumPy's traced arrays 8.5)
        against 9.3 in one thread, growing with the passes (20.7 at eight
        iterations; ``MALLOC_ARENA_MAX=1``, 2 and 3: 10.4, 12.0 and 13.6). A
        user's joblib backend also ran it (``parallel_config(backend="loky")``:
        processes, whose row scales, computed on the first pass, never came
        back: the next pass clipped with uninitialised ones)."""
        d, width = total.shape
        rows = max(b - a for a, b in ranges)
        dense = not sparse_rows(self.X)
        sums = [total] + [np.zeros_like(total) for _ in range(n_threads - 1)]
        slots = [(np.empty((rows, columns)) if dense else None, np.empty((d, width)))
                 for _ in range(n_threads)]

        def thread(t):
            sums_t = None
            for start, stop in ranges[t::n_threads]:
                part, *rest = one_block(
                    start, stop, read_block(self.X, start, stop, self.any_layout),
                    slot=slots[t])
                sums[t] += part
                sums_t = rest if sums_t is None else [
                    a if b is None else a + b for a, b in zip(sums_t, rest)]
            return sums_t

        with _SINGLE_THREADED_BLAS, ThreadPoolExecutor(n_threads) as pool:
            results = list(pool.map(thread, range(n_threads)))
        for other in sums[1:]:
            total += other
        return results


def _nonfinite_rows(products):
    """The rows of a block's products with an entry not finite (``x W``
    overflowed on a row of huge norm): one test of the whole block, and the
    rows' own tests only where it fails (the test row by row, a reduction
    along the k entries of each row, took as long as the subtraction and
    the scaling together at 10⁶ × 100, k = 2, in each pass)."""
    if np.isfinite(products).all():
        return np.empty(0, dtype=np.intp)
    return np.flatnonzero(~np.isfinite(products).all(axis=1))


def _energy_terms(products, radii):
    r""":math:`\sum_i \min(\|y_i\|^2, R_j^2)` over a block's rows
    :math:`y_i` (``products``), for each radius: the clipping test's
    statistic (:meth:`CentredRows.clipped_energy`)."""
    sq = np.einsum("ij,ij->i", products, products)
    return np.minimum(sq[:, None], radii**2).sum(axis=0)


#: Below this :math:`R t_i` (a row's clipping radius times its unit scale)
#: a term's :math:`q_i = t_i \operatorname{Clip}_R(y_i)` has entries that
#: round by subnormal steps, an error that :math:`x_i q_i^\top` multiplies
#: by :math:`\|x_i\| \approx 1/t_i`: the term is formed from normal
#: numbers instead (:func:`_explicit_terms`).
SUBNORMAL_TERMS = np.finfo(np.float64).tiny / np.finfo(np.float64).eps


def _explicit_terms(block, centre, unit, radii, products, factor):
    r"""The terms :math:`a_i \operatorname{Clip}_R(y_i)^\top` of the rows and
    trials where :math:`R t_i` < :data:`SUBNORMAL_TERMS` (a row of norm near
    :math:`10^{308}` with a small :math:`R`), formed as
    :math:`((x_i - m) t_i) \otimes (f_i y_i)`: both factors of norm at most 1
    and :math:`R`, so their roundings are relative, within the margin. In
    :math:`X^\top Q - m (\sum q_i)^\top` those terms' :math:`q_i` were
    subnormal, and rounded by up to half a subnormal step, which
    :math:`x_i` multiplied by up to :math:`10^{308}`: a term reached 1.98
    :math:`R` (an outside review), and neighbours' sums differed by 3.2
    :math:`R` for a stated :math:`2R`.

    Returns
    -------
    None, or (mask, terms)
        ``mask`` (rows, trials): the pairs formed here, whose ``q`` the
        caller zeroes; ``terms`` (d, trials · k): their sum.
    """
    small = radii[None, :] * unit[:, None] < SUBNORMAL_TERMS
    if not small.any():
        return None
    terms = np.zeros((block.shape[1], products.shape[1] * products.shape[2]))
    for part, rows in dense_parts(block, np.flatnonzero(small.any(axis=1)), centre):
        clipped = products[part] * factor[part][:, :, None]
        clipped[~small[part]] = 0.0  # those pairs take the usual route
        terms += (rows * unit[part, None]).T @ clipped.reshape(part.size, -1)
    return small, terms


def _add_transposed_product(total, block, products):
    r""":math:`\mathtt{total} \mathrel{+}= \mathtt{block}^\top
    \mathtt{products}`. Dense rows take BLAS's one product (bands of columns
    were 1.5× slower at d = 2·10⁴). Sparse rows: SciPy's own kernel for a
    sparse product (``csc_matvecs``, which its ``@`` calls) adds the product
    into ``total`` in place, reading the CSR block as its transpose in CSC
    form: no conversion, no temporary, each stored value read once (on the
    CSR 10⁵ × 2·10⁴ matrix-free fit at ``k = 50``, one thread: as fast as
    bands of a converted copy in a plain process, 27.9 s, and 33.9 s against
    44.6 s where every array of 128 KiB or more is a fresh mapping, as
    ``bench_wide.py``'s worker had it). Without that kernel (another SciPy),
    by bands of ``total``'s rows:
    a band × width temporary of at most ``_SCAN_BYTES``, not a second array
    of ``total``'s size (on sparse rows of many columns these two are most of
    a fit's memory).
    """
    if not sparse.issparse(block):
        total += block.T @ products
        return
    if (_csc_matvecs is not None and total.flags.c_contiguous
            and total.dtype == block.dtype == products.dtype == np.float64
            and block.indptr.dtype == block.indices.dtype):
        products = np.ascontiguousarray(products)
        _csc_matvecs(total.shape[0], block.shape[0], products.shape[1],
                     block.indptr, block.indices, block.data, products.ravel(),
                     total.ravel())  # a view: the sum lands in total
        return
    transposed = block.T.tocsr()
    band = max(1, _SCAN_BYTES // (8 * products.shape[1]))
    for a, b in _ranges(0, total.shape[0], band):
        total[a:b] += np.asarray(transposed[a:b] @ products)


def summed_entries(X):
    r"""``X`` with each entry stored once: a CSR or CSC matrix holding
    duplicate entries (one cell stored several times, which SciPy reads as
    their sum) copied, in float64 unless it is float32, with its duplicates
    summed; anything else as it is, ``X`` never modified.

    Every statistic then reads a cell as SciPy does. Read entry by entry, a
    row whose cell is stored as ``1e20, -1e20, -0.3`` has norm 0.3 but
    adds :math:`(\sum_i a_i)^2` as nine products to the Gram matrix, and
    each duplicate of a box's edge counts once in a per-feature sum: one
    row would move a release far beyond its sensitivity. Summing runs in
    SciPy's compiled code (no warning where a sum overflows: the cell is
    then infinite, and refused or mapped as any other).

    A matrix whose indices are only out of order (each cell stored once) is
    read as it is: no pass needs them sorted, and its summed copy, held for
    the whole fit, was in no memory plan (mend 124: 2 times the plan). A
    fit's in-memory rows are never copied so: they are summed a block at a
    time as the passes read them (:func:`lazy_rows`, mend 131); this copy
    is of a Dask chunk, or of rows a fitted model maps (``transform``)."""
    if (not sparse.issparse(X) or X.format not in ("csr", "csc")
            or X.has_canonical_format or not stores_twice(X)):
        return X
    X = X.astype(X.dtype if X.dtype == np.float32 else np.float64, copy=True)
    X.sum_duplicates()
    return X


def lazy_rows(X, mapped=False):
    """Sparse ``X`` as CSR rows with each cell stored once, mapped by
    ``non_finite="clip"``'s map if ``mapped``: ``X`` itself, or a lazy
    :class:`~sklearn_dppca._blocks.BoxedCSR` that sums (where ``X`` stores
    a cell twice) and maps the block of rows a pass reads. The summed copy
    of every value it replaces was held for the whole fit and counted in no
    plan (mend 124: 2 times it); the plan counts a block a thread
    (``_base._copies_of_rows``) and the summed rows' index pointers. CSC
    ``X`` is copied to CSR (the copy the plan counts at ``n d`` entries),
    with its duplicates summed column by column as it is made
    (:func:`summed_csr`). ``X`` is never modified."""
    if X.format != "csr":
        return lazy_rows(summed_csr(X), mapped)
    summed = None if X.has_canonical_format else summed_indptr(X)
    if summed is not None:
        in_order = _csr_rows(X, 0, X.shape[0]).has_sorted_indices  # X unflagged
        return BoxedCSR(X, mapped=mapped, summed=(summed, in_order))
    return BoxedCSR(X, mapped=True) if mapped else X


def summed_csr(X):
    """The CSC matrix ``X`` as CSR with each cell stored once: ``X.tocsr()``
    where it stores each cell once; otherwise its columns summed a part of
    :data:`~sklearn_dppca._blocks.SUMMED_PART_ENTRIES` entries at a time
    (``_blocks._summed_block`` on the CSR view ``X.T``: SciPy's sum of
    ``X`` whole column by column, bit for bit; a column longer than ``n``
    entries summed in pieces into ``n`` values, in the order stored: SciPy's
    sum where ``X``'s columns are in order, else to rounding where it
    stores a cell three times or more) and written into the CSR arrays
    once: the rows' counts come from the scan that finds the cells stored
    twice (:func:`summed_indptr`'s ``dropped``), and a part's entries are
    placed by one sort of their rows (mend 136: a counting pass summed
    every column, and a stable argsort placed them; 4-20 times SciPy's
    ``tocsr`` and ``sum_duplicates``, now 2-8 times). It holds the CSR
    copy, at most ``n d`` entries (the plan's count of CSC's copy), and
    ``n + 1`` integers (the summed rows' index pointers it counts): the
    summed copy of every entry ``X`` stores, which it replaces, was in no
    plan (review 111 F2: 1.06 times the limit with each cell stored 4
    times). The same values and index pointers as SciPy's ``tocsr`` of that
    copy, its indices int32 where ``n d < 2**31`` (the plan's count); in
    float64 unless ``X`` is float32. ``X`` is never modified."""
    columns = X.T  # a CSR view: its lines are X's columns
    n, d = X.shape
    # the summed rows' counts: the entries each row stores, less those the
    # scan of X's columns finds stored twice (one scan, not a sum of every
    # column only to count its rows: mend 136, 5-16 times SciPy's sum)
    starts = np.zeros(n + 1, dtype=np.int64)
    lines = None if X.has_canonical_format else summed_indptr(columns, starts)
    if lines is None:
        return X.tocsr()
    for a in range(0, X.indices.size, _blocks.SUMMED_PART_ENTRIES):
        np.add.at(starts, X.indices[a:a + _blocks.SUMMED_PART_ENTRIES] + 1, 1)
    np.cumsum(starts, out=starts)
    in_order = _csr_rows(columns, 0, d).has_sorted_indices  # X unflagged
    dtype = np.dtype(np.float32 if X.dtype == np.float32 else np.float64)
    parts = list(_row_ranges(columns, 0, d, d, _blocks.SUMMED_PART_ENTRIES))

    def summed_parts():
        for a, b in parts:
            yield a, b, _blocks._summed_block(columns, a, b, dtype, lines,
                                              in_order)

    # the index dtype the plan counts (_base._sparse_copy), from the shape:
    # SciPy's, from X's arrays, kept int64 for a csc_array's int64 indices
    # and its csr_matrix then copied them down to int32 (review 117 F1: 1.16
    # times the plan)
    index = np.int32 if n * d < 2**31 else np.int64
    indptr = starts.astype(index)
    data = np.empty(int(lines[-1]), dtype=dtype)
    indices = np.empty(int(lines[-1]), dtype=index)
    free = starts[:-1]  # each row's next free entry
    for a, b, part in summed_parts():
        if b == a + 1:  # one column: each row once, at its next free entry
            places = free[part.indices]
            data[places] = part.data
            indices[places] = a
            free[part.indices] += 1
            continue
        size = part.indices.size
        # each entry's row and place in the part in one key, sorted: by
        # row, then column (its columns are in order); unique keys sorted
        # by value, not a stable argsort (mend 136: 5 times faster)
        keys = part.indices.astype(np.int64)
        keys *= size
        keys += np.arange(size)
        keys.sort()
        order = keys % size
        keys //= size  # the rows, sorted
        new = np.empty(size, dtype=bool)
        new[:1] = True
        np.not_equal(keys[1:], keys[:-1], out=new[1:])
        places = np.where(new, np.arange(size), 0)
        np.maximum.accumulate(places, out=places)  # each row's first
        places -= np.arange(size)
        np.subtract(free[keys], places, out=places)  # its next free entry
        data[places] = part.data[order]
        indices[places] = np.repeat(np.arange(a, b, dtype=index),
                                    np.diff(part.indptr))[order]
        last = np.flatnonzero(np.r_[new[1:], True])
        free[keys[last]] = places[last] + 1
    kind = sparse.csr_matrix if isinstance(X, sparse.spmatrix) else sparse.csr_array
    summed = kind((data, indices, indptr), shape=(n, d), copy=False)
    summed.has_canonical_format = True
    return summed


def summed_indptr(X, dropped=None):
    """The index pointers of the CSR matrix ``X``'s rows with each cell
    stored once, or None where every cell is stored once: its rows scanned
    a block of :data:`~sklearn_dppca._blocks.SPARSE_BLOCK_ENTRIES` stored
    entries at a time, their cells' keys sorted there, or one row, its
    cells marked in ``d`` booleans; the counts, ``n`` integers, kept from
    the first cell stored twice. ``dropped``, ``d + 1`` integers or None:
    at ``j + 1``, the entries that column ``j`` stores beyond one a cell
    are subtracted (the same scan; :func:`summed_csr`'s rows' counts)."""
    lines, width = X.shape
    indptr, counts = X.indptr, None
    for a, b in _row_ranges(X, 0, lines, lines):
        lo, hi = indptr[a], indptr[b]
        if b == a + 1:  # one row, maybe longer than a block: its cells
            # marked in d booleans, not keys of every entry (review 111 F1:
            # a row storing a cell 4e6 times took 96 MB, in no plan)
            seen = np.zeros(width, dtype=bool)
            for run in range(lo, hi, SPARSE_BLOCK_ENTRIES):
                seen[X.indices[run:min(hi, run + SPARSE_BLOCK_ENTRIES)]] = True
            stored = np.count_nonzero(seen)
            if stored < hi - lo:
                if dropped is not None:  # each cell's entries, but one
                    for run in range(lo, hi, SPARSE_BLOCK_ENTRIES):
                        np.subtract.at(dropped, X.indices[
                            run:min(hi, run + SPARSE_BLOCK_ENTRIES)] + 1, 1)
                    dropped[1:] += seen
                if counts is None:
                    counts = np.diff(indptr).astype(np.int64)
                counts[a] = stored
            continue
        keys = np.repeat(np.arange(b - a, dtype=np.int64) * width,
                         np.diff(indptr[a:b + 1]))
        keys += X.indices[lo:hi]
        if not np.all(keys[1:] >= keys[:-1]):  # rows in order: sorted
            keys.sort()
        again = np.flatnonzero(keys[1:] == keys[:-1])
        if again.size:
            if counts is None:
                counts = np.diff(indptr).astype(np.int64)
            counts[a:b] -= np.bincount(keys[again] // width, minlength=b - a)
            if dropped is not None:
                np.subtract.at(dropped, keys[again] % width + 1, 1)
    if counts is None:
        return None
    summed = np.empty(lines + 1, dtype=np.int64)
    summed[0] = 0
    np.cumsum(counts, out=summed[1:])
    return summed


def stores_twice(X):
    """Whether the CSR or CSC matrix ``X`` stores a cell more than once
    (:func:`summed_indptr`'s scan of its rows, or of its columns for CSC
    through the CSR view ``X.T``); ``X`` is not modified."""
    lines = X if X.format == "csr" else X.T  # CSC's transpose: a CSR view
    if lines.shape[0] and int(np.diff(lines.indptr).max()) > lines.shape[1]:
        return True  # more entries in a line than it has cells
    return summed_indptr(lines) is not None


class InMemoryRows:
    r"""The statistics of an in-memory array (dense or CSR), pass by pass.

    The interface the estimators use, shared with the Dask implementation
    (:class:`~sklearn_dppca._dask.ChunkedRows`): ``largest_norm``, then
    ``first_pass`` (reads every row; returns
    :math:`\sum \operatorname{clip}_C(x_i)` if asked), then ``gram`` and
    ``rows`` for the centred, clipped rows.

    ``threads``: the most threads of ours a pass over the rows runs in (the
    count :func:`~sklearn_dppca._threads.pass_threads` gave the fit's memory
    plan, recorded with it: ``_plan_path``), or None for no cap. BLAS's
    count, read again when the pass starts, may have grown since (another
    fit's pass, which held it at one, ended): the pass never runs in more
    threads than the plan counted.
    """

    def __init__(self, X, threads=None, mapped=False):
        #: CSC rows are copied to CSR here, beside the caller's (public: the
        #: format); a fit's plan counts the copy (``_copied_rows``)
        self.csc_copy = sparse.issparse(X) and X.format == "csc"
        #: bytes of an index of that copy where X holds its own: SciPy's
        #: tocsr keeps a csc_array's int64 indices (public: the dtype)
        self.csc_index_bytes = X.indices.itemsize if self.csc_copy else 4
        if sparse.issparse(X):
            X = lazy_rows(X, mapped)
        self.X = X
        self.threads = threads
        self.sq_norms = None
        self.first, self._first_norm = None, None
        #: False on the matrix-free path: no pass forms a d × d matrix.
        self.with_gram = True

    def largest_norm(self):
        self.sq_norms = row_sq_norms(self.X, self.threads)
        return max_row_norm(self.X, self.sq_norms)

    def first_pass(self, data_norm, with_sum):
        self.first = first_pass(self.X, data_norm, self.sq_norms, with_sum=with_sum,
                                with_gram=self.with_gram, threads=self.threads)
        self._first_norm = data_norm
        return self.first.clipped_sum

    def gram(self, data_norm, mean):
        gram = clipped_gram(self.X, data_norm, mean, self.first,
                            threads=self.threads)[0]
        self.forget_raw_gram()  # the fit's last use of it
        return gram

    def forget_raw_gram(self):
        """Free the first pass's raw Gram matrix once no statistic needs it,
        so that the release holds one d × d matrix, not two."""
        if self.first is not None:
            self.first = self.first._replace(gram=None)
            self._first_norm = None

    def head(self, n_rows):
        """The first ``n_rows`` rows (a view)."""
        X = self.X
        head = InMemoryRows(X.head(n_rows) if isinstance(X, BoxedCSR)
                            else X[:n_rows], self.threads)
        head.with_gram = self.with_gram
        return head

    def check_finite(self):
        """Refuse a NaN or infinite entry (scikit-learn's ``ValueError``):
        one reduction over the values, entry by entry only where it is not
        finite. For a fit charged before its first pass over every row."""
        with np.errstate(over="ignore", invalid="ignore"):
            X = self.X
            if isinstance(X, BoxedCSR):
                X.check_finite()
            else:
                assert_all_finite(X.data if sparse.issparse(X) else X,
                                  input_name="X")

    def clipped_sum(self, data_norm):
        r""":math:`\sum \operatorname{clip}_C(x_i)` alone: the first rows' pass
        (no Gram matrix)."""
        return np.asarray(clipped_sum(self.X, data_norm)).ravel()

    def centred(self, data_norm, centre):
        r""":math:`(\sum y y^\top, \sum y)` with
        :math:`y = \operatorname{clip}_C(x - c)`, in one pass (every row read
        and checked finite) and the re-reading of the clipped rows. A second
        call at the same bound (around another centre) reuses the first pass:
        its raw Gram matrix does not depend on the centre."""
        if self.first is None or self._first_norm != data_norm:
            self.first = first_pass(self.X, data_norm, self.sq_norms, with_sum=False,
                                    direction=unit_direction(centre),
                                    threads=self.threads)
            self._first_norm = data_norm
        return centred_sums(self.X, data_norm, centre, self.first,
                            threads=self.threads)

    def rows(self, data_norm, mean):
        return CentredRows(self.X, data_norm, mean, self.first.sq_norms)


def scatter_products(rows, W, n_jobs=None):
    r""":math:`\sum_i a_i (a_i^\top W_j)` — the unit-ball rows' scatter matrix
    times each :math:`W_j` — exact, in one pass of ``rows.clipped_products``
    with no clipping (every engine; ``n_jobs`` threads over its blocks),
    never forming the :math:`d \times d` matrix. ``W`` is ``(d, k)`` for one
    product, ``(d, trials, k)`` for several; the result has ``W``'s shape.
    Not a release: the callers add the noise."""
    one = W.ndim == 2
    trials = W[:, None, :] if one else W
    products = rows.clipped_products(trials, np.full(trials.shape[1], np.inf),
                                     n_jobs=n_jobs)[0]
    return products[:, 0, :] if one else products


#: Least ``n d`` (the shape's, public; the density is not) at which a pass
#: over sparse rows is shared among threads. Measured on two cores, 1% dense
#: CSR, threads against the calling thread: slower at 10⁵ × 3 000 (a
#: matrix-free fit 1.16 s against 1.02 s) and 10⁴ × 2·10⁴ (4.30 against
#: 4.15 s), faster from 2·10⁴ × 2·10⁴ (4.27 against 4.55 s; the noisy power
#: path 0.55 against 0.76 s) to 10⁵ × 2·10⁴ (a pass 1.4× faster): below it
#: each thread's blocks are too short for its overhead.
SPARSE_THREADS_MIN_ENTRIES = 4e8


def sparse_row_jobs(rows, cores=None):
    """Threads for a pass of products over in-memory sparse ``rows`` of at
    least :data:`SPARSE_THREADS_MIN_ENTRIES` entries (``n d``): as many as
    BLAS would use (its limit respected: ``cores``, the count the fit's plan
    read and counted; None reads it now), since SciPy's sparse products run
    in the calling thread; None for other rows (dense products have BLAS's
    own threads, Dask's chunks their scheduler)."""
    X = getattr(rows, "X", None)
    if sparse_rows(X) and X.shape[0] * X.shape[1] >= SPARSE_THREADS_MIN_ENTRIES:
        return cores or blas_threads()
    return None


def scatter_quadratic(rows, X):
    r""":math:`X^\top M X`, exact, from one pass over the rows
    (:func:`scatter_products`). Not a release: the callers add the noise."""
    return X.T @ scatter_products(rows, X)


class ImplicitScatter:
    r""":math:`\hat{M} = \sum y y^\top + S` as an operator: the release of the
    dense path, never formed (the matrix-free path; docs/privacy.rst,
    "Solvers").

    :math:`\hat{M} V = C^2 \sum a_i (a_i^\top V) + S V`: one pass over the
    rows (``clipped_products`` without clipping, so on every engine: NumPy,
    sparse, Dask) and the kernel :math:`S`
    (:class:`~sklearn_dppca.noise.ImplicitGOE`, or for a Hermitian release
    :class:`~sklearn_dppca.noise.ImplicitGUE`: complex products, the rows'
    part of :math:`V_r` and :math:`V_i` in one pass), redrawn by blocks, its
    product in the kernel's precision (single), and the sum rounded to its
    significand.
    :math:`\hat{M}` has the law of the dense path's release and every product
    is a function of it: the solver's use of it is post-processing. Memory
    :math:`O(d p)` beyond a block of rows and the kernel's blocks.

    Parameters
    ----------
    rows : CentredRows or DaskCentredRows (or their progress wrapper)
    noise : ImplicitGOE or ImplicitGUE
    scatter_trace : float
        :math:`\sum \|y_i\|^2` (exact): with ``noise.trace()``,
        :math:`\operatorname{tr} \hat{M}`.
    n_jobs : int or None
        Threads of each pass over the rows (:func:`sparse_row_jobs` of the
        count the fit's plan read).
    """

    def __init__(self, rows, noise, scatter_trace, n_jobs=None):
        self.rows, self.noise = rows, noise
        self.n_jobs = n_jobs  # the threads of a pass over the rows
        self.shape, self.dtype = noise.shape, noise.dtype
        self.scatter_trace = float(scatter_trace)
        self._first = None  # (V's columns, M̂ V) of the first product: rest_squares

    def __matmul__(self, V):
        V = np.asarray(V, dtype=self.dtype)
        threads = self.noise.n_threads > 1
        # a Hermitian release's complex V: Σ y yᵀ (real) times [V_r, V_i]
        hermitian = self.dtype.kind == "c"
        columns = np.hstack([V.real, V.imag]) if hermitian else np.ascontiguousarray(V)
        products = scatter_products(self.rows, columns, n_jobs=self.n_jobs)
        del columns  # before the kernel's product (a d × p block fewer)
        products *= self.rows.data_norm**2
        with _SINGLE_THREADED_BLAS if threads else nullcontext():
            out = self.noise @ V
        if hermitian:
            p = V.shape[1]
            out.real += products[:, :p]
            out.imag += products[:, p:]
        else:
            out += products
        # the sum to the kernel's significand: no digit of the product below
        # the kernel's own comes from the rows' part alone
        out = self.noise.rounded(out)
        if self._first is None:
            self._first = (V.shape[1], out.copy())
        return out

    def trace(self):
        r""":math:`\operatorname{tr} \hat{M}
        = \sum \|y_i\|^2 + \operatorname{tr} S`."""
        return self.scatter_trace + self.noise.trace()

    def rest_squares(self, vectors, unit=1.0):
        r""":math:`\sum (\lambda / \mathtt{unit})^2` over the eigenvalues of
        :math:`\hat{M}` whose eigenvectors are orthogonal to ``vectors``
        (:math:`d \times k`, orthonormal, from a solver): Hutchinson's estimate
        :math:`\|(I - P) \hat{M} \Omega\|_F^2 / p` from the first product,
        unbiased when that product was of :math:`p` standard normal columns
        :math:`\Omega` (the randomized range finder's first) and :math:`P`
        spans eigenvectors. On a rest dominated by the noise's bulk its
        relative error is about :math:`\sqrt{2 / (p d)}`."""
        p, product = self._first
        residual = product - vectors @ (vectors.conj().T @ product)
        residual /= unit  # no square overflows or underflows
        return float(np.vdot(residual, residual).real) / p
