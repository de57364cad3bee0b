"""What the passes over a Dask array hold, from public values (the chunks,
the dtype, the names of the graph's layers, the cluster's set-up), for the
memory plan (:mod:`sklearn_dppca._paths`): the chunks' Gram matrices and
partial sums in this process, a distributed worker's room and need, a
thread's chunk and its copy, and what a thread reading the CLI's files
(``--dask``: Parquet, CSV) or a search's mapped public steps holds beside
it."""

import math

from ._dask import ChunkedRows, cluster_workers, in_process, local_threads
from ._reported import _engine


def chunked_partials(engine):
    r""":math:`d \times d` matrices that a dense pass over a Dask array holds
    in this process beyond the in-memory fit's, at its peak: each running
    chunk's Gram matrix with its temporaries and the tree's partial sums,
    ``5 + 2.5 T`` on Dask's local schedulers with ``T`` threads
    (:func:`~sklearn_dppca._dask.local_threads`; measured with ``tracemalloc``
    at :math:`d = 3\,000`, 8 and 48 chunks: 6.0–7.6, 7.8–9.6 and 11.7–14.2
    matrices in all at ``T`` = 1, 2 and 4, against 3 in memory), and one
    more per level of the reduction tree beyond those 48 chunks' six (Dask
    orders it depth first: at most one partial sum waits per level). None in
    memory, nor on a distributed cluster, whose workers hold them (only the
    sum reaches the client)."""
    engine = _engine(engine)
    if not isinstance(engine, ChunkedRows):
        return 0.0
    threads = local_threads()
    if threads is None:
        return 0.0
    return 5.0 + 2.5 * threads + max(0, tree_levels(engine) - 6)


def tree_levels(engine):
    """Levels of the reduction tree over a Dask array's chunks (public)."""
    return math.ceil(math.log2(max(1, engine.X.numblocks[0])))


def worker_room(engine):
    r"""``(bytes, threads, beside)`` of a distributed cluster's tightest
    worker, where its workers compute a Dask array's passes in other
    processes: :data:`~sklearn_dppca._paths.MEMORY_SHARE` of the smallest
    ``memory_limit``, the most threads, and the :math:`d \times d` matrices
    a worker holds beside its running chunks (:data:`WORKER_MATRICES`: the
    partial sums of a tree over the array's chunks); ``None`` in memory, on
    Dask's local schedulers and on an in-process cluster
    (:func:`chunked_partials` counts those), or where a worker's memory is
    unlimited. Public: the cluster's set-up and the array's chunks."""
    engine = _engine(engine)
    if not isinstance(engine, ChunkedRows):
        return None
    workers = cluster_workers()
    if not workers or in_process(workers):
        return None
    limits = [limit for _, limit in workers.values()]
    if None in limits:
        return None
    _, beside, per_level, persisted = WORKER_MATRICES
    beside += per_level * tree_levels(engine)
    if engine.held_by_workers:
        beside += persisted
    from ._paths import MEMORY_SHARE  # the plan's module, which imports this one

    return (MEMORY_SHARE * min(limits), max(t for t, _ in workers.values()),
            beside)


def chunk_bytes(engine):
    r"""Bytes a thread running a pass over a Dask array holds for its rows:
    the largest chunk (every column) and one float64 copy of it (a lazy
    step's output beside its input, such as ``X / s``, or the float64 cast
    of float32 rows); 0 in memory and for sparse chunks, whose size (their
    non-zeros) is not known before they are read. Public: the array's
    chunks and dtype. Review 61: chunks of 25 000 × 1 000 rows held 0.8 GB
    on two threads beside a plan of 0.2 GB (generated and scaled: 1.9
    chunks a thread); a chunk read as it is holds about one (review 65)."""
    engine = _engine(engine)
    if not isinstance(engine, ChunkedRows) or engine.sparse_chunks:
        return 0
    return (_largest_chunk(engine.X) * (engine.X.dtype.itemsize + 8)
            + heads_bytes(engine.X) + read_bytes(engine.X))


