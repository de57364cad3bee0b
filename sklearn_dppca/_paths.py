"""How a fit computes, chosen from public values before the data is read:
scikit-learn's rule for the solver, the machine's memory and the share a
fit may take of it, and the model of the dense and matrix-free paths'
costs; and :class:`_PathMixin`, the estimators' methods that apply them
(``_path``, ``_memory_needed``, ``_check_memory``, the solver's choice)."""

import copy as copy_module
import math
import os
from numbers import Integral

import numpy as np
from joblib import effective_n_jobs

from ._dask import (
    ChunkedRows,
    has_sparse_chunks,
    is_dask_collection,
    local_threads,
)
from ._dask_memory import WORKER_BASE, WORKER_MATRICES, kept_rows
from ._norm_plan import DEFAULT_NORM_RANGE, bin_count
from ._refusals import refusal
from ._reported import _engine
from ._rows import SPARSE_THREADS_MIN_ENTRIES, InMemoryRows
from ._stats import SPARSE_BLOCK_ENTRIES, _block_rows
from ._threads import blas_threads, kernel_threads, pass_threads
from .noise import _BLOCK_ENTRIES, IMPLICIT_BLOCK, kernel_bytes

#: Share of the machine's memory that a fit may take with
#: ``memory_limit="auto"`` (``_check_memory``): beyond it the fit is refused
#: before any charge.
MEMORY_SHARE = 0.8
#: Bytes per row of the vectors an in-memory fit keeps beside the rows (their
#: squared norms and clipping scales; with ``data_norm="auto"`` the rows'
#: bins too): measured with ``tracemalloc`` at 2–4·10⁶ × 8, 41 bytes centred,
#: 44–52 with ``"auto"``, 8–15 otherwise (review 58's fits of narrow rows
#: peaked at 2.5 times the plan).
ROW_VECTOR_BYTES = 56
#: A truncated solver's :math:`d \times p` blocks at its peak
#: (:math:`p = k + \mathtt{n\_oversamples}`), beside the release; a complex
#: release's count twice. Measured (the peak while the solver runs, less the
#: release; ``PrivatePCA(path="dense")`` on :math:`2d` normal rows): the
#: filtered subspace iteration 7.7–9.4 blocks at :math:`d = 1\,500`,
#: :math:`k` = 300–1 190 (its :math:`p \times p` Rayleigh–Ritz matrices grow
#: with :math:`p/d`), 10.2 at :math:`d = 2\,000`, :math:`k = 1\,500`, and
#: 10.1 at :math:`d = 1\,000`, :math:`k = 790` with the Gram pass's matrices
#: that the allocator kept (8 MB each, under its mapping threshold: there the
#: plan's blocks of rows and noise, not held while the solver runs, cover
#: them); the range finder (``iterated_power=3``) 5.9–7.6 and ARPACK 4.6–5.0
#: at :math:`d = 1\,500`; ``ComplexGaussPCA`` 15.4–18.8 at
#: :math:`d = 1\,500` and 17.6 at :math:`d = 1\,000`. The plan counted none:
#: a fit at :math:`d = 1\,500`, :math:`k = 1\,100` peaked at 7.87 :math:`d^2`
#: against a plan of 7.01 (``ComplexGaussPCA``: 16.65 against 8.01).
#: :class:`CoherentPowerPCA`'s count (``dense_matrices``) uses it too.
SOLVER_BLOCKS = 10
#: What each thread of a pass over in-memory rows holds
#: (:meth:`~sklearn_dppca._rows.CentredRows._threaded`), in arrays of
#: :math:`W` columns (:math:`W = k`, or :math:`p`, times the trials): two of
#: a block's rows (its products, their finite mask, and its share of BLAS's
#: and the allocator's buffers: measured 1.6–1.8, from 6.2–6.7 :math:`d^2` a
#: thread at :math:`d = 1\,000`, :math:`n = 17\,000` (five blocks of
#: 4 194 rows), :math:`k = 700`, 2 and 4 threads of
#: ``CoherentPowerPCA(path="noisy_power")``) and two of :math:`d` rows (its
#: part and its sum; a sequential pass: the
#: :math:`\mathtt{block}^\top Y` temporary and a spare).
PASS_PRODUCTS = 2
PASS_PARTS = 2




