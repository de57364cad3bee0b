"""Input and output of the command line: data tables (the released model's
files: :mod:`sklearn_dppca._cli_model`).

Tables are read with pandas: CSV (optionally compressed, or ``-`` for standard
input) and Parquet (with pyarrow or fastparquet installed). Every problem with
the user's files is raised as a :class:`ValueError` with a one-line message,
which ``dppca`` prints as ``dppca: error: <message>``.
"""

import glob
import importlib.util
import json
import os
import re
import sys
import tempfile
from importlib.metadata import PackageNotFoundError, distribution
from urllib.parse import urlparse
from urllib.request import url2pathname

import numpy as np

from ._csv_dialect import (
    DEFAULT_DIALECT,
    Rejoined,
    header_names,
    is_tsv,
    refuse_other_separator,
)
from ._warning_rules import private_computation

_PARQUET_SUFFIXES = (".parquet", ".pq")
#: Modules pandas can read and write Parquet with, any one of them.
_PARQUET_ENGINES = ("pyarrow", "fastparquet")
#: Compressed CSV by suffix, as pandas infers it.
_COMPRESSIONS = {
    ".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zip": "zip", ".zst": "zstd"
}


def one_line(text):
    """``text`` with every run of whitespace (newlines included) made one space."""
    return " ".join(str(text).split())


def quote_names(names, limit=8):
    shown = ", ".join(repr(str(name)) for name in list(names)[:limit])
    more = len(names) - limit
    return shown + (f" and {more} more" if more > 0 else "")


#: How to get what ``dppca fit`` and ``transform`` need beyond the core package,
#: from a package index.
CLI_EXTRA = 'pip install "sklearn_dppca[cli]"'


def cli_extra_command(extra="cli"):
    """The command that adds the ``extra`` (``cli``, ``dask``) to *this*
    installation.

    Installed from a directory (a checkout: ``pip install .``, or ``-e .``),
    the extra is installed from that same directory, as an editable install
    if it was one: the package's name alone would be looked up on an index,
    which may not have it. Otherwise (installed from an index or a wheel, or
    not installed), :data:`CLI_EXTRA` (naming ``extra``).
    """
    try:
        text = distribution("sklearn_dppca").read_text("direct_url.json")
        origin = json.loads(text) if text else {}
    except (PackageNotFoundError, ValueError):
        origin = {}
    url = origin.get("url", "") if isinstance(origin, dict) else ""
    dir_info = origin.get("dir_info") if url.startswith("file:") else None
    if not isinstance(dir_info, dict):
        return CLI_EXTRA.replace("[cli]", f"[{extra}]")
    editable = "-e " if dir_info.get("editable") else ""
    return f'pip install {editable}"{url2pathname(urlparse(url).path)}[{extra}]"'


def require_pandas(command):
    """Raise a one-line :class:`ImportError` naming the extra if pandas is missing.

    Called first by the commands that read tables, so that a core-only
    install (``pip install sklearn_dppca``) says what to install instead of
    ``No module named 'pandas'``.
    """
    try:
        import pandas  # noqa: F401
    except ImportError:
        raise ImportError(
            f"'dppca {command}' reads tables with pandas, which is not "
            f"installed: {cli_extra_command()}"
        ) from None


# --------------------------------------------------------------- tables
def table_format(path):
    """``"csv"`` or ``"parquet"``, from the file name (``-`` is CSV)."""
    if path == "-":
        return "csv"
    name = os.path.basename(str(path)).lower()
    if name.endswith(_PARQUET_SUFFIXES):
        return "parquet"
    if any(name.endswith(e + c) for e in (".csv", ".tsv")
           for c in ("", *_COMPRESSIONS)):
        return "csv"  # *.tsv: tabs where --sep is not given (_csv_dialect)
    raise ValueError(
        f"{path}: unknown table format; name the file *.csv or *.tsv (or "
        "*.csv.gz, ...) or *.parquet"
    )


def _check_parquet_engine():
    if not any(importlib.util.find_spec(m) for m in _PARQUET_ENGINES):
        raise ValueError(
            "reading or writing Parquet needs pyarrow: pip install pyarrow"
        )


