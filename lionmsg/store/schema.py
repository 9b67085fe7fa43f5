"""The SQLite layout of a lionmsg store (format version 1), and opening a file as one.

    branches(branch_id TEXT PRIMARY KEY, created_at REAL, system_id TEXT NULL, message_count INTEGER)
    messages(branch_id, message_id, position INTEGER, record TEXT,
             PRIMARY KEY (branch_id, message_id), UNIQUE (branch_id, position))
    branch_claims(branch_id TEXT PRIMARY KEY, writer TEXT, held INTEGER)   -- made by the first attach

`record` is the message's wire-format JSON (`Message.to_json()`: the schema-valid record, with `role`
and `metadata.lion_class`), so any SQLite client reads a history with
`SELECT record FROM messages WHERE branch_id = ? ORDER BY position`. Position 0 is reserved for the
system message; the others are at 1, 2, ... in history order, so setting a system message never
renumbers the rest. `message_count` is kept by triggers (for every writer, not only this package) so
that a writer can check its branch against the history in O(1).

One branch id has one writer: `attach` claims the branch for its attachment (`branch_claims`, a random
token per attachment) and each later write checks, in its transaction, that the claim is still its own.
Another store or process attaching the same id takes the branch over (attach replaces the stored
history), and the first one's next write is refused instead of mixing two histories in one branch; an
attach told not to take a branch over is refused while a claim is held. Detaching gives the claim up
(`held` = 0, best effort: a writer killed before closing leaves it held) but keeps its token, so a writer
the branch was taken from stays refused after the taker detaches. The
table is an addition to format 1, made by the first attach, so files without it (written before it)
stay readable and writable by every version; writers that predate it do not claim.

`PRAGMA application_id` marks the file as a lionmsg store and `PRAGMA user_version` is the format
version: a file that is some other SQLite database, or a newer format, is refused rather than altered.

Journal: a writer's connection switches the file to WAL when it opens (`prepare`) and, when it is the
last connection to the file, back to the rollback journal when it closes (`release`). A closed store is
thus one file, which a read-only connection reads without creating the `-wal`/`-shm` files a WAL
database needs (SQLite would create them if it could, and a read-only connection cannot remove them).
"""

from __future__ import annotations

import contextlib
import os
import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from lionmsg.store.errors import StoreError
from lionmsg.store.sqlite_errors import is_busy, store_error

__all__ = [
    "APPLICATION_ID",
    "FORMAT_VERSION",
    "check_store",
    "claim",
    "claim_holder",
    "give_up_claims",
    "prepare",
    "release",
    "release_closed",
    "retry_busy",
]

T = TypeVar("T")

# The clock and the pause of retry_busy (tests replace them to count time without spending it).
_clock = time.monotonic
_sleep = time.sleep

APPLICATION_ID = 0x4C4D5347  # "LMSG"
FORMAT_VERSION = 1

_TABLES = (
    """CREATE TABLE branches (
        branch_id TEXT PRIMARY KEY NOT NULL,
        created_at REAL NOT NULL,
        system_id TEXT,
        message_count INTEGER NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE messages (
        branch_id TEXT NOT NULL REFERENCES branches (branch_id) ON DELETE CASCADE,
        message_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (branch_id, message_id),
        UNIQUE (branch_id, position)
    )""",
    """CREATE TRIGGER messages_counted AFTER INSERT ON messages BEGIN
        UPDATE branches SET message_count = message_count + 1 WHERE branch_id = NEW.branch_id;
    END""",
    """CREATE TRIGGER messages_uncounted AFTER DELETE ON messages BEGIN
        UPDATE branches SET message_count = message_count - 1 WHERE branch_id = OLD.branch_id;
    END""",
    f"PRAGMA application_id = {APPLICATION_ID}",
    f"PRAGMA user_version = {FORMAT_VERSION}",
)

# No foreign key to branches: a claim outlives its branch being deleted by another client, so that a
# writer the branch was taken from stays refused.
_CLAIMS_TABLE = """CREATE TABLE IF NOT EXISTS branch_claims (
    branch_id TEXT PRIMARY KEY NOT NULL,
    writer TEXT NOT NULL,
    held INTEGER NOT NULL DEFAULT 1
)"""


