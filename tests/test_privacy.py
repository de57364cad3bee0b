"""Tests of the privacy accounting (docs/privacy.rst §2) against independent oracles.

Oracles: Google's ``dp_accounting`` (PLD and RDP accountants, analytic Gaussian
calibration) and ``mpmath`` (high-precision evaluation of the GDP δ(ε; μ) curve).
The oracle is only ever asked about compositions with *different* noise levels:
``dp_accounting`` collapses equal levels to the GDP identity itself, so equal
levels would test nothing.
"""

import copy
import math
import pickle
import threading

import dp_accounting
import mpmath
import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant
from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV
from sklearn.utils.validation import check_is_fitted

from sklearn_dppca import (
    BudgetAccountant,
    BudgetExceededError,
    PrivacyLeakWarning,
    PrivatePCA,
)
from sklearn_dppca.privacy import (
    DEFAULT_ORDERS,
    calibrate_gaussian,
    gaussian_rdp,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
    get_default_accountant,
    rdp_to_epsilon,
    repeated_rdp,
    set_default_accountant,
)

EPSILONS = np.geomspace(1e-3, 1e7, 31)
DELTAS = [1e-10, 1e-6, 1e-2]
# Noise multipliers (sensitivity 1) of a composition of Gaussian releases with
# *different* noise levels.
SIGMAS = [1.0, 2.5, 4.0, 0.7]
ORDERS = list(DEFAULT_ORDERS)
# dp_accounting's compute_epsilon returns inf for orders <= 1.01 (its improved
# conversion is only used for a > 1.01); ours uses every order > 1. On this
# subset both conversions are the same formula.
ORDERS_ABOVE_101 = [a for a in ORDERS if a > 1.01]


def _mp_gdp_delta(mu, epsilon, dps=80):
    """δ(ε; μ) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2), evaluated with mpmath."""
    with mpmath.workdps(dps):
        mu, eps = mpmath.mpf(mu), mpmath.mpf(epsilon)
        return float(
            mpmath.ncdf(-eps / mu + mu / 2)
            - mpmath.exp(eps) * mpmath.ncdf(-eps / mu - mu / 2)
        )


def _suffix_min(values):
    """``out[i] = min(values[i:])``: dp_accounting's RDP-monotonicity step."""
    return np.minimum.accumulate(np.asarray(values)[::-1])[::-1]


@pytest.fixture(scope="module")
def pld_composition():
    """dp_accounting's PLD accountant on Gaussians with noise multipliers SIGMAS."""
    event = dp_event.ComposedDpEvent([dp_event.GaussianDpEvent(s) for s in SIGMAS])
    accountant = PLDAccountant(value_discretization_interval=1e-4)
    accountant.compose(event)
    return accountant


@pytest.fixture
def restore_default_accountant():
    """Put the process-wide default accountant back after the test."""
    original = get_default_accountant()
    yield original
    set_default_accountant(original)


@pytest.fixture(scope="module")
def data():
    """A 600 × 4 data set with a clear spectrum and rows of norm ≤ 1."""
    rng = np.random.default_rng(12345)
    X = rng.normal(size=(600, 4)) * [3.0, 1.5, 0.5, 0.2]
    return X / np.linalg.norm(X, axis=1).max()


# ==========================================================================
# 1. GDP <-> (ε, δ) conversions and calibration
# ==========================================================================
@pytest.mark.parametrize("delta", DELTAS)
def test_gdp_delta_inverts_gdp_mu(delta):
    """gdp_delta(gdp_mu(ε, δ), ε) == δ (rel 1e-8) for ε from 1e-3 to 1e7."""
    for eps in EPSILONS:
        mu = gdp_mu(eps, delta)
        assert gdp_delta(mu, eps) == pytest.approx(delta, rel=1e-8), eps


@pytest.mark.parametrize("delta", DELTAS)
def test_gdp_epsilon_inverts_gdp_mu(delta):
    """gdp_epsilon(gdp_mu(ε, δ), δ) == ε (rel 1e-8) for ε from 1e-3 to 1e7."""
    for eps in EPSILONS:
        mu = gdp_mu(eps, delta)
        assert gdp_epsilon(mu, delta) == pytest.approx(eps, rel=1e-8), eps


@pytest.mark.parametrize("delta", DELTAS)
def test_calibrate_gaussian_matches_dp_accounting(delta):
    """σ of the analytic Gaussian mechanism equals dp_accounting.get_sigma_gaussian."""
    for eps in np.geomspace(1e-3, 1e3, 19):
        ours = calibrate_gaussian(eps, delta)
        theirs = dp_accounting.get_sigma_gaussian(eps, delta)
        assert ours == pytest.approx(theirs, rel=1e-6), eps


def test_calibrate_gaussian_scales_with_sensitivity():
    """σ is linear in the sensitivity and equals sensitivity / gdp_mu."""
    base = calibrate_gaussian(0.7, 1e-5)
    assert calibrate_gaussian(0.7, 1e-5, sensitivity=3.0) == pytest.approx(
        3.0 * base, rel=1e-14
    )
    assert base == pytest.approx(1.0 / gdp_mu(0.7, 1e-5), rel=1e-14)
    assert calibrate_gaussian(0.7, 1e-5, sensitivity=0.0) == 0.0


def test_analytic_sigma_known_value_beats_textbook():
    """At ε=1, δ=1e-6 the analytic σ is 4.22 (docs/privacy.rst §2), textbook 5.30."""
    sigma = calibrate_gaussian(1.0, 1e-6)
    assert sigma == pytest.approx(4.22, abs=5e-3)
    textbook = math.sqrt(2.0 * math.log(1.25 / 1e-6)) / 1.0
    assert textbook == pytest.approx(5.30, abs=5e-3)
    assert textbook > sigma


def test_textbook_sigma_is_always_larger_for_small_epsilon():
    """Where the textbook bound is valid (ε < 1) it exceeds the exact σ."""
    for delta in DELTAS[:2]:
        for eps in np.geomspace(1e-3, 0.99, 12):
            textbook = math.sqrt(2.0 * math.log(1.25 / delta)) / eps
            assert calibrate_gaussian(eps, delta) < textbook


