"""What an error from SQLite means for a store: a damaged file, a lock another connection holds, or
anything else; and the StoreError each becomes.

From Python 3.11 `sqlite3.Error` carries SQLite's result code (`sqlite_errorcode`, the extended code);
Python 3.10 has no code, so there the exception's class and text stand in for it.
"""

from __future__ import annotations

import sqlite3

from lionmsg.store.errors import CorruptStoreError, StoreError

__all__ = ["is_busy", "is_corrupt", "store_error"]

_SQLITE_BUSY = 5
_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26
# sqlite3_errstr(SQLITE_BUSY): the text of every busy code (BUSY_RECOVERY, BUSY_SNAPSHOT, ...) too.
_BUSY_TEXT = "database is locked"


def is_busy(error: sqlite3.Error) -> bool:
    """SQLITE_BUSY: another connection holds a lock this one needs; trying again later may succeed."""
    code = _primary_code(error)
    if code is None:  # Python 3.10, or an error the sqlite3 module raised itself
        return isinstance(error, sqlite3.OperationalError) and str(error) == _BUSY_TEXT
    return code == _SQLITE_BUSY


def is_corrupt(error: sqlite3.Error) -> bool:
    """SQLITE_CORRUPT ("database disk image is malformed") or SQLITE_NOTADB ("file is not a database":
    a damaged header and a file that never was a database look the same to SQLite)."""
    code = _primary_code(error)
    if code is None:
        # The sqlite3 module raises both as the plain DatabaseError; every other code it raises as a
        # subclass (OperationalError, IntegrityError, ...), except a few SQLite does not use or this
        # package never meets (FORMAT, NOLFS, AUTH).
        return type(error) is sqlite3.DatabaseError
    return code in (_SQLITE_CORRUPT, _SQLITE_NOTADB)


def store_error(message: str, error: sqlite3.Error) -> StoreError:
    """The StoreError to raise for `error` (its cause): CorruptStoreError for a damaged file."""
    return CorruptStoreError(message) if is_corrupt(error) else StoreError(message)


def _primary_code(error: sqlite3.Error) -> int | None:
    code = getattr(error, "sqlite_errorcode", None)  # Python 3.11+, and only errors SQLite reported
    return code & 0xFF if isinstance(code, int) else None
