"""Array API inputs: array_api_strict always, PyTorch on CPU where installed.

Under ``array_api_dispatch=True`` the statistics, the eigendecomposition and
``transform`` run in the input's namespace; the released values equal the
NumPy fit's with the same seed (the noise is drawn on the host).
"""

import math
import warnings
from fractions import Fraction
from functools import partial

import numpy as np
import pytest
from sklearn import config_context
from sklearn.base import clone
from sklearn.utils.estimator_checks import check_array_api_input

from sklearn_dppca import (
    BudgetAccountant,
    CoherentPowerPCA,
    ComplexGaussPCA,
    PrivacyLeakWarning,
    PrivatePCA,
)
from sklearn_dppca._array_api import ArrayAPIRows, namespace, reduced_float32_products
from sklearn_dppca._rows import CentredRows
from sklearn_dppca._stats import row_sq_norms
from sklearn_dppca.audit import audit, neighbouring_datasets, scatter_statistic
from sklearn_dppca.noise import goe_noise, make_generator
from sklearn_dppca.preprocessing import PrivateStandardScaler, PublicScaler
from sklearn_dppca.privacy import gdp_mu

xps = pytest.importorskip("array_api_strict")

pytestmark = pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")

NAMESPACES = ["array_api_strict", "torch"]


@pytest.fixture(autouse=True)
def _scipy_array_api(monkeypatch):
    # scikit-learn refuses dispatch without it (for SciPy's sake); the Array
    # API path of this package calls no SciPy function.
    monkeypatch.setenv("SCIPY_ARRAY_API", "1")


def _module(name):
    if name == "torch":
        return pytest.importorskip("torch")
    return xps


def to_numpy(array):
    if isinstance(array, np.ndarray):
        return array
    if type(array).__module__.startswith("torch"):
        return array.cpu().numpy()
    return np.asarray(xps.asarray(array, device=xps.Device("CPU_DEVICE")))


def data(n=3000, d=6, seed=0):
    """Rows of norm up to 1, some beyond the bound 0.9 used below (clipped)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.linspace(3.0, 0.2, d) + 0.3
    return X / np.linalg.norm(X, axis=1).max()


ESTIMATORS = [
    PrivatePCA(2),
    PrivatePCA(2, center=False, whiten=True),
    ComplexGaussPCA(2),
    ComplexGaussPCA(3, target="subspace"),
    CoherentPowerPCA(2, clip_radius=0.5, n_iter=3),
    CoherentPowerPCA(2, n_iter_max=2, expected_trials=3),
    # truncated solvers: on the host, the NumPy fit's (review 43: the device
    # ran a full eigh, whose spectrum and arpack's count differed)
    PrivatePCA(2, svd_solver="randomized"),
    PrivatePCA(3, svd_solver="arpack"),
    ComplexGaussPCA(2, svd_solver="randomized"),
    ComplexGaussPCA(3, target="subspace", svd_solver="arpack"),
]
IDS = ["private", "private-whiten", "complex", "complex-subspace", "coherent",
       "coherent-auto", "private-randomized", "private-arpack",
       "complex-randomized", "complex-subspace-arpack"]
ARRAYS = ["components_", "explained_variance_", "explained_variance_ratio_",
          "singular_values_", "mean_"]


def same_seed(est):
    """A fresh copy of ``est`` with a fixed seed, bound and budget."""
    params = dict(est.get_params(), epsilon=2.0, data_norm=0.9, random_state=7)
    return type(est)(**params)


def fit_both(est, X, module):
    """The NumPy fit and the Array API fit of ``est``, same seed."""
    ref = same_seed(est).fit(X)
    with config_context(array_api_dispatch=True):
        other = same_seed(est).fit(module.asarray(X))
    return ref, other


@pytest.mark.parametrize("ns", NAMESPACES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_same_release_as_numpy(est, dtype, ns):
    """Same seed, same released values (to round-off), in X's namespace."""
    module = _module(ns)
    X = data().astype(dtype)
    ref, other = fit_both(est, X, module)
    tol = 1e-10 if dtype == "float64" else 2e-4
    names = ARRAYS + [n for n in ("init_components_", "covariance_approximation_")
                      if hasattr(ref, n)]
    for name in names:
        value = getattr(other, name)
        assert type(value).__module__.split(".")[0] == module.__name__, name
        assert str(value.dtype).endswith(dtype), name
        scale = max(np.abs(getattr(ref, name)).max(), 1e-12)
        np.testing.assert_allclose(to_numpy(value), getattr(ref, name),
                                   atol=tol * scale, err_msg=name)
    assert other.n_components_ == ref.n_components_
    assert other.noise_variance_ == pytest.approx(ref.noise_variance_, rel=1e-3)
    for name in ("n_iter_", "branch_", "clip_radius_"):
        assert getattr(other, name, None) == getattr(ref, name, None)
    if getattr(ref, "n_clipped_", None) is not None:
        # float32 may flip a row at the radius
        slack = 0 if dtype == "float64" else 3
        assert abs(other.n_clipped_ - ref.n_clipped_) <= slack

    Z = X[:50]
    with config_context(array_api_dispatch=True):
        Zx = module.asarray(Z)
        T = other.transform(Zx)
        back = other.inverse_transform(T)
        fit_t = same_seed(est).fit_transform(module.asarray(X))
        score = other.score(Zx)
        cov = other.get_covariance()
        precision = other.get_precision()
    for got, want in [
        (T, ref.transform(Z)),
        (back, ref.inverse_transform(ref.transform(Z))),
        (fit_t[:50, ...], ref.transform(Z)),
        (cov, ref.get_covariance()),
        (precision, ref.get_precision()),
    ]:
        assert type(got).__module__.split(".")[0] == module.__name__
        np.testing.assert_allclose(to_numpy(got), want, rtol=tol * 10,
                                   atol=tol * 10 * np.abs(want).max())
    assert isinstance(score, float)
    assert score == pytest.approx(ref.score(Z), rel=tol * 100)


