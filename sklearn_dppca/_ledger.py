"""Storage of privacy charges: an append-only, hash-chained SQLite ledger.

This module only *stores* charges; what a charge costs and whether the
budget admits it is decided by :mod:`sklearn_dppca.privacy`, whose
:class:`~sklearn_dppca.BudgetAccountant` is the only user of this module
(no estimator imports it).

A ledger is one SQLite file (standard library :mod:`sqlite3`, no server)
with two tables:

``meta``
    Key/value text: the format, the budget ``epsilon`` and ``delta``, a
    digest of the Rényi orders of the stored RDP curves, the creation time,
    the *genesis* hash of those values, and the head of the chain (number of
    charges and hash of the last row).
``charges``
    One row per charge: ``seq`` (1, 2, ...), UTC ``time``, ``estimator``
    class name, its parameters as JSON (public values only, never data),
    the caller's ``label``, ``mu`` (GDP parameter, as text: ``"inf"`` is
    allowed), ``rdp`` (JSON curve or NULL; for a release the user states in
    ``(ε, δ)``, the JSON object ``{"delta": "...", "epsilon": "..."}``, which
    a reader knowing only curves fails on rather than drop), ``epsilon_spent``
    (the composed total after the charge), ``prev_hash`` and ``hash``.

Every row's ``hash`` is the SHA-256 of its fields and of the previous row's
hash (the genesis hash for row 1), so :meth:`Ledger.verify` finds an edited,
inserted, deleted or moved row and names it. Appending is one
``BEGIN IMMEDIATE`` transaction that re-reads and re-verifies every row, lets
the caller decide on the new row from all of them, and commits the row and
the new head together: concurrent processes and threads never overspend, and
a process killed at any point leaves either its whole row or nothing.

Without a secret key, the chain does not stop someone who can write the file
and recompute every hash; it detects any change made without doing so, and
any change at all against a head hash recorded elsewhere
(``dppca ledger show`` prints it).
"""

import datetime
import hashlib
import json
import math
import os
import sqlite3

FORMAT = "sklearn_dppca ledger"
VERSION = "1"
#: Seconds a charge waits for another process's transaction to finish.
BUSY_TIMEOUT = 120.0
_ROW_FIELDS = (
    "seq", "time", "estimator", "params", "label", "mu", "rdp",
    "epsilon_spent", "prev_hash",
)
_META_HASHED = ("format", "version", "epsilon", "delta", "orders", "created")


class LedgerError(ValueError):
    """A ledger file cannot be used as asked (missing, not a ledger, another
    budget, an append-only operation refused)."""


class LedgerIntegrityError(LedgerError):
    """:meth:`Ledger.verify` found an edited, inserted, deleted or moved row.

    Attributes
    ----------
    row : int or None
        The first row found wrong (1-based), ``None`` for the header.
    """

    def __init__(self, message, row=None):
        super().__init__(message)
        self.row = row


# ------------------------------------------------------------- encoding
def float_text(value):
    """Exact text of a float (``repr`` round-trips; ``"inf"`` for infinity)."""
    return repr(float(value))


def _json_safe(value):
    """A JSON-ready copy of a parameter value: non-finite floats and unknown
    objects become text (their ``repr``)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)) or hasattr(value, "item"):
        try:
            number = value.item() if hasattr(value, "item") else value
        except (TypeError, ValueError):
            return repr(value)
        if isinstance(number, float) and not math.isfinite(number):
            return repr(number)
        if isinstance(number, (bool, int, float, str)):
            return number
        return repr(value)
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    return repr(value)


def params_text(params):
    """Canonical JSON of an estimator's parameters (sorted keys)."""
    return json.dumps(_json_safe(params), sort_keys=True, allow_nan=False)


def curve_text(curve):
    """JSON of an RDP curve, exact; non-finite values as text."""
    if curve is None:
        return None
    return json.dumps([_json_safe(float(v)) for v in curve], allow_nan=False)


def _decode_curve(text):
    if text is None:
        return None
    value = json.loads(text)
    if isinstance(value, dict):  # a release stated in (epsilon, delta)
        return {key: float(v) for key, v in value.items()}
    return [float(v) for v in value]