#: The name of the Dask layers that map a search's public steps over the
#: chunks of its rows (:func:`~sklearn_dppca._search_rows.mapped_rows`),
#: followed by the bytes of a row of their input: ``dppca-heads-<bytes>-``.
HEADS_MAP = "dppca-heads"
#: Float64 copies of a mapped chunk that a thread holds beyond the bare
#: pass's chunk and copy, beside the chunk the steps read: their output,
#: their temporaries and the fit's map of non-finite values
#: (``non_finite="clip"``, which a search sets after steps). Measured on a
#: training fold's take of 10⁶ × 50 rows in chunks of 10⁵: a PublicScaler
#: held 1.0–1.4 chunks a thread beyond the bare fit (2 and 4 threads), a
#: constant fill 2.0, against 3 counted; peaks 0.63–0.82 of the plan at 1,
#: 2 and 4 threads, float64 and float32 rows.
HEADS_COPIES = 2


def heads_bytes(X):
    """Bytes a thread holds beyond :func:`chunk_bytes`' chunk and copy where
    the Dask array ``X`` is a search's public steps mapped over the chunks
    of its rows (:data:`HEADS_MAP`, in its graph): the chunk of their input
    and :data:`HEADS_COPIES` float64 copies of the mapped one; 0 for other
    arrays. Public: the names of the graph's layers, the chunks."""
    for name in X.__dask_graph__().layers:
        name = str(name)
        if name.startswith(HEADS_MAP + "-"):
            row = int(name[len(HEADS_MAP) + 1:].split("-", 1)[0])
            rows = max(X.chunks[0], default=0)
            return rows * (row + HEADS_COPIES * 8 * X.shape[1])
    return 0


#: The names of the tasks that read a Dask array's chunks from files (the
#: CLI's ``--dask``: :mod:`sklearn_dppca._cli_dask`), which
#: :func:`read_bytes` finds in the array's graph.
PARQUET_READ, CSV_READ = "dppca-read-parquet", "dppca-read-csv"
#: The tasks that read a whole CSV file as one chunk (a compressed one,
#: which Dask cannot cut into blocks), and the float64 copies of that
#: chunk its read holds beyond :func:`chunk_bytes`' chunk and copy:
#: pandas' columns beside the frame's block of rows (mend 109: gz files of
#: single digits, 500 columns, held 3.0 chunks in a pass, 1.20 times a
#: plan of 2 and :data:`CSV_BLOCK_COPIES` blocks; 10 columns 2.5).
CSV_FILE_READ, CSV_FILE_COPIES = "dppca-read-whole-csv", 1
#: Bytes of the blocks an uncompressed CSV file is cut into, at most (each
#: read by one task, parsed by pandas, then rechunked into chunks of 2**22
#: entries; :func:`~sklearn_dppca._cli_dask.csv_blocksize`: Dask's own
#: rule cut a file of 1.99 times it as one block, mend 108):
#: what a thread holds while it reads one, in the count of the rows before
#: the plan as in the fit's passes, is bounded by :data:`CSV_BLOCK_COPIES`
#: of it beyond the chunk and its copy, known before the data is read
#: (measured: 42–96 MiB beyond them, at 50 000 × 200 and 8 000 × 5 000;
#: Dask's default blocks, up to 64 MiB, held 4 times the plan in a pass and
#: 768 MiB in the count of a 150 MB file's rows: review 69 F2; 161 MiB
#: beyond them on a block of single digits ``d,d,…``, 239 MiB on one of
#: empty cells ``1,,,…``, a NaN a byte, the densest: mend 108).
CSV_BLOCK = 2**24
CSV_BLOCK_COPIES = 16
#: Entries of a slice of a row group that
#: :func:`~sklearn_dppca._cli_dask.read_parquet_chunk` reads at a time
#: (columns of it): 8 MiB of float64, at least one column.
SLICE_ENTRIES = 2**20
#: Bytes a thread reading a chunk of Parquet rows holds beside the chunk:
#: three slices (Arrow's decoded columns, its buffers, a cast); a pass
#: over 50 000 × 200 rows peaked 8 MiB above two chunks, one over
#: 8 000 × 5 000 at two chunks.
PARQUET_READ_BYTES = 3 * 8 * SLICE_ENTRIES
#: Bytes Arrow maps on its first read of Parquet in a process, once
#: whatever the threads (44–55 MiB measured): :func:`read_base`.
ARROW_FIRST_READ = 2**26


def _read_task(X):
    """:data:`PARQUET_READ` or :data:`CSV_READ` where the Dask array ``X``
    is read from such files by the CLI (the names of its tasks: public),
    else None."""
    names = [str(name) for name in X.__dask_graph__().layers]
    return next((kind for kind in (CSV_READ, CSV_FILE_READ, PARQUET_READ)
                 if any(name.startswith(kind) for name in names)), None)


