"""The default accountant across threads and tasks, and charges in (ε, δ).

1. ``with acc:`` is the default in the thread or async task that entered it,
   and in the work it starts (issue 22, "Budget"): interleaved blocks of two
   threads, async tasks, joblib's threading backend, thread pools, and the
   refusal where a worker thread cannot tell whose work it runs.
2. ``spend``/``check`` of a release of the user's own, stated in
   ``(epsilon, delta)``, composed with the fits by the bound of
   docs/budgets.rst; ``total()`` and ``remaining(k, delta=...)``.
"""

import asyncio
import pickle
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import joblib
import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV

from sklearn_dppca import BudgetAccountant, BudgetExceededError, PrivatePCA, privacy
from sklearn_dppca.privacy import get_default_accountant, set_default_accountant

GRID = {"n_components": [1, 2]}


@pytest.fixture(scope="module")
def X():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3)) * [2.0, 1.0, 0.3]
    return X / np.linalg.norm(X, axis=1).max()


@pytest.fixture
def original():
    """The process-wide default, restored after the test."""
    default = get_default_accountant()
    yield default
    set_default_accountant(default)
    assert not getattr(privacy, "_open_blocks", ()), "a test left a block open"


def pca(**params):
    params = {"n_components": 1, "epsilon": 1.0, "data_norm": 1.0, **params}
    return PrivatePCA(**params)


