"""Encoders of categorical columns whose fitted state is a function of their
parameters only: public maps, like the stateless steps (review 90 F1).

A ``OneHotEncoder`` with an explicit list of categories, unknown values
ignored and no counting of categories learns nothing from the rows: its
``categories_`` and width come from its parameters (and
from the columns' dtypes, public), and each row's output is a fixed function
of that row. ``categories="auto"`` learns which categories the rows hold (a
category of one person becomes a released column); ``handle_unknown=
"error"`` raises on a value outside the list (which would tell that someone
holds one); ``min_frequency``, ``max_categories`` and
``"infrequent_if_exist"`` depend on the counts. A ``ColumnTransformer`` is
public when every transformer it holds (and its ``remainder``) is, and its
output is dense or sparse whatever the rows: its ``sparse_output_`` is the
rows' density against ``sparse_threshold`` where an output is sparse (a
sparse encoder's, or sparse ``X`` passed through: review 93 F1), so only
``sparse_threshold=0`` is public.
"""


import numpy as np


def is_public_onehot(step):
    """A ``sklearn.preprocessing.OneHotEncoder`` (exactly, not a subclass)
    whose fitted state is a function of its parameters: ``categories`` a
    list of non-empty lists, ``handle_unknown="ignore"`` (an unknown value
    is a row of zeros), no ``min_frequency`` nor ``max_categories``, and
    ``drop=None``: with a drop, scikit-learn's transform warns "Found unknown
    categories" when a row holds a value outside the lists, a warning that
    tells someone does (it is emitted before the private step's charge)."""
    from sklearn.preprocessing import OneHotEncoder

    if type(step) is not OneHotEncoder:
        return False
    categories = step.categories
    if isinstance(categories, str) or not isinstance(
            categories, (list, tuple, np.ndarray)) or len(categories) == 0:
        return False
    for listed in categories:  # bytes: never a pandas column's (review 94 F2)
        if isinstance(listed, (str, bytes)) or np.ndim(listed) != 1 \
                or len(listed) == 0 or any(isinstance(v, bytes) for v in listed):
            return False
    return (step.handle_unknown == "ignore" and step.min_frequency is None
            and step.max_categories is None and step.drop is None)


def is_public_column_transformer(step, is_public, dense=True):
    """A ``sklearn.compose.ColumnTransformer`` (exactly) whose transformers
    and ``remainder`` are ``"drop"``, ``"passthrough"`` or ``is_public``,
    whose columns are chosen by names, indices, masks or a
    ``make_column_selector`` (dtypes and names: public; another callable
    may read the values), and whose output is dense whatever the rows:
    ``sparse_threshold=0`` (not checked without ``dense``). Otherwise its
    ``sparse_output_`` is the rows' density against the threshold wherever
    a part is sparse: a sparse encoder's, and sparse ``X`` passed through or
    scaled (review 93 F1: two neighbouring CSR tables, 0.2994 and 0.3028
    dense, fitted sparse and dense)."""
    from sklearn.compose import ColumnTransformer, make_column_selector

    if type(step) is not ColumnTransformer:
        return False
    steps = [(t, cols) for _, t, cols in step.transformers]
    steps.append((step.remainder, None))
    for transformer, columns in steps:
        if callable(columns) and type(columns) is not make_column_selector:
            return False
        if not (isinstance(transformer, str) and transformer in (
                "drop", "passthrough")) and not is_public(transformer):
            return False
    return not dense or step.sparse_threshold == 0


def is_public_encoding(step):
    """A public ``OneHotEncoder`` (:func:`is_public_onehot`), or a public
    ``ColumnTransformer`` or ``Pipeline`` holding one, at any depth (a
    branch ``Pipeline(constant fill, encoder)``: review 114 F1)."""
    if is_public_onehot(step):
        return True
    from sklearn.pipeline import Pipeline

    from ._search_plan import _is_stateless

    if type(step) is Pipeline:
        return _is_stateless(step) and any(
            is_public_encoding(s) for _, s in step.steps)
    return is_public_column_transformer(step, _is_stateless) and any(
        is_public_encoding(t) for _, t, _ in step.transformers)


def template_row(empty):
    """One row of public values of ``empty``'s columns and dtypes (``X``
    without its rows): zeros in numeric columns, missing values in the
    others. What public steps make of it has the width (and the kind) of
    what they make of any rows: a public encoder maps a value outside its
    list, or a missing one, to zeros, and keeps its width."""
    if hasattr(empty, "iloc"):
        import pandas as pd

        return pd.DataFrame({
            name: pd.Series([0] if pd.api.types.is_numeric_dtype(dtype)
                            and not isinstance(dtype, pd.CategoricalDtype)
                            else [None], dtype=dtype)
            for name, dtype in empty.dtypes.items()}, columns=empty.columns)
    dtype = getattr(empty, "dtype", None)
    if isinstance(empty, np.ndarray) and empty.ndim == 2:
        if dtype.kind in "biuf":
            return np.zeros((1, empty.shape[1]), dtype=dtype)
        return np.full((1, empty.shape[1]), None, dtype=object)
    return None


