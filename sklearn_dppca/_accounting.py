r"""The mathematics of privacy accounting: exact, and about no estimator.

Conversions between :math:`(\varepsilon, \delta)`-DP, Gaussian DP
(:math:`\mu`) and Rényi DP, and the calibration of a Gaussian release
(Balle & Wang 2018; Dong, Roth & Su 2022; Mironov 2017), and the totals a
sequence of charges composes to (:class:`_Totals`).
:mod:`sklearn_dppca.privacy` builds the accountant on them and documents
them (docs/privacy.rst, "§2 Accounting"); nothing here holds state.
"""

import math
import sys
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
from scipy.optimize import brentq
from scipy.special import erfcx, log_ndtr

#: Rényi orders used by :class:`BudgetAccountant` and the RDP helpers.
DEFAULT_ORDERS = np.concatenate(
    [1.0 + np.geomspace(1e-3, 1.0, 60, endpoint=False), np.geomspace(2.0, 1e6, 340)]
)


# --------------------------------------------------------------------------
# Input checks shared by the public functions
# --------------------------------------------------------------------------
_FLOAT_MAX = sys.float_info.max


def beyond_float(value):
    """Whether ``value`` is an integer (not a bool) beyond float64's range,
    which ``float()`` refuses with ``OverflowError``."""
    return (isinstance(value, Integral) and not isinstance(value, bool)
            and abs(value) > _FLOAT_MAX)


