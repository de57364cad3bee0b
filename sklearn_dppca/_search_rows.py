"""What the private step of a search's candidate reads: the kind of the
rows (:func:`rows_kind`), their width and kind after the public steps
before it (:func:`input_kind`, :func:`head_output`), and on a Dask array
those steps mapped chunk by chunk (:func:`mapped_rows`), as the searches
fit and score them (:func:`fit_through_heads`, :func:`rows_after`): the
rows stay a Dask array of the same chunks of rows, so that the private
step's path and memory are planned before the charge as a bare fit's are
(they were gathered into memory after the charge, unplanned).
"""

from numbers import Integral

import numpy as np
from scipy import sparse
from sklearn.base import clone
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import _num_samples

from . import _array_api
from ._array_api import ArrayAPIRows
from ._dask import ChunkedRows, has_sparse_chunks, is_dask_collection
from ._dask_memory import HEADS_MAP
from ._public_encoders import encoded_width, template_row, texts_given
from ._rows import InMemoryRows
from ._warning_rules import private_computation
from .preprocessing import PublicScaler


def empty_rows(X):
    """``X`` without its rows, of its kind and with its columns' names and
    dtypes (public): what :func:`head_width` runs the steps before a private
    one on (a Dask array: an empty array of its chunks' kind; other sparse
    formats: an empty CSR matrix, as the searches read them). None for a
    Dask DataFrame, an input without slicing, or a DataFrame with a column
    of another than a plain numeric dtype."""
    if is_dask_collection(X):  # its chunks reach the steps as NumPy (or CSR)
        width = X.shape[1] if len(getattr(X, "shape", ())) == 2 else None
        if not isinstance(width, Integral):  # a DataFrame: names, not shape
            return None
        empty = sparse.csr_matrix if has_sparse_chunks(X) else np.zeros
        return empty((0, width), dtype=X.dtype)
    if hasattr(X, "iloc"):
        # a categorical dtype's categories may come from the values (the
        # searches refuse it before a public encoder: refuse_inferred_categories)
        dtypes = list(X.dtypes) if getattr(X, "ndim", 1) == 2 else [X.dtype]
        # text (object, str) columns: no value without rows, for a public
        # encoder before the private step (:func:`head_output`)
        plain = all(isinstance(t, np.dtype) and t.kind in "biufO"
                    or type(t).__name__ == "StringDtype" for t in dtypes)
        return X.iloc[:0] if plain else None
    if sparse.issparse(X):
        return X[:0] if X.format in ("csr", "csc") else sparse.csr_matrix(
            (0, X.shape[1]), dtype=X.dtype)
    if isinstance(X, np.ndarray) or _array_api.namespace(X) is not None:
        return X[:0, ...]  # the Array API indexes every axis
    return None


def refuse_polars_output(steps):
    """Refuse, before the charge, public or private ``steps`` that feed a
    private step a polars DataFrame (``set_output(transform="polars")``, a
    public parameter): the private steps do not read one, so every fit
    failed after the charge."""
    from sklearn.utils._set_output import _get_output_config

    def output(step):  # a Pipeline's is its last step's (review 116 F2),
        # the last but "passthrough" or None ones (review 118 F1)
        if type(step) is Pipeline:
            for _, inner in reversed(step.steps):
                if not _is_passthrough(inner):
                    return output(inner)
        return step

    for step in map(output, steps):
        if (hasattr(step, "set_output") and hasattr(step, "transform")
                and _get_output_config("transform", step)["dense"] == "polars"):
            raise ValueError(
                f"{type(step).__name__} with set_output(transform='polars') "
                "feeds a private step a polars DataFrame, which the private "
                "steps do not read: give it set_output(transform='pandas') "
                "(its columns' names then reach the next step). The search "
                "was refused before it spent any budget.")


def no_columns(width, step, params):
    """The ``ValueError`` of the public steps before the private ``step``
    where they output no column, ``width`` 0 (a ``ColumnTransformer`` that
    selects none with ``remainder="drop"``): public, their output on ``X``'s
    columns without a row (:func:`head_width`); else None. Every fit of the
    candidate failed after the charge."""
    if width == 0:
        return ValueError(
            ("A candidate" if params is None else f"The candidate {params}")
            + f" feeds {type(step).__name__} no column: "
            "the steps before it output none from X's columns (a "
            "ColumnTransformer that selects none, remainder='drop'?). Select "
            "at least one column. Found before the charge.")
    return None


