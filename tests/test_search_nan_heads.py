"""A search whose candidates put a step that refuses NaN before the private
one (review 106 F1): on a dataset with one NaN it was charged, then failed
("Input X contains NaN"), where its neighbour without it fitted: whether
the search failed was a function of one row, after the charge. The steps
are probed before the charge on public rows of NaN; where they refuse it,
NaN in ``X`` is refused before the charge, as for a bare private step."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer

from sklearn_dppca import BudgetAccountant, PrivatePCA
from sklearn_dppca._nan_probe import heads_nan_columns, heads_refuse_nan
from sklearn_dppca.linear_model import PrivateRidge
from sklearn_dppca.model_selection import PrivateGridSearchCV
from sklearn_dppca.preprocessing import PublicScaler

pytestmark = pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")


def _neighbours():
    """D and D', which differ in one row: row 17 of D' has a NaN."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = X[:, 0] + rng.normal(size=300)
    X_prime = X.copy()
    X_prime[17, 2] = np.nan
    return X, X_prime, y


def _search(head, supervised, accountant):
    if supervised:
        pipe = Pipeline([("head", head),
                         ("ridge", PrivateRidge((-5, 5), data_norm=3.0))])
        grid = {"ridge__alpha": [1.0, 2.0]}
    else:
        pipe = Pipeline([("head", head), ("pca", PrivatePCA(data_norm=3.0))])
        grid = {"pca__n_components": [1, 2]}
    return PrivateGridSearchCV(pipe, grid, epsilon=2.0, delta=1e-6, cv=3,
                               accountant=accountant)


def _as(kind, X):
    if kind == "dask":
        import dask.array as da

        return da.from_array(X, chunks=(100, X.shape[1]))
    if kind == "frame":
        return pd.DataFrame(X, columns=["a", "b", "c", "d"])
    return X


@pytest.mark.parametrize("supervised", [False, True])
@pytest.mark.parametrize("kind", ["memory", "dask", "frame"])
def test_a_step_refusing_nan_refuses_it_before_the_charge(kind, supervised):
    """D fits, charged once; D' is refused with the NaN message, charged
    nothing (it was charged, then failed)."""
    if kind == "dask":
        pytest.importorskip("dask.array")
    X, X_prime, y = _neighbours()
    head = FunctionTransformer(np.tanh, validate=True)
    budget = BudgetAccountant(epsilon=100, delta=1e-2)
    _search(head, supervised, budget).fit(_as(kind, X), y)
    assert budget.n_charges == 1
    budget = BudgetAccountant(epsilon=100, delta=1e-2)
    with pytest.raises(ValueError, match="contains NaN") as caught:
        _search(head, supervised, budget).fit(_as(kind, X_prime), y)
    assert "refused before it spent any budget" in str(caught.value)
    assert "budget of this search was spent" not in str(caught.value)
    assert budget.n_charges == 0
    assert budget.spent.epsilon == 0
    assert not hasattr(head, "n_features_in_")  # probed on a clone


