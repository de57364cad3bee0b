"""Budget ledgers: a SQLite file shared by processes, restarts and failures.

Covers ``sklearn_dppca._ledger`` through ``BudgetAccountant(path=...)``, the
default accountant in joblib (loky) worker processes, and the ``dppca ledger``
command line. Every loop is bounded; nothing asserts on timing.
"""

import json
import math
import multiprocessing
import os
import pickle
import shutil
import signal
import sqlite3
import threading
import time
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, cross_val_score

from sklearn_dppca import BudgetAccountant, BudgetExceededError, PrivatePCA
from sklearn_dppca.__main__ import main
from sklearn_dppca._rows import InMemoryRows
from sklearn_dppca.privacy import (
    LedgerError,
    LedgerIntegrityError,
    gdp_epsilon,
    gdp_mu,
    get_default_accountant,
    set_default_accountant,
)

MU1 = gdp_mu(1.0, 1e-6)  # one fit at ε = 1, δ = 1e-6
pytestmark = pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")


@pytest.fixture
def X():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(60, 3)) * [1.0, 0.5, 0.2]
    return X / np.linalg.norm(X, axis=1).max()


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "budget.db")


def exact(k, mu=MU1, delta=1e-6):
    """ε of k equal Gaussian charges of mu, composed exactly."""
    return gdp_epsilon(math.sqrt(k) * mu, delta)


def pca(accountant=None, epsilon=1.0, **params):
    return PrivatePCA(1, epsilon=epsilon, data_norm=1.0, accountant=accountant,
                      **params)


# ==========================================================================
# 1. The file: budget, rows, reopening
# ==========================================================================
def test_ledger_stores_the_budget_and_survives_reopening(path, X):
    acc = BudgetAccountant(3.0, 1e-6, path=path, label="weekly")
    assert acc.path == os.path.abspath(path) and len(acc) == 0 and acc
    pca(acc).fit(X)
    acc.spend(mu=0.1, label="manual")
    again = BudgetAccountant(path=path)  # no budget: read from the file
    assert (again.epsilon, again.delta) == (3.0, 1e-6)
    assert again.n_charges == 2
    assert again.spent[0] == pytest.approx(gdp_epsilon(math.hypot(MU1, 0.1), 1e-6),
                                           rel=1e-12)
    assert BudgetAccountant(3.0, path=path).n_charges == 2  # same budget: fine
    first, second = again.charges
    assert first["seq"] == 1 and first["estimator"] == "PrivatePCA"
    assert first["label"] == "weekly" and second["label"] == "manual"
    assert "accountant" not in first["params"]
    assert first["params"]["epsilon"] == 1.0 and first["params"]["data_norm"] == 1.0
    assert first["mu"] == MU1 and first["rdp"] is None
    assert first["epsilon_spent"] == pytest.approx(1.0, rel=1e-9)
    assert second["estimator"] is None and second["prev_hash"] == first["hash"]
    assert first["time"].endswith("+00:00")
    frame = again.to_frame()
    assert list(frame["seq"]) == [1, 2] and "hash" in frame.columns


@pytest.mark.parametrize("budget", [{"epsilon": 2.0}, {"delta": 1e-5},
                                    {"epsilon": 3.0, "delta": 1e-7}])
def test_reopening_with_another_budget_is_an_error(path, budget):
    BudgetAccountant(3.0, 1e-6, path=path).spend(mu=0.1)
    with pytest.raises(LedgerError, match="budget is fixed"):
        BudgetAccountant(path=path, **budget)
    assert BudgetAccountant(path=path).n_charges == 1


def test_new_ledger_needs_a_budget_and_a_ledger_file(path, tmp_path):
    with pytest.raises(LedgerError, match="no such ledger"):
        BudgetAccountant(path=path)
    assert not os.path.exists(path)
    text = tmp_path / "notes.csv"
    text.write_text("a,b\n1,2\n")
    with pytest.raises(LedgerError):
        BudgetAccountant(1.0, path=text)
    assert text.read_text() == "a,b\n1,2\n"
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE t (x)")
    with pytest.raises(LedgerError, match="not a sklearn_dppca ledger"):
        BudgetAccountant(1.0, path=other)


def test_ledger_budget_is_read_only_and_reset_refused(path):
    acc = BudgetAccountant(1.0, path=path)
    acc.spend(mu=MU1)
    for name in ("epsilon", "delta"):
        with pytest.raises(AttributeError, match="read-only"):
            setattr(acc, name, 100.0)
    with pytest.raises(LedgerError, match="append-only"):
        acc.reset()
    with pytest.raises(BudgetExceededError, match="ledger"):
        acc.spend(mu=0.01)
    assert acc.n_charges == 1


def test_infinite_charge_on_a_ledger(path, tmp_path):
    """mu=inf (an epsilon=inf fit) is stored on an unlimited ledger, refused by
    a finite one."""
    unlimited = BudgetAccountant(math.inf, path=path)
    unlimited.spend(mu=0.5)
    assert unlimited.spend(mu=math.inf) == (math.inf, 1e-6)
    reopened = BudgetAccountant(path=path)
    assert reopened.epsilon == math.inf and reopened.spent[0] == math.inf
    assert reopened.charges[1]["mu"] == math.inf and reopened.verify() == 2
    finite = BudgetAccountant(5.0, path=tmp_path / "finite.db")
    with pytest.raises(BudgetExceededError):
        finite.spend(mu=math.inf)
    assert finite.n_charges == 0