def head_width(heads, n_features, empty):
    """The number of features the steps ``heads`` make of ``X``'s
    ``n_features`` columns, where it is public (:func:`head_output`), else
    None. Before the charge, a candidate's ``n_components`` above it is then
    a public failure (a FunctionTransformer that keeps 3 columns and a PCA
    of 5 components failed the search after its charge). The width on the
    rows is checked again after the charge
    (:func:`~sklearn_dppca._search_run._check_heads`): a step whose width
    depends on the values is one the guarantee cannot make public."""
    out = head_output(heads, n_features, empty)
    return None if out is None else out[0]


def head_output(heads, n_features, empty):
    """``(width, names)`` of what the steps ``heads`` make of ``X``, where
    public: ``n_features`` and the names they pass on if they keep ``X``'s
    columns (:func:`keeps_columns`), else their output on ``empty``
    (:func:`empty_rows`, no row: a function of the steps and of ``X``'s
    columns only), its width and its columns' names (None for an array);
    None where they fail on it."""
    names = getattr(empty, "columns", None)
    if keeps_columns(heads):
        return n_features, passed_names(heads, None if names is None else
                                        np.asarray(names, dtype=object))
    encoded = encoded_width(heads, empty)  # public encoders: no fit on 0 rows
    if encoded is not None:
        return encoded
    if empty is None:
        return None
    try:
        with private_computation():  # the package's silence, safe in threads
            out = clone(Pipeline([(f"s{i}", h) for i, h in enumerate(heads)]))\
                .fit_transform(empty)
    except Exception:  # noqa: BLE001 - a user's step; its width stays unknown
        return None
    shape = getattr(out, "shape", ())
    if len(shape) != 2:
        return None
    columns = getattr(out, "columns", None)
    return int(shape[1]), (None if columns is None
                           else np.asarray(columns, dtype=object))



def rows_kind(X, n_features, names=None):
    r"""An engine of ``X``'s kind (the search's ``X`` as it receives it)
    that holds no row: a fit's path and memory depend on the kind of its rows
    (dense, sparse, a Dask array of dense chunks, an Array API device), never
    on their values (:func:`refused_path`). ``names``: the columns of the
    Dask DataFrame a Dask array was made of (public, its schema), which the
    steps mapped over its chunks see (:func:`mapped_rows`)."""
    if is_dask_collection(X) and not has_sparse_chunks(X):
        rows = ChunkedRows(X)  # lazy: its graph, never computed here
        rows.names = names
        return rows
    namespace = _array_api.namespace(X)
    if namespace is not None:
        xp, device = namespace
        return ArrayAPIRows(xp.zeros((0, n_features), device=device), xp, device)
    # a Dask array of sparse chunks is gathered
    sparse_rows = sparse.issparse(X) or is_dask_collection(X)
    empty = sparse.csr_matrix if sparse_rows else np.zeros
    if sparse.issparse(X) and X.format == "csc":
        # its fits copy CSC rows to CSR: their plans count it (review 104 F1)
        empty = sparse.csc_matrix
    # float32 rows are fitted in float32 (their copies, a box's rounding)
    single = getattr(X, "dtype", None) == np.float32
    rows = InMemoryRows(empty((0, n_features), dtype=np.float32 if single else None))
    if rows.csc_copy:  # its fits' copies keep X's index width (review 119 F1)
        rows.csc_index_bytes = X.indices.itemsize
    return rows


def input_kind(heads, n_features, rows):
    """``(columns, rows)`` of what a private step reads after ``heads``
    (the steps before it), where both are public: ``X``'s own when it reads
    ``X``, or when every step before it keeps dense in-memory rows as they
    are up to a public map of each value; a Dask array of dense chunks
    through any public steps, mapped chunk by chunk as the searches run
    them (:func:`mapped_rows`: the same chunks of rows, their width that of
    the steps' output on a row of zeros); else None."""
    if rows is None:
        return None
    if not heads:
        return n_features, rows
    if isinstance(rows, ChunkedRows) and not rows.sparse_chunks:
        try:
            mapped = mapped_rows(heads, rows.X, rows.names)
        except ValueError:  # the candidate's public failure (unmapped)
            return None
        return mapped.shape[1], (rows if mapped is rows.X else ChunkedRows(mapped))
    dense = isinstance(rows, InMemoryRows) and isinstance(rows.X, np.ndarray)
    return (n_features, rows) if keeps_columns(heads) and dense else None


