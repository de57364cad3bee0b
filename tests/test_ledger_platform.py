"""Ledgers and the platform: a folder SQLite cannot write its journal in, and
a fork while another thread uses the ledger (review 98)."""

import os
import sqlite3

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
