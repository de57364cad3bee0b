"""Adversarial and degenerate inputs, released-values-only attributes, threads."""

import math
import threading
import warnings
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import sparse

from sklearn_dppca import (
    BudgetAccountant,
    BudgetExceededError,
    CoherentPowerPCA,
    ComplexGaussPCA,
    PrivatePCA,
)

from .conftest import (
    EXTENSION_DTYPES,
    NON_NUMERIC_DTYPES,
    NUMERIC_DTYPES,
    generators_in_pickle,
    interrupted_at,
    typed_frame,
)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")

FACTORIES = {
    "private": lambda **kw: PrivatePCA(**kw),
    "complex": lambda **kw: ComplexGaussPCA(**kw),
    # one component unless given: with every one, its iterations are refused
    "coherent-fixed": lambda **kw: CoherentPowerPCA(
        clip_radius=0.2, n_iter=2, **{"n_components": 1, **kw}),
    "coherent-auto": lambda **kw: CoherentPowerPCA(n_iter_max=2, expected_trials=4,
                                                   **kw),
}

FITTED = (
    "components_",
    "explained_variance_",
    "explained_variance_ratio_",
    "singular_values_",
    "mean_",
    "noise_variance_",
)


def check_fit_or_clear_error(est, X):
    """Fits with finite results, or raises ValueError/TypeError; never mutates X."""
    before = X.copy() if hasattr(X, "copy") else X
    try:
        est.fit(X)
    except (ValueError, TypeError) as exc:
        assert str(exc)  # a message, not a bare exception
    else:
        for name in FITTED:
            assert np.all(np.isfinite(getattr(est, name))), name
        components = est.components_.astype(float)
        np.testing.assert_allclose(
            components @ components.T, np.eye(len(components)), atol=1e-4
        )
    if isinstance(X, np.ndarray):
        np.testing.assert_array_equal(X, before)
    elif isinstance(X, pd.DataFrame):
        pd.testing.assert_frame_equal(X, before)


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
extreme = st.sampled_from(
    [0.0, 5e-324, -5e-324, 1e-310, 1e300, -1e300, 3.4e38, 1.2e-38, 1.0, -1.0]
)


@pytest.mark.parametrize("name", FACTORIES)
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.data(),
    shape=st.tuples(st.integers(1, 12), st.integers(1, 6)),
    dtype=st.sampled_from([np.float64, np.float32]),
)
def test_any_finite_matrix_fits_or_fails_clearly(name, data, shape, dtype):
    values = data.draw(
        arrays(np.float64, shape, elements=st.one_of(finite, extreme))
    )
    with np.errstate(over="ignore"):
        X = values.astype(dtype)
    k = data.draw(st.integers(1, max(1, min(shape))))
    est = FACTORIES[name](n_components=k, data_norm=1.0, random_state=0)
    check_fit_or_clear_error(est, X)


@pytest.mark.parametrize("name", FACTORIES)
@settings(max_examples=15, deadline=None)
@given(
    shape=st.tuples(st.integers(2, 8), st.integers(2, 5)),
    where=st.data(),
    bad=st.sampled_from([np.nan, np.inf, -np.inf]),
)
def test_nan_or_inf_anywhere_is_refused(name, shape, where, bad):
    X = np.random.default_rng(0).normal(size=shape)
    i = where.draw(st.integers(0, shape[0] - 1))
    j = where.draw(st.integers(0, shape[1] - 1))
    X[i, j] = bad
    with pytest.raises(ValueError, match="NaN|infinity"):
        FACTORIES[name](data_norm=1.0).fit(X)


DEGENERATE = {
    "huge rows": np.r_[np.full((3, 4), 1e250), np.eye(4)],
    "identical rows": np.ones((20, 4)),
    "zeros": np.zeros((10, 4)),
    "one feature": np.arange(10.0)[:, None],
    "n < d": np.random.default_rng(1).normal(size=(3, 8)),
    "denormals": np.full((6, 3), 5e-324),
    "float32 extremes": np.array([[3.4e38, -3.4e38], [1e-45, 0.0], [1.0, 2.0]],
                                 dtype=np.float32),
    "one row": np.ones((1, 3)),
}