@pytest.mark.parametrize(
    "est", [PrivatePCA(), ComplexGaussPCA(), CoherentPowerPCA(),
            PublicScaler((0, 1)), PublicScaler(center=0.5, scale=2.0, copy=False),
            PrivateStandardScaler((-10, 10))],
    ids=["private", "complex", "coherent", "public-scaler", "public-scaler-centre",
         "private-scaler"],
)
@pytest.mark.parametrize(
    "ns, device, dtype",
    [("array_api_strict", "CPU_DEVICE", "float64"),
     ("array_api_strict", "device1", "float32"),
     ("torch", "cpu", "float64"),
     ("torch", "cpu", "float32")],
)
def test_sklearn_array_api_check(est, ns, device, dtype):
    """scikit-learn's own check: namespaces, devices, dtypes and shapes.

    (Its values option compares ``score`` to 1000 ulp absolute, which the
    check's 30-row data, with released variances of 0 floored at machine
    precision, turns into a log-likelihood of −2e15: the values are compared
    by the tests above, at round-off tolerances.)
    """
    _module(ns)
    check_array_api_input(type(est).__name__, est, array_namespace=ns,
                          device_name=device, dtype_name=dtype)


@pytest.mark.parametrize("ns", NAMESPACES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("whiten", [False, True, "partial"])
def test_model_in_the_fits_namespace_and_dtype(whiten, dtype, ns):
    """get_covariance, get_precision and score_samples return arrays of the
    fit's namespace in its dtype (float32 in, float32 out), as scikit-learn's
    check_array_api_get_precision requires, with the NumPy fit's values."""
    module = _module(ns)
    X = data(500, 4).astype(dtype)
    est = PrivatePCA(2, whiten=whiten, epsilon=math.inf, data_norm=1.0)
    ref = clone(est).fit(X)
    with config_context(array_api_dispatch=True):
        Xx = module.asarray(X)
        other = clone(est).fit(Xx)
        results = [(other.get_covariance(), ref.get_covariance()),
                   (other.get_precision(), ref.get_precision()),
                   (other.score_samples(Xx), ref.score_samples(X)),
                   (other.transform(Xx), ref.transform(X))]
        score = other.score(Xx)
    tol = 1e-10 if dtype == "float64" else 1e-4
    for got, want in results:
        assert type(got).__module__.split(".")[0] == module.__name__
        assert str(got.dtype).endswith(dtype)
        assert want.dtype == np.dtype(dtype)
        np.testing.assert_allclose(to_numpy(got), want, rtol=tol,
                                   atol=tol * np.abs(want).max())
    assert score == pytest.approx(ref.score(X), rel=tol)


def test_sklearn_same_namespace_check():
    checks = pytest.importorskip("sklearn.utils.estimator_checks")
    if not hasattr(checks, "check_array_api_same_namespace"):  # scikit-learn < 1.9
        pytest.skip("scikit-learn has no check_array_api_same_namespace")
    check = partial(checks.check_array_api_same_namespace,
                    array_namespace="array_api_strict")
    check("PrivatePCA", PrivatePCA(random_state=0))


def test_without_dispatch_nothing_changes():
    """NumPy input under dispatch: the NumPy engine, bit for bit."""
    X = data(500, 4)
    a = PrivatePCA(2, data_norm=0.9, random_state=3).fit(X)
    with config_context(array_api_dispatch=True):
        assert namespace(X) is None
        b = PrivatePCA(2, data_norm=0.9, random_state=3).fit(X)
    assert namespace(xps.asarray(X)) is None  # no dispatch: not the Array API path
    for name in ARRAYS:
        assert isinstance(getattr(b, name), np.ndarray)
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def test_noise_is_the_hosts_and_calibrated():
    """The released scatter matrix minus the exact one is the host's GOE draw
    with σ = √2 C² / μ_cov, from the fit's one generator."""
    X = data(4000, 4)
    C, eps = 0.9, 50.0  # data dominating the noise: no eigenvalue clamped
    with config_context(array_api_dispatch=True):
        est = PrivatePCA(epsilon=eps, data_norm=C, center=False,
                         random_state=11).fit(xps.asarray(X))
    components = to_numpy(est.components_)
    variance = to_numpy(est.noisy_variance_) * (len(X) - 1)
    released = (components.T * variance) @ components
    clipped = X * np.minimum(1.0, C / np.linalg.norm(X, axis=1))[:, None]
    mu = est._privacy_plan(*X.shape).mus["covariance"]
    expected = goe_noise(make_generator(11), 4, math.sqrt(2.0) * C**2 / mu)
    np.testing.assert_allclose(released - clipped.T @ clipped, expected,
                               atol=1e-9 * np.abs(expected).max())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_computed_clipped_rows_stay_in_the_ball(dtype):
    """Adversarial rows just beyond C (and huge ones): every clipped row *as
    computed* has true norm ≤ C, so a replaced row moves the computed sums by
    at most 2C and √2 C² (the margin of the computed norms)."""
    rng = np.random.default_rng(5)
    d, C = 300, 1.0
    rows = rng.normal(size=(400, d)) * rng.uniform(0.1, 10.0, size=(400, 1))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    rows *= (C * (1 + rng.uniform(-1e-6, 1e-6, size=400)))[:, None]
    rows[:10] *= 1e30 if dtype == "float32" else 1e200  # ‖x‖² overflows
    X = xps.asarray(rows.astype(dtype))
    with config_context(array_api_dispatch=True):
        engine = ArrayAPIRows(X, xps, X.device)
        centre = engine._device(np.full(d, 1e-3))
        (block,) = engine._blocks()  # in the precision the sums are computed in
        for mean in (None, centre):
            clipped = to_numpy(engine._clipped(block, C * engine.shrink, mean))
            norms = np.linalg.norm(clipped.astype(np.float64), axis=1)
            assert norms.max() <= C
            if mean is None:
                assert norms.min() >= C * 0.9999  # clipped, not zeroed
        # neighbours: row 0 replaced by an orthogonal one of norm C
        a = engine.gram(C, None)
        Y = to_numpy(X).copy()
        Y[0] = 0.0
        Y[0, 0] = C
        b = ArrayAPIRows(xps.asarray(Y), xps, X.device).gram(C, None)
    change = np.linalg.norm(to_numpy(a).astype(float) - to_numpy(b).astype(float))
    assert change <= math.sqrt(2.0) * C**2 + 1e-12  # summation round-off only


def test_float32_rows_are_summed_in_double_precision():
    """float32 blocks were summed in float32: over 2²² rows near one
    direction the sums' rounding steps were as large as one row, so that a
    replaced row moved the computed statistics beyond their sensitivity
    (review 58: 1.18 × 2C for the mean's sum at 10⁷ rows). They are now
    computed in the device's widest float, as the NumPy engine computes
    float32 rows, to double precision's round-off."""
    n, C = 2**22, 6.0
    rows = np.random.default_rng(0).uniform(2.0, 4.0, size=(n, 2)).astype(np.float32)
    X = xps.asarray(rows)
    exact = rows.astype(np.float64)
    exact *= np.minimum(1.0, C / np.linalg.norm(exact, axis=1))[:, None]
    with config_context(array_api_dispatch=True):
        engine = ArrayAPIRows(X, xps, X.device)
        total = engine.first_pass(C, with_sum=True)
        gram = to_numpy(engine.gram(C, None))
    assert np.abs(total - exact.sum(axis=0)).max() < 1e-6 * C
    assert np.abs(gram - exact.T @ exact).max() < 1e-6 * C**2


@pytest.mark.parametrize("dtype, huge, C", [("float32", 3e38, 6.7e-7),
                                             ("float64", 1e308, 7.9e-16),
                                             ("float64", 1e200, 1e-3)])
def test_a_huge_row_with_a_small_bound_stays_in_the_ball(dtype, huge, C):
    """An outside review: a row whose squared norm overflows is scaled by
    C / max|x|, subnormal for a small C, whose roundings erred far beyond
    the margin (the scaled row's true norm was 1.25 C in both dtypes, and
    two neighbours' Gram matrices moved by 1.86 C² for a stated √2 C²)."""
    rows = np.zeros((3, 2))
    rows[0] = [huge, huge / 3]
    rows[1] = [0.5 * C, 0.0]
    rows[2] = [0.0, 2.0 * C]
    X = xps.asarray(rows.astype(dtype))
    with config_context(array_api_dispatch=True):
        engine = ArrayAPIRows(X, xps, X.device)
        (block,) = engine._blocks()  # in the precision the sums are computed in
        clipped = to_numpy(engine._clipped(block, C * engine.shrink, None))
    exact = [math.sqrt(sum(Fraction(float(v)) ** 2 for v in row)) for row in clipped]
    assert max(exact) <= C


def test_a_tiny_row_beside_a_huge_one_is_not_nan():
    """The rescaled norms' ratio C / max|x| overflowed for a tiny row in a
    block where another row's norm overflowed: inf / inf made its scale
    NaN, and the fit failed, after its charge, on that neighbour only."""
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(50, 3))
    rows[0] = [1e-310, 0.0, 0.0]
    neighbour = rows.copy()
    neighbour[1] = 1e200
    for D in (rows, neighbour):
        X = xps.asarray(D)
        with config_context(array_api_dispatch=True):
            engine = ArrayAPIRows(X, xps, X.device)
            scales = to_numpy(engine._scales(X, 1.0))
            est = PrivatePCA(2, data_norm=1.0, accountant=BudgetAccountant()).fit(X)
        assert np.isfinite(scales).all() and scales[0] == 1.0
        assert np.isfinite(to_numpy(est.components_)).all()