def candidate_heads(candidate):
    """The steps before a candidate's private step (none for a bare one)."""
    index = candidate.index
    return [step for _, step in candidate.estimator.steps[:index]] if index else []


def passed_names(heads, names):
    """The column names the steps ``heads`` (:func:`keeps_columns`) pass on
    from ``X``'s ``names``: kept where each passes them through or outputs
    pandas (``set_output``), else none (NumPy arrays)."""
    from sklearn.utils._set_output import _get_output_config

    kept = all(_is_passthrough(h) or _get_output_config("transform", h)["dense"]
               == "pandas" for h in _flat(heads))
    return names if kept else None


def keeps_columns(heads):
    """Whether every step of ``heads`` keeps ``X``'s columns, each up to a
    public map of its values (``"passthrough"``, a ``PublicScaler``, a
    constant fill)."""
    return all(_is_passthrough(h) or type(h) in _STATELESS_TYPES
               or _is_constant_fill(h) for h in _flat(heads))


def _flat(heads):
    """``heads`` with each ``Pipeline`` (exactly, without ``memory``) among
    them replaced by its steps, at any depth: a nested Pipeline keeps the
    columns, and passes on their names, as its steps do (review 114 F1; its
    own ``set_output`` sets its steps', not its own)."""
    flat = []
    for head in heads:
        if type(head) is Pipeline and head.memory is None:
            flat += _flat([step for _, step in head.steps])
        else:
            flat.append(head)
    return flat



#: The package's own transformers whose ``fit`` learns nothing from the rows
#: (their output is a fixed function of each row and of their parameters).
#: Matched by exact type: a subclass may learn in ``fit``.
_STATELESS_TYPES = frozenset({PublicScaler})


def _is_passthrough(step):
    """A Pipeline's empty step: ``None`` or ``"passthrough"``."""
    return step is None or (isinstance(step, str) and step == "passthrough")



def _is_constant_fill(step):
    """``SimpleImputer(strategy="constant", keep_empty_features=True)``
    without ``add_indicator``. Its fit learns from the data which columns are
    all missing (dropped from the output unless ``keep_empty_features``) and,
    with ``add_indicator``, which columns have missing values (the
    indicator's columns); with neither, its output is a fixed function of
    each row: missing entries become ``fill_value``, the others stay."""
    return (type(step) is SimpleImputer and step.strategy == "constant"
            and step.keep_empty_features is True and not step.add_indicator)



def maps_chunks(heads, X):
    """Whether the searches map the steps ``heads`` (public, before a
    private step) over the chunks of ``X`` (:func:`mapped_rows`): ``X`` a
    Dask array of dense chunks, and a step other than ``"passthrough"``."""
    return (is_dask_collection(X) and not has_sparse_chunks(X)
            and any(not _is_passthrough(h) for h in heads))


class _ChunkMap:
    """The public steps, fitted on a row of zeros, applied to one chunk of
    rows (a DataFrame of the columns ``names`` where they are given, as the
    steps were fitted): dense, ``width`` columns of ``dtype`` (their output
    on the row of zeros). A step whose output has another width or is not dense on some
    chunk is not a fixed map of each row: it fails (after the charge, as
    :func:`~sklearn_dppca._search_run._check_heads` fails such a step).
    Of the rows, only their number is checked: a step that repeats,
    reorders or replaces rows of a chunk keeping their number passes; it
    reads other rows than its own, a user's function outside the guarantee
    (docs/model_selection.rst, as of a ``FunctionTransformer``'s ``func``)."""

    def __init__(self, steps, width, dtype, names=None):
        self.steps, self.width, self.dtype = steps, width, dtype
        self.names = names

    def __call__(self, block):
        if not block.shape[0]:  # a chunk of no row: scikit-learn refuses it
            return np.empty((0, self.width), dtype=self.dtype)
        out = self.steps.transform(_named(block, self.names))
        if sparse.issparse(out) or len(getattr(out, "shape", ())) != 2 \
                or out.shape[1] != self.width or out.shape[0] != block.shape[0]:
            raise ValueError(
                "A step before the private estimator made rows of another "
                "number, width or kind than its output on a row of zeros: not "
                "a fixed map of each row.")
        return np.asarray(out, dtype=self.dtype)  # pandas (set_output) too


