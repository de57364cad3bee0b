r"""A charge's arguments and its record: what
:class:`~sklearn_dppca.BudgetAccountant` checks before it composes anything.

A budget's ``epsilon`` and ``delta``; a charge given to ``spend`` or
``check`` (a Gaussian or RDP release, or a release of your own stated in
:math:`(\varepsilon, \delta)`), parsed into one ``_Charge``; a charge's
label and what it records of who made it (public values only); the text of
a refusal's numbers and of a stored release. Pure functions: the
accountant, in ``sklearn_dppca.privacy``, composes and keeps the charges.
"""

import json
from numbers import Real

import numpy as np

from ._accounting import DEFAULT_ORDERS, _Charge, _check_nonnegative, _shown
from ._ledger import float_text, params_text


def _pair(other):
    """``other`` as ``(epsilon, delta)``, or None where it is no pair (the
    comparison is then not supported, as between a tuple and a number)."""
    try:
        eps, delta = other
    except (TypeError, ValueError):
        return None
    return eps, delta


def _check_budget(epsilon):
    if isinstance(epsilon, Real) and not isinstance(epsilon, bool) and epsilon > 0.0:
        return _check_nonnegative(epsilon, "epsilon")  # refuses 10**400
    raise ValueError(f"epsilon must be a positive number; got {_shown(epsilon)}.")


def _check_budget_delta(delta):
    r"""A budget's :math:`\delta`: in :math:`[0, 1)` (``0``: pure
    :math:`\varepsilon`-DP releases only)."""
    if not isinstance(delta, Real) or isinstance(delta, bool) or not 0.0 <= delta < 1.0:
        raise ValueError(
            f"delta must be a real number in [0, 1); got {_shown(delta)}.")
    return float(delta)


def _parse_charge(release, mu, rdp, epsilon, delta, name="spend"):
    """The :class:`_Charge` of ``spend``/``check``'s arguments."""
    if len(release) > 2:
        raise TypeError(f"Give one charge: {name}(mu=...), {name}(epsilon, "
                        "delta), or the keywords mu=, rdp=, epsilon=, delta=.")
    if len(release) == 2:
        if any(v is not None for v in (mu, rdp, epsilon, delta)):
            raise TypeError("spend(epsilon, delta) takes no other charge.")
        epsilon, delta = release
    elif len(release) == 1 and delta is not None and mu is rdp is epsilon is None:
        epsilon = release[0]  # spend(epsilon, delta=...): diffprivlib's call
    elif len(release) == 1 and any(v is not None for v in (mu, rdp, epsilon)):
        raise TypeError(f"{name}() takes a charge once: a number by position "
                        "and mu=, rdp= or epsilon= besides.")
    elif len(release) == 1:  # ε of diffprivlib's habit, or μ: it cannot tell
        raise TypeError(
            f"{name}({release[0]!r}) is ambiguous, and nothing was charged: "
            f"give {name}(epsilon, delta) for a release of your own stated in "
            f"(epsilon, delta), as diffprivlib's accountant takes it "
            f"({name}(epsilon, 0.0) if it is pure epsilon-DP), or "
            f"{name}(mu={release[0]!r}) for a Gaussian release of GDP "
            "parameter mu (what the estimators charge).")
    if epsilon is not None or delta is not None:
        if mu is not None or rdp is not None:
            raise ValueError(
                "A charge is a Gaussian or RDP release (mu=, rdp=) or a release "
                "stated in (epsilon, delta), not both: charge them one by one.")
        if epsilon is None:
            raise ValueError("A release stated in (epsilon, delta) needs epsilon.")
        epsilon = _check_nonnegative(epsilon, "epsilon")
        delta = 0.0 if delta is None else delta
        if not isinstance(delta, Real) or not 0.0 <= delta <= 1.0:
            raise ValueError(
                f"delta of a release must be a real number in [0, 1]; got {delta!r}.")
        if epsilon == 0.0 and delta == 0.0:
            raise ValueError("A release with epsilon=0 and delta=0 is no charge.")
        return _Charge(0.0, None, (epsilon, float(delta)))
    if mu is None and rdp is None:
        raise ValueError("Give the charge as mu (GDP), rdp (RDP curve) or both, "
                         "or a release of your own as (epsilon, delta).")
    # mu = inf is the charge of a non-private fit (epsilon=inf): only an
    # unlimited accountant admits it.
    mu = 0.0 if mu is None else _check_nonnegative(mu, "mu")
    if rdp is not None:
        rdp = np.asarray(rdp, dtype=float)
        if rdp.shape != DEFAULT_ORDERS.shape or not np.all(rdp >= 0):
            raise ValueError(
                "rdp must be a non-negative curve on privacy.DEFAULT_ORDERS."
            )
    return _Charge(mu, rdp, None)


def _apart(*values):
    """``values`` as text with 6 significant digits, or with as many more as
    it takes for values that differ to read differently (a refusal must not
    read "epsilon=10, over the budget epsilon=10")."""
    for digits in range(6, 18):
        text = [f"{v:.{digits}g}" for v in values]
        if len(set(text)) == len(set(values)):
            return text
    return [repr(v) for v in values]


def _release_text(release):
    r"""JSON of a release's :math:`(\varepsilon, \delta)`, exact (``"inf"``
    as text)."""
    eps, delta = release
    return json.dumps({"epsilon": float_text(eps), "delta": float_text(delta)},
                      sort_keys=True)


def _check_label(label):
    """A charge's label: None, or a string a ledger can store (UTF-8: a lone
    surrogate, as a file name not in UTF-8 decodes to, cannot be hashed, and
    failed the charge after the data was read)."""
    if label is None:
        return
    if not isinstance(label, str):
        raise TypeError(f"label must be a string or None; got {label!r}.")
    try:
        label.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            f"label must be encodable as UTF-8; got {label!r} (a file name not "
            "in UTF-8?).") from None


def _describe(estimator, label):
    """What a charge records of who made it: public values only."""
    _check_label(label)
    if estimator is None:
        return {"estimator": None, "params": params_text({}), "label": label}
    params = estimator.get_params(deep=False)
    params.pop("accountant", None)
    return {"estimator": type(estimator).__name__, "params": params_text(params),
            "label": label}