def read_table(path, numeric_header=False, dialect=None, sniff=False):
    """Read a CSV or Parquet file into a DataFrame; one-line errors.

    Parameters
    ----------
    path : str
        File name, or ``-`` for CSV on standard input.
    numeric_header : bool, default=False
        Whether a CSV's first line is its header even where every name in it
        is a number (:func:`check_header` otherwise refuses it).
    dialect : dict, default=None
        A CSV's ``sep`` and ``decimal`` (:data:`DEFAULT_DIALECT`).
    sniff : bool, default=False
        Whether to refuse, before any row is read, a CSV whose header looks
        separated by another character than ``,``
        (:func:`refuse_other_separator`): ``--sep`` was not given.

    Returns
    -------
    frame : pandas.DataFrame
        At least one column and one row; column names are strings.
    """
    import pandas as pd

    kind = table_format(path)
    if kind == "parquet":
        _check_parquet_engine()
        try:
            with private_computation():  # no warning of pandas' about the rows
                frame = pd.read_parquet(path)
        except (OSError, ValueError) as exc:
            if isinstance(exc, FileNotFoundError):
                raise
            raise ValueError(f"{path}: cannot read Parquet: {one_line(exc)}") from exc
    else:
        source = sys.stdin if path == "-" else path
        if sniff:  # the header line only: standard input's, read again
            if path == "-":
                first = sys.stdin.readline()
                source = Rejoined(first, sys.stdin)
            sep = (dialect or DEFAULT_DIALECT)["sep"]
            names = (header_names(first, line=True, sep=sep) if path == "-"
                     else header_names(path, sep=sep))
            if names is not None:
                refuse_other_separator(names, path, sep)
        try:
            # pandas' DtypeWarning names a column holding text in a row
            # past its first chunk, a column perhaps not even chosen
            with private_computation():
                frame = pd.read_csv(source, **(dialect or DEFAULT_DIALECT))
        except pd.errors.EmptyDataError:
            raise ValueError(
                f"{path}: the file is empty (no header, no rows)"
            ) from None
        except (pd.errors.ParserError, UnicodeDecodeError) as exc:
            raise csv_refusal(path, exc) from None
    if frame.shape[1] == 0:
        raise ValueError(f"{path}: the table has no columns")
    if not isinstance(frame.index, pd.RangeIndex):
        raise ValueError(wider_rows(path))
    frame.columns = [str(c) for c in frame.columns]
    if kind != "parquet" and not numeric_header:
        check_header(frame.columns, path)
    if frame.shape[0] == 0:
        raise ValueError(f"{path}: the table has a header but no rows")
    return frame


#: A CSV that does not decode: the decoder's message quotes a byte of a cell
#: and its position, so it is replaced by this constant text.
NOT_UTF8 = "is not UTF-8 text: save the CSV as UTF-8"


def csv_refusal(path, exc):
    """The one-line error of a CSV that cannot be read (``exc``, pandas' or
    the decoder's), naming DATA; a decoding error's bytes are not quoted."""
    if isinstance(exc, UnicodeDecodeError):
        return ValueError(f"{path}: {NOT_UTF8}")
    # pandas names the line and its count of fields: which row (person) is
    # malformed is not said, as no refusal names a row
    text = re.sub(r", saw \d+", "", re.sub(r"\b(line|row) \d+", r"a \1", one_line(exc)))
    return ValueError(f"{path}: cannot parse CSV: {text}")


def wider_rows(path):
    """The refusal of a CSV whose rows have a field more than its header:
    pandas reads the first as an index, Dask by position (review 87 F5);
    the table's shape, no cell quoted."""
    return (f"{path}: its rows have more fields than its header names: give "
            "every column a name in the header")


def check_header(names, path):
    """Refuse a CSV whose first line reads as numbers (every column name, as
    pandas read it): a row of data without a header, which pandas takes for
    one. That row would leave the fit and become the model's feature names,
    written into the model that is shared (and quoted by ``transform``'s
    errors). pandas' own default names, ``0, 1, …`` in order (what
    ``DataFrame(X).to_csv()`` writes), are a header. Nothing is quoted."""
    names = list(names)
    default = [str(i) for i in range(len(names))]
    if names in (default, ["Unnamed: 0", *default[:-1]]):  # index column too
        return
    if _read_as_numbers(names).all():
        raise ValueError(
            f"{path}: the first line reads as numbers, not column names: a "
            "CSV needs a header line. Read as one, that row of data would "
            "leave the fit and become the model's feature names, which the "
            "model file shares. Add a header (for instance x0,x1,...), name "
            "the columns 0,1,... as pandas writes them, or, if that line is "
            "the header (gene IDs, years), pass --numeric-header.")


