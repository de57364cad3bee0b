"""Privacy accounting: Gaussian DP, Rényi DP and a shared budget accountant.

Every release this package makes is a Gaussian mechanism ``f(A) + N(0, σ² I)``
with L2 sensitivity ``s``. Such a release is ``μ``-GDP with ``μ = s / σ``
(Dong, Roth & Su 2022) and GDP composes exactly: releases with ``μ_j`` give
``sqrt(Σ μ_j²)``-GDP. This module converts between GDP and ``(ε, δ)``
exactly (``../shared/ALGORITHMS.md`` §2), calibrates the analytic Gaussian
mechanism (Balle & Wang 2018), provides the Rényi-DP helpers used by the
random-length private selection, and keeps a :class:`BudgetAccountant` that
estimators charge before they touch the data.

This module imports nothing from the estimators.
"""

# Notation follows ALGORITHMS.md: μ (GDP parameter), λ (Rényi order), θ
# (stopping probability of the geometric number of repetitions).

import math
import threading
import warnings
from numbers import Real

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr

__all__ = [
    "BudgetAccountant",
    "BudgetExceededError",
    "DEFAULT_ORDERS",
    "PrivacyLeakWarning",
    "calibrate_gaussian",
    "gaussian_rdp",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "get_default_accountant",
    "rdp_to_epsilon",
    "repeated_rdp",
    "set_default_accountant",
]


class PrivacyLeakWarning(UserWarning):
    """Warning raised when a fit is not differentially private as configured.

    Raised, for example, when ``data_norm`` is estimated from the data or when
    a fixed ``random_state`` makes the noise predictable.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> from sklearn_dppca import PrivacyLeakWarning, PrivatePCA
    >>> X = np.random.default_rng(0).normal(size=(100, 3))
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = PrivatePCA(2, data_norm=None).fit(X)  # bound read from the data
    >>> [w.category.__name__ for w in caught]
    ['PrivacyLeakWarning']
    """


class BudgetExceededError(ValueError):
    """Raised when a fit would take a :class:`BudgetAccountant` over its budget.

    The fit is refused before the data is read and nothing is charged.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca import BudgetAccountant, BudgetExceededError, PrivatePCA
    >>> X = np.random.default_rng(0).normal(size=(100, 3))
    >>> budget = BudgetAccountant(epsilon=1.0)
    >>> pca = PrivatePCA(2, epsilon=1.0, data_norm=5.0, accountant=budget).fit(X)
    >>> try:
    ...     pca.fit(X)  # a second fit at epsilon=1 would take the total over 1
    ... except BudgetExceededError:
    ...     print("refused; charged fits:", budget.n_charges)
    refused; charged fits: 1
    >>> issubclass(BudgetExceededError, ValueError)
    True
    """


#: Rényi orders used by :class:`BudgetAccountant` and the RDP helpers.
DEFAULT_ORDERS = np.concatenate(
    [1.0 + np.geomspace(1e-3, 1.0, 60, endpoint=False), np.geomspace(2.0, 1e6, 340)]
)


# --------------------------------------------------------------------------
# Input checks shared by the public functions
# --------------------------------------------------------------------------
def _check_delta(delta):
    if not isinstance(delta, Real) or not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be a real number in (0, 1); got {delta!r}.")
    return float(delta)


def _check_nonnegative(value, name, allow_inf=True):
    ok = isinstance(value, Real) and not math.isnan(value) and value >= 0.0
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
    """``log(1 - exp(x))`` for ``x < 0``, accurate on both sides of ``-ln 2``."""
    if x > -math.log(2.0):
        return math.log(-math.expm1(x))
    return math.log1p(-math.exp(x))


def _log_gdp_delta(mu, epsilon):
    """``log δ(ε; μ)`` of ALGORITHMS.md §2, evaluated in log space.

    ``δ = Φ(a) - e^ε Φ(b)`` with ``a = -ε/μ + μ/2`` and ``b = a - μ``. Writing
    ``δ = Φ(a) (1 - exp(ε + log Φ(b) - log Φ(a)))`` avoids the overflow of
    ``e^ε`` and the underflow of ``Φ`` far in the tails.
    """
    if mu == 0.0 or epsilon == math.inf:
        return -math.inf
    if mu == math.inf:
        return 0.0
    a = -epsilon / mu + mu / 2.0
    log_phi_a = float(log_ndtr(a))
    log_phi_b = float(log_ndtr(a - mu))
    x = epsilon + log_phi_b - log_phi_a
    if not x < 0.0:  # δ underflows: the second term rounds to the first
        return -math.inf
    return log_phi_a + _log1mexp(x)