def texts_given(row):
    """``row`` (public rows: :func:`template_row`) with its text columns
    (object or string dtype) holding ``""`` instead of a missing value: a
    public value some steps need (a constant SimpleImputer on a pandas
    ``string`` column raises on ``pd.NA``: review 116 F3). Unchanged where
    it holds none."""
    if not hasattr(row, "iloc"):
        return row
    import pandas as pd

    text = [name for name, dtype in row.dtypes.items()
            if pd.api.types.is_object_dtype(dtype)
            or pd.api.types.is_string_dtype(dtype)
            and not isinstance(dtype, pd.CategoricalDtype)]
    if not text:
        return row
    row = row.copy()
    for name in text:
        row[name] = pd.Series([""] * len(row), dtype=row[name].dtype,
                              index=row.index)
    return row


def encoded_width(heads, empty):
    """``(width, names)`` of what ``heads`` make of ``X``, where every head
    is a public map and one at least a public encoding (else None): their
    output on :func:`template_row`, or where they fail on it with its text
    given (:func:`texts_given`; a function of the steps and of ``X``'s
    columns and dtypes only). None where they fail on both, or where it is
    not numbers (a text column passed through): the private step would
    refuse any rows."""
    from sklearn.base import clone
    from sklearn.pipeline import Pipeline

    from ._search_plan import _is_stateless
    from ._warning_rules import private_computation

    if not any(is_public_encoding(h) for h in heads) or not all(
            _is_stateless(h) for h in heads):
        return None
    row = None if empty is None else template_row(empty)
    if row is None:
        return None
    for rows in (row, texts_given(row)):  # text missing, then given
        try:
            with private_computation():
                out = clone(Pipeline([(f"s{i}", h) for i, h in
                                      enumerate(heads)])).fit_transform(rows)
            break
        except Exception:  # noqa: BLE001 - public steps; their width unknown
            out = None
    if out is None:
        return None
    if len(getattr(out, "shape", ())) != 2 or not _numeric(out):
        return None
    columns = getattr(out, "columns", None)
    return int(out.shape[1]), (None if columns is None
                               else np.asarray(columns, dtype=object))


def _numeric(out):
    dtypes = list(out.dtypes) if hasattr(out, "dtypes") else [out.dtype]
    return all(getattr(t, "kind", "O") in "biuf" for t in dtypes)


def check_encoded_rows(heads_list, X):
    """Refuse, before a search's charge, rows that the public encoders
    first in its candidates' Pipelines (``heads_list``: each candidate's
    steps before its private one) cannot read: infinity in a column they
    encode, a cell that is not hashable, or text they pass on (their output
    on :func:`template_row` is not numbers). Their fitted state is public,
    and their output per row: what they do on all rows they do on every
    fold's; a failure on some rows, after the charge, would tell that
    someone holds such a value. Like the NaN the bare private steps refuse
    before their charge, such rows are outside the domain the guarantee is
    about. Nothing of the values is quoted."""
    from sklearn.base import clone

    from ._warning_rules import private_computation

    checked = set()
    for heads in heads_list:
        if not heads or not is_public_encoding(heads[0]):
            continue
        first = heads[0]
        key = repr(first.get_params(deep=True))
        if key in checked:
            continue
        checked.add(key)
        empty = X.iloc[:0] if hasattr(X, "iloc") else np.asarray(X)[:0]
        where = f"The public encoder {type(first).__name__}"
        if encoded_width([first], empty) is None:
            raise ValueError(
                f"{where} before the private estimator does not make numbers "
                "of X's columns (it passes on a text column, or fails on X's "
                "columns and dtypes): encode or drop every non-numeric column. "
                "The search was refused before it spent any budget.")
        try:  # the whole step: encoders in its remainder or nested too
            with private_computation():  # (review 93 F2)
                clone(first).fit_transform(X)
        except Exception:  # noqa: BLE001 - never quoted, before the charge
            raise ValueError(
                f"{where} before the private estimator cannot read a value of "
                "X (infinity in a numeric column it encodes, a cell of a type "
                "it cannot compare, or a value a step it holds fails on): "
                "outside the domain the search's guarantee is about. The value "
                "is not quoted: it is private. The search was refused before "
                "it spent any budget.") from None


def refuse_inferred_categories(X):
    """Refuse, before a search's charge, a categorical column of ``X``, a
    DataFrame read by a public encoding first in every candidate's Pipeline
    (:meth:`PrivateGridSearchCV._validate_rows`). scikit-learn's encoder
    reads it in its categories' dtype, which categories inferred from the
    values make int64 or object by the rows (review 94 F1: the released
    ``categories_``'s dtype, and an unsorted list refused or not, told
    whether a row was text). Casting it for the search alone changed which
    rows were refused (review 95 F1) and left the refitted model unable to
    read the caller's table (F2): the column is refused by its dtype
    (public), and the caller casts it."""
    named = [name for name, dtype in X.dtypes.items()
             if type(dtype).__name__ == "CategoricalDtype"]
    if named:
        raise ValueError(
            f"X's column(s) {', '.join(map(repr, named))} are pandas "
            "categoricals, whose categories may come from the rows: the "
            "encoder reads them in those categories' dtype. Give them as text "
            "(X.astype({name: object})) before the search; the encoder's "
            "explicit lists decide its columns. The search was refused before "
            "it spent any budget.")
