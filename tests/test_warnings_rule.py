"""Warnings are releases: a fit shows those that depend on public values only.

The rule (docs/privacy.rst, "Warnings and errors"): every warning raised from
the first read of the rows to the end of the release is dropped, and the
package's own warnings (a fixed ``random_state``, ``epsilon=inf``,
``data_norm=None``, the solver parameters) are decided from public values
and issued outside that block (a drowned ``"auto"`` search is refused before
it, issue 22). So two neighbouring
datasets, one with a row of entries near 1e200 or 1e300, give the same
warnings, whatever the user's warning filters and NumPy error state.

NumPy's default error state ignores underflow, which hides the leak this file
guards against; a user's ``np.seterr(all="warn")`` or ``"raise"`` (common when
debugging) exposes it: the clipping factor of a 1e200 row underflows when
squared, so before the rule one neighbour warned (or raised
``FloatingPointError``) and the other did not. A lazy Dask input computes the
user's own steps inside the fit, and a step that warns on some values told
the neighbours apart the same way.
"""

import math
import threading
import warnings

import numpy as np
import pytest
from sklearn.pipeline import make_pipeline

from sklearn_dppca import (
    BudgetAccountant,
    BudgetExceededError,
    CoherentPowerPCA,
    ComplexGaussPCA,
    NoisyReleaseWarning,
    PrivacyLeakWarning,
    PrivatePCA,
    SolverParameterWarning,
)
from sklearn_dppca.linear_model import PrivateLDA
from sklearn_dppca.preprocessing import (
    FeatureScaleWarning,
    PrivateStandardScaler,
    PublicScaler,
)
from sklearn_dppca.privacy import private_computation

from .conftest import interrupted_at

try:
    import dask.array as da
except ImportError:  # pragma: no cover - dask is a test dependency
    da = None

FACTORIES = {
    "private": lambda **kw: PrivatePCA(2, **kw),
    "complex": lambda **kw: ComplexGaussPCA(2, **kw),
    "coherent-fixed": lambda **kw: CoherentPowerPCA(2, clip_radius=0.2, n_iter=2,
                                                    **kw),
    "coherent-auto": lambda **kw: CoherentPowerPCA(2, n_iter_max=2, **kw),
}
#: n and ε at which data_norm="auto"'s search is not drowned (not refused),
#: so that every warning a fit shows here would be a leak.
N_ROWS, EPSILON = 400, 8.0
NORMS = [1.0, "auto"]
INPUTS = ["numpy", pytest.param("dask", marks=pytest.mark.skipif(
    da is None, reason="needs dask"))]
EXTREMES = [1e200, 1e300]


def neighbours(big, n=N_ROWS, d=4, seed=0):
    """``X`` and ``X`` with its row 1 replaced by one of entries ``big``."""
    X = np.random.default_rng(seed).normal(size=(n, d))
    Y = X.copy()
    Y[1] = big
    return X, Y


