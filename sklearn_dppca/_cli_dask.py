"""``dppca fit --dask`` and ``transform --dask``: tables larger than memory.

DATA is then a Parquet file, a glob of them (``'data/part-*.parquet'``) or a
directory holding them (CSV files too, read with ``dask.dataframe.read_csv``).
They are read lazily with :mod:`dask.dataframe`: the chosen columns become a
Dask array of float64 rows, one chunk per partition, and every pass of the fit
is one reduction over its chunks (:mod:`sklearn_dppca._dask`) on the active
scheduler: the local threads, or ``--scheduler ADDRESS``'s cluster. The
workers read the files and reduce them; only sums of d × d (or d × k) reach the
client, which draws the noise once.

The checks of an in-memory table are kept, with the same messages: columns
present, chosen once and numeric (from the dtypes, and for a column Dask
reads as objects from its first rows: :class:`LazyTable`), in every file
(each CSV file's header is the first file's; each Parquet file's schema has
the chosen columns, numbers), before the plan;
missing and infinite values are found by the fit's own passes, and only when
one is found is the table read once more to name the columns that hold them
(as in memory, before anything is charged). ``--fill-missing`` and
``--scale`` are applied chunk by chunk, with the in-memory code.
"""

import contextlib
import glob
import os
import sys

import numpy as np

from ._cli_io import (
    _COMPRESSIONS,
    NOT_UTF8,
    as_numbers,
    bad_sparse_columns,
    check_chosen,
    check_header,
    check_sparse,
    choose_columns,
    chosen_indices,
    cli_extra_command,
    csv_refusal,
    directory_tables,
    file_kind,
    fill_missing,
    fill_sparse,
    load_sparse,
    one_line,
    quote_names,
    refuse_infinite,
    refuse_missing,
    sparse_column_names,
    table_format,
    unreadable_sparse,
    wider_rows,
)
from ._csv_dialect import (
    DEFAULT_DIALECT,
    header_names,
    is_tsv,
    refuse_other_separator,
)
from ._dask import partition_lengths
from ._dask_memory import (
    CSV_BLOCK,
    CSV_FILE_READ,
    CSV_READ,
    PARQUET_READ,
    SLICE_ENTRIES,
)
from ._warning_rules import private_computation

#: The messages of the fit's own finiteness check (and of :func:`_checked`).
_BAD_VALUES = ("Input X contains NaN", "Input X contains infinity")


def require_dask(scheduler=None):
    """A one-line :class:`ImportError` naming the ``dask`` extra if
    ``dask.dataframe`` (or, for ``--scheduler``, ``distributed``) is missing."""
    try:
        import dask.array  # noqa: F401
        import dask.dataframe  # noqa: F401

        if scheduler is not None:
            import distributed  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"--dask reads tables with Dask, which is not installed "
            f"({exc.name or one_line(exc)} is missing): {cli_extra_command('dask')}"
        ) from None


@contextlib.contextmanager
def scheduler(address):
    """``--scheduler ADDRESS``: a ``distributed.Client`` connected to it, the
    scheduler of every Dask computation in the block, closed at its end.

    ``None``: Dask's default scheduler (local threads, or a client the caller
    made the default).
    """
    if address is None:
        yield None
        return
    from distributed import Client

    try:
        client = Client(address, timeout="20s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise ValueError(f"--scheduler {address}: cannot connect to a Dask "
                         f"scheduler there: {one_line(exc)}") from None
    try:
        yield client
    finally:
        client.close()


def table_files(path):
    """The files DATA names: one file, a glob, or a directory's tables.

    Returns the sorted file names and their kind (``"parquet"``, ``"csv"``
    or ``"npz"``, sparse matrices). A directory holds Parquet files
    (``*.parquet``, ``*.pq``; others, such as ``_SUCCESS``, are ignored),
    or else CSV files, or else ``.npz`` files.
    """
    if path == "-":
        raise ValueError("--dask reads files; standard input ('-') is read in "
                         "memory: leave out --dask, or write the table to a file")
    if os.path.isdir(path):
        files, _ = directory_tables(path)
        if not files:
            raise ValueError(f"{path}: the directory holds no *.parquet, *.csv "
                             "or *.npz file")
    elif glob.has_magic(path):
        files = sorted(f for f in glob.glob(path) if os.path.isfile(f))
        if not files:
            raise ValueError(f"{path}: no file matches")
    elif not os.path.exists(path):
        raise FileNotFoundError(2, "No such file or directory", path)
    else:
        files = [path]
    kinds = {file_kind(f) for f in files}
    if None in kinds:  # the format named in the message of table_format
        table_format(next(f for f in files if file_kind(f) is None))
    if len(kinds) > 1:
        raise ValueError(f"{path}: matches files of several kinds "
                         f"({', '.join(sorted(kinds))}); name one kind")
    return files, kinds.pop()