def physical_memory():
    """Bytes of this machine's physical memory, or None where it cannot be
    told (a public fact about the machine, not about the data)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def check_gathered(X, doing, copies=0, wide=0, advice=""):
    r"""Refuse, before any chunk is computed or budget charged, a step that
    gathers the Dask array ``X`` (of dense chunks, known shape) into memory
    where its rows and the step's copies of them need more than
    :data:`MEMORY_SHARE` of this machine's memory (review 100 F6; the
    heads' rule, review 68). Per entry of ``b`` bytes (``X``'s dtype): the
    chunks and their concatenation at the gather (``2b``), then the rows,
    a float cast of integer rows, ``copies`` copies in their float dtype
    and ``wide`` float64 temporaries (``PrivateStandardScaler``'s fit held
    33, 24 and 32 bytes an entry of float64, float32 and int64 rows under
    ``tracemalloc``, counted 32, 24 and 40). Public: the shape, the dtype,
    the machine. Sparse chunks (their non-zeros unknown before they are
    read) and unknown lengths (a DataFrame's) are not counted."""
    if not is_dask_collection(X) or has_sparse_chunks(X):
        return
    shape, total = getattr(X, "shape", ()), physical_memory()
    if total is None or len(shape) != 2 \
            or not all(isinstance(s, Integral) for s in shape):
        return
    dtype = np.dtype(X.dtype)
    floats = 4 if dtype == np.float32 else 8
    cast = 0 if dtype.kind == "f" else floats
    per_entry = max(2 * dtype.itemsize,
                    dtype.itemsize + cast + copies * floats + 8 * wide)
    need = float(shape[0]) * float(shape[1]) * per_entry
    if need > MEMORY_SHARE * total:
        raise refusal(MemoryError(
            f"{doing} gathers the {shape[0]} × {shape[1]} rows of the Dask array "
            f"into memory: it needs about {need / 2**30:.1f} GiB, more than "
            f"{MEMORY_SHARE:.0%} of this machine's {total / 2**30:.1f} GiB. "
            f"{advice}Refused before any chunk is read or budget charged."))


#: The integer ``n_components`` a refusal names the top-k paths at when the
#: fit's own is ``None``, a fraction or 'mle' (:meth:`_paths_advice`).
EXAMPLE_K = 10


def gib_up(nbytes):
    """``nbytes`` in GiB at three significant digits, rounded up (``:.3g``
    rounds down half the time): what a refusal names as a fit's need, so
    that ``memory_limit`` of that many GiB admits it."""
    gib = nbytes / 2.0**30
    if gib <= 0:
        return "0"
    step = 10.0 ** (math.floor(math.log10(gib)) - 2)
    value = math.ceil(gib * (1 + 1e-9) / step) * step
    while float(f"{value:.3g}") * 2.0**30 < nbytes:  # the float's rounding
        value += step
    return f"{value:.3g}"


def auto_solver(n_samples, n_features, n_components):
    r"""scikit-learn's ``svd_solver="auto"`` rule on the public shape:
    ``"covariance_eigh"`` when the features are few (at most 1 000, with ten
    times as many rows), ``"full"`` when the problem is small (at most 500
    either way) or ``n_components`` is not an integer below
    :math:`0.8 \min(n, d)`, otherwise ``"randomized"``."""
    if n_features <= 1_000 and n_samples >= 10 * n_features:
        return "covariance_eigh"
    k = n_components
    if max(n_samples, n_features) <= 500 or not isinstance(k, Integral):
        return "full"
    smallest = min(n_samples, n_features)
    return "randomized" if 1 <= k < 0.8 * smallest else "full"


def matrix_free_faster(n_samples, n_features, size, products, chunked,
                       cached=0.0, hermitian=False):
    r"""Whether the matrix-free path is predicted faster than the dense one,
    or at most :data:`MATRIX_FREE_SLOWDOWN` times slower (it saves the
    dense path's two :math:`d \times d` matrices), from public values: the
    shape, the solver's block
    :math:`\mathtt{size} = k + \mathtt{n\_oversamples}` and its products with
    the released matrix (:func:`~sklearn_dppca._spectrum.solver_products`), whether
    the rows are a Dask array, and the fraction ``cached`` of the kernel's
    blocks kept in memory once drawn.

    A model of both costs (:data:`PATH_COSTS`, seconds measured on two cores
    with ``benchmarks/bench_wide.py``; their ratios are what matter). Dense:
    the Gram matrix (:math:`n d^2`), its noise (:math:`d^2`) and the
    randomized solver's ``products`` with it (:math:`d^2 \, \mathtt{size}`
    each). Matrix-free, per product: a
    pass over the rows (:math:`n d \, \mathtt{size}`) and a product with the
    kernel (:math:`d^2 \, \mathtt{size}`, in single precision), whose
    blocks not kept are drawn again (:math:`d^2/2` draws in all the first
    time). Sparse rows are
    costed as dense (their density is not public). A Dask array's pass also
    reads its chunks again: there the dense path is kept unless memory
    forces the other. A Hermitian release (``hermitian``, the GUE kernel)
    draws twice the deviates, and each complex product costs four real ones
    with a ``d × d`` matrix and two passes' worth of columns over the rows.
    """
    if chunked:
        return False
    n, d = float(n_samples), float(n_features)
    cost = PATH_COSTS
    parts, flops = (2, 4) if hermitian else (1, 1)
    dense = (cost["gram"] * n * d * d + parts * cost["draws"] * d * d
             + products * flops * cost["product"] * d * d * size)
    draws = parts * cost["draws"] * d * d / 2 * (1 + (products - 1) * (1.0 - cached))
    free = draws + products * (parts * cost["pass"] * n * d * size
                               + flops * cost["kernel"] * d * d * size)
    return free < MATRIX_FREE_SLOWDOWN * dense


#: How much slower than the dense path the matrix-free one may be predicted
#: and still be chosen for its memory (``O(d k)`` and the kernel's cache,
#: against ``2 d²``). The model's constants are two-threaded, where the
#: dense path's BLAS gains most: on 2 000 × 5 000 with one thread, predicted
#: 0.95 (k = 10) and 1.53 (k = 50) measured 0.46 and 0.75; on 20 000 × 2 000
#: with two, predicted 2.3 measured 2.9 (dense kept).
MATRIX_FREE_SLOWDOWN = 1.6


#: Seconds per unit of :func:`matrix_free_faster`'s terms, measured on two
#: cores: the Gram matrix per ``n d²``, normal draws per entry of the
#: kernel, a product with a ``d × d`` matrix per ``d² size`` (double
#: precision; the implicit kernel's, in single precision, half of it), and a
#: pass of products with the rows per ``n d size``.
PATH_COSTS = {"gram": 1.45e-11, "draws": 4e-9, "product": 7e-11, "kernel": 3.5e-11,
              "pass": 2.2e-10}


#: Share of ``memory_limit`` the matrix-free path may fill with the kernel's
#: blocks, kept once drawn (at most the ``2 d²`` bytes of the blocks on and
#: above the diagonal): later products multiply them instead of drawing
#: them again (about 10× faster per product at d = 5 000, p = 20, one thread).
KERNEL_CACHE_SHARE = 0.125


#: The kernel's cache where the machine's memory cannot be told.
DEFAULT_KERNEL_CACHE = 2**30


#: What each path holds, as a refusal names it.
PATH_MEMORY = {
    "dense": "forms its d × d matrices",
    "matrix_free": "never forms a d × d matrix: its memory grows as d·k",
    "noisy_power": ("never forms a d × d matrix and draws only d·k noise per "
                    "pass, at some accuracy"),
}


#: The ``svd_solver`` values that compute the top ``k`` eigenpairs only.
TRUNCATED_SOLVERS = ("randomized", "arpack")


class _PathMixin:
    """The fit's solver, path and memory, from public values (mixed into
    ``_BasePrivatePCA``): which eigensolver, whether a path without a
    ``d × d`` matrix can run, the bytes each path needs and the refusal of a
    fit over ``memory_limit``, before the data is read."""

    def _path(self, n_samples, n_features, engine):
        r"""``"dense"``: the release is a :math:`d \times d` matrix (the
        estimators with other paths override this: ``_MatrixFreeMixin``,
        :class:`CoherentPowerPCA`)."""
        return "dense"

    def _memory_limit(self):
        """Bytes a fit may take (``memory_limit``), or None where the
        machine's memory cannot be told (no check)."""
        limit = self.memory_limit
        if limit != "auto":
            return float(limit)
        total = physical_memory()
        return None if total is None else MEMORY_SHARE * total

    def _kernel_bytes(self, n_features):
        """Bytes of the implicit kernel's blocks, all of them: twice
        :func:`kernel_bytes` for the GUE kernel (its real and imaginary
        parts)."""
        return kernel_bytes(n_features) * (2 if self._hermitian_noise else 1)

    def _kernel_cache(self, n_features):
        """Bytes of the implicit kernel's blocks kept once drawn: all of them
        (:math:`2 d^2` bytes in single precision, :math:`4 d^2` for the GUE
        kernel) if they fit in :data:`KERNEL_CACHE_SHARE` of
        ``memory_limit``, else that share."""
        limit = self._memory_limit()
        share = DEFAULT_KERNEL_CACHE if limit is None else KERNEL_CACHE_SHARE * limit
        return int(min(self._kernel_bytes(n_features), share))

    def _memory_needed(self, n_samples, n_features, path=None):
        r"""Bytes of the fit's largest arrays at their peak, from public
        values.

        Dense: its :math:`d \times d` matrices — two float64 matrices in the
        Gram pass (the raw one and the centred one; two a thread where the
        pass runs in threads of ours: :meth:`_gram_pass_matrices`), then the
        release: one
        matrix with a truncated solver, six with every eigenpair (the
        release, LAPACK's copy, the eigenvectors and its :math:`2 d^2`
        workspace); a complex release ten (three with a truncated
        solver); :class:`CoherentPowerPCA` what its mode holds
        (:meth:`_dense_release`); and beside them the pass's blocks of rows
        (about 32 MiB, at least 2 048 rows, a thread) and the noise's blocks
        (three of at most :math:`2^{22}` entries:
        :func:`~sklearn_dppca.noise.add_goe_noise`).
        Matrix-free: about twelve :math:`d \times p` blocks of the solver and
        the products (:math:`p = k + \mathtt{n\_oversamples}`), one in single
        precision per thread drawing the kernel and its block (at most
        :math:`1024^2`, drawn in double and rounded to single), a block of
        rows (:class:`ImplicitScatter`) and the kernel's cache
        (:meth:`_kernel_cache`); complex blocks (the GUE kernel) count
        twice.

        In memory (NumPy or SciPy rows), :data:`ROW_VECTOR_BYTES` per row
        too: on narrow rows the vectors of row norms and scales are a large
        part of the fit's memory. With ``data_norm="auto"``, the bins'
        sums of its mean steps (:meth:`_bins_bytes`).
        """
        d = n_features
        path = path or getattr(self, "_fit_path", "dense")
        return (self._row_vectors(n_samples) + self._arrays_needed(n_samples, d, path)
                + self._bins_bytes(d))

    def _bins_bytes(self, d):
        r"""Bytes of ``data_norm="auto"``'s sums by bin of row norm: for
        each of its :math:`B` bins (four an octave of ``norm_range``: 267 by
        default) a sum of the rows and of their unit directions: the read's
        two, kept through the release, a mean step's two, and a block's
        product with the bins it uses beside them (at most its rows, sparse
        from sparse rows): six :math:`B \times d` arrays, one set per thread
        of a Dask pass. In memory 4.6 of them were measured at 3·10⁴ × 5 000
        (CSR, 1%, three mean steps; review 78: a step's sums are freed before
        the next pass, and no pass makes a dense :math:`2B \times d` product
        a block any more). At :math:`d = 2 \cdot 10^4` they are 256 MB,
        which a plan of sparse rows' blocks (166 MB) did not count."""
        if not (isinstance(self.data_norm, str) and self.data_norm == "auto"):
            return 0
        try:
            norm_range = getattr(self, "norm_range", None)
            low, high = (float(v) for v in np.ravel(
                DEFAULT_NORM_RANGE if norm_range is None else norm_range))
            bins = bin_count(low, high)
        except (TypeError, ValueError, ArithmeticError):  # refused by the plan
            return 0
        threads = 1 if getattr(self, "_rows_in_memory", True) else self._planned_cores()
        return 6 * 8 * bins * d * threads

    def _jobs(self, n_samples, n_features):
        """Threads of ours a pass over the rows runs in, each holding
        :data:`PASS_PRODUCTS` and :data:`PASS_PARTS` arrays: ``n_jobs``
        where the estimator has it (joblib's ``effective_n_jobs``), else
        as many as BLAS would use over in-memory sparse rows of
        ``SPARSE_THREADS_MIN_ENTRIES`` entries or more (``sparse_row_jobs``),
        else one; at most one a block of dense rows (the slots are made as
        the blocks need them). A Dask array's pass: BLAS's count."""
        if not getattr(self, "_rows_in_memory", True):
            return self._planned_cores()
        sparse_rows = getattr(self, "_sparse_rows", False)
        if hasattr(self, "n_jobs"):  # 0: refused with the parameters; a plan
            # asked for before they are validated counts it as one thread
            threads = effective_n_jobs(self.n_jobs) if self.n_jobs != 0 else 1
        elif sparse_rows and n_samples * n_features >= SPARSE_THREADS_MIN_ENTRIES:
            threads = self._planned_cores()  # sparse_row_jobs' count
        else:
            threads = 1
        if not sparse_rows:
            threads = min(threads, -(-n_samples // _block_rows(n_features)))
        return max(1, threads)

    def _moves_rows(self):
        """Whether a far private mean may move dense rows in memory (a
        centred private fit; :func:`~sklearn_dppca._moved.translate_if_far`):
        its passes then read float64 copies of their blocks
        (:class:`~sklearn_dppca._moved.MovedRows`), one a thread of
        :meth:`_moved_threads`. Public: the parameters and the kind of
        input."""
        return (getattr(self, "_rows_in_memory", False)
                and not getattr(self, "_sparse_rows", False)
                and bool(getattr(self, "center", False))
                and getattr(self, "epsilon", math.inf) != math.inf)

    def _moved_threads(self, n_samples, n_features):
        """Threads that may each hold a block of rows moved to a far private
        mean, as :meth:`_arrays_needed` counts them for dense rows: on the
        dense path the Gram pass's, BLAS's threads (or ``n_jobs``' where
        more), elsewhere a pass's of ours (:meth:`_jobs`). The passes over
        moved rows run in at most that many (``MovedRows.threads``): on the
        noisy power and matrix-free paths the first pass (the norms) runs in
        one thread but with ``n_jobs``, and no plan grows by BLAS's blocks
        (10 000 × 2 000, ``k = 400``: 113 MB, 147 with them on two cores)."""
        jobs = self._jobs(n_samples, n_features)
        if getattr(self, "_fit_path", "dense") == "dense":
            return max(self._planned_cores(), jobs)
        return jobs

    def _moved_bytes(self, n_samples, n_features):
        """Bytes of the dense float64 blocks the passes hold over rows moved
        to a far private mean, a block a thread (:meth:`_moved_threads`):
        beyond the plan for sparse rows, which ``translate_if_far`` moves
        only where they fit in what ``memory_limit`` leaves."""
        return (8 * n_features * min(n_samples, _block_rows(n_features))
                * self._moved_threads(n_samples, n_features))

    def _memory_beside(self, n_samples, n_features):
        """What a refusal names beside the path's arrays (an estimator's own)."""
        return ""

    def _row_vectors(self, n_samples):
        """Bytes of the vectors an in-memory fit keeps for its rows."""
        return ROW_VECTOR_BYTES * n_samples if getattr(
            self, "_rows_in_memory", False) else 0

    def _arrays_needed(self, n_samples, d, path):
        """:meth:`_memory_needed` less the vectors of the rows."""
        block = min(n_samples, _block_rows(d))
        cores = self._planned_cores()
        if path != "dense":
            p = self._block_columns(n_samples, d)
            threads = self._jobs(n_samples, d)
            # a block's float64 copy a thread (float32 or F-ordered rows, or
            # rows moved to a far private mean)
            copies = max(cores, threads) if getattr(
                self, "_block_copies", False) else (
                threads if self._moves_rows() else 1)
            # each thread of a pass: its block's products and its part
            # (PASS_PRODUCTS, PASS_PARTS). Counted for BLAS's threads with one
            # block's products in all, CoherentPowerPCA(n_jobs=2)'s noisy power
            # fits peaked at 14.0–19.3 d² against 12.1 planned (d = 1 500,
            # n = 3 000, k = 1 100) and at 30.6–35.4 against 15.8 (d = 1 000,
            # n = 17 000, k = 700; n_jobs=4: 42.3), joblib's threads keeping
            # their arrays (CentredRows._threaded); now 11.5 against 13.7, and
            # 18.0 against 24.7 (n_jobs=4: 29.8 against 39.5)
            rows = PASS_PRODUCTS * min(n_samples, block * threads) * p + (
                self._sparse_blocks(block, d) * cores or block * d * copies)
            parts = 8 * PASS_PARTS * d * p * threads
            if path == "noisy_power":  # V, the products, Y, its noise, its SVD
                return 8 * (8 * d * p + rows) + parts
            threads = kernel_threads(d, cores)
            kernel = min(IMPLICIT_BLOCK, d) ** 2
            if self._hermitian_noise:  # complex blocks: [V_r, V_i] for every product
                p *= 2
                parts *= 2
            # per kernel thread: its single-precision output and a block drawn
            # in double and rounded to single; V in single precision
            return (8 * (12 * d * p + rows) + 4 * d * p * (threads + 1) + parts
                    + 12 * threads * kernel + self._kernel_cache(d))
        release = self._dense_release(n_samples, d)
        # a Dask array's pass: the chunks' Gram matrices and partial sums too
        partials = getattr(self, "_chunked_partials", 0.0)
        # the Gram pass's blocks in BLAS's threads; CoherentPowerPCA's passes
        # copy a block a thread of theirs (float32 or F-ordered rows, or rows
        # moved to a far private mean)
        copies = max(cores, self._jobs(n_samples, d) if getattr(
            self, "_block_copies", False) or self._moves_rows() else 1)
        rows = (self._sparse_blocks(block, d) * cores
                or d * min(n_samples, _block_rows(d) * copies))
        noise = 3 * min(d * d, _BLOCK_ENTRIES + d)
        return 8 * (d * d * (max(self._gram_pass_matrices(n_samples, d), release)
                             + partials) + rows + noise)

    def _gram_pass_matrices(self, n_samples, d):
        """The dense path's d × d matrices in its passes over the rows, in
        units of 8 d² bytes: two (the raw Gram matrix and a product, then
        the raw and the centred one), two a thread where in-memory rows are
        read in threads of ours (:func:`~sklearn_dppca._threads.pass_threads`:
        each thread of the first pass sums its own raw Gram matrix with a
        product buffer, as does each thread of the weighted pass that
        ``data_norm="auto"`` runs; the clipped rows' corrections, one matrix
        a thread beside the raw and the centred ones, fit within). Counted
        as two in all, 20 000 × 1 500 rows in eight threads peaked at
        16.0 d² against a plan of 8.7 (review 102). The fit's plan counts the
        threads of :meth:`_planned_cores`, which its rows carry."""
        if not getattr(self, "_rows_in_memory", True):
            return 2
        return 2 * pass_threads(n_samples, d, getattr(self, "_sparse_rows", False),
                                self._planned_cores())

    def _planned_cores(self):
        """The cores the fit may use: BLAS's count (its limit respected),
        read once by the plan (:meth:`_plan_threads`) and used by every plan
        term and every pass that runs threads (the first pass's, sparse
        rows' product passes, the implicit kernel's draws), so that no pass
        runs in more threads than the plan counted; read now for a plan
        asked outside a fit."""
        cores = getattr(self, "_cores", None)
        return blas_threads() if cores is None else cores

    def _plan_threads(self, n_samples, n_features, engine):
        """Read BLAS's count once for the fit (:meth:`_planned_cores`), and
        give in-memory rows the threads of ours their passes run in
        (:func:`~sklearn_dppca._threads.pass_threads` of it: public, the
        shape and that count; ``InMemoryRows.threads``): BLAS's count, read
        again later, may have grown beyond the plan's (another fit's pass,
        which held it at one, ended; mend 110)."""
        self._cores = blas_threads()
        rows = _engine(engine)
        if isinstance(rows, InMemoryRows):
            rows.threads = pass_threads(n_samples, n_features,
                                        getattr(self, "_sparse_rows", False),
                                        self._cores)

    def _dense_release(self, n_samples, d):
        """The dense path's matrices from its release on, at their peak, in
        units of 8 d² bytes (at least the Gram pass's,
        :meth:`_gram_pass_matrices`: the base's ``max``);
        :class:`CoherentPowerPCA` counts its own. A truncated
        solver: the release and :data:`SOLVER_BLOCKS` d × p blocks (measured
        there; twice for complex blocks)."""
        truncated = self._eigen_solver(n_samples, d) in TRUNCATED_SOLVERS
        # an integer k where truncated ('mle' or a fraction takes every pair)
        blocks = (SOLVER_BLOCKS * min(d, self._block_columns(n_samples, d)) / d
                  if truncated else 0.0)
        if self._hermitian_noise:  # complex matrices, beside the real Gram
            # every eigenpair (2k ≥ d): zheevd's copy, eigenvectors and
            # complex and real workspaces beside the complex release, in
            # units of 8 d² bytes (measured: 12.8–13.4 d² in all at d = 1 500
            # and 2 000, against 11 counted before; review 59)
            return 3 + 2 * blocks if truncated else 10
        # every eigenpair: LAPACK's syevd holds a copy of the matrix, the
        # eigenvectors and a 2 d² workspace beside the release (measured
        # at 5.4–5.6 d² at d = 2 000 and 4 000)
        return 1 + blocks if truncated else 6

    def _sparse_blocks(self, block, d):
        """In units of 8 bytes, what each thread of a pass holds of a block of
        in-memory CSR rows (:data:`~sklearn_dppca._stats.SPARSE_BLOCK_ENTRIES`
        entries at most): three copies (a slice, its float64 cast, the
        squares of its norms) of 12 bytes an entry; 0 for other rows."""
        if not getattr(self, "_sparse_rows", False):
            return 0
        return 3 * 12 * min(SPARSE_BLOCK_ENTRIES, block * d) // 8

    #: How a refusal names the columns of the d × p blocks beyond k.
    _oversampling = "n_oversamples"

    def _blocks_obstacle(self, engine, shape=None):
        r"""Why a path without a :math:`d \times d` matrix (its passes of
        :math:`d \times p` products) cannot run: the rows' engine, or with
        ``shape`` (``(n_samples, n_features)``) blocks of :math:`p \ge d`
        columns; or None."""
        if shape is not None:
            size = self._block_columns(*shape)
            if size >= shape[1]:
                return (f"needs n_components + {self._oversampling} = {size} "
                        f"below n_features = {shape[1]}")
        if not isinstance(_engine(engine), (InMemoryRows, ChunkedRows)):
            return "is not available for Array API inputs (give a NumPy array)"
        return None

    def _block_columns(self, n_samples, n_features):
        r""":math:`p`, the columns of the :math:`d \times p` blocks of a path
        without a :math:`d \times d` matrix:
        :math:`k + \mathtt{n\_oversamples}`."""
        return self._truncated_k(n_samples, n_features) + self.n_oversamples

    def _worker_need(self, n_features, path):
        r"""Bytes a distributed worker holds for a pass (:func:`worker_room`,
        recorded by the plan as ``_worker_room``): its base, each thread's
        chunk (:func:`chunk_bytes`) and, on the dense path, the chunks'
        :math:`d \times d` matrices and partial sums."""
        room = self._worker_room
        needed = WORKER_BASE + room[1] * getattr(self, "_chunk_bytes", 0)
        if path == "dense":
            needed += 8.0 * n_features**2 * (WORKER_MATRICES[0] * room[1] + room[2])
        return needed

    def _workers_short(self, n_features):
        r"""``(needed, room)`` in bytes where the dense pass's chunk tasks
        would not fit in a distributed worker's memory, else None."""
        if getattr(self, "_worker_room", None) is None:
            return None
        needed, room = self._worker_need(n_features, "dense"), self._worker_room[0]
        return (needed, room) if needed > room else None

    def _dense_fits(self, n_samples, n_features):
        """Whether the dense path's arrays, with the copies of the rows a fit
        makes whatever its path (``_copy_bytes``, :meth:`_copied_rows`), fit
        in ``memory_limit`` and in a distributed worker's room: the
        automatic path's test."""
        limit = self._memory_limit()
        needed = (self._memory_needed(n_samples, n_features, "dense")
                  + getattr(self, "_copy_bytes", 0))
        return ((limit is None or needed <= limit)
                and self._workers_short(n_features) is None)

    def _fits(self, n_samples, n_features, path):
        """Whether ``path``'s arrays, with the copies of the rows
        (``_copy_bytes``), fit in ``memory_limit`` (the dense path: and in a
        distributed worker's room, :meth:`_dense_fits`): the automatic
        path's test, so that ``"auto"`` does not take a path the plan then
        refuses while another path fits (reviews 69 and 71)."""
        if path == "dense":
            return self._dense_fits(n_samples, n_features)
        limit = self._memory_limit()
        return limit is None or (self._memory_needed(n_samples, n_features, path)
                                 + getattr(self, "_copy_bytes", 0) <= limit)

    def _first_fitting(self, n_samples, n_features, paths):
        """The first of ``paths`` (the automatic path's preference, then the
        others) that fits (:meth:`_fits`); the first where none does, which
        the plan then refuses, naming none that fits."""
        return next((path for path in paths
                     if self._fits(n_samples, n_features, path)), paths[0])

    def _limit_needed(self, n_samples, n_features, path, copy=0):
        r"""The least ``memory_limit`` that admits ``path`` with ``copy``
        bytes of copies of the rows: its need, but on the matrix-free path
        the kernel's cache is :data:`KERNEL_CACHE_SHARE` of the limit (at
        most the kernel's blocks, :math:`K`), so the need grows with the
        limit. With :math:`A` the rest and :math:`s` the share, the least
        :math:`L` with :math:`A + \min(K, sL) \le L` is
        :math:`\min(A/(1 - s), A + K)`. What a refusal names (review 71: a
        limit of the need it named was refused again)."""
        needed = self._memory_needed(n_samples, n_features, path) + copy
        if path != "matrix_free":
            return needed
        rest = needed - self._kernel_cache(n_features)
        return min(rest / (1.0 - KERNEL_CACHE_SHARE),
                   rest + self._kernel_bytes(n_features))

    def _first_rows_fit(self, engine, n_rows):
        """``(fits, room)``: whether a fit may keep a Dask array's first
        ``n_rows`` rows (:func:`kept_rows`) within ``memory_limit`` in this
        process, or within a distributed worker's room beside its pass, and
        the bytes left within the limit in this process after them (None
        without a limit). In memory the first rows are a view: nothing is
        kept. Public: the plan's memory, the chunks and the cluster (review
        61: kept rows of 22 GiB went beside a plan of 3 GiB)."""
        room = getattr(self, "_memory_room", None)
        if not isinstance(_engine(engine), ChunkedRows):
            return True, room
        kept, per_worker = kept_rows(engine, n_rows)
        if local_threads() is not None:  # kept in this process
            return room is None or kept <= room, None if room is None else room - kept
        worker = getattr(self, "_worker_room", None)
        fits = worker is None or per_worker <= worker[0] - self._worker_need(
            _engine(engine).X.shape[1], self._fit_path)
        return fits, room

    def _check_memory(self, n_samples, n_features, copy=0, copy_text=""):
        """Refuse, before the data is read and before any charge, a fit
        whose arrays (and ``copy`` bytes of copies of its rows, named by
        ``copy_text``) cannot fit in
        ``memory_limit`` (by default :data:`MEMORY_SHARE` of this machine's
        memory): it would otherwise run out of memory part-way, after its
        charge. The message names the path that fits, if one does. Returns
        the bytes left within the limit (None without one)."""
        limit = self._memory_limit()
        needed = self._memory_needed(n_samples, n_features) + copy
        gib = 2.0**30
        d = n_features
        short = self._workers_short(d) if self._fit_path == "dense" else None
        if short is not None:
            raise refusal(MemoryError(
                f"{type(self).__name__} on {d} features needs about "
                f"{gib_up(short[0])} GiB on each Dask worker for the {d} × {d} "
                f"Gram matrices of its running chunks, more than "
                f"{MEMORY_SHARE:.0%} of the smallest worker's memory_limit "
                f"({short[1] / gib:.3g} GiB). The fit was refused before reading "
                "the data or spending any budget. "
                + self._paths_advice(n_samples, n_features, limit or float("inf"))))
        if limit is None or needed <= limit:
            return None if limit is None else limit - needed
        what = {"dense": f"its {d} × {d} matrices",
                "matrix_free": ("the blocks of its matrix-free solver and its "
                                "kernel's cache (up to an eighth of memory_limit)"),
                "noisy_power": "the blocks of its noisy power method"}[self._fit_path]
        what += copy_text + self._memory_beside(n_samples, d)
        if self._row_vectors(n_samples) > needed / 2:
            what += (f" and the norms and scales of its {n_samples} rows (a Dask "
                     "array of the rows holds them a chunk at a time)")
        limit_text = (f"memory_limit={self.memory_limit!r}"
                      if self.memory_limit != "auto"
                      else f"{MEMORY_SHARE:.0%} of this machine's memory")
        raise refusal(MemoryError(
            f"{type(self).__name__} on {d} features needs about "
            f"{gib_up(self._limit_needed(n_samples, d, self._fit_path, copy))} "
            f"GiB for {what}, more than {limit_text} "
            f"({limit / gib:.3g} GiB). The fit was refused before reading the "
            "data or spending any budget. "
            + self._paths_advice(n_samples, n_features, limit, copy)
        ))

    def _paths_advice(self, n_samples, n_features, limit, copy=0):
        """What a refusal advises: this estimator's other paths whose memory
        (with the ``copy`` bytes of densified rows every path makes) is
        within ``limit``, or above it but below the refused path's, each
        with the least ``memory_limit`` that admits it (:meth:`_limit_needed`,
        rounded up); then fewer features or components. With ``None``, a
        fraction or 'mle' (every eigenvalue of the release, whatever the
        path), the paths are named at an integer ``k`` of
        :data:`EXAMPLE_K`, which opens the top-k solvers (review 90 F2: the
        matrix-free path was named at k = min(n, d), 14 GiB, where k = 10
        fitted in the 1.86 GiB refused)."""
        name = type(self).__name__
        other = (self._parameter_constraints["path"][0].options
                 - {"auto", self._fit_path})
        advice, probe, k, lead = [], self, "k", ""
        own = self._limit_needed(n_samples, n_features, self._fit_path, copy)
        whole = isinstance(self.n_components, Integral)
        narrow = not getattr(self, "_wide_engine", True)
        if narrow:
            other = other & {"dense"}  # Array API input (review 87 F1, F2)
        if not whole:  # the own path too: an integer k shrinks its release
            probe = copy_module.copy(self)
            probe.n_components = k = min(EXAMPLE_K, n_samples, n_features)
            other = other | {self._fit_path}
            lead = f"An integer n_components opens the top-k solvers (at k = {k}): "
        for path in sorted(other):
            needed = probe._memory_needed(n_samples, n_features, path) + copy
            least = probe._limit_needed(n_samples, n_features, path, copy)
            if needed > limit and least >= own:  # no nearer than this path
                continue
            solver = (", svd_solver='randomized'"
                      if path != "dense" and self._honours_svd_solver else "")
            # what it holds at this limit, not only the least limit that
            # admits it (review 80: 0.231 GiB named, 2.56 held, slow); one
            # that does not fit is named where it needs less than this path
            # (review 83 F7)
            fits = needed <= limit
            notes = [f"about {gib_up(needed)} GiB at this limit"] if fits else []
            named_at = limit if fits else least
            if (path == "matrix_free" and KERNEL_CACHE_SHARE * named_at
                    < self._kernel_bytes(n_features)):
                notes.append("its kernel drawn again in every product beyond its "
                             "cache: slow")
            held = ", ".join(notes) + "; " if notes else ""
            advice.append(f"{name}(n_components={k}{solver}, path={path!r}) "
                          f"{PATH_MEMORY[path]} ({held}memory_limit="
                          f"{gib_up(least)} * 2**30 admits it)")  # bytes
        return (lead + "; ".join(advice) + ". " if advice else "") + (
            "Fewer features (a public selection of them) or fewer components "
            "shrink every path's memory." if whole and not narrow else
            "Fewer features (a public selection of them) shrink every path's "
            "memory.")

    def _eigen_solver(self, n_samples, n_features):
        """How the released matrix is eigendecomposed (post-processing: the
        release is the same), by scikit-learn's names: ``"covariance_eigh"``
        and ``"full"`` compute every eigenpair (the same LAPACK call here),
        ``"randomized"`` and ``"arpack"`` the top :math:`k`.
        ``svd_solver="auto"`` follows scikit-learn's rule on the public
        shape (:func:`auto_solver`)."""
        solver = self.svd_solver if self._honours_svd_solver else "full"
        if solver == "auto":
            return auto_solver(n_samples, n_features, self.n_components)
        return solver

    def _truncated_k(self, n_samples, n_features):
        r"""The :math:`k` of a truncated solver: ``n_components``, or for
        ``None`` scikit-learn's :math:`\min(n, d)` (:math:`\min(n, d) - 1`
        with ARPACK)."""
        k = self.n_components
        if k is None:
            k = min(n_samples, n_features)
            if self._eigen_solver(n_samples, n_features) == "arpack":
                k -= 1
        return int(k)

    def _check_n_components(self, n_samples, n_features, width_known=True):
        # scikit-learn's errors (and its rule: 'mle' needs n_samples >= n_features)
        k = self.n_components
        solver = self._eigen_solver(n_samples, n_features)
        if solver in TRUNCATED_SOLVERS:  # scikit-learn's rules for them
            smallest = min(n_samples, n_features)
            if isinstance(k, str):
                raise ValueError(
                    f"n_components={k!r} cannot be a string with "
                    f"svd_solver={solver!r}"
                )
            k = self._truncated_k(n_samples, n_features)
            if not (isinstance(self.n_components, Integral) or
                    self.n_components is None) or not 1 <= k <= smallest:
                raise ValueError(
                    f"n_components={self.n_components!r} must be between 1 and "
                    f"min(n_samples, n_features)={smallest} with "
                    f"svd_solver={solver!r}"
                )
            if solver == "arpack" and k == smallest:
                raise ValueError(
                    f"n_components={k!r} must be strictly less than "
                    f"min(n_samples, n_features)={smallest} with "
                    f"svd_solver={solver!r}"
                )
            return
        if isinstance(k, str):  # 'mle'
            if n_samples < n_features:
                raise ValueError(
                    "n_components='mle' is only supported if n_samples >= n_features"
                )
            return
        low = self._parameter_constraints["n_components"][0].left  # 0, or 1
        if isinstance(k, Integral) and not low <= k <= min(n_samples, n_features):
            raise ValueError(
                f"n_components={k} must be between {low} and "
                f"min(n_samples, n_features)={min(n_samples, n_features)}."
            )