def test_gdp_delta_matches_mpmath():
    """gdp_delta agrees with 80-digit mpmath, including far tails and ε = 1e7."""
    points = [
        (1.0, 1.0),
        (0.5, 0.01),
        (0.01, 1e-3),
        (3.0, 5.0),
        (10.0, 40.0),
        (0.5, 5.0),  # δ ~ 1e-23: deep tail, needs log-space evaluation
        (4472.0, 1e7),
        (gdp_mu(1e7, 1e-6), 1e7),
        (gdp_mu(1e7, 1e-10), 1e7),
    ]
    for mu, eps in points:
        expected = _mp_gdp_delta(mu, eps)
        assert expected > 0.0
        assert gdp_delta(mu, eps) == pytest.approx(expected, rel=1e-8), (mu, eps)


@pytest.mark.parametrize("epsilon", [0.0, 1e-15, 1e-12, 1e-8, 1e-4, 1e-3])
def test_gdp_mu_at_tiny_epsilon_matches_mpmath(epsilon):
    """At a small μ the difference of log Φ(a) and log Φ(b) lost 4–5 digits:
    μ was 5% too large at ε = 0, δ = 1e-15, and 5e-5 at ε = 1e-15, δ = 1e-12
    (review 64); δ is now integrated over [b, a]. The δ that the returned μ
    gives (mpmath, with the digits Φ(a) − e^ε Φ(b) needs at δ = 1e-300) is
    the δ asked for, to 1e-10 (μ to about 1e-14)."""
    for delta in [1e-300, 1e-15, 1e-12, 1e-9, 1e-6]:
        mu = gdp_mu(epsilon, delta)
        exact = _mp_gdp_delta(mu, epsilon, dps=400)
        assert exact == pytest.approx(delta, rel=1e-10, abs=0), delta
    for mu in [1e-9, 1e-4, 0.1, 0.5]:  # δ itself, in and near the small-μ form
        expected = _mp_gdp_delta(mu, epsilon)
        assert gdp_delta(mu, epsilon) == pytest.approx(expected, rel=1e-12, abs=0), mu


def test_gdp_delta_known_value_and_limits():
    """Doc value δ(1; 1) = 0.126936; δ(ε; 0) = 0, δ(∞; μ) = 0, δ(ε; ∞) = 1."""
    assert gdp_delta(1.0, 1.0) == pytest.approx(0.126936737506644, rel=1e-12)
    assert gdp_delta(0.0, 1.0) == 0.0
    assert gdp_delta(1.0, math.inf) == 0.0
    assert gdp_delta(math.inf, 1.0) == 1.0
    # small μ at huge ε: e^ε − 1 overflowed in its logarithm (review 65)
    for mu, eps in [(0.5, 710.0), (0.1, 1e3), (0.5, 1e7)]:
        assert gdp_delta(mu, eps) == 0.0
    for eps in (0.999, 1.0, 1.001, 2.0):  # on both sides of the switch at ε = 1
        expected = _mp_gdp_delta(0.45, eps)
        assert gdp_delta(0.45, eps) == pytest.approx(expected, rel=1e-12, abs=0)


def test_gdp_epsilon_limits():
    """gdp_epsilon is 0 when δ(0; μ) ≤ δ, inf for μ = inf; gdp_mu(inf, δ) = inf."""
    assert gdp_epsilon(1e-9, 1e-6) == 0.0
    assert gdp_epsilon(0.0, 1e-6) == 0.0
    assert gdp_epsilon(math.inf, 1e-6) == math.inf
    assert gdp_mu(math.inf, 1e-6) == math.inf


def test_gdp_functions_are_monotone():
    """μ grows in ε, δ; σ falls; δ(ε; μ) falls in ε, grows in μ; ε(μ, δ) grows in μ."""
    eps_grid = np.geomspace(1e-3, 1e6, 25)
    for delta in DELTAS:
        mus = [gdp_mu(e, delta) for e in eps_grid]
        assert np.all(np.diff(mus) > 0)
        sigmas = [calibrate_gaussian(e, delta) for e in eps_grid]
        assert np.all(np.diff(sigmas) < 0)
    for eps in [1e-2, 1.0, 1e3]:
        mus = [gdp_mu(eps, d) for d in DELTAS]
        assert np.all(np.diff(mus) > 0)
    mu_grid = np.geomspace(1e-2, 1e2, 25)
    for eps in [0.1, 1.0, 10.0]:
        deltas = np.array([gdp_delta(m, eps) for m in mu_grid])
        assert np.all(np.diff(deltas) >= 0)
        # strictly increasing wherever δ neither underflows to 0 nor rounds to 1
        inside = (deltas > 1e-300) & (deltas < 1.0 - 1e-12)
        assert inside.sum() >= 10
        assert np.all(np.diff(deltas[inside]) > 0)
    for mu in [0.1, 1.0, 10.0]:
        # up to ε = μ²/2 + 5μ, where δ ≈ Φ(−5) is still far from underflow
        deltas = [
            gdp_delta(mu, e) for e in np.linspace(0.0, mu * mu / 2 + 5.0 * mu, 25)
        ]
        assert np.all(np.diff(deltas) < 0)
    for delta in DELTAS:
        epsilons = np.array([gdp_epsilon(m, delta) for m in mu_grid])
        assert np.all(np.diff(epsilons) >= 0)
        # ε is 0 while δ(0; μ) ≤ δ, then strictly increasing
        assert np.all(np.diff(epsilons[epsilons > 0]) > 0)


@pytest.mark.parametrize("bad_epsilon", [-1.0, -1e-12, float("nan"), "1.0", None])
def test_bad_epsilon_raises(bad_epsilon):
    """Negative, NaN and non-numeric ε raise ValueError everywhere."""
    with pytest.raises(ValueError):
        gdp_mu(bad_epsilon, 1e-6)
    with pytest.raises(ValueError):
        gdp_delta(1.0, bad_epsilon)
    with pytest.raises(ValueError):
        calibrate_gaussian(bad_epsilon, 1e-6)