def claim(connection: sqlite3.Connection, branch_id: str, writer: str) -> None:
    """Inside a write transaction: make `writer` the branch's one writer, replacing any other's claim
    (attach takes a branch over)."""
    connection.execute(_CLAIMS_TABLE)
    connection.execute(
        "INSERT INTO branch_claims (branch_id, writer, held) VALUES (?, ?, 1) "
        "ON CONFLICT (branch_id) DO UPDATE SET writer = excluded.writer, held = 1",
        (branch_id, writer),
    )


def claim_holder(connection: sqlite3.Connection, branch_id: str) -> tuple[str, bool] | None:
    """The token of the branch's latest writer and whether it still holds the branch (False once it
    detached), or None when nothing claims it (inside a transaction); a file without the claims table
    (written before it, or a backup of such a file restored) has no claims."""
    try:
        row = connection.execute("SELECT writer, held FROM branch_claims WHERE branch_id = ?", (branch_id,)).fetchone()
    except sqlite3.OperationalError:
        if not _no_claims_table(connection):
            raise
        return None
    return None if row is None else (str(row[0]), bool(row[1]))


def give_up_claims(connection: sqlite3.Connection, claims: list[tuple[str, str]], timeout: float) -> bool:
    """Mark each (branch id, writer token) claim as no longer held, in one transaction that waits for the
    file's lock no longer than `GIVE_UP_WAIT` seconds (or `timeout`, the connection's busy timeout,
    restored afterwards, when shorter): enough for other writers' ordinary transactions, never the
    endless wait an infinite timeout would be. False when the lock stays taken (or the file cannot be
    written), which leaves every claim held, as a writer killed before closing leaves its own. A claim
    another writer has taken since stays as it is, and a released claim keeps its token, so a writer
    its branch was taken from stays refused."""

    def mark_released() -> None:
        if not _no_claims_table(connection):
            connection.executemany("UPDATE branch_claims SET held = 0 WHERE branch_id = ? AND writer = ?", claims)

    try:
        _set_busy_timeout(connection, min(timeout, GIVE_UP_WAIT))
        _in_transaction(connection, "BEGIN IMMEDIATE", mark_released)
    except sqlite3.Error:
        return False
    finally:
        with contextlib.suppress(sqlite3.Error):  # a closed or broken connection: nothing to restore
            _set_busy_timeout(connection, timeout)
    return True


GIVE_UP_WAIT = 0.5  # seconds a detach or close waits for the lock to give its claims up


def _no_claims_table(connection: sqlite3.Connection) -> bool:
    found = connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'branch_claims'")
    return found.fetchone() is None


SQLITE_HEADER = b"SQLite format 3\x00"  # how every SQLite database file begins
_HEADER_SIZE = 100  # byte 19 (the file format's read version) is 2 in WAL mode: SQLite opens a WAL then


def file_uri(path: str, **parameters: str) -> str:
    """The `file:` URI SQLite opens `path` by with these parameters (`uri=True`)."""
    query = "&".join(f"{name}={value}" for name, value in parameters.items())
    return f"{Path(path).absolute().as_uri()}{'?' if query else ''}{query}"


def prepare(connection: sqlite3.Connection, path: str, synchronous: str, timeout: float) -> None:
    """Switch the connection to WAL with the given `synchronous` level and make sure the file is a
    lionmsg store of this format (creating the tables in an empty file). Raises StoreError naming the
    file when it is not a database (CorruptStoreError, as for a damaged one), another database, or a
    format this version cannot read; nothing is written to such a file.

    Many connections may open one new file at once (threads, processes): each sees the store whole or
    not at all, and a lock SQLite refuses without waiting is waited for (see `retry_busy`)."""

    def attempt() -> None:
        # Refuse a foreign file before anything is written to it (switching to WAL is a write). One
        # read transaction, so that another opener creating the store meanwhile is seen whole or not
        # at all (three separate reads could see its header before its tables, or the reverse).
        _in_transaction(connection, "BEGIN", lambda: _is_empty(connection, path))
        (mode,) = connection.execute("PRAGMA journal_mode = WAL").fetchone()
        if mode.lower() != "wal" and mode.lower() != "memory":  # ":memory:" databases have no WAL
            raise StoreError(f"store {path!r}: cannot use the WAL journal (the file system gave {mode!r})")
        connection.execute(f"PRAGMA synchronous = {synchronous}")
        connection.execute("PRAGMA foreign_keys = ON")
        _in_transaction(connection, "BEGIN IMMEDIATE", lambda: _create_if_empty(connection, path))

    try:
        retry_busy(connection, timeout, attempt)
    except sqlite3.Error as exc:
        raise store_error(f"cannot open store {path!r}: {exc}", exc) from exc


