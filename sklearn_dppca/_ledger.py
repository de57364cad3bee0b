r"""Storage of privacy charges: an append-only, hash-chained SQLite ledger.

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
    :math:`(\varepsilon, \delta)`, the JSON object
    ``{"delta": "...", "epsilon": "..."}``, which a reader knowing only
    curves fails on rather than drop), ``epsilon_spent`` (the composed total
    after the charge), ``prev_hash`` and ``hash``.

Every row's ``hash`` is the SHA-256 of its fields and of the previous row's
hash (the genesis hash for row 1), so :meth:`Ledger.verify` finds an edited,
inserted, deleted or moved row and names it. Appending is one
``BEGIN IMMEDIATE`` transaction that re-reads and re-verifies every row, lets
the caller decide on the new row from all of them, and commits the row and
the new head together: concurrent processes and threads never overspend, and
a process killed at any point leaves either its whole row or nothing.

What the chain detects depends on what is kept outside the file:

* Alone (:meth:`Ledger.verify`, run at every read and charge), an edited,
  inserted, deleted or moved row *before the recorded head*, and an edited
  header. It cannot see the removal of the last rows when ``meta.head`` and
  ``meta.n_charges`` are set back to match (a truncated tail, down to no row
  at all), the file replaced by another ledger (another budget), an older copy
  restored, or any rewrite that recomputes the hashes: all of these are
  well-formed ledgers.
* A :class:`Ledger` object remembers the head it last read and refuses a file
  that no longer extends it: a process that keeps a ledger open sees a
  rollback or a replacement made meanwhile (not one made before it opened it).
* An *anchor*, :meth:`Ledger.anchor` (``"N:HASH"``: the number of charges and
  the hash of the last one, the genesis hash for none), stored where the
  file's writer cannot change it: :meth:`Ledger.verify` with ``anchor=``
  requires the file to extend it, that is to hold at least :math:`N` rows,
  the :math:`N`-th with that hash. As every hash chains back to the genesis
  hash of the header, this pins the budget, the ledger's creation and its
  first :math:`N` charges: no change that lowers the spend below the
  anchored one passes (short of breaking SHA-256). Charges made after the
  anchor was taken are covered by the next anchor only.

A new ledger is written in full to a private temporary file (``O_EXCL``,
mode ``0o600``: readable and writable by its owner only), then linked to its
path, which fails if anything exists there: a ledger is never created over an
existing file, even an empty one, and no process sees a half-made ledger.
Where the file system has no hard links (FAT, some network mounts), the
ledger is copied to its path with ``O_EXCL`` instead: still never over a
file, but a process opening it during the copy finds it empty and refuses
it (a process killed during the copy leaves it empty, refused for good).
"""

import datetime
import hashlib
import json
import math
import os
import pathlib
import re
import sqlite3
import threading
import time
import uuid
import weakref

FORMAT = "sklearn_dppca ledger"
VERSION = "1"
#: Seconds a charge waits for another process's transaction to finish.
BUSY_TIMEOUT = 120.0
_ROW_FIELDS = (
    "seq", "time", "estimator", "params", "label", "mu", "rdp",
    "epsilon_spent", "prev_hash",
)
_META_HASHED = ("format", "version", "epsilon", "delta", "orders", "created")
#: New ledger files (and SQLite's journals, which copy the mode): owner only.
FILE_MODE = 0o600
_ANCHOR = re.compile(r"(?:([0-9]{1,19}):)?([0-9a-f]{64})")


class LedgerError(ValueError):
    """A ledger file cannot be used as asked (missing, not a ledger, another
    budget, an append-only operation refused)."""


class LedgerIntegrityError(LedgerError):
    """:meth:`BudgetAccountant.verify() <sklearn_dppca.BudgetAccountant.verify>`
    found an edited, inserted, deleted or moved row,
    or a ledger that does not extend an anchor or the head last read.

    Attributes
    ----------
    row : int or None
        The first row found wrong (1-based), ``None`` for the header.
    """

    def __init__(self, message, row=None):
        super().__init__(message)
        self.row = row


