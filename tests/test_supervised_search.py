"""The private search and cross-validation of supervised pipelines: one
charge for everything released, calibrated noisy scores, and the refusals."""

import math
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold, cross_val_score
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer

import sklearn_dppca._supervised_search as supervised
from sklearn_dppca import BudgetAccountant, PrivacyLeakWarning, PrivatePCA
from sklearn_dppca.audit import audit
from sklearn_dppca.linear_model import PrivateLDA, PrivateRidge
from sklearn_dppca.model_selection import (
    PrivateGridSearchCV,
    private_cross_val_score,
    private_cross_validate,
)
from sklearn_dppca.preprocessing import PrivateStandardScaler, PublicScaler
from sklearn_dppca.privacy import gdp_mu

pytestmark = pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")


def classes_data(n=6000, d=6, seed=0):
    """Two classes apart along the first two of d features; the rest noise."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    X = rng.normal(size=(n, d)) * 0.25
    X[:, 0] += 0.5 * y
    X[:, 1] -= 0.4 * y
    return X, y


def pipe(classes=(0, 1)):
    return Pipeline([("scale", PublicScaler(center=0.0, scale=1.0)),
                     ("pca", PrivatePCA(data_norm=2.0)),
                     ("lda", PrivateLDA(list(classes), data_norm=2.0))])


GRID = {"pca__n_components": [1, 2, 4]}


def test_one_charge_equals_everything_the_search_released(monkeypatch):
    """Every fold fit's μ (each private step), the score matrix's μ (its
    sensitivity over its σ) and the refit's compose to the charge μ*. The
    refit's PCA is made of the fold fits' releases (no release of its own:
    three PCA releases in all), its head fitted at the whole refit's μ."""
    fits, noise, releases = [], [], []
    real_fit, real_noise = supervised.fit_candidate, supervised.dense_noise
    real_release = PrivatePCA._release

    def fit_spy(cand, epsilons, delta, generator, X, y, **keep):
        fits.append((len(y), [gdp_mu(e, delta) for e in epsilons.values()]))
        return real_fit(cand, epsilons, delta, generator, X, y, **keep)

    def release_spy(self, *args):
        releases.append(self.n_samples_)
        return real_release(self, *args)

    monkeypatch.setattr(PrivatePCA, "_release", release_spy)

    def noise_spy(rng, shape, sigma):
        noise.append((shape, sigma))
        return real_noise(rng, shape, sigma)

    monkeypatch.setattr(supervised, "fit_candidate", fit_spy)
    monkeypatch.setattr(supervised, "dense_noise", noise_spy)
    X, y = classes_data()
    budget = BudgetAccountant()
    search = PrivateGridSearchCV(pipe(), GRID, cv=3, epsilon=2.0, random_state=0,
                                 accountant=budget).fit(X, y)
    assert budget.n_charges == 1
    assert budget.spent[0] == pytest.approx(2.0, rel=1e-9)
    n = len(y)
    fold_fits = [mus for rows, mus in fits if rows < n]
    assert len(fold_fits) == len(fits) == len(releases) == 3
    assert max(releases) < n
    best = search.best_estimator_
    refit = [gdp_mu(best.named_steps["lda"].epsilon, 1e-6)]
    pca_mu = gdp_mu(best.named_steps["pca"].privacy_spent_[0], 1e-6)
    assert pca_mu == pytest.approx(math.sqrt(2) * fold_fits[0][0], rel=1e-9)
    # the three candidates share one fit per fold (at the largest k)
    assert all(len(m) == 2 for m in fold_fits)
    # a row is in 2 of the 3 training folds: the fold fits compose 2/3 of
    # their sum; the scores: the matrix's sensitivity √m over its σ
    sigma = search.selection_sigma_
    assert {s for _, s in noise} == {sigma}
    mu_scores = math.sqrt(3 * 1.0**2) / sigma
    total = (2 / 3 * sum(m * m for mus in fold_fits for m in mus)
             + mu_scores**2 + sum(m * m for m in refit))
    assert math.sqrt(total) == pytest.approx(gdp_mu(2.0, 1e-6), rel=1e-9)