def test_far_rows_stay_on_their_device_and_complex_is_refused():
    """A private mean far from the origin moves the rows to it: on the
    device, in their namespace (they became a NumPy engine, which failed on
    another device after the charge). A complex array is refused before the
    charge (scikit-learn's check reads a NumPy dtype's kind and cast it to
    its real part)."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(4, 3)) * 0.01 + 100.0
    device = xps.Device("device1")
    with config_context(array_api_dispatch=True):
        est = PrivatePCA(2, epsilon=0.05, data_norm=1.0, accountant=BudgetAccountant())
        est.fit(xps.asarray(X, device=device))
        assert est.components_.device == device
        acc = BudgetAccountant()
        with pytest.raises(ValueError, match="Complex data not supported"):
            PrivatePCA(2, data_norm=1.0, accountant=acc).fit(
                xps.asarray(X.astype(np.complex128)))
        assert acc.n_charges == 0
        # the fitted model's methods: scikit-learn's message printed the rows
        rows = xps.asarray((X + 1j).astype(np.complex128), device=device)
        for method in (est.transform, est.score_samples, est.inverse_transform):
            with pytest.raises(ValueError, match="Complex data") as caught:
                method(rows if method is not est.inverse_transform else rows[:, :2])
            assert "100." not in str(caught.value)


def test_float32_products_with_a_tiny_radius_are_finite_and_bounded():
    """clip_radius=1e-50 (allowed: it is above 1e-100) rounded to 0 in
    float32, and a zero product then became 0/0: the fit failed on the
    neighbour holding a zero row only; radii in float32's subnormal range
    gave terms of 1.67 R. Such radii's products are computed in float64."""
    base = np.random.default_rng(0).standard_normal((200, 5)).astype(np.float32)
    base *= 0.1
    neighbour = base.copy()
    neighbour[-1] = 0.0
    for X in (base, neighbour):
        with config_context(array_api_dispatch=True):
            est = CoherentPowerPCA(2, epsilon=2.0, data_norm=1.0, clip_radius=1e-50,
                                   n_iter=2, center=False,
                                   accountant=BudgetAccountant()).fit(xps.asarray(X))
        assert np.isfinite(to_numpy(est.components_)).all()
    from sklearn_dppca._array_api import ArrayAPICentredRows

    with config_context(array_api_dispatch=True):
        X = xps.asarray(neighbour)
        rows = ArrayAPICentredRows(ArrayAPIRows(X, xps, X.device), 1.0, None)
        W = np.random.default_rng(1).normal(size=(5, 1, 2))
        for R in (8.4e-46, 1e-50, 1e-3):
            total = rows.clipped_products(W, [R])[0]
            assert np.isfinite(total).all()
            # at most R per row: n rows' terms, each of norm ≤ R
            assert np.linalg.norm(total) <= len(base) * R