#: Entries of a chunk of Parquet rows (:meth:`LazyTable.parquet_rows`): a
#: file's row groups are gathered into chunks of at most 256 MiB of float64
#: (one row group may be more).
CHUNK_ENTRIES = 2**25


def read_parquet_chunk(path, row_groups, names, text, rows):
    """The float64 rows of ``row_groups`` of the Parquet file ``path``,
    columns ``names``: the chunk is allocated once and filled by slices of
    :data:`SLICE_ENTRIES` (some columns of one row group, read by Arrow,
    cast to float64, missing values as NaN, copied in), so that a read holds
    the chunk and one slice, not the Arrow table, the pandas frame and its
    float64 copy beside it (review 69 F2: ~6 chunks). ``text``: columns
    stored as text that hold numbers. Module-level, for distributed
    workers."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out = np.empty((rows, len(names)))
    source = pq.ParquetFile(path, pre_buffer=False, buffer_size=2**20)
    start = 0
    for group in row_groups:
        n = source.metadata.row_group(group).num_rows
        width = max(1, SLICE_ENTRIES // max(1, n))
        for first in range(0, len(names), width):
            chosen = list(names[first:first + width])
            table = source.read_row_group(group, columns=chosen, use_threads=False)
            for j, name in enumerate(chosen, first):
                column = table.column(name)
                try:
                    if name in text:  # numbers written as text, as pandas reads them
                        values = column.to_pandas().astype(np.float64).to_numpy()
                    else:  # rounded as in memory: Arrow's safe cast refused
                        # integers beyond 2**53, quoting them (review 81 F1)
                        values = pc.cast(column, pa.float64(), safe=False).to_numpy(
                            zero_copy_only=False)
                except (ValueError, TypeError, pa.ArrowException):  # they quote cells
                    raise _NotANumber("a cell of a chosen column is not a "
                                      "number") from None
                out[start:start + n, j] = values
            del table
        start += n
    return out


def _check_schema(path, schema, names, text, first, hint):
    """Refuse the Parquet file ``path`` (its Arrow ``schema``) where it lacks
    one of the chosen columns ``names`` or stores one with a type whose
    values are not numbers, as :class:`LazyMatrix`'s check of the first file
    (``first``: its name and schema) would: numbers are integers, floats,
    booleans, decimals and the null type (a column with no value, as
    :func:`~sklearn_dppca._cli_io.as_numbers` reads it); another type only
    in the columns ``text``, which the first file stores as objects that
    are numbers in its first rows, and only where it is the first file's
    type (a cell that is not a number is then refused as there, when it is
    read). Nothing but the footer is read: no cell is looked at."""
    import pandas as pd
    import pyarrow as pa

    stored = dict(zip(schema.names, schema.types))
    missing = [c for c in names if c not in stored]
    if missing:
        raise ValueError(f"{path} has no column(s) {quote_names(missing)}, which "
                         f"the first file, {first[0]}, has: every file needs the "
                         "chosen columns")
    types, firsts = pa.types, dict(zip(first[1].names, first[1].types))

    def number(c):
        kind = stored[c]
        return (types.is_integer(kind) or types.is_floating(kind)
                or types.is_boolean(kind) or types.is_decimal(kind)
                or types.is_null(kind) or (c in text and kind == firsts.get(c)))

    if not all(number(c) for c in names):  # refused in choose_columns' words
        choose_columns(pd.DataFrame({c: pd.Series(dtype=np.float64 if number(c)
                                                  else object) for c in names}),
                       list(names), path, hint)


#: Rows of the first file read to tell whether a column Dask types as
#: objects holds numbers (:meth:`LazyTable.peek`).
PEEK_ROWS = 10_000


class LazyTable:
    """The table of DATA, read lazily with Dask: nothing read but the files'
    schemas (and, for CSV, their first rows, to infer the dtypes).

    Attributes
    ----------
    frame : dask.dataframe.DataFrame
        Every column, with the dtypes Dask inferred: for CSV, from the first
        256 kB of the first file.
    n_files : int
    kind : {"csv", "parquet"}
    """

    def __init__(self, path, numeric_header=False, dialect=None, sniff=False):
        import dask.dataframe as dd

        files, kind = table_files(path)
        compression = {_COMPRESSIONS.get(os.path.splitext(f.lower())[1])
                       for f in files}
        if kind == "csv" and len(compression) > 1:
            raise ValueError(f"{path}: matches CSV files compressed in different "
                             "ways (or not): name files of one kind")
        self._files, self.kind = files, kind
        #: A CSV's ``sep`` and ``decimal`` (``--sep``, ``--decimal``).
        self.dialect = dict(dialect or DEFAULT_DIALECT)
        self._csv = dict(compression=compression.pop(), **self.dialect)
        if kind == "csv" and sniff:  # the first file's header line only
            names = header_names(files[0], compression=self._csv["compression"],
                                 sep=self.dialect["sep"])
            if names is not None:
                refuse_other_separator(
                    names, path if len(files) == 1 else files[0],
                    self.dialect["sep"])
        # a compressed file cannot be split into blocks
        self._csv["blocksize"] = (None if self._csv["compression"] or kind != "csv"
                                  else csv_blocksize(files))
        try:
            if self._csv["blocksize"] is not None and kind == "csv":
                for f in files:  # before Dask reads a row (review 97 F2)
                    _whole_lines(f, self.dialect["sep"])
            with private_computation():  # Dask reads the first rows here
                frame = (dd.read_parquet(files) if kind == "parquet"
                         else dd.read_csv(files, **self._csv))
        except (OSError, ValueError) as exc:
            if isinstance(exc, (FileNotFoundError, _CutRefusal)):
                raise
            if kind == "csv" and _empty_data(exc):  # the header is the first file's
                raise ValueError(f"{path if len(files) == 1 else files[0]}: the "
                                 "file is empty (no header, no rows)") from None
            if kind == "csv":
                raise csv_refusal(path, exc) from None
            raise ValueError(f"{path}: cannot read Parquet: {one_line(exc)}") from exc
        if len(frame.columns) == 0:
            raise ValueError(f"{path}: the table has no columns")
        if not all(isinstance(c, str) for c in frame.columns):
            frame.columns = [str(c) for c in frame.columns]
        if kind == "csv" and not numeric_header:
            check_header(frame.columns, path)
        if kind == "csv":
            self._same_headers()
            # every column's name, as pandas read the header: given to each
            # block's read, so that Dask never writes its own header bytes
            # before a block (review 101 F2, mend 105)
            self._csv.update(names=list(frame.columns), header=0)
        self.frame, self.n_files = frame, len(files)
        #: Whether Dask cuts the files into blocks of bytes (uncompressed
        #: CSV): the number of partitions then depends on how the values are
        #: written (``0.5`` or a longer decimal), not on the files alone.
        self.cut_by_bytes = kind == "csv" and self._csv["blocksize"] is not None

    def _same_headers(self):
        """Refuse a CSV table whose first row has more fields than its header
        (read by position here, with the first as an index in memory), and a
        CSV file whose header (its first line: public, the
        schema) is not the first file's: Dask reads every file's columns
        by position under the first file's names, so ``y,x`` after ``x,y``
        would be read swapped, silently (review 83 F1). The file is named;
        its header is not quoted (in a file without one it is a row)."""
        compression = self._csv["compression"]
        # the first row's fields too, as pandas judges them in memory
        first = _csv_header(self._files[0], compression, rows=1,
                            dialect=self.dialect)
        for f in self._files[1:]:
            names = _csv_header(f, compression, dialect=self.dialect)
            if names != first:
                how = (" (the same names in another order)"
                       if sorted(names) == sorted(first) else "")
                raise ValueError(
                    f"{f}: its header line is not that of the first file, "
                    f"{self._files[0]}{how}: every CSV file needs the same "
                    "column names in the same order (each file's columns are "
                    "read by position)")

    def peek(self, names):
        """The first :data:`PEEK_ROWS` rows of the columns ``names`` of the
        first file (CSV: as text), as a pandas frame."""
        if self.kind == "parquet":
            with private_computation():
                return self.frame[names].head(PEEK_ROWS, npartitions=1)
        import pandas as pd

        try:
            with private_computation():
                return pd.read_csv(self._files[0], usecols=names, dtype=object,
                                   nrows=PEEK_ROWS,
                                   compression=self._csv["compression"],
                                   **self.dialect)
        except UnicodeDecodeError as exc:
            raise csv_refusal(self._files[0], exc) from None

    def parquet_rows(self, names, text=(), hint=""):
        """The columns ``names`` of Parquet files as a Dask array of float64
        rows read by :func:`read_parquet_chunk`: one chunk per file, or per
        run of its row groups where a file is larger than
        :data:`CHUNK_ENTRIES` (a row group is never split). Public: the row
        counts and row groups of the footers, the columns. ``text``: the
        columns stored as text that hold numbers (parsed as float64).

        Every file's schema (its footer) is checked first, before any pass
        and any charge (review 83 F2, F3): Dask typed the columns from the
        first file's, so a later file without a chosen column, or storing
        it with a type that is not a number, is refused, named, as the first
        file's non-numeric columns are (``hint``: what to do); a column of
        another type is read only where the first file stores it so and it
        is text that holds numbers there (``text``)."""
        import dask
        import dask.array as da
        import pyarrow.parquet as pq

        text, d, parts, first = tuple(text), len(names), [], None
        for f in self._files:
            try:
                footer = pq.ParquetFile(f)
            except (OSError, ValueError) as exc:  # named (review 87 F6)
                raise ValueError(f"{f}: cannot read it as Parquet: "
                                 f"{one_line(exc)}") from None
            first = first or (f, footer.schema_arrow)  # the first file's
            _check_schema(f, footer.schema_arrow, names, text, first, hint)
            groups = [footer.metadata.row_group(i).num_rows
                      for i in range(footer.metadata.num_row_groups)]
            run, rows = [], 0
            for i, n in enumerate(groups):
                if run and (rows + n) * d > CHUNK_ENTRIES:
                    parts.append((f, tuple(run), rows))
                    run, rows = [], 0
                run.append(i)
                rows += n
            parts.append((f, tuple(run), rows))
        token = dask.base.tokenize(self._files, names, text)
        return da.concatenate([da.from_delayed(
            dask.delayed(read_parquet_chunk, pure=True)(
                os.path.abspath(f), groups, tuple(names), text, rows,
                dask_key_name=f"{PARQUET_READ}-{token}-{i}"),
            shape=(rows, d), dtype=np.float64) for i, (f, groups, rows)
            in enumerate(parts)], axis=0)

    def select(self, names):
        """The columns ``names`` as a lazy float64 frame. A CSV file is read
        again with only those columns, each parsed as float64: with the
        dtypes Dask inferred from its first rows, a later value of a wider
        type (``1.5`` in a column of integers, an empty cell, an integer
        beyond 64 bits) would fail the read of its partition, a refusal
        that tells a row's value apart; a column not chosen is not parsed.
        Each block is parsed by :func:`_read_csv_block`, so that a cell that
        is not a number fails its task with a constant message.

        Every column is named (``names``, the first file's header as pandas
        read it; ``header=0`` skips each file's header line): Dask then
        reads a later block as rows only. It otherwise put its header,
        the bytes before the first ``b"\\n"``, before a block that did not
        start with them: a row ``0,1.5`` under pandas' header ``0,1`` that
        started a block was taken for the header (refused) and a row
        ``0,1`` dropped, both only there; a blank first line, which pandas
        skips, was that header, and every later block's first row was taken
        for it (refused above one block, read below)."""
        if self.kind == "parquet":
            return self.frame[names].astype(np.float64)
        from dask.dataframe.io.csv import read_pandas

        return read_pandas(_read_csv_block, self._files, usecols=names,
                           dtype=dict.fromkeys(names, np.float64), **self._csv)[names]

    def file_rows(self, names):
        """The rows of each file, where Dask reads each as one partition (a
        compressed CSV file), counted by pieces of about
        :data:`~sklearn_dppca._dask_memory.CSV_BLOCK` float64 entries
        (:func:`_csv_file_rows`); else ``True``: Dask counts them (blocks
        of bytes, Parquet footers: :func:`partition_lengths`)."""
        if self.kind != "csv" or self.cut_by_bytes:
            return True
        import dask

        rows = max(1, CSV_BLOCK // 8 // len(names))
        kwargs = dict(usecols=names, dtype=dict.fromkeys(names, np.float64),
                      **{k: v for k, v in self._csv.items() if k != "blocksize"})
        return tuple(dask.compute(*[dask.delayed(_csv_file_rows, pure=True)(
            os.path.abspath(f), rows, kwargs) for f in self._files]))

    def text_columns(self, names):
        """The CSV columns of ``names`` with a cell that is not a number
        (:func:`~sklearn_dppca._cli_io.as_numbers`): one more read of the
        files, as text, after :meth:`select`'s read stopped on such a cell. Each
        block is parsed by :func:`_read_csv_block` (constant messages where a
        worker logs a failed task); the caller reads it through
        :func:`_reading`, whose refusals name no row and quote no byte
        (review 97 F3)."""
        import pandas as pd
        from dask.dataframe.io.csv import read_pandas

        dialect = self.dialect

        def text(part):  # as objects (Dask may have made them strings)
            numbers = as_numbers(part.astype(object), names, csv=True,
                                 dialect=dialect)
            return pd.DataFrame([[numbers[c].dtype != np.float64 for c in names]],
                                columns=names)

        with private_computation():
            frame = read_pandas(_read_csv_block, self._files, usecols=names,
                                dtype=object, **self._csv)
            flags = frame[names].map_partitions(
                text, meta=pd.DataFrame({c: pd.Series(dtype=bool) for c in names})
            ).compute()
        return [c for c in names if flags[c].any()]


class LazyMatrix:
    """The chosen columns of a Dask frame as a Dask array of float64 rows.

    Attributes
    ----------
    X : dask.array.Array of shape (n_rows, n_columns)
        One chunk per non-empty partition, every column in it; missing values
        filled (``fill``). Non-finite values are refused as each chunk is
        read where ``check`` asks: ``"infinite"``, infinite ones (which
        clipping into ``--bounds`` would hide from the fit's own check);
        ``"all"``, missing ones too (no fit reads them: ``transform``).
    names : list of str
    partitions : int
        How many chunks ``X`` has: a function of the files (their number and
        row groups), not of the rows' values.
    """

    def __init__(self, table, columns, path, hint, fill=None,
                 missing_hint="drop or impute them first", check=None):
        import dask.array as da
        from pandas.api.types import is_object_dtype, is_string_dtype

        self.path, self.missing_hint = path, missing_hint
        frame, csv = table.frame, table.kind == "csv"
        chosen = (list(frame.columns) if columns is None
                  else check_chosen(columns, list(frame.columns), path))
        # objects or text that are numbers in the first rows (integers beyond
        # 64 bits, which Dask may type as text; Parquet's null type) are
        # numbers, as in memory (as_numbers)
        objects = [c for c in chosen if is_object_dtype(frame.dtypes[c])
                   or is_string_dtype(frame.dtypes[c])]
        if objects:
            head = as_numbers(table.peek(objects), objects, csv, table.dialect)
            frame = frame.astype({c: np.float64 for c in objects
                                  if head[c].dtype == np.float64})
        self.names = choose_columns(frame, chosen, path, hint, csv)
        if callable(fill):  # public values that depend on the columns chosen
            fill = fill(self.names)
        self.fill = fill
        # int, bool and pandas' extension dtypes to float64, missing values
        # to NaN, as to_numpy(dtype=float64) does in memory
        frame = table.select(self.names)
        if table.kind == "parquet":  # read by slices into each chunk
            frame = table.parquet_rows(self.names, [
                c for c in objects if c in self.names and head[c].dtype == np.float64],
                hint)
        # The rows of each partition, from the Parquet footers where Dask
        # has them (else Dask counts them, a read of the chosen columns):
        # their sum is n, a public value (the fit states it).
        try:
            raw = frame if table.kind == "parquet" else _reading(
                path, lambda: frame.to_dask_array(
                    lengths=table.file_rows(self.names) if csv
                    else partition_lengths(frame)))
        except _NotANumber:  # text past the first rows: named as in memory
            # (all of them where only pandas' parser refuses the cell)
            text = _reading(path, lambda: table.text_columns(self.names)
                            ) or self.names
            choose_columns(frame.astype(dict.fromkeys(text, object)),
                           self.names, path, hint, csv)  # raises, naming them
        keep = [i for i, n in enumerate(raw.chunks[0]) if n]
        if not keep:
            raise ValueError(f"{path}: the table has a header but no rows")
        if len(keep) < len(raw.chunks[0]):  # an empty file: no chunk of 0 rows
            raw = da.concatenate([raw.blocks[i] for i in keep], axis=0)
        n_rows = int(sum(raw.chunks[0]))
        if table.cut_by_bytes:
            # blocks of bytes: their number is not public, and the memory
            # model reads the chunks' count; chunks of a public number of
            # rows (about 32 MB each) instead
            raw = raw.rechunk({0: max(1, 2**22 // raw.shape[1])})
        raw = raw.rechunk({1: -1})
        if csv:  # named for the memory plan (read_bytes): a block, or a
            # whole (compressed) file as one chunk
            read = CSV_READ if table.cut_by_bytes else CSV_FILE_READ
            raw = raw.map_blocks(np.asarray, dtype=np.float64,
                                 name=f"{read}-{raw.name}")
        self.raw = raw
        X = self.raw
        if fill is not None or check:
            X = X.map_blocks(_checked, dtype=np.float64, fill=fill,
                             keep_nan=check != "all")
        self.X = X
        self.n_rows = n_rows
        # public where the files fix it; not where it counts bytes of values
        self.partitions = None if table.cut_by_bytes else len(keep)
        self._da = da

    def name_bad_values(self, exc):
        """After ``exc`` from a pass over ``X``: if it is the finiteness check's,
        the in-memory message naming the columns (one more pass to find
        them); otherwise nothing."""
        if not str(exc).startswith(_BAD_VALUES):
            return
        import dask

        da = self._da
        with_nan, infinite = dask.compute(da.isnan(self.raw).any(axis=0),
                                          da.isinf(self.raw).any(axis=0))
        refuse_missing([c for c, bad in zip(self.names, with_nan) if bad],
                       self.fill, self.path, self.missing_hint)
        refuse_infinite([c for c, bad in zip(self.names, infinite) if bad],
                        self.path)


class LazySparse:
    """The chosen columns of ``.npz`` files (sparse matrices, as
    :func:`scipy.sparse.save_npz` writes them: one per row block, with the
    same columns) as a Dask array of float64 CSR chunks, one per file.

    Only the files' headers are read here (shape, format, the values'
    type): each file is loaded when a pass reads its chunk, with
    :func:`~sklearn_dppca._cli_io.load_sparse`, and never densified. The
    attributes and :meth:`name_bad_values` are :class:`LazyMatrix`'s; the
    columns are named ``x0``, ``x1``, ... as in memory.
    """

    def __init__(self, files, columns, path, fill=None,
                 missing_hint="drop or impute them first", check=None):
        import dask
        import dask.array as da
        from scipy import sparse

        self.path, self.missing_hint = path, missing_hint
        shapes = [_npz_header(f) for f in files]
        widths = {f: shape[1] for f, shape in zip(files, shapes)}
        first = files[0]
        other = next((f for f in files if widths[f] != widths[first]), None)
        if other is not None:
            raise ValueError(f"{path}: the sparse matrices have different numbers "
                             f"of columns ({first}: {widths[first]}, {other}: "
                             f"{widths[other]}); every file is a block of rows "
                             "with the same columns")
        self.names = sparse_column_names(shapes[0][1])
        self.chosen = None
        if columns is not None:
            self.names = check_chosen(columns, self.names, path)
            self.chosen = chosen_indices(self.names)
        if callable(fill):  # public values that depend on the columns chosen
            fill = fill(self.names)
        self.fill = fill
        self.files = [f for f, shape in zip(files, shapes) if shape[0]]
        if not self.files:
            raise ValueError(f"{path}: the sparse matrices have no rows")
        rows = [shape[0] for shape in shapes if shape[0]]
        width = len(self.names)
        meta = sparse.csr_matrix((0, width))
        self.X = da.concatenate([
            da.from_delayed(dask.delayed(_sparse_part, pure=True)(
                # absolute: a worker's directory may not be ours
                os.path.abspath(f), self.chosen, fill, check), shape=(n, width),
                dtype=np.float64, meta=meta)
            for f, n in zip(self.files, rows)], axis=0)
        self.n_rows = int(sum(rows))
        self.partitions = len(self.files)
        self._dask = dask

    def name_bad_values(self, exc):
        """As :meth:`LazyMatrix.name_bad_values`: the columns whose stored
        values are missing or infinite (one more read of the files)."""
        if not str(exc).startswith(_BAD_VALUES):
            return
        found = self._dask.compute(*[
            self._dask.delayed(_sparse_bad)(os.path.abspath(f), self.chosen)
            for f in self.files])
        with_nan = np.logical_or.reduce([nan for nan, _ in found])
        infinite = np.logical_or.reduce([inf for _, inf in found])
        refuse_missing([c for c, bad in zip(self.names, with_nan) if bad],
                       self.fill, self.path, self.missing_hint)
        refuse_infinite([c for c, bad in zip(self.names, infinite) if bad],
                        self.path)


def _npz_header(path):
    """``(rows, columns)`` of the sparse matrix in ``path``, from its
    header, with :func:`~sklearn_dppca._cli_io.load_sparse`'s refusals of
    what is not a real sparse matrix (its values' type from the header of
    their array, or where that header is of another version, the array)."""
    try:
        with np.load(path, allow_pickle=False) as saved:
            kind = saved["format"].item()
            kind = kind.decode("ascii") if isinstance(kind, bytes) else str(kind)
            shape = tuple(int(s) for s in saved["shape"])
            if kind not in ("csr", "csc", "coo", "bsr", "dia") or len(shape) != 2:
                raise ValueError(f"format {kind!r}, shape {shape}")
            with saved.zip.open("data.npy") as stream:
                version = np.lib.format.read_magic(stream)
                read = {(1, 0): np.lib.format.read_array_header_1_0,
                        (2, 0): np.lib.format.read_array_header_2_0}.get(version)
                dtype = read(stream)[2] if read else saved["data"].dtype
    except FileNotFoundError:
        raise
    except (OSError, ValueError, KeyError) as exc:
        raise unreadable_sparse(path, exc) from None
    check_sparse(path, shape, dtype, rows=False)  # a file of no rows is skipped
    return shape


def _sparse_part(path, chosen, fill, check):
    """One file's chunk, as :func:`_checked` makes a table's: missing values
    filled, no infinite value, nor (``check="all"``) a missing one; only
    stored values can be either. Module-level, for distributed workers."""
    X = load_sparse(path, chosen)
    if fill is not None:
        fill_sparse(X, fill)
    elif check == "all" and np.isnan(X.data).any():
        raise ValueError("Input X contains NaN.")
    if np.isinf(X.data).any():
        raise ValueError("Input X contains infinity.")
    return X


def _sparse_bad(path, chosen):
    """Which chosen columns of one file store a NaN, an infinite value."""
    X = load_sparse(path, chosen)
    return bad_sparse_columns(X, np.isnan), bad_sparse_columns(X, np.isinf)


def csv_blocksize(files):
    """The ``blocksize`` handed to Dask for the uncompressed CSV ``files``,
    so that it cuts each into blocks of at most :data:`CSV_BLOCK` bytes
    (then extended to the next line break), which the memory plan counts:
    Dask divides a file by the block size rounded down (``read_bytes``:
    ``size / (size // blocksize)``), so that :data:`CSV_BLOCK` itself cut a
    file of 1.99 times it as one block, and one of 2.5 times it in two of
    1.25, and a pass over single digits held 1.4–1.5 times the plan (mend
    108). The largest size under ``size / ceil(size / CSV_BLOCK)`` of each
    larger file, one for all the files (Dask takes one): blocks of more
    than half :data:`CSV_BLOCK`. Public: the files' sizes."""
    block = CSV_BLOCK
    for size in map(os.path.getsize, files):
        if size > CSV_BLOCK:
            block = min(block, size // -(-size // CSV_BLOCK))
    return block


class _CutRefusal(ValueError):
    """The refusal of a CSV file that Dask cannot cut into blocks of bytes
    (:func:`_whole_lines`), in its final words."""


def _whole_lines(path, sep=","):
    """Refuse the uncompressed CSV file ``path``, which Dask cuts into blocks
    at line breaks without knowing quotes, where a quoted cell holds a line
    break (:func:`~sklearn_dppca._csv_quotes.scan`, pandas' reading): a block
    starting just past it failed, one starting elsewhere read, so that the
    read told apart where the cell lay (review 97 F2). Refused wherever it
    lies, naming the file only: the outcome depends on that cell's content
    alone, a row's validity, as a missing value's. A quote never closed is
    refused in the in-memory words (the file cannot be read at all). So is,
    in the same pass and words naming the file, a line ended by a lone
    carriage return (outside quotes): Dask cuts at ``b"\\n"`` only, so its
    header (the bytes up to the first) held the rows before it, read once
    more per block, and a file of such lines was one block, beyond the
    memory plan (review 101 F1). ``sep``: the character between cells
    (after which a quote opens a quoted cell)."""
    import pandas as pd

    from ._csv_quotes import scan_lines

    broken, unterminated, lone_cr = scan_lines(path, sep=sep)
    if unterminated:
        raise _CutRefusal(str(csv_refusal(path, pd.errors.ParserError(
            "Error tokenizing data. C error: EOF inside string starting at "
            "row 0"))))
    if broken:
        raise _CutRefusal(
            f"{path}: a quoted cell holds a line break, which --dask cannot "
            "read in blocks (its blocks are cut at line breaks): read it "
            "without --dask, or save it as Parquet")
    if lone_cr:
        raise _CutRefusal(
            f"{path}: a line ends in a lone carriage return (CR, not CR LF), "
            "which --dask cannot read in blocks (its blocks are cut at LF): "
            "write the file with LF or CR LF line endings, read it without "
            "--dask, or save it as Parquet")


class _NotANumber(ValueError):
    """A CSV cell of a chosen column that does not read as a float."""


def _read_csv_block(*args, **kwargs):
    """pandas' ``read_csv`` of a block of CSV files, a cell that does not
    read as a float raised as :class:`_NotANumber`, whose text is constant:
    a ``distributed`` worker logs a failed task's exception, and pandas'
    message quotes the cell (module-level, for the workers)."""
    import pandas as pd

    return _parsed(lambda: pd.read_csv(*args, **kwargs))


def _csv_file_rows(path, rows, kwargs):
    """The rows of the whole CSV file ``path`` as :func:`_read_csv_block`
    reads them (``kwargs``), counted ``rows`` at a time, so that the count
    before the plan holds a piece of a file that Dask reads as one chunk
    (a compressed one), not the whole: 954 MiB on a 20 MB gz file of
    134 215 x 500 digits (mend 109). Module-level, for the workers."""
    import pandas as pd

    def count():
        with pd.read_csv(path, chunksize=rows, **kwargs) as reader:
            return sum(len(part) for part in reader)
    return _parsed(count)


def _parsed(read):
    """``read()``, a parse of CSV rows, with :func:`_read_csv_block`'s
    constant refusals."""
    try:
        return read()
    except ValueError as exc:
        if isinstance(exc, UnicodeDecodeError):  # it quotes a byte of a cell
            raise ValueError(f"a block of the files {NOT_UTF8}") from None
        if _parse_error(exc):  # it names the line: a worker would log it
            raise csv_refusal("a block of the files", exc) from None
        if _quotes_a_cell(exc):
            raise _NotANumber("a cell of a chosen column is not a number") from None
        raise


def _quotes_a_cell(exc):
    """Whether pandas' ``exc`` is its refusal of a cell that does not read
    as a number (its message quotes the cell)."""
    return "convert" in str(exc) or "Unable to parse" in str(exc)


def _reading(path, read):
    """``read()``, the first read of the files: their errors in one line,
    naming DATA, and never quoting a cell (:class:`_NotANumber` where one
    does not read as a number: pandas' message quotes it). No warning of
    pandas' or Dask's about the rows leaves it."""
    try:
        with private_computation():
            return read()
    except (OSError, ValueError) as exc:
        if isinstance(exc, (FileNotFoundError, _NotANumber)):
            raise
        if _quotes_a_cell(exc):
            raise _NotANumber() from None
        if isinstance(exc, UnicodeDecodeError) or _parse_error(exc):
            raise csv_refusal(path, exc) from None  # no byte, no line named
        raise ValueError(f"{path}: cannot read the table: {one_line(exc)}") from None


def _csv_header(path, compression, rows=0, dialect=None):
    """The column names of the CSV file ``path``, from its first line (as
    pandas reads a header), with its refusals in one line naming it; with
    ``rows=1`` its first row is read too, and refused where it has more
    fields than the header (:func:`~sklearn_dppca._cli_io.wider_rows`)."""
    import pandas as pd

    try:
        with private_computation():
            head = pd.read_csv(path, nrows=rows, compression=compression,
                               **(dialect or DEFAULT_DIALECT))
    except FileNotFoundError:
        raise
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: the file is empty (no header, no rows)") from None
    except (OSError, ValueError) as exc:  # pandas' ParserError, not UTF-8, ...
        raise csv_refusal(path, exc) from None
    if not isinstance(head.index, pd.RangeIndex):  # the first field an index
        raise ValueError(wider_rows(path))
    return [str(c) for c in head.columns]


def _empty_data(exc):
    """Whether ``exc`` is pandas' refusal of a CSV file with no header (an
    empty file), which Dask re-raises with its own words around pandas'."""
    import pandas as pd

    return isinstance(exc, pd.errors.EmptyDataError)


def _parse_error(exc):
    """Whether ``exc`` is pandas' refusal of a CSV it cannot tokenize (its
    message names the line)."""
    import pandas as pd

    return isinstance(exc, pd.errors.ParserError)


def _checked(block, fill, keep_nan):
    """One chunk: missing values filled (``fill`` not None) and no infinite
    value, nor (unless ``keep_nan``) a missing one; module-level, so that
    distributed workers can unpickle it."""
    if fill is not None:
        block = fill_missing(block, fill)
    elif not keep_nan and np.isnan(block).any():
        raise ValueError("Input X contains NaN.")
    if np.isinf(block).any():
        raise ValueError("Input X contains infinity.")
    return block


def write_lazy_table(Z, names, path, out=None, window=8):
    """Write the Dask array ``Z`` as CSV or Parquet, chunk by chunk in order.

    ``window`` chunks are computed at a time (in parallel), then written;
    no more than that sits in this process. A CSV is ``,``-separated, or
    tab-separated where named ``*.tsv`` (``_cli_io.write_table``).
    ``path="-"``: CSV on ``out``
    (standard output by default). A file is written under a temporary name
    and renamed, so a failure leaves no partial file.
    """
    import dask
    import pandas as pd

    from ._cli_io import _atomic_write, _check_parquet_engine

    blocks = list(Z.to_delayed().ravel())
    names = list(names)

    def frames():
        for start in range(0, len(blocks), window):
            for values in dask.compute(*blocks[start:start + window]):
                yield pd.DataFrame(values, columns=names)

    if path == "-":
        for i, frame in enumerate(frames()):
            frame.to_csv(out or sys.stdout, index=False, header=i == 0)
        return
    kind = table_format(path)
    suffix = os.path.splitext(str(path).lower())[1]
    if kind == "parquet":
        _check_parquet_engine()
    elif suffix == ".zip":
        raise ValueError(f"{path}: --dask writes CSV by appending chunks, which "
                         "a zip archive cannot take: name it *.csv, *.csv.gz, "
                         "... or *.parquet")

    def write(tmp):
        if kind == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            writer = None
            try:
                for frame in frames():
                    table = pa.Table.from_pandas(frame, preserve_index=False)
                    if writer is None:
                        writer = pq.ParquetWriter(tmp, table.schema)
                    writer.write_table(table)
            finally:
                if writer is not None:
                    writer.close()
            return
        # each chunk appended: a compressed file of several members, which
        # gzip, bz2, xz and zstd readers all read as one
        for i, frame in enumerate(frames()):
            frame.to_csv(tmp, index=False, header=i == 0, mode="w" if i == 0
                         else "a", compression=_COMPRESSIONS.get(suffix),
                         sep="\t" if is_tsv(path) else ",")

    _atomic_write(path, write)