@pytest.mark.parametrize("scoring, labels", [
    ("accuracy", np.array([0, 1, 2])),
    ("balanced_accuracy", np.array([0, 1, 2])),
    ("neg_mean_squared_error", (0.0, 2.0)),
    ("r2", (0.0, 2.0)),
])
def test_score_statistics_have_their_stated_sensitivity(scoring, labels):
    """Replacing one validation row (and its label) moves the released
    statistics by at most √(m s_c² + s_0²); a worst case attains it."""
    plan = supervised.SupervisedPlan([None, None], scoring, labels, [], [], 0.0,
                                     [], 2, 1.0, 1.0, (1.0, 1e-6))
    s_cand, s_shared = supervised.SCORERS[scoring]
    bound = math.sqrt(2 * s_cand**2 + s_shared**2)
    rng = np.random.default_rng(0)
    classify = isinstance(labels, np.ndarray)
    values = labels if classify else np.linspace(-2.0, 4.0, 7)
    worst = 0.0
    for _ in range(300):
        y = rng.choice(values, 20)
        preds = [rng.choice(values, 20), rng.choice(values, 20)]
        y2 = y.copy()
        y2[0] = rng.choice(values)
        preds2 = [p.copy() for p in preds]
        for p in preds2:
            p[0] = rng.choice(values)
        a = supervised.fold_statistics(plan, y, preds)
        b = supervised.fold_statistics(plan, y2, preds2)
        diff = np.concatenate([(a[0] - b[0]).ravel(), a[1] - b[1]])
        worst = max(worst, float(np.linalg.norm(diff)))
    if scoring == "r2":  # a label from one end to the other, predicted at
        # the first: each error by 4 and the shared pair by 2 (not √5:
        # review 64) at once
        y, preds = np.full(20, -2.0), [np.full(20, -2.0)] * 2  # mid 0, half 2
        y2 = y.copy()
        y2[0] = 2.0
        a = supervised.fold_statistics(plan, y, preds)
        b = supervised.fold_statistics(plan, y2, preds)
        diff = np.concatenate([(a[0] - b[0]).ravel(), a[1] - b[1]])
        worst = max(worst, float(np.linalg.norm(diff)))
    assert worst <= bound + 1e-12
    if scoring in ("accuracy", "neg_mean_squared_error", "r2"):
        assert worst == pytest.approx(bound)  # attained by a worst pair


def test_the_search_chooses_and_refits_privately():
    X, y = classes_data(seed=1)
    budget = BudgetAccountant()
    search = PrivateGridSearchCV(pipe(), GRID, cv=3, epsilon=4.0, random_state=0,
                                 accountant=budget).fit(X, y)
    assert search.best_params_["pca__n_components"] in GRID["pca__n_components"]
    assert search.cv_results_["mean_test_score"].max() > 0.85
    assert search.score(X, y) > 0.85
    assert search.predict(X[:5]).shape == (5,)
    assert search.predict_proba(X[:5]).shape == (5, 2)
    assert list(search.classes_) == [0, 1]
    best = search.best_estimator_
    assert best.named_steps["lda"].accountant is budget  # later refits: the search's
    assert best.named_steps["pca"].accountant is budget
    results = search.cv_results_
    assert set(results) >= {"params", "mean_test_score", "rank_test_score",
                            "std_test_score", "param_pca__n_components"}
    # pooled over the folds: no per-split score is released
    assert not any(key.startswith("split") for key in results)
    assert np.isnan(results["std_test_score"]).all()
    assert budget.n_charges == 1


@pytest.mark.parametrize("scoring", ["accuracy", "balanced_accuracy", "r2",
                                     "neg_mean_squared_error"])
def test_the_search_releases_its_statistics_pooled_over_the_folds(
        monkeypatch, scoring):
    """One noisy release per search, of the statistics summed over the
    folds, with the per-fold sensitivity's σ; without noise, the scores are
    those of all the validation rows pooled (the fold fits' predictions)."""
    draws = []

    def no_noise(rng, shape, sigma):
        if np.prod(shape):  # an empty shared block is drawn but holds nothing
            draws.append(shape)
        return np.zeros(shape)

    monkeypatch.setattr(supervised, "dense_noise", no_noise)
    predictions = {}
    real_fold = supervised.fold_statistics

    def fold_spy(plan, y_true, preds):
        predictions.setdefault("rows", []).append((np.asarray(y_true), preds))
        return real_fold(plan, y_true, preds)

    monkeypatch.setattr(supervised, "fold_statistics", fold_spy)
    X, y = classes_data(n=3000, seed=2)
    if scoring in ("accuracy", "balanced_accuracy"):
        estimator, grid, target = pipe(), GRID, y
    else:
        estimator = Pipeline([("pca", PrivatePCA(data_norm=2.0)),
                              ("ridge", PrivateRidge((-1.0, 2.0), data_norm=2.0))])
        grid, target = {"pca__n_components": [1, 2]}, y.astype(float)
    search = PrivateGridSearchCV(estimator, grid, cv=3, epsilon=2.0, refit=False,
                                 scoring=scoring, random_state=0,
                                 accountant=BudgetAccountant()).fit(X, target)
    n_cand = len(search.cv_results_["params"])
    shared = {"balanced_accuracy": 1, "r2": 1}.get(scoring, 0)
    assert len(draws) == 1 + shared  # the candidates' block, the shared one
    assert draws[0][0] == n_cand
    y_all = np.concatenate([t for t, _ in predictions["rows"]])
    for c in range(n_cand):
        p_all = np.concatenate([np.asarray(p[c]) for _, p in predictions["rows"]])
        if scoring == "accuracy":
            expected = np.mean(p_all == y_all)
        elif scoring == "balanced_accuracy":
            expected = np.mean([np.mean(p_all[y_all == k] == k) for k in (0, 1)])
        else:  # in the label bounds' units: mid 0.5, half-width 1.5
            t = np.clip((y_all - 0.5) / 1.5, -1, 1)
            p = np.clip((p_all - 0.5) / 1.5, -1, 1)
            sse = np.sum((p - t) ** 2)
            expected = (-(1.5**2) * sse / len(t) if scoring == "neg_mean_squared_error"
                        else 1 - sse / np.sum((t - t.mean()) ** 2))
        assert search.cv_results_["mean_test_score"][c] == pytest.approx(expected)
    # private_cross_validate releases each fold's statistics
    draws.clear()
    private_cross_validate(estimator, X, target, cv=3, epsilon=2.0, scoring=scoring,
                           random_state=0, accountant=BudgetAccountant())
    assert len(draws) == 3 * (1 + shared)


