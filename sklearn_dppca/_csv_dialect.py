"""How the ``dppca`` command reads a CSV's cells: ``--sep`` and
``--decimal`` (its dialect), and the refusal of a file whose header looks
separated by another character than the one it is read with."""

import io
import os

from ._warning_rules import private_computation

#: pandas' reading of a CSV's cells: ``--sep`` and ``--decimal``.
DEFAULT_DIALECT = {"sep": ",", "decimal": "."}


def csv_dialect(args, path=None):
    """``(dialect, sniff)`` of a command's options: the ``read_csv`` keywords
    ``sep`` and ``decimal``, and whether ``--sep`` was left out (a header
    that looks separated by another character is then refused:
    :func:`refuse_other_separator`). A file ``path`` named ``*.tsv`` (or
    ``*.tsv.gz``, ...) is read with tabs where ``--sep`` is left out, and
    with ``--dask`` so is a directory or glob whose CSV files all are
    (:func:`named_tsv`: a mix of ``*.tsv`` and ``*.csv`` is refused,
    naming ``--sep``)."""
    given = getattr(args, "sep", None)
    many = getattr(args, "dask", False)  # a directory or glob: --dask only
    sep = given or ("\t" if (named_tsv if many else is_tsv)(path) else ",")
    dialect = {"sep": sep, "decimal": getattr(args, "decimal", None) or "."}
    if dialect["sep"] == dialect["decimal"]:
        raise ValueError(f"--sep and --decimal are both {dialect['sep']!r}: "
                         "a CSV's cells cannot be split at its decimal mark")
    return dialect, given is None


def is_tsv(path):
    """Whether ``path`` names a tab-separated file, ``*.tsv`` (compressed
    or not)."""
    if path is None or path == "-":
        return False
    name = os.path.basename(str(path)).lower()
    for suffix in (".gz", ".bz2", ".xz", ".zip", ".zst"):
        name = name.removesuffix(suffix)
    return name.endswith(".tsv")


def named_tsv(path):
    """Whether ``path`` names tab-separated files: one file ``*.tsv``
    (:func:`is_tsv`), or a directory or glob (``--dask``) whose CSV files,
    as ``_cli_dask.table_files`` lists them, are all ``*.tsv`` (a
    directory of Parquet files beside them reads those: no CSV). Public:
    the files' names only, before any of them is read. A directory or glob
    naming both ``*.tsv`` and ``*.csv`` files is refused: no separator
    follows from their names (mend 136: the name given decided, a
    directory's never ``*.tsv``, so ``*.tsv`` files were read with
    ``,``)."""
    if path is None or path == "-" or is_tsv(path):
        return path not in (None, "-")
    files = _csv_files(str(path))
    tabs = sorted(f for f in files if is_tsv(f))
    if tabs and len(tabs) < len(files):
        other = next(f for f in files if not is_tsv(f))
        raise ValueError(
            f"{path}: names both *.tsv and *.csv files ({tabs[0]}, {other}), "
            "read with tabs and with ',' by their names: pass --sep (--sep "
            "tab or --sep ',') to read every file with it, or name files of "
            "one kind")
    return bool(tabs)


def _csv_files(path):
    """The CSV files (``*.csv``, ``*.tsv``, compressed or not) that
    ``--dask`` reads for a directory or a glob (``_cli_dask.table_files``);
    none for anything else, or where it refuses the path (it does so again
    when the rows are read)."""
    import glob

    from ._cli_dask import table_files

    if not os.path.isdir(path) and (not glob.has_magic(path) or os.path.exists(path)):
        return []
    try:
        files, kind = table_files(path)
    except (OSError, ValueError):
        return []
    return files if kind == "csv" else []


#: The separators a header is looked at for, and the flag naming each.
_FLAGS = {",": "--sep ','", ";": "--sep ';'", "\t": "--sep tab"}


def refuse_other_separator(names, path, sep=","):
    """Refuse a CSV read with ``sep`` (``--sep`` not given: ``,``, or a tab
    for ``*.tsv``) whose header, one column ``names`` as pandas read it,
    holds another of ``,``, ``;`` or a tab: a file separated by that
    character, whose cells would all be one column of text. The header
    only is looked at (public: the column names), before any row is
    read."""
    if len(names) != 1:
        return
    counts = {c: names[0].count(c) for c in _FLAGS if c != sep}
    other = max(counts, key=counts.get)
    if counts[other]:
        what = {",": "','", ";": "';'", "\t": "tabs"}[other]
        raise ValueError(
            f"{path}: this file looks separated by {what} \u2014 pass "
            f"{_FLAGS[other]} (and --decimal ',' if its decimals are written "
            f"1,5); if its header is one column's name, pass {_FLAGS[sep]}")


class Rejoined:
    """A text stream read again from its start: the line ``first`` already
    read from ``rest``, then ``rest`` (standard input, read once)."""

    def __init__(self, first, rest):
        self._first, self._rest = first, rest

    def read(self, size=-1):
        if self._first:
            text, self._first = self._first, ""
            return text
        return self._rest.read(size)

    def readline(self):
        if self._first:
            text, self._first = self._first, ""
            return text
        return self._rest.readline()

    def __iter__(self):
        return iter(self.readline, "")


def header_names(source, compression="infer", line=False, sep=","):
    """The column names of the CSV header of the file ``source`` read with
    ``sep`` (its first line only: pandas reads no row with ``nrows=0``), or of
    with ``line`` the line ``source`` itself (standard input's first, read
    once); ``None`` where pandas cannot read it: the full read then
    refuses it in its own words."""
    import pandas as pd

    if line:
        source = io.StringIO(source)
    try:
        with private_computation():
            return [str(c) for c in pd.read_csv(
                source, nrows=0, compression=compression, sep=sep).columns]
    except (OSError, ValueError):
        return None
