"""PrivateGridSearchCV: the whole search is one exact (ε, δ) charge."""

import math
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import FitFailedWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold, ShuffleSplit, StratifiedKFold
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from sklearn_dppca import (
    BudgetAccountant,
    BudgetExceededError,
    CoherentPowerPCA,
    ComplexGaussPCA,
    PrivacyLeakWarning,
    PrivatePCA,
    _search_plan,
    _search_run,
)
from sklearn_dppca import model_selection as ms
from sklearn_dppca._row_maps import clip_rows
from sklearn_dppca.audit import audit
from sklearn_dppca.model_selection import (
    SEARCH_BUDGET_SHARES,
    PrivateGridSearchCV,
    captured_variance_rows,
    floor_penalised_scores,
    private_cross_val_score,
)
from sklearn_dppca.preprocessing import PublicScaler
from sklearn_dppca.privacy import gdp_epsilon, gdp_mu

from .conftest import make_planted

pytestmark = pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")

GRID = {"n_components": [1, 2, 3, 4, 5, 6]}
PLAN_SEARCH = ms.plan_search


@pytest.fixture(scope="module")
def data():
    X, _ = make_planted(n=6000, d=10, seed=3)
    return X


def search(**kwargs):
    params = dict(param_grid=GRID, epsilon=2.0, accountant=BudgetAccountant(),
                  random_state=0)
    params.update(kwargs)
    return PrivateGridSearchCV(PrivatePCA(data_norm=1.0), **params)


# ------------------------------------------------------------ the choice
def test_picks_the_planted_rank(data):
    """Three spikes over a floor: the floor-penalised score picks k = 3."""
    picks = [search(random_state=s).fit(data).best_params_["n_components"]
             for s in range(3)]
    assert picks == [3, 3, 3]


def test_floor_penalty_does_not_reward_floor_components():
    # k = 1, 2, 3, 4 on 1000 rows of a floor 0.01: components 3 and 4 add
    # the floor's capture (10 each) and are not chosen; plain captured
    # variance would pick the largest k.
    released = np.array([100.0, 180.0, 190.0, 200.0])
    k = np.arange(1, 5)[:, None]
    scores, penalty = floor_penalised_scores(
        released[:, None], k, np.array([1000]), 0.01, 2.0
    )
    assert int(np.argmax(scores.mean(axis=1))) == 1
    np.testing.assert_allclose(released - 1000 * scores[:, 0], penalty)


# ------------------------------------------------------------ sensitivity
def test_row_score_bounded_on_adversarial_rows():
    """Every row's score is in [0, C²], for rows far outside the ball too."""
    rng = np.random.default_rng(0)
    C = 2.5
    components = np.linalg.qr(rng.normal(size=(6, 3)))[0].T * 1.7  # not unit
    mean = rng.normal(size=6)
    rows = np.vstack([
        mean + 1e6 * components[0],  # far along a component
        mean + C * components[0] / np.linalg.norm(components[0]),
        mean,  # zero score
        rng.normal(size=(50, 6)) * 100.0,
    ])
    scores = captured_variance_rows(rows, mean, components, C)
    assert np.all(scores >= 0.0) and np.all(scores <= C**2)
    np.testing.assert_allclose(scores[:2], C**2, rtol=1e-12)
    assert scores[2] == 0.0


def test_score_vector_sensitivity_on_neighbouring_rows(data):
    """Given the fold's fits, replacing one validation row moves the exact
    score vector by at most C²√m, and the extreme pair attains it."""
    splits = ms._resolve_cv(5, data.shape[0])
    plan = ms.plan_search(PrivatePCA(data_norm=1.0), GRID, epsilon=2.0,
                          delta=1e-6, splits=splits, n_samples=len(data),
                          n_features=data.shape[1])
    train, test = splits[0]
    m = len(plan.candidates)

    def scores(X):
        seeds = np.random.default_rng(7).spawn(len(plan.groups))
        return ms._score_fold(X, None, train, test, plan, 1e-6, seeds)[0]

    base = data.copy()
    fitted = PrivatePCA(data_norm=1.0, random_state=np.random.default_rng(7).spawn(
        1)[0], epsilon=plan.fit_epsilons[0], accountant=BudgetAccountant()).fit(
        data[train])
    row = test[0]
    worst = []
    # Along the first released component (score C² for every k) against
    # orthogonal to all six (score 0), far outside the ball, and random.
    along = fitted.mean_ + 5.0 * fitted.components_[0]
    rest = np.linalg.qr(fitted.components_[:6].T, mode="complete")[0][:, 6:]
    away = fitted.mean_ + 3.0 * rest[:, 0]
    rng = np.random.default_rng(2)
    for a, b in [(along, away), (along, -along)] + [
        (rng.normal(size=10) * 10, rng.normal(size=10)) for _ in range(5)
    ]:
        X, Y = base.copy(), base.copy()
        X[row], Y[row] = a, b
        worst.append(np.linalg.norm(scores(X) - scores(Y)))
    assert max(worst) <= math.sqrt(m) * (1 + 1e-9)
    assert worst[0] == pytest.approx(math.sqrt(m), rel=1e-9)  # attained


# ------------------------------------------------------------ accounting
def test_whole_search_spends_exactly_the_request_once(data):
    budget = BudgetAccountant(epsilon=2.0)
    fitted = search(accountant=budget).fit(data)
    assert budget.n_charges == 1
    assert budget.spent[0] == pytest.approx(2.0, rel=1e-9)
    assert fitted.privacy_spent_ == (2.0, 1e-6)  # the request, no float artefact
    # The documented shares, recomposed from what the search used: one group
    # (a grid over n_components shares a release per fold), K − 1 = 4 fits
    # per row, the score vector's noise and the refit.
    mu = gdp_mu(2.0, 1e-6)
    (eps_fit,) = fitted.fit_epsilons_
    mu_fit = gdp_mu(eps_fit, 1e-6)
    assert 4 * mu_fit**2 == pytest.approx(SEARCH_BUDGET_SHARES["fits"] * mu**2)
    mu_sel = math.sqrt(len(GRID["n_components"])) / fitted.selection_sigma_
    assert mu_sel**2 == pytest.approx(SEARCH_BUDGET_SHARES["selection"] * mu**2)
    # The refit's release is combined with the fold fits' (pooled): its
    # privacy_spent_ is what both cost a row; its epsilon its own release's.
    refit = fitted.best_estimator_
    assert refit.epsilon == pytest.approx(
        gdp_epsilon(mu * math.sqrt(SEARCH_BUDGET_SHARES["refit"]), 1e-6))
    assert refit.privacy_spent_[0] == pytest.approx(gdp_epsilon(mu * math.sqrt(
        SEARCH_BUDGET_SHARES["refit"] + SEARCH_BUDGET_SHARES["fits"]), 1e-6))
    assert refit.accountant is budget  # a later refit charges the user
    # Nothing left: the next search is refused before the data is read.
    X_bad = data.copy()
    X_bad[0, 0] = np.nan
    with pytest.raises(BudgetExceededError):
        search(accountant=budget).fit(X_bad)
    assert budget.n_charges == 1


def test_without_refit_the_shares_are_rescaled(data):
    budget = BudgetAccountant()
    fitted = search(accountant=budget, refit=False, epsilon=1.0).fit(data)
    assert not hasattr(fitted, "best_estimator_")
    assert budget.spent[0] == pytest.approx(1.0, rel=1e-9)
    with pytest.raises(AttributeError):
        fitted.transform(data)


def test_mechanism_groups_and_fit_weights(data):
    """Candidates that differ in a mechanism parameter pay for each one;
    fit_weights gives a group its weight of the fits' share."""
    grid = {"n_components": [2, 3], "center": [True, False]}
    fitted = PrivateGridSearchCV(PrivatePCA(data_norm=1.0), grid, epsilon=2.0,
                                 accountant=BudgetAccountant(),
                                 random_state=0).fit(data)
    assert len(fitted.fit_epsilons_) == 2  # two releases per fold, not four
    weighted = PrivateGridSearchCV(
        PrivatePCA(data_norm=1.0),
        [{"n_components": [3]}, {"n_components": [3], "center": [False]}],
        fit_weights=[1.0, 0.25],
        epsilon=2.0, accountant=BudgetAccountant(), random_state=0).fit(data)
    mus = [gdp_mu(e, 1e-6) for e in weighted.fit_epsilons_]
    assert mus[1] ** 2 / mus[0] ** 2 == pytest.approx(0.25)
    assert weighted.privacy_spent_[0] == pytest.approx(2.0, rel=1e-9)