def saturating_float(value):
    """``float(value)``; an integer (or long double) beyond float64's range
    the infinite value it rounds to, where ``float()`` raises
    ``OverflowError``."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _shown(value):
    """``repr(value)``, but a few words for an integer beyond a float (whose
    hundreds of digits would fill the message)."""
    if beyond_float(value):
        return "an integer beyond float64's range (about 1.8e308)"
    return repr(value)


def _check_delta(delta):
    if not isinstance(delta, Real) or not 0.0 < delta < 1.0:
        raise ValueError(
            f"delta must be a real number in (0, 1); got {_shown(delta)}.")
    return float(delta)


def _check_nonnegative(value, name, allow_inf=True):
    if beyond_float(value):
        unbounded = " (math.inf is the unbounded value)" if allow_inf else ""
        raise ValueError(f"{name} must lie within float64's range; got "
                         f"{_shown(value)}{unbounded}.")
    ok = (isinstance(value, Real) and not isinstance(value, bool)
          and not math.isnan(value) and value >= 0.0)
    if ok and not allow_inf:
        ok = math.isfinite(value)
    if not ok:
        kind = "a non-negative real number" + ("" if allow_inf else " (finite)")
        raise ValueError(f"{name} must be {kind}; got {value!r}.")
    return float(value)


# --------------------------------------------------------------------------
# Gaussian differential privacy
# --------------------------------------------------------------------------
def _log1mexp(x):
    r""":math:`\log(1 - e^x)` for :math:`x < 0`, accurate on both sides of
    :math:`-\ln 2`."""
    if x > -math.log(2.0):
        return math.log(-math.expm1(x))
    return math.log1p(-math.exp(x))


#: Below this :math:`\mu`, :func:`_log_gdp_delta` integrates
#: :math:`\Phi(a) - \Phi(b)` (:func:`_log_delta_small_mu`).
SMALL_MU = 0.5
_GAUSS_LEGENDRE = tuple(  # plain floats: NumPy scalars made the sum 5 times slower
    tuple(map(float, a)) for a in np.polynomial.legendre.leggauss(24))


def _log_delta_small_mu(mu, epsilon, a):
    r""":math:`\log \delta` for a small :math:`\mu`, where
    :math:`\Phi(a)` and :math:`\Phi(b)` nearly cancel (review 64: at
    :math:`\varepsilon \le 10^{-12}` the difference of their logarithms
    lost 4–5 digits, and :math:`\mu` came out 5% too large at
    :math:`\varepsilon = 0`, :math:`\delta = 10^{-15}`).

    :math:`\delta = I \, (1 - (e^\varepsilon - 1) \Phi(b) / I)` with
    :math:`I = \int_b^a \varphi`, both in units of :math:`\varphi(b)`:
    :math:`I/\varphi(b) = \int_0^\mu e^{-s(2b + s)/2} ds` by 24-point
    Gauss–Legendre (exact to rounding for this analytic integrand on an
    interval of length at most :data:`SMALL_MU`), and
    :math:`\Phi(b)/\varphi(b) = \sqrt{\pi/2}\, \mathrm{erfcx}(-b/\sqrt 2)`;
    in logarithms, so that nothing overflows or underflows far in the
    tail."""
    nodes, weights = _GAUSS_LEGENDRE
    b = a - mu
    # a log-sum-exp over the nodes in plain floats: SciPy's took 0.1 ms a
    # call, NumPy's small arrays 25 µs, and the root-finders call it often
    half = mu / 2.0
    exponents = [-s * (2.0 * b + s) / 2.0 for s in [half * (1.0 + x) for x in nodes]]
    top = max(exponents)
    log_between = math.log(mu / 2.0) + top + math.log(
        math.fsum(w * math.exp(e - top) for w, e in zip(weights, exponents)))
    if epsilon > 0.0:
        log_below = 0.5 * math.log(math.pi / 2.0) + math.log(
            float(erfcx(-b / math.sqrt(2.0))))
        # log(e^ε − 1), without overflow beyond ε ≈ 709.8 (review 65)
        log_em1 = (epsilon + math.log(-math.expm1(-epsilon)) if epsilon > 1.0
                   else math.log(math.expm1(epsilon)))
        x = log_em1 + log_below - log_between
        if not x < 0.0:
            return -math.inf
        log_between += _log1mexp(x)
    return -b * b / 2.0 - 0.5 * math.log(2.0 * math.pi) + log_between


def _log_gdp_delta(mu, epsilon):
    r""":math:`\log \delta(\varepsilon; \mu)` of docs/privacy.rst §2,
    evaluated in log space.

    :math:`\delta = \Phi(a) - e^\varepsilon \Phi(b)` with
    :math:`a = -\varepsilon/\mu + \mu/2` and :math:`b = a - \mu`. Writing
    :math:`\delta = \Phi(a) \, (1 - \exp(\varepsilon + \log \Phi(b) -
    \log \Phi(a)))` avoids the overflow of :math:`e^\varepsilon` and the
    underflow of :math:`\Phi` far in the tails.
    """
    if mu == 0.0 or epsilon == math.inf:
        return -math.inf
    if mu == math.inf:
        return 0.0
    a = -epsilon / mu + mu / 2.0
    if mu <= SMALL_MU:
        return _log_delta_small_mu(mu, epsilon, a)
    log_phi_a = float(log_ndtr(a))
    log_phi_b = float(log_ndtr(a - mu))
    x = epsilon + log_phi_b - log_phi_a
    if not x < 0.0:  # δ underflows: the second term rounds to the first
        return -math.inf
    return log_phi_a + _log1mexp(x)


def gdp_delta(mu, epsilon):
    r"""Smallest :math:`\delta` such that a :math:`\mu`-GDP mechanism is
    :math:`(\varepsilon, \delta)`-DP.

    :math:`\delta(\varepsilon; \mu) = \Phi(-\varepsilon/\mu + \mu/2) -
    e^\varepsilon \Phi(-\varepsilon/\mu - \mu/2)` (Dong, Roth & Su 2022,
    Corollary 2.13), computed in log space so that it is accurate for
    :math:`\varepsilon` from 0 to :math:`10^7` (by a quadrature where
    :math:`\mu \le 1/2`).

    Parameters
    ----------
    mu : float
        GDP parameter, :math:`\mu \ge 0`.
    epsilon : float
        Privacy parameter, :math:`\varepsilon \ge 0` (may be ``inf``).

    Returns
    -------
    delta : float

    Examples
    --------
    >>> from sklearn_dppca.privacy import gdp_delta
    >>> round(gdp_delta(1.0, 1.0), 6)
    0.126937
    """
    mu = _check_nonnegative(mu, "mu")
    epsilon = _check_nonnegative(epsilon, "epsilon")
    return math.exp(_log_gdp_delta(mu, epsilon))


def gdp_epsilon(mu, delta, *, tidy=True):
    r"""Smallest :math:`\varepsilon` such that a :math:`\mu`-GDP mechanism is
    :math:`(\varepsilon, \delta)`-DP.

    Solves :math:`\delta(\varepsilon; \mu) = \delta` for :math:`\varepsilon`
    with a bracketed root-finder on :math:`\log \delta`
    (:math:`\delta(\varepsilon; \mu)` decreases in :math:`\varepsilon`).

    Parameters
    ----------
    mu : float
        GDP parameter, :math:`\mu \ge 0`.
    delta : float
        Target :math:`\delta` in :math:`(0, 1)`.
    tidy : bool, default=True
        Report the value at 12 significant digits where that is a guarantee
        too (no float artefact: :math:`\varepsilon = 1` comes back as
        ``1.0``). ``False`` gives the root itself, for an :math:`\varepsilon`
        that is converted back to :math:`\mu` to calibrate noise (the tidy
        value may be a hair larger).

    Returns
    -------
    epsilon : float
        ``0.0`` when :math:`\delta(0; \mu) \le \delta` already, ``inf`` when
        :math:`\mu` is infinite.

    Examples
    --------
    >>> from sklearn_dppca.privacy import gdp_epsilon, gdp_mu
    >>> round(gdp_epsilon(gdp_mu(1.0, 1e-6), 1e-6), 9)
    1.0
    """
    mu = _check_nonnegative(mu, "mu")
    delta = _check_delta(delta)
    if mu == math.inf:
        return math.inf
    log_target = math.log(delta)
    if _log_gdp_delta(mu, 0.0) <= log_target:
        return 0.0

    def excess(eps):
        return max(_log_gdp_delta(mu, eps), -1e300) - log_target

    hi = max(1.0, mu * mu / 2.0 + 10.0 * mu)
    while math.isfinite(hi) and excess(hi) > 0.0:
        hi *= 2.0
    if not math.isfinite(hi):  # ε ≈ μ²/2 beyond a float
        return math.inf
    root = brentq(excess, 0.0, hi, xtol=1e-300, rtol=1e-14, maxiter=500)
    if not tidy:
        return root
    # The root carries the round-off of the ε → μ → ε round trip (1 comes back
    # as 1.0000000000000022). The same value at 12 significant digits is
    # returned where it is a guarantee too: above the root (δ(ε; μ) decreases
    # in ε: never less than spent), or below it where δ(ε; μ) ≤ δ still holds
    # to the precision of its evaluation (a relative 1e-12 in δ, the accuracy
    # the root itself has).
    short = float(f"{root:.12g}")
    return short if short >= root or excess(short) <= 1e-12 else root


def gdp_mu(epsilon, delta):
    r"""The :math:`\mu` of the Gaussian-DP curve through
    :math:`(\varepsilon, \delta)`.

    A mechanism is :math:`(\varepsilon, \delta)`-DP for exactly those Gaussian
    mechanisms with :math:`s/\sigma \le` ``gdp_mu(epsilon, delta)``. Solves
    :math:`\delta(\varepsilon; \mu) = \delta` by a bracketed root-finder on
    :math:`\log \mu` (:ref:`privacy-accounting`).

    Parameters
    ----------
    epsilon : float
        :math:`\varepsilon \ge 0`; ``inf`` gives ``inf``.
    delta : float
        :math:`\delta` in :math:`(0, 1)`.

    Returns
    -------
    mu : float

    Examples
    --------
    >>> from sklearn_dppca.privacy import gdp_mu
    >>> round(1 / gdp_mu(1.0, 1e-6), 2)  # σ of the analytic Gaussian mechanism
    4.22
    """
    epsilon = _check_nonnegative(epsilon, "epsilon")
    delta = _check_delta(delta)
    if epsilon == math.inf:
        return math.inf
    log_target = math.log(delta)

    def excess(log_mu):
        return max(_log_gdp_delta(math.exp(log_mu), epsilon), -1e300) - log_target

    # μ grows like ε / sqrt(2 ln(1/δ)) for small ε and like sqrt(2ε) for large
    # ε: the smaller of the two, so that the bracket starts finite for every
    # finite ε (ε / sqrt(2 ln(1.25/δ)) alone overflows near the largest float).
    guess = math.log(max(min(epsilon / math.sqrt(2.0 * math.log(1.25 / delta)),
                             math.sqrt(2.0) * math.sqrt(epsilon) + 1.0), 1e-12))
    lo, hi = guess - 1.0, guess + 1.0
    while excess(lo) > 0.0:
        lo -= 2.0
    while excess(hi) < 0.0 and hi < 709.0:  # μ beyond a float: inf
        hi += 2.0
    if excess(hi) < 0.0:
        return math.inf
    return math.exp(brentq(excess, lo, hi, xtol=1e-15, rtol=1e-15, maxiter=500))


def calibrate_gaussian(epsilon, delta, sensitivity=1.0):
    r"""Standard deviation of the exact (analytic) Gaussian mechanism.

    :math:`\sigma` = ``sensitivity / gdp_mu(epsilon, delta)``: the smallest
    noise for which adding :math:`N(0, \sigma^2 I)` to a statistic of L2
    sensitivity ``sensitivity`` is :math:`(\varepsilon, \delta)`-DP (Balle &
    Wang 2018). Valid for every :math:`\varepsilon > 0`, unlike the textbook
    :math:`s \sqrt{2 \ln(1.25/\delta)} / \varepsilon`.

    Parameters
    ----------
    epsilon : float
        :math:`\varepsilon \ge 0`.
    delta : float
        :math:`\delta` in :math:`(0, 1)`.
    sensitivity : float, default=1.0
        L2 sensitivity of the released statistic, :math:`\ge 0`.

    Returns
    -------
    sigma : float

    Raises
    ------
    ValueError
        Where ``sigma`` would be infinite or subnormal (a sensitivity near
        float64's limits): no draw carries such a noise.

    Examples
    --------
    >>> from sklearn_dppca.privacy import calibrate_gaussian
    >>> round(calibrate_gaussian(1.0, 1e-6, sensitivity=2 ** 0.5), 3)
    5.975
    """
    sensitivity = _check_nonnegative(sensitivity, "sensitivity", allow_inf=False)
    sigma = sensitivity / gdp_mu(epsilon, delta)
    if sigma == math.inf or 0.0 < sigma < np.finfo(np.float64).tiny:
        # a noise no draw can carry (inf), or with few or no significant bits
        raise ValueError(
            f"sensitivity / gdp_mu(epsilon, delta) = {sigma!r} is outside "
            f"float64's normal range (sensitivity={sensitivity!r}): express "
            "the statistic in units where its sensitivity is nearer 1.")
    return sigma


# --------------------------------------------------------------------------
# Rényi differential privacy
# --------------------------------------------------------------------------
def _check_orders(orders):
    orders = np.asarray(orders, dtype=float)
    if orders.ndim != 1 or orders.size == 0 or not np.all(
            (orders > 1.0) & np.isfinite(orders)):
        raise ValueError("orders must be a non-empty 1-D array of finite Rényi "
                         "orders > 1.")
    return orders


def _check_curve(rdp, orders):
    """An RDP curve on ``orders``: non-negative (``inf`` allowed), no NaN."""
    rdp = np.asarray(rdp, dtype=float)
    if rdp.shape != orders.shape:
        raise ValueError("rdp and orders must have the same shape.")
    if not np.all(rdp >= 0.0):
        raise ValueError("rdp must be a non-negative curve (inf allowed, no NaN).")
    return rdp


def gaussian_rdp(mu, orders=DEFAULT_ORDERS):
    r"""RDP curve of a :math:`\mu`-GDP Gaussian release:
    :math:`\varepsilon(\lambda) = \lambda \mu^2 / 2`.

    Parameters
    ----------
    mu : float
        :math:`s / \sigma` of the release.
    orders : array-like of float, default=DEFAULT_ORDERS
        Rényi orders :math:`\lambda > 1`.

    Returns
    -------
    rdp : ndarray of shape (len(orders),)

    Examples
    --------
    >>> from sklearn_dppca.privacy import gaussian_rdp
    >>> gaussian_rdp(1.0, [2.0, 4.0])
    array([1., 2.])
    """
    mu = _check_nonnegative(mu, "mu", allow_inf=False)
    return _check_orders(orders) * (mu * mu / 2.0)


def rdp_to_epsilon(rdp, delta, orders=DEFAULT_ORDERS):
    r"""Convert an RDP curve to :math:`(\varepsilon, \delta)`-DP with the
    improved conversion.

    :math:`\varepsilon = \min_\lambda [\varepsilon_{\mathrm{RDP}}(\lambda) +
    \ln(1 - 1/\lambda) - (\ln \delta + \ln \lambda)/(\lambda - 1)]`
    (Canonne, Kamath & Steinke 2020; Asoodeh et al. 2020).

    Parameters
    ----------
    rdp : array-like of shape (len(orders),)
        RDP guarantees :math:`\varepsilon_{\mathrm{RDP}}(\lambda)` at
        ``orders``.
    delta : float
        Target :math:`\delta` in :math:`(0, 1)`.
    orders : array-like of float, default=DEFAULT_ORDERS

    Returns
    -------
    epsilon : float
        Non-negative.
    order : float
        The order that attains the minimum.

    Examples
    --------
    >>> from sklearn_dppca.privacy import gaussian_rdp, rdp_to_epsilon
    >>> eps, order = rdp_to_epsilon(gaussian_rdp(0.5), 1e-6)
    >>> round(eps, 2)
    2.42
    """
    delta = _check_delta(delta)
    orders = _check_orders(orders)
    rdp = _check_curve(rdp, orders)
    eps = rdp + np.log1p(-1.0 / orders) - (math.log(delta) + np.log(orders)) / (
        orders - 1.0
    )
    i = int(np.nanargmin(eps))
    return max(float(eps[i]), 0.0), float(orders[i])


def repeated_rdp(rdp, theta, orders=DEFAULT_ORDERS):
    r"""RDP of running a mechanism a :math:`\mathrm{Geometric}(\theta)` number
    of times.

    Papernot & Steinke (2022), Theorem 2 with :math:`\eta = 1`: if one trial
    is :math:`(\lambda, \varepsilon_Q(\lambda))`-RDP, running
    :math:`K \sim \mathrm{Geometric}(\theta)` trials
    (:math:`P[K = k] = \theta (1 - \theta)^{k-1}`) and releasing only the best
    is :math:`(\lambda, \varepsilon'(\lambda))`-RDP with
    :math:`\varepsilon'(\lambda) = \varepsilon_Q(\lambda) + \min_{\hat\lambda}
    [2 (1 - 1/\hat\lambda) \varepsilon_Q(\hat\lambda) + 2 \ln(1/\theta)/\hat\lambda] +
    \ln(1/\theta)/(\lambda - 1)`. The minimum runs over ``orders`` and
    :math:`\hat\lambda = 1` (where the bracket is :math:`2 \ln(1/\theta)`).

    Parameters
    ----------
    rdp : array-like of shape (len(orders),)
        RDP curve :math:`\varepsilon_Q` of one trial.
    theta : float
        Stopping probability in :math:`(0, 1]`.
    orders : array-like of float, default=DEFAULT_ORDERS

    Returns
    -------
    rdp : ndarray of shape (len(orders),)

    Examples
    --------
    >>> from sklearn_dppca.privacy import gaussian_rdp, repeated_rdp
    >>> one = gaussian_rdp(0.1)
    >>> bool((repeated_rdp(one, 0.1) > one).all())
    True
    """
    orders = _check_orders(orders)
    rdp = _check_curve(rdp, orders)
    if not isinstance(theta, Real) or not 0.0 < theta <= 1.0:
        raise ValueError(f"theta must be in (0, 1]; got {theta!r}.")
    log_inv = -math.log(theta)
    hat = 2.0 * (1.0 - 1.0 / orders) * rdp + 2.0 * log_inv / orders
    best_hat = min(float(np.min(hat)), 2.0 * log_inv)
    return rdp + best_hat + log_inv / (orders - 1.0)


# ------------------------------------------------ the charges composed
def _log_keep(delta):
    r""":math:`\log(1 - \delta)` (:math:`-\infty` for :math:`\delta = 1`)."""
    return -math.inf if delta >= 1.0 else math.log1p(-delta)


class _Charge(NamedTuple):
    r"""One charge: a Gaussian/RDP release, or a release in
    :math:`(\varepsilon, \delta)`."""

    mu: float
    rdp: np.ndarray  # or None
    release: tuple  # (epsilon, delta) of a release of the user's own, or None


class _Totals(NamedTuple):
    """What the charges so far compose to, in the parts the bound needs."""

    mu_sq: float  # Σ μ² of the Gaussian releases
    rdp: np.ndarray  # Σ of the RDP curves
    has_rdp: bool
    n_fits: int  # charges given as mu or rdp
    eps_user: float  # Σ ε_i of the releases given as (epsilon, delta)
    keep_user: float  # Σ log(1 − δ_i) of those

    @classmethod
    def empty(cls):
        return cls(0.0, np.zeros_like(DEFAULT_ORDERS), False, 0, 0.0, 0.0)

    def add(self, charge):
        if charge.release is not None:
            eps, delta = charge.release
            return self._replace(eps_user=self.eps_user + eps,
                                 keep_user=self.keep_user + _log_keep(delta))
        return self._replace(
            mu_sq=self.mu_sq + charge.mu * charge.mu,
            rdp=self.rdp if charge.rdp is None else self.rdp + charge.rdp,
            has_rdp=self.has_rdp or charge.rdp is not None,
            n_fits=self.n_fits + 1,
        )


def _compose(rows):
    """:class:`_Totals` of stored charges, in their order."""
    totals = _Totals.empty()
    for row in rows:
        stored = row["rdp"]
        if isinstance(stored, dict):  # a release stated in (ε, δ)
            charge = _Charge(0.0, None, (stored["epsilon"], stored["delta"]))
        else:
            curve = None if stored is None else np.asarray(stored, dtype=float)
            charge = _Charge(row["mu"], curve, None)
        totals = totals.add(charge)
    return totals