#: pandas' default missing-value markers (``NA``, ``NULL``, ``#N/A``, ...):
#: in a row of data, a missing cell.
_NA_MARKERS = frozenset({"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN",
                         "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA",
                         "NULL", "NaN", "None", "n/a", "nan", "null"})


def _read_as_numbers(names):
    """Whether each column name is a number's text (pandas marks a repeated
    name with ``.1``, ``.2``: ``1.0.1`` is ``1.0`` repeated), or a missing
    cell of a row of data: pandas' ``Unnamed: N`` for an empty one, or a
    missing-value marker. Read by pandas' own number parser, not Python's
    ``float()``, which also reads ``1_000`` and non-ASCII digits: cells
    pandas reads as text, so names of a header. One call for all names."""
    import pandas as pd

    names = pd.Series(list(names), dtype=object)
    missing = names.isin(_NA_MARKERS) | names.str.fullmatch(r"Unnamed: \d+")
    unmarked = names.str.replace(r"\.\d+$", "", regex=True)
    return (missing.to_numpy(dtype=bool)
            | pd.to_numeric(names, errors="coerce").notna().to_numpy()
            | pd.to_numeric(unmarked, errors="coerce").notna().to_numpy())


def is_sparse_file(path):
    """Whether DATA names SciPy sparse matrices (``*.npz``, as written by
    :func:`scipy.sparse.save_npz`) rather than a table: one file, a glob of
    them, or a directory whose tables are ``.npz`` files (file names only)."""
    if path == "-":
        return False
    if os.path.isdir(path):
        return directory_tables(path)[1] == "npz"
    if not os.path.exists(path) and glob.has_magic(path):
        kinds = {file_kind(f) for f in glob.glob(path) if os.path.isfile(f)}
        return kinds == {"npz"}
    return file_kind(path) == "npz"


def directory_tables(path):
    """The tables a directory holds, sorted, and their kind: its Parquet
    files (``*.parquet``, ``*.pq``), or else its CSV files, or else its
    sparse matrices (``*.npz``); other files (``_SUCCESS``, ...) are
    ignored. ``([], None)`` if it holds none."""
    found = sorted(os.path.join(path, f) for f in os.listdir(path))
    found = [f for f in found if os.path.isfile(f)]
    for kind in ("parquet", "csv", "npz"):
        files = [f for f in found if file_kind(f) == kind]
        if files:
            return files, kind
    return [], None


def file_kind(path):
    """``"parquet"``, ``"csv"`` or ``"npz"`` from the file name, or None."""
    if os.path.basename(str(path)).lower().endswith(".npz"):
        return "npz"
    try:
        return table_format(path)
    except ValueError:
        return None


def load_sparse(path, chosen=None):
    """The matrix of one ``.npz`` file as float64 CSR, duplicates summed,
    its columns ``chosen`` (indices) if given, with one-line errors naming
    the file: not a sparse matrix, values that are not real numbers, no rows
    or no columns."""
    from scipy import sparse

    try:
        X = sparse.load_npz(path)
    except FileNotFoundError:
        raise
    except (OSError, ValueError, KeyError) as exc:
        raise unreadable_sparse(path, exc) from None
    check_sparse(path, X.shape, X.dtype)
    X = sparse.csr_matrix(X, dtype=np.float64)
    X.sum_duplicates()
    return X if chosen is None else X[:, chosen]


def chosen_indices(names):
    """The column indices of the chosen names ``x<j>`` of a ``.npz`` file."""
    return [int(c[1:]) for c in names]


def unreadable_sparse(path, exc):
    """The one-line error of a file that is not a sparse matrix."""
    return ValueError(f"{path}: cannot read a sparse matrix (as written by "
                      f"scipy.sparse.save_npz): {one_line(exc)}")


