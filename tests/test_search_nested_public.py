"""A Pipeline of public steps nested in a ColumnTransformer branch, or as a
step before the private one, is public as its steps are (review 114 F1);
steps that fail on any rows (their setup: a PublicScaler's ranges missing a
column) are refused before the charge with their own error, not as NaN
(review 114 F2)."""

import warnings

import numpy as np
import pytest

pd = pytest.importorskip("pandas")

from sklearn.compose import ColumnTransformer  # noqa: E402
from sklearn.exceptions import FitFailedWarning  # noqa: E402
from sklearn.impute import SimpleImputer  # noqa: E402
from sklearn.pipeline import Pipeline, make_pipeline  # noqa: E402
from sklearn.preprocessing import OneHotEncoder, StandardScaler  # noqa: E402

from sklearn_dppca import BudgetAccountant, PrivacyLeakWarning, PrivatePCA  # noqa: E402
from sklearn_dppca._nan_probe import heads_nan_columns  # noqa: E402
from sklearn_dppca._search_plan import _is_stateless  # noqa: E402
from sklearn_dppca._search_rows import head_output  # noqa: E402
from sklearn_dppca.model_selection import PrivateGridSearchCV  # noqa: E402
from sklearn_dppca.preprocessing import PublicScaler  # noqa: E402


def _imputer():
    return SimpleImputer(strategy="constant", fill_value=0,
                         keep_empty_features=True)


def _frame(n=120):
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"age": rng.integers(18, 91, n).astype(float),
                       "q1": rng.integers(1, 6, n).astype(float)})
    df.loc[::7, "age"] = np.nan
    return df


def _search(estimator, X, grid=None):
    budget = BudgetAccountant(epsilon=100, delta=1e-2)
    search = PrivateGridSearchCV(
        estimator, grid or {"privatepca__n_components": [1, 2]},
        epsilon=3.0, cv=3, accountant=budget)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        search.fit(X)
    return search, budget


def _no_leak_warning(model, X):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X)
    assert not [w for w in caught if issubclass(w.category, PrivacyLeakWarning)]


def test_a_pipeline_of_public_steps_is_stateless():
    assert _is_stateless(make_pipeline(_imputer(), PublicScaler((0, 90))))
    assert _is_stateless(make_pipeline(_imputer(), "passthrough"))
    assert not _is_stateless(make_pipeline(_imputer(), StandardScaler()))
    cached = make_pipeline(_imputer(), PublicScaler((0, 90)), memory="unused")
    assert not _is_stateless(cached)


def test_pipeline_branch_in_a_column_transformer():
    branch = make_pipeline(_imputer(), PublicScaler((0, 90)))
    ct = ColumnTransformer([("num", branch, ["age", "q1"])], sparse_threshold=0)
    _no_leak_warning(make_pipeline(ct, PrivatePCA(1, data_norm=2.0)), _frame())
    search, budget = _search(make_pipeline(ct, PrivatePCA(data_norm=2.0)), _frame())
    assert budget.n_charges == 1
    assert search.best_estimator_[-1].n_features_in_ == 2


def test_pipeline_as_a_step_before_the_private_one():
    head = make_pipeline(_imputer(), PublicScaler((0, 90)))
    _no_leak_warning(make_pipeline(head, PrivatePCA(1, data_norm=2.0)), _frame())
    _, budget = _search(make_pipeline(head, PrivatePCA(data_norm=2.0)), _frame())
    assert budget.n_charges == 1


def test_learning_step_in_a_nested_pipeline_still_refused():
    branch = make_pipeline(_imputer(), StandardScaler())
    ct = ColumnTransformer([("num", branch, ["age", "q1"])], sparse_threshold=0)
    with pytest.warns(PrivacyLeakWarning):
        make_pipeline(ct, PrivatePCA(1, data_norm=2.0)).fit(_frame())
    with pytest.raises(ValueError, match="fitted on the data without privacy"):
        _search(make_pipeline(ct, PrivatePCA(data_norm=2.0)), _frame())