def test_an_audit_of_the_pooled_score_stays_below_epsilon():
    """Black-box audit of the released pooled accuracy at ε = 1: neighbours
    that differ in one row's label, a row every fold fit predicts as class 1,
    so the exact pooled count of correct predictions differs by one. The
    lower bound on ε stays below 1, and the distinguishing power is about
    that of one count under the pooled noise (the fits' own spread lowers
    it), not √K times more."""
    rng = np.random.default_rng(0)
    n = 300
    y = rng.integers(0, 2, n)
    X = np.c_[np.where(y == 1, 0.6, -0.6), np.zeros(n)] + rng.normal(0, 0.1, (n, 2))
    X_prime, y_prime = X.copy(), y.copy()
    X[0], y[0] = [0.9, 0.0], 1
    X_prime[0], y_prime[0] = [0.9, 0.0], 0

    def count(search):
        return float(search.cv_results_["mean_test_score"][0]) * n

    count.gaussian = True
    search = PrivateGridSearchCV(PrivateLDA([0, 1], data_norm=1.0), {}, cv=3,
                                 epsilon=1.0, refit=False)
    result = audit(search, X, X_prime, count, n_fits=300, random_state=0,
                   y=y, y_prime=y_prime)
    assert result.epsilon_lower < 1.0
    own = clone(search).set_params(accountant=BudgetAccountant())  # not the default's
    sigma = own.fit(X, y).selection_sigma_
    assert result.mu_estimate < 1.0 / sigma + 3 * math.sqrt(2 / 300)


@pytest.mark.parametrize("head", [PrivateLDA([0, 1, 2], data_norm=4.0),
                                  PrivateRidge((-3, 3), data_norm=4.0)])
