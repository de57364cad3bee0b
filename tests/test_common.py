"""scikit-learn's estimator checks on every public estimator of the package."""

import inspect

import pytest
from sklearn.base import BaseEstimator
from sklearn.utils.estimator_checks import parametrize_with_checks

import sklearn_dppca
from sklearn_dppca.linear_model import PrivateLDA, PrivateRidge
from sklearn_dppca.model_selection import PrivateGridSearchCV
from sklearn_dppca.preprocessing import PrivateStandardScaler, PublicScaler


def all_estimators():
    """Every public estimator class exported by the package."""
    return [
        obj
        for name, obj in vars(sklearn_dppca).items()
        if inspect.isclass(obj)
        and issubclass(obj, BaseEstimator)
        and not name.startswith("_")
    ]


# Checks an estimator cannot pass, by class, with the reason: none today.
# (CoherentPowerPCA's cap of its iteration grid is n_iter_max, not max_iter,
# so check_transformer_n_iter no longer expects n_iter_ >= 1 of it.)
# scikit-learn skips its Array API checks here unless the environment sets
# SCIPY_ARRAY_API=1; tests/test_array_api.py sets it and runs
# check_array_api_input on all three estimators with array_api_strict, and
# PyTorch where installed.
# PrivateLDA: its labels are declared (classes=...), never learned from y,
# where the labels present would tell whether anyone has a rare one.
_DECLARED = ("the labels are the public classes=[0, 1, 2], not learned from "
             "y: the checks' other labels are refused before the charge")
EXPECTED_FAILED_CHECKS: dict = {
    PrivateLDA: {
        "check_dtype_object": _DECLARED,
        "check_classifiers_classes": _DECLARED,
        "check_classifiers_train": "with classes=[0, 1, 2] declared, a binary y "
        "still gets three discriminants (decision_function of shape (n, 3))",
    },
}


@pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")
@parametrize_with_checks(
    [est(random_state=0) for est in all_estimators()]
    # the checks' data is tiny (down to 10 rows): at a smaller epsilon the
    # search for the bound would be drowned in its noise, and refused
    + [est(random_state=0, data_norm="auto", epsilon=1e4) for est in all_estimators()
       if "data_norm" in est().get_params()]
    # CoherentPowerPCA's iterations from a random basis (no covariance
    # release), of fewer components than features (with every component the
    # iterations would buy nothing, and it is refused)
    + [sklearn_dppca.CoherentPowerPCA(1, start="random", random_state=0)]
    # the search, with its transformer tags delegated from the estimator
    + [PrivateGridSearchCV(sklearn_dppca.PrivatePCA(data_norm=10.0),
                           {"n_components": [1, 2]}, cv=2, random_state=0,
                           accountant=sklearn_dppca.BudgetAccountant())]
    # the scalers of sklearn_dppca.preprocessing: by a public centre and
    # scale, by one public range for every feature, and the private one
    + [PublicScaler(center=1.0, scale=3.0), PublicScaler(ranges=(-10.0, 10.0)),
       PrivateStandardScaler(bounds=(-100.0, 100.0), random_state=0)]
    # the supervised heads, on the checks' tiny data at a large epsilon
    + [PrivateLDA(classes=[0, 1, 2], data_norm=10.0, epsilon=1e4, random_state=0),
       PrivateRidge((-100.0, 100.0), data_norm=10.0, epsilon=1e4, random_state=0)],
    expected_failed_checks=lambda est: EXPECTED_FAILED_CHECKS.get(type(est), {}),
)
def test_sklearn_estimator_checks(estimator, check):
    """The estimators follow scikit-learn's API (fixed seed; data_norm from the
    data, and chosen privately by "auto")."""
    check(estimator)


def test_discovery_finds_the_estimators():
    assert sklearn_dppca.PrivatePCA in all_estimators()


@pytest.mark.parametrize("Est", [
    *all_estimators(), PrivateGridSearchCV, PublicScaler, PrivateStandardScaler,
    PrivateLDA, PrivateRidge,
], ids=lambda Est: Est.__name__)
def test_constraints_name_exactly_the_parameters(Est):
    """scikit-learn's check_param_validation (which parametrize_with_checks
    does not run here) needs ``_parameter_constraints`` to name every
    parameter and nothing else (review 107 F1: CoherentPowerPCA declared
    PCA's four randomized-solver parameters, which it does not have)."""
    params = {name for name in inspect.signature(Est.__init__).parameters
              if name != "self"}
    assert set(Est._parameter_constraints) == params