@pytest.mark.parametrize("est", [
    ComplexGaussPCA(data_norm=1.0),
    CoherentPowerPCA(data_norm=1.0, clip_radius=0.05, n_iter=2),
])
def test_other_estimators_one_fit_per_candidate(est, data):
    budget = BudgetAccountant()
    fitted = PrivateGridSearchCV(est, {"n_components": [2, 3]}, epsilon=3.0, cv=3,
                                 accountant=budget, random_state=0).fit(data)
    assert len(fitted.fit_epsilons_) == 2
    assert budget.n_charges == 1 and budget.spent[0] == pytest.approx(3.0)
    assert fitted.transform(data[:5]).shape == (5, fitted.best_estimator_.n_components_)


def test_pipeline_with_a_stateless_step(data):
    flip = FunctionTransformer(np.negative)  # row by row, norms kept
    pipe = make_pipeline(flip, PrivatePCA(data_norm=1.0))
    fitted = PrivateGridSearchCV(pipe, {"privatepca__n_components": [1, 2, 3, 4]},
                                 epsilon=3.0, accountant=BudgetAccountant(),
                                 random_state=0).fit(data)
    assert fitted.best_params_ == {"privatepca__n_components": 3}
    assert fitted.transform(data[:4]).shape == (4, 3)


# ------------------------------------------------------------ truncation
@pytest.mark.parametrize("k, whiten", [(1, False), (3, True), (10, False),
                                      (3, "partial")])
def test_truncation_equals_a_fit_with_that_n_components(k, whiten, data):
    """What sharing one release per fold relies on: on the same noise, a fit
    with n_components=k keeps the first k eigenpairs of the full fit, and
    its floor is the mean of the rest (of the captured variances, which the
    model's residual averages)."""
    full = PrivatePCA(data_norm=1.0, random_state=5).fit(data)
    direct = PrivatePCA(k, data_norm=1.0, whiten=whiten, random_state=5).fit(data)
    for name in ("components_", "explained_variance_", "explained_variance_ratio_",
                 "singular_values_", "captured_variance_", "noisy_variance_"):
        np.testing.assert_allclose(getattr(full, name)[:k], getattr(direct, name),
                                   rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(full.mean_, direct.mean_, rtol=1e-12)
    # a supervised search's head reads the first k scores of the full fit
    np.testing.assert_allclose(full.set_params(whiten=whiten).transform(data)[:, :k],
                               direct.transform(data), rtol=1e-9, atol=1e-12)
    full.set_params(whiten=False)
    rest = full.captured_variance_[k:]
    assert direct.noise_variance_ == pytest.approx(
        rest.mean() if rest.size else 0.0, rel=1e-12)
    gains = _search_run._cumulative_gains(data[:50], full)
    assert gains[k - 1] == pytest.approx(np.sum(captured_variance_rows(
        data[:50], direct.mean_, direct.components_, 1.0)), rel=1e-9)


# ------------------------------------------------------------ released values
def test_no_exact_score_is_stored(data, monkeypatch):
    exact = []
    original = ms._score_fold

    def spy(*args):
        out = original(*args)
        exact.append(out[0].copy())
        return out

    monkeypatch.setattr(ms, "_score_fold", spy)
    fitted = search().fit(data)
    totals = np.sum(exact, axis=0)
    assert set(fitted.cv_results_) == {
        "params", "param_n_components", "released_test_score", "floor_penalty",
        "mean_test_score", "std_test_score", "rank_test_score",
        "mean_n_components", "floor_per_component",
        *(f"split{f}_test_score" for f in range(5))}
    released = fitted.cv_results_["released_test_score"]
    assert np.all(np.abs(released - totals) > 1e-6)
    stored = [v for v in vars(fitted).values() if isinstance(v, (np.ndarray, float))]
    stored += [v for v in fitted.cv_results_.values() if isinstance(v, np.ndarray)]
    for value in stored:
        for per_fold in [*exact, totals]:
            for s in per_fold:
                assert not np.any(np.isclose(np.asarray(value, dtype=float), s,
                                             rtol=0, atol=1e-9))


def test_clone_and_get_params_round_trip():
    budget = BudgetAccountant(epsilon=5.0)
    est = search(accountant=budget, cv=KFold(3))
    twin = clone(est)
    assert twin.accountant is budget
    params, twin_params = est.get_params(deep=False), twin.get_params(deep=False)
    assert params.keys() == twin_params.keys()
    for key in params:
        if key not in ("estimator", "cv"):
            np.testing.assert_equal(params[key], twin_params[key])  # nan too
    assert twin.set_params(epsilon=3.0).epsilon == 3.0
    assert "estimator__data_norm" in est.get_params()


def test_fixed_random_state_warns(data):
    with pytest.warns(PrivacyLeakWarning, match="random_state"):
        search(random_state=1).fit(data[:500])
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        search(random_state=None).fit(data[:500])


# ------------------------------------------------------------ refusals
@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(scoring="r2"), "bounded"),
        (dict(scoring="neg_mean_squared_error"), "bounded"),
        (dict(scoring=lambda est, X, y=None: 0.0), "bounded"),
        (dict(cv=ShuffleSplit(3, random_state=0)), "not supported"),
        (dict(cv=StratifiedKFold(3)), "not supported"),
        (dict(cv=[(np.arange(100, 200), np.arange(100))]), "exactly one"),
        (dict(cv=[(np.arange(150), np.arange(100, 200)),
                  (np.arange(100), np.arange(100))]), "overlap"),
    ],
)
def test_refuses_unbounded_scorers_and_bad_splitters(kwargs, match, data):
    budget = BudgetAccountant()
    with pytest.raises(ValueError, match=match):
        search(accountant=budget, **kwargs).fit(data[:200])
    assert budget.n_charges == 0


@pytest.mark.parametrize(
    "estimator, grid, match",
    [
        (PrivatePCA(), GRID, "data_norm"),
        (make_pipeline(StandardScaler(), PrivatePCA(data_norm=1.0)),
         {"privatepca__n_components": [1]}, "without privacy"),
        (make_pipeline(PrivatePCA(data_norm=1.0), LogisticRegression()),
         {"privatepca__n_components": [1]}, "without privacy"),
        (PrivatePCA(data_norm=1.0), {"accountant": [None]}, "may not set"),
        (PrivatePCA(data_norm=1.0), {"epsilon": [2.0]}, "budget of the whole"),
        (StandardScaler(), {"with_mean": [True]}, "private estimator"),
        (CoherentPowerPCA(data_norm=1.0, selection="repetition"),
         {"n_components": [1]},
         "Rényi"),
    ],
)
def test_refuses_what_it_cannot_make_private(estimator, grid, match, data):
    budget = BudgetAccountant()
    with pytest.raises((ValueError, TypeError), match=match):
        PrivateGridSearchCV(estimator, grid, accountant=budget).fit(data[:200])
    assert budget.n_charges == 0


# ------------------------------------------------------------ audit
def noiseless_plan(*args, **kwargs):
    """A broken plan: near-exact fits and no noise on the scores."""
    plan = PLAN_SEARCH(*args, **kwargs)
    return plan._replace(fit_epsilons=[1e6 for _ in plan.fit_epsilons],
                         selection_sigma=1e-9)


