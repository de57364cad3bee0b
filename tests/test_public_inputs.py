"""Public functions other than the estimators, on the inputs a fuzz review
found mishandled: each now returns the right value or refuses by name, and
leaves its arguments as they were."""

import math
import signal

import numpy as np
import pytest

from sklearn_dppca import PrivatePCA
from sklearn_dppca.audit import (
    audit,
    gaussian_mu_lower,
    mean_statistic,
    neighbouring_datasets,
    scatter_statistic,
    subspace_statistic,
    threshold_ceiling,
)
from sklearn_dppca.datasets import make_coherent_low_rank
from sklearn_dppca.metrics import principal_angle_sin
from sklearn_dppca.model_selection import (
    captured_variance_rows,
    floor_penalised_scores,
    plan_search,
)
from sklearn_dppca.noise import (
    ImplicitGOE,
    add_goe_noise,
    add_gue_noise,
    dense_noise,
    make_generator,
)
from sklearn_dppca.privacy import (
    calibrate_gaussian,
    gdp_epsilon,
    gdp_mu,
    rdp_to_epsilon,
    repeated_rdp,
)


@pytest.fixture
def deadline():
    """Fail, rather than hang, past 20 s (two of the inputs hung)."""
    def expired(*_):
        raise TimeoutError("no return after 20 s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_the_noise_is_added_to_a_square_matrix_of_its_kind_or_not_at_all():
    """A real matrix given to add_gue_noise had its real part noised, then
    the call failed; a 2 × 3 matrix given to add_goe_noise was partly noised
    and returned. Both are refused now, the matrix untouched."""
    for add, matrix in ((add_gue_noise, np.eye(3)), (add_goe_noise, np.zeros((2, 3))),
                        (add_goe_noise, np.eye(3, dtype=complex))):
        before = matrix.copy()
        with pytest.raises(ValueError, match="matrix must be a square"):
            add(make_generator(0), matrix, 1.0)
        np.testing.assert_array_equal(matrix, before)


@pytest.mark.parametrize("kwargs, named", [
    (dict(n_features=1e308), "n_features"), (dict(n_features=10**400), "n_features"),
    (dict(n_features=4, block=0), "block"), (dict(n_features=4, block=0.5), "block"),
])
def test_implicit_goe_refuses_sizes_that_are_not_counts(kwargs, named, deadline):
    with pytest.raises(ValueError, match=named):
        ImplicitGOE(make_generator(0), sigma=1.0, **kwargs)


@pytest.mark.parametrize("sigma, error", [("1", TypeError), (10**400, ValueError),
                                          (True, TypeError)])
def test_a_noise_scale_is_a_real_number(sigma, error):
    with pytest.raises(error, match="sigma"):
        dense_noise(make_generator(0), (2, 2), sigma)


def test_the_gdp_conversions_at_the_largest_floats(deadline):
    """gdp_mu(1.7e308, 0.9) never returned (its bracket started at inf) and
    gdp_mu(1e308, 0.5) overflowed; gdp_epsilon of μ near 1e154 failed to
    converge where ε ≈ μ²/2 is beyond a float."""
    for epsilon, delta in ((1.7e308, 0.9), (1e308, 0.5), (5e307, 0.99)):
        mu = gdp_mu(epsilon, delta)
        assert math.isfinite(mu) and mu > 1e153
    assert gdp_epsilon(1.5e154, 1e-6) == math.inf
    assert gdp_epsilon(gdp_mu(100.0, 0.5), 0.5) == pytest.approx(100.0)


def test_rdp_curves_are_non_negative():
    """A negative or NaN curve gave an ε below a zero curve's, or a NaN;
    the accountant already refused them."""
    for curve in ([-5.0], [math.nan]):
        with pytest.raises(ValueError, match="non-negative curve"):
            rdp_to_epsilon(curve, 1e-6, [2.0])
        with pytest.raises(ValueError, match="non-negative curve"):
            repeated_rdp(curve, 0.5, [2.0])
    with pytest.raises(ValueError, match="finite"):
        rdp_to_epsilon([1.0], 1e-6, [math.inf])


@pytest.mark.parametrize("sensitivity", [1e308, 5e-324])
def test_calibrate_gaussian_refuses_a_scale_no_draw_can_carry(sensitivity):
    with pytest.raises(ValueError, match="normal range"):
        calibrate_gaussian(1.0, 1e-6, sensitivity)
    assert calibrate_gaussian(1.0, 1e-6, 0.0) == 0.0


def test_the_audits_helpers_refuse_what_they_cannot_read():
    with pytest.raises(ValueError, match="n_fits"):
        threshold_ceiling(-5, 1e-5)
    with pytest.raises(ValueError, match="n_fits"):
        threshold_ceiling(2.5, 1e-5)
    with pytest.raises(ValueError, match="feature"):
        mean_statistic(-1)
    rows = np.random.default_rng(0).normal(size=(50, 1))
    one = PrivatePCA(1, data_norm=3.0).fit(rows)
    for statistic in (scatter_statistic, subspace_statistic, mean_statistic(3)):
        with pytest.raises(ValueError, match="this fit has 1 feature"):
            statistic(one)
    from sklearn.decomposition import PCA

    X, X_prime = neighbouring_datasets(50, 3)
    with pytest.raises(ValueError, match="no accountant parameter"):
        audit(PCA(2), X, X_prime, subspace_statistic, n_fits=10)


def test_gaussian_mu_lower_far_beyond_the_noncentral_t():
    """Samples 1e18 spreads apart: SciPy's noncentral t is NaN there, and
    the root-finder failed; the bound is now large, finite and below the
    observed separation."""
    bound = gaussian_mu_lower([0.0, 1e-12, 2e-12, 0.0], [1e6] * 4)
    assert 1e16 < bound < math.inf


def test_search_helpers_refuse_bad_bounds_and_counts():
    rows = np.array([[3.0, 4.0], [0.0, 0.5]])
    for bad in (math.nan, 1 + 2j, math.inf, 0.0):
        with pytest.raises(ValueError, match="data_norm"):
            captured_variance_rows(rows, np.zeros(2), np.array([[0.0, 1.0]]), bad)
    with pytest.raises(ValueError, match="n_validation"):
        floor_penalised_scores(np.array([[1.0]]), np.array([[1]]), [0], 0.01, 1.0)


def test_plan_search_takes_splits_as_lists():
    splits = [([0, 1], [2, 3]), ([2, 3], [0, 1])]
    plan = plan_search(PrivatePCA(data_norm=1.0), {"n_components": [1]}, epsilon=1.0,
                       delta=1e-6, splits=splits, n_samples=4, n_features=3)
    assert plan.mu > 0


def test_generators_and_metrics_read_huge_integers_by_name():
    with pytest.raises(ValueError, match="data_norm"):
        make_coherent_low_rank(100, 8, data_norm=1e-200)
    with pytest.raises(ValueError, match="spread"):
        make_coherent_low_rank(100, 8, spread=10**400)
    with pytest.raises(ValueError, match="beyond float64"):
        principal_angle_sin([[10**400, 0]], [[1.0, 0.0]])


def test_spent_budget_takes_pairs_and_budgets_compare_with_pairs():
    """An array of pairs was refused as 'ambiguous', and a 1-tuple was
    charged as a Gaussian μ; comparing a Budget with a number failed inside
    its unpacking."""
    from sklearn_dppca.privacy import Budget, BudgetAccountant

    acc = BudgetAccountant(10.0, spent_budget=np.array([[1.0, 0.0]]))
    assert acc.spent == (1.0, 0.0) and len(acc) == 1
    with pytest.raises(ValueError, match=r"\(epsilon, delta\) pairs"):
        BudgetAccountant(10.0, spent_budget=[(1.0,)])
    with pytest.raises(TypeError, match="not supported"):
        Budget(1.0, 0.0) >= 5
    assert Budget(1.0, 1e-6) >= (0.5, 1e-7) and not Budget(1.0, 1e-6) >= (0.5, 1.0)


def test_error_score_raise_runs_every_search():
    """error_score="raise" (documented) crashed every search after its
    charge: NumPy read "raise" as a float to put in no failed row."""
    from sklearn.pipeline import make_pipeline

    from sklearn_dppca import BudgetAccountant
    from sklearn_dppca.linear_model import PrivateLDA
    from sklearn_dppca.model_selection import (
        PrivateGridSearchCV,
        private_cross_validate,
    )

    X = np.random.default_rng(0).normal(size=(300, 4)) * 0.4
    y = (X[:, 0] > 0).astype(int)
    private_cross_validate(PrivatePCA(2, data_norm=2.0), X, cv=3, error_score="raise",
                           accountant=BudgetAccountant())
    PrivateGridSearchCV(PrivatePCA(data_norm=2.0), {"n_components": [1, 2]},
                        error_score="raise", accountant=BudgetAccountant()).fit(X)
    private_cross_validate(make_pipeline(PrivateLDA([0, 1], data_norm=2.0)), X, y,
                           cv=3, epsilon=3.0, error_score="raise",
                           accountant=BudgetAccountant())


def test_search_arguments_refused_by_name():
    from sklearn_dppca import BudgetAccountant
    from sklearn_dppca.linear_model import PrivateLDA
    from sklearn_dppca.model_selection import private_cross_validate

    X = np.random.default_rng(0).normal(size=(120, 3)) * 0.4
    y = (X[:, 0] > 0).astype(int)
    private_cross_validate(PrivatePCA(2, data_norm=2.0), X, cv=None,
                           accountant=BudgetAccountant())  # 5 folds
    rows = np.arange(120)
    for cv, named in (({"a": 1}, "cv must be None, an int"),
                      ([(rows[:60], rows[60:], rows)], "where a \\(train, test\\)")):
        with pytest.raises(ValueError, match=named):
            private_cross_validate(PrivatePCA(2, data_norm=2.0), X, cv=cv,
                                   accountant=BudgetAccountant())
    with pytest.raises(ValueError, match="scoring"):
        private_cross_validate(PrivateLDA([0, 1], data_norm=2.0), X, y, cv=3,
                               scoring=["accuracy"], accountant=BudgetAccountant())


def test_scalers_and_heads_on_inputs_they_misread():
    """A PublicScaler fitted on dense rows dropped its offset on sparse ones;
    PrivateStandardScaler overflowed float16 rows to -inf; PrivateLDA
    predicted a NaN class; a bound whose square overflows raised a bare
    OverflowError."""
    from scipy import sparse

    from sklearn_dppca import BudgetAccountant
    from sklearn_dppca.linear_model import PrivateLDA, PrivateRidge
    from sklearn_dppca.preprocessing import PrivateStandardScaler, PublicScaler

    X = np.array([[1.0, 2.0], [3.0, 0.0]])
    scaler = PublicScaler(center=1.0, scale=2.0).fit(X)
    for method in (scaler.transform, scaler.inverse_transform):
        with pytest.raises(TypeError, match="keeps 0 at 0"):
            method(sparse.csr_matrix(X))
    rows = np.random.default_rng(0).uniform(9e4, 1e5, (500, 2))
    private = PrivateStandardScaler((0, 1e5), epsilon=5.0,
                                    accountant=BudgetAccountant()).fit(rows)
    assert np.isfinite(private.transform(np.full((2, 2), 6e4, np.float16))).all()
    labels = (rows[:, 0] > 9.5e4).astype(float)
    with pytest.raises(ValueError, match="classes must not hold NaN"):
        PrivateLDA([0.0, 1.0, np.nan], data_norm=2e5,
                   accountant=BudgetAccountant()).fit(rows, labels)
    for head in (PrivateLDA([0.0, 1.0], data_norm=1e300),
                 PrivateRidge(data_norm=1e300, y_bounds=(0.0, 1.0))):
        with pytest.raises(ValueError, match="norm bound"):
            head.set_params(accountant=BudgetAccountant()).fit(rows, labels)


def test_captured_variance_score_checks_a_bare_estimators_rows():
    import pandas as pd
    from sklearn.exceptions import NotFittedError

    from sklearn_dppca.model_selection import captured_variance_score

    frame = pd.DataFrame(np.random.default_rng(0).normal(size=(200, 3)) * 0.3,
                         columns=["a", "b", "c"])
    est = PrivatePCA(2, data_norm=2.0).fit(frame)
    assert 0 <= captured_variance_score(est, frame) <= 4.0
    with pytest.raises(ValueError, match="feature names"):
        captured_variance_score(est, frame[["c", "b", "a"]])
    with pytest.raises(ValueError, match="NaN"):
        captured_variance_score(est, frame.assign(a=np.nan))
    with pytest.raises(NotFittedError):
        captured_variance_score(PrivatePCA(2, data_norm=2.0), frame)