def gdp_delta(mu, epsilon):
    """Smallest ``δ`` such that a ``μ``-GDP mechanism is ``(ε, δ)``-DP.

    ``δ(ε; μ) = Φ(-ε/μ + μ/2) - e^ε Φ(-ε/μ - μ/2)`` (Dong, Roth & Su 2022,
    Corollary 2.13), computed in log space so that it is accurate for
    ``ε`` from ``1e-3`` to ``1e7``.

    Parameters
    ----------
    mu : float
        GDP parameter, ``μ ≥ 0``.
    epsilon : float
        Privacy parameter, ``ε ≥ 0`` (may be ``inf``).

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


def gdp_epsilon(mu, delta):
    """Smallest ``ε`` such that a ``μ``-GDP mechanism is ``(ε, δ)``-DP.

    Solves ``δ(ε; μ) = δ`` for ``ε`` with a bracketed root-finder on
    ``log δ`` (``δ(ε; μ)`` decreases in ``ε``).

    Parameters
    ----------
    mu : float
        GDP parameter, ``μ ≥ 0``.
    delta : float
        Target ``δ`` in ``(0, 1)``.

    Returns
    -------
    epsilon : float
        ``0.0`` when ``δ(0; μ) ≤ δ`` already, ``inf`` when ``μ`` is infinite.

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
    while excess(hi) > 0.0:
        hi *= 2.0
    return brentq(excess, 0.0, hi, xtol=1e-300, rtol=1e-14, maxiter=500)


