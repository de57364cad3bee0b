"""Dask arrays and DataFrames: the clipped statistics as Dask reductions.

Private PCA is a map-reduce: clipped sums over rows, then a small d × d (or
d × k) problem. For a ``dask.array.Array`` (or a Dask DataFrame) every
statistic is computed chunk by chunk of rows, with the same NumPy code as for
an in-memory array, and summed by a tree reduction on whatever scheduler is
active (threads, processes, ``dask.distributed``): a few chunks plus O(d²)
sit in one process, and on many rows the first rows' chunks, kept where they
fit (:func:`~sklearn_dppca._dask_memory.kept_rows`). The noise is added once, on the
driver, after the reduction, from the fit's one generator — so a Dask fit
releases the same noise as a NumPy fit with the same seed, and equal results
up to float round-off.

Dask is optional: nothing here imports it unless a Dask collection is given.

A fit with a progress hook (the CLI's ``-v``) is told how many partitions of
each pass are done (:func:`reporting_partitions`): the number of partitions is
a function of how the rows are stored (files, row groups, chunk sizes), not of
their values, and the count of those done goes from 0 to that number whatever
the rows hold; only when each is done depends on the data, and no time is
reported.
"""

import contextlib
import contextvars
import functools
import math
import sys
import uuid
import warnings
from decimal import Decimal
from numbers import Real

import numpy as np
from scipy import sparse

from ._accounting import saturating_float
from ._blocks import column_major
from ._rows import CentredRows, summed_entries
from ._stats import (
    _clip_scales,
    _sq_norms,
    centred_sums,
    max_row_norm,
    row_sq_norms,
    weighted_gram,
)
from ._stats import clipped_sum as _stats_clipped_sum
from ._threads import chunk_task
from ._warning_rules import private_computation


def is_dask_collection(X):
    """Whether ``X`` is a Dask array or DataFrame, without importing Dask."""
    return type(X).__module__.split(".")[0] in ("dask", "dask_expr")


def has_sparse_chunks(X):
    """Whether ``X`` is a Dask array whose chunks are SciPy sparse matrices
    (from its ``meta``, a public fact about the input, like its dtype)."""
    return is_dask_collection(X) and sparse.issparse(getattr(X, "_meta", None))


def gather_rows(X):
    """A Dask collection's rows in memory, for the steps that read their rows
    there (the scalers, the heads, a supervised search's validation): a
    Dask array of SciPy sparse chunks as one CSR matrix, one of NumPy chunks
    as an array, a Dask DataFrame as a pandas one; anything else as it is.
    Computed inside the private computation: the lazy steps it runs are the
    fit's first read of the rows, and a warning of theirs would tell the
    rows apart (docs/privacy.rst, "Warnings"). The estimators' fits and
    transforms, and the unsupervised search, read the chunks where they
    are."""
    if not is_dask_collection(X):
        return X
    with private_computation():
        if has_sparse_chunks(X):
            return sparse.csr_matrix(X.compute())
        return X.compute()


def _is_dataframe(X):
    """A pandas or Dask DataFrame (anything with per-column dtypes), no import."""
    return hasattr(X, "columns") and hasattr(X, "dtypes") and getattr(X, "ndim", 2) == 2


def non_numeric_columns(X, lazy=False):
    """``(text, complex_)``: the names of the DataFrame columns that do not
    hold real numbers, and of those that hold complex ones.

    Numbers are NumPy's integer, float and bool dtypes and pandas' numeric
    extension dtypes (``Int64``, ``Float64``, ``boolean``, ...), whose missing
    values become NaN. Text (``str``, ``string``), categories, dates and
    other dtypes are not. An ``object`` column counts as numbers when every
    cell is a real number or a missing marker (:func:`_as_number`), whatever
    their Python types, and as complex when a cell is a complex number; a
    lazy (Dask) one cannot be looked at and counts as text.
    """
    from pandas.api.types import is_complex_dtype, is_numeric_dtype

    bad, complex_ = [], []
    for name, dtype in zip(X.columns, X.dtypes):
        if is_complex_dtype(dtype):
            complex_.append(name)
            continue
        if is_numeric_dtype(dtype):
            continue
        if isinstance(dtype, np.dtype) and dtype.kind == "O" and not lazy:
            cells = saturated(X[name].to_numpy())
            if any(isinstance(cell, complex) for cell in cells):
                complex_.append(name)
                continue
            if all(isinstance(cell, float) for cell in cells):
                continue  # every cell a number or missing
        bad.append(name)
    return bad, complex_