def test_a_heads_leading_model_is_the_fit_on_the_leading_features(head):
    """Without noise, the model from a release's sub-block on the first k
    features is the head fitted on those k features (rows inside the bound:
    no clipping on either side)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(400, 5))
    y = rng.integers(0, 3, 400)
    if isinstance(head, PrivateRidge):
        y = X @ [1.0, -1.0, 0.5, 0.2, 0.1]
    full = head.set_params(epsilon=np.inf, accountant=BudgetAccountant())
    full._keep_release = True
    full.fit(X, y)
    for k, alpha in ((1, "auto"), (3, 0.5), (5, 2.0)):  # another ridge too
        leading = full._leading(k, alpha)
        direct = clone(head).set_params(
            epsilon=np.inf, accountant=BudgetAccountant(), alpha=alpha).fit(X[:, :k], y)
        np.testing.assert_allclose(leading.coef_, direct.coef_, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(leading.intercept_, direct.intercept_,
                                   rtol=1e-9, atol=1e-12)
        np.testing.assert_array_equal(leading.predict(X[:, :k]),
                                      direct.predict(X[:, :k]))


def test_candidates_differing_only_in_k_share_their_fold_fits():
    """One fit per fold serves a PrivatePCA's n_components grid (the largest
    k fitted, listed first) and the head's alpha; a grid point that changes
    anything else, or a head with bounds, is fitted on its own."""
    X, y = classes_data(600)
    splits = list(KFold(3).split(X))

    def groups(estimator, grid):
        return supervised.plan_supervised_search(
            estimator, grid, epsilon=1.0, delta=1e-6, splits=splits,
            n_samples=600, n_features=6).groups

    assert groups(pipe(), GRID) == [[2, 1, 0]]
    assert groups(pipe(), {"pca__n_components": [1, 2], "pca__whiten": [False, True]}
                  ) == [[2, 0], [3, 1]]
    assert groups(pipe(), {"pca__n_components": [1, 2], "pca__whiten": ["partial"]}
                  ) == [[1, 0]]
    boxed = Pipeline([("pca", PrivatePCA(data_norm=2.0)),
                      ("lda", PrivateLDA([0, 1], bounds=(-2.0, 2.0)))])
    assert groups(boxed, GRID) == [[0], [1], [2]]
    assert groups(pipe(), {"pca__n_components": [1, 2],
                           "lda__data_norm": [1.0, 2.0]}) == [[1, 0], [3, 2]]
    # the head's ridge is added to its release: one fit serves every alpha
    # (review 64: a fold fit at 0.148 with four alphas against 0.310)
    assert groups(pipe(), {"pca__n_components": [1, 2],
                           "lda__alpha": [0.1, 1.0]}) == [[1, 3, 0, 2]]
    # a bare head too, but with bounds (review 65)
    bare = PrivateLDA([0, 1], data_norm=2.0)
    assert groups(bare, {"alpha": [0.1, 1.0, "auto"]}) == [[0, 1, 2]]
    boxed = PrivateLDA([0, 1], bounds=(-2.0, 2.0))
    assert groups(boxed, {"alpha": [0.1, 1.0]}) == [[0], [1]]


def test_a_shared_fits_smaller_k_is_scored_on_rows_clipped_as_it_learned():
    """The head of a shared fold fit learned on rows clipped on all its k_max
    features; a candidate's first k were scored clipped on k only, a model
    applied to rows unlike its own: with no noise, k = 2 scored r2 0.11 in a
    grid with k = 30 against 0.94 alone, and k = 30 was chosen (review 68)."""
    rng = np.random.default_rng(0)
    n, d = 6000, 40
    X = rng.normal(size=(n, d)) * 0.15
    X[:, 0] += 0.5 * rng.normal(size=n)
    y = 2.0 * X[:, 0] + 0.05 * rng.normal(size=n)
    X /= np.maximum(1, np.linalg.norm(X, axis=1, keepdims=True))
    est = Pipeline([("pca", PrivatePCA(2, data_norm=1.0, whiten="partial")),
                    ("reg", PrivateRidge((-3, 3), data_norm=1.0, alpha=1e-6))])
    search = PrivateGridSearchCV(est, {"pca__n_components": [2, 30]}, cv=3,
                                 epsilon=1e6, accountant=BudgetAccountant(),
                                 random_state=0).fit(X, y)
    assert search.cv_results_["mean_test_score"][0] > 0.9


def test_parameters_whose_repr_is_abbreviated_never_share_a_fit():
    """Candidates are grouped by their parameters' values: two PublicScaler
    ranges given as pandas Series that differ past the 60 rows of their
    repr shared one fold fit, the second scored with the first's model
    (review 68: 0.511 for a candidate scoring 1.000 alone)."""
    pd = pytest.importorskip("pandas")
    from sklearn_dppca._search_plan import _value_key

    low, high = pd.Series(np.zeros(100)), pd.Series(np.ones(100))
    other = high.copy()
    other[50] = 1e6
    assert repr(high) == repr(other)
    assert _value_key(high) != _value_key(other)
    assert _value_key(high) == _value_key(high.copy())
    assert _value_key(high) != _value_key(high.set_axis(np.arange(1, 101)))
    est = Pipeline([("scale", PublicScaler(ranges=(low, high))),
                    ("pca", PrivatePCA(data_norm=5.0)),
                    ("lda", PrivateLDA([0, 1], data_norm=2.5))])
    grid = {"pca__n_components": [2, 5], "scale__ranges": [(low, other), (low, high)]}
    plan = supervised.plan_supervised_search(
        est, grid, epsilon=1.0, delta=1e-6, splits=list(KFold(3).split(np.ones(600))),
        n_samples=600, n_features=100)
    assert sorted(map(sorted, plan.groups)) == [[0, 2], [1, 3]]


def test_a_bare_head_and_a_regressor_are_searched():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(5000, 3))
    y = X @ [1.0, -1.0, 0.5] + rng.normal(0, 0.1, 5000)
    budget = BudgetAccountant()
    search = PrivateGridSearchCV(PrivateRidge((-3, 3), data_norm=2.0),
                                 {"alpha": [0.0, "auto"]}, cv=3, epsilon=3.0,
                                 random_state=0, accountant=budget).fit(X, y)
    assert search.scorer_._score_func.__name__ == "r2_score"
    assert search.cv_results_["mean_test_score"].max() > 0.8
    mse = PrivateGridSearchCV(PrivateRidge((-3, 3), data_norm=2.0),
                              {"alpha": [0.0, "auto"]}, cv=3, epsilon=3.0,
                              scoring="neg_mean_squared_error", random_state=0,
                              accountant=budget).fit(X, y)
    assert mse.best_score_ <= 0  # the noisy squared errors are floored at 0
    assert budget.n_charges == 2


@pytest.mark.parametrize("estimator, grid, y, match", [
    (make_pipeline(PrivatePCA(2, data_norm=2.0), LogisticRegression()), {},
     "ok", "PrivateLDA|fitted on the data without privacy"),
    (make_pipeline(PrivateStandardScaler((-3, 3)), PrivateLDA([0, 1], data_norm=2.0)),
     {}, "ok", "private release of its own"),
    (pipe(), {"lda__epsilon": [1.0]}, "ok", "may not set"),
    (pipe(), {}, None, "needs y"),
    (pipe(), {}, "three", "outside classes"),
    (pipe(), {"lda__classes": [[0, 1], [0, 1, 2]]}, "ok", "same labels"),
    (make_pipeline(PrivateLDA([0, 1], data_norm=1.0),
                   PrivateLDA([0, 1], data_norm=1.0)), {}, "ok", "one private head"),
])
def test_refusals_come_before_the_charge(estimator, grid, y, match):
    X, labels = classes_data(600)
    if isinstance(y, str):
        y = labels if y == "ok" else np.where(labels == 0, 0, 2)
    budget = BudgetAccountant()
    with pytest.raises((ValueError, TypeError), match=match):
        PrivateGridSearchCV(estimator, grid, cv=3, accountant=budget).fit(X, y)
    assert budget.n_charges == 0


def test_a_heads_bounds_after_a_public_scaler_are_checked_before_the_charge():
    """A head's ``bounds`` on names the public steps before it do not pass
    on: its fit refuses them, so the search does, before the charge (the
    supervised search checked only heads reading ``X`` directly, and was
    charged, then failed)."""
    pd = pytest.importorskip("pandas")
    X, y = classes_data(600, d=3)
    X = pd.DataFrame(X, columns=list("abc"))
    scaler = PublicScaler(center=0.0, scale=1.0).set_output(transform="pandas")
    head = PrivateLDA([0, 1], bounds={"a": (-2, 2), "zz": (-2, 2)})
    budget = BudgetAccountant()
    with pytest.raises(ValueError, match="before (it|any budget was) spent"):
        PrivateGridSearchCV(make_pipeline(scaler, head), {"privatelda__alpha": [
            0.1, 1.0]}, cv=3, accountant=budget).fit(X, y)
    assert budget.n_charges == 0


@pytest.mark.parametrize("steps, bounds, frame", [
    ([FunctionTransformer(lambda rows: rows[:, :3])], [(0, 1)] * 4, False),
    ([FunctionTransformer(np.asarray)], {"a": (0, 1)}, True),
    ([PrivatePCA(None, data_norm=2.0)], [(-1, 1)] * 3, False),
    ([PrivatePCA(0.9, data_norm=2.0)], [(-1, 1)] * 2, False),
], ids=["narrowed", "names dropped", "PCA(None)", "PCA(0.9)"])
def test_a_heads_bounds_on_what_the_steps_before_it_make_are_checked_first(
        steps, bounds, frame):
    """A head's bounds against the width and names the steps before it make
    (public: their output on X without rows, a PCA's integer or None
    n_components), before the charge: these searches were charged, then
    failed (review 68)."""
    X, y = classes_data(300, d=4)
    if frame:
        X = pytest.importorskip("pandas").DataFrame(X, columns=list("abcd"))
    budget = BudgetAccountant()
    est = make_pipeline(*steps, PrivateLDA([0, 1], bounds=bounds))
    with pytest.raises(ValueError, match="before any budget"):
        PrivateGridSearchCV(est, {"privatelda__alpha": [0.1, 1.0]}, cv=3,
                            accountant=budget).fit(X, y)
    assert budget.n_charges == 0


def test_scoring_must_be_a_bounded_score_of_the_head():
    X, y = classes_data(600)
    budget = BudgetAccountant()
    for scoring in ("r2", "roc_auc", "neg_log_loss"):
        with pytest.raises(ValueError, match="not a bounded score"):
            PrivateGridSearchCV(pipe(), GRID, scoring=scoring, cv=3,
                                accountant=budget).fit(X, y)
    assert budget.n_charges == 0


def test_private_cross_validation_is_one_charge_of_noisy_scores():
    X, y = classes_data(seed=2)
    budget = BudgetAccountant()
    model = pipe().set_params(pca__n_components=2)
    scores = private_cross_val_score(model, X, y, cv=KFold(4), epsilon=3.0,
                                     random_state=0, accountant=budget)
    assert scores.shape == (4,) and (scores > 0.8).all()
    result = private_cross_validate(model, X, y, cv=3, epsilon=3.0, random_state=0,
                                    accountant=budget, return_indices=True,
                                    scoring="balanced_accuracy")
    assert set(result) == {"test_score", "privacy_spent", "indices"}
    assert result["privacy_spent"] == (3.0, 1e-6)
    assert budget.n_charges == 2
    # the indices are the splits used, the splitter read once: a generator
    # of splits, or a shuffling KFold without a seed, read twice, would give
    # none, or other ones
    for cv in (KFold(3).split(X), KFold(3, shuffle=True)):
        got = private_cross_validate(model, X, y, cv=cv, epsilon=3.0,
                                     accountant=BudgetAccountant(),
                                     return_indices=True)
        tests = got["indices"]["test"]
        assert len(tests) == len(got["test_score"]) == 3
        assert sorted(np.concatenate(tests).tolist()) == list(range(len(y)))
    for params, match in [({"groups": np.zeros(len(y))}, "groups"),
                          ({"params": {"sample_weight": np.ones(len(y))}}, "params"),
                          ({"return_estimator": True}, "return_estimator"),
                          ({"return_train_score": True}, "return_train_score")]:
        with pytest.raises((ValueError, TypeError), match=match):
            private_cross_validate(model, X, y, accountant=budget, **params)
    assert budget.n_charges == 2


def test_sklearn_cross_val_score_says_its_scores_are_not_private():
    X, y = classes_data(900)
    model = make_pipeline(PrivatePCA(2, data_norm=2.0, accountant=BudgetAccountant()),
                          PrivateLDA([0, 1], data_norm=2.0,
                                     accountant=BudgetAccountant()))
    with pytest.warns(PrivacyLeakWarning, match="scores it returns are exact"):
        cross_val_score(model, X, y, cv=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        model.fit(X, y).predict(X)  # your own predictions: no warning


def test_a_private_transformer_after_other_steps_maps_non_finite_values():
    """As in the unsupervised search: a PCA with steps before it is fitted
    with non_finite="clip", so a missing value the steps pass on is mapped,
    never a failure after the charge."""
    X, y = classes_data(2000)
    X[5, 1] = np.nan
    budget = BudgetAccountant()
    search = PrivateGridSearchCV(pipe(), GRID, cv=3, epsilon=3.0, random_state=0,
                                 accountant=budget).fit(X, y)
    assert search.best_estimator_.named_steps["pca"].non_finite == "clip"
    assert budget.n_charges == 1


def _fold_releases(X, splits, seed=0, **params):
    """Each training fold's PrivatePCA fit (its own seed), keeping its release."""
    kept = []
    for f, (train, _) in enumerate(splits):
        pca = PrivatePCA(**params, random_state=seed * len(splits) + f)
        pca._keep_release = 2**29  # bytes it may keep
        kept.append(pca.fit(X[train])._kept)
    return kept


