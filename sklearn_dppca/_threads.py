"""The threads of a pass over the rows: how many, from public values (the
shape, sparse or not, BLAS's count), and how they run (contiguous row
ranges, each with a single-threaded BLAS).

A fit's plan reads BLAS's count once (``_paths``) and every pass and plan
term uses that count: BLAS's count, read again later, may have grown
(another fit's pass, which held it at one, ended), and a pass in more
threads than the plan counted holds more than it."""

import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from threadpoolctl import ThreadpoolController  # a scikit-learn dependency

from ._blocks import sparse_rows

# Less data than this is read in the calling thread alone (see _n_threads).
_MIN_PARALLEL_BYTES = 128 * 2**20
#: A d × d float64 matrix of at least this size makes the passes "wide": one
#: thread of ours (BLAS's own threads do the products), so that no thread
#: holds d × d accumulators of its own, and the corrections are added to the
#: Gram matrix itself (at most two d × d matrices at once: see clipped_gram).
_WIDE_BYTES = 32 * 2**20
#: Set within a Dask chunk's task: Dask's threads run the chunks, so a pass
#: over a chunk runs in its calling thread (:func:`pass_threads`) and reads
#: blocks of :data:`~sklearn_dppca._stats._CHUNK_SCAN_BYTES`.
_IN_CHUNK_TASK = contextvars.ContextVar("in_chunk_task", default=False)


@contextmanager
def chunk_task():
    """Within: the blocks of a Dask chunk's task, in its calling thread."""
    token = _IN_CHUNK_TASK.set(True)
    try:
        yield
    finally:
        _IN_CHUNK_TASK.reset(token)


class _SingleThreadedBlas:
    """Context in which NumPy's BLAS runs in its calling thread.

    While our threads each call BLAS on their own rows, a multi-threaded BLAS
    in every one of them would oversubscribe the cores. The limit is
    process-wide, so fits running at the same time share it: the first to
    enter sets it and the last to leave restores it (two overlapping
    threadpoolctl limiters would restore each other's limit, leaving BLAS on
    one thread for good).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._users = 0
        self._original = None  # BLAS's threads before the first pass in
        self._controller = None

    def _blas(self):
        if self._controller is None:  # NumPy's BLAS is loaded with NumPy
            self._controller = ThreadpoolController().select(user_api="blas")
        return self._controller

    def _heal(self):
        """Put BLAS's threads back as they were before the first pass
        limited them, once no pass runs (``_lock`` held). Their counts are
        recorded before any is changed, so a pass interrupted (Ctrl-C) while
        limiting or restoring them leaves them to the next call, never taken
        for the original."""
        if self._users == 0 and self._original is not None:
            for lib, threads in zip(self._blas().lib_controllers, self._original):
                if threads is not None:
                    lib.set_num_threads(threads)
            self._original = None

    def heal(self):
        """:meth:`_heal`, taking the lock (after a fit's exception)."""
        with self._lock:
            self._heal()

    def n_threads(self):
        """Threads BLAS would use now: the cores we may use (1 if unknown)."""
        with self._lock:
            self._heal()
            counts = [lib.get_num_threads() for lib in self._blas().lib_controllers]
        return min([c for c in counts if c is not None] or [1])

    def __enter__(self):
        with self._lock:
            self._heal()
            if self._users == 0:
                libs = self._blas().lib_controllers
                self._original = [lib.get_num_threads() for lib in libs]
                for lib in libs:
                    lib.set_num_threads(1)  # as threadpoolctl's limit(1)
            self._users += 1
        return self

    def __exit__(self, *exc_info):
        with self._lock:
            self._users -= 1
            self._heal()


_SINGLE_THREADED_BLAS = _SingleThreadedBlas()


def blas_threads():
    """Threads BLAS would use now (its limit, e.g. threadpoolctl's,
    respected): the cores a pass of ours may use."""
    return max(1, _SINGLE_THREADED_BLAS.n_threads())


def _n_threads(X, threads=None):
    """Threads for a pass over ``X``: :func:`pass_threads` of its shape, at
    most the blocks the memory plan counts for rows that carry a count
    (``_moved.MovedRows``: each thread copies one) and at most ``threads``
    (the count the fit's plan read, ``InMemoryRows.threads``: BLAS's count
    may have grown since, when another fit's pass ended)."""
    n = pass_threads(*X.shape, is_sparse=sparse_rows(X))
    return min(n, getattr(X, "threads", None) or n, threads or n)


def pass_threads(n_samples, n_features, is_sparse=False, cores=None):
    """Threads of ours for a pass over in-memory rows: as many as BLAS would
    use (``cores``: the count the fit's plan read, ``_paths``'
    ``_planned_cores``; None reads it now), for big data. Public (the
    shape, sparse or not, BLAS's limit): the dense path's memory plan counts
    a raw Gram matrix and a product for each thread of :func:`first_pass`
    (``_paths``).

    Small or sparse data is read in the calling thread, with BLAS's own
    threads for the Gram matrix: after any multi-threaded BLAS call (the
    user's, or the previous fit's), OpenBLAS keeps a worker spinning on a core
    for ~0.2 s, longer than a small pass. Threads of ours would share the
    cores with it (measured 1.5× slower), while BLAS's threads put it to work.
    A Dask chunk's task too: Dask's threads run the chunks, and threads of
    ours in each (a float32 chunk of 128 MiB, read by :func:`first_pass`)
    held two d × d matrices apiece beyond the plan's count for a chunk.
    """
    if (is_sparse or _IN_CHUNK_TASK.get()
            or 8 * n_samples * n_features < _MIN_PARALLEL_BYTES):
        return 1
    if wide(n_features):  # each thread would hold two d × d matrices
        return 1
    return max(1, min(cores or blas_threads(), n_samples))


def wide(n_features):
    """Whether a ``d × d`` float64 matrix takes at least :data:`_WIDE_BYTES`
    (``d`` of 2 048 or more): the passes run in one thread of ours, and a
    syrk over the rows outweighs a second read of them."""
    return 8 * n_features * n_features >= _WIDE_BYTES


def kernel_threads(n_features, cores=None):
    """Threads drawing the implicit kernel's blocks
    (:class:`~sklearn_dppca.noise.ImplicitGOE`): as many as BLAS would use
    (its limit, e.g. threadpoolctl's, is respected: ``cores``, the count the
    fit's plan read; None reads it now), when there are at least two blocks'
    rows."""
    from .noise import IMPLICIT_BLOCK

    if n_features < 2 * IMPLICIT_BLOCK:
        return 1
    return cores or blas_threads()


def _map_ranges(function, n_rows, n_threads):
    """``[function(start, stop), ...]`` over ``n_threads`` contiguous row ranges.

    The ranges run in parallel threads (NumPy releases the GIL in its loops
    and in BLAS), each with a single-threaded BLAS. They depend only on the
    row and thread counts, so that results are reproducible.
    """
    if n_threads <= 1:
        return [function(0, n_rows)]
    bounds = [n_rows * i // n_threads for i in range(n_threads + 1)]
    with _SINGLE_THREADED_BLAS, ThreadPoolExecutor(n_threads) as pool:
        futures = [pool.submit(function, *r) for r in zip(bounds, bounds[1:])]
        return [future.result() for future in futures]
