"""Which columns of ``X`` the public steps before a search's private step
refuse NaN in (review 106 F1, review 108 F1, F3), found before the charge
on public rows of NaN.

A candidate whose private step has steps before it is fitted with
``non_finite="clip"``: NaN in ``X`` is inside the guarantee's domain, for
a public fill or the step's map. A step before it that refuses NaN
(``FunctionTransformer(validate=True)``) then failed the search after its
charge on a dataset with one NaN, and fitted on its neighbour: whether the
search failed was a function of one row. The steps are probed, before the
charge, on rows of X's width and columns (public) with NaN in some of the
columns that can hold it (all but integer and boolean ones) and zeros
elsewhere; the columns where NaN makes them raise are found, and the
search refuses NaN in those columns of ``X`` before its charge, as it
refuses it for a private step that reads ``X`` itself
(:func:`~sklearn_dppca._search_run._check_raw_rows`).

The cost is linear in ``X``'s width: a probe of all the float columns,
one per branch of a leading ``ColumnTransformer`` (its remainder one
more), each of at most three rows, and a bisection of the sets whose probe
raises, at most :data:`SPLIT_CALLS` probes per candidate's steps (a set
left unsplit is refused whole: conservative). Review 108 F3: one row per
column made ``n_features ** 2`` entries (15 s at 32 000 columns).
"""

from collections import deque

import numpy as np
from scipy import sparse
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import Pipeline

from ._public_encoders import texts_given
from ._search_plan import _value_key
from ._search_rows import _is_passthrough, _runs_your_code
from ._warning_rules import private_computation

#: Probes that split the sets of columns whose probe raised, per distinct
#: candidate's steps; the sets still unsplit then are refused whole.
SPLIT_CALLS = 256


def heads_nan_columns(heads_list, n_features, names=None, sparse_rows=False,
                      floats=None, dtypes=None):
    """The positions (a sorted tuple) of the columns of ``X`` where NaN
    makes the public steps of some entry of ``heads_list`` (each
    candidate's steps before its private one) raise, probed on rows of
    ``X``'s ``n_features`` columns (a DataFrame of the columns ``names``,
    of ``dtypes`` where given; a CSR matrix where ``sparse_rows``).
    ``floats``: the positions of the columns that can hold NaN (all where
    None). Each probe of a set ``S`` of columns is one fit of the steps on
    rows with NaN in all of ``S``, and (``S`` of two or more) in every
    other column of ``S``, then in the others, zeros elsewhere: a step
    refusing a NaN beside numbers raises there too. Any failure counts as a
    refusal of NaN: the steps are a user's, and a failure the probe cannot
    explain would otherwise come after the charge on some rows. Where the
    steps raise on the probe of every float column but on none of the
    smaller sets, every float column is refused. Public: the steps,
    ``X``'s width, columns and dtypes; each candidate's steps are cloned,
    never fitted in place."""
    columns = tuple(range(n_features) if floats is None else floats)
    refused, seen = set(), set()
    if not columns:
        return ()
    base = _base_rows(n_features, names, dtypes)
    for heads in heads_list:
        steps = [h for h in heads if not _is_passthrough(h)]
        if not steps:
            continue
        key = _value_key(steps)  # by value: repr abbreviates arrays
        if key in seen:
            continue
        seen.add(key)
        rows = _probe_base(steps, base, sparse_rows)

        def probe(cols, steps=steps, rows=rows):
            return _fails(steps, _nan_rows(rows, cols), sparse_rows)

        refused |= _refused(probe, columns,
                            _branches(steps, rows, columns, names))
    return tuple(sorted(refused))


def heads_refuse_nan(heads_list, n_features, names=None, sparse_rows=False):
    """Whether NaN in some column of ``X`` makes the public steps of some
    entry of ``heads_list`` raise (:func:`heads_nan_columns`)."""
    return bool(heads_nan_columns(heads_list, n_features, names, sparse_rows))