def test_nested_encoder_width_found_before_the_charge():
    """A public encoder in a nested branch: n_components above what the
    steps output is a public failure (error_score, no budget)."""
    df = _frame()
    df["town"] = ["a", "b", None] * 40
    branch = make_pipeline(SimpleImputer(strategy="constant", fill_value="a",
                                         keep_empty_features=True),
                           OneHotEncoder(categories=[["a", "b"]],
                                         handle_unknown="ignore",
                                         sparse_output=False))
    ct = ColumnTransformer([("num", _imputer(), ["age"]), ("cat", branch, ["town"])],
                           sparse_threshold=0)
    with pytest.warns(FitFailedWarning, match="n_components=4"):
        search, budget = _search(make_pipeline(ct, PrivatePCA(data_norm=2.0)), df,
                                 {"privatepca__n_components": [1, 4]})
    assert budget.n_charges == 1
    assert search.best_params_ == {"privatepca__n_components": 1}


def _id_frame(nan=True):
    rng = np.random.default_rng(0)
    n = 120
    df = pd.DataFrame({"id": np.arange(n), "income": rng.lognormal(10, 1, n),
                       "q1": rng.integers(1, 6, n).astype(float)})
    if nan:
        df.loc[::9, "income"] = np.nan
    return df


@pytest.mark.parametrize("nan", [True, False])
def test_setup_failure_refused_before_the_charge(nan):
    ct = ColumnTransformer([("num", _imputer(), ["income", "q1"])],
                           remainder="passthrough", sparse_threshold=0
                           ).set_output(transform="pandas")
    pipe = make_pipeline(ct, PublicScaler({"num__income": (0, 1e6), "num__q1": (1, 5)}),
                         PrivatePCA(data_norm=2.0))
    budget = BudgetAccountant(epsilon=100, delta=1e-2)
    search = PrivateGridSearchCV(pipe, {"privatepca__n_components": [1, 2]},
                                 epsilon=3.0, cv=3, accountant=budget)
    with pytest.raises(ValueError) as info:
        search.fit(_id_frame(nan))
    assert budget.n_charges == 0
    message = str(info.value)
    assert "remainder__id" in message and "before any budget" in message
    assert "NaN" not in message


def test_nan_probe_names_the_steps_own_error():
    """Steps that fail on the probe's rows without NaN: their own error, not
    NaN in every column (the probe counted any failure as NaN's)."""
    ct = ColumnTransformer([("num", _imputer(), ["income", "q1"])],
                           remainder="passthrough", sparse_threshold=0
                           ).set_output(transform="pandas")
    heads = [ct, PublicScaler({"num__income": (0, 1e6), "num__q1": (1, 5)})]
    X = _id_frame()
    with pytest.raises(ValueError, match="remainder__id") as info:
        heads_nan_columns([heads], 3, list(X.columns), dtypes=dict(X.dtypes.items()))
    assert "before it spent any budget" in str(info.value)


def test_a_pipeline_head_of_named_pandas_output_keeps_names():
    """The names a nested Pipeline of pandas output passes on reach a
    PublicScaler's ranges dict after it."""
    head = make_pipeline(_imputer(), "passthrough").set_output(transform="pandas")
    pipe = Pipeline([("head", head),
                     ("scale", PublicScaler({"age": (0, 90), "q1": (1, 5)})),
                     ("privatepca", PrivatePCA(data_norm=2.0))])
    _, budget = _search(pipe, _frame())
    assert budget.n_charges == 1


def test_nested_pipeline_keeps_the_columns_and_their_names():
    head = make_pipeline(_imputer(), PublicScaler((0, 90))).set_output(
        transform="pandas")
    width, names = head_output([head], 2, _frame().iloc[:0])
    assert width == 2 and list(names) == ["age", "q1"]


def test_a_string_column_filled_then_encoded_is_searched():
    """Review 116 F3: the public rows held pd.NA in a pandas ``string``
    column, on which a constant SimpleImputer raises; the search refused the
    candidate as failing "on any rows" (and the NaN probe and the encoders'
    width the same way) though its plain fit on the data ran. Rows with the
    text given ("") are tried before refusing."""
    df = _frame()
    df["city"] = pd.array(["a", "b", "c"] * 40, dtype="string")
    branch = make_pipeline(
        SimpleImputer(strategy="constant", fill_value="a", keep_empty_features=True),
        OneHotEncoder(categories=[["a", "b", "c"]], handle_unknown="ignore",
                      sparse_output=False))
    ct = ColumnTransformer([("num", _imputer(), ["age", "q1"]),
                            ("cat", branch, ["city"])], sparse_threshold=0)
    search, budget = _search(make_pipeline(ct, PrivatePCA(data_norm=6.0)), df)
    assert budget.n_charges == 1 and search.best_estimator_[-1].n_features_in_ == 5
