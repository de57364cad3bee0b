"""A private step's ``bounds`` after public steps that do not keep ``X``'s
columns (review 106 F2): their output's width and names are public (their
output on ``X``'s columns without a row), so bounds by names they do not
output, by name where they output none, or of another length are refused
before the charge, in both searches and for every candidate; they were
charged, then failed."""

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

REFUSED = "refused before it spent any budget"


def _frame():
    rng = np.random.default_rng(0)
    return pd.DataFrame(rng.normal(size=(300, 3)), columns=list("abc"))


def _tanh(pandas=True):
    step = FunctionTransformer(np.tanh, feature_names_out="one-to-one")
    return step.set_output(transform="pandas") if pandas else step


def _columns():
    return ColumnTransformer([("t", _tanh(False), list("abc"))],
                             sparse_threshold=0).set_output(transform="pandas")


def _box(names):
    return {n: (-3.0, 3.0) for n in names}


def _search(estimator, grid, accountant, **kwargs):
    return PrivateGridSearchCV(estimator, grid, epsilon=2.0, delta=1e-6, cv=3,
                               accountant=accountant, **kwargs)


def _refused(estimator, grid, X, y=None, match=None):
    accountant = BudgetAccountant(epsilon=100, delta=1e-2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=REFUSED) as info:
            _search(estimator, grid, accountant).fit(X, y)
    assert accountant.spent.epsilon == 0.0
    if match is not None:
        assert match in str(info.value)


@pytest.mark.parametrize("head, names, missing", [
    (_tanh, "abz", "['c']"),
    (_columns, "abc", "['t__a', 't__b', 't__c']"),
])
def test_names_the_heads_do_not_output_refused_before_the_charge(
        head, names, missing):
    est = make_pipeline(head(), PrivatePCA(bounds=_box(names)))
    _refused(est, {"privatepca__n_components": [1, 2]}, _frame(),
             match=f"no (low, high) for the feature(s) {missing}")


def test_supervised_search_refuses_the_pcas_names_before_the_charge():
    X = _frame()
    y = X["a"].to_numpy() + np.random.default_rng(1).normal(size=len(X))
    est = make_pipeline(_tanh(), PrivatePCA(2, bounds=_box("abz")),
                        PrivateRidge(data_norm=3.0, y_bounds=(-5, 5)))
    _refused(est, {"privateridge__alpha": [1.0, 2.0]}, X, y,
             match="no (low, high) for the feature(s) ['c']")


def test_names_by_a_grid_every_candidate_checked():
    est = make_pipeline(_tanh(), PrivatePCA(1))
    _refused(est, {"privatepca__bounds": [_box("abc"), _box("abz")]}, _frame(),
             match="['c']")


def test_by_name_after_steps_of_no_names_refused_with_advice():
    # a FunctionTransformer of NumPy output on an array: no names reach the PCA
    est = make_pipeline(FunctionTransformer(np.tanh), PrivatePCA(bounds=_box("abc")))
    _refused(est, {"privatepca__n_components": [1, 2]}, _frame().to_numpy(),
             match="set_output(transform='pandas')")


def test_bounds_of_another_width_refused_before_the_charge():
    est = make_pipeline(_columns(), PrivatePCA(bounds=([-3.0] * 2, [3.0] * 2)))
    _refused(est, {"privatepca__n_components": [1, 2]}, _frame(),
             match="n_features=3")


@pytest.mark.parametrize("head, names", [
    (_tanh, "abc"), (_columns, ["t__a", "t__b", "t__c"])])
def test_right_names_fit_as_the_same_box_in_order(head, names):
    def fit(bounds):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _search(make_pipeline(head(), PrivatePCA(bounds=bounds)),
                           {"privatepca__n_components": [1, 2]},
                           BudgetAccountant(epsilon=100, delta=1e-2),
                           random_state=0).fit(_frame())

    by_name = fit(_box(names))
    in_order = fit(([-3.0] * 3, [3.0] * 3))
    assert by_name.best_params_ == in_order.best_params_
    np.testing.assert_array_equal(by_name.best_estimator_[-1].components_,
                                  in_order.best_estimator_[-1].components_)
    np.testing.assert_array_equal(by_name.cv_results_["mean_test_score"],
                                  in_order.cv_results_["mean_test_score"])


def test_dask_bounds_of_another_width_refused_before_the_charge():
    dd = pytest.importorskip("dask.dataframe")
    est = make_pipeline(_tanh(), PrivatePCA(bounds=([-3.0] * 2, [3.0] * 2)))
    _refused(est, {"privatepca__n_components": [1, 2]},
             dd.from_pandas(_frame(), npartitions=3), match="n_features=3")