def saturate_big_numbers(X, sum_sparse=True):
    """``X`` with every number read as float64 holds it: too large for a
    float (a Python integer, or a long double, beyond float64's range, in an
    array, a DataFrame's column, or nested lists) ±inf, the float it rounds
    to; every real cell of an object array or column a float and a missing
    marker NaN (:func:`_as_number`); anything else as it is, ``X`` itself
    never modified. NumPy refuses to convert such
    a number, so a fit would fail on one dataset and be released on its
    neighbour, where the domain holds both: as an infinite value, it is then
    refused before the charge or, with ``non_finite="clip"``, mapped like
    any other (docs/privacy.rst, "Over which domain the guarantee holds")."""
    if isinstance(X, (list, tuple)):
        try:
            values = np.asarray(X)
        except (ValueError, TypeError):  # ragged: the validation says why
            return X
        return _narrowed(values)
    if isinstance(X, np.ndarray):
        return _narrowed(X)
    if sparse.issparse(X):  # a fit's rows sum them a block at a time
        return summed_entries(X) if sum_sparse else X
    if _is_dataframe(X) and not is_dask_collection(X):
        mapped = [i for i, t in enumerate(X.dtypes) if _wide_or_object(t)]
        if not mapped:
            return X
        X = X.copy(deep=False)
        for i in mapped:
            X.isetitem(i, _narrowed(X.iloc[:, i].to_numpy()))
        return X
    return X


def _wide_or_object(dtype):
    """An object dtype, or a float wider than float64 (long double)."""
    return isinstance(dtype, np.dtype) and (dtype.kind == "O" or (
        dtype.kind == "f" and dtype.itemsize > 8))


def _narrowed(values):
    """An array's numbers as float64 can hold them: an object array's cells
    through :func:`saturated` (a float64 array where every cell is then a
    float, so that :func:`non_numeric_columns` need not read them again), a
    long double array cast to float64, its
    values beyond float64's range ±inf (silently: a cast's overflow warning
    would tell a dataset holding one from its neighbour, and is raised
    before the fit's private computation). A Dask partition's cells are read
    here too (:func:`_chunk_numbers`)."""
    if values.dtype == object:
        cells = saturated(values)
        if all(type(cell) is float for cell in cells.flat):
            return cells.astype(np.float64)  # a numeric column, read once
        return cells
    if values.dtype.kind == "f" and values.dtype.itemsize > 8:
        with np.errstate(over="ignore"):
            return values.astype(np.float64)
    return values


