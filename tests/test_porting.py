"""What a user porting code from scikit-learn or diffprivlib meets (issue 32,
item 3's smaller gaps): each refusal says why, and each warning has a class."""

import warnings

import numpy as np
import pytest

from sklearn_dppca import (
    BudgetAccountant,
    CoherentPowerPCA,
    ComplexGaussPCA,
    PrivatePCA,
    SolverParameterWarning,
)
from sklearn_dppca.model_selection import PrivateGridSearchCV
from sklearn_dppca.privacy import Budget

ESTIMATORS = [PrivatePCA, ComplexGaussPCA, CoherentPowerPCA]


def test_budgets_compare_as_guarantees():
    """diffprivlib's order: coordinate by coordinate. As tuples, a spend of
    (1.0, 1e-6) compared >= (0.5, 1.0)."""
    spent = Budget(1.0, 1e-6)
    assert not spent >= (0.5, 1.0)
    assert spent >= (0.5, 1e-7) and spent >= (1.0, 1e-6)
    assert spent <= (1.0, 1e-6) and not spent > (1.0, 1e-6)
    assert spent < (2.0, 1e-5) and not spent < (2.0, 1e-7)
    assert spent == (1.0, 1e-6)


@pytest.mark.parametrize("Est", ESTIMATORS)
def test_a_solver_parameter_without_effect_has_its_own_class(Est):
    X = np.random.default_rng(0).normal(size=(200, 4)) / 4
    with pytest.warns(SolverParameterWarning, match="copy=False"):
        Est(2, data_norm=1.0, copy=False, accountant=BudgetAccountant()).fit(X)
    assert issubclass(SolverParameterWarning, UserWarning)


@pytest.mark.parametrize("Est", ESTIMATORS)
def test_sample_weight_is_refused_with_its_reason(Est):
    X = np.random.default_rng(0).normal(size=(200, 4)) / 4
    budget = BudgetAccountant()
    est = Est(2, data_norm=1.0, accountant=budget)
    for method in (est.fit, est.fit_transform):
        with pytest.raises(TypeError, match="takes no sample_weight: every row "
                           "is one person"):
            method(X, sample_weight=np.ones(200))
    assert budget.n_charges == 0


def test_a_nan_points_to_the_imputer_and_non_finite():
    X = np.random.default_rng(0).normal(size=(200, 4)) / 4
    X[7, 2] = np.nan
    budget = BudgetAccountant()
    with pytest.raises(ValueError, match="contains NaN.*SimpleImputer.*"
                       "non_finite='clip'"):
        PrivatePCA(2, data_norm=1.0, accountant=budget).fit(X)
    assert budget.n_charges == 0  # refused before the charge, as before


def test_the_search_leaves_y_as_it_is():
    """y is never used; a list is turned into an array, an array kept (a
    device array is not converted to NumPy)."""
    X = np.random.default_rng(0).normal(size=(300, 4)) / 4
    search = PrivateGridSearchCV(PrivatePCA(data_norm=1.0), {"n_components": [1]},
                                 epsilon=2.0, accountant=BudgetAccountant())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search.fit(X, list(range(300)))
        search.fit(X, np.arange(300))
    assert search.best_params_ == {"n_components": 1}


def test_a_reloaded_estimators_copy_says_what_it_is():
    """Issue 32: refitting an unpickled model in the same process said "a copy
    in another process"."""
    import pickle

    X = np.random.default_rng(0).normal(size=(200, 4)) / 4
    budget = BudgetAccountant(epsilon=5.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = PrivatePCA(2, data_norm=1.0, accountant=budget).fit(X)
        again = pickle.loads(pickle.dumps(est))
        with pytest.raises(RuntimeError, match="pickled and loaded again, in "
                           "this process or another.*set_params"):
            again.fit(X)
        again.set_params(accountant=budget).fit(X)
    assert budget.n_charges == 2


def test_a_residual_clamped_to_zero_leaves_the_score_finite():
    """Issue 32: CoherentPowerPCA(2) at ε = 1 on 30 × 10 rows released
    noise_variance_ = 0 and scored −3e15 (the precision's floor was machine
    precision). A residual the de-noising clamps to 0 is now the estimated
    total's share per remaining rank, in noise_variance_ and the model."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 10))
    X /= np.linalg.norm(X, axis=1).max()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = CoherentPowerPCA(2, epsilon=1.0, data_norm=1.0, random_state=0,
                               accountant=BudgetAccountant()).fit(X)
    d, k = X.shape[1], 2
    share = (est.total_variance_ - est.captured_variance_.sum()) / (d - k)
    assert est.noise_variance_ == pytest.approx(share, rel=1e-12) and share > 0
    assert -100.0 < est.score(X) < 0.0
    assert np.isfinite(est.get_precision()).all()


def test_diffprivlib_accountant_idioms_port():
    """spent_budget= charges the given releases at once; pop_default()
    returns the process-wide default and leaves a fresh unlimited one."""
    from sklearn_dppca.privacy import get_default_accountant, set_default_accountant

    acc = BudgetAccountant(2.0, 1e-6, spent_budget=[(0.5, 0.0), (0.25, 1e-7)])
    assert len(acc) == 2 and acc.spent.epsilon == pytest.approx(0.75)
    with pytest.raises(Exception, match="budget"):
        BudgetAccountant(1.0, 1e-6, spent_budget=[(2.0, 0.0)])
    original = get_default_accountant()
    try:
        mine = BudgetAccountant(5.0).set_default()
        assert BudgetAccountant.pop_default() is mine
        fresh = get_default_accountant()
        assert fresh is not mine and fresh.epsilon == float("inf") and len(fresh) == 0
    finally:
        set_default_accountant(original)
