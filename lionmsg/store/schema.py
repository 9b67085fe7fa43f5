"""The SQLite layout of a lionmsg store (format version 1), and opening a file as one.

    branches(branch_id TEXT PRIMARY KEY, created_at REAL, system_id TEXT NULL, message_count INTEGER)
    messages(branch_id, message_id, position INTEGER, record TEXT,
             PRIMARY KEY (branch_id, message_id), UNIQUE (branch_id, position))

`record` is the message's wire-format JSON (`Message.to_json()`: the schema-valid record, with `role`
and `metadata.lion_class`), so any SQLite client reads a history with
`SELECT record FROM messages WHERE branch_id = ? ORDER BY position`. Position 0 is reserved for the
system message; the others are at 1, 2, ... in history order, so setting a system message never
renumbers the rest. `message_count` is kept by triggers (for every writer, not only this package) so
that a writer can check its branch against the history in O(1).

`PRAGMA application_id` marks the file as a lionmsg store and `PRAGMA user_version` is the format
version: a file that is some other SQLite database, or a newer format, is refused rather than altered.
"""

from __future__ import annotations

import sqlite3

from lionmsg.store.errors import StoreError

__all__ = ["APPLICATION_ID", "FORMAT_VERSION", "check_store", "prepare"]

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


def prepare(connection: sqlite3.Connection, path: str, synchronous: str) -> None:
    """Switch the connection to WAL with the given `synchronous` level and make sure the file is a
    lionmsg store of this format (creating the tables in an empty file). Raises StoreError naming the
    file when it is not a database, another database, or a format this version cannot read."""
    try:
        # Refuse a foreign file before anything is written to it (switching to WAL is a write).
        _check_or_create(connection, path, create=False)
        (mode,) = connection.execute("PRAGMA journal_mode = WAL").fetchone()
        if mode.lower() != "wal" and mode.lower() != "memory":  # ":memory:" databases have no WAL
            raise StoreError(f"store {path!r}: cannot use the WAL journal (the file system gave {mode!r})")
        connection.execute(f"PRAGMA synchronous = {synchronous}")
        connection.execute("PRAGMA foreign_keys = ON")
        connection.execute("BEGIN IMMEDIATE")
        try:
            _check_or_create(connection, path)
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open store {path!r}: {exc}") from exc


def check_store(connection: sqlite3.Connection, path: str) -> None:
    """For a read-only connection: the file must already be a lionmsg store of this format (an empty
    database is not one: nothing can create its tables). Raises StoreError naming the file."""
    try:
        _check_or_create(connection, path, create=False)  # a foreign database or format is refused
        (application_id,) = connection.execute("PRAGMA application_id").fetchone()
        if application_id != APPLICATION_ID:  # what is left: an empty database
            raise StoreError(f"store {path!r}: an empty SQLite database, not a lionmsg store")
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open store {path!r}: {exc}") from exc


def _check_or_create(connection: sqlite3.Connection, path: str, create: bool = True) -> None:
    (application_id,) = connection.execute("PRAGMA application_id").fetchone()
    (version,) = connection.execute("PRAGMA user_version").fetchone()
    if application_id == 0 and version == 0:
        (objects,) = connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        if objects:
            raise StoreError(f"store {path!r}: a SQLite database, but not a lionmsg store")
        for statement in _TABLES if create else ():
            connection.execute(statement)
    elif application_id != APPLICATION_ID:
        raise StoreError(f"store {path!r}: a SQLite database, but not a lionmsg store")
    elif version != FORMAT_VERSION:
        raise StoreError(f"store {path!r}: format version {version}; this lionmsg reads version {FORMAT_VERSION} only")