def read_base(X):
    """Bytes a process reading the Dask array ``X`` from Parquet files maps
    once (:data:`ARROW_FIRST_READ`), beside its threads' :func:`chunk_bytes`;
    0 for other arrays."""
    return ARROW_FIRST_READ if _read_task(X) == PARQUET_READ else 0


def read_bytes(X):
    """Bytes a thread holds beyond the chunk while it reads a chunk of the
    Dask array ``X`` from files (:func:`chunk_bytes`): Parquet, the slices
    of :func:`~sklearn_dppca._cli_dask.read_parquet_chunk`; CSV, the
    parsing of a block of :data:`CSV_BLOCK` bytes, and for a whole file
    read as one chunk :data:`CSV_FILE_COPIES` float64 copies of it too;
    0 for other arrays. Public: the names of the graph's layers, the
    chunks."""
    kind = _read_task(X)
    if kind == CSV_FILE_READ:
        return CSV_BLOCK_COPIES * CSV_BLOCK + CSV_FILE_COPIES * 8 * _largest_chunk(X)
    return {CSV_READ: CSV_BLOCK_COPIES * CSV_BLOCK,
            PARQUET_READ: PARQUET_READ_BYTES}.get(kind, 0)


def _largest_chunk(X):
    """Entries of a Dask array's largest chunk of rows (every column)."""
    return max(X.chunks[0], default=0) * X.shape[1]


def kept_rows(engine, n_rows):
    r"""Bytes of the first ``n_rows`` rows of a Dask array that a fit keeps
    (:meth:`~sklearn_dppca._dask.ChunkedRows.head`: the chunks holding them),
    and the most of them one worker of a distributed cluster holds (its
    share of the chunks, one more for an uneven spread); 0 for sparse
    chunks (:func:`chunk_bytes`). Public: the chunks, the dtype and the
    cluster."""
    engine = _engine(engine)
    if engine.sparse_chunks:
        return 0, 0
    X = engine.X
    kept = engine.head_end(n_rows) * X.shape[1] * X.dtype.itemsize
    workers = cluster_workers()
    if not workers or in_process(workers):
        return kept, kept
    return kept, min(kept, kept / len(workers) + _largest_chunk(X) * X.dtype.itemsize)


def held_by_workers(X):
    """Whether a Dask array's chunks are already held by a cluster's workers
    (persisted: futures in its graph, which a slice or a map keeps)."""
    try:
        from distributed import Future
    except ImportError:
        return False
    return any(isinstance(task, Future) for task in dict(X.__dask_graph__()).values())


#: :math:`d \times d` matrices a distributed worker holds on the dense pass:
#: per thread running a chunk (its Gram matrix and temporaries); beside them
#: the partial sums it combines: a base, one per level of the tree over the
#: :math:`k` chunks (:math:`\lceil \log_2 k \rceil`: a partial waits at each
#: level for its pair, often sent from another worker, whose copy stays
#: until the pair is summed), and more where the array is persisted (its
#: chunk tasks, not held back by the scheduler, run ahead of the sums).
#: The growth of a worker's resident peak, measured on two workers at
#: :math:`d = 1\,000` and :math:`3\,000` with 4 to 256 chunks, against the
#: model (2.5 t + 3 + ⌈log₂ k⌉, + 4 persisted): one thread 3.9–4.1 at 4
#: chunks (7.5), 5.1–8.5 at 16 (9.5), 6.6–11.5 at 64 (11.5), 8.7–13.5 at
#: 256 (13.5), persisted 10.1–14.1 at 64 (15.5); two threads 4.9–5.0 at 4
#: (10), 8.1–10.4 at 64 (14), 12.1–12.6 at 256 (16), persisted 12.2–14.5 at
#: 64 (18). Four chunks modelled with 2 beside, not by level, admitted
#: fits whose workers then held 8–14: with spilling off one was charged
#: and never finished.
WORKER_MATRICES = (2.5, 3.0, 1.0, 4.0)


#: Bytes a distributed worker holds beside the fit's arrays (its
#: interpreter, libraries and chunks): 215 MB measured before the fit;
#: workers of 400 MiB running the 280 MB of a dense pass at
#: :math:`d = 3\,000` were killed.
WORKER_BASE = 2**28