@pytest.mark.parametrize(
    "bad_delta", [0.0, 1.0, -0.1, 1.5, float("nan"), float("inf"), None]
)
def test_bad_delta_raises(bad_delta):
    """δ outside (0, 1), NaN or non-numeric raise ValueError everywhere."""
    with pytest.raises(ValueError):
        gdp_mu(1.0, bad_delta)
    with pytest.raises(ValueError):
        gdp_epsilon(1.0, bad_delta)
    with pytest.raises(ValueError):
        calibrate_gaussian(1.0, bad_delta)
    with pytest.raises(ValueError):
        rdp_to_epsilon(gaussian_rdp(1.0), bad_delta)
    # None: the default δ (or a ledger's own); 0.0: a budget for pure ε-DP
    # releases of the user's own (tests/test_accountant.py)
    if bad_delta not in (None, 0.0):
        with pytest.raises(ValueError):
            BudgetAccountant(epsilon=1.0, delta=bad_delta)


@pytest.mark.parametrize("bad_mu", [-1.0, -1e-12, float("nan"), "1.0"])
def test_bad_mu_raises(bad_mu):
    """Negative, NaN and non-numeric μ raise ValueError everywhere."""
    with pytest.raises(ValueError):
        gdp_delta(bad_mu, 1.0)
    with pytest.raises(ValueError):
        gdp_epsilon(bad_mu, 1e-6)
    with pytest.raises(ValueError):
        gaussian_rdp(bad_mu)
    with pytest.raises(ValueError):
        BudgetAccountant().spend(mu=bad_mu)


def test_bad_sensitivity_raises():
    """A negative, NaN or infinite sensitivity raises ValueError."""
    for bad in [-1.0, float("nan"), math.inf]:
        with pytest.raises(ValueError):
            calibrate_gaussian(1.0, 1e-6, sensitivity=bad)


# ==========================================================================
# 2. Exact GDP composition against dp_accounting's PLD accountant
# ==========================================================================
@pytest.mark.parametrize("delta", [1e-10, 1e-6, 1e-3])
def test_gdp_composition_matches_pld(pld_composition, delta):
    """sqrt(Σ 1/σ_j²)-GDP at δ agrees with the PLD accountant (an upper bound)."""
    mu = math.sqrt(sum(1.0 / s**2 for s in SIGMAS))
    ours = gdp_epsilon(mu, delta)
    theirs = pld_composition.get_epsilon(delta)
    assert ours == pytest.approx(theirs, rel=1e-3)
    # The PLD with pessimistic discretisation is an upper bound on the exact value.
    assert ours <= theirs * (1.0 + 1e-6)


@pytest.mark.parametrize("delta", [1e-10, 1e-6, 1e-3])
def test_accountant_gdp_composition_matches_pld(pld_composition, delta):
    """BudgetAccountant.spend(mu=1/σ_j) per release reports the PLD's ε at its δ."""
    acc = BudgetAccountant(delta=delta)
    for s in SIGMAS:
        acc.spend(mu=1.0 / s)
    eps, reported_delta = acc.spent
    theirs = pld_composition.get_epsilon(delta)
    assert reported_delta == delta
    assert eps == pytest.approx(theirs, rel=1e-3)
    assert eps <= theirs * (1.0 + 1e-6)
    # and it is exactly our closed-form composition
    mu = math.sqrt(sum(1.0 / s**2 for s in SIGMAS))
    assert eps == pytest.approx(gdp_epsilon(mu, delta), rel=1e-10)


# ==========================================================================
# 3. Rényi DP against dp_accounting's RDP accountant
# ==========================================================================
def test_gaussian_rdp_formula():
    """A μ-GDP Gaussian is (λ, λμ²/2)-RDP at every order."""
    orders = np.array([1.5, 2.0, 10.0, 1e4])
    np.testing.assert_allclose(gaussian_rdp(0.3, orders), orders * 0.045, rtol=1e-15)
    assert gaussian_rdp(0.3).shape == DEFAULT_ORDERS.shape


@pytest.mark.parametrize(
    "orders", [ORDERS, ORDERS_ABOVE_101], ids=["default", "above1.01"]
)
@pytest.mark.parametrize("delta", [1e-10, 1e-6, 1e-3])
def test_rdp_composition_matches_rdp_accountant(orders, delta):
    """Σ gaussian_rdp(1/σ_j) and rdp_to_epsilon reproduce RdpAccountant's curve, ε."""
    event = dp_event.ComposedDpEvent([dp_event.GaussianDpEvent(s) for s in SIGMAS])
    oracle = RdpAccountant(orders=orders)
    oracle.compose(event)
    curve = sum(gaussian_rdp(1.0 / s, orders) for s in SIGMAS)
    np.testing.assert_allclose(curve, oracle._rdp, rtol=1e-12)
    eps, order = rdp_to_epsilon(curve, delta, orders)
    their_eps, their_order = oracle.get_epsilon_and_optimal_order(delta)
    assert eps == pytest.approx(their_eps, rel=1e-6)
    # Ours also minimises over orders in (1, 1.01], which dp_accounting skips.
    assert eps <= their_eps * (1.0 + 1e-12)
    assert order == pytest.approx(their_order, rel=1e-12)


def test_rdp_to_epsilon_is_dp_accountings_improved_conversion():
    """On orders > 1.01 rdp_to_epsilon is exactly dp_accounting's compute_epsilon
    (Canonne–Kamath–Steinke / Asoodeh et al.), on an arbitrary non-Gaussian curve."""
    orders = np.array(ORDERS_ABOVE_101)
    curve = repeated_rdp(
        gaussian_rdp(0.4, orders) + gaussian_rdp(0.1, orders), 0.05, orders
    )
    for delta in [1e-10, 1e-6, 1e-3]:
        eps, order = rdp_to_epsilon(curve, delta, orders)
        their_eps, their_order = compute_epsilon(orders, curve, delta)
        assert eps == pytest.approx(their_eps, rel=1e-12)
        assert order == their_order


def test_rdp_conversion_is_looser_than_exact_gdp():
    """For pure Gaussian compositions the RDP conversion is valid but looser."""
    mu = math.sqrt(sum(1.0 / s**2 for s in SIGMAS))
    for delta in DELTAS:
        exact = gdp_epsilon(mu, delta)
        via_rdp, _ = rdp_to_epsilon(gaussian_rdp(mu), delta)
        assert exact < via_rdp < 1.2 * exact