def test_clipped_products_match_the_numpy_engine():
    X = data(2000, 5)
    rng = np.random.default_rng(2)
    W = rng.normal(size=(5, 3, 2))
    radii = np.array([0.05, 0.3, 10.0])
    mean = X.mean(axis=0)
    ref = CentredRows(X, 0.9, mean, row_sq_norms(X)).clipped_products(W, radii)
    with config_context(array_api_dispatch=True):
        rows = ArrayAPIRows(xps.asarray(X), xps, xps.Device("CPU_DEVICE"))
        got = rows.rows(0.9, mean).clipped_products(W, radii)
    np.testing.assert_allclose(got[0], ref[0], atol=1e-10)
    np.testing.assert_array_equal(got[1], ref[1])
    assert 0 < got[1][0] and got[1][2] == 0


def test_bad_data_is_refused_before_the_charge():
    X = data(300, 3)
    X[17, 1] = np.nan
    budget = BudgetAccountant(epsilon=10.0)
    with config_context(array_api_dispatch=True):
        with pytest.raises(ValueError, match="NaN"):
            PrivatePCA(data_norm=1.0, accountant=budget).fit(xps.asarray(X))
        X[17, 1] = np.inf
        with pytest.raises(ValueError, match="infinity"):
            PrivatePCA(data_norm=1.0, accountant=budget).fit(xps.asarray(X))
    assert budget.n_charges == 0