def flip_pair():
    """Neighbours whose first row decides between n_components 1 and 2."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 4)) * rng.uniform(0.05, 0.5, size=4)
    X_prime = X.copy()
    X[0], X_prime[0] = np.eye(4)[0], np.eye(4)[1]
    return X, X_prime


def best_index(search):
    return float(search.best_index_)


def test_audit_of_the_choice_stays_below_the_claim(monkeypatch):
    X, X_prime = flip_pair()
    settings = dict(param_grid={"n_components": [1, 2]}, epsilon=2.0, cv=3,
                    refit=False)
    honest = PrivateGridSearchCV(PrivatePCA(data_norm=1.0), **settings)
    with monkeypatch.context() as patch:
        patch.setattr(ms, "plan_search", noiseless_plan)
        found = audit(honest, X, X_prime, best_index, n_fits=100, random_state=0)
    assert found.epsilon_lower > 2.0  # the pair flips the choice
    found = audit(honest, X, X_prime, best_index, n_fits=200, random_state=0)
    assert found.epsilon_lower <= 2.0


def test_threads_give_the_same_release(data):
    """Each fold's generator is drawn before the folds run: n_jobs changes
    nothing but the speed (and every fit still reaches one accountant)."""
    budget = BudgetAccountant()
    one = search(accountant=budget).fit(data)
    two = search(accountant=budget, n_jobs=2).fit(data)
    np.testing.assert_array_equal(one.cv_results_["released_test_score"],
                                  two.cv_results_["released_test_score"])
    assert budget.n_charges == 2


@pytest.mark.parametrize("fit", [
    lambda acc, X: CoherentPowerPCA(2, data_norm=5.0, n_jobs=0,
                                    accountant=acc).fit(X),
    lambda acc, X: search(accountant=acc, n_jobs=0).fit(X),
    lambda acc, X: private_cross_val_score(PrivatePCA(2, data_norm=5.0), X,
                                           n_jobs=0, accountant=acc),
], ids=["CoherentPowerPCA", "PrivateGridSearchCV", "private_cross_val_score"])
def test_n_jobs_zero_is_refused_with_the_parameters_uncharged(fit, data):
    """n_jobs=0 passed [Integral, None] and failed in joblib after the charge
    (the search's folds) or was read as one thread (CoherentPowerPCA's dense
    path); it is refused with the other parameters, before the data is read,
    as every estimator that takes n_jobs refuses it."""
    from sklearn.utils._param_validation import InvalidParameterError
    budget = BudgetAccountant(epsilon=10.0, delta=1e-3)
    with pytest.raises(InvalidParameterError, match="'n_jobs' parameter"):
        fit(budget, data[:300])
    assert budget.n_charges == 0 and budget.spent == (0.0, 0.0)


def test_default_coherent_and_a_ledger_see_one_charge(tmp_path):
    """CoherentPowerPCA's default automatic mode is exact GDP, so it can be
    searched; a ledger-backed accountant records the whole search as one row
    spending exactly the request."""
    X = np.random.default_rng(3).normal(size=(600, 5)) * [3, 2, 1, 0.5, 0.5]
    X /= np.linalg.norm(X, axis=1).max()
    ledger = BudgetAccountant(3.0, 1e-6, path=tmp_path / "budget.db")
    search = PrivateGridSearchCV(
        CoherentPowerPCA(data_norm=1.0), {"n_components": [1, 2]}, cv=3,
        epsilon=2.0, delta=1e-6, accountant=ledger,
    )
    search.fit(X)
    assert ledger.n_charges == 1
    assert ledger.spent[0] == pytest.approx(2.0, rel=1e-9)
    assert search.privacy_spent_ == pytest.approx((2.0, 1e-6), rel=1e-9)
    assert BudgetAccountant(path=tmp_path / "budget.db").n_charges == 1
    row = BudgetAccountant(path=tmp_path / "budget.db").charges[0]
    assert row["estimator"] == "PrivateGridSearchCV"  # as every fit's row does
    assert row["params"]["epsilon"] == 2.0


# ---------------------------------------- refusals before the charge (review)
@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_a_head_that_makes_a_value_non_finite_is_not_refused(bad):
    """Issue 30, 2: a stateless head may map a finite row to NaN or inf
    (np.log of 0 or of a negative value: a zero income). The search released
    for X > 0 but refused X' with one such entry, which told the neighbours
    apart with probability 1. A headed candidate's private step is now fitted
    with non_finite="clip" (a fixed map of each value), and its scores read
    the rows through the same map: both neighbours fit, each charged once,
    with finite released scores."""
    rng = np.random.default_rng(0)
    X = np.abs(rng.normal(size=(300, 4))) + 0.1
    X_prime = X.copy()
    X_prime[7, 0] = bad
    for Z in (X, X_prime):
        pipe = Pipeline([("log", FunctionTransformer(np.log)),
                         ("pca", PrivatePCA(data_norm=2.0))])
        budget = BudgetAccountant(epsilon=10.0)
        search = PrivateGridSearchCV(pipe, {"pca__n_components": [1, 2]},
                                     epsilon=1.0, accountant=budget)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # np.log's own warning
            search.fit(Z)
        assert budget.n_charges == 1
        assert np.isfinite(search.cv_results_["released_test_score"]).all()
        best = search.best_estimator_
        assert best["pca"].non_finite == "clip"  # later refits map as the fits did
        assert np.isfinite(best["pca"].components_).all()
        assert pipe["pca"].non_finite == "raise"  # the user's estimator untouched


def _no_zero_income(X):
    """A user's per-row function that fails on some values."""
    if np.any(X == 0):
        raise ValueError("a zero income")
    return np.log(X)


def test_a_head_that_fails_on_some_rows_fails_the_search_charged():
    """Issue 30, 1–2: the heads run on the rows after the search's charge, so
    a user's function that raises on some value fails a charged search, not
    a refusal that spends nothing on one neighbour and releases on the other
    (before: X' was refused uncharged)."""
    rng = np.random.default_rng(0)
    X = np.abs(rng.normal(size=(300, 4))) + 0.1
    X_prime = X.copy()
    X_prime[7, 0] = 0.0
    for Z, fails in ((X, False), (X_prime, True)):
        pipe = make_pipeline(FunctionTransformer(_no_zero_income),
                             PrivatePCA(data_norm=2.0))
        budget = BudgetAccountant(epsilon=10.0)
        search = PrivateGridSearchCV(pipe, {"privatepca__n_components": [1, 2]},
                                     epsilon=1.0, accountant=budget)
        if fails:
            with pytest.raises(ValueError, match="a zero income"):
                search.fit(Z)
        else:
            search.fit(Z)
        assert budget.n_charges == 1


def _fails_on_validation_folds(X):
    """A user's step that reads the training folds and fails on the
    validation ones (fewer rows): after the search's charge."""
    if len(X) < 150:
        raise ValueError("my step cannot read a validation fold")
    return X


class _TwoArgumentError(Exception):
    def __init__(self, what, where):
        super().__init__(f"{what} at {where}")


def _fails_in_two_arguments(X):
    if len(X) < 150:
        raise _TwoArgumentError("my own error", "a validation fold")
    return X


@pytest.mark.parametrize("supervised", [False, True])
def test_an_error_after_the_charge_says_the_budget_was_spent(supervised):
    """A user's step raising on a validation fold surfaced its raw error, as
    if nothing had been spent: it now says the search's budget was spent,
    in an error of its type (the original its cause), or in a RuntimeError
    where the type cannot be made from a message. A refusal before the
    charge says nothing was spent."""
    from sklearn.utils._param_validation import InvalidParameterError

    from sklearn_dppca.linear_model import PrivateRidge

    X = np.random.default_rng(0).normal(size=(300, 4)) * 0.3
    y = X.sum(axis=1) * 0.1 if supervised else None
    spent = "The budget of this search was spent"

    def search(function, budget, **kwargs):
        private, grid = (PrivateRidge((-1.0, 1.0), data_norm=2.0),
                         {"privateridge__alpha": [1.0, 2.0]}) if supervised else (
            PrivatePCA(data_norm=2.0), {"privatepca__n_components": [1, 2]})
        pipe = make_pipeline(FunctionTransformer(function), private)
        return PrivateGridSearchCV(pipe, grid, **{
            "cv": 3, "epsilon": 1.0, "accountant": budget, **kwargs})

    budget = BudgetAccountant(epsilon=10.0)
    with pytest.raises(ValueError, match=spent) as raised:
        search(_fails_on_validation_folds, budget).fit(X, y)
    assert str(raised.value).startswith("my step cannot read a validation fold")
    assert isinstance(raised.value.__cause__, ValueError)
    assert budget.n_charges == 1
    with pytest.raises(RuntimeError, match=spent) as raised:
        search(_fails_in_two_arguments, budget).fit(X, y)
    assert "_TwoArgumentError: my own error at a validation fold" in str(raised.value)
    assert isinstance(raised.value.__cause__, _TwoArgumentError)
    assert budget.n_charges == 2
    # before the charge: nothing spent, and not said to be
    refusals = [(dict(n_jobs=0), X, InvalidParameterError),
                (dict(epsilon=100.0), X, BudgetExceededError)]
    if not supervised:  # a bare candidate reads NaN itself: refused uncharged
        nan = X.copy()
        nan[3, 1] = np.nan
        refusals.append(({}, nan, ValueError))
    for kwargs, rows, error in refusals:
        est = search(_fails_on_validation_folds, budget, **kwargs)
        if rows is not X:
            est = PrivateGridSearchCV(PrivatePCA(data_norm=2.0),
                                      {"n_components": [1, 2]}, accountant=budget)
        with pytest.raises(error) as raised:
            est.fit(rows, y)
        assert spent not in str(raised.value)
    assert budget.n_charges == 2


def test_scores_of_rows_made_non_finite_stay_bounded():
    """The scores read the head's rows through np.nan_to_num, as the fits do:
    a row of ±finfo.max is clipped without NaN and scores at most C²."""
    big = np.finfo(np.float64).max
    rows = np.array([[big, -big, 0.0], [-big, -big, -big], [0.0, 0.0, 0.0]])
    clipped = clip_rows(rows, 2.0, np.array([0.5, -0.5, 1.0]))
    assert np.isfinite(clipped).all()
    np.testing.assert_allclose(np.linalg.norm(clipped[:2], axis=1), 2.0, rtol=1e-12)
    scores = captured_variance_rows(rows, np.zeros(3), np.eye(3)[:2], 2.0)
    assert np.isfinite(scores).all() and (scores <= 4.0).all()
    np.testing.assert_allclose(scores[:2], [4.0, 4.0 * 2 / 3], rtol=1e-12)
    inf_rows = np.array([[np.inf, -np.inf, np.nan]])
    mapped = _search_run._host(inf_rows, non_finite="clip")
    np.testing.assert_array_equal(mapped, [[big, -big, 0.0]])
    assert np.isnan(_search_run._host(inf_rows)).any()  # only "clip" maps