def gdp_mu(epsilon, delta):
    """The ``μ`` of the Gaussian-DP curve through ``(ε, δ)``.

    A mechanism is ``(ε, δ)``-DP for exactly those Gaussian mechanisms with
    ``s/σ ≤ gdp_mu(ε, δ)``. Solves ``δ(ε; μ) = δ`` by a bracketed root-finder
    on ``log μ`` (ALGORITHMS.md §2).

    Parameters
    ----------
    epsilon : float
        ``ε ≥ 0``; ``inf`` gives ``inf``.
    delta : float
        ``δ`` in ``(0, 1)``.

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

    # μ grows like ε / sqrt(2 ln(1/δ)) for small ε and like sqrt(2ε) for large ε.
    guess = math.log(max(epsilon / math.sqrt(2.0 * math.log(1.25 / delta)), 1e-12))
    lo, hi = guess - 1.0, guess + 1.0
    while excess(lo) > 0.0:
        lo -= 2.0
    while excess(hi) < 0.0:
        hi += 2.0
    return math.exp(brentq(excess, lo, hi, xtol=1e-15, rtol=1e-15, maxiter=500))


def calibrate_gaussian(epsilon, delta, sensitivity=1.0):
    """Standard deviation of the exact (analytic) Gaussian mechanism.

    ``σ = sensitivity / gdp_mu(ε, δ)``: the smallest noise for which adding
    ``N(0, σ² I)`` to a statistic of L2 sensitivity ``sensitivity`` is
    ``(ε, δ)``-DP (Balle & Wang 2018). Valid for every ``ε > 0``, unlike the
    textbook ``s sqrt(2 ln(1.25/δ)) / ε``.

    Parameters
    ----------
    epsilon : float
        ``ε ≥ 0``.
    delta : float
        ``δ`` in ``(0, 1)``.
    sensitivity : float, default=1.0
        L2 sensitivity of the released statistic, ``≥ 0``.

    Returns
    -------
    sigma : float

    Examples
    --------
    >>> from sklearn_dppca.privacy import calibrate_gaussian
    >>> round(calibrate_gaussian(1.0, 1e-6, sensitivity=2 ** 0.5), 3)
    5.975
    """
    sensitivity = _check_nonnegative(sensitivity, "sensitivity", allow_inf=False)
    return sensitivity / gdp_mu(epsilon, delta)


# --------------------------------------------------------------------------
# Rényi differential privacy
# --------------------------------------------------------------------------
def _check_orders(orders):
    orders = np.asarray(orders, dtype=float)
    if orders.ndim != 1 or orders.size == 0 or not np.all(orders > 1.0):
        raise ValueError("orders must be a non-empty 1-D array of Rényi orders > 1.")
    return orders


def gaussian_rdp(mu, orders=DEFAULT_ORDERS):
    """RDP curve of a ``μ``-GDP Gaussian release: ``ε(λ) = λ μ² / 2``.

    Parameters
    ----------
    mu : float
        ``s / σ`` of the release.
    orders : array-like of float, default=DEFAULT_ORDERS
        Rényi orders ``λ > 1``.

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
    """Convert an RDP curve to ``(ε, δ)``-DP with the improved conversion.

    ``ε = min_λ [ε_RDP(λ) + ln(1 - 1/λ) - (ln δ + ln λ)/(λ - 1)]``
    (Canonne, Kamath & Steinke 2020; Asoodeh et al. 2020).

    Parameters
    ----------
    rdp : array-like of shape (len(orders),)
        RDP guarantees ``ε_RDP(λ)`` at ``orders``.
    delta : float
        Target ``δ`` in ``(0, 1)``.
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
    rdp = np.asarray(rdp, dtype=float)
    if rdp.shape != orders.shape:
        raise ValueError("rdp and orders must have the same shape.")
    eps = rdp + np.log1p(-1.0 / orders) - (math.log(delta) + np.log(orders)) / (
        orders - 1.0
    )
    i = int(np.nanargmin(eps))
    return max(float(eps[i]), 0.0), float(orders[i])


def repeated_rdp(rdp, theta, orders=DEFAULT_ORDERS):
    """RDP of running a mechanism a ``Geometric(θ)`` number of times.

    Papernot & Steinke (2022), Theorem 2 with ``η = 1``: if one trial is
    ``(λ, ε_Q(λ))``-RDP, running ``K ~ Geometric(θ)`` trials
    (``P[K = k] = θ (1 - θ)^{k-1}``) and releasing only the best is
    ``(λ, ε'(λ))``-RDP with ``ε'(λ) = ε_Q(λ) + min_{λ̂} [2 (1 - 1/λ̂) ε_Q(λ̂) +
    2 ln(1/θ)/λ̂] + ln(1/θ)/(λ - 1)``. The minimum runs over ``orders`` and
    ``λ̂ = 1`` (where the bracket is ``2 ln(1/θ)``).

    Parameters
    ----------
    rdp : array-like of shape (len(orders),)
        RDP curve ``ε_Q`` of one trial.
    theta : float
        Stopping probability in ``(0, 1]``.
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
    rdp = np.asarray(rdp, dtype=float)
    if rdp.shape != orders.shape:
        raise ValueError("rdp and orders must have the same shape.")
    if not isinstance(theta, Real) or not 0.0 < theta <= 1.0:
        raise ValueError(f"theta must be in (0, 1]; got {theta!r}.")
    log_inv = -math.log(theta)
    hat = 2.0 * (1.0 - 1.0 / orders) * rdp + 2.0 * log_inv / orders
    best_hat = min(float(np.min(hat)), 2.0 * log_inv)
    return rdp + best_hat + log_inv / (orders - 1.0)


# --------------------------------------------------------------------------
# Budget accountant
# --------------------------------------------------------------------------
class BudgetAccountant:
    """Shared privacy budget that composes every fit charged to it exactly.

    Gaussian releases are recorded by their GDP parameter ``μ`` and composed
    exactly (``μ² = Σ μ_j²``); releases described by an RDP curve are composed
    in RDP together with the Gaussian ones (``λ μ²/2``) and converted with the
    improved conversion. :attr:`spent` is the composed ``ε`` at the
    accountant's ``delta``.

    A fit checks and charges atomically, *before* it reads the data; a fit
    that would take the total over ``epsilon`` raises
    :class:`BudgetExceededError` and is not charged.

    The accountant is shared, never copied, by :func:`copy.deepcopy` and so by
    :func:`sklearn.base.clone`: a ``GridSearchCV`` or ``cross_val_score`` over
    an estimator holding an accountant charges every fit it makes to that one
    accountant. A pickled copy (for instance one sent to a joblib worker
    *process*) cannot report back, so it refuses to be charged; use
    ``n_jobs=1`` or a threading backend with a shared accountant.

    Parameters
    ----------
    epsilon : float, default=inf
        Total ``ε`` allowed, at ``delta``.
    delta : float, default=1e-6
        The ``δ`` at which the budget is stated and :attr:`spent` is reported.

    Examples
    --------
    >>> from sklearn_dppca import BudgetAccountant
    >>> from sklearn_dppca.privacy import gdp_mu
    >>> acc = BudgetAccountant(epsilon=3.0, delta=1e-6)
    >>> for _ in range(4):
    ...     _ = acc.spend(gdp_mu(1.0, 1e-6))
    >>> eps, delta = acc.spent
    >>> round(eps, 3), delta  # four fits at ε=1 compose to far less than 4
    (2.123, 1e-06)
    """

    def __init__(self, epsilon=math.inf, delta=1e-6):
        if not isinstance(epsilon, Real) or not epsilon > 0.0:
            raise ValueError(f"epsilon must be a positive number; got {epsilon!r}.")
        self.epsilon = float(epsilon)
        self.delta = _check_delta(delta)
        self._lock = threading.Lock()
        self._mu_sq = 0.0
        self._rdp = np.zeros_like(DEFAULT_ORDERS)
        self._has_rdp = False
        self._n_charges = 0
        self._detached = False

    # -- sharing semantics --------------------------------------------------
    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __getstate__(self):
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._detached = True

    def __repr__(self):
        eps, _ = self.spent
        return (
            f"BudgetAccountant(epsilon={self.epsilon!r}, delta={self.delta!r}; "
            f"spent epsilon={eps:.6g} over {self._n_charges} charge(s))"
        )

    # -- composition --------------------------------------------------------
    def _epsilon_of(self, mu_sq, rdp, has_rdp):
        if mu_sq == 0.0 and not has_rdp:
            return 0.0
        if mu_sq == math.inf:  # a non-private (epsilon=inf) fit was charged
            return math.inf
        if not has_rdp:
            return gdp_epsilon(math.sqrt(mu_sq), self.delta)
        total = rdp + DEFAULT_ORDERS * (mu_sq / 2.0)
        return rdp_to_epsilon(total, self.delta)[0]

    @staticmethod
    def _check_charge(mu, rdp):
        if mu is None and rdp is None:
            raise ValueError("Give the charge as mu (GDP), rdp (RDP curve) or both.")
        # mu = inf is the charge of a non-private fit (epsilon=inf): only an
        # unlimited accountant admits it.
        mu = 0.0 if mu is None else _check_nonnegative(mu, "mu")
        if rdp is not None:
            rdp = np.asarray(rdp, dtype=float)
            if rdp.shape != DEFAULT_ORDERS.shape or not np.all(rdp >= 0):
                raise ValueError(
                    "rdp must be a non-negative curve on privacy.DEFAULT_ORDERS."
                )
        return mu, rdp

    def _after(self, mu, rdp):
        mu_sq = self._mu_sq + mu * mu
        if rdp is None:
            return mu_sq, self._rdp, self._has_rdp
        return mu_sq, self._rdp + rdp, True

    def check(self, mu=None, *, rdp=None):
        """Total ``(ε, δ)`` that spending this charge would leave; charges nothing.

        Raises :class:`BudgetExceededError` if it would exceed the budget.
        """
        mu, rdp = self._check_charge(mu, rdp)
        with self._lock:
            return self._check_locked(mu, rdp)

    def _check_locked(self, mu, rdp):
        eps = self._epsilon_of(*self._after(mu, rdp))
        if eps > self.epsilon * (1.0 + 1e-9):
            spent = self._epsilon_of(self._mu_sq, self._rdp, self._has_rdp)
            raise BudgetExceededError(
                f"This fit would bring the privacy spent to epsilon={eps:.6g} at "
                f"delta={self.delta:g}, over the accountant's budget "
                f"epsilon={self.epsilon:g} (already spent: {spent:.6g}). The fit "
                "was refused before reading the data and nothing was charged."
            )
        return eps, self.delta

    def spend(self, mu=None, *, rdp=None):
        """Check and charge one release, atomically.

        Parameters
        ----------
        mu : float, optional
            GDP parameter of a Gaussian release (or of several, composed).
        rdp : array-like of shape (len(DEFAULT_ORDERS),), optional
            RDP curve of a release that is not GDP.

        Returns
        -------
        spent : tuple of float
            ``(ε, δ)`` spent in total after this charge.
        """
        mu, rdp = self._check_charge(mu, rdp)
        with self._lock:
            if self._detached:
                raise RuntimeError(
                    "This BudgetAccountant is an unpickled copy (for instance one "
                    "sent to a joblib worker process); charges to it would never "
                    "reach the original. Use n_jobs=1 or a threading backend, or "
                    "give each process its own accountant."
                )
            spent = self._check_locked(mu, rdp)
            self._mu_sq, self._rdp, self._has_rdp = self._after(mu, rdp)
            self._n_charges += 1
            return spent

    @property
    def spent(self):
        """``(ε, δ)`` spent so far, composed exactly; ``(0.0, 0.0)`` before any."""
        with self._lock:
            eps = self._epsilon_of(self._mu_sq, self._rdp, self._has_rdp)
            return (eps, self.delta if self._n_charges else 0.0)

    @property
    def n_charges(self):
        """Number of charges (fits) recorded."""
        return self._n_charges

    def remaining(self):
        """Largest ``ε`` one more Gaussian fit at this accountant's ``δ`` may spend.

        Returns
        -------
        epsilon : float
            ``inf`` for an unlimited accountant, ``0.0`` when it is spent.
        """
        if self.epsilon == math.inf:
            return math.inf
        with self._lock:
            state = (self._mu_sq, self._rdp, self._has_rdp)
        budget_mu = gdp_mu(self.epsilon, self.delta)

        def total(mu):
            mu_sq, rdp, has_rdp = state
            return self._epsilon_of(mu_sq + mu * mu, rdp, has_rdp)

        if not state[2]:  # exact in GDP
            left = budget_mu**2 - state[0]
            return gdp_epsilon(math.sqrt(left), self.delta) if left > 0 else 0.0
        lo, hi = 0.0, budget_mu
        if total(lo) >= self.epsilon:
            return 0.0
        for _ in range(100):
            mid = (lo + hi) / 2.0
            lo, hi = (mid, hi) if total(mid) <= self.epsilon else (lo, mid)
        return gdp_epsilon(lo, self.delta) if lo > 0 else 0.0

    def reset(self):
        """Forget every charge."""
        with self._lock:
            self._mu_sq, self._has_rdp, self._n_charges = 0.0, False, 0
            self._rdp = np.zeros_like(DEFAULT_ORDERS)


_default_accountant = BudgetAccountant()
_default_lock = threading.Lock()


def get_default_accountant():
    """The process-wide accountant charged by estimators given ``accountant=None``.

    Its budget is unlimited unless replaced with :func:`set_default_accountant`.
    It is per process: fits in joblib worker processes charge their own.

    Examples
    --------
    >>> from sklearn_dppca.privacy import get_default_accountant
    >>> get_default_accountant().epsilon
    inf
    """
    return _default_accountant


def set_default_accountant(accountant):
    """Replace the process-wide default accountant; returns the previous one.

    Examples
    --------
    >>> from sklearn_dppca import BudgetAccountant
    >>> from sklearn_dppca.privacy import get_default_accountant, set_default_accountant
    >>> previous = set_default_accountant(BudgetAccountant(epsilon=2.0))
    >>> get_default_accountant().epsilon
    2.0
    >>> _ = set_default_accountant(previous)  # restore the unlimited default
    >>> get_default_accountant().epsilon
    inf
    """
    global _default_accountant
    if not isinstance(accountant, BudgetAccountant):
        raise TypeError("accountant must be a BudgetAccountant.")
    with _default_lock:
        previous, _default_accountant = _default_accountant, accountant
    return previous


def _warn_leak(message):
    warnings.warn(message, PrivacyLeakWarning, stacklevel=3)