def test_rdp_input_validation():
    """Mismatched shapes, orders ≤ 1 and bad θ raise ValueError."""
    with pytest.raises(ValueError):
        rdp_to_epsilon(np.ones(3), 1e-6, [2.0, 3.0])
    with pytest.raises(ValueError):
        gaussian_rdp(1.0, [1.0, 2.0])
    with pytest.raises(ValueError):
        gaussian_rdp(1.0, [])
    with pytest.raises(ValueError):
        repeated_rdp(np.ones(3), 0.5, [2.0, 3.0])
    for bad_theta in [0.0, -0.1, 1.5, float("nan")]:
        with pytest.raises(ValueError):
            repeated_rdp(gaussian_rdp(1.0), bad_theta)


# repeated_rdp vs dp_accounting's RepeatAndSelectDpEvent(event, mean, shape=1).
#
# dp_accounting (rdp_privacy_accountant._compute_rdp_repeat_and_select, read in
# the installed 0.6 source) parameterises the number of runs as a truncated
# negative binomial; shape=1 is the geometric distribution with γ = 1/mean, so
# our θ corresponds to mean = 1/θ. For that case it computes
#     c        = 2 · min_{λ̂ ∈ orders} [(1 − 1/λ̂) ε(λ̂) − ln(γ)/λ̂]
#     out(λ)   = ε(λ) + ln(mean)/(λ − 1) + c
# and then enforces monotonicity of RDP in the order:
#     out(λ_i) = min_{λ_j ≥ λ_i} out(λ_j).
# Our repeated_rdp (docs/privacy.rst §2, Papernot–Steinke Thm 2 with η = 1) is the
# same formula except:
#   (a) its min over λ̂ also includes λ̂ = 1, where the bracket is 2 ln(1/θ)
#       (Theorem 2 allows λ̂ ∈ [1, ∞)); this can only make ours smaller, and
#       matters only when one trial is expensive (its ρ exceeds ln(1/θ));
#   (b) it does NOT apply the monotonicity post-processing, so at orders below
#       the argmin of the curve ours is larger than dp_accounting's (still a
#       valid bound, just not tightened).
# Comparable quantities: suffix_min(ours) == theirs when (a) is inactive; ours
# at the largest order, where (b) never acts, differs from theirs by exactly
# min(0, 2 ln(1/θ) − c); and the resulting ε agree (or ours is ≤).
@pytest.mark.parametrize("theta", [0.5, 0.1, 0.01])
def test_repeated_rdp_matches_repeat_and_select(theta):
    """Cheap trials (λ̂ = 1 inactive): our curve is dp_accounting's before its
    monotonicity step, and the converted ε are identical."""
    one_trial = dp_event.ComposedDpEvent(
        [dp_event.GaussianDpEvent(3.0), dp_event.GaussianDpEvent(5.0)]
    )
    oracle = RdpAccountant(orders=ORDERS)
    oracle.compose(dp_event.RepeatAndSelectDpEvent(one_trial, 1.0 / theta, 1))
    theirs = oracle._rdp

    ours = repeated_rdp(gaussian_rdp(1 / 3.0) + gaussian_rdp(1 / 5.0), theta)
    np.testing.assert_allclose(_suffix_min(ours), theirs, rtol=1e-12)
    assert np.all(ours >= theirs * (1.0 - 1e-12))  # monotonicity only lowers theirs
    # Above the argmin of our curve nothing is post-processed: identical values.
    top = np.argmin(ours)
    np.testing.assert_allclose(ours[top:], theirs[top:], rtol=1e-12)
    for delta in [1e-10, 1e-6, 1e-3]:
        eps, _ = rdp_to_epsilon(ours, delta)
        assert eps == pytest.approx(oracle.get_epsilon(delta), rel=1e-9)


@pytest.mark.parametrize("sigma", [0.3, 0.1])
def test_repeated_rdp_lambda_hat_one_is_tighter_than_repeat_and_select(sigma):
    """Expensive trials (ρ > ln(1/θ)): λ̂ = 1 lowers ours by exactly 2 ln(1/θ) − c;
    ours is then ≤ dp_accounting's at every order after monotonicity, and in ε."""
    theta = 0.1
    oracle = RdpAccountant(orders=ORDERS)
    oracle.compose(
        dp_event.RepeatAndSelectDpEvent(dp_event.GaussianDpEvent(sigma), 1.0 / theta, 1)
    )
    theirs = oracle._rdp
    one = gaussian_rdp(1.0 / sigma)
    ours = repeated_rdp(one, theta)

    # Recover dp_accounting's constant c from its value at the largest order
    # (where its monotonicity step is the identity) and compare ours exactly.
    tail = math.log(1.0 / theta) / (DEFAULT_ORDERS[-1] - 1.0)
    c_theirs = theirs[-1] - one[-1] - tail
    c_ours = ours[-1] - one[-1] - tail
    # (absolute tolerance: c is recovered from values of size ~1e6 · ρ)
    assert c_ours == pytest.approx(min(c_theirs, 2.0 * math.log(1.0 / theta)), abs=1e-6)
    assert c_ours < c_theirs  # the λ̂ = 1 term is active here
    assert np.all(_suffix_min(ours) <= theirs * (1.0 + 1e-12))
    for delta in [1e-10, 1e-6]:
        eps, _ = rdp_to_epsilon(ours, delta)
        their_eps = oracle.get_epsilon(delta)
        assert eps <= their_eps
        assert eps == pytest.approx(their_eps, rel=1e-2)


def test_repeated_rdp_theta_one_is_a_single_run():
    """θ = 1 means exactly one trial: the curve is unchanged."""
    one = gaussian_rdp(0.7)
    np.testing.assert_allclose(repeated_rdp(one, 1.0), one, rtol=0, atol=0)


def test_repeated_rdp_grows_as_theta_falls():
    """More expected repetitions (smaller θ) never cost less."""
    one = gaussian_rdp(0.2)
    previous = repeated_rdp(one, 1.0)
    for theta in [0.5, 0.1, 0.01, 0.001]:
        current = repeated_rdp(one, theta)
        assert np.all(current >= previous)
        previous = current


