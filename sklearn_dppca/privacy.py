r"""Privacy accounting: Gaussian DP, Rényi DP and a shared budget accountant.

Every release this package makes is a Gaussian mechanism
:math:`f(A) + N(0, \sigma^2 I)` with L2 sensitivity :math:`s`. Such a release
is :math:`\mu`-GDP with :math:`\mu = s / \sigma` (Dong, Roth & Su 2022) and
GDP composes exactly: releases with :math:`\mu_j` give
:math:`\sqrt{\sum_j \mu_j^2}`-GDP. This module converts between GDP and
:math:`(\varepsilon, \delta)` exactly (:ref:`privacy-accounting`), calibrates
the analytic Gaussian mechanism (Balle & Wang 2018), provides the Rényi-DP
helpers used by the random-length private selection, and keeps a
:class:`BudgetAccountant` that estimators charge before they release anything.
An accountant keeps its charges in memory or, given a ``path``, in a ledger
file shared by processes and restarts (stored by ``sklearn_dppca._ledger``;
the accounting is here, its mathematics in ``sklearn_dppca._accounting``, the
checks of a charge's arguments in ``sklearn_dppca._charges``; the warning
rules, ``PrivacyLeakWarning`` and ``private_computation``, in
``sklearn_dppca._warning_rules``, re-exported here).

This module imports nothing from the estimators.
"""

# Notation follows docs/privacy.rst: μ (GDP parameter), λ (Rényi order), θ
# (stopping probability of the geometric number of repetitions).

import datetime
import hashlib
import json
import math
import os
import threading
import weakref
from numbers import Integral
from typing import NamedTuple

from . import _accounting
from ._accounting import (  # the mathematics; the accountant is here
    _compose,
    _log_keep,
    _Totals,
    calibrate_gaussian,
    gaussian_rdp,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
    rdp_to_epsilon,
    repeated_rdp,
)
from ._charges import (  # a charge's arguments and record, checked
    _apart,
    _check_budget,
    _check_budget_delta,
    _check_label,
    _describe,
    _pair,
    _parse_charge,
    _release_text,
)
from ._ledger import (
    Ledger,
    LedgerError,
    LedgerIntegrityError,
    curve_text,
    float_text,
    params_text,
)
from ._refusals import refusal
from ._warning_rules import (  # noqa: F401  (the warning rules, re-exported)
    PrivacyLeakWarning,
    _outside_stacklevel,
    _warn_if_delta_large,
    _warn_if_not_private,
    _warn_leak,
    private_computation,
)

#: Rényi orders used by :class:`BudgetAccountant` and the RDP helpers.
DEFAULT_ORDERS = _accounting.DEFAULT_ORDERS

# documented and imported from here
for _function in (calibrate_gaussian, gaussian_rdp, gdp_delta, gdp_epsilon, gdp_mu,
                  rdp_to_epsilon, repeated_rdp, PrivacyLeakWarning,
                  private_computation):
    _function.__module__ = __name__
del _function