def test_the_pooled_release_is_the_scatter_of_all_rows():
    """Without noise (ε = inf) and without clipping, the fold releases pooled
    are the folds' scatter matrices summed over r, which differ from the
    scatter of all the rows by the folds' mean differences only; the PCA
    made of them is the PCA of all the rows to that difference."""
    from sklearn_dppca._private_pca import pooled_release

    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 5)) * [3.0, 2.0, 1.0, 0.5, 0.1] + 4.0
    splits = list(KFold(3, shuffle=True, random_state=0).split(X))
    kept = _fold_releases(X, splits, epsilon=np.inf, data_norm=100.0)
    pooled = pooled_release(kept, 2)
    folds = [X[train] - X[train].mean(axis=0) for train, _ in splits]
    np.testing.assert_allclose(pooled.mean, X.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(pooled.scatter, sum(f.T @ f for f in folds) / 2,
                               rtol=1e-10)
    assert pooled.trace[0] == pytest.approx(np.trace(pooled.scatter), rel=1e-10)
    assert pooled.n_samples == 900 and pooled.sigma == 0.0
    centred = X - X.mean(axis=0)
    apart = np.stack([X[train].mean(axis=0) - X.mean(axis=0) for train, _ in splits])
    np.testing.assert_allclose(pooled.scatter + 600 * apart.T @ apart / 2,
                               centred.T @ centred, rtol=1e-10)
    made = PrivatePCA(3, epsilon=np.inf, data_norm=100.0)._fit_released(
        X, pooled, (np.inf, 1e-6))
    direct = PrivatePCA(3, epsilon=np.inf, data_norm=100.0, random_state=0).fit(X)
    np.testing.assert_allclose(made.mean_, direct.mean_, rtol=1e-12)
    np.testing.assert_allclose(abs(made.components_ @ direct.components_.T),
                               np.eye(3), atol=2e-3)
    np.testing.assert_allclose(made.explained_variance_,
                               direct.explained_variance_, rtol=3e-3)
    assert made.n_samples_ == 900 and made.path_ == "dense"


def test_the_pooled_release_has_its_stated_noise():
    """The pooled matrix's noise is a GOE kernel of σ² = Σ σ_i² / r²
    (diagonal variance σ², off-diagonal σ²/2) and the trace's noise has σ²:
    measured over 400 draws of the fold releases (uncentred, so the exact
    scatter is fixed)."""
    from sklearn_dppca._private_pca import pooled_release

    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 4)) * 0.3
    splits = list(KFold(4).split(X))
    exact = X.T @ X
    diag, off, trace = [], [], []
    for seed in range(400):
        kept = _fold_releases(X, splits, seed, epsilon=1.0, data_norm=2.0,
                              center=False)
        pooled = pooled_release(kept, 3)
        noise = pooled.scatter - exact
        diag.append(np.diag(noise))
        off.append(noise[np.triu_indices(4, 1)])
        trace.append(pooled.trace[0] - np.trace(exact))
    sigma = math.sqrt(sum(k.sigma**2 for k in kept)) / 3
    assert pooled.sigma == pytest.approx(sigma) and pooled.trace[1] == pooled.sigma
    # 1600, 2400 and 400 draws: standard deviations within 7%, 6%, 14%
    assert np.std(diag) == pytest.approx(sigma, rel=0.07)
    assert np.std(off) == pytest.approx(sigma / math.sqrt(2), rel=0.06)
    assert np.std(trace) == pytest.approx(sigma, rel=0.14)
    assert abs(np.mean(diag)) < 0.1 * sigma