def test_accountant_mixed_charges_match_rdp_accountant():
    """GDP + RDP charges compose in RDP to dp_accounting's ε for the same events."""
    theta = 0.1
    acc = BudgetAccountant(delta=1e-6)
    acc.spend(mu=0.5)
    acc.spend(rdp=repeated_rdp(gaussian_rdp(1 / 3.0) + gaussian_rdp(1 / 5.0), theta))
    acc.spend(mu=0.25)
    event = dp_event.ComposedDpEvent(
        [
            dp_event.GaussianDpEvent(2.0),
            dp_event.RepeatAndSelectDpEvent(
                dp_event.ComposedDpEvent(
                    [dp_event.GaussianDpEvent(3.0), dp_event.GaussianDpEvent(5.0)]
                ),
                1.0 / theta,
                1,
            ),
            dp_event.GaussianDpEvent(4.0),
        ]
    )
    oracle = RdpAccountant(orders=ORDERS)
    oracle.compose(event)
    eps, delta = acc.spent
    assert delta == 1e-6
    assert eps == pytest.approx(oracle.get_epsilon(1e-6), rel=1e-9)
    assert acc.n_charges == 3


# ==========================================================================
# 4. BudgetAccountant
# ==========================================================================
def test_spent_is_zero_before_any_charge():
    """A fresh accountant reports (0.0, 0.0) and no charges."""
    acc = BudgetAccountant(epsilon=1.0, delta=1e-6)
    assert acc.spent == (0.0, 0.0)
    assert acc.n_charges == 0


def test_four_fits_compose_exactly():
    """Four ε=1 fits compose to gdp_epsilon(2 μ(1, δ), δ) ≈ 2.415, far below 4."""
    mu = gdp_mu(1.0, 1e-6)
    acc = BudgetAccountant(epsilon=3.0, delta=1e-6)
    for _ in range(4):
        acc.spend(mu=mu)
    eps, delta = acc.spent
    assert delta == 1e-6
    assert eps == pytest.approx(gdp_epsilon(2.0 * mu, 1e-6), rel=1e-9)
    assert eps < 4.0 / 1.8
    # independent check: the (ε, δ) curve of 2μ-GDP passes through (eps, 1e-6)
    assert _mp_gdp_delta(2.0 * mu, eps) == pytest.approx(1e-6, rel=1e-8)
    assert acc.n_charges == 4


def test_spend_returns_the_new_total():
    """spend() returns the same (ε, δ) that spent reports afterwards."""
    acc = BudgetAccountant(delta=1e-6)
    returned = acc.spend(mu=0.3)
    assert returned == pytest.approx(acc.spent, rel=1e-12)
    returned = acc.spend(mu=0.4)
    assert returned[0] == pytest.approx(gdp_epsilon(0.5, 1e-6), rel=1e-10)


def test_charge_over_budget_is_refused_and_not_recorded():
    """A charge over ε raises BudgetExceededError; spent and n_charges stay."""
    mu = gdp_mu(1.0, 1e-6)
    acc = BudgetAccountant(epsilon=1.2, delta=1e-6)
    acc.spend(mu=mu)
    before = (acc.spent, acc.n_charges, repr(acc))
    with pytest.raises(BudgetExceededError):
        acc.spend(mu=mu)
    with pytest.raises(BudgetExceededError):
        acc.spend(rdp=gaussian_rdp(mu))
    with pytest.raises(BudgetExceededError):
        acc.check(mu=mu)
    assert (acc.spent, acc.n_charges, repr(acc)) == before
    assert issubclass(BudgetExceededError, ValueError)


def test_charge_exactly_at_budget_is_accepted():
    """One charge of exactly μ(ε, δ), or two whose μ² add up to it, is accepted."""
    acc = BudgetAccountant(epsilon=1.0, delta=1e-6)
    acc.spend(mu=gdp_mu(1.0, 1e-6))
    assert acc.spent[0] == pytest.approx(1.0, rel=1e-9)

    budget_mu = gdp_mu(2.0, 1e-6)
    acc = BudgetAccountant(epsilon=2.0, delta=1e-6)
    acc.spend(mu=budget_mu * math.sqrt(0.3))
    acc.spend(mu=budget_mu * math.sqrt(0.7))
    assert acc.spent[0] == pytest.approx(2.0, rel=1e-9)
    assert acc.n_charges == 2


def test_check_charges_nothing():
    """check() reports the prospective total without recording it."""
    acc = BudgetAccountant(epsilon=5.0, delta=1e-6)
    acc.spend(mu=0.5)
    prospective = acc.check(mu=0.5)
    assert prospective[0] == pytest.approx(gdp_epsilon(math.sqrt(0.5), 1e-6), rel=1e-10)
    assert acc.spent[0] == pytest.approx(gdp_epsilon(0.5, 1e-6), rel=1e-10)
    assert acc.n_charges == 1


def test_remaining_fills_budget_exactly_gdp():
    """Spending gdp_mu(remaining(), δ) fills the budget; afterwards remaining() ≈ 0."""
    acc = BudgetAccountant(epsilon=3.0, delta=1e-6)
    assert acc.remaining() == pytest.approx(3.0, rel=1e-9)
    acc.spend(mu=gdp_mu(1.0, 1e-6))
    acc.spend(mu=0.2)
    left = acc.remaining()
    assert 0.0 < left < 3.0
    acc.spend(mu=gdp_mu(left, 1e-6))
    assert acc.spent[0] == pytest.approx(3.0, rel=1e-9)
    assert acc.remaining() == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(BudgetExceededError):
        acc.spend(mu=gdp_mu(1e-2, 1e-6))


def test_remaining_fills_budget_with_rdp_charges():
    """With an RDP charge on the books, remaining() still fits exactly."""
    acc = BudgetAccountant(epsilon=8.0, delta=1e-6)
    acc.spend(mu=0.5)
    acc.spend(rdp=repeated_rdp(gaussian_rdp(0.2), 0.1))
    left = acc.remaining()
    assert 0.0 < left < 8.0
    acc.spend(mu=gdp_mu(left, 1e-6))
    assert acc.spent[0] == pytest.approx(8.0, rel=1e-6)
    assert acc.spent[0] <= 8.0 * (1.0 + 1e-9)
    assert acc.remaining() == pytest.approx(0.0, abs=1e-3)


def test_remaining_unlimited_and_reset():
    """An unlimited accountant has inf remaining; reset() forgets every charge."""
    acc = BudgetAccountant()
    assert acc.remaining() == math.inf
    acc.spend(mu=1.0)
    acc.spend(rdp=gaussian_rdp(1.0))
    acc.reset()
    assert acc.spent == (0.0, 0.0)
    assert acc.n_charges == 0
    acc.spend(mu=1.0)
    assert acc.spent[0] == pytest.approx(gdp_epsilon(1.0, 1e-6), rel=1e-12)