@pytest.mark.parametrize("supervised", [False, True])
@pytest.mark.parametrize("head", [
    FunctionTransformer(np.log1p),
    PublicScaler(ranges=([-3] * 4, [3] * 4)),
    SimpleImputer(strategy="constant", fill_value=0.0, keep_empty_features=True),
    FunctionTransformer(np.tanh),
    "passthrough",
], ids=["log1p", "PublicScaler", "constant-fill", "tanh", "passthrough"])
@pytest.mark.parametrize("kind", ["memory", "dask"])
def test_a_step_mapping_nan_is_not_refused(kind, head, supervised):
    """Steps that map NaN keep today's behaviour: D' with a NaN is fitted,
    charged once, as D is."""
    if kind == "dask":
        pytest.importorskip("dask.array")
    _, X_prime, y = _neighbours()
    budget = BudgetAccountant(epsilon=100, delta=1e-2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _search(head, supervised, budget).fit(_as(kind, X_prime), y)
    assert budget.n_charges == 1


def test_a_column_transformer_refusing_nan_in_some_columns_is_probed():
    """A ColumnTransformer treats columns differently: NaN in the column a
    NaN-refusing step reads is found by the probe of a row all NaN; a step
    that refuses a NaN only beside numbers (a user's function), by the rows
    with NaN in one column each. Such a search refuses NaN before the
    charge."""
    def lone_nan(X):
        X = np.asarray(X, dtype=float)
        if (np.isnan(X).any(axis=1) & ~np.isnan(X).all(axis=1)).any():
            raise ValueError("a NaN beside numbers")
        return X

    strict = ColumnTransformer([("v", FunctionTransformer(np.tanh, validate=True),
                                 [0])], remainder="passthrough", sparse_threshold=0)
    lone = ColumnTransformer([("f", FunctionTransformer(lone_nan), [1, 2])],
                             remainder="passthrough", sparse_threshold=0)
    mapping = ColumnTransformer([("f", FunctionTransformer(np.tanh), [1, 2])],
                                remainder="passthrough", sparse_threshold=0)
    assert heads_refuse_nan([[strict]], 4)
    assert heads_refuse_nan([[lone]], 4)
    assert heads_refuse_nan([[mapping], [lone]], 4)  # any candidate's steps
    assert not heads_refuse_nan([[mapping]], 4)
    assert not heads_refuse_nan([[], ["passthrough"]], 4)
    assert heads_nan_columns([[strict]], 4) == (0,)  # the column it reads
    assert heads_nan_columns([[lone]], 4) == (1, 2)
    X, X_prime, _ = _neighbours()
    # strict refuses NaN in column 0 only (review 108 F1): its NaN there is
    # refused; in column 2 (passed through, clipped) it fits, as its fit does
    X_strict = X.copy()
    X_strict[17, 0] = np.nan
    for ct, X_nan in ((strict, X_strict), (lone, X_prime)):
        budget = BudgetAccountant(epsilon=100, delta=1e-2)
        _search(ct, False, budget).fit(X)
        assert budget.n_charges == 1
        budget = BudgetAccountant(epsilon=100, delta=1e-2)
        with pytest.raises(ValueError, match="contains NaN"):
            _search(ct, False, budget).fit(X_nan)
        assert budget.n_charges == 0
    budget = BudgetAccountant(epsilon=100, delta=1e-2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _search(strict, False, budget).fit(X_prime)
    assert budget.n_charges == 1


def test_a_named_column_transformer_is_probed_on_the_columns():
    """On a DataFrame the probe is a DataFrame of X's columns, so that a
    ColumnTransformer by name reads it as it reads X."""
    strict = ColumnTransformer([("v", FunctionTransformer(np.tanh, validate=True),
                                 ["c"])], remainder="passthrough", sparse_threshold=0)
    assert heads_refuse_nan([[strict]], 4, names=["a", "b", "c", "d"])
    _, X_prime, _ = _neighbours()
    budget = BudgetAccountant(epsilon=100, delta=1e-2)
    with pytest.raises(ValueError, match="contains NaN"):
        _search(strict, False, budget).fit(_as("frame", X_prime))
    assert budget.n_charges == 0


@pytest.mark.parametrize("strict", [True, False])
def test_steps_after_a_public_encoder_are_probed_on_its_row(strict):
    """Candidates opening with a public encoder on a DataFrame with a text
    column: a step after it that refuses NaN (the encoder passes the float
    columns on) is found on the encoders' public row with NaN in the float
    columns, and NaN in those columns is refused before the charge; a step
    that maps NaN keeps D' fitted."""
    from sklearn.preprocessing import OneHotEncoder

    rng = np.random.default_rng(0)
    X = pd.DataFrame({"cat": rng.choice(["x", "y"], 300),
                      "a": rng.normal(size=300), "b": rng.normal(size=300)})
    X_prime = X.copy()
    X_prime.loc[17, "a"] = np.nan
    encoder = ColumnTransformer(
        [("oh", OneHotEncoder(categories=[["x", "y"]], handle_unknown="ignore",
                              sparse_output=False), ["cat"])],
        remainder="passthrough", sparse_threshold=0)
    pipe = Pipeline([("ct", encoder),
                     ("v", FunctionTransformer(np.tanh, validate=strict)),
                     ("pca", PrivatePCA(data_norm=3.0))])
    grid = {"pca__n_components": [1, 2]}
    budget = BudgetAccountant(epsilon=100, delta=1e-2)
    PrivateGridSearchCV(pipe, grid, epsilon=2.0, cv=3, accountant=budget).fit(X)
    assert budget.n_charges == 1
    budget = BudgetAccountant(epsilon=100, delta=1e-2)
    search = PrivateGridSearchCV(pipe, grid, epsilon=2.0, cv=3, accountant=budget)
    if strict:
        with pytest.raises(ValueError, match="contains NaN"):
            search.fit(X_prime)
        assert budget.n_charges == 0
    else:
        search.fit(X_prime)
        assert budget.n_charges == 1