def _as_number(value):
    """One cell of an object array as a float where it is a real number:
    ``float`` itself, NumPy's, ``int`` and ``bool``, ``Fraction``,
    ``Decimal``; beyond float64's range the infinite value it rounds to; a
    missing marker (``None``, ``pd.NA``, ``NaT``) NaN. Anything else
    (text, a complex number) as it is, refused later by name."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return math.nan
    if isinstance(value, (Real, Decimal)):
        try:
            return saturating_float(value)  # a long double's overflow: ±inf
        except ValueError:  # Decimal's signalling NaN
            return math.nan
    return value


def saturated(values):
    """An object array with its numbers as floats (:func:`_as_number`):
    beyond float64's range ±inf, missing markers NaN; other cells as they
    are. A new array."""
    with np.errstate(all="ignore"):  # checked after the loop: silenced there
        return np.frompyfunc(_as_number, 1, 1)(values).astype(object)


#: How to encode a categorical column without leaking its categories, for
#: the messages that refuse text columns (review 90 F1): with a public list
#: of categories, never learned from the rows (the default
#: ``OneHotEncoder(categories="auto")`` makes a column of a category that a
#: single person holds).
_ENCODE_PUBLICLY = (
    "encode them with a public list of categories, not learned from the "
    "rows: OneHotEncoder(categories=[PUBLIC_LIST], handle_unknown='ignore', "
    "sparse_output=False) in a ColumnTransformer(..., sparse_threshold=0), "
    "or pd.get_dummies("
    "pd.Categorical(column, "
    "categories=PUBLIC_LIST)). The default OneHotEncoder(categories='auto') "
    "releases which categories the rows hold (a category of one person "
    "becomes a column): not private."
)


#: A polars DataFrame is not read (its dtypes are not NumPy's or pandas'):
#: refused by its type, a public value, rather than as columns of no numbers.
POLARS_REFUSED = (
    "X is a polars DataFrame, which the private estimators do not read: pass "
    "X.to_pandas() or X.to_numpy(), or give the step that makes it "
    "set_output(transform='pandas')."
)


def check_numeric_columns(X, lazy=False):
    """Refuse, naming the problem and nothing of the values, what a
    validation would refuse by quoting them: a DataFrame's non-numeric
    columns (named), and an in-memory array that is not 2-D, or holds
    complex numbers or a text cell that is not a number (scikit-learn's
    message prints a 1-D, scalar or complex array, NumPy's the text cell it
    cannot read). A cell that cannot be a number for its type (a dict) is
    left to the validation's ``TypeError``, which names the type only.
    """
    if not _is_dataframe(X):
        _check_array_unquoted(X)
        return
    if type(X).__module__.split(".")[0] == "polars":
        raise ValueError(POLARS_REFUSED)
    bad, complex_ = non_numeric_columns(X, lazy=lazy)
    if complex_:  # scikit-learn's message would print the frame
        raise ValueError(
            "Complex data not supported (X holds complex numbers, in column(s) "
            f"{', '.join(map(repr, complex_))}).")
    if bad:
        dtypes = dict(zip(X.columns, X.dtypes))
        listed = ", ".join(f"{name!r} ({dtypes[name]})" for name in bad)
        raise ValueError(
            f"X has {len(bad)} non-numeric column(s): {listed}. The private "
            f"estimators need numbers: drop these columns, or {_ENCODE_PUBLICLY}"
        )


def _check_array_unquoted(X):
    """:func:`check_numeric_columns` of an array (NumPy, sparse, Array API;
    anything else as it is)."""
    ndim = getattr(X, "ndim", None)
    if not isinstance(ndim, int):
        return
    if ndim != 2:
        raise ValueError(
            f"Expected a 2D array of rows, got a {ndim}D array. Reshape your "
            "data: one feature with X.reshape(-1, 1), one row with "
            "X.reshape(1, -1) (its values are not quoted: they are private).")
    complex_ = ValueError("Complex data not supported (X holds complex numbers).")
    kind = getattr(X.dtype, "kind", None)
    if kind is None:  # an Array API array's dtype (PyTorch's too)
        import array_api_compat

        if (array_api_compat.is_array_api_obj(X) and array_api_compat
                .array_namespace(X).isdtype(X.dtype, "complex floating")):
            raise complex_
    if kind == "c":
        raise complex_
    if kind in ("U", "S", "O") and isinstance(X, np.ndarray):
        try:
            with warnings.catch_warnings():  # a complex cell: cast, warned
                warnings.simplefilter("error", np.exceptions.ComplexWarning)
                np.asarray(X, dtype=np.float64)
        except np.exceptions.ComplexWarning:
            raise complex_ from None
        except TypeError:  # a Python complex cell, or one of another type
            if any(isinstance(cell, complex) for cell in X.flat):
                raise complex_ from None
        except ValueError:
            raise _text_cell_refusal() from None


def as_dask_array(X):
    """A 2-D Dask array of float rows, one chunk across the columns.

    Returns the array and the column names (``None`` unless a DataFrame with
    string column names). A DataFrame's partition lengths come from
    :func:`partition_lengths` (Parquet footers where Dask has them); an
    array's unknown chunk sizes are computed (a pass over its chunks).
    """
    import dask.array as da

    names = None
    if not isinstance(X, da.Array):  # a Dask DataFrame
        columns = list(X.columns)
        if columns and all(isinstance(c, str) for c in columns):
            names = np.asarray(columns, dtype=object)
        check_numeric_columns(X, lazy=True)
        floats = (np.dtype(np.float32), np.dtype(np.float64))
        # int, bool and pandas' extension dtypes as floats, missing values as
        # NaN (then refused by the first pass, as in memory); a mixed frame
        # would otherwise become an object array
        dtype = (np.complex128 if _has_complex(X) else np.float32
                 if all(t == floats[0] for t in X.dtypes) else np.float64)
        lengths = partition_lengths(X)
        # counting the rows runs the lazy steps: a warning of theirs would
        # tell the rows apart (docs/privacy.rst, "Warnings")
        with private_computation():
            try:
                X = X.to_dask_array(lengths=lengths)
            except Exception as exc:  # Dask made a partition's objects text
                if _made_text(exc):
                    raise _text_cell_refusal() from None
                raise
        # each chunk cast by _chunk_numbers, not the frame's astype, whose
        # error quotes a text cell of a partition the frame declared numeric
        X = X.map_blocks(_chunk_numbers, dtype, dtype=dtype)
    if X.ndim != 2:
        raise ValueError(f"Expected a 2D array, got a {X.ndim}D Dask array.")
    if np.isnan(X.shape[0]):
        with private_computation():
            X = X.compute_chunk_sizes()
    kind = X.dtype.kind
    if kind == "c":
        raise ValueError("Complex data not supported.")
    if kind not in "biuf":
        raise ValueError(f"Dask array of dtype {X.dtype} is not numeric.")
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    X = X.rechunk({1: -1})
    if has_sparse_chunks(X):  # each cell read as SciPy reads it, before any map
        X = X.map_blocks(summed_entries, dtype=X.dtype, meta=X._meta)
    return X, names


def partition_lengths(frame):
    """The rows of each partition of a Dask DataFrame, for ``to_dask_array``.

    Where Dask knows them without reading a row (the row counts in Parquet
    footers, partitions of an in-memory pandas frame), through column
    selections and element-wise steps (``astype``, ``fillna``), they come from
    there; otherwise ``True``: Dask counts them, a pass over the partitions
    (every column's bytes, for Parquet). Measured on 2·10⁶ × 100 Parquet
    rows in 12 files: 6 ms from the footers against 1.5 s for counting, a
    whole read of the files (benchmarks/bench_out_of_core.py). The row counts
    are public: n is public, and how the rows are split into files is a
    function of how they are stored.
    """
    try:  # dask-expr's own lengths expression, simplified against the source
        from dask.dataframe.dask_expr._expr import Lengths, Literal

        known = Lengths(frame.expr).optimize(fuse=False)
    except (ImportError, AttributeError, TypeError, ValueError):
        return True  # another Dask: count
    if isinstance(known, Literal):
        return tuple(int(length) for length in known.value)
    return True


def _chunk_numbers(chunk, dtype):
    """A DataFrame partition's rows as ``dtype``: a partition whose column
    holds objects where the frame declared numbers (one file of
    ``dd.from_map`` with a text cell) read as in memory, by
    :func:`_narrowed` (an integer beyond a float is infinite), a text cell
    refused here without quoting it: NumPy's and pandas' errors quote it, in
    this process and in a worker's log (review 100 F2). :func:`_narrowed`
    leaves such a cell for a refusal that names its column; a chunk's
    column is not known where it is read. A complex frame is refused by its
    columns before any chunk is read (:func:`check_numeric_columns`).

    Where Dask converts object columns to text (its
    ``dataframe.convert-string`` setting, on by default and fixed when the
    frame is made), a partition's object cells reach it as text, and are
    refused as such (``Decimal('1.5')`` too, read in memory); a cell that
    conversion cannot make text is refused in the same words
    (:func:`_made_text`), and so is one whose reading here raises."""
    if chunk.dtype.kind in "OUS":
        try:
            chunk = _narrowed(chunk.astype(object))
        except (ArithmeticError, ValueError, TypeError):  # its words: its own
            raise _text_cell_refusal() from None
        if chunk.dtype == object:  # a cell that is not a number
            raise _text_cell_refusal()
    return chunk.astype(dtype, copy=False)


def _made_text(exc):
    """Whether ``exc`` came from Dask's conversion of a partition's object
    cells to text (``Decimal('sNaN')``: ``decimal.InvalidOperation``; an
    integer of 5 000 digits: Python's limit on its digits): one cell chose
    the exception before the charge (review 101 F4)."""
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if (frame.f_code.co_name == "_to_string_dtype"
                and frame.f_globals.get("__name__") == "dask.dataframe._pyarrow"):
            return True
        tb = tb.tb_next
    return False


def _text_cell_refusal():
    return ValueError(
        "X holds a cell that is not a number (text): the private estimators "
        f"need numbers; drop such columns, or {_ENCODE_PUBLICLY} The cell is "
        "not quoted: it is private.")


def _has_complex(X):
    from pandas.api.types import is_complex_dtype

    return any(is_complex_dtype(t) for t in X.dtypes)


#: ``observer(done, total)``, told of the partitions of each pass as they are
#: done (``done = 0`` as the pass starts), or ``None``.
_PARTITION_OBSERVER = contextvars.ContextVar("sklearn_dppca_partitions", default=None)

@contextlib.contextmanager
def reporting_partitions(observer):
    """Within the block, every :func:`map_reduce` calls ``observer(done, total)``
    as its pass starts (``done = 0``) and as each partition is done.

    ``observer=None`` reports nothing. The hook of the CLI's progress, not of
    the estimators' API (``_fit(X, progress=...)`` sets it).
    """
    token = _PARTITION_OBSERVER.set(observer)
    try:
        yield
    finally:
        _PARTITION_OBSERVER.reset(token)


def map_reduce(X, function, *args, combine=None):
    """``combine`` over the row chunks of ``X`` of ``function(chunk, *args)``.

    ``combine`` defaults to an element-wise sum of (tuples of) arrays and
    numbers. The reduction is a binary tree of delayed tasks, so partial
    results meet on the workers and only the final one reaches the driver.
    Under :func:`reporting_partitions`, the tree is the same (so is the
    result, bit for bit) and the partitions done are counted as they finish.

    ``function`` runs in the task that makes its chunk (a blockwise map,
    fused with the read of a Parquet partition): a chunk is never sent to
    another worker, and a pass over files costs little more than Dask's own
    reduction (``X.T @ X`` on 2·10⁶ × 100 in 12 files on two workers: 1.15 s
    for this map and Dask's sum, 1.47 s with the read and the map in two tasks
    each).
    """
    import dask

    combine = combine or _add
    observer = _PARTITION_OBSERVER.get()
    # one name per pass, unique on a scheduler shared with other clients, that
    # says what the pass computes (the dashboard's and a profiler's label)
    name = f"dppca-{getattr(function, '__name__', 'chunk')}-{uuid.uuid4().hex}"
    blocks = X.map_blocks(_on_block, function, *args, name=name, dtype=object,
                          meta=np.empty((0, 0), dtype=object))
    parts = list(blocks.to_delayed(optimize_graph=True).ravel())
    if observer is None:
        return dask.compute(_tree(parts, dask.delayed(combine)))[0]
    total = len(parts)
    observer(0, total)
    client = _active_client()
    if client is not None:
        return _reduce_on_client(client, parts, combine, observer)
    return _reduce_counting(parts, combine, name, observer)


def _on_block(chunk, function, *args):
    """:func:`_on_rows` as a blockwise map calls it."""
    return _on_rows(function, chunk, *args)


def _on_rows(function, chunk, *args):
    """``function(chunk, *args)`` on a chunk in row-major order.

    A partition read from Parquet (through pandas) is column-major; the
    statistics read it row block by row block, and one copy of the chunk
    costs less than a copy of every block (measured on 170 000 × 100: the
    Gram 1.55 against 1.8 times a bare ``X.T @ X``, the clipped sum 0.62
    against 0.73). A ``function`` marked ``any_layout`` gets the chunk as it
    is (the Gram's, the bounds', the mean's and the coherent passes: they
    read a column-major chunk in place, issue 34).
    """
    if (isinstance(chunk, np.ndarray) and not chunk.flags.c_contiguous
            and not getattr(function, "any_layout", False)):
        chunk = np.ascontiguousarray(chunk)
    with chunk_task():  # blocks of a worker's size
        return function(chunk, *args)


def _tree(parts, combine):
    """``combine`` over ``parts`` in a binary tree (the order map_reduce uses)."""
    while len(parts) > 1:
        pairs = [combine(a, b) for a, b in zip(parts[::2], parts[1::2])]
        parts = pairs + ([parts[-1]] if len(parts) % 2 else [])
    return parts[0]


def cluster_workers():
    """``{address: (threads, memory_limit)}`` of the active distributed
    client's workers (``memory_limit`` None where unlimited); ``{}``
    without a client. Public: how the cluster was set up."""
    client = _active_client()
    if client is None:
        return {}
    try:
        info = client.scheduler_info(n_workers=-1)["workers"]
    except TypeError:  # distributed before n_workers
        info = client.scheduler_info()["workers"]
    return {address: (int(worker["nthreads"]), worker.get("memory_limit") or None)
            for address, worker in info.items()}


def in_process(workers):
    """Whether every worker of :func:`cluster_workers` runs in this process
    (``LocalCluster(processes=False)``)."""
    return bool(workers) and all(a.startswith("inproc://") for a in workers)


def local_threads():
    """Threads a Dask computation runs on in this process, as Dask's local
    schedulers pick them (``dask.threaded.get``, ``dask.multiprocessing.get``,
    whose results all come back to this process): 1 under the synchronous
    scheduler; an executor given as the scheduler, its workers; else the
    ``pool`` of Dask's config (before ``num_workers``: review 100 F4), else
    ``num_workers``, else the new pool the threaded scheduler makes when
    called from a thread other than the main one (Python's default size),
    else the CPU count. On a distributed cluster, its workers' threads
    where they all run in this process, else ``None`` (the workers compute
    it)."""
    if _active_client() is not None:
        workers = cluster_workers()
        return sum(t for t, _ in workers.values()) if in_process(workers) else None
    import threading

    import dask
    import dask.local
    import dask.threaded
    from dask.base import get_scheduler
    from dask.system import CPU_COUNT

    scheduler = get_scheduler()
    if scheduler is dask.local.get_sync:
        return 1
    if isinstance(scheduler, functools.partial) \
            and scheduler.func is dask.local.get_async:
        # an Executor as the scheduler: Dask runs its _max_workers at once
        args, keywords = scheduler.args, scheduler.keywords
        return _counted(args[1] if len(args) > 1 else keywords.get("num_workers"))
    pool = dask.config.get("pool", None)
    if pool is not None:
        return _pool_size(pool)
    workers = dask.config.get("num_workers", None)
    if workers:
        return int(workers)
    if scheduler in (None, dask.threaded.get) \
            and threading.current_thread() is not threading.main_thread():
        from concurrent.futures import ThreadPoolExecutor

        # dask.threaded.get makes ThreadPoolExecutor(None) there: no thread
        # starts before a task is submitted, so this one only tells its size
        return int(ThreadPoolExecutor()._max_workers)
    return int(CPU_COUNT)


#: Threads counted for a pool whose size cannot be read: Python's largest
#: default pool (``ThreadPoolExecutor``'s 32), or the CPU count and 4.
UNKNOWN_POOL_THREADS = 32


def _pool_size(pool):
    """Tasks Dask runs at once on ``pool``, as Dask reads them: an
    executor's ``_max_workers``, a ``multiprocessing`` pool's processes (a
    ``ThreadPool``'s threads)."""
    import multiprocessing.pool

    if isinstance(pool, multiprocessing.pool.Pool):  # ThreadPool too
        return _counted(max(getattr(pool, "_processes", 0) or 0,
                            len(getattr(pool, "_pool", ()) or ())))
    return _counted(getattr(pool, "_max_workers", None))


def _counted(size):
    """``size`` where it is a positive int; where it cannot be read, as
    many as the largest pool Python makes by default: a conservative count,
    since each of them may hold a chunk of rows in this process (review 100
    F4)."""
    from dask.system import CPU_COUNT

    if isinstance(size, int) and not isinstance(size, bool) and size > 0:
        return size
    return max(UNKNOWN_POOL_THREADS, int(CPU_COUNT) + 4)


def _active_client():
    """The ``dask.distributed`` client that ``dask.compute`` would use, or None.

    ``distributed`` is not imported here: without it, there is no client.
    """
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return None
    try:
        client = distributed.default_client()
    except ValueError:
        return None
    from dask.base import get_scheduler

    scheduler = get_scheduler()
    return client if getattr(scheduler, "__self__", None) is client else None


def _reduce_counting(parts, combine, name, observer):
    """The tree on a local scheduler, its per-chunk tasks counted as they end."""
    import dask
    from dask.callbacks import Callback

    done = set()

    def posttask(key, result, dsk, state, worker_id):
        # a chunk's task, fused with the read that makes it (its name then
        # ends with ours), or an alias of it: each chunk counted once
        if isinstance(key, tuple) and str(key[0]).endswith(name) and (
                key[1] not in done):
            done.add(key[1])
            observer(len(done), len(parts))

    with Callback(posttask=posttask):
        result = dask.compute(_tree(parts, dask.delayed(combine)))[0]
    if len(done) < len(parts):  # a scheduler that renamed the tasks otherwise
        observer(len(parts), len(parts))
    return result


def _reduce_on_client(client, parts, combine, observer):
    """The tree on a distributed cluster, its per-chunk futures counted as they
    end; partial results stay on the workers until combined."""
    from distributed import as_completed

    total = len(parts)
    futures = client.compute(parts)
    final = _tree(futures, lambda a, b: client.submit(combine, a, b))
    pending = as_completed(futures)
    del futures
    for done, future in enumerate(pending, 1):
        if future.status != "finished":  # an error (NaN, inf) or cancelled
            future.result()  # raises it, as dask would (a lost scheduler too)
        observer(done, total)
    return final.result()


def _add(a, b):
    if isinstance(a, tuple):
        return tuple(_add(x, y) for x, y in zip(a, b))
    return a + b


# Per-chunk functions: module-level so that distributed workers can unpickle
# them. Each reads one chunk of rows (the finiteness check included).
def _chunk_max_norm(chunk):
    """The largest row norm of a chunk. A column-major float64 chunk (a
    Parquet partition) is read in place, its squared norms in one
    whole-array operation as the other passes read it
    (:func:`_centred_chunk`, :func:`_chunk_clipped_sum`: the same numbers),
    not copied into row-major order (a copy of the chunk that the plan's
    thread does not hold beside the others' in-place reads; mend 124); any
    other dense chunk not row-major is copied once (:func:`_row_major`)."""
    if chunk.shape[0] == 0:  # a partition a public filter emptied (review 100 F5)
        return 0.0
    if column_major(chunk):
        return max_row_norm(chunk, _sq_norms(chunk))
    chunk = _row_major(chunk)
    return max_row_norm(chunk, row_sq_norms(chunk))


_chunk_max_norm.any_layout = True  # a column-major partition is read as it is


def _chunk_centred(chunk, data_norm, centre):
    r""":math:`(\sum y y^\top, \sum y)` of a chunk,
    :math:`y = \operatorname{clip}_C(x - c)`: a dense chunk as it is, in
    either layout (:func:`~sklearn_dppca._stats.weighted_gram`), any other,
    or one with rows far out, row-major by blocks."""
    result = weighted_gram(chunk, data_norm, centre)
    if result is not None:
        return result
    if isinstance(chunk, np.ndarray) and not chunk.flags.c_contiguous:
        chunk = np.ascontiguousarray(chunk)
    return centred_sums(chunk, data_norm, centre)


def _chunk_clipped_sum(chunk, data_norm):
    r""":math:`\sum \operatorname{clip}_C(x)` of a chunk: a column-major
    float64 one (a Parquet partition) in whole-array operations, in place
    (its squared norms, the clipping scales :math:`s`, then
    :math:`X^\top s`: temporaries of one number a row), any other by
    row-major blocks (:func:`~sklearn_dppca._stats.clipped_sum`)."""
    if column_major(chunk):
        return chunk.T @ _clip_scales(chunk, _sq_norms(chunk), data_norm)
    return _stats_clipped_sum(_row_major(chunk), data_norm)


def _row_major(chunk):
    """A dense chunk not row-major copied into row-major order once (not
    block by block); any other as it is."""
    if isinstance(chunk, np.ndarray) and not chunk.flags.c_contiguous:
        return np.ascontiguousarray(chunk)
    return chunk


def _chunk_gram(chunk, data_norm, mean):
    return _chunk_centred(chunk, data_norm, mean)[0]


# a column-major partition is read as it is (no copy into row-major order)
_chunk_gram.any_layout = _chunk_centred.any_layout = True
_chunk_clipped_sum.any_layout = True


def _centred_chunk(chunk, data_norm, mean):
    """:class:`~sklearn_dppca._rows.CentredRows` of a chunk as it comes.

    A column-major float64 chunk (a partition read from Parquet) is read
    in place: its squared norms in one whole-array operation, its blocks as
    views (BLAS's products take either layout; their sums differ from a
    row-major copy's by rounding alone, which the clipping's margin
    covers). Copying it into row-major order first cost a third of the
    products' pass (issue 34; 170 000 × 100, one thread, CPU time: 113 ms
    against 78, the shared pass of the test and the first step 137 against
    94; the bare ``X.T @ X``, 52). Any other dense chunk not row-major is
    copied into row-major order once (not block by block)."""
    if column_major(chunk):
        return CentredRows(chunk, data_norm, mean, _sq_norms(chunk), any_layout=True)
    chunk = _row_major(chunk)
    return CentredRows(chunk, data_norm, mean, row_sq_norms(chunk))


def _chunk_products(chunk, data_norm, mean, W, radii):
    return _centred_chunk(chunk, data_norm, mean).clipped_products(W, radii)


def _chunk_energy(chunk, data_norm, mean, W, radii):
    return _centred_chunk(chunk, data_norm, mean).clipped_energy(W, radii)


def _chunk_energy_and_products(chunk, data_norm, mean, W_test, test_radii, W, radii):
    # one product of the chunk with W and W_test side by side, one set of
    # clipping scales: the test's energies and the first step's products
    rows = _centred_chunk(chunk, data_norm, mean)
    products, clipped, q = rows.clipped_products(W, radii,
                                                 energy=(W_test, test_radii))
    return q, products, clipped


def _chunk_sq_norm_sum(chunk, data_norm, mean):
    return _centred_chunk(chunk, data_norm, mean).sq_norm_sum()


# the passes of CentredRows: a column-major partition read as it is
_chunk_products.any_layout = _chunk_energy.any_layout = True
_chunk_energy_and_products.any_layout = _chunk_sq_norm_sum.any_layout = True


def max_norm(X):
    """Largest row norm (the non-private estimate of ``data_norm``)."""
    return map_reduce(X, _chunk_max_norm, combine=max)


def clipped_sum(X, data_norm):
    r""":math:`\sum \operatorname{clip}_C(x_i)` over every chunk (sensitivity
    :math:`2C`)."""
    return map_reduce(X, _chunk_clipped_sum, data_norm)


def centred_gram(X, data_norm, mean):
    r""":math:`\sum y y^\top`, :math:`y = \operatorname{clip}_C(x - m)`, over
    every chunk (sensitivity :math:`\sqrt{2} C^2`)."""
    return map_reduce(X, _chunk_gram, data_norm, mean)


class ChunkedRows:
    """The statistics of a Dask array, each pass one Dask reduction.

    Same interface as :class:`~sklearn_dppca._rows.InMemoryRows`.
    """

    #: The columns of the Dask DataFrame ``X`` was made of (public), which a
    #: search's steps mapped over the chunks read by name
    #: (:func:`~sklearn_dppca._search_rows.rows_kind`); None for an array.
    names = None

    def __init__(self, X):
        self.X = X
        self._gram = None  # (data_norm, Σ clip(x) clip(x)ᵀ) from the first pass
        #: False on the matrix-free path: no pass forms a d × d matrix.
        self.with_gram = True

    @property
    def sparse_chunks(self):
        """Whether the chunks are SciPy sparse matrices
        (:func:`has_sparse_chunks`)."""
        return has_sparse_chunks(self.X)

    @functools.cached_property
    def held_by_workers(self):
        """Whether a cluster's workers already hold the chunks
        (:func:`~sklearn_dppca._dask_memory.held_by_workers`): read from the whole
        graph once, though a search's plan asks at every fit size."""
        from ._dask_memory import held_by_workers

        return held_by_workers(self.X)

    def largest_norm(self):
        return max_norm(self.X)

    def first_pass(self, data_norm, with_sum):
        if with_sum:
            return clipped_sum(self.X, data_norm)
        if not self.with_gram:  # a pass that reads (and checks) every row
            max_norm(self.X)
            return None
        # Without centring the Gram matrix needs no private mean: the pass
        # that reads (and checks) every row before the charge computes it, so
        # the fit reads the rows once. Nothing is released before the charge.
        self._gram = (data_norm, centred_gram(self.X, data_norm, None))
        return None

    def gram(self, data_norm, mean):
        if self._gram is not None and mean is None and self._gram[0] == data_norm:
            return self._gram[1]
        return centred_gram(self.X, data_norm, mean)

    def rows(self, data_norm, mean):
        return DaskCentredRows(self.X, data_norm, mean)

    def head(self, n_rows):
        """The first ``n_rows`` rows, read once and kept (on the workers, or
        in memory without a cluster): the steps that use them read only
        them, and the later passes over every row read their chunks from
        what is kept (the chunks, and so the sums, stay the same). On a
        cluster, the first chunks are kept, one per worker thread if the
        first rows take fewer: read together, while the first rows'
        steps run, at most one chunk more per thread in memory."""
        import dask.array as da

        end = self.head_end(n_rows)
        kept = self.X[:end].persist()
        if end < self.X.shape[0]:
            self.X = da.concatenate([kept, self.X[end:]])
        else:
            self.X = kept
        vars(self).pop("held_by_workers", None)  # now partly held: read again
        head = ChunkedRows(kept[:n_rows])
        head.with_gram = self.with_gram
        return head

    def head_end(self, n_rows):
        """The end of the chunks that :meth:`head` keeps for the first
        ``n_rows`` rows (public: the chunks and the cluster's threads)."""
        ends = np.cumsum(self.X.chunks[0])
        held = np.searchsorted(ends, n_rows) + 1  # the chunks holding them
        # on a cluster, as many chunks as it has threads are read at once
        # (the threads would otherwise wait for the first rows), and kept
        client = _active_client()
        if client is not None:
            held = max(held, min(sum(client.nthreads().values()), len(ends)))
        return int(ends[held - 1])

    def clipped_sum(self, data_norm):
        r""":math:`\sum \operatorname{clip}_C(x_i)` alone: the first rows'
        pass."""
        return clipped_sum(self.X, data_norm)

    def centred(self, data_norm, centre):
        r""":math:`(\sum y y^\top, \sum y)`,
        :math:`y = \operatorname{clip}_C(x - c)`: one pass (sensitivities
        :math:`\sqrt{2} C^2` and :math:`2C`)."""
        return map_reduce(self.X, _chunk_centred, data_norm, centre)


class DaskCentredRows:
    """:class:`~sklearn_dppca._rows.CentredRows` for a Dask array."""

    def __init__(self, X, data_norm, mean):
        self.X = X
        self.data_norm = data_norm
        self.mean = mean

    def clipped_products(self, W, radii, n_jobs=None):
        """One Dask reduction serving every running trial (see CentredRows)."""
        return map_reduce(
            self.X, _chunk_products, self.data_norm, self.mean, W, np.asarray(radii)
        )

    def sq_norm_sum(self):
        r"""One Dask reduction of :math:`\sum \|a_i\|^2` (see CentredRows)."""
        return map_reduce(self.X, _chunk_sq_norm_sum, self.data_norm, self.mean)

    #: Every pass reads the rows (from disk): the clipping test and the
    #: first power step share one.
    fuses_first_step = True

    def energy_then_products(self, W_test, test_radii, W, radii, n_jobs=None):
        """One Dask reduction of the clipping test's :math:`q(R)` and the first
        power step's products (see ``CentredRows.energy_then_products``): the
        products are computed with the test and released only if it chooses
        the power branch."""
        q, products, clipped = map_reduce(
            self.X, _chunk_energy_and_products, self.data_norm, self.mean, W_test,
            np.asarray(test_radii, dtype=float), W, np.asarray(radii))
        return q, lambda: (products, clipped)

    def clipped_energy(self, W, radii):
        """One Dask reduction of :math:`q(R)` (see CentredRows)."""
        return map_reduce(self.X, _chunk_energy, self.data_norm, self.mean, W,
                          np.asarray(radii, dtype=float))