def test_a_bare_candidate_reads_nan_as_its_non_finite_says():
    """A bare private estimator reads X itself: NaN in X is refused before
    the charge with the default non_finite="raise" (outside its domain), and
    mapped to 0 in the fits and the scores with non_finite="clip"."""
    X, _ = neighbours_with(np.zeros(5))
    X[3, 2] = np.nan
    budget = BudgetAccountant()
    grid = {"n_components": [1, 2]}
    with pytest.raises(ValueError, match="contains NaN"):
        PrivateGridSearchCV(PrivatePCA(data_norm=1.0), grid, cv=3,
                            accountant=budget).fit(X)
    assert budget.n_charges == 0
    search = PrivateGridSearchCV(PrivatePCA(data_norm=1.0, non_finite="clip"),
                                 grid, cv=3, accountant=budget).fit(X)
    assert budget.n_charges == 1
    assert np.isfinite(search.cv_results_["released_test_score"]).all()


def test_search_refuses_training_folds_that_repeat_a_row():
    """_check_splits counts a row's appearances over all training folds and
    composes the fits as that many releases. A row repeated r times inside
    ONE training fold has sensitivity r there (μ² cost r², not r): here row 0
    is 4 times in fold 0 and once in 3 other folds, costing 19 fit-μ² while 7
    are paid. Explicit splits with repeated indices must be refused before
    the charge (or accounted as Σ_f r_f²)."""
    from sklearn.model_selection import KFold

    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 4))
    X /= np.linalg.norm(X, axis=1).max()
    splits = [(np.r_[train, np.repeat(train[:1], 3)], test)
              for train, test in KFold(5).split(X)]
    budget = BudgetAccountant(epsilon=10.0)
    search = PrivateGridSearchCV(PrivatePCA(data_norm=1.0),
                                 {"n_components": [1, 2]}, cv=splits, epsilon=1.0,
                                 accountant=budget)
    with pytest.raises(ValueError):
        search.fit(X)
    assert budget.n_charges == 0


@pytest.mark.parametrize("grid, X_kind, match", [
    ({"bounds": [(np.zeros(4), np.ones(4))]}, "array", "length"),
    ({"bounds": [{"a": (0, 1), "b": (0, 1)}]}, "frame", "no \\(low, high\\)"),
    ({"bounds": [dict.fromkeys("abc", (0, 1))]}, "array", "no feature names"),
    ({"data_norm": [2.0, 1e20]}, "float32", "too large for float32"),
])
def test_what_a_fit_checks_against_X_is_checked_before_the_search_s_charge(
        grid, X_kind, match):
    """Bounds of another length or naming other columns, and a data_norm
    float32 rows cannot hold, are refused by a fit before its charge; the
    search's plan did not know X's columns or dtype, so a search (or
    private_cross_validate) was charged and then failed on them (review 66)."""
    import pandas as pd

    X = np.random.default_rng(0).uniform(0, 1, size=(300, 3))
    if X_kind == "frame":
        X = pd.DataFrame(X, columns=["a", "b", "c"])
    elif X_kind == "float32":
        X = X.astype(np.float32)
    step = PrivatePCA(1, data_norm=None if "bounds" in grid else 2.0)
    budget = BudgetAccountant()
    search = PrivateGridSearchCV(step, grid, cv=3, epsilon=1.0, accountant=budget)
    with pytest.raises(ValueError, match=match):
        search.fit(X)
    assert budget.n_charges == 0
    if X_kind != "frame":  # after a PublicScaler too (review 67)
        scaled = Pipeline([("scale", PublicScaler(center=0.0, scale=1.0)),
                           ("pca", step)])
        with pytest.raises(ValueError, match=match):
            PrivateGridSearchCV(scaled, {f"pca__{k}": v for k, v in grid.items()},
                                cv=3, epsilon=1.0, accountant=budget).fit(X)
        assert budget.n_charges == 0
    if len(next(iter(grid.values()))) == 1:
        alone = step.set_params(**{k: v[0] for k, v in grid.items()})
        with pytest.raises(ValueError, match=match):
            ms.private_cross_validate(alone, X, cv=3, accountant=budget)
        assert budget.n_charges == 0


def test_a_group_whose_width_is_not_public_fits_at_its_largest_k():
    """After a widening FunctionTransformer the width is known only after the
    charge: the group's fold fits with every component (never checked)
    went over memory_limit and failed the charged search, though each
    candidate fits alone (review 66). They now fit at the largest k."""
    X = np.random.default_rng(0).uniform(-1, 1, size=(600, 4))
    widen = FunctionTransformer(lambda rows: np.hstack([rows] * 375))  # 1 500
    pipe = Pipeline([("w", widen), ("pca", PrivatePCA(data_norm=40.0,
                                                      memory_limit=60e6))])
    budget = BudgetAccountant()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search = PrivateGridSearchCV(pipe, {"pca__n_components": [1, 2]}, cv=3,
                                     accountant=budget, random_state=0).fit(X)
    assert budget.n_charges == 1
    assert search.best_estimator_[-1].n_components_ in (1, 2)
    # n_components=None there is fitted on its own, not in a group at its
    # "largest" k (review 67: the fold fits failed after the charge)
    pipe.set_params(pca__memory_limit="auto")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search = PrivateGridSearchCV(pipe, {"pca__n_components": [1, None]}, cv=3,
                                     accountant=budget, random_state=0).fit(X[:, :2])
    assert budget.n_charges == 2


@pytest.mark.parametrize("kind", ["array", "frame", "coo", "dask"])
def test_a_candidate_wider_than_its_heads_output_fails_before_the_charge(kind):
    """The width a stateless step makes of X's columns, found on X without
    its rows (public): a candidate with more components is a public failure
    that gets no budget. It failed the whole search after its charge (COO
    and Dask input too: review 76)."""
    from scipy import sparse

    from sklearn_dppca.linear_model import PrivateLDA

    rng = np.random.default_rng(0)
    X, y = rng.uniform(-1, 1, size=(600, 6)), rng.integers(0, 2, 600)
    frame = kind == "frame"
    if frame:
        X = pytest.importorskip("pandas").DataFrame(X, columns=list("abcdef"))
    elif kind == "coo":
        X = sparse.coo_matrix(X)
    elif kind == "dask":
        X = pytest.importorskip("dask.array").from_array(X, chunks=(200, 6))
    first = FunctionTransformer(lambda rows: rows[rows.columns[:3]] if frame
                                else rows[:, :3])
    budget = BudgetAccountant()
    for tail, target in (([], None), ([PrivateLDA([0, 1], data_norm=2.0)], y)):
        pipe = make_pipeline(first, PrivatePCA(data_norm=2.0), *tail)
        with pytest.warns(FitFailedWarning, match="before any budget"):
            search = PrivateGridSearchCV(pipe, {"privatepca__n_components": [2, 5]},
                                         cv=3, accountant=budget).fit(X, target)
        assert np.isnan(search.cv_results_["mean_test_score"][1])
        assert search.best_params_ == {"privatepca__n_components": 2}
    assert budget.n_charges == 2


def test_sparse_rows_far_from_the_centre_are_scored_as_dense_rows():
    """The scores clip sparse rows around the released mean by expanding
    ‖x − m‖²: at ‖m‖ = 1.7e9 (timestamps) its round-off swamped C², and the
    search's scores on CSR rows were a tenth below those of the same dense
    rows (review 66). Far from the origin the rows are densified by blocks."""
    from scipy import sparse

    from sklearn_dppca._row_maps import clipped_projections

    rng = np.random.default_rng(0)
    X = np.c_[1.7e9 + 4.0 * rng.normal(size=2000), rng.normal(size=2000)]
    centre, basis = np.array([1.7e9, 0.0]), np.eye(2)
    dense = clipped_projections(X, 6.0, centre, basis)
    np.testing.assert_allclose(
        clipped_projections(sparse.csr_matrix(X), 6.0, centre, basis), dense,
        rtol=0, atol=1e-6)


# ------------------------------------- every candidate, as it runs (issue 21)
def test_a_grid_value_cannot_slip_in_a_stateful_step(data):
    """The checks apply to each candidate after set_params: a StandardScaler
    supplied by the grid would fit on every fold (and the refit on all rows)
    without noise."""
    pipe = Pipeline([("pre", "passthrough"), ("pca", PrivatePCA(data_norm=4.0))])
    budget = BudgetAccountant()
    search = PrivateGridSearchCV(pipe, {"pre": [StandardScaler()],
                                        "pca__n_components": [1, 2]},
                                 cv=3, accountant=budget)
    with pytest.raises(ValueError, match="'pre' \\(StandardScaler\\).*without privacy"):
        search.fit(data[:300])
    assert budget.n_charges == 0
    # and a grid value may not bring its own non-numeric data_norm either
    search.set_params(param_grid={"pca": [PrivatePCA(data_norm="auto")]})
    with pytest.raises(ValueError, match="data_norm='auto'"):
        search.fit(data[:300])
    assert budget.n_charges == 0


