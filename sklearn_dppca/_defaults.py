"""The default accountant: the process-wide one, ``with accountant:``
blocks in a thread or async task, and the default an estimator carries to a
worker process (its charges refused there). ``sklearn_dppca.privacy``
re-exports :func:`get_default_accountant` and :func:`set_default_accountant`.
"""

import contextvars
import os
import threading
import uuid
import weakref
from typing import NamedTuple

from .privacy import BudgetAccountant, _in_memory

#: Identity of this process, for the default accountant an estimator carries.
_process_id = uuid.uuid4().hex

_default_accountant = BudgetAccountant()
#: The process's own unlimited default: never charged from other processes.
_PRISTINE_DEFAULT = _default_accountant
#: Every unlimited default the process made for itself (the original, and
#: those pop_default put in its place): none is charged from other processes.
_pristine_defaults = weakref.WeakSet([_default_accountant])
_default_lock = threading.Lock()


# --------------------------------------------------------------------------
# `with accountant:` blocks: the default in one thread or async task
# --------------------------------------------------------------------------
# A block sets a context variable, so it is the default in the thread or
# async task that entered it, and in whatever copies that context (asyncio
# tasks created inside it, asyncio.to_thread, contextvars.copy_context().run)
# -- never in another thread's or task's code. A thread started any other way
# begins with an empty context: such a worker (joblib's threading backend,
# concurrent.futures, threading.Thread, loky's thread that pickles estimators
# for its worker processes) cannot tell which code handed it its work, nor
# when: a pool.submit() inside a block may run after the block has exited.
# It resolves the default from every accountant whose block has been entered
# in this process, open or exited, and from the process-wide default, and
# refuses when they disagree (get_default_accountant). It never falls back to
# the unlimited default while a limited block exists or has existed: an
# over-count of a limited budget, never an under-count.
class _Block:
    """One open ``with accountant:`` block (a node of its context's stack)."""

    __slots__ = ("accountant", "previous", "token")

    def __init__(self, accountant, previous):
        self.accountant = accountant
        self.previous = previous  # the block it shadows in its context
        self.token = None


#: The innermost block open in this thread or async task, or None.
_block = contextvars.ContextVar("sklearn_dppca_accountant_block", default=None)
#: The accountant of every block entered in this process, in any thread or
#: task, open or exited, but the original unlimited default (_default_lock).
#: Kept for the life of the process: work a block started can outlive it.
_block_accountants = set()


class _AmbiguousDefault(RuntimeError):
    """A thread with no block of its own cannot tell which default is its own."""


def _ambiguity(candidates):
    names = ", ".join(sorted(repr(a) for a in candidates))
    return _AmbiguousDefault(
        "Which accountant is the default here cannot be told, so nothing is "
        "charged: this thread has no `with accountant:` block of its own, and "
        "it may be running work handed to it by any of the blocks entered in "
        "this process (open or exited: work started in a block can run after "
        "it), or by code under the process-wide default "
        f"({names}). Fix: give the estimator its accountant "
        "(accountant=...); or enter the block inside the function the thread "
        "runs; or start the thread with the block's context "
        "(asyncio.to_thread, contextvars.copy_context().run)."
    )


def _current_default():
    """The default accountant of the calling thread or task (see
    get_default_accountant); raises :class:`_AmbiguousDefault`."""
    block = _block.get()
    if block is not None:
        return block.accountant
    if threading.current_thread() is threading.main_thread():
        return _default_accountant  # the main thread is nobody's worker
    with _default_lock:
        candidates = set(_block_accountants)
        candidates.add(_default_accountant)
    # The original unlimited default yields to any other candidate: charging
    # a limited budget for a fit that was not its own over-counts it, which is
    # safe; charging the unlimited one for a limited block's fit is not.
    pristine = [c for c in candidates if c in _pristine_defaults]
    candidates.difference_update(pristine)
    if len(candidates) > 1:
        raise _ambiguity(candidates)
    if candidates:
        return candidates.pop()
    return pristine[0] if pristine else _PRISTINE_DEFAULT


def get_default_accountant():
    """The accountant charged by estimators given ``accountant=None`` here.

    Inside a ``with accountant:`` block, that accountant: a block is the
    default in the thread or async task that entered it (and in asyncio
    tasks created inside it, ``asyncio.to_thread`` and
    ``contextvars.copy_context().run``), never in other threads or tasks.
    Outside any block, the process-wide default: unlimited unless replaced
    with :func:`set_default_accountant`.

    A thread other than the main one that has not entered a block itself —
    a worker of joblib's threading backend, of a ``ThreadPoolExecutor``, a
    ``threading.Thread``, or the thread that sends estimators to joblib's
    worker processes — may be running work started inside a block in
    another thread, and cannot know which, nor whether that block has exited
    since (``pool.submit(fit)`` inside ``with budget:``, run after it). It
    uses the accountant of the blocks entered in the process, open or
    exited, if they are all of one accountant (and the process-wide default
    is the original unlimited one, or that same accountant), so that
    ``GridSearchCV(..., n_jobs=2)`` inside ``with budget:`` charges every
    fit to ``budget``; otherwise it raises :class:`RuntimeError` rather than
    guess, and no fit is charged (:ref:`default-blocks`). It never falls
    back to the unlimited default once a block of another accountant has
    been entered: such a thread's fit is over-counted on that budget, never
    left uncounted. Give it ``accountant=...`` to choose.

    An estimator pickled to a worker process (``GridSearchCV(...,
    n_jobs=2)``) carries the default it would be charged to: a ledger is
    charged from the worker, a limited in-memory one refuses there; only the
    unlimited original default is per process.

    Raises
    ------
    RuntimeError
        In a worker thread, while blocks of different accountants are open
        (or a block and a replaced process-wide default).

    Examples
    --------
    >>> from sklearn_dppca.privacy import get_default_accountant
    >>> get_default_accountant().epsilon
    inf
    """
    return _current_default()