def test_the_refit_makes_its_own_pca_release_where_the_folds_cannot_be_pooled(
        monkeypatch):
    """Training folds that hold rows unequally often (or folds that kept no
    release): the refit fits every private step at μ_refit/√2, as before."""
    releases = []
    real_release = PrivatePCA._release

    def release_spy(self, *args):
        releases.append(self.n_samples_)
        return real_release(self, *args)

    monkeypatch.setattr(PrivatePCA, "_release", release_spy)
    X, y = classes_data(n=1200)
    thirds = np.array_split(np.arange(len(y)), 3)
    uneven = [(thirds[1], thirds[0]), (np.r_[thirds[0], thirds[2]], thirds[1]),
              (thirds[0], thirds[2])]
    search = PrivateGridSearchCV(pipe(), GRID, cv=uneven, epsilon=2.0,
                                 random_state=0, accountant=BudgetAccountant())
    search.fit(X, y)
    assert releases[-1] == len(y)  # the refit's own
    best = search.best_estimator_
    assert best.named_steps["pca"].epsilon == best.named_steps["lda"].epsilon


def test_a_caching_pipeline_gives_each_private_step_its_own_noise(tmp_path):
    """With memory=, a Pipeline would fit a deep copy of its PCA step: were
    the PCA and the head handed one generator, the copy would start from the
    head's state and both releases would carry the same noise. Each private
    step of every fit (folds and refit) starts from a state of its own, and
    the search fits with no cache (nothing written, the refit pooled)."""
    import sklearn_dppca._base as base
    import sklearn_dppca.linear_model as lm
    from sklearn_dppca import noise

    starts = []
    make = noise.make_generator

    def recording(random_state):
        generator = make(random_state)
        starts.append(str(generator.bit_generator.state))
        return generator

    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 600)
    X = rng.normal(size=(600, 5)) * 0.3 + y[:, None] * [0.6, 0, 0, 0, 0]
    pipe = Pipeline([("pca", PrivatePCA(2, data_norm=2.0)),
                     ("lda", PrivateLDA([0, 1], data_norm=2.0))],
                    memory=str(tmp_path))
    with pytest.MonkeyPatch.context() as patch:
        for module in (base, lm):
            patch.setattr(module, "make_generator", recording)
        search = PrivateGridSearchCV(pipe, {"pca__n_components": [2]}, cv=3,
                                     epsilon=3.0,
                                     accountant=BudgetAccountant()).fit(X, y)
    # 3 folds × (PCA, head) and the refit's head (its PCA pools the folds')
    assert len(starts) == 7 and len(set(starts)) == len(starts)
    assert search.best_estimator_.score(X, y) > 0.5
    assert search.best_estimator_.memory == str(tmp_path)
    assert not any(tmp_path.rglob("*.pkl"))  # no fit was cached