def _digest(fields):
    text = json.dumps(list(fields), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _row_hash(row):
    return _digest(row[name] for name in _ROW_FIELDS)


def _genesis(meta):
    return _digest(meta.get(name) for name in _META_HASHED)


# --------------------------------------------------------------- ledger
class Ledger:
    """One ledger file; every operation opens its own connection.

    Parameters
    ----------
    path : str or path-like
        The SQLite file.
    create : dict or None
        Header of a new ledger (``epsilon``, ``delta``, ``orders`` as text).
        With ``None`` the file must already be a ledger.
    """

    def __init__(self, path, create=None):
        self.path = os.path.abspath(os.fspath(path))
        if create is None and not os.path.exists(self.path):
            raise LedgerError(f"{self.path}: no such ledger file")
        if create is not None:
            self._create(create)
        #: The fixed header: budget, orders digest, creation time, genesis.
        self.header = _header(self._read(lambda con: _meta(con, self.path)))

    # -- connections --------------------------------------------------
    def _connect(self):
        try:
            con = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT, isolation_level=None
            )
        except sqlite3.Error as exc:
            raise LedgerError(f"{self.path}: cannot open the ledger ({exc})") from exc
        return con

    def _transaction(self, body, mode):
        con = self._connect()
        try:
            con.execute(f"BEGIN {mode}")
            try:
                result = body(con)
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
            return result
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"{self.path}: cannot use the ledger ({exc})") from exc
        finally:
            con.close()

    def _read(self, body):
        return self._transaction(body, "DEFERRED")

    def _create(self, header):
        def body(con):
            tables = {r[0] for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not tables:
                con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
                con.execute(
                    "CREATE TABLE charges (seq INTEGER PRIMARY KEY, time TEXT, "
                    "estimator TEXT, params TEXT, label TEXT, mu TEXT, rdp TEXT, "
                    "epsilon_spent TEXT, prev_hash TEXT, hash TEXT)"
                )
                now = datetime.datetime.now(datetime.timezone.utc)
                meta = dict(header, format=FORMAT, version=VERSION,
                            created=now.isoformat(timespec="microseconds"))
                meta["genesis"] = _genesis(meta)
                meta["n_charges"], meta["head"] = "0", meta["genesis"]
                con.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())

        # IMMEDIATE: two processes creating one ledger create it once.
        self._transaction(body, "IMMEDIATE")

    # -- reading ------------------------------------------------------
    def rows(self):
        """Every row, verified, as dicts (``mu`` as float, ``rdp`` as list)."""
        rows = self._read(lambda con: self._verified(con)[1])
        return [_decoded(row) for row in rows]

    def verify(self):
        """Check the header and the chain; return the number of charges.

        Raises
        ------
        LedgerIntegrityError
            Naming the first row (or the header) found wrong.
        """
        return len(self._read(lambda con: self._verified(con)[1]))

    def _verified(self, con):
        def fail(message, row):
            raise LedgerIntegrityError(f"{self.path}: {message}", row=row)

        meta = _meta(con, self.path)
        if _header(meta) != self.header:
            fail("the ledger's header (budget) changed since it was opened", None)
        if _genesis(meta) != meta["genesis"]:
            fail("the ledger's header (budget) was edited: it does not match "
                 "its genesis hash", None)
        cursor = con.execute(
            "SELECT seq, time, estimator, params, label, mu, rdp, epsilon_spent, "
            "prev_hash, hash FROM charges ORDER BY seq")
        names = (*_ROW_FIELDS, "hash")
        rows = [dict(zip(names, values)) for values in cursor]
        previous = meta["genesis"]
        for i, row in enumerate(rows, start=1):
            if row["seq"] != i:
                fail(f"row {i} is missing (deleted), or the rows were renumbered", i)
            if row["prev_hash"] != previous:
                fail(f"row {i} does not follow row {i - 1}: a row was deleted, "
                     "inserted or moved there", i)
            if _row_hash(row) != row["hash"]:
                fail(f"row {i} was edited: its contents do not match its hash", i)
            previous = row["hash"]
        recorded, n = int(meta["n_charges"]), len(rows)
        if recorded > n:
            fail(f"row {n + 1} is missing (deleted): the ledger recorded "
                 f"{recorded} charges and holds {n}", n + 1)
        if recorded < n or meta["head"] != previous:
            fail(f"row {recorded + 1} was inserted or replaced after the last "
                 f"recorded charge ({recorded})", recorded + 1)
        return meta, rows

    # -- appending ----------------------------------------------------
    def append(self, decide):
        """Append one row in a single ``BEGIN IMMEDIATE`` transaction.

        ``decide(rows)`` gets every verified row (decoded) and returns the new
        row's fields (``estimator``, ``params``, ``label`` and ``mu``, ``rdp``,
        ``epsilon_spent`` as text), or raises to append nothing.

        Returns
        -------
        row : dict
            The stored row, with its ``seq`` and ``hash``.
        """

        def body(con):
            _, rows = self._verified(con)
            fields = decide([_decoded(row) for row in rows])
            now = datetime.datetime.now(datetime.timezone.utc)
            row = dict(fields, seq=len(rows) + 1,
                       time=now.isoformat(timespec="microseconds"),
                       prev_hash=rows[-1]["hash"] if rows else self.header["genesis"])
            row["hash"] = _row_hash(row)
            con.execute(
                "INSERT INTO charges VALUES (:seq, :time, :estimator, :params, "
                ":label, :mu, :rdp, :epsilon_spent, :prev_hash, :hash)", row)
            con.executemany("UPDATE meta SET value = ? WHERE key = ?",
                            [(str(row["seq"]), "n_charges"), (row["hash"], "head")])
            return row

        return _decoded(self._transaction(body, "IMMEDIATE"))


def _meta(con, path):
    try:
        meta = dict(con.execute("SELECT key, value FROM meta"))
    except sqlite3.OperationalError:
        meta = {}
    if meta.get("format") != FORMAT:
        raise LedgerError(f"{path}: not a sklearn_dppca ledger")
    if meta.get("version") != VERSION:
        raise LedgerError(
            f"{path}: ledger format version {meta.get('version')} is not "
            f"supported (this sklearn_dppca writes version {VERSION})")
    return meta


def _header(meta):
    """The fixed part of the meta table (the head moves with every charge)."""
    return {k: v for k, v in meta.items() if k not in ("n_charges", "head")}


def _decoded(row):
    out = dict(row)
    out["params"] = json.loads(row["params"])
    out["mu"] = float(row["mu"])
    out["rdp"] = _decode_curve(row["rdp"])
    out["epsilon_spent"] = float(row["epsilon_spent"])
    return out