def check_sparse(path, shape, dtype, rows=True):
    """Refuse a sparse matrix of values that are not real numbers, or with
    no columns (or, unless ``rows`` is False, no rows)."""
    if dtype.kind not in "biuf":
        raise ValueError(f"{path}: the sparse matrix holds {dtype} values, not "
                         "real numbers")
    if shape[1] == 0 or (rows and shape[0] == 0):
        raise ValueError(f"{path}: the sparse matrix has shape {shape}: no "
                         f"{'rows or no ' if rows else ''}columns")


def sparse_column_names(n_columns):
    """``x0``, ``x1``, ...: a ``.npz`` file's columns, named as scikit-learn
    names an array's features."""
    return [f"x{i}" for i in range(n_columns)]


def bad_sparse_columns(X, test):
    """Whether each column of the CSR matrix ``X`` stores a value for which
    ``test`` (``np.isnan``, ``np.isinf``) holds."""
    bad = np.zeros(X.shape[1], dtype=bool)
    bad[X.indices[test(X.data)]] = True
    return bad


def fill_sparse(X, fill):
    """``X`` (CSR, changed in place) with each stored NaN replaced by
    ``fill``: a constant, or one per column."""
    value = np.broadcast_to(np.asarray(fill, dtype=np.float64), (X.shape[1],))
    X.data = np.where(np.isnan(X.data), value[X.indices], X.data)
    return X


def read_sparse(path, columns, fill=None, missing_hint="drop or impute them first"):
    """The chosen columns of the sparse matrix in ``path`` as float64 CSR,
    never densified, with the checks of :func:`numeric_matrix`.

    Its columns are named ``x0``, ``x1``, ... (a ``.npz`` file has no
    names), as scikit-learn names an array's features. Only stored values
    can be missing or infinite: their columns are named in the error.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_rows, len(columns))
    names : list of str
    """
    X = load_sparse(path)
    names = sparse_column_names(X.shape[1])
    if columns is not None:
        names = check_chosen(columns, names, path)
        X = X[:, chosen_indices(names)]
    if callable(fill):
        fill = fill(names)

    def bad(test):
        return [c for c, hit in zip(names, bad_sparse_columns(X, test)) if hit]

    refuse_missing(bad(np.isnan), fill, path, missing_hint)
    if fill is not None:
        fill_sparse(X, fill)
    refuse_infinite(bad(np.isinf), path)
    return X, names


def as_written(names, available):
    """``names`` as ``available`` writes them: a name not among them is the
    one available name that is it with surrounding spaces, if there is one
    (a header written ``id, age`` has the column ``' age'``); else as it is."""
    known = set(available)
    stripped = {}
    for name in available:
        stripped.setdefault(str(name).strip(), []).append(name)
    return [n if n in known or len(stripped.get(str(n).strip(), ())) != 1
            else stripped[str(n).strip()][0] for n in names]


def check_chosen(columns, available, path):
    """``columns`` (a list of names) checked against the ``available`` ones
    of ``path`` (:func:`as_written`): each chosen once, each present."""
    known = set(available)
    columns = as_written(columns, available)
    if len(set(columns)) != len(columns):
        dupes = sorted({c for c in columns if columns.count(c) > 1})
        raise ValueError(f"column(s) {quote_names(dupes)} chosen more than once")
    missing = [c for c in columns if c not in known]
    if missing:
        raise ValueError(
            f"{path} has no column(s) {quote_names(missing)}; its columns are "
            f"{quote_names(available)}"
        )
    return list(columns)


#: What to do about missing values in a table to fit.
MISSING_HINT = (
    "give --fill-missing VALUE to replace them by a public constant, chosen "
    "without looking at the data, or --fill-missing mid with --bounds FILE (or "
    "LOW HIGH for every column) to "
    "fill the middle of each column's public range (a value outside a "
    "column's --bounds is clipped into it like any other); dropping the rows "
    "instead would make their number depend on the data"
)


