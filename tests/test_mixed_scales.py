"""Issue 25, mixed scales: what is public is used after the release.

- With ``bounds=``, the released mean is projected into the public box.
- A warning computed from released values only says when one feature's
  variance dominates, and points to the scalers.
- The issue's survey: income, age, a 1–5 score and a 0–8 count.
"""

import math
import warnings

import numpy as np
import pytest

from sklearn_dppca import (
    BudgetAccountant,
    CoherentPowerPCA,
    ComplexGaussPCA,
    PrivatePCA,
)
from sklearn_dppca._released import (
    NOISE_MARGIN,
    noise_scale_of_variances,
    released_variances,
    warn_if_one_feature_dominates,
)
from sklearn_dppca.preprocessing import FeatureScaleWarning, PublicScaler

ESTIMATORS = {
    "private": lambda **kw: PrivatePCA(2, **kw),
    "complex": lambda **kw: ComplexGaussPCA(2, **kw),
    "coherent": lambda **kw: CoherentPowerPCA(1, clip_radius=0.5, n_iter=2, **kw),
}


# ------------------------------------------------- the mean in the box
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", ESTIMATORS)
def test_the_released_mean_lies_in_the_public_box(name, dtype):
    """Fails before issue 25: on 50 rows at epsilon=0.1 the private mean's
    noise (σ ≈ 7 here) put it far outside [0, 1] (and [0, 8])."""
    rng = np.random.default_rng(0)
    X = (rng.uniform(size=(50, 4)) * [1, 1, 1, 8]).astype(dtype)
    lower, upper = np.zeros(4), np.array([1.0, 1.0, 1.0, 8.0])
    for seed in range(5):
        est = ESTIMATORS[name](epsilon=0.1, bounds=(lower, upper), random_state=seed,
                               accountant=BudgetAccountant())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X)
        assert est.mean_.dtype == dtype
        assert ((lower <= est.mean_) & (est.mean_ <= upper)).all(), est.mean_


def test_without_centring_the_mean_stays_zero_outside_the_box():
    """center=False: mean_ is zero by definition (no centring), not an
    estimate: it is not moved into a box that excludes 0."""
    X = np.random.default_rng(0).uniform(18, 90, size=(100, 2))
    est = PrivatePCA(1, bounds=(18, 90), center=False, random_state=0,
                     accountant=BudgetAccountant())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X)
    np.testing.assert_array_equal(est.mean_, 0.0)


# ------------------------------------------------------------ the survey
SURVEY_RANGES = {"income": (0.0, 500_000.0), "age": (18.0, 90.0),
                 "satisfaction": (1.0, 5.0), "children": (0.0, 8.0)}