@pytest.mark.parametrize("est, refused", [
    (PrivatePCA(data_norm="auto", epsilon=10.0), "not supported for Array API"),
    (PrivatePCA(data_norm=1.0, bounds=(-1.0, 1.0)), "not supported for Array API"),
    (PrivatePCA(2, data_norm=1.0, svd_solver="randomized", n_oversamples=2,
                path="matrix_free"), "not available for Array API"),
    (PrivatePCA(2, data_norm=1.0, svd_solver="randomized", n_oversamples=2,
                path="noisy_power"), "not available for Array API"),
])
def test_host_only_options_are_refused_before_the_charge(est, refused):
    """What runs on NumPy, sparse and Dask input only (docs/array_api.rst,
    Limits) is refused by name on an Array API array, spending nothing."""
    budget = BudgetAccountant(epsilon=20.0)
    with config_context(array_api_dispatch=True):
        with pytest.raises(ValueError, match=refused):
            clone(est).set_params(accountant=budget).fit(xps.asarray(data(300, 8)))
    assert budget.n_charges == 0


@pytest.mark.parametrize("ns", NAMESPACES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_non_finite_clip_in_the_namespace(dtype, ns):
    """non_finite="clip" maps the values with the namespace's own functions
    (NaN → 0, ±inf → ±its dtype's largest value), on a copy: the same
    release as NumPy's fit on np.nan_to_num of the rows."""
    module = _module(ns)
    X = data(400, 4).astype(dtype)
    X[3, 1], X[9, 0], X[12] = np.nan, np.inf, -np.inf
    est = same_seed(PrivatePCA(2, non_finite="clip"))
    ref = same_seed(est).fit(np.nan_to_num(X))
    with config_context(array_api_dispatch=True), np.errstate(over="ignore"):
        Z = module.asarray(X)
        other = same_seed(est).fit(Z)
        projected = other.transform(Z)  # rows of ±max: beyond the dtype
    np.testing.assert_array_equal(to_numpy(Z), X)  # not modified
    tol = 1e-10 if dtype == "float64" else 2e-4
    for name in ARRAYS:
        scale = max(np.abs(getattr(ref, name)).max(), 1e-12)
        np.testing.assert_allclose(to_numpy(getattr(other, name)),
                                   getattr(ref, name), atol=tol * scale, err_msg=name)
    finite = np.isfinite(X).all(axis=1) | np.isnan(X).any(axis=1)  # not ±max
    with np.errstate(over="ignore"):
        expected = ref.transform(np.nan_to_num(X))
    np.testing.assert_allclose(to_numpy(projected)[finite], expected[finite],
                               atol=tol)


def test_data_norm_from_the_data_warns():
    X = data(300, 3)
    with config_context(array_api_dispatch=True):
        with pytest.warns(PrivacyLeakWarning, match="largest row norm"):
            est = PrivatePCA(random_state=0).fit(xps.asarray(X))
    assert est.data_norm_ == pytest.approx(np.linalg.norm(X, axis=1).max())


def test_audit_on_the_array_api_path():
    """The covariance release, audited once through array_api_strict."""
    X, Y = neighbouring_datasets(2000, 3, kind="orthogonal", scale=0.7)
    eps, delta, n_fits = 1.0, 1e-5, 300
    est = PrivatePCA(epsilon=eps, delta=delta, data_norm=1.0, center=False)

    def statistic(fit):
        assert type(fit.components_).__module__.startswith("array_api_strict")
        return scatter_statistic(fit)

    statistic.gaussian = True
    with config_context(array_api_dispatch=True), warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        result = audit(est, xps.asarray(X), xps.asarray(Y), statistic,
                       n_fits=n_fits, random_state=2)
    assert result.epsilon_lower <= eps
    expected = gdp_mu(eps, delta)
    assert abs(result.mu_estimate - expected) < 3 * math.sqrt(2.0 / n_fits)


def test_reduced_float32_products_widen_the_margin():
    """TF32/bfloat16 products round the clipped rows: the margin covers it
    where the sums are computed in float32 (a device without float64); on a
    device with float64, float32 rows are computed in float64, which those
    settings do not round."""
    torch = pytest.importorskip("torch")
    from sklearn.externals.array_api_compat import torch as xt

    X = torch.zeros((4, 100), dtype=torch.float32)
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        assert reduced_float32_products(xt, xt.float32)
        assert not reduced_float32_products(xt, xt.float64)
        assert ArrayAPIRows(X, xt, X.device).shrink > 1.0 - 1e-12
    finally:
        torch.set_float32_matmul_precision(before)
    assert not reduced_float32_products(xt, xt.float32)


def test_callers_array_unchanged_and_dask_unaffected():
    """The input is never modified; a Dask array under dispatch keeps its engine."""
    da = pytest.importorskip("dask.array")
    X = data(800, 4)
    Xs = xps.asarray(X)
    with config_context(array_api_dispatch=True):
        PrivatePCA(2, data_norm=0.5, random_state=1).fit(Xs)
        lazy = da.from_array(X, chunks=(200, 4))
        est = PrivatePCA(2, data_norm=0.5, random_state=1).fit(lazy)
        Z = est.transform(lazy)
    np.testing.assert_array_equal(to_numpy(Xs), X)
    ref = PrivatePCA(2, data_norm=0.5, random_state=1).fit(X)
    assert isinstance(est.components_, np.ndarray)
    np.testing.assert_allclose(est.components_, ref.components_, atol=1e-10)
    np.testing.assert_allclose(Z.compute(), ref.transform(X), atol=1e-10)


@pytest.mark.parametrize("est", [PrivatePCA, ComplexGaussPCA])
def test_arpack_keeps_scikit_learns_count_on_the_device(est):
    """n_components=None with ARPACK: min(n, d) - 1 components, as on NumPy
    (the device's full eigh had kept d)."""
    ref, other = fit_both(est(svd_solver="arpack"), data(), xps)
    assert other.n_components_ == ref.n_components_ == 5
    assert other.components_.shape == (5, 6)


@pytest.mark.parametrize(
    "est",
    [PrivatePCA(0, data_norm=0.9), PrivatePCA("mle", epsilon=1e9, data_norm=0.9),
     PrivatePCA(2, epsilon=math.inf), ComplexGaussPCA(2, epsilon=math.inf)],
    ids=["zero-components", "mle", "inf-no-norm", "complex-inf-no-norm"],
)
def test_drop_in_choices_match_numpy(est):
    """n_components=0 and 'mle', and the non-private epsilon=inf fit without a
    bound (no clipping at all), give the NumPy fit's release."""
    X = data()
    seeded = dict(est.get_params(), random_state=7)
    reference = type(est)(**seeded).fit(X)
    with config_context(array_api_dispatch=True):
        fitted = type(est)(**seeded).fit(xps.asarray(X))
    assert fitted.n_components_ == reference.n_components_
    for name in ("components_", "explained_variance_", "mean_"):
        np.testing.assert_allclose(
            to_numpy(getattr(fitted, name)), getattr(reference, name),
            rtol=1e-10, atol=1e-10,
        )


@pytest.mark.parametrize("name", NAMESPACES)
def test_private_grid_search_on_array_api_input(name):
    """PrivateGridSearchCV indexes the folds in X's namespace, scores on the
    host, and its refitted estimator transforms in the namespace; the
    release equals the NumPy search's with the same seed."""
    from sklearn_dppca.model_selection import PrivateGridSearchCV

    module = _module(name)
    X = data(n=900, d=5)
    Xx = module.asarray(X)
    search = PrivateGridSearchCV(PrivatePCA(data_norm=0.9), {"n_components": [1, 2]},
                                 cv=3, accountant=BudgetAccountant(), random_state=0)
    on_host = search.fit(X).cv_results_["released_test_score"]
    with config_context(array_api_dispatch=True):
        fitted = clone(search).fit(Xx)
        Z = fitted.transform(Xx)
    assert namespace_of(Z) == namespace_of(Xx)
    np.testing.assert_allclose(fitted.cv_results_["released_test_score"], on_host,
                               rtol=1e-6)


@pytest.mark.parametrize("ns", NAMESPACES)
def test_heads_fit_on_the_host_and_answer_in_the_namespace(ns):
    """A pipeline PublicScaler → PrivatePCA → PrivateLDA on the namespace's
    arrays: the PCA runs there, the head fits and predicts on the host (its
    model is k × k) and answers in X's namespace; its release and its
    predictions are the NumPy pipeline's with the same seeds, and a
    supervised search runs on such input."""
    from sklearn.pipeline import make_pipeline

    from sklearn_dppca.linear_model import PrivateLDA, PrivateRidge
    from sklearn_dppca.model_selection import PrivateGridSearchCV

    module = _module(ns)
    X = data(n=900, d=5)
    y = (X[:, 0] > X[:, 0].mean()).astype(int)

    def pipe():
        return make_pipeline(
            PublicScaler((-1, 1)),
            PrivatePCA(2, data_norm=1.0, whiten="partial", random_state=1),
            PrivateLDA([0, 1], data_norm=1.0, random_state=2))

    ref = pipe().fit(X, y)
    ridge = PrivateRidge((-1, 1), data_norm=1.0, random_state=3)
    ref_ridge = clone(ridge).fit(X, X[:, 0])
    with config_context(array_api_dispatch=True):
        Xx, yx = module.asarray(X), module.asarray(y)
        fitted = pipe().fit(Xx, yx)
        labels, proba = fitted.predict(Xx), fitted.predict_proba(Xx)
        assert namespace_of(labels) == namespace_of(proba) == namespace_of(Xx)
        np.testing.assert_array_equal(to_numpy(labels), ref.predict(X))
        np.testing.assert_allclose(to_numpy(proba), ref.predict_proba(X),
                                   rtol=1e-6, atol=1e-9)
        assert fitted.score(Xx, yx) == pytest.approx(ref.score(X, y))
        got = clone(ridge).fit(Xx, module.asarray(X[:, 0])).predict(Xx)
        np.testing.assert_allclose(to_numpy(got), ref_ridge.predict(X), rtol=1e-6)
        search = PrivateGridSearchCV(
            make_pipeline(PrivatePCA(data_norm=1.0), PrivateLDA([0, 1], data_norm=1.0)),
            {"privatepca__n_components": [1, 2]}, epsilon=3.0,
            accountant=BudgetAccountant()).fit(Xx, yx)
        assert namespace_of(search.predict(Xx)) == namespace_of(Xx)


def namespace_of(array):
    return type(array).__module__.partition(".")[0]


@pytest.mark.parametrize("ns", NAMESPACES)
def test_scalers_release_what_numpy_releases(ns):
    """Issue 32: a GPU pipeline broke at its first step. The scalers take the
    namespace's arrays, compute the box sums on its device, release the same
    values as a NumPy fit with the same seed, and transform there."""
    module = _module(ns)
    X = data() * 10.0
    steps = [PublicScaler((-10, 10)),
             PrivateStandardScaler((-10, 10), epsilon=2.0, random_state=7)]
    for step in steps:
        ref = clone(step).fit(X)
        with config_context(array_api_dispatch=True):
            other = clone(step).fit(module.asarray(X))
            Z = other.transform(module.asarray(X))
            back = other.inverse_transform(Z)
        for name in ("scale_", "mean_", "min_"):
            if getattr(ref, name, None) is not None:
                np.testing.assert_allclose(to_numpy(getattr(other, name)),
                                           getattr(ref, name), rtol=1e-12)
        np.testing.assert_allclose(to_numpy(Z), ref.transform(X), rtol=1e-10)
        np.testing.assert_allclose(to_numpy(back), X, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("ns", NAMESPACES)
@pytest.mark.parametrize("est", [PrivatePCA, ComplexGaussPCA])
def test_mle_choice_is_the_numpy_one_in_float32(est, ns):
    """Issue 32: on PyTorch float32, 'mle' kept one component more than
    NumPy. Two variances that are zero in exact arithmetic came out of the
    float32 eigensolver at 6e-8 of the largest; 'mle' now counts variances
    below the computing float's round-off as zero."""
    from sklearn.datasets import make_classification

    module = _module(ns)
    X = make_classification(random_state=42)[0].astype(np.float32)
    ref = est("mle", epsilon=math.inf, data_norm=10.0).fit(X)
    with config_context(array_api_dispatch=True):
        other = est("mle", epsilon=math.inf, data_norm=10.0).fit(module.asarray(X))
    assert other.n_components_ == ref.n_components_ == 18


def test_searches_on_array_api_input_are_the_numpy_searches():
    """An outside review: the refit's pooled release (the fold fits' kept
    releases) was made on the host only, so a search on an Array API array
    refitted with its own share's noise alone (and a supervised refit spent
    half the head's share on the PCA again); a complex array was charged
    and cast to its real part; a head's outputs on integer rows were cast to
    integers. Each is now the NumPy search's."""
    from sklearn.pipeline import Pipeline

    from sklearn_dppca.linear_model import PrivateLDA
    from sklearn_dppca.model_selection import PrivateGridSearchCV

    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 5)) * [2.0, 1.0, 0.5, 0.3, 0.2]
    y = (X[:, 0] + 0.3 * rng.normal(size=600) > 0).astype(int)
    pipe = Pipeline([("s", PublicScaler((-3.0, 3.0))),
                     ("pca", PrivatePCA(data_norm=2.0, whiten="partial")),
                     ("lda", PrivateLDA(classes=[0, 1], data_norm=1.0))])
    searches = {
        "pca": (PrivateGridSearchCV(PrivatePCA(data_norm=2.0),
                                    {"n_components": [1, 2, 3]}, epsilon=3.0,
                                    cv=3, random_state=0), False),
        "pipeline": (PrivateGridSearchCV(pipe, {"pca__n_components": [1, 2, 3]},
                                         epsilon=3.0, cv=3, random_state=0), True),
    }
    for search, supervised in searches.values():
        labels = (y,) if supervised else ()
        ours = clone(search).fit(X, *labels).best_estimator_
        with config_context(array_api_dispatch=True):
            theirs = clone(search).fit(xps.asarray(X),
                                       *(xps.asarray(v) for v in labels))
        theirs = theirs.best_estimator_
        pcas = (ours["pca"], theirs["pca"]) if supervised else (ours, theirs)
        assert pcas[0].privacy_spent_ == pytest.approx(pcas[1].privacy_spent_)
        np.testing.assert_allclose(to_numpy(pcas[1].components_),
                                   pcas[0].components_, rtol=1e-8, atol=1e-10)
        if supervised:  # the head had the whole refit's share on both
            assert ours["lda"].privacy_spent_ == pytest.approx(
                theirs["lda"].privacy_spent_)
            np.testing.assert_allclose(theirs["lda"].coef_, ours["lda"].coef_,
                                       rtol=1e-8, atol=1e-10)
    complex_rows = X.astype(np.complex128)
    complex_rows[:, 0] += 1j
    acc = BudgetAccountant()
    with config_context(array_api_dispatch=True):
        with pytest.raises(ValueError, match="Complex data not supported"):
            clone(searches["pca"][0]).set_params(accountant=acc).fit(
                xps.asarray(complex_rows))
        assert acc.n_charges == 0
        head = PrivateLDA(classes=[0, 1], data_norm=1.0, random_state=0,
                          accountant=BudgetAccountant())
        integers = xps.asarray(np.round(X).astype(np.int64))
        head.fit(integers, xps.asarray(y))
        proba = to_numpy(head.predict_proba(integers))
    assert proba.dtype.kind == "f" and 0 < proba.mean() < 1