def in_thread(function, *args):
    """Run ``function(*args)`` in a new thread; return its result or raise."""
    out = {}

    def target():
        try:
            out["result"] = function(*args)
        except BaseException as exc:  # re-raised in the caller
            out["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    return out["result"]


# ==========================================================================
# 1. `with acc:` in threads and tasks
# ==========================================================================
def test_interleaved_blocks_of_two_threads_charge_their_own(X, original):
    """The issue's sequence: A enters `with a:`, B enters `with b:`, A exits,
    then B fits inside its block. B's fit is b's, and no block outlives its
    `with` statement (before: charged to the unlimited default, and `a`
    stayed the default for good)."""
    a, b = BudgetAccountant(10.0), BudgetAccountant(10.0)
    before = original.n_charges
    a_entered, b_entered, a_left = (threading.Event() for _ in range(3))
    seen = {}

    def thread_a():
        with a:
            a_entered.set()
            assert b_entered.wait(10)
            seen["a"] = get_default_accountant()
        a_left.set()

    def thread_b():
        assert a_entered.wait(10)
        with b:
            b_entered.set()
            assert a_left.wait(10)
            pca().fit(X)
            seen["b"] = get_default_accountant()
        seen["b after"] = get_default_accountant()

    threads = [threading.Thread(target=t) for t in (thread_a, thread_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"a": a, "b": b, "b after": original}
    assert (a.n_charges, b.n_charges, original.n_charges) == (0, 1, before)
    assert get_default_accountant() is original


def test_blocks_are_local_to_async_tasks(X, original):
    """A task suspended inside its block does not lend it to other tasks."""
    a, b = BudgetAccountant(10.0), BudgetAccountant(10.0)
    before = original.n_charges
    seen = {}

    async def main():
        entered, done = asyncio.Event(), asyncio.Event()

        async def in_a():
            with a:
                entered.set()
                await done.wait()  # suspended inside the block
                pca().fit(X)

        async def outside():
            await entered.wait()
            seen["outside"] = get_default_accountant()
            pca().fit(X)  # no block in this task: the process-wide default
            done.set()

        async def in_b():
            await entered.wait()
            with b:
                await asyncio.sleep(0)
                seen["b"] = get_default_accountant()
                pca().fit(X)

        await asyncio.gather(in_a(), outside(), in_b())

    asyncio.run(main())
    assert seen == {"outside": original, "b": b}
    assert (a.n_charges, b.n_charges, original.n_charges) == (1, 1, before + 1)


def test_a_task_started_inside_a_block_stays_in_it(X, original):
    """Work started in a block is the block's, even if it ends after it."""
    a = BudgetAccountant(10.0)
    before = original.n_charges

    async def main():
        release = asyncio.Event()

        async def later():
            await release.wait()
            pca().fit(X)
            return get_default_accountant()

        with a:
            task = asyncio.create_task(later())
            in_thread_result = await asyncio.to_thread(get_default_accountant)
        release.set()
        return await task, in_thread_result

    assert asyncio.run(main()) == (a, a)
    assert (a.n_charges, original.n_charges) == (1, before)


@pytest.mark.parametrize("budget", [10.0, 1.5])
def test_threaded_grid_search_inside_a_block_charges_the_block(X, original, budget):
    """GridSearchCV(n_jobs=2) on joblib's threading backend inside `with
    limited:` charges every fit to it (5 fits), and one over its budget is
    refused there, not passed to the unlimited default."""
    limited = BudgetAccountant(budget)
    before = original.n_charges
    search = GridSearchCV(pca(), GRID, cv=2, n_jobs=2, error_score="raise")
    with limited, joblib.parallel_backend("threading"):
        if budget > 2:
            search.fit(X)
        else:
            with pytest.raises(BudgetExceededError):
                search.fit(X)
    assert limited.n_charges == (5 if budget > 2 else 2)  # 2 fits fit in 1.5
    assert original.n_charges == before


def test_thread_pool_made_before_the_block_charges_it_inside(X, original):
    a = BudgetAccountant(10.0)
    before = original.n_charges
    with ThreadPoolExecutor(2) as pool:
        pool.submit(int).result()  # the pool's thread exists before the block
        with a:
            pool.submit(pca().fit, X).result()
        pool.submit(pca().fit, X).result()  # after it: the process default
    assert (a.n_charges, original.n_charges) == (1, before + 1)


def test_worker_thread_refuses_when_it_cannot_tell_whose_work_it_runs(X, original):
    """With blocks of two accountants open in two threads, a thread that has
    no block of its own refuses (before: charged whichever was entered
    last). The main thread, nobody's worker, uses the process default."""
    a, b = BudgetAccountant(10.0), BudgetAccountant(10.0)
    before = original.n_charges
    entered = [threading.Event(), threading.Event()]
    release = threading.Event()

    def hold(accountant, event):
        with accountant:
            event.set()
            assert release.wait(10)

    holders = [threading.Thread(target=hold, args=pair)
               for pair in zip((a, b), entered)]
    for t in holders:
        t.start()
    try:
        for event in entered:
            assert event.wait(10)
        with pytest.raises(RuntimeError, match="cannot be told"):
            in_thread(pca().fit, X)
        with pytest.raises(RuntimeError, match="accountant=") as caught:
            in_thread(get_default_accountant)
        assert repr(a) in str(caught.value) and repr(b) in str(caught.value)
        in_thread(pca(accountant=a).fit, X)  # an explicit accountant is fine
        pca().fit(X)  # in the main thread: the process-wide default
    finally:
        release.set()
        for t in holders:
            t.join()
    assert (a.n_charges, b.n_charges, original.n_charges) == (1, 0, before + 1)
    in_thread(pca().fit, X)  # no block open any more
    assert original.n_charges == before + 2


def test_nested_blocks_refuse_in_worker_threads(X, original):
    """A worker may still run work of the outer block: refused, not guessed."""
    a, b = BudgetAccountant(10.0), BudgetAccountant(10.0)
    with a:
        with b:
            assert get_default_accountant() is b
            with pytest.raises(RuntimeError, match="cannot be told"):
                in_thread(pca().fit, X)
        assert in_thread(get_default_accountant) is a
    assert a.n_charges == b.n_charges == 0


def test_worker_thread_refuses_under_a_block_and_a_replaced_default(X, original):
    mine, a = BudgetAccountant(10.0), BudgetAccountant(10.0)
    set_default_accountant(mine)
    assert in_thread(get_default_accountant) is mine
    with a:
        with pytest.raises(RuntimeError, match="cannot be told"):
            in_thread(pca().fit, X)
    assert mine.n_charges == a.n_charges == 0


def test_set_default_accountant_outside_blocks_is_process_wide(X, original):
    """set_default_accountant() is seen by every thread and outlives blocks:
    one set inside a block takes effect when the block exits (before: the
    block's exit restored the default it found, undoing it)."""
    mine, other, a = (BudgetAccountant(10.0) for _ in range(3))
    assert in_thread(set_default_accountant, mine) is original
    assert get_default_accountant() is mine
    assert in_thread(get_default_accountant) is mine
    with a:
        assert set_default_accountant(other) is mine
        assert get_default_accountant() is a  # the block still rules here
        pca().fit(X)
    assert get_default_accountant() is other
    assert in_thread(get_default_accountant) is other
    pca().fit(X)
    assert (a.n_charges, mine.n_charges, other.n_charges) == (1, 0, 1)


def test_block_left_by_another_thread_is_an_error(original):
    a = BudgetAccountant(10.0)
    a.__enter__()
    try:
        with pytest.raises(RuntimeError, match="innermost"):
            in_thread(a.__exit__, None, None, None)
    finally:
        a.__exit__(None, None, None)
    assert get_default_accountant() is original


def test_estimator_pickled_where_the_default_is_ambiguous_refuses_in_a_worker(
    X, original, monkeypatch, tmp_path
):
    """loky pickles estimators in a thread of its own: where that thread
    cannot tell the default, the estimator carries a refusal to the worker
    process instead of leaving it to the worker's unlimited default."""
    a = BudgetAccountant(10.0, path=tmp_path / "a.db")
    b = BudgetAccountant(10.0)
    with a:
        blob = in_thread(pickle.dumps, pca())  # a: the only block open
        entered, release = threading.Event(), threading.Event()

        def hold():
            with b:
                entered.set()
                assert release.wait(10)

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            assert entered.wait(10)
            ambiguous = in_thread(pickle.dumps, pca())
        finally:
            release.set()
            holder.join()
    monkeypatch.setattr(privacy, "_process_id", "another process")
    pickle.loads(blob).fit(X)  # "in the worker": charged to the ledger
    with pytest.raises(RuntimeError, match="could not be told"):
        pickle.loads(ambiguous).fit(X)
    assert (a.n_charges, b.n_charges) == (1, 0)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.FitFailedWarning")
def test_process_workers_charge_the_block_of_the_thread_that_sent_them(X, original):
    """joblib's worker processes (loky) charge a ledger default set by a
    block: the estimators are pickled in loky's own thread, which has no
    block of its own."""
    limited = BudgetAccountant(epsilon=10.0)
    with limited:
        search = GridSearchCV(pca(), GRID, cv=2, n_jobs=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(ValueError, match="All the 4 fits failed") as caught:
                search.fit(X)
    # an in-memory accountant cannot be charged from another process: every
    # worker refuses, naming the fix, rather than charge its own default
    assert "copy in another process" in str(caught.value)
    assert limited.n_charges == 0