@pytest.mark.parametrize("n_jobs", [None, 3])
def test_grid_estimators_are_cloned_not_fitted_in_place(n_jobs, data):
    mine = PrivatePCA(n_components=2, data_norm=1.0, epsilon=7.0)
    before = mine.get_params()
    pipe = Pipeline([("pca", PrivatePCA(data_norm=1.0))])
    budget = BudgetAccountant()
    fitted = PrivateGridSearchCV(pipe, {"pca": [mine]}, cv=3, n_jobs=n_jobs,
                                 epsilon=1.0, accountant=budget).fit(data)
    assert not hasattr(mine, "components_")
    assert mine.get_params() == before  # epsilon, accountant, random_state
    assert fitted.best_estimator_["pca"] is not mine
    assert budget.n_charges == 1


def test_the_grid_can_choose_the_mechanism(data):
    """A grid of private steps is a private choice of the mechanism, in one
    charge: each mechanism is a release of its own in the plan."""
    pipe = Pipeline([("pca", None)])
    grid = {"pca": [PrivatePCA(3, data_norm=1.0),
                    CoherentPowerPCA(3, data_norm=1.0),
                    ComplexGaussPCA(3, data_norm=1.0)]}
    budget = BudgetAccountant()
    fitted = PrivateGridSearchCV(pipe, grid, cv=3, epsilon=2.0,
                                 accountant=budget).fit(data)
    assert budget.n_charges == 1 and budget.spent[0] == pytest.approx(2.0)
    assert fitted.privacy_spent_ == (2.0, 1e-6)
    assert len(fitted.fit_epsilons_) == 3
    chosen = type(fitted.best_estimator_["pca"])
    assert chosen is type(grid["pca"][fitted.best_index_])
    assert fitted.transform(data[:4]).shape == (4, 3)


def test_epsilon_in_the_grid_is_refused_by_name(data):
    budget = BudgetAccountant()
    with pytest.raises(ValueError, match=r"\['epsilon'\].*fit_weights"):
        PrivateGridSearchCV(PrivatePCA(data_norm=1.0), {"epsilon": [0.5, 1.0]},
                            accountant=budget).fit(data[:300])
    assert budget.n_charges == 0


def neighbours_with(row):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 5)) * [0.4, 0.3, 0.1, 0.1, 0.1]
    X_prime = X.copy()
    X_prime[0] = row
    return X, X_prime


def warnings_of(search, X):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        search.fit(X)
    return [(w.category, str(w.message)) for w in caught]


@pytest.mark.parametrize("magnitude", [1e200, 1e300])
def test_extreme_rows_raise_no_warning(magnitude):
    """An entry near 1e200 overflowed the score's norms and warned after the
    charge, and only on that neighbour; under -W error it raised."""
    X, X_prime = neighbours_with(np.full(5, magnitude))
    search = PrivateGridSearchCV(PrivatePCA(data_norm=1.0),
                                 {"n_components": [1, 2]}, cv=3,
                                 accountant=BudgetAccountant())
    assert warnings_of(search, X) == warnings_of(search, X_prime) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        search.fit(X_prime)
    scores = captured_variance_rows(X_prime[:3], np.zeros(5), np.eye(5)[:2], 1.0)
    assert np.all(np.isfinite(scores)) and scores[0] == pytest.approx(0.4)


def test_a_step_that_warns_on_some_rows_is_silent():
    """FunctionTransformer(check_inverse=True) warns only when a sampled row
    is negative; what the search shows may not depend on it."""
    X, X_prime = neighbours_with(-np.ones(5))
    X = np.abs(X)
    X_prime[1:] = X[1:]
    step = FunctionTransformer(np.abs, inverse_func=np.abs, check_inverse=True)
    search = PrivateGridSearchCV(make_pipeline(step, PrivatePCA(data_norm=1.0)),
                                 {"privatepca__n_components": [1, 2]}, cv=3,
                                 accountant=BudgetAccountant())
    assert warnings_of(search, X) == warnings_of(search, X_prime) == []


def test_a_failing_search_leaves_the_object_as_it_was(data, monkeypatch):
    budget = BudgetAccountant()
    search = PrivateGridSearchCV(PrivatePCA(data_norm=1.0), {"n_components": [1, 2]},
                                 cv=3, accountant=budget).fit(data)
    before = dict(vars(search))
    original = ms._fit_candidate

    def refit_fails(candidate, epsilon, delta, generator, X, y, **options):
        if len(X) == len(data):
            raise MemoryError("the refit failed")
        return original(candidate, epsilon, delta, generator, X, y, **options)

    monkeypatch.setattr(ms, "_fit_candidate", refit_fails)
    with pytest.raises(MemoryError):
        search.fit(data)
    assert vars(search).keys() == before.keys()
    for name, value in before.items():
        assert vars(search)[name] is value
    assert budget.n_charges == 2  # the charge stays


def test_a_candidate_that_fails_publicly_scores_error_score(data):
    budget = BudgetAccountant()
    search = PrivateGridSearchCV(PrivatePCA(data_norm=1.0),
                                 {"n_components": [2, 3, 11]}, cv=3,
                                 accountant=budget)
    with pytest.warns(FitFailedWarning, match="1 of the 3 candidates"):
        search.fit(data)
    scores = search.cv_results_["mean_test_score"]
    assert np.isnan(scores[2]) and np.all(np.isfinite(scores[:2]))
    assert search.cv_results_["rank_test_score"][2] == 3
    assert search.privacy_spent_ == (1.0, 1e-6) and budget.n_charges == 1
    with pytest.raises(ValueError, match="must be between"):
        search.set_params(error_score="raise").fit(data)
    with pytest.raises(ValueError, match="All the 1 candidates"):
        search.set_params(error_score=np.nan,
                          param_grid={"n_components": [11]}).fit(data)
    assert budget.n_charges == 1


# ------------------------------------------------ the GridSearchCV surface
def test_refit_by_name_by_callable_and_not_at_all(data):
    small = data[:1500]
    by_name = search(refit="captured_variance").fit(small)
    assert by_name.best_score_ == by_name.cv_results_["mean_test_score"][
        by_name.best_index_]
    lowest = search(refit=lambda results: int(
        np.argmin(results["param_n_components"]))).fit(small)
    assert lowest.best_index_ == 0 and not hasattr(lowest, "best_score_")
    assert lowest.best_estimator_.n_components_ == 1
    with pytest.raises(ValueError, match="names no scorer"):
        search(refit="r2").fit(small)
    off = search(refit=False).fit(small)
    for method in ("transform", "inverse_transform", "score", "score_samples"):
        assert not hasattr(off, method)
    assert hasattr(off, "best_params_") and hasattr(off, "best_score_")


def test_cv_results_columns_and_types(data):
    fitted = search(cv=3).fit(data[:1500])
    results = fitted.cv_results_
    column = results["param_n_components"]
    assert isinstance(column, np.ma.MaskedArray) and column.dtype.kind == "i"
    folds = np.stack([results[f"split{f}_test_score"] for f in range(3)], axis=1)
    np.testing.assert_allclose(results["mean_test_score"], folds.mean(axis=1))
    np.testing.assert_allclose(results["std_test_score"], folds.std(axis=1))
    assert results["rank_test_score"][fitted.best_index_] == 1
    assert fitted.scorer_(fitted.best_estimator_, data[:50]) == fitted.score(data[:50])
    assert fitted.multimetric_ is False and fitted.n_splits_ == 3
    mixed = search(cv=3, param_grid=[{"n_components": [1, 2]},
                                     {"whiten": [True]}]).fit(data[:1500])
    assert mixed.cv_results_["param_n_components"].mask.tolist() == [
        False, False, True]
    assert mixed.cv_results_["param_whiten"].dtype == bool


def test_cv_as_masks_and_an_exhausted_iterator(data):
    X = data[:600]
    masks = [(np.arange(600) % 3 != f, np.arange(600) % 3 == f) for f in range(3)]
    by_mask = search(cv=masks).fit(X)
    by_index = search(cv=[(np.flatnonzero(tr), np.flatnonzero(te))
                          for tr, te in masks]).fit(X)
    np.testing.assert_array_equal(by_mask.cv_results_["mean_test_score"],
                                  by_index.cv_results_["mean_test_score"])
    used = (pair for pair in KFold(3).split(X))
    list(used)
    with pytest.raises(ValueError, match="no split.*consumed"):
        search(cv=used).fit(X)


def test_refusals_of_the_surface_before_any_charge(data):
    budget = BudgetAccountant()
    X = data[:300]
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        search(accountant=budget).fit(X, np.zeros(299))
    with pytest.raises(ValueError, match="return_train_score"):
        search(accountant=budget, return_train_score=True).fit(X)
    with pytest.raises(ValueError, match="multi-metric"):
        search(accountant=budget, scoring=["captured_variance", "r2"]).fit(X)
    assert budget.n_charges == 0