def test_torch_mixed_precision_and_tensors_without_an_array_form():
    """A float32 fit's transform of float64 or integer tensors raised
    PyTorch's own dtype error, and sparse or meta tensors failed inside
    PyTorch (review 58 F4): the products now run in the wider precision, as
    NumPy promotes, and those tensors are refused by name before any
    charge."""
    torch = pytest.importorskip("torch")
    from sklearn_dppca.linear_model import PrivateRidge

    X = torch.from_numpy(data(200, 5))
    budget = BudgetAccountant()
    with config_context(array_api_dispatch=True):
        for fit_dtype in (torch.float32, torch.float64):
            est = PrivatePCA(2, data_norm=0.5, whiten=True, accountant=budget)
            est.fit(X.to(fit_dtype))
            for given in (torch.float32, torch.float64, torch.int64):
                Z = est.transform((X * 3).to(given))
                both32 = fit_dtype == given == torch.float32  # integers: float64
                wide = torch.float32 if both32 else torch.float64
                assert Z.dtype == wide
                assert est.inverse_transform(Z).dtype == wide
        spent = budget.n_charges
        meta = torch.empty((200, 5), device="meta")
        for bad in (X.to_sparse(), X.to_sparse_csr(), meta):
            with pytest.raises((TypeError, ValueError), match="sparse tensor|meta"):
                PrivatePCA(2, data_norm=0.5, accountant=budget).fit(bad)
            with pytest.raises((TypeError, ValueError), match="sparse tensor|meta"):
                ridge = PrivateRidge((-1, 1), data_norm=1.0, accountant=budget)
                ridge.fit(bad, X[:, 0])
        with pytest.raises(TypeError, match="sparse tensor"):
            est.score(X.to_sparse())
        assert budget.n_charges == spent