def test_rdp_only_charge_is_converted_with_improved_conversion():
    """An RDP charge is reported as rdp_to_epsilon of the summed curve (+ GDP parts)."""
    acc = BudgetAccountant(delta=1e-5)
    curve = repeated_rdp(gaussian_rdp(0.3), 0.2)
    acc.spend(mu=0.4, rdp=curve)  # one release with both a GDP and an RDP part
    expected, _ = rdp_to_epsilon(curve + gaussian_rdp(0.4), 1e-5)
    assert acc.spent[0] == pytest.approx(expected, rel=1e-12)


def test_charge_validation():
    """A charge needs mu or rdp; rdp must be non-negative on DEFAULT_ORDERS."""
    acc = BudgetAccountant()
    with pytest.raises(ValueError):
        acc.spend()
    with pytest.raises(ValueError):
        acc.spend(rdp=np.ones(3))
    with pytest.raises(ValueError):
        acc.spend(rdp=-np.ones_like(DEFAULT_ORDERS))
    with pytest.raises(ValueError):
        acc.spend(mu=math.nan)
    assert acc.n_charges == 0
    for bad_eps in [0.0, -1.0, float("nan"), "1"]:
        with pytest.raises(ValueError):
            BudgetAccountant(epsilon=bad_eps)


def test_copy_deepcopy_and_clone_share_the_accountant():
    """copy, deepcopy and sklearn.base.clone keep the very same accountant object."""
    acc = BudgetAccountant(epsilon=2.0)
    assert copy.copy(acc) is acc
    assert copy.deepcopy(acc) is acc
    assert copy.deepcopy({"a": [acc]})["a"][0] is acc
    est = PrivatePCA(data_norm=1.0, accountant=acc)
    assert clone(est).accountant is acc
    assert copy.deepcopy(est).accountant is acc


def test_unpickled_accountant_refuses_to_spend():
    """A pickled copy keeps its state but cannot be charged (it can't report back)."""
    acc = BudgetAccountant(epsilon=5.0, delta=1e-6)
    acc.spend(mu=0.5)
    restored = pickle.loads(pickle.dumps(acc))
    assert restored is not acc
    assert restored.spent == pytest.approx(acc.spent, rel=1e-12)
    assert restored.n_charges == 1
    with pytest.raises(RuntimeError):
        restored.spend(mu=0.1)
    assert restored.n_charges == 1
    acc.spend(mu=0.1)  # the original is unaffected
    assert acc.n_charges == 2


def _hammer(acc, mu, n_tries, n_threads):
    """n_threads threads try n_tries charges of mu each; return how many succeeded."""
    accepted = [0] * n_threads
    barrier = threading.Barrier(n_threads)

    def worker(k):
        barrier.wait()
        for _ in range(n_tries):
            try:
                acc.spend(mu=mu)
            except BudgetExceededError:
                continue
            accepted[k] += 1

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(accepted)


def test_threads_never_overspend():
    """8 threads racing for a budget never take the total over ε, and lose no charge."""
    budget_mu = gdp_mu(1.0, 1e-6)
    mu = budget_mu / math.sqrt(150.0)  # at most ~150 charges fit
    acc = BudgetAccountant(epsilon=1.0, delta=1e-6)
    accepted = _hammer(acc, mu, n_tries=40, n_threads=8)  # 320 attempts
    assert acc.spent[0] <= 1.0 * (1.0 + 1e-9)
    assert acc.n_charges == accepted
    assert 149 <= accepted <= 150
    assert acc.spent[0] == pytest.approx(
        gdp_epsilon(math.sqrt(accepted) * mu, 1e-6), rel=1e-9
    )


def test_threads_lose_no_update():
    """Concurrent charges to an unlimited accountant are all recorded and composed."""
    acc = BudgetAccountant(delta=1e-6)
    accepted = _hammer(acc, 0.05, n_tries=50, n_threads=8)
    assert accepted == acc.n_charges == 400
    assert acc.spent[0] == pytest.approx(
        gdp_epsilon(math.sqrt(400) * 0.05, 1e-6), rel=1e-9
    )


@pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")
def test_default_accountant_get_set(restore_default_accountant, data):
    """The default is unlimited; set_default_accountant swaps it, returns the old one,
    and estimators with accountant=None charge the current default."""
    original = restore_default_accountant
    assert isinstance(original, BudgetAccountant)
    assert original.epsilon == math.inf
    mine = BudgetAccountant(epsilon=10.0, delta=1e-6)
    assert set_default_accountant(mine) is original
    assert get_default_accountant() is mine
    PrivatePCA(n_components=2, data_norm=1.0, random_state=0).fit(data)
    assert mine.n_charges == 1
    assert mine.spent[0] == pytest.approx(1.0, rel=1e-9)
    with pytest.raises(TypeError):
        set_default_accountant("not an accountant")
    assert get_default_accountant() is mine
    assert set_default_accountant(original) is mine
    assert get_default_accountant() is original


# ==========================================================================
# 5. Accounting through the estimators
# ==========================================================================
@pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")
def test_grid_search_charges_every_fit(data):
    """GridSearchCV (2 candidates × 3 folds + refit) charges all 7 fits, exactly."""
    acc = BudgetAccountant(delta=1e-6)
    est = PrivatePCA(
        epsilon=1.0, delta=1e-6, data_norm=1.0, random_state=0, accountant=acc
    )
    search = GridSearchCV(est, {"n_components": [1, 2]}, cv=3)
    search.fit(data)
    assert acc.n_charges == 7
    assert search.best_estimator_.accountant is acc
    expected = gdp_epsilon(math.sqrt(7.0) * gdp_mu(1.0, 1e-6), 1e-6)
    assert acc.spent[0] == pytest.approx(expected, rel=1e-9)
    assert acc.spent[0] < 7.0


@pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")
def test_grid_search_over_budget_is_refused(data):
    """A budget too small for all 7 fits stops the search with BudgetExceededError."""
    acc = BudgetAccountant(epsilon=2.0, delta=1e-6)
    est = PrivatePCA(epsilon=1.0, data_norm=1.0, random_state=0, accountant=acc)
    search = GridSearchCV(est, {"n_components": [1, 2]}, cv=3, error_score="raise")
    with pytest.raises(BudgetExceededError):
        search.fit(data)
    assert acc.spent[0] <= 2.0 * (1.0 + 1e-9)
    assert acc.n_charges < 7


@pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")
def test_refused_fit_leaves_estimator_and_accountant_unchanged(data):
    """A refit refused by the budget keeps the fitted attributes and charges nothing."""
    acc = BudgetAccountant(epsilon=1.2, delta=1e-6)
    pca = PrivatePCA(
        n_components=2, epsilon=1.0, data_norm=1.0, random_state=0, accountant=acc
    )
    pca.fit(data)
    state = {k: copy.deepcopy(v) for k, v in vars(pca).items() if k.endswith("_")}
    spent, n_charges = acc.spent, acc.n_charges
    with pytest.raises(BudgetExceededError):
        pca.fit(data[::-1])
    assert (acc.spent, acc.n_charges) == (spent, n_charges)
    after = {k: v for k, v in vars(pca).items() if k.endswith("_")}
    assert after.keys() == state.keys()
    for key, value in state.items():
        np.testing.assert_array_equal(after[key], value, err_msg=key)


@pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")
def test_refused_first_fit_charges_nothing_and_releases_nothing(data):
    """A refused first fit releases no attribute and charges nothing."""
    acc = BudgetAccountant(epsilon=0.5, delta=1e-6)
    pca = PrivatePCA(
        n_components=2, epsilon=1.0, data_norm=1.0, random_state=0, accountant=acc
    )
    with pytest.raises(BudgetExceededError):
        pca.fit(data)
    for attribute in ["components_", "mean_", "explained_variance_", "privacy_spent_"]:
        assert not hasattr(pca, attribute)
    assert acc.n_charges == 0
    assert acc.spent == (0.0, 0.0)


@pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")
def test_refused_first_fit_leaves_estimator_unfitted(data):
    """An estimator whose first fit is refused must still be reported as not fitted."""
    acc = BudgetAccountant(epsilon=0.5, delta=1e-6)
    pca = PrivatePCA(
        n_components=2, epsilon=1.0, data_norm=1.0, random_state=0, accountant=acc
    )
    with pytest.raises(BudgetExceededError):
        pca.fit(data)
    with pytest.raises(NotFittedError):
        check_is_fitted(pca)


@pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")
def test_refused_fit_on_other_width_keeps_fitted_state(data):
    """A refused refit on data of another width must not touch n_features_in_."""
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(data, columns=["a", "b", "c", "d"])
    acc = BudgetAccountant(epsilon=1.2, delta=1e-6)
    pca = PrivatePCA(
        n_components=2, epsilon=1.0, data_norm=1.0, random_state=0, accountant=acc
    )
    pca.fit(frame)
    wider = np.hstack([data, data[:, :1]])
    with pytest.raises(BudgetExceededError):
        pca.fit(wider)
    assert acc.n_charges == 1
    assert pca.n_features_in_ == 4
    assert list(pca.feature_names_in_) == ["a", "b", "c", "d"]
    assert pca.transform(frame).shape == (data.shape[0], 2)


@pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")
@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("epsilon, delta", [(1.0, 1e-6), (0.1, 1e-8), (30.0, 1e-3)])
def test_privacy_spent_equals_requested_budget(data, center, epsilon, delta):
    """privacy_spent_ recomposes the fit's releases to exactly (ε, δ), and the
    accountant is charged exactly that."""
    acc = BudgetAccountant(delta=delta)
    pca = PrivatePCA(
        n_components=2,
        epsilon=epsilon,
        delta=delta,
        data_norm=1.0,
        center=center,
        random_state=0,
        accountant=acc,
    ).fit(data)
    eps_spent, delta_spent = pca.privacy_spent_
    assert eps_spent == pytest.approx(epsilon, rel=1e-9)
    assert delta_spent == delta
    assert acc.spent[0] == pytest.approx(epsilon, rel=1e-9)


def test_fixed_random_state_and_missing_data_norm_warn(data):
    """A fixed random_state and data_norm=None each raise a PrivacyLeakWarning."""
    acc = BudgetAccountant()
    with pytest.warns(PrivacyLeakWarning, match="random_state"):
        PrivatePCA(n_components=1, data_norm=1.0, random_state=0, accountant=acc).fit(
            data
        )
    with pytest.warns(PrivacyLeakWarning, match="data_norm"):
        PrivatePCA(n_components=1, accountant=acc).fit(data)
    assert acc.n_charges == 2


# ==========================================================================
# 6. Accountant API: read-only budget, with-block, remaining(k), records
# ==========================================================================
def test_budget_is_read_only():
    """Assigning epsilon or delta raises AttributeError; nothing changes."""
    acc = BudgetAccountant(epsilon=1.0, delta=1e-6)
    acc.spend(mu=gdp_mu(1.0, 1e-6))
    for name, value in [("epsilon", 100.0), ("delta", 0.9)]:
        with pytest.raises(AttributeError, match=f"{name} is read-only"):
            setattr(acc, name, value)
    assert (acc.epsilon, acc.delta) == (1.0, 1e-6)
    with pytest.raises(BudgetExceededError):
        acc.spend(mu=0.01)


def test_with_block_sets_and_restores_the_default(restore_default_accountant):
    """`with acc:` makes acc the default, nested blocks too; restored on error."""
    original = restore_default_accountant
    outer, inner = BudgetAccountant(epsilon=2.0), BudgetAccountant(epsilon=1.0)
    with outer as entered:
        assert entered is outer and get_default_accountant() is outer
        with pytest.raises(ZeroDivisionError):
            with inner:
                assert get_default_accountant() is inner
                1 / 0
        assert get_default_accountant() is outer
    assert get_default_accountant() is original


def test_remaining_k_equal_fits_fill_the_budget():
    """k fits at remaining(k) each compose to the budget, in GDP and with RDP."""
    for rdp in [None, repeated_rdp(gaussian_rdp(0.2), 0.1)]:
        acc = BudgetAccountant(epsilon=4.0, delta=1e-6)
        acc.spend(mu=0.3, rdp=rdp)
        left = acc.remaining(3)
        assert 0.0 < left < acc.remaining(2) < acc.remaining() < 4.0
        for _ in range(3):
            acc.spend(mu=gdp_mu(left, 1e-6))
        assert acc.spent[0] == pytest.approx(4.0, rel=1e-6)
        assert acc.spent[0] <= 4.0 * (1.0 + 1e-9)
    assert BudgetAccountant().remaining(5) == math.inf
    for bad in [0, -1, 1.5, "2"]:
        with pytest.raises(ValueError):
            BudgetAccountant(epsilon=1.0).remaining(bad)