def test_a_bare_head_with_clip_reads_nan_as_it_does_alone():
    """A bare head with non_finite="clip" maps NaN, alone and in a search (the
    search refused it before its charge, as if the head raised)."""
    from sklearn_dppca import BudgetAccountant
    from sklearn_dppca.linear_model import PrivateRidge
    from sklearn_dppca.model_selection import PrivateGridSearchCV

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    y = X[:, 0] + 0.1 * rng.normal(size=120)
    X[0, 1] = np.nan
    head = PrivateRidge(y_bounds=(-3, 3), data_norm=3.0, non_finite="clip")
    head.set_params(accountant=BudgetAccountant()).fit(X, y)
    acc = BudgetAccountant()
    head.set_params(accountant=None)  # the search charges its own
    PrivateGridSearchCV(head, {"alpha": [1.0, 10.0]}, cv=3, accountant=acc).fit(X, y)
    assert acc.n_charges == 1
    with pytest.raises(ValueError, match="Input X contains NaN"):
        PrivateGridSearchCV(head.set_params(non_finite="raise"), {"alpha": [1.0]},
                            cv=3, accountant=BudgetAccountant()).fit(X, y)


# --------------------------------------------------------------------------
# Public failures found by the plan, before the charge
# --------------------------------------------------------------------------
def _charges_of(estimator, grid, X, y, cv=3, **search):
    """``(charges, FitFailedWarnings, error or None)`` of one search."""
    acc = BudgetAccountant()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            PrivateGridSearchCV(estimator, grid, cv=cv, epsilon=1.0,
                                accountant=acc, **search).fit(X, y)
            error = None
        except Exception as exc:  # noqa: BLE001 — the test reads its type
            error = exc
    failed = sum(w.category.__name__ == "FitFailedWarning" for w in caught)
    return acc.n_charges, failed, error


LDA = PrivateLDA([0, 1], data_norm=1.0)