def _named(rows, names):
    """``rows`` (2-D NumPy) as a DataFrame of the columns ``names`` (its
    values not copied), or as they are where ``names`` is None."""
    if names is None:
        return rows
    import pandas as pd

    return pd.DataFrame(rows, columns=list(names), copy=False)


class _FailsOnZeros(ValueError):
    """The steps fail on the row of zeros they are fitted on
    (:func:`mapped_rows`): a function of their parameters and of ``X``'s
    columns (a ``ranges`` dict that names no range for a column)."""


def mapped_rows(heads, X, names=None):
    """``X``, a Dask array of dense chunks, through the public steps
    ``heads`` chunk by chunk (lazy: nothing is computed here): each chunk of
    rows mapped by a clone of the steps fitted on a row of zeros of ``X``'s
    width and dtype (their fit learns nothing from the rows: the searches
    accept stateless steps only; ``copy=True``, so that no chunk of the
    caller's array is written), into as many rows, the width and dtype of
    their output on that row. ``names``: the columns of the Dask DataFrame
    ``X`` was made of; the row of zeros and each chunk then reach the steps
    as a DataFrame of those columns, so that a step keyed by feature name (a
    ``PublicScaler(ranges={name: ...})``, a ``ColumnTransformer`` on names)
    maps them as it maps the frame in memory. ``X`` itself where every step
    passes it through. Public: the steps, ``X``'s width, dtype, chunks and
    column names. A
    ``ValueError`` (before the charge) where the steps fail on the row of
    zeros or make of it anything but a dense 2-D array of numbers: the
    width and the memory of what the private step reads are then not
    known before the data is read."""
    import dask.array as da

    steps = [h for h in heads if not _is_passthrough(h)]
    if not steps:
        return X
    if X.numblocks[1] != 1:
        X = X.rechunk({1: -1})
    mapper = clone(Pipeline([(f"s{i}", h) for i, h in enumerate(steps)]))
    mapper.set_params(**{name: True for name in mapper.get_params()
                         if name.rsplit("__", 1)[-1] == "copy"})
    try:
        with private_computation():  # public values; the package's silence
            out = mapper.fit_transform(
                _named(np.zeros((1, X.shape[1]), dtype=X.dtype), names))
    except Exception as error:  # noqa: BLE001 - a user's step: named below
        raise _FailsOnZeros(
            f"The steps before the private estimator fail on a row of zeros "
            f"of X's {X.shape[1]} columns ({type(error).__name__}: {error})"
        ) from None
    if sparse.issparse(out) or len(getattr(out, "shape", ())) != 2:
        raise ValueError(
            "The steps before the private estimator make sparse rows of the "
            "Dask array's dense chunks (a OneHotEncoder's default "
            "sparse_output=True)")
    out = np.asarray(out)
    if out.dtype.kind not in "biuf":
        raise ValueError(
            "The steps before the private estimator make rows of "
            f"{out.dtype} of a row of zeros, not numbers")
    dtype = out.dtype if out.dtype.kind == "f" else np.dtype(np.float64)
    width = int(out.shape[1])
    return da.map_blocks(_ChunkMap(mapper, width, dtype, names), X, dtype=dtype,
                         chunks=(X.chunks[0], (width,)),
                         meta=np.empty((0, 0), dtype=dtype),
                         # the bytes of a row read: counted by chunk_bytes
                         name=f"{HEADS_MAP}-{X.shape[1] * X.dtype.itemsize}-"
                              f"{da.core.tokenize(X, mapper, width, dtype)}")


def fit_through_heads(model, index, X, y=None, names=None):
    """``model.fit(X, y)``, where ``model`` is a Pipeline whose steps before
    ``index`` are public maps: on a Dask array of dense chunks
    (:func:`maps_chunks`) the later steps are fitted on those steps' output
    mapped chunk by chunk (:func:`fit_heads`), as the search planned
    (:func:`input_kind`), never gathered into memory; in memory, on those
    steps' ``fit_transform``, checked for ``X``'s number of rows
    (:func:`same_rows`)."""
    if not index:
        return model.fit(X, y)
    # in memory too: the steps' output checked for X's number of rows
    Pipeline(model.steps[index:]).fit(fit_heads(model, index, X, y, names), y)
    return model