def test_verbose_prints_public_values_only(data, capsys):
    search(verbose=2, cv=3).fit(data[:900])
    out = capsys.readouterr().out
    assert "Fitting 3 folds for each of 6 candidates" in out
    assert "Refitted candidate" in out
    assert "time" not in out and "score=" not in out


def test_html_repr_and_tags(data):
    from sklearn.utils import get_tags

    fitted = search(cv=3).fit(data[:900])
    assert "best_estimator_: PrivatePCA" in fitted._repr_html_()
    assert "estimator: PrivatePCA" in search()._repr_html_()
    tags = get_tags(fitted)
    assert tags.transformer_tags is not None and tags.input_tags.sparse
    assert tags.array_api_support


def test_pandas_in_and_out_without_a_feature_name_warning():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(600, 4)) * [0.4, 0.3, 0.1, 0.1],
                     columns=list("abcd"))
    est = PrivatePCA(data_norm=1.0).set_output(transform="pandas")
    search = PrivateGridSearchCV(est, {"n_components": [1, 2]}, cv=3,
                                 accountant=BudgetAccountant())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Z = search.fit(X).transform(X)
    assert list(search.feature_names_in_) == list("abcd")
    assert list(Z.columns) == [f"privatepca{i}" for i in range(Z.shape[1])]


# ------------------------------------------- issue 30: what counts as stateless
class _LearnsTheMean(FunctionTransformer):
    """A FunctionTransformer subclass whose fit learns the training mean."""

    def fit(self, X, y=None):
        super().fit(X, y)
        self.mean_ = np.asarray(X).mean(axis=0)
        return self

    def transform(self, X):
        return np.asarray(X) - self.mean_


class _ClaimsToBeStateless(StandardScaler):
    """Any class can set the attribute the search used to trust."""

    _dppca_stateless = True


class _SubScaler(PublicScaler):
    """A subclass of the package's stateless scaler (may override fit)."""


@pytest.mark.parametrize("step", [
    _LearnsTheMean(),
    _ClaimsToBeStateless(),
    _SubScaler(center=0.0, scale=1.0),
], ids=["FunctionTransformer subclass", "_dppca_stateless", "PublicScaler subclass"])
def test_only_exact_stateless_types_stand_beside_the_private_step(step, data):
    """Issue 30 §6: the stateless check is by exact type, from a registry the
    package keeps, not by isinstance or an attribute anyone can set."""
    budget = BudgetAccountant()
    pipe = make_pipeline(step, PrivatePCA(data_norm=4.0))
    search = PrivateGridSearchCV(pipe, {"privatepca__n_components": [1, 2]},
                                 cv=3, accountant=budget)
    with pytest.raises(ValueError, match="without privacy"):
        search.fit(data[:300])
    assert budget.n_charges == 0


def test_exact_stateless_types_are_still_accepted(data):
    budget = BudgetAccountant()
    for step in (FunctionTransformer(np.tanh), PublicScaler(center=0.0, scale=2.0)):
        pipe = make_pipeline(step, PrivatePCA(data_norm=4.0))
        PrivateGridSearchCV(pipe, {"privatepca__n_components": [1, 2]}, cv=3,
                            accountant=budget).fit(data[:300])
    assert budget.n_charges == 2


# ------------------------------------------- issue 30: candidates grouped by value
def test_candidates_are_grouped_by_value_not_by_repr():
    """NumPy's repr abbreviates arrays over 1000 values: two bounds that differ
    in one entry of 2 × 1500 had one repr and were fitted as one release."""
    d = 1500
    first = np.array([np.zeros(d), np.ones(d)])
    second = first.copy()
    second[1, 700] = 2.0
    assert repr(first) == repr(second)
    splits = list(KFold(3).split(np.zeros((30, 1))))
    plan = PLAN_SEARCH(PrivatePCA(data_norm=1.0),
                       {"bounds": [first, second, first.copy()],
                        "n_components": [1, 2]},
                       epsilon=1.0, delta=1e-6, splits=splits, n_samples=30,
                       n_features=d)
    by_bounds = {}
    for members in plan.groups:
        keys = {plan.candidates[c].params["bounds"][1, 700] for c in members}
        assert len(keys) == 1
        by_bounds.setdefault(keys.pop(), []).append(sorted(members))
    assert sorted(by_bounds) == [1.0, 2.0]
    assert len(plan.groups) == 2  # first and its equal copy share one release
    assert sorted(len(m) for m in plan.groups) == [2, 4]
    # the heads' cache (_check_heads) is keyed by value too
    heads = [Pipeline([("scale", PublicScaler(center=b[1]))]) for b in (first, second)]
    assert _search_plan._value_key(heads[0]) != _search_plan._value_key(heads[1])
    assert _search_plan._value_key(heads[0]) == _search_plan._value_key(clone(heads[0]))


# ------------------------------------------- issue 30: score noise without underflow
def test_score_noise_of_a_tiny_data_norm_is_exact_and_normal():
    """Issue 30 §3: √(Σ C⁴) underflowed to 0 for C ≤ 1e-81, and the fold
    scores were released exactly. In units of C_max² it is representable: σ
    is the exact value to 1e-12, computed here in rational arithmetic."""
    from fractions import Fraction

    rng = np.random.default_rng(0)
    C = 1e-90
    X = rng.normal(size=(300, 4)) * [0.4, 0.3, 0.1, 0.1] * C
    budget = BudgetAccountant()
    fitted = PrivateGridSearchCV(PrivatePCA(data_norm=C), {"n_components": [1, 2]},
                                 cv=3, accountant=budget).fit(X)
    sigma = fitted.selection_sigma_
    assert np.finfo(np.float64).tiny <= sigma < math.inf
    mu_sel = gdp_mu(1.0, 1e-6) * math.sqrt(SEARCH_BUDGET_SHARES["selection"])
    # two candidates share one release, each scored: Σ_c C_c⁴ = 2 C⁴
    exact_sq = 2 * Fraction(C) ** 4 / Fraction(mu_sel) ** 2
    assert abs(float(Fraction(sigma) ** 2 / exact_sq) - 1.0) < 2e-12
    assert budget.n_charges == 1
    # candidates of different C: σ = C_max² √(Σ (C_c/C_max)⁴) / μ_sel
    splits = list(KFold(3).split(np.zeros((30, 1))))
    norms = [1e-100, 3e-95, 1e-90]
    plan = PLAN_SEARCH(PrivatePCA(), {"data_norm": norms}, epsilon=1.0,
                       delta=1e-6, splits=splits, n_samples=30, n_features=4)
    exact_sq = sum(Fraction(c) ** 4 for c in norms) / Fraction(mu_sel) ** 2
    assert abs(float(Fraction(plan.selection_sigma) ** 2 / exact_sq) - 1.0) < 2e-12


@pytest.mark.parametrize("estimator, epsilon", [
    (PrivatePCA(data_norm=1e-200), 1.0),  # below the float64 bounds: C² is 0
    (PrivatePCA(data_norm=1e200), 1.0),  # C⁴ and C² overflow
    (PrivatePCA(data_norm=1e-100), 1e300),  # σ = C²/μ underflows
])
def test_a_search_whose_score_noise_is_not_normal_is_refused_before_its_charge(
        estimator, epsilon):
    budget = BudgetAccountant()
    X = np.random.default_rng(0).normal(size=(60, 3)) * 1e-101
    search = PrivateGridSearchCV(estimator, {"n_components": [1, 2]}, cv=3,
                                 epsilon=epsilon, accountant=budget)
    with pytest.raises(ValueError, match="data_norm|normal"):
        search.fit(X)
    assert budget.n_charges == 0


@pytest.mark.parametrize("scale", [1e-180, 1e-300, 1e240])
def test_the_floor_penalty_is_equivariant_in_scale(scale):
    """Post-processing in units of C²: τ² and σ² underflowed (or
    overflowed) and the penalty's margin vanished (or became inf)."""
    rng = np.random.default_rng(1)
    released = rng.uniform(50, 100, size=(3, 4))
    k = np.array([[1] * 4, [2] * 4, [3] * 4])
    n_val = np.array([20, 20, 20, 20])
    floor = np.full(4, 0.3)
    reference, penalty = floor_penalised_scores(released, k, n_val, floor, 2.0)
    scaled, scaled_penalty = floor_penalised_scores(
        released * scale, k, n_val, floor * scale, 2.0 * scale)
    np.testing.assert_allclose(scaled / scale, reference, rtol=1e-12)
    np.testing.assert_allclose(scaled_penalty / scale, penalty, rtol=1e-12)


