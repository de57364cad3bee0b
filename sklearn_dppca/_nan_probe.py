"""Whether the public steps before a search's private step refuse NaN
(review 106 F1), found before the charge on public rows of NaN.

A candidate whose private step has steps before it is fitted with
``non_finite="clip"``: NaN in ``X`` is inside the guarantee's domain, for
a public fill or the step's map. A step before it that refuses NaN
(``FunctionTransformer(validate=True)``) then failed the search after its
charge on a dataset with one NaN, and fitted on its neighbour: whether the
search failed was a function of one row. The steps are probed, before the
charge, on rows of NaN of ``X``'s width and columns (public); where they
raise, the search refuses NaN in ``X`` before its charge, as it refuses it
for a private step that reads ``X`` itself
(:func:`~sklearn_dppca._search_run._check_raw_rows`).
"""

import numpy as np
from scipy import sparse
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import Pipeline

from ._search_plan import _value_key
from ._search_rows import _is_passthrough
from ._warning_rules import private_computation

#: Entries of a probe of rows with one NaN column each, per call of the
#: steps (at most 256 rows; fewer on a wide ``X``): 32 MiB of float64.
PROBE_ENTRIES = 1 << 22


def heads_refuse_nan(heads_list, n_features, names=None, sparse_rows=False):
    """Whether the public steps of some entry of ``heads_list`` (each
    candidate's steps before its private one) raise on rows of NaN of
    ``X``'s ``n_features`` columns (a DataFrame of the columns ``names``
    where given; a CSR matrix where ``sparse_rows``): a row all NaN, and,
    where the steps hold a ``ColumnTransformer`` (which treats columns
    differently), one row per column with NaN in that column only and zeros
    elsewhere. Any failure counts as a refusal of NaN: the steps are a
    user's, and a failure the probe cannot explain would otherwise come
    after the charge on some rows. Public: the steps, ``X``'s width and
    columns; each candidate's steps are cloned, never fitted in place."""
    seen = set()
    for heads in heads_list:
        steps = [h for h in heads if not _is_passthrough(h)]
        if not steps:
            continue
        key = _value_key(steps)  # by value: repr abbreviates arrays
        if key in seen:
            continue
        seen.add(key)
        if any(_fails(steps, rows, names, sparse_rows)
               for rows in _probe_rows(steps, n_features)):
            return True
    return False


def _probe_rows(steps, n_features):
    """The probes: a row all NaN, then (a ``ColumnTransformer`` among the
    steps) rows with NaN in one column each, at most
    :data:`PROBE_ENTRIES` entries at a time."""
    yield np.full((1, n_features), np.nan)
    if not any(_holds_column_transformer(step) for step in steps):
        return
    block = max(1, min(256, PROBE_ENTRIES // max(n_features, 1)))
    for start in range(0, n_features, block):
        stop = min(start + block, n_features)
        rows = np.zeros((stop - start, n_features))
        rows[np.arange(stop - start), np.arange(start, stop)] = np.nan
        yield rows


def _holds_column_transformer(step):
    if isinstance(step, ColumnTransformer):
        return True
    if isinstance(step, Pipeline):
        return any(_holds_column_transformer(s) for _, s in step.steps)
    return False


def _fails(steps, rows, names, sparse_rows):
    """Whether a clone of ``steps`` raises on ``rows`` (silenced: public
    values, no warning of theirs is a release)."""
    if names is not None:
        import pandas as pd

        rows = pd.DataFrame(rows, columns=list(names))
    elif sparse_rows:
        rows = sparse.csr_matrix(rows)
    probe = clone(Pipeline([(f"s{i}", h) for i, h in enumerate(steps)]))
    try:
        with private_computation():
            probe.fit_transform(rows)
    except Exception:  # noqa: BLE001 - a user's step refusing the probe
        return True
    return False


def search_refuses_nan(heads_list, X, n_features, names=None):
    """:func:`heads_refuse_nan` for a search's ``X`` (before it is read:
    its width, its columns' names, whether sparse; ``names``: a Dask
    DataFrame's columns). Where every candidate opens with a public
    encoder on a DataFrame (text columns, which no check over every column
    reads), the steps are probed on the encoders' public row
    (:func:`~sklearn_dppca._public_encoders.template_row`) with NaN in its
    float columns, and NaN in those columns of ``X`` is refused here
    (False is returned: nothing is left to refuse)."""
    from sklearn.utils.validation import _get_feature_names

    from ._public_encoders import is_public_encoding

    if hasattr(X, "iloc"):
        if heads_list and all(h and is_public_encoding(h[0]) for h in heads_list):
            _refuse_encoded_nan(heads_list, X)
            return False
        names = _get_feature_names(X)
    return heads_refuse_nan(heads_list, n_features, names,
                            sparse_rows=sparse.issparse(X))


def _refuse_encoded_nan(heads_list, X):
    """Refuse NaN in the float columns of the DataFrame ``X`` where the
    steps of some entry of ``heads_list`` (each opening with a public
    encoder) raise on the encoders' public row with NaN in those columns:
    their fit would fail on it after the charge (the encoders' own check,
    :func:`~sklearn_dppca._public_encoders.check_encoded_rows`, runs the
    first step alone)."""
    import pandas as pd

    from ._public_encoders import template_row
    from ._search_run import _check_raw_rows

    floats = [name for name, dtype in X.dtypes.items()
              if pd.api.types.is_float_dtype(dtype)]
    row = template_row(X.iloc[:0]) if floats else None
    if row is None:
        return
    row[floats] = np.nan
    seen = set()
    for heads in heads_list:
        key = _value_key(heads)
        if key in seen:
            continue
        seen.add(key)
        if _fails(heads, row, None, False):
            _check_raw_rows([], X[floats], nan=True)
            return
