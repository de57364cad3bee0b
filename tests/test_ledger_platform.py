"""Ledgers and the platform: a folder SQLite cannot write its journal in, and
a fork while another thread uses the ledger (review 98)."""

import os
import signal
import sqlite3
import threading
import time

import numpy as np
import pytest

from sklearn_dppca import BudgetAccountant, PrivatePCA
from sklearn_dppca._rows import InMemoryRows
from sklearn_dppca.privacy import LedgerError

pytestmark = pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")


def test_a_ledger_in_a_read_only_folder_is_refused_before_the_data(tmp_path,
                                                                   monkeypatch):
    """The file writable, its folder not: SQLite cannot create the rollback
    journal. The check's ``UPDATE ... SET value = value`` wrote no page
    (SQLite skips an identical value), so it passed, and the fit failed at
    its charge after every row was read."""
    folder = tmp_path / "ledgers"
    folder.mkdir()
    path = str(folder / "budget.db")
    acc = BudgetAccountant(5.0, 1e-6, path=path)
    os.chmod(folder, 0o500)
    try:
        if os.access(folder, os.W_OK):  # root, or a file system without modes
            pytest.skip("the folder stays writable for this user")
        read = []
        first_pass = InMemoryRows.first_pass
        monkeypatch.setattr(InMemoryRows, "first_pass",
                            lambda *a, **k: read.append(1) or first_pass(*a, **k))
        with pytest.raises(LedgerError, match="readonly"):
            acc.check(mu=0.1)
        X = np.random.default_rng(0).normal(size=(40, 3)) / 4
        with pytest.raises(LedgerError, match="readonly"):
            PrivatePCA(1, epsilon=1.0, data_norm=1.0, accountant=acc).fit(X)
        assert not read and acc.n_charges == 0 and acc.spent == (0.0, 0.0)
    finally:
        os.chmod(folder, 0o700)
    assert acc.check(mu=0.1)  # writable again: the probe left nothing behind
    assert sqlite3.connect(path).execute(
        "SELECT value FROM meta WHERE key = 'head'").fetchone()[0] == (
            acc.anchor().split(":")[1])


def _child_charges(acc):
    """Fork; the child charges ``acc`` once (killed after 20 s if it hangs).
    Returns whether it charged."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        signal.alarm(20)
        try:
            acc.spend(mu=0.01)
        finally:
            os._exit(0 if acc.n_charges else 1)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:.*fork:DeprecationWarning")
def test_a_fork_while_another_thread_reads_the_ledger(tmp_path):
    """A lock held by another thread at the fork stays held in the child:
    the ledger's own lock (forked while a thread held it, the child's first
    charge waited for ever), and SQLite's (a thread opening a connection: 13
    of 40 children hung while a thread read ``spent`` in a loop). A fork now
    waits for the threads inside SQLite and the child gets new locks."""
    acc = BudgetAccountant(5.0, 1e-6, path=str(tmp_path / "budget.db"))
    with acc._ledger._seen_lock:  # held by this thread at the fork
        charged = _child_charges(acc)
    assert charged  # (asserted outside: a failure's report reads acc)
    inside, leave = threading.Event(), threading.Event()

    def reader():
        def body(con):
            inside.set()
            leave.wait(30)
        acc._ledger._transaction(body, "DEFERRED")

    thread = threading.Thread(target=reader)
    thread.start()
    assert inside.wait(30)
    timer = threading.Timer(0.5, leave.set)
    timer.start()
    started = time.monotonic()
    forked = _child_charges(acc)  # waits for the reader to leave SQLite
    assert forked and leave.is_set() and time.monotonic() - started >= 0.4
    thread.join(30)
    assert acc.n_charges == 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:.*fork:DeprecationWarning")
@pytest.mark.parametrize("use", ["spend", "read"])
def test_a_fork_beside_a_thread_using_the_ledger_in_a_loop(tmp_path, use):
    """The fork waited for no thread inside SQLite, but a thread that
    charges (or reads ``spent``) in a loop re-entered at once and won the
    lock each time: the fork (a worker start) waited 30-60 s, as long as
    the loop ran (review 101 F5). A waiting fork now goes first: it ends
    within a few of the thread's calls, and the thread goes on."""
    acc = BudgetAccountant(1000.0, 1e-6, path=str(tmp_path / "budget.db"))
    stop, calls = threading.Event(), [0]

    def loop():
        while not stop.is_set():
            if use == "spend":
                acc.spend(mu=1e-4)
            else:
                acc.spent
            calls[0] += 1

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    while calls[0] < 5:
        time.sleep(0.01)
    started = time.monotonic()
    forked = [None]
    forker = threading.Thread(target=lambda: forked.__setitem__(
        0, _child_charges(acc)), daemon=True)
    forker.start()
    forker.join(10)
    waited = time.monotonic() - started
    before = calls[0]
    time.sleep(0.2)
    after = calls[0]  # the loop goes on after the fork
    stop.set()
    thread.join(30)
    assert not forker.is_alive() and waited < 5, waited
    assert forked[0] and after > before


def test_a_pickled_ledger_accountant_refuses_another_file_at_its_path(tmp_path):
    """A ledger accountant pickled as its path alone charged whatever ledger
    the receiving process found there (a worker machine's file of the same
    name, a stale copy): the sender's ledger never saw those charges. It
    carries which ledger it is and the head it had read."""
    import pickle
    import shutil

    from sklearn_dppca.privacy import LedgerIntegrityError

    path = str(tmp_path / "budget.db")
    acc = BudgetAccountant(1.0, 1e-6, path=path)
    shutil.copy(path, str(tmp_path / "stale.db"))  # a copy before any charge
    acc.spend(mu=0.1)
    sent = pickle.dumps(acc)
    acc.spend(mu=0.05)  # charges after the pickling may follow
    assert pickle.loads(sent).n_charges == 2
    os.replace(str(tmp_path / "stale.db"), path)  # the worker's stale copy
    X = np.random.default_rng(0).normal(size=(40, 3)) / 4
    for match in ("no longer extends", "not the ledger this"):
        if match == "not the ledger this":
            os.remove(path)
            BudgetAccountant(1.0, 1e-6, path=path)  # another, the same name
        loaded = pickle.loads(sent)  # loads: a saved model still transforms
        for use in (lambda: loaded.check(mu=0.1), lambda: loaded.spend(mu=0.1),
                    lambda: PrivatePCA(1, epsilon=1.0, data_norm=1.0,
                                       accountant=loaded).fit(X)):
            with pytest.raises(LedgerIntegrityError, match=match):
                use()
        assert BudgetAccountant(path=path).n_charges == 0
    legacy = BudgetAccountant.__new__(BudgetAccountant)  # an earlier pickle
    legacy.__setstate__({"path": path, "label": None})
    assert legacy.n_charges == 0