# ------------------------------------------- a public box instead of data_norm
def test_a_pipeline_into_a_public_box_is_searched():
    """Issue 32: the docs' recipe, a PublicScaler into the unit cube and
    PrivatePCA(bounds=(0, 1)), was refused ("data_norm=None must be a public
    positive number"). The box is public and so is its radius: the scores'
    bound is that radius (√d/2 around the cube's centre)."""
    rng = np.random.default_rng(0)
    folds = list(KFold(5).split(np.zeros((3000, 1))))
    X = rng.uniform(size=(3000, 4)) * [10.0, 5.0, 3.0, 1.0]
    ranges = (0, [10, 5, 3, 1])
    budget = BudgetAccountant(epsilon=2.0)
    pipe = make_pipeline(PublicScaler(ranges), PrivatePCA(bounds=(0, 1)))
    search = PrivateGridSearchCV(pipe, {"privatepca__n_components": [1, 2]},
                                 epsilon=2.0, accountant=budget, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search.fit(X)
    assert budget.n_charges == 1
    assert search.best_estimator_[-1].data_norm_ == pytest.approx(1.0)  # √4 / 2
    plan = ms.plan_search(pipe, {"privatepca__n_components": [1, 2]}, epsilon=2.0,
                       delta=1e-6, splits=folds, n_samples=3000, n_features=4)
    assert [c.data_norm for c in plan.candidates] == [pytest.approx(1.0)] * 2
    # scalar bounds after a step that may change the columns: refused, naming
    # the fix; arrays of the step's width are accepted
    sqrt = make_pipeline(FunctionTransformer(np.sqrt), PrivatePCA(bounds=(0, 4)))
    with pytest.raises(ValueError, match="give bounds=.lower, upper. as arrays"):
        ms.plan_search(sqrt, {"privatepca__n_components": [1]}, epsilon=2.0,
                    delta=1e-6, splits=folds, n_samples=3000, n_features=4)
    sqrt.set_params(privatepca__bounds=(np.zeros(4), np.full(4, 4.0)))
    plan = ms.plan_search(sqrt, {"privatepca__n_components": [1]}, epsilon=2.0,
                       delta=1e-6, splits=folds, n_samples=3000, n_features=4)
    assert plan.candidates[0].data_norm == pytest.approx(4.0)  # ‖(2, 2, 2, 2)‖
    # neither a number nor a box: the message names both
    with pytest.raises(ValueError, match=r"or None with public bounds"):
        ms.plan_search(PrivatePCA(), {"n_components": [1]}, epsilon=2.0, delta=1e-6,
                    splits=folds, n_samples=3000, n_features=4)


# ------------------------------------------------------ the pooled refit
def test_a_combined_release_has_the_inverse_variance_noise():
    """The refit's release weighed with the fold fits' pooled one by their
    inverse variances: the combination's noise is the GOE kernel of
    σ² σ_p² / (σ² + σ_p²), measured over 500 draws, and without noise of
    its own (σ = 0) the fit's release is kept as it is."""
    from sklearn_dppca._private_pca import KeptRelease, _combined
    from sklearn_dppca.noise import add_goe_noise, make_generator

    d, sigma, sigma_p = 6, 2.0, 3.0
    exact = np.arange(d * d, dtype=float).reshape(d, d)
    exact = exact + exact.T
    diag, off = [], []
    for seed in range(500):
        rng = make_generator(seed)
        own = add_goe_noise(rng, exact.copy(), sigma)
        pool = KeptRelease(add_goe_noise(rng, exact.copy(), sigma_p), sigma_p,
                           (0.0, sigma_p), np.zeros(d), 10, None, 1.0, 1.0)
        gram, combined, trace, _ = _combined(own, sigma, (0.0, sigma), pool,
                                             (0.0, 0.0))
        diag.append(np.diag(gram - exact))
        off.append((gram - exact)[np.triu_indices(d, 1)])
    expected = sigma * sigma_p / math.hypot(sigma, sigma_p)
    assert combined == pytest.approx(expected) and trace[1] == combined
    # 3000 and 7500 draws: standard deviations within 5% and 4%
    assert np.std(diag) == pytest.approx(expected, rel=0.05)
    assert np.std(off) == pytest.approx(expected / math.sqrt(2), rel=0.04)
    kept, _, _, _ = _combined(exact.copy(), 0.0, (1.0, 0.0), pool, (0.0, 0.0))
    np.testing.assert_array_equal(kept, exact)


def test_the_refit_combines_its_release_with_the_fold_fits():
    """On planted rows (2 000 × 10, ε = 1), the refit that combines its
    release with the fold fits' is closer to the non-private components
    than the refit alone (the same searches with the pooling turned off):
    mean sin θ over 12 seeds 0.103 against 0.133 when written; its
    privacy_spent_ composes both. Uneven training folds turn it off."""
    from sklearn_dppca import _search_plan

    shares = _search_plan.SEARCH_BUDGET_SHARES

    def refits(pooling):
        errors = []
        for seed in range(12):
            X, _ = make_planted(n=2000, d=10, seed=seed)
            exact = PrivatePCA(3, data_norm=1.0, epsilon=np.inf).fit(X).components_.T
            s = PrivateGridSearchCV(PrivatePCA(data_norm=1.0), {"n_components": [3]},
                                    cv=5, epsilon=1.0, random_state=seed,
                                    accountant=BudgetAccountant()).fit(X)
            V = s.best_estimator_.components_.T
            errors.append(np.linalg.norm(exact - V @ (V.T @ exact), 2))
            used = shares["refit"] + (shares["fits"] if pooling else 0.0)
            assert gdp_mu(s.best_estimator_.privacy_spent_[0], 1e-6) == (
                pytest.approx(gdp_mu(1.0, 1e-6) * math.sqrt(used)))
        return np.mean(errors)

    pooled = refits(True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_search_plan, "pooled_groups",
                      lambda poolable, splits: [0] * len(poolable))
        alone = refits(False)
    assert pooled < 0.85 * alone
    thirds = np.array_split(np.arange(90), 3)
    uneven = [(thirds[1], thirds[0]), (np.r_[thirds[0], thirds[2]], thirds[1]),
              (thirds[0], thirds[2])]
    assert _search_plan.pooled_groups([True], uneven) == [0]
    assert _search_plan.pooled_groups(
        [True, False, True], list(KFold(3).split(np.zeros(90)))) == [
        _search_plan.KEPT_MAX_BYTES // 6, 0, _search_plan.KEPT_MAX_BYTES // 6]


def test_kept_releases_stay_within_their_share_at_the_width_the_pca_sees(
        monkeypatch):
    """The fold fits keep their releases within KEPT_MAX_BYTES whatever a
    stateless step before the PCA does to the width: a fit whose release
    is larger than its share keeps none (and its refit makes its release
    alone)."""
    from sklearn_dppca import _search_run

    kept = []
    fit = _search_run._fit_candidate

    def recording(*args, **kwargs):
        fitted = fit(*args, **kwargs)
        step = _search_plan._locate_private_step(fitted)[2]
        kept.append(getattr(step, "_kept", None))
        return fitted

    monkeypatch.setattr(_search_run, "_fit_candidate", recording)
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(240, 4))
    widen = FunctionTransformer(lambda rows: np.hstack([rows] * 8))  # 32 wide
    pipe = Pipeline([("w", widen), ("pca", PrivatePCA(data_norm=6.0))])
    search = dict(cv=3, epsilon=1.0, random_state=0)
    for limit, keeps in ((3 * 8 * 32**2, True), (3 * 8 * 32**2 - 1, False)):
        monkeypatch.setattr(_search_plan, "KEPT_MAX_BYTES", limit)
        kept.clear()
        PrivateGridSearchCV(pipe, {"pca__n_components": [1, 2]},
                            accountant=BudgetAccountant(), **search).fit(X)
        folds = kept[:3]
        assert all((k is not None) == keeps for k in folds)
        assert sum(k.scatter.nbytes for k in folds if k is not None) <= limit


def test_a_caching_pipeline_is_searched_without_its_cache(tmp_path):
    """With memory=, a Pipeline would write every fit's transformed rows and
    fitted steps (their generators, seeded from the search's entropy) to
    its cache, and fit clones of its steps. The search fits with no cache:
    nothing is written, its fold fits pool as a plain Pipeline's do, and
    the refitted model gets the user's memory back."""
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(300, 6))
    cache = tmp_path / "cache"
    pipe = Pipeline([("pca", PrivatePCA(data_norm=3.0)),
                     ("f", FunctionTransformer())], memory=str(cache))
    accountant = BudgetAccountant()
    search = PrivateGridSearchCV(pipe, {"pca__n_components": [1, 2]}, cv=3,
                                 epsilon=1.0, accountant=accountant).fit(X)
    assert accountant.n_charges == 1
    assert not cache.exists() or not any(cache.rglob("*.pkl"))
    best = search.best_estimator_
    assert best.memory == str(cache)
    assert best[0].components_.shape[1] == 6
    assert best[0].privacy_spent_[0] < 1.0
    plain = PrivateGridSearchCV(clone(pipe).set_params(memory=None),
                                {"pca__n_components": [1, 2]}, cv=3, epsilon=1.0,
                                accountant=BudgetAccountant()).fit(X)
    # the pooled refit's report: the same composition with or without memory=
    assert best[0].privacy_spent_ == plain.best_estimator_[0].privacy_spent_


