"""A ColumnTransformer before a search's private step that selects columns
``X`` lacks (mend 123): X's columns are public (its schema), so the
candidate is refused before the charge, naming the column; it was charged,
then failed at its first fold fit. Valid selections are fitted as before."""

import warnings

import numpy as np
import pytest

pd = pytest.importorskip("pandas")

from sklearn.compose import ColumnTransformer, make_column_selector  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import OneHotEncoder  # noqa: E402

from sklearn_dppca import (  # noqa: E402
    BudgetAccountant,
    PrivatePCA,
    _search_rows,  # noqa: E402
)
from sklearn_dppca.linear_model import PrivateLDA  # noqa: E402
from sklearn_dppca.model_selection import PrivateGridSearchCV  # noqa: E402
from sklearn_dppca.preprocessing import PublicScaler  # noqa: E402

REGIONS = ["N", "S", "E"]


def _frame(n=60):
    rng = np.random.default_rng(0)
    return pd.DataFrame({"age": rng.uniform(0, 1, n),
                         "weight": rng.uniform(0, 1, n),
                         "region": rng.choice(REGIONS, n)})


def _scaler():
    return PublicScaler(ranges=(0.0, 1.0))


def _onehot():
    return OneHotEncoder(categories=[REGIONS], handle_unknown="ignore",
                         sparse_output=False)


def _search(columns, supervised, budget, **kw):
    tail = [PrivateLDA([0, 1], data_norm=3.0)] if supervised else []
    grid = ({"privatelda__alpha": [1.0, 2.0]} if supervised
            else {"privatepca__n_components": [1, 2]})
    return PrivateGridSearchCV(
        make_pipeline(columns, PrivatePCA(2, data_norm=3.0), *tail), grid,
        epsilon=3.0, cv=3, accountant=budget, **kw)


def _fit(search, frame, supervised):
    y = (frame["age"] > 0.5).astype(int).to_numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return search.fit(frame, y if supervised else None)


MISSING = {
    "top": lambda: ColumnTransformer(
        [("s", _scaler(), ["age", "no_such_column"])], sparse_threshold=0),
    "nested": lambda: ColumnTransformer(
        [("in", ColumnTransformer([("s", _scaler(), ["no_such_column"])],
                                  sparse_threshold=0), ["age", "weight"]),
         ("oh", _onehot(), ["region"])], sparse_threshold=0),
    "after a named scaler": lambda: [
        PublicScaler(ranges=(0.0, 1.0)).set_output(transform="pandas"),
        ColumnTransformer([("s", "passthrough", ["no_such_column"])],
                          sparse_threshold=0)],
}


@pytest.mark.parametrize("supervised", [False, True])
@pytest.mark.parametrize("case", sorted(MISSING))
def test_a_missing_column_is_refused_before_the_charge(case, supervised):
    frame = _frame()[["age", "weight"]] if case == "after a named scaler" \
        else _frame()
    steps = MISSING[case]()
    budget = BudgetAccountant()
    columns = steps if isinstance(steps, list) else [steps]
    search = _search(make_pipeline(*columns) if len(columns) > 1
                     else columns[0], supervised, budget)
    if len(columns) > 1:  # the scaler and the selection as two steps
        tail = search.estimator.steps[1:]
        search.estimator = make_pipeline(*columns, *(s for _, s in tail))
    with pytest.raises(ValueError, match="not columns of the dataframe.*"
                       "no_such_column") as refused:
        _fit(search, frame, supervised)
    assert budget.n_charges == 0
    assert budget.spent[0] == 0
    text = str(refused.value)
    assert "refused before the search spent any budget" in text
    assert "The budget of this search was spent" not in text


@pytest.mark.parametrize("supervised", [False, True])
def test_a_missing_column_raises_its_own_refusal(supervised):
    """Under error_score="raise" the candidate's refusal itself."""
    budget = BudgetAccountant()
    search = _search(MISSING["top"](), supervised, budget, error_score="raise")
    with pytest.raises(ValueError, match=r"transformer 's' selects columns "
                       r"that X does not have.*no_such_column.*refused before "
                       r"the search spent any budget"):
        _fit(search, _frame(), supervised)
    assert budget.n_charges == 0


VALID = {
    "names and an encoder": lambda: ColumnTransformer(
        [("s", _scaler(), ["age", "weight"]), ("oh", _onehot(), ["region"])],
        sparse_threshold=0),
    "selectors on an object column": lambda: ColumnTransformer(
        [("oh", _onehot(), make_column_selector(dtype_include=object)),
         ("s", _scaler(), make_column_selector(dtype_include="number"))],
        sparse_threshold=0),
    "indices and a remainder": lambda: ColumnTransformer(
        [("oh", _onehot(), [2])], remainder=_scaler(), sparse_threshold=0),
    "nested": lambda: ColumnTransformer(
        [("in", ColumnTransformer([("s", _scaler(), ["age"])],
                                  sparse_threshold=0), ["age", "weight"]),
         ("oh", _onehot(), ["region"])], sparse_threshold=0),
}