def check_store(connection: sqlite3.Connection, path: str, timeout: float) -> None:
    """For a read-only connection: the file must already be a lionmsg store of this format (an empty
    database is not one: nothing can create its tables). Raises StoreError naming the file
    (CorruptStoreError for a file that is not a database or is damaged)."""

    def attempt() -> None:
        if _in_transaction(connection, "BEGIN", lambda: _is_empty(connection, path)):
            raise StoreError(f"store {path!r}: an empty SQLite database, not a lionmsg store")

    try:
        retry_busy(connection, timeout, attempt)
    except sqlite3.Error as exc:
        raise store_error(f"cannot open store {path!r}: {exc}", exc) from exc


def check_before_read_only_open(path: str, named: str) -> bool:
    """Before a read-only open: refuse a file in WAL mode with no commits in a -wal file beside it that
    is not a lionmsg store of this format, without leaving anything behind. SQLite's read-only open of
    such a file creates -wal and -shm files, which it cannot remove (a lionmsg writer takes its store
    out of that mode as it closes: `release`); read as immutable instead, which takes no locks and
    creates nothing. A -wal file that is not empty (looked for where SQLite keeps it: beside the file a
    link leads to) may hold commits the file alone does not (a writer may have it open): then only
    SQLiteStore's read-only open can tell, and so it does when such a -wal appears while the file is
    read (a writer creating the store commits its tables there). Raises what `check_store` raises;
    an unreadable or non-SQLite file is left to that open.

    True when the file is a store in WAL mode with no -wal file beside it at all: no connection has it
    open (a writer closed while another connection had it open, which closed last), so the file alone
    holds every commit, and SQLiteStore reads it as immutable too (`wal_file`, `file_stamp`). `path` is
    the file's absolute path; errors name the store `named`, as the caller was given it."""
    try:
        with open(path, "rb") as file:
            header = file.read(_HEADER_SIZE)
    except OSError:
        return False
    in_wal_mode = len(header) == _HEADER_SIZE and header.startswith(SQLITE_HEADER) and header[19] == 2
    wal = wal_file(path)
    if not in_wal_mode or _has_commits_beside(wal):
        return False
    try:
        connection = sqlite3.connect(file_uri(path, immutable="1"), uri=True, isolation_level=None)
    except sqlite3.Error:
        return False
    try:
        check_store(connection, named, timeout=0)  # an immutable file is never locked
    except StoreError:
        if not _has_commits_beside(wal):
            raise
        return False
    finally:
        connection.close()
    return not os.path.lexists(wal)


def wal_file(path: str) -> str:
    """Where SQLite keeps the file's write-ahead log: beside the file a link leads to."""
    return f"{os.path.realpath(path)}-wal"


