"""Polars output before a private step, and a polars X: the private steps
do not read a polars DataFrame (its dtypes are neither NumPy's nor pandas').
The searches refuse such steps by their ``set_output`` (a public parameter)
before the charge; they were charged, then every fit failed, or (a PCA before
a head with ``bounds`` by name) refused as passing on no names. A plain fit
refuses a polars X by its type rather than as columns of no numbers."""

import warnings

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
from sklearn.pipeline import Pipeline, make_pipeline  # noqa: E402
from sklearn.preprocessing import FunctionTransformer  # noqa: E402

from sklearn_dppca import BudgetAccountant, PrivatePCA  # noqa: E402
from sklearn_dppca.linear_model import PrivateRidge  # noqa: E402
from sklearn_dppca.model_selection import PrivateGridSearchCV  # noqa: E402


def _frame():
    rng = np.random.default_rng(0)
    return pd.DataFrame(rng.normal(size=(300, 3)), columns=list("abc"))


def _refused(estimator, grid, X, y=None):
    accountant = BudgetAccountant(epsilon=100, delta=1e-2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="transform='polars'") as info:
            PrivateGridSearchCV(estimator, grid, epsilon=2.0, delta=1e-6, cv=3,
                                accountant=accountant).fit(X, y)
    assert accountant.spent.epsilon == 0.0
    assert "before it spent any budget" in str(info.value)


@pytest.mark.parametrize("bounds", [
    {"privatepca0": (-3.0, 3.0), "privatepca1": (-3.0, 3.0)},
    ([-3.0, -3.0], [3.0, 3.0]), None])
def test_polars_pca_before_a_head_refused_before_the_charge(bounds):
    X = _frame()
    y = X["a"].to_numpy() + np.random.default_rng(1).normal(size=len(X))
    pca = PrivatePCA(2, data_norm=3.0).set_output(transform="polars")
    head = PrivateRidge(bounds=bounds, data_norm=None if bounds else 3.0,
                        y_bounds=(-5, 5))
    _refused(make_pipeline(pca, head), {"privateridge__alpha": [1.0, 2.0]}, X, y)


def test_polars_public_step_before_the_pca_refused_before_the_charge():
    step = FunctionTransformer(np.tanh, feature_names_out="one-to-one")
    est = make_pipeline(step.set_output(transform="polars"),
                        PrivatePCA(bounds=([-3.0] * 3, [3.0] * 3)))
    _refused(est, {"privatepca__n_components": [1, 2]}, _frame())


def test_polars_output_of_a_nested_pipeline_refused_before_the_charge():
    # review 116 F2: Pipeline.set_output sets its steps' output, not its own;
    # a Pipeline of public steps is stateless since mend 134
    from sklearn_dppca.preprocessing import PublicScaler

    for last in ([], [("p", "passthrough")], [("p", None)]):  # review 118 F1
        nested = Pipeline([("s", PublicScaler((-3, 3))), *last]).set_output(
            transform="polars")
        est = make_pipeline(nested, PrivatePCA(data_norm=2.0))
        _refused(est, {"privatepca__n_components": [1, 2]}, _frame())


def test_polars_x_refused_by_its_type():
    pl = pytest.importorskip("polars")
    X = pl.DataFrame({"a": [1.0, 2.0, 3.0, 4.0], "b": [1.0, 0.0, 3.0, 2.0]})
    with pytest.raises(ValueError, match="X is a polars DataFrame"):
        PrivatePCA(1, data_norm=5.0, epsilon=1.0, delta=1e-6).fit(X)
    accountant = BudgetAccountant(epsilon=100, delta=1e-2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="X is a polars DataFrame"):
            PrivateGridSearchCV(PrivatePCA(data_norm=5.0), {"n_components": [1]},
                                epsilon=2.0, delta=1e-6, cv=2,
                                accountant=accountant).fit(X)
    assert accountant.spent.epsilon == 0.0