@pytest.mark.parametrize("supervised", [False, True])
@pytest.mark.parametrize("case", sorted(VALID))
def test_valid_selections_are_fitted_as_before(case, supervised, monkeypatch):
    """Names, indices, a remainder, selectors by dtype on a text column read
    by a public encoder, a nested ColumnTransformer: charged once and scored
    as without the check."""
    results = []
    for check in (True, False):
        if not check:
            monkeypatch.setattr(_search_rows, "unselected_columns",
                                lambda heads, empty: None)
        budget = BudgetAccountant()
        fitted = _fit(_search(VALID[case](), supervised, budget,
                              random_state=0), _frame(), supervised)
        assert budget.n_charges == 1
        results.append(fitted.cv_results_["mean_test_score"])
    np.testing.assert_array_equal(*results)
    assert np.isfinite(results[0]).all()


def test_what_is_not_known_without_rows_is_left_to_the_fit():
    """Selections not known here (a user's callable, no schema) are not
    checked: never a refusal of a step that could fit. Names selected from
    a scaler's NumPy output fail on every row: refused."""
    empty = _frame().iloc[:0]
    selection = ColumnTransformer([("s", "passthrough", ["age"])])
    numbers = empty[["age", "weight"]]
    refused = _search_rows.unselected_columns([_scaler(), selection], numbers)
    assert "only supported for dataframes" in str(refused)
    named = _scaler().set_output(transform="pandas")
    assert _search_rows.unselected_columns([named, selection], numbers) is None
    caller = ColumnTransformer([("s", "passthrough", lambda X: ["nope"])])
    assert _search_rows.unselected_columns([caller], empty) is None
    assert _search_rows.unselected_columns([selection], None) is None
    assert _search_rows.unselected_columns([selection], empty) is None


@pytest.mark.parametrize("supervised", [False, True])
def test_a_column_selector_on_an_array_is_refused_before_the_charge(supervised):
    """Review 108 F2: scikit-learn's make_column_selector reads a
    DataFrame's names and dtypes; on a NumPy X (its kind is public) it fails
    at any fit. Its failure was skipped as unknown, so both searches were
    charged and then failed; it is the candidate's public refusal now."""
    from sklearn.pipeline import Pipeline

    from sklearn_dppca.linear_model import PrivateRidge

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = X[:, 0] + rng.normal(size=300)
    ct = ColumnTransformer(
        [("t", "passthrough", make_column_selector(dtype_include="number"))],
        sparse_threshold=0)
    last, grid = ((PrivateRidge((-5, 5), data_norm=3.0), {"last__alpha": [1.0, 2.0]})
                  if supervised else
                  (PrivatePCA(data_norm=3.0), {"last__n_components": [1, 2]}))
    budget = BudgetAccountant(epsilon=100, delta=1e-2)
    search = PrivateGridSearchCV(Pipeline([("ct", ct), ("last", last)]), grid,
                                 epsilon=2.0, delta=1e-6, cv=3, accountant=budget)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="make_column_selector") as caught:
            search.fit(X, y)
    assert "before any budget was spent" in str(caught.value)
    assert budget.n_charges == 0
    assert budget.spent.epsilon == 0
    # on a DataFrame the same selector fits, charged once
    budget = BudgetAccountant(epsilon=100, delta=1e-2)
    PrivateGridSearchCV(Pipeline([("ct", ct), ("last", last)]), grid, epsilon=2.0,
                        delta=1e-6, cv=3, accountant=budget).fit(
        pd.DataFrame(X, columns=["a", "b", "c"]), y)
    assert budget.n_charges == 1


@pytest.mark.parametrize("supervised", [False, True])
@pytest.mark.parametrize("first", ["function", "scaler"])
def test_names_selected_from_an_array_are_refused_before_the_charge(first,
                                                                   supervised):
    """A step of NumPy output before a ColumnTransformer that selects by
    name: the selection fails on every row, and the step's output kind is
    public (its output on X's columns without rows, or on a row of zeros):
    refused before the charge; it was charged, then failed."""
    from sklearn.preprocessing import FunctionTransformer

    step = (FunctionTransformer(lambda Z: np.asarray(Z, dtype=float))
            if first == "function" else _scaler())
    selection = ColumnTransformer([("s", "passthrough", ["age"])],
                                  sparse_threshold=0)
    budget = BudgetAccountant()
    search = _search(make_pipeline(step, selection), supervised, budget)
    tail = search.estimator.steps[1:]
    search.estimator = make_pipeline(step, selection, *(s for _, s in tail))
    with pytest.raises(ValueError, match="only supported for dataframes"):
        _fit(search, _frame()[["age", "weight"]], supervised)
    assert budget.n_charges == 0
