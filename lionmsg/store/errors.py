"""The errors of `lionmsg.store`: one base class, and the standard class each error also is.

Every error names what it is about (the store's file, the branch, the row, the snapshot file), so a
caller can report it without context. `UnknownBranchError` is also a `KeyError` (a missing key) and the
corruption and snapshot errors are also `ValueError`s (bad data), so code that already catches those
keeps working.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BranchHeldError",
    "BranchTakenOverError",
    "CorruptRecordError",
    "CorruptStoreError",
    "SnapshotError",
    "StoreError",
    "UnknownBranchError",
    "UnwritableRecordError",
]


class StoreError(Exception):
    """Base class of the errors raised by `lionmsg.store` (also: a closed store, an unreadable file)."""

    # The constructor's arguments, by attribute name: what a pickled or copied error is rebuilt from
    # (Exception's own rebuild passes the message alone), so one raised in a worker process reaches
    # its caller as itself.
    _arguments: tuple[str, ...] = ()

    def __reduce__(self) -> tuple[Any, ...]:
        if not self._arguments:
            return super().__reduce__()  # type: ignore[return-value]
        return type(self), tuple(getattr(self, name) for name in self._arguments), dict(self.__dict__)


class UnknownBranchError(StoreError, KeyError):
    """`load` of a branch id the store does not hold."""

    _arguments = ("branch_id", "path")

    def __init__(self, branch_id: str, path: str) -> None:
        super().__init__(f"unknown branch {branch_id!r} in store {path!r}")
        self.branch_id = branch_id
        self.path = path

    def __str__(self) -> str:
        # KeyError's __str__ would print the repr of the message (quoted); say it plainly.
        return str(self.args[0])


class CorruptStoreError(StoreError, ValueError):
    """Stored data that is not a valid history, or a damaged file (SQLite's "database disk image is
    malformed", or "file is not a database": SQLite cannot tell a damaged header from a file that never
    was a database): nothing was loaded and nothing was changed."""


class CorruptRecordError(CorruptStoreError):
    """One stored message row that cannot be loaded (not JSON, not a valid record, or out of place)."""

    _arguments = ("path", "branch_id", "message_id", "position", "reason")

    def __init__(self, path: str, branch_id: str, message_id: str, position: int, reason: str) -> None:
        super().__init__(
            f"store {path!r}, branch {branch_id!r}: the record of message {message_id} (position {position}) "
            f"is corrupt: {reason}"
        )
        self.path = path
        self.branch_id = branch_id
        self.message_id = message_id
        self.position = position
        self.reason = reason


class UnwritableRecordError(StoreError, ValueError):
    """A message whose record cannot be written (`to_json` refused it: a NaN in its content, bytes that
    are not UTF-8, ...): the write was rolled back. The branch is rewritten whole by its next write,
    which fails the same way until that message is replaced or gone from the history."""

    _arguments = ("path", "branch_id", "message_id", "reason")

    def __init__(self, path: str, branch_id: str, message_id: str, reason: str) -> None:
        super().__init__(f"store {path!r}, branch {branch_id!r}: cannot write message {message_id}: {reason}")
        self.path = path
        self.branch_id = branch_id
        self.message_id = message_id
        self.reason = reason


class _BranchWriterError(StoreError):
    """An error about which writer a branch belongs to (the claims in `schema.py`): names the store's
    file and the branch, and says why."""

    reason = ""
    _arguments = ("path", "branch_id")

    def __init__(self, path: str, branch_id: str) -> None:
        super().__init__(f"store {path!r}, branch {branch_id!r}: {self.reason}")
        self.path = path
        self.branch_id = branch_id


class BranchTakenOverError(_BranchWriterError):
    """A write of an attachment whose branch id another writer (another `SQLiteStore`, in this process
    or another) has attached since: that attach replaced the stored history and claimed the branch, so
    this write was refused and rolled back rather than mixing two histories in one branch. Every later
    write of this attachment is refused the same way (`Attachment.taken_over` is True); the history
    keeps its changes. `detach()` it; attaching it again takes the branch back, replacing the other
    writer's history, so do that only when this history is the one to keep."""

    reason = (
        "another writer has attached this branch id since this history was attached, so its changes are no "
        "longer written here (detach it; attaching it again would replace the other writer's history)"
    )


class BranchHeldError(_BranchWriterError):
    """`attach(..., take_over=False)` of a branch id another writer holds: attached to another store (in
    this process or another) and not detached, or left claimed by a writer that could not give it up
    (its process ended without closing the store, or the file was locked as it detached). Nothing was
    written. `attach(..., take_over=True)` (the default) takes it over."""

    reason = (
        "another writer holds this branch (attached elsewhere and not detached, or its process ended without "
        "closing the store); attach with take_over=True to take it over"
    )


class SnapshotError(StoreError, ValueError):
    """A snapshot file that cannot be loaded (not JSON, not a lionmsg snapshot, the wrong kind, invalid
    data); `path` names the file. A missing file is the usual `FileNotFoundError`."""

    _arguments = ("path", "reason")

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"snapshot {path!r}: {reason}")
        self.path = path
        self.reason = reason