def make_survey(n=50_000, seed=0):
    """The issue's table: income (lognormal, 0–500 000), age (18–90), a 1–5
    satisfaction score and a 0–8 count of children, correlated through age
    and a latent wealth."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    age = np.clip(rng.normal(46, 16, n), 18, 90).round()
    wealth = rng.normal(size=n)
    income = np.clip(np.exp(10.4 + 0.012 * (age - 46) + 0.7 * wealth), 0, 500_000)
    satisfaction = np.clip(np.round(3 + 0.6 * wealth + 0.8 * rng.normal(size=n)),
                           1, 5)
    rate = 0.3 + 1.7 * np.exp(-(((age - 40) / 12) ** 2)) + 0.3 * (wealth > 0)
    children = np.clip(rng.poisson(rate), 0, 8).astype(float)
    return pd.DataFrame(np.column_stack([income, age, satisfaction, children]),
                        columns=list(SURVEY_RANGES))


@pytest.fixture(scope="module")
def survey():
    return make_survey()


def _fit_recording(estimator, X):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimator.fit(X)
    return [w for w in caught if issubclass(w.category, FeatureScaleWarning)]


@pytest.mark.parametrize("params", [{"data_norm": "auto"},
                                    {"bounds": tuple(np.array(
                                        list(SURVEY_RANGES.values())).T)}])
def test_the_survey_without_scaling_warns_that_income_dominates(survey, params):
    """Fails before issue 25: nothing warned (the issue's `dppca fit survey.csv
    --data-norm auto`: component 1 = income, components 2–3 noise)."""
    pca = PrivatePCA(3, epsilon=1.0, random_state=0, accountant=BudgetAccountant(),
                     **params)
    caught = _fit_recording(pca, survey)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "'income'" in message and "'age'" not in message
    assert "sklearn_dppca.preprocessing.PublicScaler" in message
    assert caught[0].filename == __file__  # the user's line: the fit's caller
    lower, upper = np.array(list(SURVEY_RANGES.values())).T
    if "bounds" in params:  # and no mean outside its public range
        assert ((lower <= pca.mean_) & (pca.mean_ <= upper)).all()


def test_the_survey_scaled_by_its_public_ranges_is_close_to_pca(survey):
    """The issue's fix, in a Pipeline: every column mapped from its public
    range to [0, 1], then PrivatePCA in the unit cube. No warning, and the
    subspace is close to non-private PCA's of the same scaled table."""
    from sklearn.decomposition import PCA
    from sklearn.pipeline import make_pipeline

    from sklearn_dppca.metrics import principal_angle_sin

    budget = BudgetAccountant(epsilon=1.0)
    pipe = make_pipeline(
        PublicScaler(SURVEY_RANGES),
        PrivatePCA(3, epsilon=1.0, bounds=(0, 1), random_state=0, accountant=budget),
    )
    assert _fit_recording(pipe, survey) == []
    assert budget.n_charges == 1  # the scaler costs nothing
    exact = PCA(3).fit(PublicScaler(SURVEY_RANGES).fit_transform(survey))
    sin = principal_angle_sin(pipe[-1].components_, exact.components_)
    assert sin < 0.1
    raw = PrivatePCA(3, epsilon=1.0, data_norm="auto", random_state=0,
                     accountant=BudgetAccountant())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw.fit(survey)
    unscaled = PCA(3).fit(survey)
    assert principal_angle_sin(raw.components_, unscaled.components_) > 0.2


# -------------------------------------------------- noise alone: silence
@pytest.mark.parametrize("name", ESTIMATORS)
def test_noise_alone_never_fires_the_warning(name):
    """On rows with no variance at all every released variance is noise (and
    the private centre's error): the warning never fires, for any n, d, ε."""
    configs = [(n, d, eps) for n in (10, 30, 100, 1000) for d in (2, 3, 5)
               for eps in (0.3, 1.0, 3.0, 10.0)]
    seeds = range(30 if name == "private" else 5)
    for n, d, eps in configs:
        X = np.zeros((n, d))
        for seed in seeds:
            est = ESTIMATORS[name](epsilon=eps, data_norm=1.0, random_state=seed,
                                   accountant=BudgetAccountant())
            assert _fit_recording(est, X) == [], (n, d, eps, seed)


def test_features_on_one_scale_do_not_fire_it():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(5000, 6)) * [3.0, 2.0, 1.0, 1.0, 0.5, 0.3]
    for eps in (0.5, 1.0, math.inf):
        est = PrivatePCA(2, epsilon=eps, data_norm=10.0, random_state=0,
                         accountant=BudgetAccountant())
        assert _fit_recording(est, X) == []


def test_the_warning_reads_released_values_only():
    """warn_if_one_feature_dominates looks at the released attributes (and
    public parameters) alone: changing them, not the data, decides it."""
    X = np.random.default_rng(2).normal(size=(2000, 3))
    est = PrivatePCA(epsilon=1.0, data_norm=5.0, random_state=0,
                     accountant=BudgetAccountant())
    assert _fit_recording(est, X) == []
    v = released_variances(est)
    np.testing.assert_allclose(v, np.diag(est.get_covariance()))
    est.components_ = np.eye(3)
    est.explained_variance_ = np.array([1e4, 1.0, 1.0])
    with pytest.warns(FeatureScaleWarning, match="of feature 0 "):
        warn_if_one_feature_dominates(est)
    est.explained_variance_ = np.array([99.0, 1.0, 1.0])  # under the ratio
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_one_feature_dominates(est)
    est.explained_variance_ = np.array([1e4, 1.0, 1.0])
    tau = noise_scale_of_variances(est)
    est.explained_variance_ = np.array([NOISE_MARGIN * tau * 0.9, 1e-9, 1e-9])
    with warnings.catch_warnings():  # dominant, but within the noise margin
        warnings.simplefilter("error")
        warn_if_one_feature_dominates(est)