class _Probed(Exception):
    """The rows of a write transaction rolled back on purpose (a probe)."""

    def __init__(self, rows):
        super().__init__("probed")
        self.rows = rows


class _NotExtending(LedgerIntegrityError):
    """The file no longer extends the head this process last read from it."""


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


def _cost(value, name, top=math.inf):
    """A stored cost as a float: a number in ``[0, top]`` (``inf`` where
    ``top`` is), as :meth:`BudgetAccountant.spend` writes it. A rewrite that
    recomputes the hashes could store a negative one, which would lower
    the spend below an anchor's: refused as malformed."""
    number = float(value)
    if not 0.0 <= number <= top:
        raise ValueError(f"{name} = {value!r} is not in [0, {top}]")
    return number


def _decode_curve(text):
    if text is None:
        return None
    value = json.loads(text)
    if isinstance(value, dict):  # a release stated in (epsilon, delta)
        if set(value) != {"epsilon", "delta"}:
            raise ValueError(f"a release's (epsilon, delta) has keys {sorted(value)}")
        return {"epsilon": _cost(value["epsilon"], "epsilon"),
                "delta": _cost(value["delta"], "delta", top=1.0)}
    return [_cost(v, "an RDP value") for v in value]


def _digest(fields):
    text = json.dumps(list(fields), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _row_hash(row):
    return _digest(row[name] for name in _ROW_FIELDS)


def _genesis(meta):
    return _digest(meta.get(name) for name in _META_HASHED)


def parse_anchor(anchor):
    """``(n, hash)`` of an anchor ``"N:HASH"``; ``n`` is ``None`` for a bare
    row hash (a head hash recorded from ``dppca ledger show`` or ``verify``
    before anchors existed)."""
    match = _ANCHOR.fullmatch(anchor.strip()) if isinstance(anchor, str) else None
    if match is None:
        raise ValueError(
            f"anchor must be 'N:HASH' (the number of charges and a 64-digit "
            f"hex SHA-256), as printed by 'dppca ledger head'; got {anchor!r}.")
    count, digest = match.groups()
    return (None if count is None else int(count)), digest


def _extends(meta, rows, count, digest):
    """``None`` if the chain ``rows`` (verified, from header ``meta``) holds
    ``count`` rows or more, the ``count``-th with hash ``digest`` (the genesis
    hash for 0); else why not, as ``(message, row)``."""
    hashes = [meta["genesis"], *(row["hash"] for row in rows)]
    n = len(rows)
    if count is None:  # a bare head hash: any row of the chain
        if digest in hashes:
            return None
        return (f"no row of this ledger ({n} charge(s)) has the anchored hash "
                f"{digest}: its anchored rows were removed (rolled back), the "
                "file was replaced or rewritten, or the anchor is another "
                "ledger's", None)
    if count > n:
        return (f"row {n + 1} is missing: the ledger holds {n} charge(s), the "
                f"anchor was taken at {count}: charges were removed (rolled "
                "back), the file was replaced, or the anchor is another "
                "ledger's", n + 1)
    if hashes[count] != digest:
        return (f"the ledger does not extend the anchor taken at {count} "
                "charge(s): the file was replaced by another ledger (another "
                "budget or creation) or rewritten, or the anchor is another "
                "ledger's", None)
    return None


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
        self._refusal = None  # set by check_identity: every use refused
        if create is None and not os.path.exists(self.path):
            raise LedgerError(f"{self.path}: no such ledger file")
        #: Whether this object created the file (``False``: it existed).
        self.created = create is not None and self._create(create)
        #: The fixed header: budget, orders digest, creation time, genesis.
        self.header = _header(self._read(lambda con: _meta(con, self.path)))
        # The head this object last read, as (n, hash): a later read must
        # extend it (a rollback or replacement while open is detected).
        self._seen = (0, self.header["genesis"])
        self._seen_lock = threading.Lock()
        _ledgers.add(self)

    # -- identity across processes -----------------------------------
    def identity(self):
        """``(genesis, n, head)``: which ledger this is and the head this
        process last read, carried by a pickled accountant."""
        with self._seen_lock:
            return (self.header["genesis"], *self._seen)

    def check_identity(self, identity):
        """Refuse every later use of a file that is not the ledger
        ``identity`` came from, or no longer extends the head read there: a
        worker's file of the same name (another machine's, a stale copy)
        would take its charges where the sender's ledger never sees them.
        Refused at the first read or charge, not here: a model saved with
        its accountant still loads (and transforms). ``None`` (an
        accountant pickled by an earlier version): nothing to check."""
        if identity is None:
            return
        genesis, n, head = identity
        try:
            if genesis != self.header["genesis"]:
                raise LedgerIntegrityError(
                    f"{self.path} is not the ledger this accountant was sent "
                    "or saved with (another budget or creation): another "
                    "machine's file of the same name, or the ledger was "
                    "replaced. Give every worker the same file (a shared "
                    "folder), or set the accountant again "
                    "(set_params(accountant=...)).", row=None)
            with self._seen_lock:
                self._remember(n, head)
            self.verify()  # must extend what the sender had read
        except LedgerIntegrityError as exc:
            self._refusal = (str(exc), exc.row)

    # -- connections --------------------------------------------------
    def _connect(self):
        # mode=rw: opening never creates a file (one removed meanwhile stays
        # removed); only _create makes ledgers.
        uri = pathlib.Path(self.path).as_uri() + "?mode=rw"
        try:
            con = sqlite3.connect(
                uri, uri=True, timeout=BUSY_TIMEOUT, isolation_level=None
            )
        except sqlite3.Error as exc:
            raise LedgerError(f"{self.path}: cannot open the ledger ({exc})") from exc
        return con

    def _transaction(self, body, mode):
        if self._refusal is not None:  # not the ledger it was sent with
            raise LedgerIntegrityError(*self._refusal)
        with _fork_guard:
            return self._transaction_unguarded(body, mode)

    def _transaction_unguarded(self, body, mode):
        con = self._connect()
        try:
            _begin(con, mode)
            try:
                result = body(con)
            except BaseException:
                # SQLite has rolled back already on a full disk or an I/O
                # error: its own error, not ROLLBACK's, is the one to raise
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise
            _commit(con)
            return result
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"{self.path}: cannot use the ledger ({exc})") from exc
        finally:
            con.close()

    def _read(self, body):
        try:
            return self._transaction(body, "DEFERRED")
        except _NotExtending:
            # In WAL mode a reader's snapshot may predate a commit this
            # process has already seen: read the latest state before
            # accusing the file (BEGIN IMMEDIATE waits for the writer).
            return self._transaction(body, "IMMEDIATE")

    def _create(self, header):
        """Create the ledger unless a file exists at its path (then it is
        opened as it is, and must be a ledger).

        The ledger is made whole in a temporary file of the same directory,
        created with ``O_EXCL`` and mode :data:`FILE_MODE`, then hard-linked
        to its path: the link fails if anything exists there, so a ledger is
        never created over a file (an empty one included), and two processes
        creating one ledger create it once, neither seeing it half-made
        (without hard links, see the module's docstring).
        Returns whether it created the ledger.
        """
        if os.path.lexists(self.path):  # (also where no file can be made)
            return False
        folder, name = os.path.split(self.path)
        # short: a name near the file system's limit must still fit
        temp = os.path.join(folder, f".{uuid.uuid4().hex}.ledger-creating")
        try:
            os.close(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
        except OSError as exc:
            raise LedgerError(f"{self.path}: cannot create the ledger ({exc})") from exc
        try:
            with _fork_guard:
                _write_new_ledger(temp, header)
            try:
                os.link(temp, self.path)
            except FileExistsError:
                return False  # an existing file: opened, and checked, as it is
            except OSError:  # no hard links here: exclusive copy instead
                return _copy_exclusive(temp, self.path)
            return True
        finally:
            os.unlink(temp)

    # -- reading ------------------------------------------------------
    def rows(self, writable=False):
        """Every row, verified, as dicts (``mu`` as float, ``rdp`` as list).

        With ``writable``, read in a write transaction that changes the head
        and is rolled back: a ledger this process cannot write (a read-only
        file, folder or mount; SQLite writes no page, and so opens no
        journal, for a value set to itself) is refused now, where a charge
        is checked before the data is read, not at the charge after every
        row was read."""
        def body(con):
            rows = self._verified(con)[1]
            if writable:
                # a changed value: SQLite writes no page for an identical one,
                # so value = value never opened the journal (a read-only
                # folder passed); the change is rolled back (_transaction)
                con.execute("UPDATE meta SET value = value || '.' WHERE key = 'head'")
                raise _Probed(rows)
            return rows

        if writable:
            try:
                self._transaction(body, "IMMEDIATE")
            except _Probed as probed:
                rows = probed.rows
        else:
            rows = self._read(body)
        return [_decoded(row) for row in rows]

    def verify(self, anchor=None):
        """Check the header and the chain; return the number of charges.

        Parameters
        ----------
        anchor : str, optional
            An :meth:`anchor` taken earlier (``"N:HASH"``) and kept outside
            the file: the ledger must extend it (hold at least :math:`N`
            charges, the :math:`N`-th with that hash). A bare row hash is
            accepted too.

        Raises
        ------
        LedgerIntegrityError
            Naming the first row (or the header) found wrong, or saying why
            the ledger does not extend the anchor.
        """
        wanted = None if anchor is None else parse_anchor(anchor)

        def body(con):
            meta, rows = self._verified(con)
            if wanted is not None:
                failure = _extends(meta, rows, *wanted)
                if failure is not None:
                    raise LedgerIntegrityError(f"{self.path}: {failure[0]}",
                                               row=failure[1])
            return len(rows)

        return self._read(body)

    def anchor(self):
        """``"N:HASH"``: the number of charges and the hash of the last one
        (the genesis hash for none), after verifying the chain.

        Stored where the file's writer cannot change it, it is checked by
        :meth:`verify` with ``anchor=``; as every hash chains to the header,
        it pins the budget, the ledger's creation and its first :math:`N` rows.
        """
        def body(con):
            meta, rows = self._verified(con)
            return f"{len(rows)}:{rows[-1]['hash'] if rows else meta['genesis']}"

        return self._read(body)

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
            try:  # a rewrite with its hashes recomputed may hold anything
                _decoded(row)
            except (TypeError, ValueError, KeyError) as exc:
                fail(f"row {i} is malformed ({exc}): the ledger was rewritten", i)
            previous = row["hash"]
        recorded, n = int(meta["n_charges"]), len(rows)
        if recorded > n:
            fail(f"row {n + 1} is missing (deleted): the ledger recorded "
                 f"{recorded} charges and holds {n}", n + 1)
        if recorded < n or meta["head"] != previous:
            fail(f"row {recorded + 1} was inserted or replaced after the last "
                 f"recorded charge ({recorded})", recorded + 1)
        # Checked inside the read's transaction, so against a state that no
        # concurrent charge can have committed past yet.
        with self._seen_lock:
            seen = self._seen
            failure = _extends(meta, rows, *seen)
            if failure is not None:
                raise _NotExtending(
                    f"{self.path}: the ledger no longer extends what this "
                    f"process read from it ({seen[0]} charge(s)); it holds "
                    f"{n}: charges were removed (rolled back), or the file was "
                    "replaced or rewritten, since", row=failure[1])
            self._remember(n, previous)
        return meta, rows

    def _remember(self, n, head):
        """Move the head last read forward (never back: reads and commits of
        several threads may report out of order)."""
        if n > self._seen[0]:
            self._seen = (n, head)

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
            inserted = con.execute(
                "INSERT INTO charges VALUES (:seq, :time, :estimator, :params, "
                ":label, :mu, :rdp, :epsilon_spent, :prev_hash, :hash)", row)
            updated = [con.execute("UPDATE meta SET value = ? WHERE key = ?", pair)
                       for pair in ((str(row["seq"]), "n_charges"),
                                    (row["hash"], "head"))]
            if inserted.rowcount != 1 or any(u.rowcount != 1 for u in updated):
                raise LedgerIntegrityError(  # rolled back: nothing is charged
                    f"{self.path}: the charge was not written (the ledger "
                    "ignored it): refused", row=row["seq"])
            return row

        row = self._transaction(body, "IMMEDIATE")
        with self._seen_lock:  # committed: the head this process knows moves
            self._remember(row["seq"], row["hash"])
        return _decoded(row)


#: Every Ledger of this process: a forked child gets new locks for them.
_ledgers = weakref.WeakSet()


class _ForkGuard:
    """No fork while a thread is inside SQLite: a mutex SQLite holds then
    (opening or closing a file) stays held in the child, whose first ledger
    read or charge waits for ever (and so does a thread's _seen_lock).

    A waiting fork goes first: a thread entering waits while one waits to
    fork (unless it is inside already, a nested entry), so a thread that
    charges or reads in a loop cannot keep the fork waiting for as long as
    it runs (review 101 F5: 30-60 s)."""

    def __init__(self):
        self._cond = threading.Condition(threading.Lock())
        self._active = 0
        self._forking = 0  # threads waiting to fork (or forking)
        self._depth = threading.local()  # this thread's entries

    def __enter__(self):
        depth = getattr(self._depth, "n", 0)
        with self._cond:
            while self._forking and not depth:
                self._cond.wait()
            self._active += 1
        self._depth.n = depth + 1

    def __exit__(self, *exc):
        self._depth.n -= 1
        with self._cond:
            self._active -= 1
            self._cond.notify_all()

    def before_fork(self):
        self._cond.acquire()  # held across the fork: no thread enters SQLite
        self._forking += 1  # none enters meanwhile, either
        while self._active:
            self._cond.wait()

    def after_fork_in_parent(self):
        self._forking -= 1
        self._cond.notify_all()
        self._cond.release()

    def after_fork_in_child(self):
        self.__init__()
        for ledger in list(_ledgers):
            ledger._seen_lock = threading.Lock()


_fork_guard = _ForkGuard()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_fork_guard.before_fork,
                        after_in_parent=_fork_guard.after_fork_in_parent,
                        after_in_child=_fork_guard.after_fork_in_child)