def set_default_accountant(accountant):
    """Replace the process-wide default accountant; returns the previous one.

    The process-wide default is the one charged outside every ``with
    accountant:`` block, in every thread. Inside a block the block's
    accountant stays the default until the block exits; the replacement
    takes effect there after it.

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
    >>> with BudgetAccountant(epsilon=1.0) as budget:  # the default inside
    ...     get_default_accountant() is budget
    True
    """
    global _default_accountant
    if not isinstance(accountant, BudgetAccountant):
        raise TypeError("accountant must be a BudgetAccountant.")
    with _default_lock:
        previous, _default_accountant = _default_accountant, accountant
    return previous


def _pop_default():
    """The process-wide default, replaced by a fresh unlimited one that is the
    process's own untouched default from now on (never carried to workers)."""
    global _default_accountant
    fresh = BudgetAccountant()
    _pristine_defaults.add(fresh)
    with _default_lock:
        previous, _default_accountant = _default_accountant, fresh
    return previous


# --------------------------------------------------------------------------
# The default accountant across processes
# --------------------------------------------------------------------------
# An estimator with accountant=None resolves the default at fit time. In a
# worker process that would be the worker's own unlimited default, silently
# replacing a limited one: so an estimator pickled where the default is not
# the original carries it (a ledger as its path, an in-memory one as a copy
# that refuses charges; where the default cannot be told, a refusal), and a
# worker whose own default is the original uses the carried one, also for
# clones made there. An untouched default travels as a mark that refuses in
# the sender's descendants, whose charges its spent could not show.
_CARRIED = "_carried_default_accountant"


class _CarriedDefault(NamedTuple):
    origin: str  # _process_id of the process that pickled the estimator
    accountant: BudgetAccountant  # None with a refusal or an untouched default
    refusal: str = None  # why the default could not be told where pickled
    untouched_in: int = None  # pid whose untouched default it was


def _ancestors():
    """Process ids above this one: the parent and, where ``/proc`` tells,
    its own ancestors (a Dask nanny's worker, a pool inside a pool)."""
    pid = os.getppid()
    while pid > 1:
        yield pid
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                # pid (comm) state ppid ...: comm may hold spaces and ')'
                pid = int(stat.read().rpartition(b")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            return


def _carry_default(estimator, state):
    """An estimator's pickled ``state``, carrying the default accountant."""
    state = dict(state)
    state.pop(_CARRIED, None)
    if getattr(estimator, "accountant", None) is None:
        try:
            default = _current_default()
        except _AmbiguousDefault as exc:
            state[_CARRIED] = _CarriedDefault(_process_id, None, str(exc))
            return state
        carried = _foreign_carried(estimator)
        if default not in _pristine_defaults:
            state[_CARRIED] = _CarriedDefault(_process_id, default)
        elif carried is not None and carried.untouched_in is None:
            state[_CARRIED] = carried  # pass on what this process received
        else:  # its spend could not be seen here: refused in our workers
            state[_CARRIED] = _CarriedDefault(
                _process_id, None, untouched_in=os.getpid())
    return state


def _keep_carried_default(estimator, clone):
    """A clone keeps the default its original carried from another process."""
    if _foreign_carried(estimator) is not None:
        vars(clone)[_CARRIED] = vars(estimator)[_CARRIED]
    return clone


def _foreign_carried(estimator):
    carried = vars(estimator).get(_CARRIED)
    if carried is None or carried.origin == _process_id:
        return None
    return carried


def _resolve_accountant(estimator):
    """The accountant a fit of ``estimator`` charges."""
    if estimator.accountant is not None:
        return estimator.accountant
    default = _current_default()
    if default in _pristine_defaults:
        carried = _foreign_carried(estimator)
        if carried is not None:
            if carried.refusal is not None:
                raise RuntimeError(
                    "Where this estimator was sent from, its default "
                    f"accountant could not be told: {carried.refusal}"
                )
            if carried.untouched_in is None:
                return carried.accountant
            if carried.untouched_in in _ancestors():
                raise RuntimeError(
                    f"This {type(estimator).__name__} was sent to a worker "
                    f"process by process {carried.untouched_in}, where it "
                    "would be charged to the default accountant: this "
                    "worker's charge could not be seen there, so "
                    "get_default_accountant().spent would under-report the "
                    "spend. Give it an accountant with a ledger file, which "
                    "every worker charges (accountant=BudgetAccountant("
                    "epsilon, delta, path='budget.db'), or "
                    "set_default_accountant of one), or run the workers as "
                    "threads (with joblib.parallel_config(backend="
                    "'threading'): ...) or with n_jobs=1."
                )
            # Unpickled in a later, unrelated process (a saved model): its
            # own default is the one its user reads.
    return default


def _after_fork_in_child():
    """A forked child is another process: its copies cannot report back."""
    global _process_id, _default_lock
    _process_id = uuid.uuid4().hex
    _default_lock = threading.Lock()
    # The blocks entered before the fork stay recorded: the child may run
    # work they started (its in-memory copies refuse charges, below). The
    # warnings' silence is reset by _warning_rules' own hook.
    for accountant in list(_in_memory):
        accountant._lock = threading.Lock()
        if accountant not in _pristine_defaults:
            accountant._detached = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