@pytest.mark.parametrize("case", DEGENERATE)
@pytest.mark.parametrize("name", FACTORIES)
def test_degenerate_inputs(name, case):
    X = DEGENERATE[case]
    for data_norm in (1.0, None):
        est = FACTORIES[name](data_norm=data_norm, random_state=0)
        check_fit_or_clear_error(est, X.copy())
    if case == "one row":
        with pytest.raises(ValueError, match="1 sample"):
            FACTORIES[name](data_norm=1.0).fit(X)


@pytest.mark.parametrize("name", FACTORIES)
def test_k_equals_d_read_only_and_non_contiguous(name):
    base = np.random.default_rng(2).normal(size=(60, 8))
    strided = base[::2, ::2]  # non-contiguous view
    strided.flags.writeable = False
    est = FACTORIES[name](n_components=4, data_norm=2.0, random_state=0)
    if name == "coherent-fixed":  # iterations that would buy nothing
        with pytest.raises(ValueError, match="would buy nothing"):
            est.fit(strided)
        return
    check_fit_or_clear_error(est, strided)
    assert est.n_components_ == 4


@pytest.mark.parametrize("name", FACTORIES)
def test_pandas_with_mixed_dtypes(name):
    frame = pd.DataFrame(
        {"a": np.arange(30), "b": np.linspace(0, 1, 30, dtype=np.float32),
         "c": np.arange(30) % 2 == 0}
    )
    check_fit_or_clear_error(FACTORIES[name](data_norm=40.0, random_state=0), frame)
    frame["d"] = ["x"] * 30
    with pytest.raises((ValueError, TypeError)):
        FACTORIES[name](data_norm=40.0).fit(frame)


# ------------------------------------------------ released values only
@pytest.mark.parametrize("name", FACTORIES)
def test_attributes_depend_only_on_the_clipped_statistics(name):
    """Same seed, same clipped statistics ⇒ same fitted attributes.

    Permuting rows leaves every clipped sum unchanged; scaling a row that is
    already beyond data_norm by 1000 leaves it clipped to the same row (without
    centring, whose second clipping would see a different row).
    """
    X = np.random.default_rng(3).normal(size=(3000, 6)) * 0.4
    X[0] *= 5.0 / np.linalg.norm(X[0])
    permuted = X[np.random.default_rng(4).permutation(len(X))]
    scaled = X.copy()
    scaled[0] *= 1000.0
    for variant, center in ((permuted, True), (permuted, False), (scaled, False)):
        fits = [
            FACTORIES[name](n_components=3, data_norm=1.0, center=center,
                            random_state=7).fit(Z)
            for Z in (X, variant)
        ]
        for attribute in FITTED:
            np.testing.assert_allclose(
                getattr(fits[0], attribute), getattr(fits[1], attribute),
                rtol=1e-7, atol=1e-9, err_msg=attribute,
            )
        assert fits[0].privacy_spent_ == fits[1].privacy_spent_