def _refused(probe, columns, groups):
    """The columns whose NaN makes ``probe`` (a set of columns -> whether
    the steps raise) raise: the set of all ``columns``, then each of
    ``groups`` (a leading ``ColumnTransformer``'s branches), then, breadth
    first, the halves of each set that raised. A set that raised, neither
    of whose halves does, is refused whole (NaN in its columns together);
    past :data:`SPLIT_CALLS` probes, the sets left are refused whole."""
    whole = probe(columns)
    if groups is None:
        raising = [columns] if whole else []
    else:
        raising = [g for g in groups if probe(g)]
        if whole and not raising:
            return set(columns)
    refused, pending, calls = set(), deque(raising), 0
    while pending:
        cols = pending.popleft()
        if len(cols) == 1 or calls + 2 > SPLIT_CALLS:
            refused.update(cols)
            continue
        halves = (cols[:len(cols) // 2], cols[len(cols) // 2:])
        failing = [half for half in halves if probe(half)]
        calls += 2
        if failing:
            pending.extend(failing)
        else:
            refused.update(cols)
    return refused


def _branches(steps, base, columns, names):
    """The float columns of each branch of a ``ColumnTransformer`` first
    among ``steps`` (in a Pipeline first among them too), the columns of
    none (dropped or its remainder) as one more; None where there is none,
    or where its columns are not resolved on the probe's row (a callable
    that is not scikit-learn's selector): every column is then probed as
    one set, and split where it raises."""
    from sklearn.compose import make_column_selector
    from sklearn.utils._indexing import _get_column_indices

    step = steps[0]
    while isinstance(step, Pipeline):
        inner = [s for _, s in step.steps if not _is_passthrough(s)]
        if not inner:
            return None
        step = inner[0]
    if not isinstance(step, ColumnTransformer):
        return None
    frame = base.iloc[:1] if hasattr(base, "iloc") else base[:1]
    floats, chosen, groups = set(columns), set(), []
    for _, _, selection in step.transformers:
        try:
            if callable(selection):
                if type(selection) is not make_column_selector:
                    return None
                selection = selection(frame)
            indices = _get_column_indices(frame, selection)
        except Exception:  # noqa: BLE001 - refused elsewhere, or at the fit
            return None
        chosen.update(indices)
        groups.append(tuple(i for i in indices if i in floats))
    groups.append(tuple(i for i in columns if i not in chosen))
    return [g for g in groups if g]


def _base_rows(n_features, names, dtypes):
    """Three rows of zeros of ``X``'s width: a float array, or with
    ``names`` a DataFrame of those columns (of ``dtypes``, a mapping of
    name to dtype, where given, so that a step reading an integer column
    reads integers)."""
    rows = np.zeros((3, n_features))
    return rows if names is None else _frame(rows, names, dtypes)


def _frame(rows, names, dtypes):
    import pandas as pd

    frame = pd.DataFrame(rows, columns=list(names))
    if dtypes:
        others = {name: dtype for name, dtype in dtypes.items()
                  if dtype != np.float64}
        try:
            frame = frame.astype(others)
        except Exception:  # noqa: BLE001 - a dtype zeros do not fit: floats
            pass
    return frame


def _nan_rows(base, cols):
    """``base`` with NaN in the columns ``cols``: in all of them (one row),
    then (two or more) in every other one, then in the others."""
    cols = list(cols)
    parts = [cols] if len(cols) < 2 else [cols, cols[0::2], cols[1::2]]
    if hasattr(base, "iloc"):
        rows = base.iloc[:len(parts)].copy()
        for i, part in enumerate(parts):
            rows.iloc[i, part] = np.nan
        return rows
    rows = base[:len(parts)].copy()
    for i, part in enumerate(parts):
        rows[i, part] = np.nan
    return rows


def _fails(steps, rows, sparse_rows):
    """Whether a clone of ``steps`` raises on ``rows`` (silenced: public
    values, no warning of theirs is a release)."""
    return _error(steps, rows, sparse_rows) is not None


def _error(steps, rows, sparse_rows):
    """What a clone of ``steps`` raises on ``rows``, else None."""
    if sparse_rows:
        rows = sparse.csr_matrix(rows)
    probe = clone(Pipeline([(f"s{i}", h) for i, h in enumerate(steps)]))
    try:
        with private_computation():
            probe.fit_transform(rows)
    except Exception as error:  # noqa: BLE001 - a user's step refusing the probe
        return error
    return None


def _probe_base(steps, base, sparse_rows):
    """The rows without NaN the probes of ``steps`` start from: ``base``
    (zeros, or the encoders' public row, with text missing), or where the
    steps raise on it, ``base`` with its text given (``""``: a constant
    SimpleImputer on a pandas ``string`` column raises on ``pd.NA``, review
    116 F3). Where they raise on both, NaN is not the cause, and a failure
    on every probe would blame NaN in every column (review 114 F2: a
    PublicScaler's ranges missing a column, refused as NaN in columns that
    had none): refused, before the charge, with the steps' own error.
    Public: the steps and ``X``'s columns. Steps that run a function of
    yours (a ``FunctionTransformer``'s ``func``) may refuse these rows only,
    and fit on the data: they are probed from ``base`` as before (NaN
    refused in every column whose probe raises)."""
    if any(_runs_your_code(step) for step in steps):
        return base
    error = _error(steps, base, sparse_rows)
    if error is None:
        return base
    given = texts_given(base)
    if given is not base and _error(steps, given, sparse_rows) is None:
        return given
    raise ValueError(
        f"{str(error).rstrip('.')} (the steps before the private "
        "estimator raise this on rows of public values of X's columns, "
        "without NaN: zeros, and text missing or given). The search was "
        "refused before it spent any budget.") from error


def _nan_capable(X):
    """The positions of ``X``'s columns that can hold NaN, where fewer than
    all (a DataFrame's columns but those of a NumPy integer or boolean
    dtype; none of such an array), else None. A nullable integer column
    holds missing values, which its validation makes NaN: it is probed."""
    if hasattr(X, "iloc") and hasattr(X, "dtypes"):
        return tuple(i for i, dtype in enumerate(X.dtypes)
                     if not _integral(dtype))
    return () if _integral(getattr(X, "dtype", None)) else None


def _integral(dtype):
    return isinstance(dtype, np.dtype) and dtype.kind in "biu"


def search_nan_columns(heads_list, X, n_features, names=None):
    """:func:`heads_nan_columns` for a search's ``X`` (before it is read:
    its width, its columns' names and dtypes, whether sparse; ``names``: a
    Dask DataFrame's columns, whose chunks reach the steps of one dtype).
    Where every candidate opens with a public encoder on a DataFrame (text
    columns, which no check over every column reads), the steps are probed
    on the encoders' public row
    (:func:`~sklearn_dppca._public_encoders.template_row`) with NaN in
    float columns, and NaN in the columns refused there is refused here
    (``()`` is returned: nothing is left to refuse). A DataFrame with a
    categorical column is not probed (``()``): the search refuses it."""
    from sklearn.utils.validation import _get_feature_names

    from ._public_encoders import is_public_encoding

    dtypes = None
    if hasattr(X, "iloc"):
        if any(type(dtype).__name__ == "CategoricalDtype" for dtype in X.dtypes):
            # its categories may come from the rows, and the probe's row
            # would read them (review 112 F1: which refusal a search raised
            # told whether a row was text); the search refuses such a column
            # by its dtype next, in every case
            return ()
        if heads_list and all(h and is_public_encoding(h[0]) for h in heads_list):
            _refuse_encoded_nan(heads_list, X)
            return ()
        names = _get_feature_names(X)
        dtypes = dict(X.dtypes.items())
    return heads_nan_columns(heads_list, n_features, names,
                             sparse_rows=sparse.issparse(X),
                             floats=_nan_capable(X), dtypes=dtypes)


def _refuse_encoded_nan(heads_list, X):
    """Refuse NaN in the float columns of the DataFrame ``X`` where the
    steps of some entry of ``heads_list`` (each opening with a public
    encoder) raise on the encoders' public row with NaN in those columns
    (:func:`_refused`): their fit would fail on it after the charge (the
    encoders' own check,
    :func:`~sklearn_dppca._public_encoders.check_encoded_rows`, runs the
    first step alone)."""
    import pandas as pd

    from ._public_encoders import template_row
    from ._search_run import _check_raw_rows

    # the encoders' own check reads the text columns' missing values
    floats = tuple(i for i, dtype in enumerate(X.dtypes)
                   if pd.api.types.is_float_dtype(dtype))
    row = template_row(X.iloc[:0]) if floats else None
    if row is None:
        return
    base = row.iloc[[0, 0, 0]].reset_index(drop=True)
    refused, seen = set(), set()
    for heads in heads_list:
        key = _value_key(heads)
        if key in seen:
            continue
        seen.add(key)
        rows = _probe_base(heads, base, False)

        def probe(cols, heads=heads, rows=rows):
            return _fails(heads, _nan_rows(rows, cols), False)

        refused |= _refused(probe, floats, None)
    if refused:
        _check_raw_rows([], X, nan=tuple(sorted(refused)))