@pytest.mark.parametrize("est", [PrivatePCA, ComplexGaussPCA])
@pytest.mark.parametrize("target", ["covariance", "subspace"])
def test_eigh_in_any_order_gives_the_top_components(est, target, monkeypatch):
    # The standard leaves eigh's order unspecified ("implementation-
    # dependent"): a namespace returning its eigenpairs in decreasing order
    # must give the same top k as one returning them increasing (review 96:
    # ComplexGaussPCA took the last k columns, the bottom k here).
    X = data()
    params = dict(epsilon=5.0, data_norm=0.9, random_state=0)
    if est is ComplexGaussPCA:
        params["target"] = target
    elif target == "subspace":
        pytest.skip("PrivatePCA has no target")
    with config_context(array_api_dispatch=True):
        ref = est(2, **params).fit(xps.asarray(X))
        increasing = xps.linalg.eigh

        def decreasing(x):
            values, vectors = increasing(x)
            order = xps.flip(xps.argsort(values))
            return type(increasing(x))(xps.take(values, order),
                                       xps.take(vectors, order, axis=1))

        monkeypatch.setattr(xps.linalg, "eigh", decreasing)
        fit = est(2, **params).fit(xps.asarray(X))
    for name in ("components_", "noisy_variance_", "explained_variance_"):
        np.testing.assert_allclose(to_numpy(getattr(fit, name)),
                                   to_numpy(getattr(ref, name)), atol=1e-10)


@pytest.mark.parametrize("est", [PrivatePCA, ComplexGaussPCA])
def test_a_memory_refusal_on_the_device_names_what_fits(est):
    # Array API input has the dense path only: a refusal of every eigenpair
    # named no fit (an integer k's truncated solver fitted), and one of an
    # integer k advised "fewer components", which shrink nothing there
    # (review 96 F3). No row is read: the plans refuse.
    X = xps.asarray(np.zeros((100, 3000)))
    limit = (0.3 if est is PrivatePCA else 0.4) * 2**30
    budget = BudgetAccountant()
    with config_context(array_api_dispatch=True):
        with pytest.raises(MemoryError) as refusal:
            est(None, data_norm=1.0, memory_limit=limit, accountant=budget).fit(X)
        message = str(refusal.value)
        assert f"{est.__name__}(n_components=10, path='dense')" in message, message
        assert "GiB at this limit" in message
        est(10, data_norm=1.0, memory_limit=limit, accountant=budget).fit(X)
        with pytest.raises(MemoryError) as refusal:
            est(1, data_norm=1.0, memory_limit=limit / 3,
                accountant=budget).fit(X)
    assert "fewer components" not in str(refusal.value)
    assert budget.n_charges == 1