def as_input(X, kind):
    return da.from_array(X, chunks=(N_ROWS // 4, X.shape[1])) if kind == "dask" else X


def _flag_extremes(block):
    """A user's lazy check that warns when a block holds an extreme value."""
    if (np.abs(block) > 1e100).any():
        warnings.warn("an extreme value", UserWarning)
    return block


def shown(make, X, **params):
    """The fit's warnings as ``(category, message)``, with every filter at
    "always" and NumPy set to warn on every floating-point error; the
    diagnostics of the release itself (NoisyReleaseWarning,
    FeatureScaleWarning) are left out: they are computed from released
    values after the release (post-processing, and may differ between
    neighbours as the release does; tests/test_release_warnings.py checks
    them against the released attributes alone)."""
    params = {"epsilon": EPSILON, **params}
    with warnings.catch_warnings(record=True) as caught, np.errstate(all="warn"):
        warnings.simplefilter("always")
        est = make(accountant=BudgetAccountant(), **params).fit(X)
    assert np.isfinite(est.components_).all()
    return [(w.category, str(w.message)) for w in caught
            if not issubclass(w.category, (NoisyReleaseWarning, FeatureScaleWarning))]


def fit_strictly(make, X, **params):
    """The fit with every warning an error and NumPy raising on every
    floating-point error: it must not raise."""
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        for diagnostic in (NoisyReleaseWarning, FeatureScaleWarning):  # see shown
            warnings.simplefilter("ignore", diagnostic)
        est = make(epsilon=EPSILON, accountant=BudgetAccountant(), **params).fit(X)
    assert np.isfinite(est.components_).all()
    return est


# ------------------------------------------------ neighbours warn alike
@pytest.mark.parametrize("kind", INPUTS)
@pytest.mark.parametrize("big", EXTREMES)
@pytest.mark.parametrize("data_norm", NORMS)
@pytest.mark.parametrize("name", FACTORIES)
def test_an_extreme_row_changes_no_warning(name, data_norm, big, kind):
    X, Y = neighbours(big)
    make = FACTORIES[name]
    ordinary = shown(make, as_input(X, kind), data_norm=data_norm)
    extreme = shown(make, as_input(Y, kind), data_norm=data_norm)
    assert extreme == ordinary == []


@pytest.mark.parametrize("kind", INPUTS)
@pytest.mark.parametrize("big", EXTREMES)
@pytest.mark.parametrize("data_norm", NORMS)
@pytest.mark.parametrize("name", FACTORIES)
def test_an_extreme_row_raises_nothing_under_error_filters(name, data_norm, big,
                                                           kind):
    X, Y = neighbours(big)
    make = FACTORIES[name]
    fit_strictly(make, as_input(X, kind), data_norm=data_norm)
    fit_strictly(make, as_input(Y, kind), data_norm=data_norm)


@pytest.mark.parametrize("big", EXTREMES)
@pytest.mark.parametrize("name", ["private", "complex"])
def test_the_non_private_fit_is_silent_on_the_clipped_rows_too(name, big):
    """epsilon=inf computes on the same path: only its public warning."""
    X, Y = neighbours(big)
    make = FACTORIES[name]
    expected = shown(make, X, data_norm=1.0, epsilon=math.inf)
    assert [c for c, _ in expected] == [PrivacyLeakWarning]
    assert expected[0][1].startswith("epsilon=inf is the non-private fit")
    assert shown(make, Y, data_norm=1.0, epsilon=math.inf) == expected


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("mode", ["warn", "raise"])
@pytest.mark.parametrize("cell", [5e-324, 1e-300, 1e-40])
def test_a_public_scaler_before_the_charge_is_silent_on_any_value(cell, mode,
                                                                   dtype):
    """A PublicScaler maps the rows in a Pipeline before the private step's
    charge, outside its silence (review 113 F1): a cell whose map underflows
    to a subnormal or 0 (or overflows, saturated) raised NumPy's flag, so
    under np.seterr(all="warn") one neighbour warned, and under "raise" one
    failed with no charge while the other was charged."""
    X, Y = neighbours(1.0)
    Y = Y.astype(dtype)
    Y[1, 0] = cell
    outcomes = []
    for rows in (X.astype(dtype), Y):
        accountant = BudgetAccountant()
        pipe = make_pipeline(PublicScaler(ranges=(-1e10, 1e10)),
                             PrivatePCA(2, data_norm=1.0, epsilon=EPSILON,
                                        accountant=accountant))
        with warnings.catch_warnings(record=True) as caught, \
                np.errstate(all=mode):
            warnings.simplefilter("always")
            pipe.fit(rows)
        outcomes.append(([str(w.message) for w in caught if not issubclass(
            w.category, (NoisyReleaseWarning, FeatureScaleWarning))],
            accountant.n_charges))
    assert outcomes[0] == outcomes[1] == ([], 1)


@pytest.mark.parametrize("mode", ["warn", "raise"])
@pytest.mark.parametrize("name", FACTORIES)
def test_the_projection_before_a_private_head_is_silent_on_any_value(name, mode):
    """fit_transform projects the training rows after the PCA's charge and,
    in a Pipeline, before a private head's: one subnormal cell underflowed in
    the product, so one neighbour warned (or failed uncharged by the head)
    and the other did not."""
    X, Y = neighbours(1.0)
    Y[1] = 5e-324
    y = (X[:, 0] > 0).astype(int)
    outcomes = []
    for rows in (X, Y):
        accountant = BudgetAccountant()
        pipe = make_pipeline(
            FACTORIES[name](data_norm=3.0, epsilon=EPSILON, accountant=accountant),
            PrivateLDA(classes=[0, 1], data_norm=3.0, epsilon=EPSILON,
                       accountant=accountant))
        with warnings.catch_warnings(record=True) as caught, \
                np.errstate(all=mode):
            warnings.simplefilter("always")
            pipe.fit(rows, y)
        outcomes.append(([str(w.message) for w in caught if not issubclass(
            w.category, (NoisyReleaseWarning, FeatureScaleWarning))],
            accountant.n_charges))
    assert outcomes[0] == outcomes[1] == ([], 2)


@pytest.mark.skipif(da is None, reason="needs dask")
@pytest.mark.parametrize("data_norm", NORMS)
@pytest.mark.parametrize("name", FACTORIES)
def test_a_lazy_user_step_that_warns_on_some_rows_is_silenced(name, data_norm):
    """A Dask input's own steps run inside the fit: a check of the user's that
    warns on extreme values is dropped, under "always" and under "error"."""
    X, Y = neighbours(1e200)
    make = FACTORIES[name]
    lazy = [as_input(Z, "dask").map_blocks(_flag_extremes, dtype=Z.dtype)
            for Z in (X, Y)]
    assert shown(make, lazy[1], data_norm=data_norm) == shown(
        make, lazy[0], data_norm=data_norm) == []
    for Z in lazy:
        fit_strictly(make, Z, data_norm=data_norm)


# ----------------------------------------- the public warnings are shown
@pytest.mark.parametrize("kind", INPUTS)
@pytest.mark.parametrize("name", FACTORIES)
def test_a_fixed_random_state_still_warns_once(name, kind):
    X, Y = neighbours(1e300)
    make = FACTORIES[name]
    caught = shown(make, as_input(Y, kind), data_norm=1.0, random_state=0)
    assert caught == shown(make, as_input(X, kind), data_norm=1.0, random_state=0)
    assert [c for c, _ in caught] == [PrivacyLeakWarning]
    assert caught[0][1].startswith("random_state=0 fixes the noise")


@pytest.mark.parametrize("name", FACTORIES)
def test_public_warnings_keep_their_place_and_number(name):
    """Solver parameters (before the read), data_norm=None (after the fit: it
    quotes data_norm_, which that non-private fit releases) and the fixed seed
    (after the fit), each once, and in that order, whatever an extreme row
    does inside. (A drowned "auto" search, which warned before the read, is
    now refused there: tests/test_bounds.py.)"""
    X, Y = neighbours(1e200)
    make = FACTORIES[name]
    caught = shown(make, Y, data_norm="auto", random_state=0, copy=False)
    assert [c for c, _ in caught] == [SolverParameterWarning, PrivacyLeakWarning]
    assert "copy=False has no effect" in caught[0][1]
    assert caught[1][1].startswith("random_state=0 fixes the noise")
    with warnings.catch_warnings(record=True) as record, np.errstate(all="warn"):
        warnings.simplefilter("always")
        est = make(epsilon=EPSILON, accountant=BudgetAccountant(),
                   random_state=0).fit(X)
    record = [w for w in record if not issubclass(
        w.category, (NoisyReleaseWarning, FeatureScaleWarning))]  # see shown
    leaks = [str(w.message) for w in record]
    assert [w.category for w in record] == [PrivacyLeakWarning] * 2
    assert leaks[0].startswith("data_norm is None, so it was set to the largest "
                               f"row norm of the data ({est.data_norm_:.6g})")
    assert leaks[1].startswith("random_state=0 fixes the noise")


def test_a_public_warning_raised_as_an_error_leaves_the_fit_undone():
    """Under "error" the fixed seed's warning, issued after the release, is an
    exception after the charge: the charge stays, the estimator is unchanged
    (as any failure after the charge)."""
    X, Y = neighbours(1e300)
    acc = BudgetAccountant()
    est = PrivatePCA(2, data_norm=1.0, accountant=acc).fit(X)
    fitted = est.components_.copy()
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        for diagnostic in (NoisyReleaseWarning, FeatureScaleWarning):  # see shown
            warnings.simplefilter("ignore", diagnostic)
        with pytest.raises(PrivacyLeakWarning, match="random_state=0"):
            est.set_params(random_state=0).fit(Y)
    assert acc.n_charges == 2
    np.testing.assert_array_equal(est.components_, fitted)


@pytest.mark.parametrize("name", ["geterr", "seterr"])
def test_an_interrupt_at_the_silences_edges_leaves_nothing_silenced(name):
    """A Ctrl-C landing where the silence is set up or taken down: in the
    restore of NumPy's state, placed before the silence's count went down,
    it left every warning of the process dropped for good."""
    from sklearn_dppca import _warning_rules

    X, _ = neighbours(1.0)
    before = np.geterr()
    est = PrivatePCA(2, data_norm=1.0, accountant=BudgetAccountant())
    with pytest.raises(KeyboardInterrupt), \
            interrupted_at(name, "private_computation"):
        est.fit(X)
    assert np.geterr() == before
    assert _warning_rules._silence["depth"] == 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn("the user's own")
    assert len(caught) == 1
    assert vars(est) == vars(PrivatePCA(2, data_norm=1.0, accountant=est.accountant))


def test_an_interrupt_as_the_silence_is_entered_leaves_nothing_silenced(monkeypatch):
    """A Ctrl-C landing just after the silence's shared count went up, before
    the block's ``try``: the count stayed up, and every warning of the
    process was dropped for good, the PrivacyLeakWarnings of unsafe use
    included (review 121 F1)."""
    import threading

    from sklearn_dppca import _warning_rules

    class Interrupting(threading.local):
        armed = True

        def __setattr__(self, name, value):
            super().__setattr__(name, value)
            if Interrupting.armed and name == "depth" and value == 1:
                Interrupting.armed = False
                raise KeyboardInterrupt("as the silence is entered")

    monkeypatch.setattr(_warning_rules, "_own_silence", Interrupting())
    X, _ = neighbours(1.0)
    with pytest.raises(KeyboardInterrupt, match="entered"):
        PrivatePCA(2, data_norm=1.0, accountant=BudgetAccountant()).fit(X)
    assert _warning_rules._silence["depth"] == 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn("the user's own")
        PrivatePCA(2, data_norm=1.0, random_state=0,
                   accountant=BudgetAccountant()).fit(X)
    assert "the user's own" in str(caught[0].message)
    assert any(issubclass(w.category, PrivacyLeakWarning) for w in caught)


def test_an_interrupt_while_the_exit_awaits_the_lock_leaves_nothing_silenced():
    """A real Ctrl-C while the block's exit waits for the lock another
    thread's block holds (concurrent fits): the count was never taken down,
    and every later warning of the process was dropped (review 123 F4)."""
    import signal
    import threading
    import time

    from sklearn_dppca import _warning_rules

    holding = threading.Event()
    main = threading.main_thread().ident

    def holder():
        with _warning_rules._silence_lock:
            holding.set()
            time.sleep(0.3)
            signal.pthread_kill(main, signal.SIGINT)
            time.sleep(0.3)

    interrupted, thread = False, threading.Thread(target=holder)
    try:
        try:
            with _warning_rules.private_computation():
                thread.start()
                holding.wait()
        finally:
            thread.join()
    except KeyboardInterrupt:
        interrupted = True
    try:
        assert interrupted
        assert _warning_rules._silence["depth"] == 0
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warnings.warn("the user's own")
        assert len(caught) == 1
    finally:  # a failure here must not silence the rest of the session
        _warning_rules._silence["depth"] = 0
        _warning_rules._own_silence.depth = 0


def test_an_interrupt_at_a_nested_blocks_exit_leaves_numpys_state():
    """A Ctrl-C at the exit of a fold fit's block, nested in the search's:
    its generator, left suspended, is finalized once the exception is freed,
    and it restored the state it had saved, the search's "ignore", after
    the fits had put the user's back: NumPy's floating-point warnings were
    off for the rest of the process (review 43; ``np.errstate``'s own exit
    did the same)."""
    import gc
    import sys

    from sklearn_dppca import _warning_rules
    from sklearn_dppca.model_selection import PrivateGridSearchCV

    def trace(frame, event, arg):
        if event != "call" or frame.f_code.co_name != "__exit__":
            return  # (an error here would end the tracing silently)
        gen = getattr(frame.f_locals.get("self"), "gen", None)
        if (getattr(gen, "__name__", None) == "private_computation"
                and _warning_rules._own_silence.depth > 1):
            sys.settrace(None)
            raise KeyboardInterrupt("at a fold fit's private_computation exit")

    X, _ = neighbours(1.0)
    before = np.geterr()
    search = PrivateGridSearchCV(PrivatePCA(data_norm=1.0), {"n_components": [1, 2]},
                                 cv=2, accountant=BudgetAccountant())
    sys.settrace(trace)
    try:
        with pytest.raises(KeyboardInterrupt, match="fold fit"):
            search.fit(X)
    finally:
        sys.settrace(None)
    gc.collect()
    assert np.geterr() == before
    assert _warning_rules._silence["depth"] == 0


def test_a_refused_fit_warns_nothing_about_its_data():
    """A fit refused before the read (over budget) shows only the warnings
    decided before it, and none of the fit's leaks."""
    _, Y = neighbours(1e200)
    acc = BudgetAccountant(epsilon=1.0)
    with warnings.catch_warnings(record=True) as caught, np.errstate(all="warn"):
        warnings.simplefilter("always")
        with pytest.raises(BudgetExceededError):
            PrivatePCA(2, epsilon=2.0, data_norm=1.0, random_state=0,
                       accountant=acc).fit(Y)
    assert caught == [] and acc.n_charges == 0


# ------------------------------------------------------- across threads
def test_private_computations_in_threads_share_one_silence():
    """Two blocks overlapping in two threads: the first to leave does not lift
    the silence under the other, and the last restores the filters found."""
    before = list(warnings.filters)
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def first():
        with private_computation():
            a_in.set()
            b_in.wait(5)
        a_out.set()

    def second():
        a_in.wait(5)
        with private_computation():
            b_in.set()
            a_out.wait(5)
            warnings.warn("inside, after the other block left", UserWarning)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        inside = list(warnings.filters)
        threads = [threading.Thread(target=f) for f in (first, second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        heard = [w for w in caught if not issubclass(
            w.category, (NoisyReleaseWarning, FeatureScaleWarning))]  # see shown
        assert warnings.filters == inside
    assert heard == []
    assert warnings.filters == before


@pytest.mark.skipif(da is None, reason="needs dask")
def test_concurrent_fits_are_silent_and_leave_the_filters_as_they_were():
    """Eight fits in eight threads, half on the extreme neighbour through a
    user's warning step: nothing is shown while any of them runs, and the
    filters are the caller's again once all are done."""
    X, Y = neighbours(1e200)
    lazy = [as_input(Z, "dask").map_blocks(_flag_extremes, dtype=Z.dtype)
            for Z in (X, Y)]
    acc = BudgetAccountant()
    estimators = [PrivatePCA(2, data_norm=1.0, accountant=acc) for _ in range(8)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        before = list(warnings.filters)
        threads = [threading.Thread(target=est.fit, args=(Z,))
                   for est, Z in zip(estimators, lazy * 4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert warnings.filters == before
        heard = [w for w in caught if not issubclass(
            w.category, (NoisyReleaseWarning, FeatureScaleWarning))]  # see shown
        warnings.warn("shown", UserWarning)  # outside any fit: shown again
    assert acc.n_charges == 8
    assert heard == []
    assert [str(w.message) for w in caught][-1:] == ["shown"]


def _hold_catch_warnings(entered, leave):
    with warnings.catch_warnings():
        entered.set()
        assert leave.wait(10)


def test_another_threads_catch_warnings_left_mid_fit_does_not_lift_the_silence():
    """Issue 30, item 5: a thread that entered catch_warnings before the
    private computation and leaves it during it restores filters without
    the silence (before: the warning below was shown)."""
    before = list(warnings.filters)
    entered, leave = threading.Event(), threading.Event()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        other = threading.Thread(target=_hold_catch_warnings, args=(entered, leave))
        other.start()
        assert entered.wait(10)
        with private_computation():
            leave.set()
            other.join()
            warnings.warn("inside, after the other thread left", UserWarning)
        heard = [w for w in caught if not issubclass(
            w.category, (NoisyReleaseWarning, FeatureScaleWarning))]  # see shown
        warnings.warn("after", UserWarning)
    assert heard == []
    assert [str(w.message) for w in caught] == ["after"]
    assert warnings.filters == before


def test_another_threads_catch_warnings_left_after_the_fit_leaves_no_silence():
    """Issue 30, item 5: a thread that entered catch_warnings during the
    private computation and leaves it after restores the user's filters,
    not a silenced list (before: every later warning was dropped)."""
    before = list(warnings.filters)
    entered, leave = threading.Event(), threading.Event()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        inside = list(warnings.filters)
        other = threading.Thread(target=_hold_catch_warnings, args=(entered, leave))
        with private_computation():
            other.start()
            assert entered.wait(10)
        leave.set()
        other.join()
        assert warnings.filters == inside
        warnings.warn("after", UserWarning)
    assert [str(w.message) for w in caught] == ["after"]
    assert warnings.filters == before


@pytest.mark.skipif(da is None, reason="needs dask")
def test_fits_stay_silent_while_another_thread_enters_and_leaves_catch_warnings():
    """Four fits on the flagged neighbour through a user's warning step
    while another thread keeps entering and leaving catch_warnings (as the
    search's head check does): nothing is shown, and the filters are the
    caller's afterwards."""
    _, Y = neighbours(1e200)
    lazy = as_input(Y, "dask").map_blocks(_flag_extremes, dtype=Y.dtype)
    acc, stop = BudgetAccountant(), threading.Event()

    def churn():
        while not stop.is_set():
            with warnings.catch_warnings():
                warnings.simplefilter("default")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        before = list(warnings.filters)
        churner = threading.Thread(target=churn)
        churner.start()
        fits = [threading.Thread(target=PrivatePCA(2, data_norm=1.0,
                                                   accountant=acc).fit,
                                 args=(lazy,)) for _ in range(4)]
        for t in fits:
            t.start()
        for t in fits:
            t.join()
        stop.set()
        churner.join()
        heard = [w for w in caught if not issubclass(
            w.category, (NoisyReleaseWarning, FeatureScaleWarning))]  # see shown
        assert warnings.filters == before
    assert acc.n_charges == 4 and heard == []


# ------------------------------------------ where the public warnings point
def _leak_sites(call):
    """``(filename, lineno)`` of each PrivacyLeakWarning raised by ``call()``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [(w.filename, w.lineno) for w in caught
            if issubclass(w.category, PrivacyLeakWarning)]


def test_privacy_leak_warnings_point_at_the_users_line():
    """Issue 25: a PrivacyLeakWarning names the user's line, not the package's
    (it named sklearn_dppca/_base.py, the fit's all-or-nothing wrapper), from
    fit, fit_transform, a Pipeline, cross_val_score and the private search."""
    from sklearn.model_selection import cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    from sklearn_dppca.model_selection import PrivateGridSearchCV

    X = np.random.default_rng(0).normal(size=(200, 3))

    def pca(**kw):
        return PrivatePCA(2, data_norm=5.0, random_state=0,
                          accountant=BudgetAccountant(), **kw)

    calls = {
        "fit": lambda: pca().fit(X),
        "fit_transform": lambda: pca().fit_transform(X),
        "data_norm=None": lambda: PrivatePCA(2, accountant=BudgetAccountant()).fit(X),
        "pipeline": lambda: make_pipeline(FunctionTransformer(), pca()).fit(X),
        "cross_val_score": lambda: cross_val_score(pca(), X, cv=2),
        "search": lambda: PrivateGridSearchCV(
            PrivatePCA(data_norm=5.0), {"n_components": [1, 2]}, cv=2,
            random_state=0, accountant=BudgetAccountant()).fit(X),
    }
    for name, call in calls.items():
        sites = _leak_sites(call)
        assert sites, name
        assert {f for f, _ in sites} == {__file__}, (name, sites)


def test_steps_that_learn_without_privacy_before_a_private_one_are_warned_of(
        tmp_path):
    """A Pipeline's StandardScaler or mean SimpleImputer before a private
    estimator learns its means and scales exactly, outside the fit's charge:
    it warned of nothing (review 70). The package's own steps, stateless
    steps and public fills are not warned of."""
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer, StandardScaler

    from sklearn_dppca.linear_model import PrivateLDA
    from sklearn_dppca.preprocessing import PrivateStandardScaler, PublicScaler

    rng = np.random.default_rng(0)
    X, y = rng.uniform(-1, 1, (300, 4)), rng.integers(0, 2, 300)

    def warned(*steps, head=False):
        budget = BudgetAccountant()
        last = (PrivateLDA([0, 1], data_norm=3.0, accountant=budget) if head
                else PrivatePCA(2, data_norm=3.0, accountant=budget))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            make_pipeline(*steps, last).fit(X, y)
        return [str(w.message) for w in caught if w.category is PrivacyLeakWarning
                and "without privacy" in str(w.message)]

    assert "StandardScaler" in warned(StandardScaler())[0]
    assert "SimpleImputer" in warned(SimpleImputer())[0]
    # the enclosing Pipelines too: nested, through a union, cached (review 76)
    from sklearn.pipeline import make_union

    def private():
        return PrivatePCA(2, data_norm=3.0, accountant=BudgetAccountant())

    for outer in (make_pipeline(StandardScaler(), make_pipeline(private())),
                  make_pipeline(StandardScaler(), make_union(private()),
                                FunctionTransformer()),
                  make_pipeline(StandardScaler(), private(), FunctionTransformer(),
                                memory=str(tmp_path))):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            outer.fit(X)
        assert any("without privacy" in str(w.message) for w in caught), outer
    assert warned(StandardScaler(), head=True)
    for safe in (FunctionTransformer(np.tanh), PublicScaler(center=0.0, scale=2.0),
                 PrivateStandardScaler((-1, 1), accountant=BudgetAccountant()),
                 SimpleImputer(strategy="constant", fill_value=0.0,
                               keep_empty_features=True)):
        assert not warned(safe), safe


def test_a_delta_not_below_one_over_n_is_warned_of():
    """(ε, δ)-DP with δ ≥ 1/n admits publishing a whole row with probability
    δ: the command line warned of it, the estimators, heads and searches did
    not (review 70)."""
    from sklearn_dppca.linear_model import PrivateRidge
    from sklearn_dppca.model_selection import PrivateGridSearchCV

    rng = np.random.default_rng(0)
    X, y = rng.uniform(-1, 1, (2000, 3)), rng.uniform(-1, 1, 2000)

    def warned(fit):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fit()
        return sum("not below 1/n" in str(w.message) for w in caught
                   if w.category is PrivacyLeakWarning)

    def pca(delta):
        return PrivatePCA(2, data_norm=2.0, delta=delta, accountant=BudgetAccountant())

    assert warned(lambda: pca(1e-3).fit(X)) == 1
    assert warned(lambda: pca(1e-4).fit(X)) == 0
    assert warned(lambda: PrivateRidge((-1, 1), data_norm=2.0, delta=1e-3,
                                       accountant=BudgetAccountant()).fit(X, y)) == 1
    assert warned(lambda: PrivateGridSearchCV(
        PrivatePCA(data_norm=2.0), {"n_components": [1, 2]}, delta=1e-3,
        accountant=BudgetAccountant()).fit(X)) == 1
    scaler = PrivateStandardScaler(bounds=(-1, 1), delta=1e-3,
                                   accountant=BudgetAccountant())
    assert warned(lambda: scaler.fit(X)) == 1  # review 79 F3


@pytest.mark.parametrize("scaler", ["public", "private"])
def test_a_finite_row_of_mixed_huge_values_fits_a_scaler_under_seterr(scaler):
    """scikit-learn's finiteness check sums each row: one finite row of
    ±1e308 of mixed signs is inf − inf there, a FloatingPointError under
    np.seterr(all="raise") that one row decided before any charge, not a
    documented refusal (review 123 F5)."""
    from sklearn_dppca.preprocessing import PrivateStandardScaler, PublicScaler

    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 30))  # large enough for the sum's shortcut
    X[0] = np.where(rng.random(30) < 0.5, 1e308, -1e308)
    X[0, :2] = [1e308, -1e308]
    est = (PublicScaler((-3.0, 3.0)) if scaler == "public" else
           PrivateStandardScaler(bounds=(-3.0, 3.0), accountant=BudgetAccountant()))
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X)
        assert np.isfinite(est.transform(X)).all()


def test_an_error_lifting_the_silence_is_raised_not_retried(monkeypatch):
    """The exit retries an interrupt only: another error, raised each time,
    had it spin forever (review 126 F3)."""
    from sklearn_dppca import _warning_rules

    calls = []
    unfilter = _warning_rules._unfilter

    def failing(filters):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("lifting failed")
        unfilter(filters)

    monkeypatch.setattr(_warning_rules, "_unfilter", failing)
    with pytest.raises(RuntimeError, match="lifting failed"):
        with _warning_rules.private_computation():
            pass
    assert len(calls) == 1
    _warning_rules._lift_silence()  # what the failure left