def _pca_then_head(names, pandas):
    pca = PrivatePCA(2, data_norm=3.0)
    pca = pca.set_output(transform="pandas") if pandas else pca
    return make_pipeline(pca, PrivateRidge(bounds=_box(names), y_bounds=(-5, 5)))


@pytest.mark.parametrize("names, pandas, match", [
    (["pc0", "pc1"], False, "passes on none"),
    (["privatepca0", "pc1"], True, "['privatepca1']"),
])
def test_head_names_after_the_pca_refused_before_the_charge(names, pandas, match):
    X = _frame()
    y = X["a"].to_numpy() + np.random.default_rng(1).normal(size=len(X))
    accountant = BudgetAccountant(epsilon=100, delta=1e-2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="before any budget was spent") as info:
            _search(_pca_then_head(names, pandas),
                    {"privateridge__alpha": [1.0, 2.0]}, accountant).fit(X, y)
    assert accountant.spent.epsilon == 0.0
    assert match in str(info.value)


def test_head_names_of_the_pandas_pca_fit():
    X = _frame()
    y = X["a"].to_numpy() + np.random.default_rng(1).normal(size=len(X))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search = _search(_pca_then_head(["privatepca0", "privatepca1"], True),
                         {"privateridge__alpha": [1.0, 2.0]},
                         BudgetAccountant(epsilon=100, delta=1e-2)).fit(X, y)
    assert search.best_estimator_[-1].coef_.shape[-1] == 2


@pytest.mark.parametrize("head, names", [
    (None, "abc"), (_tanh, "abc"), (_columns, ["t__a", "t__b", "t__c"])])
def test_entries_naming_no_feature_read_do_not_enlarge_the_bound(head, names):
    # a plain fit takes the box of the features it reads only; the search's
    # bound (and its scores' noise) was the box of every entry of the dict
    def fit(bounds):
        pca = PrivatePCA(bounds=bounds)
        est, key = (pca, "n_components") if head is None else (
            make_pipeline(head(), pca), "privatepca__n_components")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _search(est, {key: [1, 2]},
                           BudgetAccountant(epsilon=100, delta=1e-2),
                           random_state=0).fit(_frame())

    extra = dict(_box(names), unused=(-1e3, 1e3))
    assert fit(extra).selection_sigma_ == fit(_box(names)).selection_sigma_
    extra = dict(_box("abc"), unused=(-1e3, 1e3))
    plain = PrivatePCA(bounds=extra, epsilon=1.0, delta=1e-6).fit(_frame())
    assert plain.data_norm_ == PrivatePCA(
        bounds=_box("abc"), epsilon=1.0, delta=1e-6).fit(_frame()).data_norm_


def test_scores_are_clipped_at_the_bound_their_noise_is_calibrated_to(monkeypatch):
    """Review 116 F1: a step of yours may name other columns on no rows than
    on the data (pandas' ``apply(f, axis=1)`` returns X's columns on an
    empty frame): the search's bound was the box of ``a`` and ``b``
    (0.71), the fits read ``s`` and clipped the scores at its box (50), so
    a row moved a score 5000 times more than the noise allowed for. The
    scores are clipped at the search's bound, whatever the fit read."""
    from sklearn_dppca import _search_run

    def per_row(X):
        return X.apply(lambda r: pd.Series({"s": 50 * (r["a"] + r["b"])}), axis=1)

    X = pd.DataFrame(np.random.default_rng(0).uniform(0, 1, (200, 2)),
                     columns=["a", "b"])
    bounds = {"a": (0, 1), "b": (0, 1), "s": (0, 100)}
    seen = []
    for name, bound in (("captured_variance_sum", 3), ("_cumulative_gains", 2)):
        scored = getattr(_search_run, name)  # the clip: given, or the fit's
        monkeypatch.setattr(_search_run, name, lambda *a, f=scored, i=bound:
                            seen.append(a[i] if len(a) > i else a[1].data_norm_)
                            or f(*a))
    est = make_pipeline(FunctionTransformer(per_row), PrivatePCA(bounds=bounds))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search = _search(est, {"privatepca__n_components": [1]},
                         BudgetAccountant(epsilon=100, delta=1e-2)).fit(X)
    assert list(search.best_estimator_[-1].feature_names_in_) == ["s"]
    assert search.best_estimator_[-1].data_norm_ > 49
    assert seen and max(seen) <= np.sqrt(0.5) + 1e-12