def test_threads_sharing_a_ledger_never_overspend(path):
    """4 threads, each with its own handle, race 10 charges each for 15 slots."""
    BudgetAccountant(exact(15, mu=0.1), 1e-6, path=path)
    accepted = []

    def charge():
        acc = BudgetAccountant(path=path)
        for _ in range(10):
            try:
                acc.spend(mu=0.1)
                accepted.append(1)
            except BudgetExceededError:
                pass

    threads = [threading.Thread(target=charge) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    acc = BudgetAccountant(path=path)
    assert len(accepted) == acc.verify() == 15
    assert acc.spent[0] == pytest.approx(exact(15, mu=0.1), rel=1e-12)


def test_pickled_ledger_is_its_path_and_clone_shares_it(path, X):
    acc = BudgetAccountant(5.0, path=path, label="L")
    copy = pickle.loads(pickle.dumps(acc))
    assert copy is not acc and copy.path == acc.path and copy.label == "L"
    copy.spend(mu=0.2)  # charges the same file
    assert acc.n_charges == 1
    assert clone(pca(acc)).accountant is acc


# ==========================================================================
# 2. Tamper evidence
# ==========================================================================
def _ledger_with_rows(path, n=4):
    acc = BudgetAccountant(10.0, path=path)
    for i in range(n):
        acc.spend(mu=0.1 * (i + 1), label=f"fit {i + 1}")
    return acc


def _sql(path, *statements):
    with sqlite3.connect(path) as con:
        for statement in statements:
            con.execute(statement)


TAMPERING = {
    "edited": (["UPDATE charges SET label = 'nothing to see' WHERE seq = 2"],
               2, "row 2 was edited"),
    "edited total": (["UPDATE charges SET epsilon_spent = '0.001' WHERE seq = 3"],
                     3, "row 3 was edited"),
    "deleted": (["DELETE FROM charges WHERE seq = 2"], 2, "row 2 is missing"),
    "deleted and renumbered": (["DELETE FROM charges WHERE seq = 2",
                                "UPDATE charges SET seq = seq - 1 WHERE seq > 2"],
                               2, "row 2 does not follow row 1"),
    "deleted last": (["DELETE FROM charges WHERE seq = 4"], 4, "row 4 is missing"),
    "reordered": (["UPDATE charges SET seq = 99 WHERE seq = 2",
                   "UPDATE charges SET seq = 2 WHERE seq = 3",
                   "UPDATE charges SET seq = 3 WHERE seq = 99"],
                  2, "row 2 does not follow row 1"),
    "inserted": (["UPDATE charges SET seq = seq + 10",
                  "UPDATE charges SET seq = seq - 10 WHERE seq = 11",
                  "INSERT INTO charges SELECT 2, time, estimator, params, label, mu, "
                  "rdp, epsilon_spent, prev_hash, hash FROM charges WHERE seq = 1",
                  "UPDATE charges SET seq = seq - 9 WHERE seq > 10"],
                 2, "row 2 does not follow row 1"),
    "appended copy": (["INSERT INTO charges SELECT 5, time, estimator, params, "
                       "label, mu, rdp, epsilon_spent, prev_hash, hash FROM charges "
                       "WHERE seq = 4"], 5, "row 5 does not follow row 4"),
    "budget raised": (["UPDATE meta SET value = '100.0' WHERE key = 'epsilon'"],
                      None, "header"),
}


@pytest.mark.parametrize("case", list(TAMPERING))
def test_verify_names_the_tampered_row(path, case, capsys):
    statements, row, message = TAMPERING[case]
    acc = _ledger_with_rows(path)
    assert acc.verify() == 4
    _sql(path, *statements)
    with pytest.raises(LedgerIntegrityError, match=message) as caught:
        acc.verify()
    assert caught.value.row == row
    with pytest.raises(LedgerIntegrityError):  # no charge on a broken chain
        acc.spend(mu=0.01)
    with pytest.raises(LedgerIntegrityError, match=message):  # nor a reopen
        BudgetAccountant(path=path)
    assert main(["ledger", "verify", path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


# ==========================================================================
# 2b. What the chain alone cannot see, and anchors (issue 22)
# ==========================================================================
def _roll_back(path, keep):
    """The attack the chain alone misses: delete every row after ``keep`` and
    set the head back to match (no hash recomputed)."""
    with sqlite3.connect(path) as con:
        meta = dict(con.execute("SELECT key, value FROM meta"))
        head = meta["genesis"] if keep == 0 else con.execute(
            "SELECT hash FROM charges WHERE seq = ?", (keep,)).fetchone()[0]
        con.execute("DELETE FROM charges WHERE seq > ?", (keep,))
        con.executemany("UPDATE meta SET value = ? WHERE key = ?",
                        [(head, "head"), (str(keep), "n_charges")])


def _rewrite(path, seq, mu):
    """A full rewrite: lower row ``seq``'s charge and recompute every hash."""
    from sklearn_dppca import _ledger

    with sqlite3.connect(path) as con:
        con.row_factory = sqlite3.Row
        meta = dict(con.execute("SELECT key, value FROM meta"))
        previous = meta["genesis"]
        for row in [dict(r) for r in con.execute("SELECT * FROM charges ORDER BY seq")]:
            if row["seq"] == seq:
                row["mu"] = _ledger.float_text(mu)
            row["prev_hash"] = previous
            row["hash"] = previous = _ledger._row_hash(row)
            con.execute("UPDATE charges SET mu = ?, prev_hash = ?, hash = ? "
                        "WHERE seq = ?", (row["mu"], row["prev_hash"], row["hash"],
                                          row["seq"]))
        con.execute("UPDATE meta SET value = ? WHERE key = 'head'", (previous,))


@pytest.mark.parametrize("keep", [3, 0])
def test_rolled_back_tail_is_caught_by_an_anchor_only(path, keep, capsys):
    """Deleting the last row (or every row) and setting the head back gives a
    well-formed ledger: a fresh open cannot tell. The anchor taken at 4 can."""
    acc = _ledger_with_rows(path)
    anchor = acc.anchor()
    assert anchor == f"4:{acc.charges[-1]['hash']}"
    _roll_back(path, keep)
    fresh = BudgetAccountant(path=path)  # what the chain alone sees: fine
    assert fresh.verify() == keep and fresh.spent[0] < acc.epsilon
    with pytest.raises(LedgerIntegrityError, match=f"row {keep + 1} is missing") as e:
        fresh.verify(anchor=anchor)
    assert e.value.row == keep + 1 and "anchor was taken at 4" in str(e.value)
    assert main(["ledger", "verify", path, "--anchor", anchor]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"holds {keep} charge(s)" in err
    if keep:  # an anchor taken before the removed rows still holds
        assert fresh.verify(anchor=f"2:{fresh.charges[1]['hash']}") == keep


def test_an_open_accountant_sees_a_rollback_made_while_open(path):
    """The head an accountant last read is an anchor in memory: a rollback
    made meanwhile is refused at the next read or charge."""
    acc = _ledger_with_rows(path)
    _roll_back(path, 3)
    for use in (acc.verify, lambda: acc.spend(mu=0.01), lambda: acc.spent):
        with pytest.raises(LedgerIntegrityError, match="no longer extends") as e:
            use()
        assert e.value.row == 4
    assert BudgetAccountant(path=path).verify() == 3  # a new process cannot


def test_a_rewritten_chain_is_caught_by_an_anchor(path):
    """Someone who recomputes every hash passes the chain, not the anchor."""
    acc = _ledger_with_rows(path)
    anchor = acc.anchor()
    before = acc.spent[0]
    _rewrite(path, 2, 0.001)
    fresh = BudgetAccountant(path=path)
    assert fresh.verify() == 4 and fresh.spent[0] < before
    with pytest.raises(LedgerIntegrityError, match="does not extend the anchor"):
        fresh.verify(anchor=anchor)
    with pytest.raises(LedgerIntegrityError, match="no longer extends"):
        acc.verify()  # the open one too


@pytest.mark.parametrize("how", ["new ledger", "older copy"])
def test_a_replaced_ledger_is_caught_by_an_anchor(path, tmp_path, how):
    """A fresh ledger with a larger budget, or a restored older copy, opens
    cleanly without a budget; the anchor rejects both."""
    acc = BudgetAccountant(1.5, path=path)
    created = acc.anchor()
    assert created == f"0:{acc._ledger.header['genesis']}"
    backup = tmp_path / "backup.db"
    shutil.copyfile(path, backup)
    acc.spend(mu=MU1)
    anchor = acc.anchor()
    os.remove(path)
    if how == "new ledger":
        BudgetAccountant(100.0, path=path)
        checks = [created, anchor]
    else:
        shutil.copyfile(backup, path)
        checks = [anchor]
    fresh = BudgetAccountant(path=path)  # no budget given: nothing compared
    assert fresh.spent == (0.0, 0.0)
    for check in checks:
        with pytest.raises(LedgerIntegrityError, match="anchor"):
            fresh.verify(anchor=check)
    with pytest.raises(LedgerIntegrityError):  # the open accountant refuses
        acc.spend(mu=0.01)


def test_anchor_is_a_prefix_later_charges_may_follow(path):
    acc = BudgetAccountant(10.0, path=path)
    anchors = [acc.anchor()]
    for i in range(3):
        acc.spend(mu=0.1)
        anchors.append(acc.anchor())
    assert [a.split(":")[0] for a in anchors] == ["0", "1", "2", "3"]
    fresh = BudgetAccountant(path=path)
    for anchor in anchors:
        assert fresh.verify(anchor=anchor) == 3
        assert fresh.verify(anchor=f" {anchor}\n") == 3  # pasted from a file
    legacy = acc.charges[1]["hash"]  # a head hash recorded by 'ledger show'
    assert fresh.verify(anchor=legacy) == 3
    with pytest.raises(LedgerIntegrityError, match="no row of this ledger"):
        fresh.verify(anchor="0" * 64)
    count, digest = anchors[2].split(":")
    with pytest.raises(LedgerIntegrityError, match="does not extend"):
        fresh.verify(anchor=f"1:{digest}")  # right hash, wrong count
    for bad in ("", "3", "3:abc", "x:" + digest, digest.upper(), 3):
        with pytest.raises(ValueError, match="N:HASH"):
            fresh.verify(anchor=bad)
    memory = BudgetAccountant(1.0)
    with pytest.raises(ValueError, match="in-memory"):
        memory.anchor()
    with pytest.raises(ValueError, match="in-memory"):
        memory.verify(anchor=anchors[0])
    assert memory.verify() == 0


@pytest.mark.parametrize("content", [b"", None])
def test_never_created_over_an_existing_file(path, content):
    """A file truncated to 0 bytes (or an empty file made by anyone) is not
    silently turned into a new ledger: the error names the path."""
    if content is None:
        _ledger_with_rows(path)
        os.truncate(path, 0)
    else:
        with open(path, "wb") as f:
            f.write(content)
    for budget in ({"epsilon": 2.0}, {}):
        with pytest.raises(LedgerError, match="the file is empty") as e:
            BudgetAccountant(path=path, **budget)
        assert os.path.abspath(path) in str(e.value)
    assert os.path.getsize(path) == 0


def test_opening_never_creates_a_file(path):
    """A ledger removed under an open accountant is not re-created empty."""
    acc = BudgetAccountant(2.0, path=path)
    os.remove(path)
    with pytest.raises(LedgerError):
        acc.spend(mu=0.01)
    assert not os.path.exists(path)


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
@pytest.mark.parametrize("no_hard_links", [False, True])
def test_new_ledgers_are_private_to_their_owner(tmp_path, monkeypatch, no_hard_links):
    if no_hard_links:  # e.g. a file system without them: exclusive copy
        def refuse(*args, **kwargs):
            raise PermissionError("hard links not supported")

        monkeypatch.setattr(os, "link", refuse)
    old = os.umask(0o022)
    try:
        path = tmp_path / "budget.db"
        acc = BudgetAccountant(2.0, path=path)
        acc.spend(mu=0.1)
        assert main(["ledger", "init", str(tmp_path / "cli.db"), "--epsilon", "1",
                     "--delta", "1e-6"]) == 0
    finally:
        os.umask(old)
    for name in ("budget.db", "cli.db"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o600, name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["budget.db", "cli.db"]
    assert BudgetAccountant(path=path).verify() == 1
    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(LedgerError, match="empty"):
        BudgetAccountant(2.0, path=empty)


def test_threads_creating_one_ledger_create_it_once(path):
    """8 threads create the same ledger at once: one file, one genesis, no
    half-made ledger seen, no temporary file left."""
    barrier = threading.Barrier(8)
    made, errors = [], []

    def create():
        barrier.wait(timeout=60)
        try:
            made.append(BudgetAccountant(3.0, 1e-6, path=path))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=create) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == [] and len(made) == 8
    assert len({acc.anchor() for acc in made}) == 1
    assert os.listdir(os.path.dirname(path)) == ["budget.db"]


# ==========================================================================
# 3. Processes and failures
# ==========================================================================
# Worker processes are forked: no interpreter start-up, so the tests stay fast.
# (Each charge opens its own connection, so a fork shares no SQLite handle.)
HAS_FORK = "fork" in multiprocessing.get_all_start_methods()
FORK = multiprocessing.get_context("fork") if HAS_FORK else None


def forking(test):
    test = pytest.mark.skipif(not HAS_FORK, reason="needs os.fork")(test)
    return pytest.mark.filterwarnings("ignore:.*fork:DeprecationWarning")(test)


def _charge_fits(path, seed, n_fits, results):
    acc = BudgetAccountant(path=path)
    X = np.random.default_rng(seed).normal(size=(40, 3)) / 4
    accepted = 0
    for _ in range(n_fits):
        try:
            pca(acc).fit(X)
            accepted += 1
        except BudgetExceededError:
            pass
    results.put(accepted)


@forking
def test_four_processes_admit_exactly_k_fits(path):
    """4 processes × 25 fits on a ledger admitting exactly K = 30: 30 succeed."""
    k = 30
    BudgetAccountant(exact(k), 1e-6, path=path)
    results = FORK.Queue()
    procs = [FORK.Process(target=_charge_fits, args=(path, seed, 25, results))
             for seed in range(4)]
    for p in procs:
        p.start()
    accepted = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0] * 4
    assert sum(accepted) == k
    acc = BudgetAccountant(path=path)
    assert acc.verify() == acc.n_charges == k
    assert acc.spent[0] == pytest.approx(exact(k), rel=1e-12)
    totals = [c["epsilon_spent"] for c in acc.charges]
    np.testing.assert_allclose(totals, [exact(i) for i in range(1, k + 1)],
                               rtol=1e-12)


class Stuck(PrivatePCA):
    """A fit that hangs right after its charge (until killed)."""

    def _release(self, *args):
        self.charged.set()
        time.sleep(300)


def _stuck_fit(path, charged):
    Stuck.charged = charged
    Stuck(1, epsilon=1.0, data_norm=1.0,
          accountant=BudgetAccountant(path=path)).fit(np.eye(4)[:, :3])


def _spend_forever(path):
    acc = BudgetAccountant(path=path)
    for _ in range(3000):
        acc.spend(mu=0.01)


def _kill(proc):
    if proc.is_alive():
        os.kill(proc.pid, signal.SIGKILL)
    proc.join(timeout=60)
    assert proc.exitcode == -signal.SIGKILL


@forking
def test_sigkill_after_the_charge_leaves_a_consistent_ledger(path):
    BudgetAccountant(5.0, path=path)
    charged = FORK.Event()
    proc = FORK.Process(target=_stuck_fit, args=(path, charged))
    proc.start()
    try:
        assert charged.wait(timeout=120)
    finally:
        _kill(proc)
    acc = BudgetAccountant(path=path)  # verifies on opening
    assert acc.verify() == 1
    (charge,) = acc.charges
    assert charge["estimator"] == "Stuck"
    assert charge["epsilon_spent"] == pytest.approx(1.0, rel=1e-9)
    acc.spend(mu=0.1)  # the file is not left locked
    assert acc.verify() == 2


@forking
def test_sigkill_while_charging_keeps_the_chain(path):
    """Killed at an arbitrary point of a charging loop: every row is whole."""
    reader = BudgetAccountant(math.inf, path=path)
    proc = FORK.Process(target=_spend_forever, args=(path,))
    proc.start()
    try:
        for _ in range(2000):  # bounded wait for 5 committed charges
            if reader.n_charges >= 5 or not proc.is_alive():
                break
            time.sleep(0.01)
    finally:
        _kill(proc)
    acc = BudgetAccountant(path=path)
    n = acc.verify()
    assert 5 <= n < 3000
    assert acc.spent[0] == pytest.approx(exact(n, mu=0.01), rel=1e-9)
    acc.spend(mu=0.01)
    assert acc.verify() == n + 1


def _forked_spend(acc, queue):
    try:
        acc.spend(mu=0.01)
        queue.put("charged")
    except RuntimeError as exc:
        queue.put(str(exc))


@forking
def test_forked_child_copy_of_an_in_memory_accountant_refuses():
    acc = BudgetAccountant(epsilon=5.0)
    queue = FORK.Queue()
    child = FORK.Process(target=_forked_spend, args=(acc, queue))
    child.start()
    answer = queue.get(timeout=60)
    child.join(timeout=60)
    assert "forked child" in answer and "path=" in answer
    acc.spend(mu=0.01)  # the parent's own is unaffected
    assert acc.n_charges == 1


# ==========================================================================
# 4. joblib (loky) workers: explicit and default accountants
# ==========================================================================
GRID = {"n_components": [1, 2]}


def test_grid_search_processes_charge_every_fit_to_a_ledger(path, X):
    acc = BudgetAccountant(path=path, epsilon=math.inf)
    search = GridSearchCV(pca(acc, epsilon=0.5), GRID, cv=2, n_jobs=2,
                          error_score="raise").fit(X)
    assert search.best_estimator_.accountant is acc
    assert acc.n_charges == 5  # 2 candidates × 2 folds + refit
    assert acc.spent[0] == pytest.approx(exact(5, gdp_mu(0.5, 1e-6)), rel=1e-12)


def test_ledger_default_is_charged_from_workers_and_nested_clones(path, X):
    """With a ledger default, cross_val_score(n_jobs=2) charges every fold, and
    an inner GridSearchCV cloning inside the worker too."""
    acc = BudgetAccountant(math.inf, path=path)
    with acc:
        cross_val_score(pca(epsilon=0.5), X, cv=2, n_jobs=2, error_score="raise")
        assert acc.n_charges == 2
        inner = GridSearchCV(pca(epsilon=0.5), GRID, cv=2, error_score="raise")
        cross_val_score(inner, X, cv=2, n_jobs=2, error_score="raise")
    assert get_default_accountant() is not acc
    assert acc.n_charges == 2 + 2 * 5


def test_limited_in_memory_default_is_never_overspent_by_workers(X):
    """The issue's case: a limited default and n_jobs=2 spent 2.89 of 1.5.
    Now every worker fit refuses (naming the fix) and nothing is overspent."""
    limited = BudgetAccountant(epsilon=1.5)
    with limited:
        search = GridSearchCV(pca(epsilon=1.0), GRID, cv=3, n_jobs=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scikit-learn's FitFailedWarning
            with pytest.raises(ValueError, match="All the 6 fits failed") as caught:
                search.fit(X)
    assert "RuntimeError: This BudgetAccountant is a copy" in str(caught.value)
    assert "path='budget.db'" in str(caught.value)  # the fix, named
    assert limited.spent == (0.0, 0.0) and limited.n_charges == 0
    with limited:  # in-process fits are charged and refused as before
        with pytest.raises(BudgetExceededError):
            GridSearchCV(pca(epsilon=1.0), GRID, cv=3, error_score="raise").fit(X)
    assert limited.n_charges == 2 and limited.spent[0] <= 1.5  # exact(2) = 1.45


def test_explicit_in_memory_accountant_refuses_in_workers(X):
    acc = BudgetAccountant(epsilon=10.0)
    search = GridSearchCV(pca(acc), GRID, cv=2, n_jobs=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's FitFailedWarning
        with pytest.raises(ValueError, match="All the 4 fits failed") as caught:
            search.fit(X)
    assert "This BudgetAccountant is a copy" in str(caught.value)
    assert acc.n_charges == 0


def test_untouched_default_refuses_in_worker_processes(X):
    """Issue 32: with the original unlimited default, loky workers charged
    their own defaults and the parent's ``spent`` showed only the refit. Now
    every worker fit refuses, naming the fix, and nothing is charged."""
    before = get_default_accountant().n_charges
    search = GridSearchCV(pca(epsilon=1.0), GRID, cv=2, n_jobs=2,
                          error_score="raise")
    with pytest.raises(RuntimeError, match="sent to a worker process") as caught:
        search.fit(X)
    assert "path='budget.db'" in str(caught.value)
    assert "backend='threading'" in str(caught.value)
    assert get_default_accountant().n_charges == before


def test_untouched_default_is_per_process_outside_workers(X):
    """In this process, or unpickled in a process that is not a descendant of
    the one that pickled it (a saved model loaded later), the estimator
    charges that process's own default; in a descendant it refuses."""
    from sklearn_dppca._defaults import _CARRIED, _CarriedDefault

    est = pickle.loads(pickle.dumps(pca()))
    before = get_default_accountant().n_charges
    est.fit(X)  # same process: charged here
    vars(est)[_CARRIED] = _CarriedDefault("elsewhere", None,
                                          untouched_in=os.getpid())
    est.fit(X)  # from a process that is not an ancestor: charged here
    assert get_default_accountant().n_charges == before + 2
    vars(est)[_CARRIED] = _CarriedDefault("elsewhere", None,
                                          untouched_in=os.getppid())
    with pytest.raises(RuntimeError, match="sent to a worker process"):
        est.fit(X)
    with pytest.raises(RuntimeError, match="sent to a worker process"):
        clone(est).fit(X)  # a clone made in the worker keeps the refusal
    assert get_default_accountant().n_charges == before + 2


def test_carried_default_is_ignored_in_its_own_process(X):
    limited = BudgetAccountant(epsilon=5.0)
    with limited:
        est = pickle.loads(pickle.dumps(pca()))
    assert set_default_accountant(get_default_accountant()) is not limited
    est.fit(X)  # same process: the current (original) default is charged
    assert limited.n_charges == 0


# ==========================================================================
# 5. Command line
# ==========================================================================
@pytest.fixture
def table(tmp_path, X):
    import pandas as pd

    data = tmp_path / "people.csv"
    pd.DataFrame(X, columns=["a", "b", "c"]).to_csv(data, index=False)
    return data


def cli(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def cli_fit(capsys, table, model, *extra, epsilon=1.0):
    return cli(capsys, "fit", table, "-k", 1, "--epsilon", epsilon, "--delta", 1e-6,
               "--data-norm", 1, "-o", model, "-q", *extra)


def test_cli_ledger_init_show_verify_and_fit(capsys, tmp_path, table):
    ledger = tmp_path / "people.db"
    rc, out, _ = cli(capsys, "ledger", "init", ledger, "--epsilon", 2, "--delta", 1e-6)
    assert rc == 0 and "budget epsilon=2 at delta=1e-06" in out
    rc, _, err = cli(capsys, "ledger", "init", ledger, "--epsilon", 3, "--delta", 1e-6)
    assert rc == 2 and "already exists" in err and err.count("\n") == 1
    for i, label in enumerate(["first", None]):
        extra = ["--label", label] if label else []
        rc, _, err = cli_fit(capsys, table, tmp_path / f"m{i}.json", "--ledger",
                             ledger, *extra, epsilon=1.0)
        assert rc == 0, err
    acc = BudgetAccountant(path=ledger)
    assert acc.n_charges == 2
    assert [c["label"] for c in acc.charges] == ["first", f"dppca fit {table}"]
    rc, out, _ = cli(capsys, "ledger", "show", ledger)
    lines = out.splitlines()
    assert rc == 0 and lines[1].split()[:3] == ["#", "time", "(UTC)"]
    assert lines[2].split()[0] == "1" and "PrivatePCA" in lines[2]
    assert lines[2].endswith("first")
    assert f"spent: epsilon={exact(2):.6g} at delta=1e-06 in 2 charge(s)" in out
    assert f"remaining: epsilon={acc.remaining():.6g}" in out
    assert acc.charges[-1]["hash"] in lines[-1]
    rc, out, _ = cli(capsys, "ledger", "verify", ledger)
    assert rc == 0 and "2 charge(s), hash chain intact" in out
    # a label cannot print lines of its own: its control characters are shown
    forged = "x\nspent: epsilon=0 at delta=1e-06 in 0 charge(s)"
    rc, _, err = cli_fit(capsys, table, tmp_path / "m2.json", "--ledger", ledger,
                         "--label", forged, epsilon=0.1)
    assert rc == 0, err
    rc, out, _ = cli(capsys, "ledger", "show", ledger)
    assert sum(line.startswith("spent:") for line in out.splitlines()) == 1
    assert repr(forged) in out
    # nor can an estimator's name or parameters, which any charge records
    # (review 51)

    class Forger:
        def get_params(self, deep=False):
            return {"epsilon": forged}

    Forger.__name__ = "PCA\x1b[2K\rOK"
    BudgetAccountant(path=ledger).spend(mu=0.01, estimator=Forger())
    rc, out, _ = cli(capsys, "ledger", "show", ledger)
    lines = out.splitlines()
    assert sum(line.startswith("spent:") for line in lines) == 1
    assert "\x1b" not in out and repr(Forger.__name__) in out
    assert lines[-1] == f"anchor: {BudgetAccountant(path=ledger).anchor()}"


def test_cli_fit_over_the_ledger_budget_is_one_line_before_reading(
    capsys, tmp_path, table
):
    ledger = tmp_path / "people.db"
    BudgetAccountant(1.2, 1e-6, path=ledger).spend(mu=MU1)
    missing_data = tmp_path / "never-read.csv"  # the refusal comes first
    rc, out, err = cli_fit(capsys, missing_data, tmp_path / "m.json", "--ledger",
                           ledger, epsilon=1.0)
    assert rc == 2 and out == ""
    assert err == (
        f"dppca: error: Privacy budget exceeded. This fit would bring the "
        f"privacy spent to epsilon={exact(2):.6g} at delta=1e-06, over the "
        f"budget epsilon=1.2 of ledger {ledger} (already spent: 1; this fit "
        f"alone: epsilon=1). The fit was refused before "
        "releasing anything and nothing was charged.\n"
    )
    assert not (tmp_path / "m.json").exists()
    assert BudgetAccountant(path=ledger).n_charges == 1
    rc, _, err = cli_fit(capsys, table, tmp_path / "m.json", "--ledger",
                         tmp_path / "none.db")
    assert rc == 2 and "no such ledger" in err and err.count("\n") == 1


def test_cli_fit_refuses_to_overwrite_a_model_without_force(capsys, tmp_path, table):
    model = tmp_path / "model.json"
    assert cli_fit(capsys, table, model)[0] == 0
    before = model.read_text()
    rc, _, err = cli_fit(capsys, table, model)
    assert rc == 2 and err == (f"dppca: error: {model} already exists; pass "
                               "--force to overwrite it\n")
    assert model.read_text() == before
    rc, _, err = cli_fit(capsys, table, model, "--force", "--seed", 1)
    assert rc == 0 and json.loads(model.read_text())["parameters"]["random_state"] == 1


def test_cli_ledger_head_and_verify_anchor(capsys, tmp_path):
    ledger = tmp_path / "people.db"
    rc, out, _ = cli(capsys, "ledger", "init", ledger, "--epsilon", 2, "--delta", 1e-6)
    created = out.splitlines()[-1].removeprefix("anchor: ")
    acc = BudgetAccountant(path=ledger)
    assert rc == 0 and created == acc.anchor()
    acc.spend(mu=MU1, label="first")
    rc, out, err = cli(capsys, "ledger", "head", ledger)
    assert rc == 0 and err == "" and out == acc.anchor() + "\n"
    anchor = out.strip()
    rc, out, _ = cli(capsys, "ledger", "verify", ledger, "--anchor", created)
    assert rc == 0 and out == (
        f"ledger {ledger}: 1 charge(s), hash chain intact and extends the "
        f"anchor taken at 0 charge(s); anchor: {anchor}\n")
    rc, out, _ = cli(capsys, "ledger", "show", ledger)
    assert out.splitlines()[-1] == f"anchor: {anchor}"
    _roll_back(str(ledger), 0)
    rc, out, _ = cli(capsys, "ledger", "verify", ledger)  # the chain alone: fine
    assert rc == 0 and "0 charge(s), hash chain intact" in out
    rc, out, err = cli(capsys, "ledger", "verify", ledger, "--anchor", anchor)
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"dppca: error: {ledger}: row 1 is missing")
    rc, _, err = cli(capsys, "ledger", "verify", ledger, "--anchor", "abc")
    assert rc == 2 and "N:HASH" in err and err.count("\n") == 1
    os.truncate(ledger, 0)
    for argv in (["head", ledger], ["verify", ledger, "--anchor", anchor]):
        rc, _, err = cli(capsys, "ledger", *argv)
        assert rc == 2 and "the file is empty" in err and err.count("\n") == 1


def test_cli_ledger_actions_match_the_docs(capsys):
    """Every 'dppca ledger' action is documented in docs/cli.rst, and every
    documented one exists; likewise --anchor."""
    import re
    from pathlib import Path

    assert main(["ledger", "--help"]) == 0
    helptext = capsys.readouterr().out
    actions = set(re.findall(r"^    (\w+)\s{2,}", helptext, flags=re.M))
    assert actions == {"init", "show", "verify", "head"}
    docs = (Path(__file__).parents[1] / "docs" / "cli.rst").read_text("utf-8")
    documented = set(re.findall(r"``ledger (\w+) FILE", docs))
    assert documented == actions
    assert "``ledger verify FILE --anchor N:HASH``" in docs
    budgets = (Path(__file__).parents[1] / "docs" / "budgets.rst").read_text("utf-8")
    assert "dppca ledger head" in budgets and "--anchor" in budgets


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_one_accountant_shared_by_threads_never_accuses_itself(path, journal):
    """The head an accountant remembers moves only forward: threads charging
    and reading through one accountant at once (also in WAL mode, where a
    reader's snapshot may predate a commit already seen) raise nothing."""
    acc = BudgetAccountant(math.inf, path=path)
    with sqlite3.connect(path) as con:
        con.execute(f"PRAGMA journal_mode={journal}")
    errors = []

    def work(i):
        try:
            for _ in range(15):
                if i % 2:
                    acc.spend(mu=0.01)
                else:
                    acc.verify()
                    acc.spent  # noqa: B018 - a read through the same ledger
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert errors == [] and acc.verify() == 45


def test_a_trigger_that_drops_charges_is_refused(path):
    """An attacker's review: triggers that ignore the inserts of charges and
    the header's updates made every later charge vanish (4.7 spent against
    a budget of 3) while the chain stayed well-formed and every anchor
    verified. The ledger's schema is now checked on every read, and a
    charge whose insert did not take is refused."""
    acc = BudgetAccountant(3.0, 1e-6, path=path)
    acc.spend(mu=MU1)
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("CREATE TRIGGER drop_ins BEFORE INSERT ON charges "
                "BEGIN SELECT RAISE(IGNORE); END")
    con.close()
    for call in (lambda: acc.spend(mu=MU1 / 3), lambda: BudgetAccountant(path=path)):
        with pytest.raises(LedgerIntegrityError, match="schema was altered.*drop_ins"):
            call()
    assert main(["ledger", "verify", path]) == 2


def test_a_busy_ledger_is_said_busy_and_an_edited_header_edited(path, monkeypatch):
    from sklearn_dppca import _ledger

    BudgetAccountant(5.0, 1e-6, path=path)
    monkeypatch.setattr(_ledger, "BUSY_TIMEOUT", 0.2)
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("BEGIN EXCLUSIVE")
    with pytest.raises(LedgerError, match="cannot read the ledger .*locked"):
        BudgetAccountant(path=path)
    con.execute("ROLLBACK")
    for key in ("epsilon", "genesis", "head"):
        copy = path + "." + key
        shutil.copy(path, copy)
        edit = sqlite3.connect(copy, isolation_level=None)
        edit.execute("DELETE FROM meta WHERE key = ?", (key,))
        edit.close()
        with pytest.raises(LedgerIntegrityError, match=f"header was edited .*{key}"):
            BudgetAccountant(path=copy)


def test_a_label_a_ledger_cannot_store_is_refused_before_the_data(path):
    """A lone surrogate (a file name not in UTF-8, the CLI's default label)
    failed the charge's hash, after the data was read."""
    with pytest.raises(ValueError, match="encodable as UTF-8"):
        BudgetAccountant(3.0, path=path, label="caf\udce9.csv")
    acc = BudgetAccountant(3.0, path=path)
    with pytest.raises(ValueError, match="encodable as UTF-8"):
        acc.spend(mu=MU1, label="caf\udce9.csv")
    assert acc.n_charges == 0


# ==========================================================================
# 7. Faults inside transactions and forged values (review 38)
# ==========================================================================
def _append_forged(path, **fields):
    """Append a row as a charge writes one, its hash recomputed (no key is
    needed), with ``fields`` in place of a real charge's."""
    from sklearn_dppca import _ledger

    with sqlite3.connect(path) as con:
        con.row_factory = sqlite3.Row
        last = dict(con.execute("SELECT * FROM charges ORDER BY seq DESC").fetchone())
        row = dict(last, seq=last["seq"] + 1, prev_hash=last["hash"], **fields)
        row["hash"] = _ledger._row_hash(row)
        con.execute("INSERT INTO charges VALUES (:seq, :time, :estimator, :params, "
                    ":label, :mu, :rdp, :epsilon_spent, :prev_hash, :hash)", row)
        con.executemany("UPDATE meta SET value = ? WHERE key = ?",
                        [(str(row["seq"]), "n_charges"), (row["hash"], "head")])


@pytest.mark.parametrize("fields", [
    dict(mu="nan"), dict(mu="-1.0"),
    dict(mu="0.0", rdp=json.dumps({"delta": "0.0", "epsilon": "-1000.0"})),
    dict(mu="0.0", rdp=json.dumps({"delta": "2.0", "epsilon": "1.0"})),
    dict(mu="0.0", rdp=json.dumps([-1.0] * 3)),
    dict(epsilon_spent="nan"),
])
def test_a_forged_row_that_lowers_the_spend_is_malformed(path, fields):
    """A row added after an anchor with a negative cost passed the anchor and
    lowered the spend below it (``spend`` was admitted again on a spent
    budget); a NaN failed every read with a bare ValueError. Both are now a
    malformed row, named."""
    acc = BudgetAccountant(1.0, 1e-6, path=path)
    acc.spend(mu=MU1)
    anchor = acc.anchor()
    _append_forged(path, **fields)
    with pytest.raises(LedgerIntegrityError, match="row 2 is malformed") as caught:
        BudgetAccountant(path=path).verify(anchor=anchor)
    assert caught.value.row == 2
    with pytest.raises(LedgerIntegrityError):
        acc.spend(mu=0.01)


def test_a_full_disk_is_named_not_hidden_by_the_rollback(path):
    """SQLite rolls back by itself on a full disk or an I/O error; the
    explicit ROLLBACK then failed ("no transaction is active") and its error
    replaced the real one."""
    acc = BudgetAccountant(1.0, 1e-6, path=path)

    def full(con):
        con.execute("ROLLBACK")  # as SQLite does on SQLITE_FULL
        raise sqlite3.OperationalError("database or disk is full")

    with pytest.raises(LedgerError, match="disk is full"):
        acc._ledger._transaction(full, "IMMEDIATE")
    acc.spend(mu=MU1)
    assert acc.n_charges == 1


@pytest.mark.parametrize("lock", ["BEGIN IMMEDIATE", "BEGIN"])
def test_a_charge_waiting_for_a_lock_stops_at_ctrl_c(path, lock):
    """SQLite's wait for another process's transaction sleeps where Python
    cannot act on a signal: a Ctrl-C was acted on only when the lock was
    released (up to two minutes). The wait now runs in short steps, for a
    writer's lock at the charge's start and, at its commit, for a reader's
    open transaction (review 51: that one was committed after the wait)."""
    import _thread

    acc = BudgetAccountant(1.0, 1e-6, path=path)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute(lock)
    holder.execute("SELECT * FROM charges").fetchall()
    timer = threading.Timer(0.3, _thread.interrupt_main)
    try:
        timer.start()
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            acc.spend(mu=MU1)
        assert time.monotonic() - start < 30.0  # not the 120 s of the wait
    finally:
        timer.cancel()
        holder.execute("ROLLBACK")
        holder.close()
    assert acc.n_charges == 0  # stopped before its commit: not made
    acc.spend(mu=MU1)
    assert acc.n_charges == 1


def test_an_edited_header_budget_or_row_type_is_named(path):
    """A header whose budget read NaN admitted every charge (μ = ∞ too); a
    row whose params are a list, or whose time is NULL, crashed ``ledger
    show`` though ``verify`` passed (review 51)."""
    from sklearn_dppca import _ledger

    BudgetAccountant(1.0, 1e-6, path=path).spend(mu=MU1)
    for key, value in (("epsilon", "nan"), ("delta", "-0.5"), ("epsilon", "-1")):
        copy = f"{path}.{key}{value}"
        shutil.copy(path, copy)
        with sqlite3.connect(copy) as con:
            con.execute("UPDATE meta SET value = ? WHERE key = ?", (value, key))
            meta = dict(con.execute("SELECT key, value FROM meta"))
            con.execute("UPDATE meta SET value = ? WHERE key = 'genesis'",
                        (_ledger._genesis(meta),))
        with pytest.raises(LedgerIntegrityError, match="holds no valid budget"):
            BudgetAccountant(path=copy)
    for fields in (dict(params="[1, 2]"), dict(time=None)):
        copy = f"{path}.{sorted(fields)[0]}"
        shutil.copy(path, copy)
        _append_forged(copy, **fields)
        with pytest.raises(LedgerIntegrityError, match="row 2 is malformed"):
            BudgetAccountant(path=copy)


def test_a_ledger_that_cannot_be_written_is_refused_first(path, X, monkeypatch):
    """A read-only ledger (file, folder or mount) passed the fit's check and
    failed at the charge, after every row was read: the check now writes the
    head as it is, in a transaction."""
    from sklearn_dppca import _ledger

    acc = BudgetAccountant(5.0, 1e-6, path=path)
    connect = sqlite3.connect
    monkeypatch.setattr(_ledger.sqlite3, "connect", lambda target, **kw: connect(
        target.replace("mode=rw", "mode=ro"), **kw))
    with pytest.raises(LedgerError, match="readonly"):
        acc.check(mu=MU1)
    read = []
    first_pass = InMemoryRows.first_pass
    monkeypatch.setattr(InMemoryRows, "first_pass",
                        lambda *a, **k: read.append(1) or first_pass(*a, **k))
    with pytest.raises(LedgerError, match="readonly"):
        pca(acc).fit(X)
    assert not read and acc.n_charges == 0  # reading the ledger works


def test_long_names_anchors_and_damaged_files(tmp_path):
    """A legal 240-byte file name could not become a ledger (the temporary
    name beside it was 43 bytes longer); an anchor's count is ASCII digits,
    at most 19 of them (Arabic-Indic digits read as a count; 5 000 digits
    gave Python's integer-conversion error); a damaged SQLite file is said
    damaged, not "not a ledger"."""
    long = str(tmp_path / ("n" * 240 + ".db"))
    acc = BudgetAccountant(1.0, 1e-6, path=long)
    acc.spend(mu=MU1)
    digest = acc.anchor().split(":")[1]
    for anchor in ("١:" + digest, "9" * 5000 + ":" + digest):
        with pytest.raises(ValueError, match="anchor must be 'N:HASH'"):
            acc.verify(anchor=anchor)
    for offset in (100, 4106):
        copy = str(tmp_path / f"damaged{offset}.db")
        shutil.copy(long, copy)
        with open(copy, "r+b") as file:
            file.seek(offset)
            file.write(np.random.default_rng(0).bytes(64))
        with pytest.raises(LedgerIntegrityError, match="damaged"):
            BudgetAccountant(path=copy).verify()