def test_len_bool_repr_and_charges(data):
    """len() counts charges; an empty accountant is truthy (so `or` never skips
    it); the repr states budget and spending; charges record each fit."""
    acc = BudgetAccountant(epsilon=5.0, delta=1e-6, label="study")
    assert len(acc) == 0 and bool(acc) and acc.charges == []
    PrivatePCA(2, epsilon=1.0, data_norm=1.0, accountant=acc).fit(data)
    acc.spend(mu=0.1, label="by hand")
    assert len(acc) == acc.n_charges == 2
    assert repr(acc) == (
        "BudgetAccountant(epsilon=5.0, delta=1e-06; spent epsilon="
        f"{acc.spent[0]:.6g} in 2 charge(s))"
    )
    fit, manual = acc.charges
    assert fit["estimator"] == "PrivatePCA" and fit["label"] == "study"
    assert fit["params"]["n_components"] == 2 and "accountant" not in fit["params"]
    assert fit["mu"] == gdp_mu(1.0, 1e-6) and fit["rdp"] is None
    assert fit["epsilon_spent"] == pytest.approx(1.0, rel=1e-9)
    assert manual["estimator"] is None and manual["label"] == "by hand"
    assert manual["epsilon_spent"] == acc.spent[0]
    frame = acc.to_frame()
    assert list(frame["seq"]) == [1, 2]
    assert frame["estimator"].iloc[0] == "PrivatePCA"
    assert frame["estimator"].isna().iloc[1]
    assert acc.path is None and acc.verify() == 2


def test_to_frame_without_pandas_says_so(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_pandas(name, *args, **kwargs):
        if name == "pandas":
            raise ImportError("no pandas here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    with pytest.raises(ImportError, match="pip install pandas"):
        BudgetAccountant().to_frame()


def test_infinite_charge():
    """mu=inf (an epsilon=inf fit): accepted by an unlimited accountant, which
    then reports inf; refused, uncharged, by any finite budget."""
    acc = BudgetAccountant()
    acc.spend(mu=0.5)
    assert acc.spend(mu=math.inf) == (math.inf, 1e-6)
    assert acc.spent == (math.inf, 1e-6) and acc.remaining() == math.inf
    acc.spend(rdp=gaussian_rdp(0.1))  # still composes
    assert acc.spent[0] == math.inf and len(acc) == 3
    finite = BudgetAccountant(epsilon=1e6)
    with pytest.raises(BudgetExceededError):
        finite.spend(mu=math.inf)
    with pytest.raises(BudgetExceededError):
        finite.check(mu=math.inf)
    assert finite.n_charges == 0 and finite.spent == (0.0, 0.0)


def test_detached_copy_refuses_check_before_any_data_is_read():
    """An unpickled in-memory copy refuses check() too, naming the fix."""
    restored = pickle.loads(pickle.dumps(BudgetAccountant(epsilon=5.0)))
    with pytest.raises(RuntimeError, match=r"path='budget.db'"):
        restored.check(mu=0.1)
    assert "detached copy" in repr(restored)


# ==========================================================================
# 7. All or nothing: a fit failing after its charge changes nothing
# ==========================================================================
def _fail_after_release(monkeypatch):
    """Make PrivatePCA's mechanism set some attributes, then fail."""
    release = PrivatePCA._release

    def broken(self, *args):
        release(self, *args)  # components_ and the spectrum are now new ...
        self.some_new_attribute_ = 1
        raise MemoryError("simulated failure after the charge")

    monkeypatch.setattr(PrivatePCA, "_release", broken)


@pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")
def test_fit_failing_after_its_charge_leaves_every_attribute(data, monkeypatch):
    """A refit that raises after the charge keeps every fitted attribute (the
    same objects), adds none; the charge stays, conservatively."""
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(data, columns=["a", "b", "c", "d"])
    acc = BudgetAccountant(delta=1e-6)
    pca = PrivatePCA(2, epsilon=1.0, data_norm=1.0, accountant=acc).fit(frame)
    before = {k: v for k, v in vars(pca).items() if k.endswith("_")}
    _fail_after_release(monkeypatch)
    with pytest.raises(MemoryError):
        pca.fit(np.hstack([data, data[:, :2]]) * 0.5)  # another width, no names
    after = {k: v for k, v in vars(pca).items() if k.endswith("_")}
    assert after.keys() == before.keys()
    assert all(after[k] is before[k] for k in before)
    assert acc.n_charges == 2
    assert pca.transform(frame).shape == (data.shape[0], 2)


@pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")
def test_first_fit_failing_after_its_charge_leaves_it_unfitted(data, monkeypatch):
    acc = BudgetAccountant(delta=1e-6)
    _fail_after_release(monkeypatch)
    pca = PrivatePCA(2, epsilon=1.0, data_norm=1.0, accountant=acc)
    with pytest.raises(MemoryError):
        pca.fit_transform(data)
    assert not [k for k in vars(pca) if k.endswith("_")]
    with pytest.raises(NotFittedError):
        check_is_fitted(pca)
    assert acc.n_charges == 1


@pytest.mark.parametrize("epsilon", [0.1, 0.3, 0.5, 1.0, 2.0, 3.0, 6.0, 10.0, 50.0])
@pytest.mark.parametrize("delta", [1e-9, 1e-6, 1e-5, 1e-2])
def test_reported_epsilon_has_no_float_artefact(epsilon, delta):
    """ε → μ → ε gives back the request, and it is a guarantee: δ(ε; μ) ≤ δ
    to a relative 1e-12; one fit's charge is reported as the request."""
    mu = gdp_mu(epsilon, delta)
    assert gdp_epsilon(mu, delta) == epsilon
    assert gdp_delta(mu, epsilon) <= delta * (1 + 1e-12)
    acc = BudgetAccountant(delta=delta)
    acc.spend(mu=mu)
    assert acc.spent == (epsilon, delta)
