"""The warning rules: what a fit may say, and when.

A warning is a release. While private rows are computed on, every warning
is dropped (:func:`private_computation`); the package's own warnings about
a fit depend on public values only, are issued after the charge, and point
at the user's line (:func:`_outside_stacklevel`). docs/privacy.rst,
"Warnings and errors". :mod:`sklearn_dppca.privacy` re-exports the public
names.

This module imports nothing from the package.
"""

import contextlib
import math
import os
import sys
import threading
import warnings

import numpy as np


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
    >>> [w.category.__name__ for w in caught if w.category is PrivacyLeakWarning]
    ['PrivacyLeakWarning']
    """


#: Packages whose frames a warning skips on its way to the user's line.
_NOT_THE_CALLER = ("sklearn_dppca", "sklearn", "joblib")


def _outside_stacklevel():
    """``stacklevel`` pointing a warning at the user's call: the first frame
    above the caller of this function outside this package, scikit-learn and
    joblib (``fit`` and ``fit_transform`` sit under different numbers of
    wrappers, a Pipeline, ``cross_val_score`` or a search under more)."""
    frame, level = sys._getframe(2), 2
    while frame is not None:
        package = frame.f_globals.get("__name__", "").partition(".")[0]
        if package not in _NOT_THE_CALLER:
            break
        frame, level = frame.f_back, level + 1
    return level


def _warn_leak(message):
    """A :class:`PrivacyLeakWarning` shown at the user's line that called the
    fit (not at the package's own frames)."""
    warnings.warn(message, PrivacyLeakWarning, stacklevel=_outside_stacklevel())


#: scikit-learn's modules whose scores of a fitted model are exact.
_EXACT_SCORING = ("sklearn.model_selection._validation",
                  "sklearn.model_selection._search",
                  "sklearn.model_selection._classification_threshold")


def warn_if_scored_exactly(model, what="rows"):
    """The :class:`PrivacyLeakWarning` of a model whose predictions or score
    scikit-learn's cross-validation or search is scoring: its fold fits are
    private, but the scores it returns are exact functions of the
    validation ``what`` (the way a fixed ``random_state`` is warned of)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_globals.get("__name__", "") in _EXACT_SCORING:
            _warn_leak(
                f"scikit-learn's cross-validation is scoring this "
                f"{type(model).__name__} on validation rows: the scores it "
                f"returns are exact functions of those {what}, not private. "
                "Use sklearn_dppca.model_selection's private_cross_val_score, "
                "private_cross_validate or PrivateGridSearchCV, which release "
                "noisy bounded scores."
            )
            return
        frame = frame.f_back


def _warn_if_delta_large(delta, n_samples):
    """The :class:`PrivacyLeakWarning` of a ``delta`` not below
    ``1/n_samples`` (public: the fit's ``n``), which admits releasing a
    whole row with probability ``delta`` each (the command line warned of
    it, the estimators and searches did not; review 70)."""
    if n_samples and delta >= 1.0 / n_samples:
        _warn_leak(
            f"delta={delta:g} is not below 1/n = {1.0 / n_samples:.3g} "
            f"(n={n_samples} rows): (epsilon, delta)-DP then admits a mechanism "
            "that publishes some whole row with probability delta. Use a "
            "delta well below 1/n (the default 1e-6 suits fewer than about "
            "10^5 rows)."
        )


def _warn_if_not_private(epsilon, random_state, released="released attributes",
                         delta=None, n_samples=None):
    """After a fit: the :class:`PrivacyLeakWarning` of ``epsilon=inf`` (no
    noise) or, failing that, of a fixed ``random_state`` (noise anyone can
    subtract); with ``delta``, :func:`_warn_if_delta_large`. ``released``
    names what the fit released."""
    if delta is not None:
        _warn_if_delta_large(delta, n_samples)
    if epsilon == math.inf:
        _warn_leak(
            f"epsilon=inf is the non-private fit: no noise is added and the "
            f"{released} are exact functions of the (clipped) data. It was "
            "charged as infinite, which only an unlimited accountant admits."
        )
    elif random_state is not None:
        _warn_leak(
            f"random_state={random_state!r} fixes the noise: anyone who "
            "knows it can subtract the noise, and the fit is not private. Leave "
            "random_state=None (operating-system entropy) for a private release."
        )


#: The process-wide silence of :func:`private_computation`: how many blocks
#: are open (in any thread), and the filter lists its filter was put in.
_silence_lock = threading.Lock()
_silence = {"depth": 0, "filters": []}
_own_silence = threading.local()  # the blocks open in this thread


class _WhilePrivate:
    """The message pattern of the silencing filter: it matches every
    warning while a private computation is open in any thread of the
    process, and none otherwise. The warnings machinery calls a filter's
    ``match`` for each warning, so the filter holds no state of its own:
    a copy of the filter list that another thread's ``catch_warnings``
    saved and restores later cannot leave the process silenced, and one that
    drops it mid-fit is covered by :func:`_drop_while_private`."""

    def match(self, text):
        return _silence["depth"] > 0

    @property
    def pattern(self):
        """A regular expression of :meth:`match` as it is now: scikit-learn's
        ``Parallel`` (a ColumnTransformer's, a FeatureUnion's) copies the
        filters into its calls by their message's ``pattern`` (it failed on
        this object: review 90 F1's public encoders in a search). Every
        message while a private computation is open, none otherwise."""
        return "" if _silence["depth"] > 0 else "(?!)"

    def __repr__(self):
        return "<while a private computation runs>"


_PRIVATE_FILTER = ("ignore", _WhilePrivate(), Warning, None, 0)


#: ``warnings._showwarnmsg`` as the first private computation found it.
_display = []


def _drop_while_private(msg):
    """``warnings._showwarnmsg`` from the first private computation on: drop
    what is shown while one runs, pass the rest on. ``catch_warnings`` saves
    and restores the filters and ``showwarning``, never this hook, so
    another thread's block cannot lift it: it holds when that thread's
    restored filter list has lost the silencing filter mid-fit."""
    if _silence["depth"] > 0:
        return
    _display[0](msg)


def _unfilter(filters):
    while _PRIVATE_FILTER in filters:
        filters.remove(_PRIVATE_FILTER)


@contextlib.contextmanager
def private_computation():
    """Silence every warning raised while private rows are computed on.

    A warning is a release: ``RuntimeWarning: overflow`` from one extreme
    row, or a user transformer's check that fires only on some rows, tells
    whether the data holds such a row, which the privacy analysis does not
    cover. Inside this block every warning is dropped and NumPy's
    floating-point warnings are off; the package's own warnings about a fit
    (a fixed ``random_state``, ``epsilon=inf``, ``data_norm=None``, the
    solver parameters) depend on public values only and are
    issued outside it (:ref:`privacy-warnings`).
    Exceptions still propagate.

    The silence is process-wide, so worker threads started inside the block
    are silenced too. Blocks open in several threads at once (concurrent
    fits, a threaded search) share it: it holds while any is open. It is a
    filter that matches while a block is open (:class:`_WhilePrivate`),
    put first in the filter list by each block that finds it missing and
    removed from the lists it was put in by the last block to leave, so the
    filters are the user's again, exactly, after it; and a hook on the
    warnings' display (:func:`_drop_while_private`) that no
    ``catch_warnings`` restores. Another thread's ``catch_warnings`` entered
    or left during a fit can neither lift the silence nor leave it behind.
    NumPy's error state is per thread and set in each.
    """
    saved = np.geterr()
    own = getattr(_own_silence, "depth", 0)
    nested = own > 0  # in another block of this thread
    entered = False
    # the entry inside the try: a Ctrl-C between the shared count's increment
    # and the try left the silence on for the rest of the process, every
    # later warning dropped (review 121 F1); ``entered`` follows the
    # increment with no call between them, where no signal is handled
    try:
        with _silence_lock:
            if not _display:  # installed once, for the life of the process
                _display.append(warnings._showwarnmsg)
                warnings._showwarnmsg = _drop_while_private
            if _PRIVATE_FILTER not in warnings.filters:
                warnings.filters.insert(0, _PRIVATE_FILTER)
                warnings._filters_mutated()
                _silence["filters"].append(warnings.filters)
            _own_silence.depth = own + 1
            _silence["depth"] += 1
            entered = True
        # set, not np.errstate: an errstate's exit resets NumPy's state to
        # its entry's, which below is the outer block's "ignore"
        np.seterr(all="ignore")
        yield
    finally:
        try:
            if not entered:  # nothing shared counted yet
                _own_silence.depth = own
            else:
                _leave()
        finally:
            # as it was; but not where this block, nested, ends after every
            # block of its thread (a Ctrl-C at its exit left its generator
            # suspended, finalized once the exception is freed): its saved
            # state is the outer block's "ignore", and the fits have put the
            # user's back
            if not nested or _own_silence.depth > 0:
                np.seterr(**saved)


def _leave():
    """Take a block's count down and, the last one out, lift the silence:
    done whatever interrupts it. A Ctrl-C while the lock is awaited (another
    thread's block holds it) or inside it is kept and raised once the count
    is down; it left the silence on for the rest of the process (review 123
    F4). ``done`` follows the decrements with no call between them, where
    no signal is handled."""
    done, interrupt = False, None
    while True:
        try:
            with _silence_lock:
                if not done:
                    _own_silence.depth -= 1  # blocks may end out of order
                    _silence["depth"] -= 1
                    done = True
                if _silence["depth"] == 0:
                    _lift_silence()  # again after an interrupt: idempotent
            break
        except KeyboardInterrupt as exc:  # raised below; any other error at once
            interrupt = interrupt or exc
    if interrupt is not None:
        raise interrupt


def _lift_silence():
    """Remove the silencing filter from every list it was put in (which
    another thread's ``catch_warnings`` may restore later) and from the
    list in use now (``_silence_lock`` held)."""
    for filters in _silence["filters"]:
        _unfilter(filters)
    _unfilter(warnings.filters)
    _silence["filters"] = []
    warnings._filters_mutated()


def _after_fork_in_child():
    """Private computations open in other threads at the fork are not in
    the child: only the forking thread's own blocks still count, and with
    none the silencing filter is removed."""
    global _silence_lock
    _silence_lock = threading.Lock()
    _silence["depth"] = getattr(_own_silence, "depth", 0)
    if not _silence["depth"] and _silence["filters"]:
        _lift_silence()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