def file_stamp(path: str) -> tuple[int, int, int, bool] | None:
    """What changes when anything writes the file or opens it in WAL mode: its inode, size and
    modification time, and whether a -wal file is beside it (None when the file cannot be looked at)."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns, os.path.lexists(wal_file(path))


def _has_commits_beside(wal: str) -> bool:
    try:
        return os.stat(wal).st_size > 0
    except OSError:  # none (or none to read): nothing SQLite could read either
        return False


def release(connection: sqlite3.Connection) -> bool:
    """Before a writer's connection closes: switch the file back to SQLite's rollback journal when this
    is the last connection to it, so that a closed store is one file (SQLite checkpoints the WAL into
    it and removes the -wal and -shm files) and a read-only open, which cannot switch modes, creates
    no -wal/-shm files (and needs no write access to the folder). Never waits: while another
    connection has the file open (any connection in WAL mode holds a shared lock on it), SQLite
    refuses at once and the file stays in WAL mode for that connection (False: see `release_closed`).
    A failure (a damaged file, an I/O error) leaves the file as it is: the WAL keeps every commit and
    the next opener recovers it."""
    return _switch_to_rollback_journal(connection)


def release_closed(path: str, attempts: int = 3) -> None:
    """After a writer's connection closed without `release` succeeding: try the switch again from a
    fresh connection. Two writers closing at the same moment each see the other's connection and
    refuse; whichever closes last then finds the file free. A few tries, a few milliseconds apart
    (jittered: two closers would otherwise meet again), then the file stays in WAL mode until the next
    writer closes, as it does while a connection stays open. The fresh connection never creates the
    file (a store removed meanwhile stays removed) and changes nothing in a file that is no longer a
    lionmsg store."""
    target = file_uri(path, mode="rw")
    for attempt in range(attempts):
        if attempt:
            _sleep(0.001 + 0.004 * random.random())
        try:
            connection = sqlite3.connect(target, timeout=0, isolation_level=None, uri=True)
        except sqlite3.Error:
            return  # gone, or unreadable now: nothing to switch
        try:
            (application_id,) = connection.execute("PRAGMA application_id").fetchone()
            if application_id != APPLICATION_ID or _switch_to_rollback_journal(connection):
                return
        except sqlite3.Error:
            continue  # busy (another connection opened it meanwhile): try again
        finally:
            connection.close()


def _switch_to_rollback_journal(connection: sqlite3.Connection) -> bool:
    try:
        connection.execute("PRAGMA busy_timeout = 0")
        (mode,) = connection.execute("PRAGMA journal_mode = DELETE").fetchone()
    except sqlite3.Error:  # busy: another connection has the file open; or damaged: left as it is
        return False
    return str(mode).lower() in ("delete", "memory")  # an in-memory database has nothing to switch


def retry_busy(connection: sqlite3.Connection, timeout: float, attempt: Callable[[], T]) -> T:
    """`attempt()`, tried again while SQLite answers SQLITE_BUSY, until `timeout` seconds have passed.

    SQLite waits for a lock (the connection's busy timeout) only where waiting cannot deadlock: a
    connection that holds a read lock and needs more (changing the journal mode does) gets
    SQLITE_BUSY at once, and so do several openers of one new file racing to switch it to WAL.
    `attempt` must leave no transaction open when it fails. Each try lets SQLite's own busy handler
    wait no longer than what is left, so the whole call waits about `timeout` at most, as one
    statement would."""
    deadline = _clock() + timeout
    pause = 0.001
    try:
        while True:
            try:
                return attempt()
            except sqlite3.OperationalError as exc:
                left = deadline - _clock()
                if not is_busy(exc) or left <= 0:
                    raise
            # Jittered, growing pauses: openers that collided would otherwise collide again.
            _sleep(min(left, pause * (0.5 + random.random())))
            pause = min(pause * 2, 0.05)
            _set_busy_timeout(connection, deadline - _clock())
    finally:
        _set_busy_timeout(connection, timeout)


def _set_busy_timeout(connection: sqlite3.Connection, seconds: float) -> None:
    # What sqlite3.connect(timeout=...) sets; the pragma touches no file. SQLite takes a C int of
    # milliseconds: a longer timeout (infinity included) waits as long as SQLite can.
    milliseconds = min(max(0.0, seconds * 1000), _LONGEST_BUSY_TIMEOUT_MS)
    connection.execute(f"PRAGMA busy_timeout = {int(milliseconds)}")


_LONGEST_BUSY_TIMEOUT_MS = 2**31 - 1


def _in_transaction(connection: sqlite3.Connection, begin: str, body: Callable[[], T]) -> T:
    connection.execute(begin)
    try:
        result = body()
        connection.execute("COMMIT")
        return result
    finally:
        if connection.in_transaction:
            connection.execute("ROLLBACK")


def _create_if_empty(connection: sqlite3.Connection, path: str) -> None:
    if _is_empty(connection, path):
        for statement in _TABLES:
            connection.execute(statement)


def _is_empty(connection: sqlite3.Connection, path: str) -> bool:
    """True for a database with nothing in it yet, False for a lionmsg store of this format; StoreError
    for any other database or format. Call it inside a transaction: its three reads must see one state
    of the file."""
    (application_id,) = connection.execute("PRAGMA application_id").fetchone()
    (version,) = connection.execute("PRAGMA user_version").fetchone()
    # Read for every file: it makes SQLite parse the schema, so a damaged one is met here, on open.
    (objects,) = connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    if application_id == 0 and version == 0:
        if objects:
            raise StoreError(f"store {path!r}: a SQLite database, but not a lionmsg store")
        return True
    if application_id != APPLICATION_ID:
        raise StoreError(f"store {path!r}: a SQLite database, but not a lionmsg store")
    if version != FORMAT_VERSION:
        raise StoreError(f"store {path!r}: format version {version}; this lionmsg reads version {FORMAT_VERSION} only")
    return False