__all__ = [
    "Budget",
    "BudgetAccountant",
    "BudgetExceededError",
    "DEFAULT_ORDERS",
    "LedgerError",
    "LedgerIntegrityError",
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


class BudgetExceededError(ValueError):
    """Raised when a fit would take a :class:`BudgetAccountant` over its budget.

    The fit is refused before the data is read (or, where another fit took
    a shared budget meanwhile, at its charge, before its first release), and
    nothing is charged.

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


# --------------------------------------------------------------------------
# Budget accountant
# --------------------------------------------------------------------------
#: Digest of the Rényi orders of stored RDP curves (a ledger keeps its own).
_ORDERS_DIGEST = hashlib.sha256(
    json.dumps([repr(float(a)) for a in DEFAULT_ORDERS]).encode()
).hexdigest()
#: In-memory accountants of this process (a forked child detaches them).
_in_memory = weakref.WeakSet()
_TOLERANCE = 1e-9  # relative slack of the budget check (rounding of μ² sums)


def _read_only(name):
    def get(self):
        return getattr(self, "_" + name)

    def refuse(self, value):
        raise AttributeError(
            f"BudgetAccountant.{name} is read-only: a budget cannot be changed "
            "after it is created (that would let spent fits through again). "
            "Create a new accountant for a new budget."
        )

    return property(get, refuse, doc=f"The budget's ``{name}`` (read-only).")


class Budget(NamedTuple):
    r"""A privacy guarantee or budget, ``(epsilon, delta)``.

    A tuple: ``eps, delta = accountant.spent`` unpacks it, and it compares
    equal to the plain tuple. Returned by
    :attr:`~sklearn_dppca.BudgetAccountant.spent`,
    :meth:`~sklearn_dppca.BudgetAccountant.total`,
    :meth:`~sklearn_dppca.BudgetAccountant.check`,
    :meth:`~sklearn_dppca.BudgetAccountant.spend` and ``remaining(k,
    delta=...)``.

    Examples
    --------
    >>> from sklearn_dppca.privacy import Budget
    >>> Budget(1.0, 1e-6)
    Budget(epsilon=1.0, delta=1e-06)
    >>> Budget(1.0, 1e-6) == (1.0, 1e-6)
    True

    Order is that of guarantees, coordinate by coordinate (diffprivlib's):
    ``a >= b`` when ``a`` is at least ``b`` in both :math:`\varepsilon` and
    :math:`\delta`, not the lexicographic order of tuples, under which a spend
    of ``(1.0, 1e-6)`` would be ``>= (0.5, 1.0)``:

    >>> Budget(1.0, 1e-6) >= (0.5, 1.0), Budget(1.0, 1e-6) >= (0.5, 1e-7)
    (False, True)
    """

    epsilon: float
    delta: float

    def __ge__(self, other):
        pair = _pair(other)
        if pair is None:
            return NotImplemented
        return self.epsilon >= pair[0] and self.delta >= pair[1]

    def __le__(self, other):
        pair = _pair(other)
        if pair is None:
            return NotImplemented
        return self.epsilon <= pair[0] and self.delta <= pair[1]

    def __gt__(self, other):
        ge = self.__ge__(other)
        return ge if ge is NotImplemented else ge and tuple(self) != tuple(other)

    def __lt__(self, other):
        le = self.__le__(other)
        return le if le is NotImplemented else le and tuple(self) != tuple(other)


class BudgetAccountant:
    r"""Shared privacy budget that composes every fit charged to it exactly.

    Gaussian releases are composed exactly in GDP
    (:math:`\mu^2 = \sum_j \mu_j^2`), releases described by an RDP curve in
    RDP with them; :attr:`spent` is the composed :math:`\varepsilon` at the
    accountant's ``delta``. Releases of your own, stated as
    :math:`(\varepsilon, \delta)`-DP (``spend(epsilon, delta)``, as in
    ``diffprivlib``), add by basic composition (:ref:`own-releases`). A fit
    checks and charges atomically, *before* it releases anything; one that
    would go over ``epsilon`` raises :class:`BudgetExceededError`, uncharged.

    **In memory** (``path=None``) the record lives with the process, shared
    (never copied) by :func:`sklearn.base.clone`, so a ``GridSearchCV``
    charges every fit to it; a copy in another process refuses to be
    charged. **On a ledger** (``path="budget.db"``) every charge is a row of
    an append-only, hash-chained SQLite file shared by every process and
    thread that opens it, checked and charged in one transaction; it pickles
    as its path, so joblib workers charge the same ledger (:ref:`ledgers`).
    ``with accountant:`` makes it the default accountant inside the block,
    in the thread or task that entered it and the work started there
    (see :func:`~sklearn_dppca.privacy.get_default_accountant`).

    Parameters
    ----------
    epsilon : float, default=None
        Total :math:`\varepsilon` allowed, at ``delta``; ``None``: unlimited
        in memory, or the ledger's own budget. Read-only after creation.
    delta : float, default=None
        The :math:`\delta` at which the budget is stated and :attr:`spent` is
        reported, in :math:`[0, 1)` (``0``: releases of your own that are pure
        :math:`\varepsilon`-DP, and no Gaussian fit); ``None``: ``1e-6``, or
        the ledger's own. Read-only.
    path : str or path-like, default=None
        Ledger file. A new file needs ``epsilon``, and is created readable by
        its owner only; an existing one is opened with its stored budget
        (giving another budget is an error). A ledger is never created over
        an existing file: an empty or other file is an error. Opened without
        a budget, a ledger's budget is whatever the file holds: only
        ``verify(anchor=...)`` pins it (see :ref:`ledger-anchors`).
    label : str, default=None
        Recorded with every charge made through this accountant (a
        :meth:`spend` may give its own).

    Examples
    --------
    >>> from sklearn_dppca import BudgetAccountant
    >>> from sklearn_dppca.privacy import gdp_mu
    >>> acc = BudgetAccountant(epsilon=3.0, delta=1e-6)
    >>> for _ in range(4):
    ...     _ = acc.spend(mu=gdp_mu(1.0, 1e-6))
    >>> eps, delta = acc.spent
    >>> round(eps, 3), delta  # four fits at ε=1 compose to far less than 4
    (2.123, 1e-06)
    >>> len(acc), round(acc.remaining(), 3), round(acc.remaining(2), 3)
    (4, 1.969, 1.351)
    >>> round(acc.spend(0.5, 0.0).epsilon, 3)  # a 0.5-DP release of your own
    2.623
    """

    def __init__(self, epsilon=None, delta=None, *, path=None, label=None,
                 spent_budget=None):
        _check_label(label)
        self.label = label
        self._lock = threading.Lock()
        self._detached = False
        self._ledger = None
        if path is not None:
            self._open_ledger(path, epsilon, delta)
        else:
            self._epsilon = _check_budget(math.inf if epsilon is None else epsilon)
            self._delta = _check_budget_delta(1e-6 if delta is None else delta)
            self._totals = _Totals.empty()
            self._charges = []
            _in_memory.add(self)
        # diffprivlib's spent_budget: releases already made, charged now as
        # releases of your own (a spend over the budget refuses, as spend does)
        for entry in () if spent_budget is None else spent_budget:
            pair = _pair(entry)
            if pair is None:
                raise ValueError("spent_budget must be a list of (epsilon, delta) "
                                 f"pairs, as diffprivlib's; got an entry {entry!r}.")
            self.spend(epsilon=pair[0], delta=pair[1])

    def _open_ledger(self, path, epsilon, delta):
        header = None
        if epsilon is not None:
            header = {
                "epsilon": float_text(_check_budget(epsilon)),
                "delta": float_text(
                    _check_budget_delta(1e-6 if delta is None else delta)),
                "orders": _ORDERS_DIGEST,
            }
        elif delta is not None:
            _check_budget_delta(delta)
        if header is None and not os.path.exists(path):
            raise LedgerError(
                f"{os.path.abspath(path)}: no such ledger. Create it with its "
                "budget: BudgetAccountant(epsilon, delta, path=...), or "
                "'dppca ledger init FILE --epsilon E --delta D'."
            )
        ledger = Ledger(path, create=header)
        stored = ledger.header
        if stored["orders"] != _ORDERS_DIGEST:
            raise LedgerError(
                f"{ledger.path}: its RDP curves use other Rényi orders than "
                "this version of sklearn_dppca; open it with the version that "
                "created it."
            )
        try:  # an edited header's budget: a NaN would admit every charge
            self._epsilon = _check_budget(float(stored["epsilon"]))
            self._delta = _check_budget_delta(float(stored["delta"]))
        except ValueError:
            raise LedgerIntegrityError(
                f"{ledger.path}: the ledger's header holds no valid budget "
                "(it was edited)") from None
        given = [(n, v, s) for n, v, s in (("epsilon", epsilon, self._epsilon),
                                           ("delta", delta, self._delta))
                 if v is not None and float(v) != s]
        if given:
            asked = ", ".join(f"{n}={v!r}" for n, v, _ in given)
            raise LedgerError(
                f"{ledger.path} holds the budget epsilon={self._epsilon!r} at "
                f"delta={self._delta!r}, not {asked}: a ledger's budget is fixed "
                "when it is created. Open it without a budget to use it, or "
                "start a new ledger file for a new budget."
            )
        ledger.verify()  # a broken chain is reported now, not at a charge
        self._ledger = ledger

    # -- read-only budget and sharing semantics ----------------------------
    epsilon = _read_only("epsilon")
    delta = _read_only("delta")

    @property
    def path(self):
        """Absolute path of the ledger file; ``None`` in memory."""
        return None if self._ledger is None else self._ledger.path

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __getstate__(self):
        if self._ledger is not None:  # a ledger travels as its path, checked
            return {"path": self._ledger.path, "label": self.label,
                    "ledger": self._ledger.identity()}
        state = self.__dict__.copy()
        del state["_lock"]
        # without the charges' times: a model pickled with its accountant is
        # shared, and the time between two charges holds a fit's running
        # time, which depends on its rows (e.g. the hidden number of trials)
        with self._lock:
            state["_charges"] = [dict(c, time=None) for c in self._charges]
        return state

    def __setstate__(self, state):
        if "path" in state:
            self.__init__(path=state["path"], label=state["label"])
            self._ledger.check_identity(state.get("ledger"))
            return
        if "_mu_sq" in state:  # pickled by a version before _Totals
            state = dict(state)
            state["_totals"] = _Totals.empty()._replace(
                mu_sq=state.pop("_mu_sq"), rdp=state.pop("_rdp"),
                has_rdp=state.pop("_has_rdp"), n_fits=len(state["_charges"]))
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._detached = True

    def __enter__(self):
        # The block is the default in this thread or async task only (a
        # context variable), and is recorded for the worker threads that have
        # no block of their own, for good: work started inside the block may
        # run after it exits (see get_default_accountant).
        block = _defaults._Block(self, _defaults._block.get())
        if self not in _defaults._pristine_defaults:
            with _defaults._default_lock:
                _defaults._block_accountants.add(self)
        block.token = _defaults._block.set(block)
        return self

    def __exit__(self, *exc_info):
        block = _defaults._block.get()
        if block is None or block.accountant is not self:
            raise RuntimeError(
                "This `with accountant:` block is not the innermost one open "
                "in this thread or task: a block must be left in the thread "
                "or task that entered it, innermost first."
            )
        try:
            _defaults._block.reset(block.token)
        except ValueError:  # left in a copy of the context that entered it
            _defaults._block.set(block.previous)
        return False

    def set_default(self):
        """Make this the process-wide default accountant; returns ``self``.

        ``set_default_accountant(self)``, under ``diffprivlib``'s name.
        """
        _defaults.set_default_accountant(self)
        return self

    @staticmethod
    def pop_default():
        """The process-wide default accountant, replaced by a fresh unlimited
        one (``diffprivlib``'s idiom; see
        :func:`~sklearn_dppca.privacy.set_default_accountant`).

        Inside a ``with accountant:`` block that block's accountant stays
        the default until it exits; this pops the process-wide one.
        """
        return _defaults._pop_default()

    @staticmethod
    def load_default(accountant=None):
        """``accountant``, or the default accountant here if it is ``None``.

        ``diffprivlib``'s idiom for a function of your own that takes an
        ``accountant=None`` argument (see
        :func:`~sklearn_dppca.privacy.get_default_accountant` for which
        default that is).

        Raises
        ------
        TypeError
            If ``accountant`` is neither ``None`` nor a BudgetAccountant.
        """
        if accountant is None:
            return _defaults.get_default_accountant()
        if not isinstance(accountant, BudgetAccountant):
            raise TypeError(
                f"accountant must be a BudgetAccountant or None; got {accountant!r}.")
        return accountant

    def __len__(self):
        return self.n_charges

    def __bool__(self):  # an accountant with no charges yet is still one
        return True

    def __repr__(self):
        where = "" if self._ledger is None else f", path={self.path!r}"
        try:
            eps, _ = self.spent
            state = f"spent epsilon={eps:.6g} in {self.n_charges} charge(s)"
        except LedgerError as exc:
            state = f"unreadable: {exc}"
        if self._detached:
            state += ", detached copy"
        return (f"BudgetAccountant(epsilon={self._epsilon!r}, "
                f"delta={self._delta!r}{where}; {state})")

    # -- composition --------------------------------------------------------
    # The bound (docs/budgets.rst, "Releases of your own"): the fits compose
    # exactly in GDP (or in RDP, with an RDP charge) to (ε_F(δ_F), δ_F) for
    # every δ_F; the releases stated in (ε_i, δ_i) add, by the basic
    # composition theorem in its tight form (Kairouz, Oh & Viswanath 2017,
    # Thm 3.5 with the naive ε), to (ε_F(δ_F) + Σ ε_i, 1 − (1 − δ_F) Π (1 − δ_i)).
    # δ_F is what that leaves of the budget's δ.
    def _fits_delta(self, keep_user):
        r""":math:`\delta_F` with
        :math:`1 - (1 - \delta_F) \prod_i (1 - \delta_i) = \delta`;
        :math:`\le 0`: none is left."""
        if keep_user == 0.0:  # no δ spent by releases of the user's own
            return self._delta
        return -math.expm1(math.log1p(-self._delta) - keep_user)

    @staticmethod
    def _fits_epsilon(totals, delta):
        r""":math:`\varepsilon` of the fits alone at ``delta`` (exact GDP;
        RDP with an RDP charge, the Gaussian ones included as
        :math:`\lambda \mu^2 / 2`)."""
        if totals.mu_sq == 0.0 and not totals.has_rdp:
            return 0.0
        if not delta > 0.0 or totals.mu_sq == math.inf:
            return math.inf  # no δ left for them, or a non-private fit
        if not totals.has_rdp:
            return gdp_epsilon(math.sqrt(totals.mu_sq), delta)
        curve = totals.rdp + DEFAULT_ORDERS * (totals.mu_sq / 2.0)
        return rdp_to_epsilon(curve, delta)[0]

    def _total(self, totals):
        """:class:`Budget` of everything in ``totals`` (see above)."""
        if totals.mu_sq == 0.0 and not totals.has_rdp:  # the fits cost nothing
            user_delta = -math.expm1(totals.keep_user) + 0.0  # not -0.0
            fit_delta = self._delta if totals.n_fits else 0.0
            return Budget(totals.eps_user, max(user_delta, fit_delta))
        eps = self._fits_epsilon(totals, self._fits_delta(totals.keep_user))
        return Budget(eps + totals.eps_user, self._delta)

    def _state(self, writable=False):
        """:class:`_Totals` of every charge so far (``writable``: refuse a
        ledger this process cannot write, as :meth:`Ledger.rows`)."""
        if self._ledger is None:
            with self._lock:
                return self._totals
        return _compose(self._ledger.rows(writable=writable))

    def _admit(self, totals, charge):
        """The totals after ``charge`` and their :class:`Budget`; raise if
        that is over the budget."""
        after = totals.add(charge)
        total = self._total(after)
        if self._epsilon == math.inf:  # an unlimited budget admits anything
            return after, total
        where = "" if self._ledger is None else f" of ledger {self.path}"
        kind = "fit" if charge.release is None else "release"
        user_delta = -math.expm1(after.keep_user)
        if user_delta > self._delta * (1.0 + _TOLERANCE):
            over, budget = _apart(user_delta, self._delta)
            raise BudgetExceededError(
                f"Privacy budget exceeded. This release would bring the delta of "
                f"the releases stated in "
                f"(epsilon, delta) to {over}, over the budget "
                f"delta={budget}{where}. It was refused and nothing was "
                "charged."
            )
        if total.epsilon > self._epsilon * (1.0 + _TOLERANCE):
            why = ""
            if total.epsilon == math.inf and not self._fits_delta(after.keep_user) > 0:
                why = (" A Gaussian fit needs delta > 0, and "
                       + ("this budget's delta is 0 (pure epsilon-DP)."
                          if self._delta == 0.0 else
                          "releases stated in (epsilon, delta) have spent "
                          f"delta={user_delta:.6g}: all of the budget's "
                          f"delta={self._delta:g}."))
            # Named in full (budget, spent, requested), so that the refusal
            # reads clearly where scikit-learn quotes it: in the
            # FitFailedWarning of cross_val_score, cross_validate or a search.
            alone = self._total(_Totals.empty().add(charge)).epsilon
            over, budget, spent = _apart(total.epsilon, self._epsilon,
                                         self._total(totals).epsilon)
            raise refusal(BudgetExceededError(
                f"Privacy budget exceeded. This {kind} would bring the privacy "
                f"spent to epsilon={over} at delta={self._delta:g}, "
                f"over the budget epsilon={budget}{where} (already "
                f"spent: {spent}; this {kind} alone: "
                f"epsilon={alone:.6g}).{why} The {kind} was refused "
                "before releasing anything and nothing was charged."
            ))
        return after, total

    def _refuse_if_detached(self):
        if self._detached:
            raise RuntimeError(
                "This BudgetAccountant is a copy: it was unpickled (in a "
                "joblib worker, e.g. GridSearchCV or cross_val_score with "
                "n_jobs > 1, or with the estimator that holds it, pickled and "
                "loaded again, in this process or another) or inherited by a "
                "forked child. Charges to it would never reach the original, "
                "so it refuses them. Fix: use a ledger, BudgetAccountant("
                "epsilon, delta, path='budget.db'), whose copies charge the "
                "same file (also as the default accountant); give the loaded "
                "estimator its accountant again (set_params(accountant=...)); "
                "or n_jobs=1; or joblib.parallel_config(backend='threading')."
            )

    def check(self, *release, mu=None, rdp=None, epsilon=None, delta=None):
        """The total that spending this charge would bring; charges nothing.

        Takes the charge as :meth:`spend` does: ``check(mu=...)``,
        ``check(rdp=...)`` or, for a release of your own,
        ``check(epsilon, delta)``.

        Returns
        -------
        total : Budget
            ``(epsilon, delta)`` spent in total if the charge were made.

        Raises
        ------
        BudgetExceededError
            If it would exceed the budget.
        RuntimeError
            On a copy that cannot be charged.
        LedgerError
            On a ledger this process cannot write (a read-only file, folder
            or mount): a fit checks its charge before reading the data, so
            it is refused then rather than at the charge.
        """
        charge = _parse_charge(release, mu, rdp, epsilon, delta, "check")
        self._refuse_if_detached()
        return self._admit(self._state(writable=True), charge)[1]

    def spend(self, *release, mu=None, rdp=None, epsilon=None, delta=None,
              estimator=None, label=None):
        r"""Check and charge one release, atomically.

        ``spend(mu=...)`` charges a Gaussian release (what the estimators
        do); ``spend(epsilon, delta)`` a release of your own, stated as
        ``(epsilon, delta)``-DP, as ``diffprivlib``'s accountant takes it. The
        two kinds compose by the bound of :ref:`own-releases`. One positional
        number, ``spend(x)``, is refused (a ``TypeError``, nothing charged):
        it could mean either.

        Parameters
        ----------
        *release : float
            ``epsilon, delta`` (both), or nothing.
        mu : float, optional
            GDP parameter of a Gaussian release (or of several, composed);
            ``inf`` (no noise) is admitted only by an unlimited budget.
        rdp : array-like of shape (len(DEFAULT_ORDERS),), optional
            RDP curve of a release that is not GDP.
        epsilon : float, optional
            :math:`\varepsilon \ge 0` (``inf`` allowed) of a release of your
            own that is :math:`(\varepsilon, \delta)`-DP, e.g. a Laplace
            mechanism; not with ``mu``/``rdp``.
        delta : float, default=0.0 with ``epsilon``
            Its :math:`\delta` in :math:`[0, 1]`; not both ``0``.
        estimator : estimator, optional
            The estimator being fitted: its class name and ``get_params()``
            (without the accountant) are recorded with the charge.
        label : str, optional
            Recorded with the charge; default: the accountant's ``label``.

        Returns
        -------
        spent : Budget
            ``(epsilon, delta)`` spent in total after this charge (not the
            accountant itself, as ``diffprivlib`` returns).

        Raises
        ------
        BudgetExceededError
            If the charge would exceed the budget: nothing is charged.
        """
        charge = _parse_charge(release, mu, rdp, epsilon, delta, "spend")
        self._refuse_if_detached()
        record = _describe(estimator, self.label if label is None else label)
        if charge.release is not None and estimator is None:
            # shown by `dppca ledger show` (its "fit epsilon/delta" columns)
            record["params"] = params_text(dict(zip(("epsilon", "delta"),
                                                    charge.release)))
        if self._ledger is not None:
            result = []

            def decide(rows):
                _, total = self._admit(_compose(rows), charge)
                result[:] = [total]
                # A release in (ε, δ) is stored in the rdp column as a JSON
                # object (a curve is a list): a reader that knows only curves
                # fails on it rather than drop it from the total.
                curve = (_release_text(charge.release)
                         if charge.release is not None else curve_text(charge.rdp))
                return dict(record, mu=float_text(charge.mu), rdp=curve,
                            epsilon_spent=float_text(total.epsilon))

            self._ledger.append(decide)
            return result[0]
        with self._lock:
            totals, total = self._admit(self._totals, charge)
            now = datetime.datetime.now(datetime.timezone.utc)
            entry = dict(
                record, params=json.loads(record["params"]),
                seq=len(self._charges) + 1,
                time=now.isoformat(timespec="microseconds"), mu=charge.mu,
                rdp=None if charge.rdp is None else charge.rdp.tolist(),
                epsilon_delta=charge.release, epsilon_spent=total.epsilon,
            )
            # the total and its record change together, once both are made
            self._totals = totals
            self._charges.append(entry)
            return total

    # -- reading ------------------------------------------------------------
    @property
    def spent(self):
        r""":class:`~sklearn_dppca.privacy.Budget` :math:`(\varepsilon, \delta)`
        spent so far; ``(0.0, 0.0)`` before any.

        With Gaussian fits only, composed exactly and stated at the
        accountant's ``delta``. With releases of your own in
        :math:`(\varepsilon, \delta)`, the bound of :ref:`own-releases` (at the
        accountant's ``delta``; their own :math:`\delta` total if there is no
        fit).
        """
        return self._total(self._state())

    def total(self):
        r""":math:`(\varepsilon, \delta)` spent so far: the same as :attr:`spent`.

        ``diffprivlib``'s name, for code ported from it (it has no
        ``spent_budget``/``slack`` arguments here).
        """
        return self.spent

    @property
    def n_charges(self):
        """Number of charges (fits and releases) recorded; also ``len(accountant)``."""
        if self._ledger is None:
            return len(self._charges)
        return self._ledger.verify()

    @property
    def charges(self):
        r"""Every charge, oldest first, as dicts.

        Keys: ``seq`` (1, 2, ...), ``time`` (UTC, ISO 8601; ``None`` in a
        pickled copy of an in-memory accountant, which a saved model
        carries: the time between two charges holds a fit's running time,
        which depends on its rows), ``estimator``
        (class name or ``None``), ``params`` (its parameters), ``label``,
        ``mu``, ``rdp`` (list or ``None``), ``epsilon_delta``
        (:math:`(\varepsilon, \delta)` of a release of your own, else
        ``None``), ``epsilon_spent`` (the composed total after the charge)
        and, on a ledger, ``prev_hash`` and ``hash``.
        """
        if self._ledger is None:
            with self._lock:
                return [dict(c) for c in self._charges]
        rows = self._ledger.rows()
        for row in rows:
            release = row["rdp"] if isinstance(row["rdp"], dict) else None
            if release is not None:
                row["rdp"] = None
            row["epsilon_delta"] = (None if release is None
                                    else (release["epsilon"], release["delta"]))
        return rows

    def to_frame(self):
        """The charges as a ``pandas.DataFrame``, one row per charge."""
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError(
                "BudgetAccountant.to_frame() needs pandas: pip install pandas "
                "(or use BudgetAccountant.charges, a list of dicts)."
            ) from exc
        columns = ["seq", "time", "estimator", "label", "mu", "epsilon_delta",
                   "epsilon_spent", "params", "rdp"]
        if self._ledger is not None:
            columns += ["prev_hash", "hash"]
        return pd.DataFrame(self.charges, columns=columns)

    def verify(self, anchor=None):
        """Check a ledger's hash chain; return the number of charges.

        Raises ``sklearn_dppca.privacy.LedgerIntegrityError`` naming the
        first edited, inserted, deleted or moved row. The chain alone cannot
        see the last rows removed with the head set back, or the file
        replaced by another ledger: give ``anchor`` to detect those (see
        :ref:`ledger-anchors`). An in-memory accountant has nothing to verify.

        Parameters
        ----------
        anchor : str, optional
            An :meth:`anchor` taken earlier (``"N:HASH"``) and kept where the
            file's writer cannot change it. The ledger must extend it: hold
            at least ``N`` charges, the first ``N`` unchanged, with the same
            budget and creation. Charges made after it may follow.
        """
        if self._ledger is None:
            if anchor is not None:
                raise ValueError("An in-memory accountant has no ledger to "
                                 "check an anchor against.")
            return self.n_charges
        return self._ledger.verify(anchor=anchor)

    def anchor(self):
        """The ledger's anchor, ``"N:HASH"``: its number of charges and the
        hash of the last one (the genesis hash before any), after verifying.

        Store it where whoever can write the ledger file cannot change it;
        :meth:`verify` with ``anchor=`` (or ``dppca ledger verify FILE
        --anchor N:HASH``) then detects any change that lowers the spend
        below the anchored one, or replaces the ledger (another budget).
        Also ``dppca ledger head FILE``.
        """
        if self._ledger is None:
            raise ValueError("An in-memory accountant has no ledger to anchor; "
                             "give it a path (see 'Ledgers' in the docs).")
        return self._ledger.anchor()

    def remaining(self, k=1, *, delta=None):
        r"""What is left: :math:`\varepsilon` for ``k`` more fits, or
        :math:`(\varepsilon, \delta)` for releases.

        Without ``delta``: the largest :math:`\varepsilon` each of ``k`` more
        equal Gaussian fits may spend, each at this accountant's
        :math:`\delta`; the ``k`` of them, composed with everything already
        charged, fill the budget exactly.

        With ``delta``: the largest :math:`\varepsilon` each of ``k`` more
        releases of your own, each (:math:`\varepsilon`, ``delta``)-DP, may
        spend (:meth:`spend` with ``epsilon, delta``), as a
        :class:`~sklearn_dppca.privacy.Budget` (:math:`\varepsilon`,
        ``delta``). This is the pair ``diffprivlib``'s ``remaining(k)``
        returns; there, the :math:`\delta` left is split between the ``k``
        queries, here you choose it (``0.0`` for pure :math:`\varepsilon`-DP
        releases: the fits need a share of :math:`\delta`).

        Parameters
        ----------
        k : int, default=1
            Number of further fits or releases.
        delta : float, optional
            :math:`\delta` in :math:`[0, 1]` of each further release of your
            own.

        Returns
        -------
        epsilon : float, or Budget with ``delta``
            ``inf`` for an unlimited accountant, ``0.0`` when nothing fits.
        """
        if not isinstance(k, Integral) or isinstance(k, bool) or k < 1:
            raise ValueError(f"k must be an integer >= 1; got {k!r}.")
        if delta is not None:
            delta = _parse_charge((), None, None, 1.0, delta).release[1]
            return Budget(self._remaining_releases(k, delta), delta)
        return self._remaining_fits(k, self._state())

    def _remaining_fits(self, k, totals):
        """:meth:`remaining` without ``delta``, after the charges ``totals``."""
        if self._epsilon == math.inf:
            return math.inf
        if self._delta == 0.0:  # a pure ε-DP budget admits no Gaussian fit
            return 0.0
        eps_left = self._epsilon - totals.eps_user
        delta_fits = self._fits_delta(totals.keep_user)
        if not (eps_left > 0.0 and delta_fits > 0.0):
            return 0.0
        budget_mu = gdp_mu(eps_left, delta_fits)
        if not totals.has_rdp:  # exact in GDP
            left = budget_mu * budget_mu - totals.mu_sq  # inf, not an error
            return min(gdp_epsilon(math.sqrt(left / k), self._delta), eps_left
                       ) if left > 0 else 0.0

        def total(mu):
            more = totals._replace(mu_sq=totals.mu_sq + k * mu * mu)
            return self._total(more).epsilon

        lo, hi = 0.0, budget_mu / math.sqrt(k)
        if total(lo) >= self._epsilon:
            return 0.0
        for _ in range(100):
            mid = (lo + hi) / 2.0
            lo, hi = (mid, hi) if total(mid) <= self._epsilon else (lo, mid)
        return min(gdp_epsilon(lo, self._delta), eps_left) if lo > 0 else 0.0

    def _remaining_releases(self, k, delta):
        r"""Largest :math:`\varepsilon` of each of ``k`` more
        (:math:`\varepsilon`, ``delta``) releases."""
        if self._epsilon == math.inf:
            return math.inf
        totals = self._state()
        keep = totals.keep_user + k * _log_keep(delta)
        if -math.expm1(keep) > self._delta * (1.0 + _TOLERANCE):
            return 0.0  # their δ alone is over the budget
        fits = self._fits_epsilon(totals, self._fits_delta(keep))
        return max((self._epsilon - totals.eps_user - fits) / k, 0.0)

    def reset(self):
        """Forget every charge (in memory; a ledger is append-only)."""
        if self._ledger is not None:
            raise LedgerError(
                f"{self.path} is an append-only ledger: reset() is refused. "
                "Start a new ledger file for a new dataset."
            )
        with self._lock:
            self._totals, self._charges = _Totals.empty(), []


# The default accountant and `with accountant:` blocks (the module that holds
# them imports the accountant from here, so it comes last).
# (_CarriedDefault: estimators pickled by earlier versions name it here.)
from . import _defaults  # noqa: E402
from ._defaults import (  # noqa: E402
    _CarriedDefault,  # noqa: F401
    get_default_accountant,
    set_default_accountant,
)