def fit_heads(model, index, X, y=None, names=None):
    """The steps of the Pipeline ``model`` before ``index`` (public maps)
    fitted, and the rows as the step at ``index`` reads them: on a Dask
    array of dense chunks, the steps fitted on a row of zeros (they learn
    nothing from the rows; their output on it is that of a fit on every
    row) and the rows mapped chunk by chunk (:func:`mapped_rows`, with the
    columns ``names``); else each step's ``fit_transform``."""
    heads = [step for _, step in model.steps[:index]] if index else []
    if maps_chunks(heads, X):
        zero = _named(np.zeros((1, X.shape[1]), dtype=X.dtype), names)
        with private_computation():
            Pipeline(model.steps[:index]).fit(zero)
        return mapped_rows(heads, X, names)
    rows = X
    for step in heads:
        if not _is_passthrough(step):
            rows = step.fit_transform(rows, y)
    return same_rows(rows, X)


def rows_after(model, index, X, names=None):
    """The rows as the step at ``index`` of the fitted Pipeline ``model``
    reads them: through the public steps before it, mapped chunk by chunk
    on a Dask array of dense chunks (:func:`mapped_rows`), else
    transformed."""
    heads = [step for _, step in model.steps[:index]] if index else []
    if maps_chunks(heads, X):
        return mapped_rows(heads, X, names)
    rows = X
    for step in heads:
        if not _is_passthrough(step):
            rows = step.transform(rows)
    return same_rows(rows, X)


def same_rows(rows, X):
    """``rows``, the output of the public steps before the private one on
    ``X`` in memory, refused unless it has ``X``'s number of rows, as
    :class:`_ChunkMap` refuses it of a chunk: a step that drops or repeats
    rows is not a fixed map of each row, and the private fit would count
    and release its rows (review 103 F1: ``best_estimator_.n_samples_``
    the rows a filter kept). After the charge: the search fails, spent.
    Only the number of rows is checked: a step that repeats, reorders or
    replaces rows keeping their number passes; it reads other rows than its
    own, a user's function outside the guarantee (docs/model_selection.rst,
    as of a ``FunctionTransformer``'s ``func``; review 106 F3)."""
    if _num_samples(rows) != _num_samples(X):
        raise ValueError(
            "A step before the private estimator made another number of rows "
            "than it read: not a fixed map of each row.")
    return rows


def unmapped(heads, rows, step=None, empty=None):
    """The public failure (a ``ValueError``, before the charge) of a
    candidate whose steps ``heads`` before its private one select columns
    that ``X`` lacks (:func:`unselected_columns`, on ``empty``:
    :func:`empty_rows`, or on the Dask DataFrame's names of ``rows``), or
    cannot be mapped over the chunks of a Dask array of dense chunks
    (``rows``: :func:`rows_kind`; :func:`mapped_rows`), else None. Also a
    private ``step`` whose ``bounds`` is a dict by feature name after such
    mapped steps: the chunks reach it as unnamed arrays
    (:class:`_ChunkMap`), so its fit would fail on the dict after the
    charge (review 105 F1). Public: the steps and their parameters."""
    if isinstance(rows, ChunkedRows) and not rows.sparse_chunks:
        # its chunks reach the steps as frames of its names (_ChunkMap)
        empty = _named(np.zeros((0, rows.X.shape[1]), dtype=rows.X.dtype),
                       rows.names)
    error = unselected_columns(heads, empty) or rowless_failure(heads, empty)
    if error is not None:
        return error
    if not heads or not isinstance(rows, ChunkedRows) or rows.sparse_chunks:
        return None
    if isinstance(getattr(step, "bounds", None), dict) \
            and maps_chunks(heads, rows.X):
        return ValueError(
            f"{type(step).__name__}'s bounds is a dict by feature name, but "
            "on a Dask collection the steps before it are mapped over its "
            "chunks, which reach it without column names: give bounds as "
            "(lower, upper) arrays in the order of the columns those steps "
            "output. The search was refused before it spent any budget.")
    try:
        mapped_rows(heads, rows.X, rows.names)
    except _FailsOnZeros as error:  # the steps' own refusal, named as it is
        return ValueError(
            f"{error}: the steps are fitted on that row before they map "
            "the Dask array's chunks; a failure found before any row was "
            "read (public: the steps and X's columns).")
    except ValueError as error:
        return ValueError(
            f"{error}: on a Dask array, the width and the memory of what the "
            "private estimator reads are then unknown before the data is "
            "read, and its fits would gather every row into memory. Give "
            "steps that make dense numbers of a row of zeros (a "
            "OneHotEncoder(..., sparse_output=False), a ColumnTransformer("
            "..., sparse_threshold=0)), or map the chunks before the search "
            "(X.map_blocks(step.transform, dtype=float)).")
    return None


