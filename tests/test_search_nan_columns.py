"""The search's NaN probe refuses NaN only in the columns where the steps
before the private one raise on it (review 108 F1), at a cost linear in
``X``'s width (review 108 F3). NaN elsewhere (a column a fill maps, one a
ColumnTransformer drops, beside an integer column the steps cast) fitted
as the candidate fits, but was refused before the charge as if anywhere."""

import warnings

import numpy as np
import pytest

pd = pytest.importorskip("pandas")

from sklearn.compose import ColumnTransformer  # noqa: E402
from sklearn.impute import SimpleImputer  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.preprocessing import FunctionTransformer  # noqa: E402

from sklearn_dppca import BudgetAccountant, PrivatePCA, _nan_probe  # noqa: E402
from sklearn_dppca._nan_probe import heads_nan_columns  # noqa: E402
from sklearn_dppca.linear_model import PrivateRidge  # noqa: E402
from sklearn_dppca.model_selection import PrivateGridSearchCV  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")


def _frame(nan_in=None, ints=False):
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(300, 3)), columns=["a", "b", "c"])
    if ints:
        X["n"] = rng.integers(0, 5, 300)
    if nan_in is not None:
        X.loc[17, nan_in] = np.nan
    return X


def _fit(head, X, supervised=False):
    """The search's charges, or the error it raised."""
    last, grid = ((PrivateRidge((-5, 5), data_norm=3.0), {"last__alpha": [1.0, 2.0]})
                  if supervised else
                  (PrivatePCA(data_norm=3.0), {"last__n_components": [1, 2]}))
    budget = BudgetAccountant(epsilon=100, delta=1e-2)
    y = np.random.default_rng(1).normal(size=len(X))
    search = PrivateGridSearchCV(Pipeline([("head", head), ("last", last)]), grid,
                                 epsilon=2.0, delta=1e-6, cv=3, accountant=budget)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            search.fit(X, y)
    except ValueError as error:
        assert budget.n_charges == 0, error
        assert "refused before it spent any budget" in str(error)
        return error
    return budget.n_charges


def _fill_and_check():
    return ColumnTransformer([
        ("fill", SimpleImputer(strategy="constant", fill_value=0.0,
                               keep_empty_features=True), ["a"]),
        ("check", FunctionTransformer(np.tanh, validate=True), ["b", "c"])],
        sparse_threshold=0)


@pytest.mark.parametrize("supervised", [False, True])
@pytest.mark.parametrize("kind", ["frame", "dask"])
def test_nan_in_a_filled_column_fits(kind, supervised):
    """Review 108 r1: NaN in ``a``, which the constant fill maps, fitted by
    the candidate, was refused; NaN in ``b``, which the validating branch
    reads, is refused before the charge (its fit fails on it)."""
    def as_kind(X):
        if kind == "dask":
            dd = pytest.importorskip("dask.dataframe")
            return dd.from_pandas(X, npartitions=3)
        return X

    assert _fit(_fill_and_check(), as_kind(_frame("a")), supervised) == 1
    error = _fit(_fill_and_check(), as_kind(_frame("b")), supervised)
    assert "contains NaN" in str(error)
    assert heads_nan_columns([[_fill_and_check()]], 3, names=["a", "b", "c"]) \
        == (1, 2)


def test_nan_in_a_dropped_column_fits():
    """Review 108 r3: a ColumnTransformer validating ``a`` and ``b`` drops
    ``c``: NaN in ``c`` fits; NaN in ``a`` is refused."""
    ct = ColumnTransformer([("v", FunctionTransformer(np.tanh, validate=True),
                             ["a", "b"])], remainder="drop", sparse_threshold=0)
    assert _fit(ct, _frame("c")) == 1
    assert "contains NaN" in str(_fit(ct, _frame("a")))


def test_an_integer_column_is_not_probed_with_nan():
    """Review 108 r7: the probe wrote NaN into an int64 column, whose cast
    then raised, so NaN in the float column ``a`` was refused though the
    candidate fits: only columns that can hold NaN are probed, the others
    keep their dtype."""
    head = FunctionTransformer(lambda d: d.assign(n=d["n"].astype("int64") % 2))
    assert _fit(head, _frame("a", ints=True)) == 1
    casting = FunctionTransformer(lambda d: d.assign(b=d["b"].astype("int64")))
    assert "contains NaN" in str(_fit(casting, _frame("b", ints=True)))
    assert _fit(casting, _frame("a", ints=True)) == 1  # bisected: b only


def test_an_integer_array_is_not_probed():
    """An integer array holds no NaN: nothing to probe or refuse."""
    from sklearn_dppca._nan_probe import search_nan_columns

    X = np.arange(12).reshape(4, 3)
    strict = FunctionTransformer(np.tanh, validate=True)
    assert search_nan_columns([[strict]], X, 3) == ()
    assert search_nan_columns([[strict]], X.astype(float), 3) == (0, 1, 2)


def _counting(monkeypatch):
    rows = []
    fails = _nan_probe._fails

    def counted(steps, probe, sparse_rows):
        rows.append(probe.shape[0])
        return fails(steps, probe, sparse_rows)

    monkeypatch.setattr(_nan_probe, "_fails", counted)
    return rows