def test_an_audit_of_the_combined_refit_stays_below_epsilon():
    """Black-box audit of the refit's released scatter matrix (its own
    release combined with the fold fits') on the neighbours that attain the
    scatter's sensitivity, the search at ε = 1: the lower bound on ε stays
    below 1, and the Gaussian test's μ is that of the combination,
    √(μ_refit² + r² μ_f² / K) = √0.75 μ* = 0.205 here (3 folds, no
    centring), within 1.5 times its sampling error (about 0.08 at 300 fits
    a side; 0.168 on this seed). 300 fits cannot tell it from μ* = 0.237
    itself: the bound on ε is what holds the search to its charge."""
    from sklearn_dppca.audit import neighbouring_datasets, scatter_statistic

    X, X_prime = neighbouring_datasets(200, 3, scale=0.5)

    def statistic(search):
        return scatter_statistic(search.best_estimator_)

    statistic.gaussian = True
    search = PrivateGridSearchCV(PrivatePCA(data_norm=1.0, center=False),
                                 {"n_components": [None]}, cv=3, epsilon=1.0)
    result = audit(search, X, X_prime, statistic, n_fits=300, random_state=0)
    assert result.epsilon_lower < 1.0
    expected = math.sqrt(0.45 + 4 * 0.225 / 3) * gdp_mu(1.0, 1e-6)
    assert abs(result.mu_estimate - expected) < 0.12


def test_a_public_scalers_misconfiguration_is_refused_before_the_charge():
    """Ranges by feature name on an array without names: PublicScaler's own
    fit refuses them from the columns alone (public), so the search refuses
    them before it spends, where it failed after its charge."""
    import pandas as pd
    from sklearn.pipeline import Pipeline

    from sklearn_dppca.preprocessing import PublicScaler

    X = np.random.default_rng(0).uniform(0, 1, (90, 3))
    acc = BudgetAccountant(epsilon=5.0)
    pipe = Pipeline([("s", PublicScaler({"a": (0, 1), "b": (0, 1), "c": (0, 1)})),
                     ("pca", PrivatePCA(data_norm=1.0))])
    search = PrivateGridSearchCV(pipe, {"pca__n_components": [1, 2]}, cv=3,
                                 epsilon=2.0, accountant=acc)
    with pytest.raises(ValueError, match="feature names"):
        search.fit(X)
    assert acc.n_charges == 0
    search.fit(pd.DataFrame(X, columns=["a", "b", "c"]))  # names: it fits
    assert acc.n_charges == 1


def test_the_searchs_refusal_of_a_lazy_array_names_infinity_too():
    """On a Dask array the search checks finiteness lazily, and said "NaN"
    for an infinite value too."""
    da = pytest.importorskip("dask.array")
    X = np.random.default_rng(0).normal(size=(90, 3))
    X[5, 1] = np.inf
    acc = BudgetAccountant()
    with pytest.raises(ValueError, match="contains infinity"):
        PrivateGridSearchCV(PrivatePCA(data_norm=3.0), {"n_components": [1, 2]},
                            cv=3, accountant=acc).fit(da.from_array(X, chunks=(30, 3)))
    assert acc.n_charges == 0


def test_scikit_learns_search_scoring_a_pca_warns_that_its_scores_are_exact():
    """scikit-learn's GridSearchCV and cross_val_score score PrivatePCA by its
    exact log-likelihood of the validation rows: one row changed moved a fold
    score from -15.7 to -110.7, with no warning (the heads warned). Called
    directly, ``score`` is the user's own evaluation and does not warn."""
    from sklearn.model_selection import GridSearchCV, cross_val_score

    X = np.random.default_rng(0).normal(size=(90, 4)) * 0.2
    pca = PrivatePCA(2, data_norm=1.0, accountant=BudgetAccountant())
    for run in (lambda: cross_val_score(pca, X, cv=3),
                lambda: GridSearchCV(pca, {"n_components": [1, 2]}, cv=3).fit(X)):
        with pytest.warns(PrivacyLeakWarning, match="scores it returns are exact"):
            run()
    fitted = PrivatePCA(2, data_norm=1.0, accountant=BudgetAccountant()).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        fitted.score(X)
        fitted.score_samples(X)


def test_infinity_in_a_dask_search_is_refused_as_in_memory():
    """The search refuses infinity before the charge, in memory and on a
    Dask array's chunks (one pass): there it was mapped by a
    ``non_finite="clip"`` step as NaN is, while a step before the private
    one failed on it after the charge (review 100 F1; docs/privacy.rst,
    "Over which domain")."""
    import dask.array as da

    X = np.random.default_rng(0).normal(size=(120, 5)) * 0.2
    X[0, 3] = np.inf
    for non_finite in ("clip", "raise"):
        for lazy in (False, True):
            acc = BudgetAccountant(100.0, 1e-3)
            search = ms.PrivateGridSearchCV(
                PrivatePCA(data_norm=1.0, non_finite=non_finite),
                {"n_components": [1, 2]}, epsilon=6.0, cv=3, accountant=acc)
            rows = da.from_array(X, chunks=(40, 5)) if lazy else X
            with pytest.raises(ValueError, match="infinity"):
                search.fit(rows)
            assert acc.n_charges == 0


def test_candidates_share_a_release_only_where_its_fit_with_every_component_runs():
    # the shared fold fit keeps every component below 2 048 features, which
    # path="matrix_free" cannot (its blocks need fewer columns than
    # features): such candidates were charged, then failed their first fold
    # fit; each is now a release of its own
    X = np.random.default_rng(0).normal(size=(600, 20))
    acc = BudgetAccountant()
    search = PrivateGridSearchCV(
        PrivatePCA(data_norm=6.0, path="matrix_free", svd_solver="randomized"),
        {"n_components": [1, 2]}, cv=3, epsilon=1.0, accountant=acc).fit(X)
    assert acc.n_charges == 1 and len(search.fit_epsilons_) == 2
    assert search.best_estimator_.components_.shape[1] == 20


def test_a_steps_own_accountant_is_refused_before_the_charge(data, tmp_path):
    """The search charged only its own accountant: a ledger given to the
    estimator (or a grid's estimator, or a head) was never charged, and
    searches at ε = 1 each ran on a ledger of ε = 1 (review 51)."""
    from sklearn_dppca.linear_model import PrivateLDA

    ledger = BudgetAccountant(2.0, 1e-6, path=tmp_path / "data.db")
    estimator = PrivatePCA(2, data_norm=1.0, accountant=ledger)
    y = (data[:, 0] > 0).astype(int)
    for run in (
        lambda: PrivateGridSearchCV(estimator, {"n_components": [1, 2]}).fit(data),
        lambda: private_cross_val_score(estimator, data),
        lambda: PrivateGridSearchCV(PrivatePCA(data_norm=1.0), {
            "n_components": [1]}, accountant=BudgetAccountant()).set_params(
                estimator=make_pipeline(PrivatePCA(data_norm=1.0), PrivateLDA(
                    [0, 1], data_norm=1.0, accountant=ledger)),
                param_grid={"privatepca__n_components": [1]}).fit(data, y),
    ):
        with pytest.raises(ValueError, match="is not the search's accountant"):
            run()
    assert ledger.n_charges == 0
    search = PrivateGridSearchCV(estimator, {"n_components": [1, 2]}, accountant=ledger)
    search.fit(data)  # the same ledger for both: charged once
    assert ledger.n_charges == 1 and search.best_estimator_.accountant is ledger
    # the same ledger file opened twice is one budget (review 52)
    again = BudgetAccountant(path=tmp_path / "data.db")
    PrivateGridSearchCV(estimator, {"n_components": [1]}, epsilon=0.01,
                        accountant=again).fit(data)
    assert ledger.n_charges == 2


def test_a_heads_copy_false_scales_the_rows_once():
    """The plan's check of a head ran it on the caller's X: PublicScaler's
    copy=False scaled X in place, and every fit then read it scaled twice
    (review 49)."""
    X = np.random.default_rng(0).uniform(0, 100, (500, 4))
    expected = (X / 100).mean(axis=0)
    pipe = make_pipeline(PublicScaler((0, 100), copy=False),
                         PrivatePCA(1, bounds=(0, 1)))
    search = PrivateGridSearchCV(pipe, {"privatepca__n_components": [1, 2]},
                                 epsilon=1e6, accountant=BudgetAccountant())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search.fit(X)
    np.testing.assert_allclose(search.best_estimator_[-1].mean_, expected, atol=0.01)