def numeric_matrix(frame, columns, path, hint, fill=None,
                   missing_hint="drop or impute them first", dialect=None):
    """The chosen columns of ``frame`` as a finite float64 matrix.

    Parameters
    ----------
    frame : pandas.DataFrame
    columns : list of str or None
        Columns to take, in this order; ``None`` takes every column.
    path : str
        Named in error messages.
    hint : str
        Appended to the error about non-numeric columns (how to exclude them).
    fill : float, sequence of float, callable or None
        A public constant (or one per column, or a function of the column
        names that returns them) that replaces every missing value (NaN or
        an empty cell); ``None``: missing values are an error.
    missing_hint : str
        Appended to the error about missing values (what to do next).
    dialect : dict, default=None
        The ``sep`` and ``decimal`` a CSV was read with.

    Returns
    -------
    X : ndarray of shape (n_rows, len(columns))
    names : list of str
    """
    csv = table_format(path) == "csv"
    frame = as_numbers(frame, frame.columns if columns is None else columns, csv,
                       dialect)
    columns = choose_columns(frame, columns, path, hint, csv)
    frame = frame[columns]
    if callable(fill):  # public values that depend on the columns chosen
        fill = fill(columns)
    refuse_missing([c for c in columns if frame[c].isna().any()], fill, path,
                   missing_hint)
    X = frame.to_numpy(dtype=np.float64)
    if fill is not None:  # public constants: the same map for every table
        X = fill_missing(X, fill)
    refuse_infinite([c for c, ok in zip(columns, np.isfinite(X).all(axis=0))
                     if not ok], path)
    return X, columns


def as_numbers(frame, names, csv=False, dialect=None):
    """``frame`` with each column of ``names`` (those it has) whose every
    cell is a number or missing made float64, where pandas kept it as
    objects or text: integers beyond 64 bits (CSV; pandas 3 types an
    integer of 2**63 beside a negative one as text: review 97 F1), a column
    with no value at all (Parquet's null type). Such a column is in the
    domain like any other: refusing it as non-numeric would tell a row's
    value apart. A column with text stays as it is, and
    :func:`choose_columns` refuses it. An integer beyond a float is the
    infinite value it rounds to, as in the Python API
    (:func:`~sklearn_dppca._dask.saturated`), refused as one. With ``csv``,
    ``True`` and ``False`` are text (:func:`choose_columns`), and a cell of
    text is a number where pandas' CSV parser reads it as a float
    (:func:`_csv_floats`, with ``dialect``'s decimal mark), as the
    ``--dask`` read of a chosen column does."""
    from pandas.api.types import is_object_dtype, is_string_dtype

    from ._dask import saturated

    converted = {}
    for name in names:
        if name not in frame.columns:
            continue
        dtype = frame[name].dtype
        if not (is_object_dtype(dtype) or (csv and is_string_dtype(dtype))):
            continue
        cells = frame[name].to_numpy(dtype=object)
        if csv and any(isinstance(c, (bool, np.bool_)) for c in cells):
            continue  # True/False among missing cells: text in a CSV
        try:
            converted[name] = saturated(
                _csv_floats(cells, dialect) if csv else cells
            ).astype(np.float64)
        except (TypeError, ValueError):
            pass  # text: refused by name
    return frame.assign(**converted) if converted else frame


def _csv_floats(cells, dialect=None):
    """The object array ``cells`` with its text cells parsed by pandas' CSV
    reader as a float64 column (the parser of the ``--dask`` read, which
    reads ``inf`` and ``1e400`` and refuses ``1_0`` and ``0x10``, unlike
    Python's ``float``; an empty cell or a missing marker, ``NA``, which
    pandas leaves as text in such a column, NaN as there: review 101 F3):
    ``ValueError`` where one does not read as a number, or could not be
    one cell of a line (a quote, the separator or a line break). ``dialect``:
    the ``sep`` and ``decimal`` of the file's read. A new array."""
    import io

    import pandas as pd

    cells = np.array(cells, dtype=object)
    text = np.flatnonzero([isinstance(c, str) for c in cells])
    if text.size:
        lines = cells[text].tolist()
        dialect = dialect or DEFAULT_DIALECT
        if any(re.search("[\"\n\r" + re.escape(dialect["sep"]) + "]", line)
               for line in lines):
            raise ValueError("not a number")
        with private_computation():  # pandas' message would quote the cell
            parsed = pd.read_csv(io.StringIO("\n".join(lines)), header=None,
                                 dtype=np.float64, skip_blank_lines=False,
                                 **dialect)
        if parsed.shape != (text.size, 1):
            raise ValueError("not a number")
        cells[text] = parsed[0].tolist()
    return cells