@pytest.mark.parametrize("width", [300, 3000])
def test_the_probe_costs_rows_per_branch_not_per_column(width, monkeypatch):
    """Review 108 F3: one row per column made ``width ** 2`` entries; a
    ColumnTransformer that maps NaN is probed on a few rows per branch
    (its remainder one more), whatever the width."""
    rows = _counting(monkeypatch)
    fill = SimpleImputer(strategy="constant", fill_value=0.0,
                         keep_empty_features=True)
    third = width // 3
    ct = ColumnTransformer([("f1", fill, slice(0, third)),
                            ("f2", FunctionTransformer(np.tanh),
                             slice(third, 2 * third))],
                           remainder="passthrough", sparse_threshold=0)
    assert heads_nan_columns([[ct]], width) == ()
    assert len(rows) == 4  # all the columns, two branches, the remainder
    assert sum(rows) <= 3 * 4


def test_a_refused_column_is_found_in_log_probes(monkeypatch):
    """One NaN-refusing column among many is found by bisection, in about
    two probes per halving; the others pass."""
    rows = _counting(monkeypatch)
    width = 4096
    ct = ColumnTransformer([("v", FunctionTransformer(np.tanh, validate=True),
                             [1234])], remainder="passthrough",
                           sparse_threshold=0)
    assert heads_nan_columns([[ct]], width) == (1234,)
    assert len(rows) <= 4
    rows.clear()
    def refuse_777(X):
        if np.isnan(X[:, 777]).any():
            raise ValueError("NaN in column 777")
        return X

    head = FunctionTransformer(refuse_777)
    assert heads_nan_columns([[head]], width) == (777,)
    assert len(rows) <= 1 + 2 * 12


def test_nan_in_every_float_column_together_refuses_them_all():
    """Steps that raise only on NaN in every column together (no smaller
    probe raises) refuse NaN in every column: sound, conservative."""
    def all_nan(X):
        X = np.asarray(X, dtype=float)
        if np.isnan(X).all(axis=1).any():
            raise ValueError("a row all NaN")
        return X

    ct = ColumnTransformer([("f", FunctionTransformer(all_nan), [0, 1, 2, 3])],
                           sparse_threshold=0)
    assert heads_nan_columns([[ct]], 4) == (0, 1, 2, 3)
    assert heads_nan_columns([[FunctionTransformer(all_nan)]], 4) == (0, 1, 2, 3)


def test_bisection_is_capped(monkeypatch):
    """Every column refused: the bisection stops after SPLIT_CALLS probes
    and refuses the sets left whole."""
    rows = _counting(monkeypatch)
    monkeypatch.setattr(_nan_probe, "SPLIT_CALLS", 8)
    strict = FunctionTransformer(np.tanh, validate=True)
    assert heads_nan_columns([[strict]], 1000) == tuple(range(1000))
    assert len(rows) <= 1 + 8


def test_a_nullable_integer_column_is_probed():
    """A nullable integer column holds missing values (NaN once
    validated): it is probed like a float column, and its missing value
    refused before the charge where a step refuses NaN."""
    X = _frame()[["a"]].assign(n=pd.array(np.arange(300) % 5, dtype="Int64"))
    X.loc[17, "n"] = pd.NA
    strict = FunctionTransformer(np.tanh, validate=True)
    assert "contains NaN" in str(_fit(strict, X))


def test_the_check_of_some_columns_of_sparse_rows_reads_their_values():
    """The NaN check of some columns of sparse X reads the values stored in
    those columns, whatever the format (review 109 F1: it made a CSC copy of
    X whole before the charge)."""
    from scipy import sparse

    from sklearn_dppca._search_run import _all_finite, _columns

    X = sparse.random(50, 8, density=0.4, format="csr", random_state=0)
    X.data[np.flatnonzero(X.indices == 3)[0]] = np.nan
    for rows in (X, X.tocsc(), X.tocoo()):
        assert not _all_finite(_columns(rows, (3,)))
        assert not _all_finite(_columns(rows, (0, 3)))
        assert _all_finite(_columns(rows, (1, 2)))
        assert _all_finite(_columns(rows, ()))
        assert np.isnan(X.data).sum() == 1  # X is not written


@pytest.mark.parametrize("text_row", [False, True])
def test_a_categorical_column_is_refused_by_its_dtype_before_any_probe(text_row):
    """A DataFrame with a pandas categorical column is not probed: the
    probe's public row would read its categories, which come from the rows
    (review 112 F1: with int categories the encoder failed on the probe and
    the NaN refusal came first; with one row of text, the categorical one).
    Both neighbours get the same refusal, by the column's dtype."""
    from sklearn.preprocessing import OneHotEncoder

    n = 40
    a = np.random.default_rng(0).uniform(-1, 1, n)
    a[0] = np.nan
    c = [1, 2] * (n // 2)
    if text_row:
        c[5] = "b"
    X = pd.DataFrame({"a": a, "c": pd.Series(c, dtype="category")})
    encoder = ColumnTransformer(
        [("oh", OneHotEncoder(categories=[["a", "b"]], handle_unknown="ignore",
                              sparse_output=False), ["c"])],
        remainder="passthrough", sparse_threshold=0)
    pipe = Pipeline([("enc", encoder),
                     ("pca", PrivatePCA(data_norm=2.0, non_finite="clip"))])
    accountant = BudgetAccountant(epsilon=10, delta=1e-3)
    search = PrivateGridSearchCV(pipe, {"pca__n_components": [1, 2]}, epsilon=1,
                                 delta=1e-6, accountant=accountant, cv=2)
    with pytest.raises(ValueError, match="are pandas categoricals"):
        search.fit(X)
    assert accountant.spent[0] == 0