# ----------------------------------------------------------- concurrency
def test_threads_sharing_an_accountant_never_overspend():
    """16 threads fit against one budget that admits exactly 5 fits."""
    X = np.random.default_rng(5).normal(size=(500, 4)) * 0.3
    acc = BudgetAccountant(epsilon=1.0, delta=1e-6)
    # five fits at ε0 compose (GDP) to exactly ε = 1
    from sklearn_dppca.privacy import gdp_epsilon, gdp_mu

    eps0 = gdp_epsilon(gdp_mu(1.0, 1e-6) / np.sqrt(5), 1e-6)
    outcomes = []

    def work():
        try:
            PrivatePCA(2, epsilon=eps0, data_norm=1.0, accountant=acc).fit(X)
            outcomes.append("fit")
        except BudgetExceededError:
            outcomes.append("refused")

    threads = [threading.Thread(target=work) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("fit") == 5 and outcomes.count("refused") == 11
    assert acc.n_charges == 5
    assert acc.spent[0] <= 1.0 * (1 + 1e-9)


def test_failed_fit_is_not_charged_in_threads():
    bad = np.ones((20, 3))
    bad[4, 1] = np.nan
    acc = BudgetAccountant(epsilon=1.0)

    def work():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(ValueError):
                PrivatePCA(data_norm=1.0, accountant=acc).fit(bad)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert acc.n_charges == 0 and acc.spent == (0.0, 0.0)


# ------------------------------------------------------ DataFrame dtypes
@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
def test_numeric_frame_columns_fit_as_floats(dtype):
    frame, values = typed_frame(dtype)
    fits = [PrivatePCA(2, data_norm=4.0, random_state=0).fit(Z)
            for Z in (frame, values)]
    np.testing.assert_allclose(fits[0].components_, fits[1].components_,
                               rtol=1e-12, atol=1e-14)
    assert list(fits[0].feature_names_in_) == ["x", "y", "z"]
    np.testing.assert_allclose(fits[0].transform(frame), fits[1].transform(values),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", EXTENSION_DTYPES)
def test_missing_values_in_extension_columns_are_nan(dtype):
    frame, _ = typed_frame(dtype, missing=True)
    acc = BudgetAccountant()
    with pytest.raises(ValueError, match="Input X contains NaN"):
        PrivatePCA(2, data_norm=4.0, accountant=acc).fit(frame)
    assert acc.n_charges == 0


@pytest.mark.parametrize("dtype", NON_NUMERIC_DTYPES)
@pytest.mark.parametrize("name", FACTORIES)
def test_text_and_category_columns_are_named(name, dtype):
    frame, _ = typed_frame(dtype)
    acc = BudgetAccountant()
    with pytest.raises(ValueError, match=r"1 non-numeric column\(s\): 'z' \(") as info:
        FACTORIES[name](n_components=2, data_norm=4.0, accountant=acc).fit(frame)
    assert "'a'" not in str(info.value)  # names columns, never values
    assert acc.n_charges == 0
    fitted = PrivatePCA(2, data_norm=4.0).fit(frame.assign(z=1.0))
    with pytest.raises(ValueError, match="non-numeric column.*'z'"):
        fitted.transform(frame)


def test_object_columns_of_numbers_are_numbers():
    frame, values = typed_frame("Float64")
    frame["z"] = frame["z"].astype(object)
    pca = PrivatePCA(2, data_norm=4.0, random_state=0).fit(frame)
    expected = PrivatePCA(2, data_norm=4.0, random_state=0).fit(values)
    np.testing.assert_allclose(pca.components_, expected.components_, atol=1e-12)
    frame["z"] = ["x"] + [1.0] * (len(frame) - 1)
    with pytest.raises(ValueError, match="'z' \\(object\\)"):
        PrivatePCA(2, data_norm=4.0).fit(frame)


def test_no_fitted_model_carries_a_generator_without_a_seed():
    """With random_state=None nothing fitted keeps a generator: its state
    after the draws would tell the noise drawn (and so the exact statistics)
    to whoever holds the pickled model, and every copy of it would draw the
    same noise again (docs/security.rst)."""
    from sklearn.pipeline import Pipeline, make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    from sklearn_dppca import CoherentPowerPCA, ComplexGaussPCA
    from sklearn_dppca.linear_model import PrivateLDA, PrivateRidge
    from sklearn_dppca.model_selection import PrivateGridSearchCV
    from sklearn_dppca.preprocessing import PrivateStandardScaler

    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 600)
    X = rng.uniform(-1, 1, size=(600, 5)) + y[:, None] * [0.5, 0, 0, 0, 0]

    def acc():
        return BudgetAccountant(epsilon=1e6, delta=0.5)

    fitted = [
        PrivatePCA(2, data_norm=2.0, accountant=acc()).fit(X),
        PrivatePCA(2, data_norm="auto", accountant=acc()).fit(X),
        PrivatePCA(2, data_norm=2.0, path="matrix_free", svd_solver="randomized",
                   n_oversamples=1, accountant=acc()).fit(X),
        CoherentPowerPCA(2, data_norm=2.0, accountant=acc()).fit(X),
        ComplexGaussPCA(2, data_norm=2.0, accountant=acc()).fit(X),
        PrivateLDA([0, 1], data_norm=2.0, accountant=acc()).fit(X, y),
        PrivateRidge((-3, 3), data_norm=2.0, accountant=acc()).fit(X, X[:, 0]),
        PrivateStandardScaler((-2, 2), accountant=acc()).fit(X),
        PrivateStandardScaler((-2, 2), accountant=acc()).partial_fit(X),
        PrivateGridSearchCV(
            Pipeline([("p", PrivatePCA(data_norm=2.0)), ("f", FunctionTransformer())]),
            {"p__n_components": [1, 2]}, epsilon=2, cv=3, accountant=acc()).fit(X),
        PrivateGridSearchCV(
            make_pipeline(PrivatePCA(2, data_norm=2.0),
                          PrivateLDA([0, 1], data_norm=2.0)),
            {"privatepca__n_components": [1, 2]}, epsilon=3, cv=3,
            accountant=acc()).fit(X, y),
    ]
    for model in fitted:
        assert generators_in_pickle(model) == [], type(model).__name__


def test_an_integer_beyond_floats_is_an_infinite_value():
    """A Python integer too large for a float (pandas holds one in an object
    column) is the infinite value it rounds to: refused before the charge
    where inf is, mapped where inf is (non_finite="clip"), never a failure
    of its own that would tell it from its neighbour's finite value."""
    X = np.random.default_rng(0).normal(size=(300, 4)) * 0.3
    outcomes = {}
    for value in (10**400, math.inf, -(10**400), -math.inf):
        rows = X.astype(object)
        rows[0, 1] = value
        for make in (np.asarray, lambda r: pd.DataFrame(r), lambda r: r.tolist()):
            for non_finite in ("raise", "clip"):
                accountant = BudgetAccountant()
                est = PrivatePCA(2, data_norm=1.0, non_finite=non_finite,
                                 random_state=0, accountant=accountant)
                try:
                    got = est.fit(make(rows)).components_
                except ValueError as exc:
                    got = str(exc)
                    assert accountant.n_charges == 0
                outcomes.setdefault((value > 0, non_finite), []).append(got)
    for results in outcomes.values():
        for got in results[1:]:
            if isinstance(got, str):
                assert got == results[0]
            else:
                np.testing.assert_array_equal(got, results[0])
    assert isinstance(outcomes[(True, "raise")][0], str)
    assert not isinstance(outcomes[(True, "clip")][0], str)
    # a regression label too: refused before the charge as an infinite one
    from sklearn_dppca.linear_model import PrivateRidge

    messages = []
    for label in (10**400, math.inf):
        y = (X[:, 0] * 0.1).astype(object)
        y[0] = label
        accountant = BudgetAccountant()
        with pytest.raises(ValueError) as refused:
            PrivateRidge((-1, 1), data_norm=1.0, accountant=accountant).fit(X, y)
        messages.append(str(refused.value))
        assert accountant.n_charges == 0
    assert messages[0] == messages[1]


BEYOND = 10**400  # a Python integer no float holds


@pytest.mark.parametrize("make, name", [
    (lambda: PrivatePCA(2, data_norm=5.0, epsilon=BEYOND), "epsilon"),
    (lambda: PrivatePCA(2, data_norm=BEYOND), "data_norm"),
    (lambda: CoherentPowerPCA(2, bounds=(-BEYOND, BEYOND)), "bounds"),
    (lambda: ComplexGaussPCA(2, bounds={"x0": (0, BEYOND)}), "bounds"),
])
def test_a_parameter_beyond_a_float_is_refused_by_name(make, name):
    """10**400 passes scikit-learn's constraints (it is a Real); float() of it
    raised OverflowError deep in the fit. It is refused by name instead, as
    the scalers', heads' and search's are (tests/test_linear_model.py)."""
    from sklearn.utils._param_validation import InvalidParameterError

    X = np.random.default_rng(0).normal(size=(40, 3))
    accountant = BudgetAccountant()
    with pytest.raises(InvalidParameterError, match=f"'{name}' parameter .* beyond"):
        make().set_params(accountant=accountant).fit(X)
    assert accountant.n_charges == 0
    for call in (lambda: BudgetAccountant(epsilon=BEYOND),
                 lambda: BudgetAccountant().spend(BEYOND, 0.0)):
        with pytest.raises(ValueError, match="beyond float64's range"):
            call()


@pytest.mark.parametrize("factory", ["private", "complex", "coherent-fixed"])
def test_post_fit_methods_read_an_integer_beyond_a_float_as_fit_does(factory):
    """fit reads it as infinite (refused, or mapped with non_finite='clip');
    transform and score did not, and raised OverflowError."""
    rows = np.full((60, 4), BEYOND, dtype=object)
    rows[:, 1:] = np.random.default_rng(1).normal(size=(60, 3))
    clipped = FACTORIES[factory](n_components=2, non_finite="clip",
                                 data_norm=3.0).fit(rows)
    infinite = np.where(rows == BEYOND, np.inf, rows).astype(float)
    np.testing.assert_array_equal(clipped.transform(rows), clipped.transform(infinite))
    assert clipped.score(rows) == clipped.score(infinite)
    strict = FACTORIES[factory](n_components=2, data_norm=3.0).fit(
        rows[:, 1:].astype(float) @ np.ones((3, 4)))
    for method in (strict.transform, strict.score):
        with pytest.raises(ValueError, match="infinity"):
            method(rows)


def _entry_points():
    """Every estimator a user fits on a table, with settings that fit it."""
    from sklearn.pipeline import make_pipeline

    from sklearn_dppca.linear_model import PrivateLDA, PrivateRidge
    from sklearn_dppca.model_selection import PrivateGridSearchCV
    from sklearn_dppca.preprocessing import PrivateStandardScaler, PublicScaler

    head = make_pipeline(PrivatePCA(2, data_norm=5.0),
                         PrivateLDA(classes=[0, 1], data_norm=1.0))
    return {
        "PrivatePCA": PrivatePCA(1, data_norm=5.0),
        "PublicScaler": PublicScaler(ranges=(-5, 5)),
        "PrivateStandardScaler": PrivateStandardScaler(bounds=(-5, 5)),
        "PrivateLDA": PrivateLDA(classes=[0, 1], data_norm=5.0),
        "PrivateRidge": PrivateRidge(y_bounds=(-3, 3), data_norm=5.0),
        "PrivateGridSearchCV": PrivateGridSearchCV(
            head, {"privatepca__n_components": [1, 2]}, cv=3),
    }


@pytest.mark.parametrize("name", list(_entry_points()))
@pytest.mark.parametrize("dtype", ["category", "str", "datetime"])
def test_every_estimator_names_its_non_numeric_columns(name, dtype):
    """As the PCA estimators do, before the charge; the scalers and heads
    had given NumPy's conversion error, or converted numeric strings."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(60, 3)), columns=["a", "b", "c"])
    frame["c"] = {"category": pd.Categorical(["x", "y"] * 30),
                  "str": frame["c"].astype(str),
                  "datetime": pd.date_range("2020", periods=60)}[dtype]
    y = (frame["a"] > 0).astype(int)
    estimator = _entry_points()[name]
    with pytest.raises(ValueError, match=r"1 non-numeric column\(s\): 'c' \("):
        estimator.set_params(**{key: BudgetAccountant() for key in
                                estimator.get_params(deep=False)
                                if key == "accountant"})
        estimator.fit(frame, y)


@pytest.mark.parametrize("name", list(_entry_points()))
def test_every_estimator_refuses_a_parameter_beyond_a_float(name):
    from sklearn.utils._param_validation import InvalidParameterError

    estimator = _entry_points()[name]
    X = np.random.default_rng(0).normal(size=(60, 3))
    with pytest.raises(InvalidParameterError, match="beyond float64's range"):
        key = "epsilon" if "epsilon" in estimator.get_params() else "ranges"
        value = BEYOND if key == "epsilon" else (-BEYOND, BEYOND)
        estimator.set_params(**{key: value}).fit(X, (X[:, 0] > 0).astype(int))


def test_the_search_reads_pandas_missing_values_as_missing():
    """pd.NA in a nullable column: the search and cross-validation refuse it
    as the estimators do (they raised a TypeError converting it), and a
    NaN label is named as fit names it."""
    from sklearn_dppca.model_selection import private_cross_validate

    X = pd.DataFrame(np.arange(120).reshape(60, 2) % 7, columns=["a", "b"])
    y = np.arange(60) % 2
    for dtype in ("Int64", "Float64"):
        frame = X.astype(dtype)
        frame.iloc[0, 0] = pd.NA
        with pytest.raises(ValueError, match="Input X contains NaN"):
            private_cross_validate(PrivatePCA(1, data_norm=10.0), frame, cv=3,
                                   accountant=BudgetAccountant())
    # pd.NA in an object column: with non_finite="clip" it is mapped, in
    # the fold scores too (they raised a TypeError after the charge)
    frame = X.astype(float).astype(object)
    frame.iloc[0, 1] = pd.NA
    private_cross_validate(PrivatePCA(1, data_norm=10.0, non_finite="clip"), frame,
                           cv=3, accountant=BudgetAccountant())
    search = _entry_points()["PrivateGridSearchCV"]
    labels = y.astype(float)
    labels[0] = np.nan
    with pytest.raises(ValueError, match="Input y contains NaN"):
        search.set_params(accountant=BudgetAccountant()).fit(X.astype(float), labels)


@pytest.mark.parametrize("cell", [
    np.longdouble("1e400") if np.finfo(np.longdouble).max > 1e400 else 1e400,
    pd.NA, None, Decimal("0.25"), Fraction(1, 4), True, np.float32(0.25), BEYOND])
@pytest.mark.parametrize("container", ["object frame", "object array", "list"])
def test_every_real_cell_is_read_as_a_number_silently(cell, container):
    """One row's cell of any real-number type, a missing marker, or a value
    beyond float64 (a long double, a Python integer): the fit with
    non_finite="clip" runs, under NumPy's strictest settings, showing only
    what its neighbour's fit shows. A long double's cast warned before the
    private computation, pd.NA raised a TypeError, and a Decimal, Fraction
    or bool made its column 'non-numeric': each told the row from a float."""
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(50, 3)).astype(object)
    neighbour = rows.copy()
    neighbour[0, 1] = cell
    wrap = {"object frame": lambda a: pd.DataFrame(a, columns=["a", "b", "c"]),
            "object array": lambda a: a, "list": lambda a: a.tolist()}[container]
    shown = []
    for data in (rows, neighbour):
        with warnings.catch_warnings(record=True) as caught, np.errstate(all="raise"):
            warnings.simplefilter("always")
            PrivatePCA(2, data_norm=1.0, non_finite="clip",
                       accountant=BudgetAccountant()).fit(wrap(data))
        shown.append(sorted({w.category.__name__ for w in caught}
                            - {"PrivacyLeakWarning", "NoisyReleaseWarning"}))
    assert shown[0] == shown[1] == []


def test_an_object_column_of_numbers_is_read_once(monkeypatch):
    """A column of numbers stored as objects is mapped cell by cell once
    (it becomes float64), not once to judge it numeric and again to read it."""
    from sklearn_dppca import _dask

    calls = []
    as_number = _dask._as_number
    monkeypatch.setattr(_dask, "_as_number",
                        lambda v: calls.append(v) or as_number(v))
    frame = pd.DataFrame({"a": np.arange(40.0), "b": [Decimal(i) for i in range(40)]})
    PrivatePCA(1, data_norm=50.0, accountant=BudgetAccountant()).fit(frame)
    assert len(calls) == 40


def test_a_long_double_array_beyond_a_float_is_infinite():
    X = np.random.default_rng(1).normal(size=(40, 3)).astype(np.longdouble)
    X[0, 0] = np.finfo(np.longdouble).max
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ValueError, match="infinity"):
            PrivatePCA(2, data_norm=1.0, accountant=BudgetAccountant()).fit(X)
        for frame in (X, pd.DataFrame(X)):
            PrivatePCA(2, data_norm=1.0, non_finite="clip",
                       accountant=BudgetAccountant()).fit(frame)


@pytest.mark.parametrize("Estimator", [PrivatePCA, CoherentPowerPCA])
def test_an_interrupt_after_the_charge_leaves_a_new_estimator_new(Estimator):
    """Interrupted after its charge, a fit on an estimator never fitted left
    its plan's private attributes (``_fit_path``, ``_fit_svd_solver``,
    ``_fit_start``) behind: every attribute is now put back."""
    acc = BudgetAccountant()
    est = Estimator(2, data_norm=5.0, accountant=acc)
    before = dict(vars(est))
    X = np.random.default_rng(0).normal(size=(300, 6))
    with pytest.raises(KeyboardInterrupt), interrupted_at("release_bounds", "_fit"):
        est.fit(X)
    assert acc.n_charges == 1 and vars(est) == before


def _stored_thrice(X):
    """``X`` (CSR) with its first stored entry stored as three duplicates
    that SciPy sums to it: ``1e20``, ``-1e20`` and the entry."""
    X = X.tocsr().astype(np.float64)
    row = int(np.flatnonzero(np.diff(X.indptr))[0])
    lo = X.indptr[row]
    data = np.r_[X.data[:lo], 1e20, -1e20, X.data[lo:]]
    cell = X.indices[lo]
    indices = np.r_[X.indices[:lo], cell, cell, X.indices[lo:]]
    indptr = X.indptr.copy()
    indptr[row + 1:] += 2
    out = sparse.csr_matrix((data, indices, indptr), shape=X.shape)
    assert not out.has_canonical_format
    np.testing.assert_array_equal(out.toarray(), X.toarray())
    return out


@pytest.mark.parametrize("name", ["private", "complex", "coherent-fixed"])
@pytest.mark.parametrize("kind", ["dense-path", "wide", "csc", "auto", "bounds"])
def test_duplicate_sparse_entries_are_read_as_their_sum(name, kind):
    """A cell stored several times is, as SciPy reads it, their sum; read
    entry by entry, a row of norm 0.3 added its duplicates' products to the
    Gram matrix (1e40 where 0.09 was due) and each to a box's sums, far
    beyond the sensitivity. Every reader now sees the summed cell: the same
    release as the canonical matrix, under one seed, and the caller's
    matrix untouched."""
    wide = kind == "wide"
    X = sparse.random(300, 400 if wide else 30, density=0.1, format="csr",
                      random_state=1) * 0.1
    odd = _stored_thrice(X)
    if kind == "csc":
        X, odd = X.tocsc(), odd.tocsc()  # tocsc keeps the duplicates
        assert not odd.has_canonical_format
    before = (odd.data.copy(), odd.indices.copy(), odd.indptr.copy())
    params = {"data_norm": 1.0, "random_state": 0}
    if kind == "auto":
        params.update(data_norm="auto", epsilon=3.0)
    if kind == "bounds":
        params.update(bounds=(-0.05, 0.05), data_norm=1.0)
    if wide and name != "coherent-fixed":
        params.update(svd_solver="randomized", path="matrix_free")
    elif wide:
        params.update(path="noisy_power")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fits = [FACTORIES[name](n_components=2, **params).fit(Z) for Z in (X, odd)]
        except TypeError:  # an estimator without bounds
            pytest.skip("no bounds parameter")
    np.testing.assert_allclose(fits[1].components_, fits[0].components_,
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(fits[1].explained_variance_, fits[0].explained_variance_,
                               rtol=1e-9)
    for saved, now in zip(before, (odd.data, odd.indices, odd.indptr)):
        np.testing.assert_array_equal(saved, now)


def test_duplicates_whose_sum_overflows_are_an_infinite_cell():
    """Two stored 1e308 in one cell are an infinite entry: refused before the
    charge as one is (it was charged, then released NaN), mapped with
    ``non_finite="clip"``; and a Dask array of such CSR chunks alike."""
    import dask.array as da

    X = sparse.random(200, 20, density=0.2, format="csr", random_state=0)
    data = np.r_[1e308, 1e308, X.data[X.indptr[0]:]]
    odd = sparse.csr_matrix(
        (data, np.r_[0, 0, X.indices[X.indptr[0]:]], np.r_[0, X.indptr[1:] + 2]),
        shape=X.shape)
    lazy = da.from_array(odd, chunks=(100, 20), asarray=False)
    for rows in (odd, lazy):
        budget = BudgetAccountant()
        with pytest.raises(ValueError, match="infinity"):
            PrivatePCA(2, data_norm=1.0, accountant=budget).fit(rows)
        assert budget.n_charges == 0
        pca = PrivatePCA(2, data_norm=1.0, non_finite="clip", random_state=0,
                         accountant=budget).fit(rows)
        assert np.isfinite(pca.components_).all() and budget.n_charges == 1


def test_the_scaler_and_the_box_read_duplicates_as_their_sum():
    """PrivateStandardScaler's per-feature sums and a PublicScaler's map read
    a cell stored as duplicates once, as their sum (each duplicate was
    clipped to the box and counted as a row's value)."""
    from sklearn_dppca.preprocessing import PrivateStandardScaler, PublicScaler

    X = sparse.random(400, 5, density=0.3, format="csr", random_state=2)
    odd = _stored_thrice(X)
    fits = [PrivateStandardScaler(bounds=(0.0, 1.0), with_mean=False, random_state=0,
                                  epsilon=1.0).fit(Z) for Z in (X, odd)]
    np.testing.assert_allclose(fits[1].scale_, fits[0].scale_, rtol=1e-12)
    public = PublicScaler((0.0, 0.5), clip=True)
    np.testing.assert_allclose(public.fit_transform(odd).toarray(),
                               public.fit_transform(X).toarray())


@pytest.mark.parametrize("X", [
    np.array([["9876.54321", "1"], ["2", "3"], ["4", "5"]], dtype=object),
    np.array([["9876.54321x", "1"], ["2", "3"], ["4", "5"]]),
    np.array([[9876.54321 + 1j, 3], [4, 5], [6, 7]]),
    sparse.csr_matrix(np.array([[9876.54321 + 1j, 3], [4, 5], [6, 7]])),
    np.array([9876.54321, 2.0, 3.0]),
    np.array(9876.54321),
    pd.DataFrame({"a": [9876.54321, 2.0, 3.0], "b": [1j, 2, 3]}),
    pd.DataFrame({"a": [9876.54321, 2.0, 3.0],
                  "b": np.array([1j, 2.0, 3.0], dtype=object)}),
    np.array([[np.complex128(9876.54321 + 1j), 3.0], [4.0, 5.0], [6.0, 7.0]],
             dtype=object),
    np.array([[9876.54321 + 1j, 3.0], [4.0, 5.0], [6.0, 7.0]], dtype=object),
], ids=["object-text", "unicode-text", "complex", "sparse-complex", "1d", "0d",
        "frame-complex", "frame-object-complex", "object-numpy-complex",
        "object-complex"])
def test_a_refusal_of_the_input_never_quotes_a_value(X):
    # scikit-learn's message prints a 1-D, scalar or complex array and
    # NumPy's the text cell it cannot read: a person's value in a traceback
    # or a log (review 43)
    from sklearn_dppca.linear_model import PrivateLDA
    from sklearn_dppca.model_selection import PrivateGridSearchCV
    from sklearn_dppca.preprocessing import PrivateStandardScaler

    kind = getattr(getattr(X, "dtype", None), "kind", "")
    if kind == "O" and isinstance(X[0, 0], str):
        # a numeric text cell is read as a number, a word is not
        X = X.copy()
        X[0, 0] = "9876.54321 secret"
    fits = [PrivatePCA(1, data_norm=1.0).fit,
            PrivateStandardScaler(bounds=(0, 1)).fit,
            lambda X: PrivateLDA([0, 1], data_norm=1.0).fit(X, [0, 1, 0]),
            lambda X: PrivateGridSearchCV(PrivatePCA(data_norm=1.0),
                                          {"n_components": [1]}, cv=3).fit(X)]
    fitted = PrivatePCA(1, data_norm=1.0).fit(np.eye(3))
    fits.append(fitted.inverse_transform)  # scores are rows of people too
    for fit in fits:
        with pytest.raises(ValueError) as caught:
            fit(X)
        assert "9876" not in str(caught.value), str(caught.value)