def choose_columns(frame, columns, path, hint, csv=False):
    """``columns`` of ``frame`` (``None``: all of them), checked: present,
    chosen once, numeric. Looks at the dtypes only, so ``frame`` may be a
    pandas or a (lazy) Dask DataFrame.

    With ``csv`` (the frame read from CSV text), a column pandas typed as
    booleans is text too: it does so only where every cell is ``True`` or
    ``False``, so reading them as 1 and 0 would let one row's ``0.5`` (a
    column of text then) decide the refusal (docs/privacy.rst, "Which cells
    are numbers")."""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    columns = (list(frame.columns) if columns is None
               else check_chosen(columns, list(frame.columns), path))
    dtypes = frame.dtypes
    text = [c for c in columns if not is_numeric_dtype(dtypes[c])
            or (csv and is_bool_dtype(dtypes[c]))]
    if text:
        flags = ("; a CSV cell is a number where it reads as one (True and "
                 "False do not: write them as 1 and 0)" if csv else "")
        raise ValueError(
            f"{path}: non-numeric column(s) {quote_names(text)}; {hint}{flags}"
        )
    return list(columns)


def fill_missing(X, fill):
    """``X`` with each NaN replaced by ``fill``: a public constant, or one per
    column (the same map for every table, in memory or chunk by chunk)."""
    return np.where(np.isnan(X), np.asarray(fill, dtype=np.float64), X)


def refuse_missing(with_nan, fill, path, missing_hint):
    """Refuse the columns ``with_nan`` (that hold a missing value) unless
    ``fill`` replaces them."""
    if with_nan and fill is None:
        raise ValueError(
            f"{path}: missing values (NaN or empty cells) in column(s) "
            f"{quote_names(with_nan)}; {missing_hint}"
        )


def refuse_infinite(infinite, path):
    """Refuse the columns ``infinite`` (that hold an infinite value)."""
    if infinite:
        raise ValueError(
            f"{path}: infinite values in column(s) {quote_names(infinite)}"
        )


def write_table(matrix, names, path, out=None):
    """Write ``matrix`` with column ``names`` as CSV or Parquet (by extension).

    A CSV is ``,``-separated, with ``.`` decimals, whatever the input's
    ``--sep`` and ``--decimal`` (the input file's, not the model's), but
    tab-separated where ``path`` is named ``*.tsv`` (compressed or not), as
    the command reads such a file back (mend 136: it held commas).
    ``path="-"`` writes CSV to ``out`` (standard output by default). The file
    is written to a temporary name and renamed, so a failure leaves no
    partial file.
    """
    import pandas as pd

    frame = pd.DataFrame(matrix, columns=list(names))
    if path == "-":
        frame.to_csv(out or sys.stdout, index=False)
        return
    kind = table_format(path)
    if kind == "parquet":
        _check_parquet_engine()

    def write(tmp):
        if kind == "parquet":
            frame.to_parquet(tmp, index=False)
        else:  # the temporary name hides the suffix: say the compression
            suffix = os.path.splitext(str(path).lower())[1]
            compression = _COMPRESSIONS.get(suffix)
            if compression == "zip":  # the archive's member, named by path
                compression = {"method": "zip", "archive_name":
                               os.path.basename(str(path))[: -len(suffix)]}
            frame.to_csv(tmp, index=False, compression=compression,
                         sep="\t" if is_tsv(path) else ",")

    _atomic_write(path, write)


def _atomic_write(path, write):
    """Call ``write(tmp)`` on a temporary file beside ``path``, then rename;
    the file gets the permissions of the one it replaces, or a new file's
    under the umask (the temporary file's own are 0600)."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".dppca-", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        if os.path.exists(path):
            mode = os.stat(path).st_mode & 0o777
        else:
            umask = os.umask(0o022)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def check_writable(path):
    """Raise a one-line error now if ``path`` cannot be written later.

    Checked before a fit, so that no privacy budget is spent on a release
    that could not be saved.
    """
    if path == "-":
        return
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValueError(f"{path}: is a directory, not a file name")
    if not os.path.isdir(folder):
        raise ValueError(f"{path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"{path}: the folder {folder} is not writable")
    try:  # the rename onto a name the folder cannot hold fails (review 97 F4)
        longest = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):  # not known here
        longest = None
    if longest and len(os.fsencode(os.path.basename(path))) > longest:
        raise ValueError(f"{path}: the file name is longer than the "
                         f"{longest} bytes its folder allows")
