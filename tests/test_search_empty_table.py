"""Public steps before a search's private step that output no column (a
ColumnTransformer selecting none with remainder="drop", a FunctionTransformer
keeping none): their output's width is public (their output on ``X``'s
columns without a row), so the candidate fails before the charge, named;
every fit of it failed after the charge, and the whole search with it."""

import warnings

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
from sklearn.compose import ColumnTransformer  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import FunctionTransformer  # noqa: E402

from sklearn_dppca import BudgetAccountant, PrivatePCA  # noqa: E402
from sklearn_dppca.linear_model import PrivateRidge  # noqa: E402
from sklearn_dppca.model_selection import PrivateGridSearchCV  # noqa: E402


def _frame():
    rng = np.random.default_rng(0)
    return pd.DataFrame(rng.normal(size=(300, 3)), columns=list("abc"))


def _select(columns):
    return ColumnTransformer([("t", FunctionTransformer(np.tanh), columns)],
                             remainder="drop", sparse_threshold=0)


def _search(estimator, grid, accountant):
    return PrivateGridSearchCV(estimator, grid, epsilon=2.0, delta=1e-6, cv=3,
                               accountant=accountant)



@pytest.mark.parametrize("estimator, grid, supervised", [
    (make_pipeline(_select([]), PrivatePCA(data_norm=1.0)),
     {"privatepca__n_components": [1, 2]}, False),
    (make_pipeline(FunctionTransformer(lambda z: z[:, :0]),
                   PrivatePCA(1, data_norm=1.0)),
     {"privatepca__center": [True, False]}, False),
    (make_pipeline(_select([]), PrivatePCA(bounds={"a": (-1.0, 1.0)})),
     {"privatepca__n_components": [1, 2]}, False),
    (make_pipeline(_select([]), PrivateRidge(data_norm=1.0, y_bounds=(-5, 5))),
     {"privateridge__alpha": [1.0, 2.0]}, True),
    (make_pipeline(_select([]), PrivatePCA(1, data_norm=1.0),
                   PrivateRidge(data_norm=1.0, y_bounds=(-5, 5))),
     {"privateridge__alpha": [1.0, 2.0]}, True),
])
def test_no_column_refused_before_the_charge(estimator, grid, supervised):
    X = _frame()
    y = X["a"].to_numpy() if supervised else None
    if "functiontransformer" in estimator.named_steps:
        X = X.to_numpy()
    accountant = BudgetAccountant(epsilon=100, delta=1e-2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="before any budget was spent") as info:
            _search(estimator, grid, accountant).fit(X, y)
    assert accountant.spent.epsilon == 0.0
    assert "no column" in str(info.value)
    assert repr(next(iter(grid))) in str(info.value)  # the candidate named


def test_the_other_candidates_are_searched():
    est = make_pipeline(_select(list("abc")), PrivatePCA(1, data_norm=1.0))
    grid = {"columntransformer__transformers": [
        [("t", FunctionTransformer(np.tanh), [])],
        [("t", FunctionTransformer(np.tanh), list("abc"))]]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        accountant = BudgetAccountant(epsilon=100, delta=1e-2)
        with pytest.raises(ValueError, match="no column"):
            _search(est, grid, accountant).set_params(
                error_score="raise").fit(_frame())
        assert accountant.spent.epsilon == 0.0
        search = _search(est, grid, accountant).fit(_frame())
    scores = search.cv_results_["mean_test_score"]
    assert np.isnan(scores[0]) and np.isfinite(scores[1])
    assert search.best_index_ == 1