def unselected_columns(heads, empty):
    """The public failure (a ``ValueError``, before the charge) of the
    leading ``ColumnTransformer`` among the steps ``heads`` (after
    ``"passthrough"`` steps, steps that keep ``X``'s columns and pass on
    its names, :func:`passed_names`, or other steps, read through their
    output on ``X`` without rows: :func:`_output_without_rows`), or of one
    nested in it, whose columns ``empty`` (``X`` without its rows:
    :func:`empty_rows`) does not have: a name the DataFrame lacks, an index
    past its width, names on an array (a step before it of NumPy output).
    Resolved by scikit-learn's own resolution, the one the
    ``ColumnTransformer``'s fit makes, which reads ``X``'s columns (their
    names, number and dtypes: public), never its rows: a step it refuses
    fails at its fit on any rows of ``X`` (it failed the search after its
    charge). None where none fails, or where what a step reads is not
    known without rows (the output of a step that fails on none, a
    selector's on columns whose dtypes a step may have changed)."""
    if empty is None or len(getattr(empty, "shape", ())) != 2:
        return None
    typed = True  # empty's dtypes are those the step reads
    for head in heads:
        if _is_passthrough(head):
            continue
        failure = _column_failure(head, empty, typed)
        if failure is not None:
            return ValueError(
                f"{failure}: X's columns (their names and number) are "
                "public, and the candidate's fit would fail on them; it "
                "was refused before the search spent any budget.")
        names = getattr(empty, "columns", None)
        if (not keeps_columns([head]) or names is None
                or passed_names([head], names) is None):
            empty = _output_without_rows(head, empty)  # what the next reads
            if empty is None:
                return None  # not known here
        typed = False
    return None


def rowless_failure(heads, empty):
    """The public failure (a ``ValueError``, before the charge) of the
    steps ``heads`` that raise on ``X`` without its rows (``empty``) and
    again on rows of public values of its columns (:func:`_one_row`, and
    with its text given, :func:`texts_given`):
    their setup (a ``PublicScaler``'s ranges that miss a column the
    ``ColumnTransformer`` before it outputs), a failure on any rows
    (review 114 F2: a ``SimpleImputer`` refuses no rows, so the failure
    came after the charge). The row is run step by step; a step that runs
    a function of yours (a ``FunctionTransformer``'s ``func``) may refuse
    that row and not the data's: from it on, nothing is decided here (the
    fit decides, after the charge). Public: the steps and ``X``'s columns'
    names and dtypes. None where they run, or where it is not known."""
    steps = [h for h in heads if not _is_passthrough(h)]
    if not steps or empty is None or len(getattr(empty, "shape", ())) != 2:
        return None
    try:
        with private_computation():
            clone(Pipeline([(f"s{i}", h) for i, h in enumerate(steps)]))\
                .fit_transform(empty)
        return None
    except Exception:  # noqa: BLE001 - many steps refuse no rows: one row
        pass
    row = _one_row(empty)
    first = None
    for rows in ([] if row is None else [row, texts_given(row)]):
        error = _first_failure(steps, rows)
        if error is None or error is _YOURS:
            return None
        first = first or error
    return first


#: What :func:`_first_failure` gives where a step of yours decides.
_YOURS = object()


def _first_failure(steps, rows):
    """The refusal of the first of ``steps`` (clones, run in turn) that
    raises on ``rows``; ``_YOURS`` where a step that runs your function
    comes first; else None."""
    for step in steps:
        if _runs_your_code(step):
            return _YOURS
        try:
            with private_computation():
                rows = clone(step).fit_transform(rows)
        except Exception as error:  # noqa: BLE001 - the step's own, named
            return ValueError(
                f"{str(error).rstrip('.')} (step {type(step).__name__} "
                "before the private estimator, run on X's columns without "
                "rows and on rows of public values of them, with text "
                "missing and given: it fails on both). Found from public "
                "values; the candidate was refused before the search spent "
                "any budget.")
    return None