@pytest.mark.parametrize("estimator, grid", [
    # a transformer's bound whose square overflows, or invalid bounds
    (make_pipeline(PrivatePCA(2), LDA), {"privatepca__data_norm": [2.0, 1e200]}),
    (make_pipeline(PrivatePCA(2, data_norm=None), LDA),
     {"privatepca__bounds": [(-3.0, 3.0), (3.0, -3.0)]}),
    # a head's bound outside float64's normal range, or bounds of another width
    (PrivateLDA([0, 1]), {"data_norm": [1.0, 1e200]}),
    (PrivateLDA([0, 1]), {"data_norm": [1.0, 1e-170]}),
    (PrivateLDA([0, 1], data_norm=1.0),
     {"bounds": [(-3.0, 3.0), (np.full(3, -3.0), np.full(3, 3.0))]}),
    (make_pipeline(PrivatePCA(2, data_norm=2.0), PrivateLDA([0, 1])),
     {"privatelda__bounds": [(-3.0, 3.0), (np.full(6, -3.0), np.full(6, 3.0))]}),
    # a path over its memory limit, a solver its path cannot use
    (make_pipeline(PrivatePCA(2, data_norm=2.0), LDA),
     {"privatepca__memory_limit": ["auto", 1000]}),
    (make_pipeline(PrivatePCA(2, data_norm=2.0, path="matrix_free"), LDA),
     {"privatepca__svd_solver": ["randomized", "full"]}),
    # the same in the unsupervised search
    (PrivatePCA(2, data_norm=2.0), {"memory_limit": ["auto", 1000]}),
    (PrivatePCA(2, data_norm=2.0, path="matrix_free"),
     {"svd_solver": ["randomized", "full"]}),
])
def test_a_candidate_failing_for_a_public_reason_is_found_before_the_charge(
        estimator, grid):
    # each fold fit would refuse it after the search's charge: the whole
    # budget spent and the search failed (review 44); the plan now finds it
    X, y = classes_data(n=600, d=20)
    charges, failed, error = _charges_of(estimator, grid, X, y)
    assert (charges, failed, error) == (1, 1, None)


def test_sparse_rows_read_by_a_head_are_refused_before_the_charge():
    from scipy import sparse

    X, y = classes_data(n=600)
    charges, _, error = _charges_of(LDA, {"alpha": [0.1, 1.0]}, sparse.csr_matrix(X), y)
    assert charges == 0 and "takes dense rows" in str(error)
    acc = BudgetAccountant()
    with pytest.raises(ValueError, match="takes dense rows"):
        private_cross_validate(LDA, sparse.csr_matrix(X), y, cv=3, accountant=acc)
    assert acc.n_charges == 0


def test_a_training_fold_of_one_row_is_refused_before_the_charge():
    X, y = classes_data(n=6)
    cv = [(np.array([0]), np.arange(1, 6)), (np.arange(1, 6), np.array([0]))]
    charges, _, error = _charges_of(LDA, {"alpha": [0.1, 1.0]}, X, y, cv=cv)
    assert charges == 0 and "fewer than 2 training rows" in str(error)


@pytest.mark.parametrize("supervised_grid", [True, False])
def test_a_numeric_error_score_never_chooses_a_failed_candidate(supervised_grid):
    # error_score=1.0 ranks the failed candidate above every fitted one; its
    # refit would raise after the charge, losing the search
    X, y = classes_data(n=600)
    if supervised_grid:
        estimator = make_pipeline(PrivatePCA(data_norm=2.0), LDA)
        grid = {"privatepca__n_components": [2, 50]}
    else:
        estimator, grid = PrivatePCA(data_norm=2.0), {"n_components": [2, 50]}
    acc = BudgetAccountant()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search = PrivateGridSearchCV(estimator, grid, cv=3, epsilon=1.0,
                                     error_score=1.0, accountant=acc)
        search.fit(X, y if supervised_grid else None)
    assert acc.n_charges == 1 and search.best_index_ == 0
    assert search.cv_results_["rank_test_score"][1] == 1  # ranked, not chosen
    # a callable refit may pick it from the scores: refused before the charge
    pick_best = lambda results: int(np.argmin(results["rank_test_score"]))  # noqa: E731
    with pytest.raises(ValueError, match="a callable refit could choose it"):
        search.set_params(refit=pick_best).fit(X, y if supervised_grid else None)
    assert acc.n_charges == 1


def test_a_heads_bounds_by_feature_name_pass_the_plan():
    """The plan's check of a head's box ran on the unfitted head, which has
    no feature names: bounds given as a dict were refused (review 47)."""
    import pandas as pd

    X, y = classes_data(n=600, d=3)
    frame = pd.DataFrame(X, columns=list("abc"))
    head = PrivateLDA([0, 1], bounds={c: (-2.0, 2.0) for c in "abc"})
    charges, failed, error = _charges_of(head, {"alpha": [0.1, 1.0]}, frame, y)
    assert (charges, failed, error) == (1, 0, None)