#: Seconds of one wait for another process's write inside SQLite, where a
#: signal is not acted on: ``BEGIN IMMEDIATE`` retries in steps of it, so
#: that a Ctrl-C stops a charge waiting for a lock at once.
_BUSY_STEP = 0.05


def _begin(con, mode):
    """``BEGIN mode``; ``IMMEDIATE`` waits up to :data:`BUSY_TIMEOUT` for
    another process's write in steps of :data:`_BUSY_STEP` (SQLite's own
    wait sleeps where Python cannot act on a signal)."""
    if mode != "IMMEDIATE":
        con.execute(f"BEGIN {mode}")
        return
    _stepped(con, "BEGIN IMMEDIATE")


def _commit(con):
    """``COMMIT``, waiting up to :data:`BUSY_TIMEOUT` for readers (an open
    read transaction elsewhere) in steps of :data:`_BUSY_STEP`, as
    :func:`_begin` waits: a Ctrl-C stops the wait at once, and the charge
    is then not made (the connection closes uncommitted)."""
    _stepped(con, "COMMIT")


def _stepped(con, statement):
    """Execute ``statement``, retried while the database is locked, up to
    :data:`BUSY_TIMEOUT`, each try waiting :data:`_BUSY_STEP` in SQLite."""
    deadline = time.monotonic() + BUSY_TIMEOUT
    con.execute(f"PRAGMA busy_timeout = {int(_BUSY_STEP * 1000)}")
    while True:
        try:
            con.execute(statement)
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise


def _write_new_ledger(path, header):
    """Write a new, empty ledger with ``header`` into the empty file ``path``."""
    con = sqlite3.connect(path, isolation_level=None)
    try:
        con.execute("BEGIN IMMEDIATE")
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
        con.execute("COMMIT")
    finally:
        con.close()


def _copy_exclusive(source, path):
    """Copy ``source`` to a new file ``path`` (``O_EXCL``, :data:`FILE_MODE`),
    where hard links are not supported; nothing is done if ``path`` exists.
    Returns whether it copied."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return False
    except OSError as exc:
        raise LedgerError(f"{path}: cannot create the ledger ({exc})") from exc
    with open(source, "rb") as src, os.fdopen(fd, "wb") as dst:
        dst.write(src.read())
        dst.flush()
        os.fsync(dst.fileno())
    return True


#: The schema objects of a ledger: its two tables and the meta key's index.
#: Anything else (a trigger, a view, another table) is refused: a trigger
#: that ignores the inserts of charges would drop every later one while the
#: chain stays well-formed and every anchor verifies.
_SCHEMA = {("table", "meta"), ("table", "charges"),
           ("index", "sqlite_autoindex_meta_1")}
#: The header's keys, each required.
_META_KEYS = (*_META_HASHED, "genesis", "n_charges", "head")


def _meta(con, path):
    try:
        schema = set(con.execute("SELECT type, name FROM sqlite_master"))
        meta = (dict(con.execute("SELECT key, value FROM meta"))
                if ("table", "meta") in schema else {})
    except sqlite3.DatabaseError as exc:
        if "not a database" not in str(exc) and "malformed" not in str(exc):
            # busy, locked, or an I/O error: not a verdict on the file
            raise LedgerError(f"{path}: cannot read the ledger ({exc})") from exc
        if _sqlite_file(path):
            raise LedgerIntegrityError(
                f"{path}: the file is a damaged SQLite database ({exc}); if it "
                "is a ledger, restore it from a backup", row=None) from exc
        schema, meta = set(), {}
    if meta.get("format") != FORMAT:
        if {("table", "meta"), ("table", "charges")} <= schema:
            raise LedgerIntegrityError(
                f"{path}: the ledger's header was damaged or edited (its "
                "format is not recorded); restore it from a backup", row=None)
        if not meta and os.path.exists(path) and os.path.getsize(path) == 0:
            raise LedgerError(
                f"{path}: not a sklearn_dppca ledger: the file is empty. A "
                "ledger is never created over an existing file; if this was a "
                "ledger, it was truncated (restore it from a backup), else "
                "choose another path for a new ledger")
        raise LedgerError(f"{path}: not a sklearn_dppca ledger")
    if meta.get("version") != VERSION:
        raise LedgerError(
            f"{path}: ledger format version {meta.get('version')} is not "
            f"supported (this sklearn_dppca writes version {VERSION})")
    if schema != _SCHEMA:
        extra = sorted(f"{kind} {name!r}" for kind, name in schema - _SCHEMA)
        raise LedgerIntegrityError(
            f"{path}: the ledger's schema was altered ("
            + (", ".join(extra) or "a table is missing")
            + "): a trigger or view could drop or change charges unseen",
            row=None)
    missing = [key for key in _META_KEYS if key not in meta]
    if missing or not str(meta.get("n_charges", "")).isdecimal():
        raise LedgerIntegrityError(
            f"{path}: the ledger's header was edited ("
            + (f"{', '.join(missing)} removed" if missing else "n_charges not a count")
            + ")", row=None)
    return meta


def _sqlite_file(path):
    """Whether ``path`` starts as every SQLite database does."""
    try:
        with open(path, "rb") as file:
            return file.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _header(meta):
    """The fixed part of the meta table (the head moves with every charge)."""
    return {k: v for k, v in meta.items() if k not in ("n_charges", "head")}


def _decoded(row):
    for name in ("time", "estimator", "label"):  # text; a label may be None
        if not isinstance(row[name], str) and (name == "time" or row[name] is not None):
            raise TypeError(f"its {name} is not text")
    out = dict(row)
    out["params"] = json.loads(row["params"])
    if not isinstance(out["params"], dict):
        raise TypeError("its params are not a mapping")
    out["mu"] = _cost(row["mu"], "mu")
    out["rdp"] = _decode_curve(row["rdp"])
    out["epsilon_spent"] = _cost(row["epsilon_spent"], "epsilon_spent")
    return out