def _runs_your_code(step):
    """Whether ``step`` is, or holds, a ``FunctionTransformer`` with a
    ``func`` (a user's function, which may refuse a row of zeros only)."""
    from sklearn.compose import ColumnTransformer
    from sklearn.preprocessing import FunctionTransformer

    if isinstance(step, FunctionTransformer):
        return step.func is not None
    if isinstance(step, ColumnTransformer):
        inner = [t for _, t, _ in step.transformers] + [step.remainder]
    elif isinstance(step, Pipeline):
        inner = [t for _, t in step.steps]
    else:
        return False
    return any(_runs_your_code(t) for t in inner if not isinstance(t, str))


def _output_without_rows(step, empty):
    """What ``step`` (not a ``ColumnTransformer``: None then, its
    selections were checked) makes of ``empty`` (rows of none: a function
    of the step and of ``X``'s columns only; fitted on a row of public
    values of those columns where it needs a row: :func:`_one_row`), its
    own rows of none, else
    None where it fails there or makes no table: a ``ColumnTransformer``
    after it then selects from that output (names on a NumPy output fail
    on every row; they were charged, then failed)."""
    from sklearn.compose import ColumnTransformer

    if isinstance(step, ColumnTransformer):
        return None
    for rows in (empty, _one_row):  # a fit may need a row
        try:
            rows = rows(empty) if callable(rows) else rows
            with private_computation():
                out = clone(step).fit_transform(rows)
        except Exception:  # noqa: BLE001 - a user's step: its output unknown
            continue
        return out[:0] if len(getattr(out, "shape", ())) == 2 else None
    return None


def _one_row(empty):
    """A row of public values of ``empty``'s columns and dtypes
    (:func:`~sklearn_dppca._public_encoders.template_row`; an empty CSR
    row of sparse ``empty``)."""
    if sparse.issparse(empty):
        return sparse.csr_matrix((1, empty.shape[1]), dtype=empty.dtype)
    return template_row(empty)


def _column_failure(step, empty, typed, where=()):
    """What :func:`unselected_columns` finds of ``step`` reading the
    columns of ``empty`` (a ``ColumnTransformer``, and one nested in it),
    as text, else None. ``typed``: whether ``empty``'s dtypes are those the
    step reads (a ``make_column_selector`` reads them; where they are, its
    failure, on an array say, is the fit's own, public: review 108 F2)."""
    from sklearn.compose import ColumnTransformer, make_column_selector
    from sklearn.utils._indexing import _get_column_indices, _safe_indexing

    if not isinstance(step, ColumnTransformer):
        return None
    chosen = set()
    for name, transformer, columns in step.transformers:
        if callable(columns):  # make_column_selector: names and dtypes
            if not typed or type(columns) is not make_column_selector:
                continue  # another callable may read the rows' values
            try:  # scikit-learn's selector reads X's kind, names, dtypes
                columns = columns(empty)
            except Exception as error:  # noqa: BLE001 - the fit's refusal
                path = " > ".join(repr(n) for n in (*where, name))
                return (f"The ColumnTransformer's transformer {path} selects "
                        "columns by a make_column_selector, which fails on "
                        f"X's columns ({type(error).__name__}: {error})")
        try:
            indices = _get_column_indices(empty, columns)
        except Exception as error:  # noqa: BLE001 - the fit's own refusal
            path = " > ".join(repr(n) for n in (*where, name))
            return (f"The ColumnTransformer's transformer {path} selects "
                    f"columns that X does not have ({type(error).__name__}: "
                    f"{error})")
        chosen.update(indices)
        if isinstance(columns, (list, tuple, slice, np.ndarray)):
            inner = _column_failure(transformer, _safe_indexing(
                empty, columns, axis=1), typed, (*where, name))
            if inner is not None:
                return inner
    rest = [i for i in range(empty.shape[1]) if i not in chosen]
    return _column_failure(step.remainder, _safe_indexing(empty, rest, axis=1),
                           typed, (*where, "remainder"))
