"""SQLiteStore: branch histories in one SQLite file (WAL while open), written through as they change.

Attaching a history (`attach`) first makes the stored branch exactly the manager's history (what was
stored under that id before is replaced; `load` a branch and attach the loaded manager to continue
it), then keeps it so:

- added or replaced messages, through a message-added observer placed first in `on_message_added` (the
  message is durable before other observers, which may add messages themselves, see it). The observer
  writes the manager's *current* object for the id at its current position, so a retried call, calls
  that arrive out of order (an async observer suspending, an observer adding from inside another) and
  a message cleared before its observer ran all end in the manager's state. A row is keyed by
  (branch, message id), written with an UPSERT: a retry never duplicates it. Adding an ActionResponse
  also rewrites its request, which the runtime links in place (`action_response_id`).
- `set_system` and `clear_messages` (which fire no message-added observer), through `hooks.watch_history`
  (the manager's `on_history_changed`).

Every write is one transaction (`BEGIN IMMEDIATE` ... `COMMIT`), so a killed process leaves each write
whole or absent. After each write the store checks, in O(1), that nothing but the change it is writing
happened since its last write: the pile's change mark (`changes_made`: it moves with every message
added or removed and every change of order, through the pile or its progression) against the manager's
note of where its latest change began, then the branch's row count (kept by triggers) and system id against the
manager's. A difference, a position already taken, or an earlier write that failed makes the store
rewrite the whole branch from the manager in the same transaction, so changes made to the Pile or its
Progression directly, behind the manager's back, are caught up by the next write; `Attachment.sync()`
rewrites on demand. Content mutated in place (or a message replaced in the pile under its own id)
without re-adding the message is not seen until the message is written again.

Durability: `synchronous=NORMAL` by default. In WAL mode a commit is in the operating system's hands
when `add_message` returns, so it survives the process being killed (SIGKILL included); only an OS crash
or power loss can lose the last commits, and never corrupts the file. `synchronous="FULL"` also
survives those, for an fsync per write (measured here: about 0.4 ms per write against 0.06 ms).

A failed write is raised from the `add_message` / `set_system` / `clear_messages` that caused it (an
error from SQLite as a `StoreError` naming the store, branch and message, a `CorruptStoreError` when
the file is damaged; a record that cannot be serialized as `UnwritableRecordError`); the change stays
in the manager, as with every observer failure, and the next write rewrites the branch.

The connection is shared by the store's attachments and guarded by a lock, so histories attached to
one store may be used from different threads. Writes block: from async code they cost one short
synchronous transaction per message. `close()` (or `detach()`) from another thread lets a write in
progress commit first; a write that had not taken the lock yet is skipped, silently.

One branch id has one writer: attach claims the branch for its attachment (schema.py), and a write of
an attachment whose branch another store or process has attached since is a BranchTakenOverError,
rolled back, rather than a mix of two histories in one branch; that attachment stays refused (it does
not rewrite the branch, unlike after other failed writes). `attach(..., take_over=False)` is refused
(BranchHeldError) while another writer holds the branch; detaching gives a claim up.

The file: any number of stores (threads, processes) may open one file, a new one included, at once.
While a writer is open the file is in WAL mode (readers never wait for a writer's transaction), with
its `-wal` and `-shm` files beside it; the last writer to close it switches it back to the rollback
journal, so a closed store is one file that a read-only open (`read_only=True`) reads without creating
anything (one left in WAL mode with no -wal file beside it is read as immutable: see
`_connect_read_only`). Opening and closing a writer thus moves the header's change counter; the data
stay as they were.
"""

from __future__ import annotations

import math
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, NoReturn, TypeVar
from uuid import UUID, uuid4

from lionmsg.generated.messages import ActionRequest, ActionResponse, Message, System
from lionmsg.runtime.branch import Branch
from lionmsg.runtime.lockinghooks import LockedCall, LockingHook
from lionmsg.runtime.manager import MessageManager, misplaced_system, misplaced_system_text, refuse_unhookable
from lionmsg.runtime.pile import Pile, changes_made, out_of_step
from lionmsg.runtime.wire import loads_json
from lionmsg.store.errors import (
    BranchHeldError,
    BranchTakenOverError,
    CorruptRecordError,
    CorruptStoreError,
    StoreError,
    UnknownBranchError,
    UnwritableRecordError,
)
from lionmsg.store.hooks import HistoryEvent, watch_history
from lionmsg.store.schema import (
    check_before_read_only_open,
    check_store,
    claim,
    claim_holder,
    file_stamp,
    file_uri,
    give_up_claims,
    prepare,
    release,
    release_closed,
)
from lionmsg.store.sqlite_errors import store_error

_T = TypeVar("_T")

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["Attachment", "SQLiteStore"]

_UPSERT = (
    "INSERT INTO messages (branch_id, message_id, position, record) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (branch_id, message_id) DO UPDATE SET position = excluded.position, record = excluded.record"
)

Row = tuple[str, int, str]  # message id, position, record


class Attachment(LockingHook):
    """The link between one history and one stored branch, returned by `SQLiteStore.attach`. It is the
    message-added observer itself (it appears in the manager's `on_message_added`)."""

    def __init__(self, store: SQLiteStore, manager: MessageManager, branch_id: str, take_over: bool = True) -> None:
        self.store = store
        self.manager = manager
        self.branch_id = branch_id
        self._unwatch: Callable[[], None] = _nothing
        self._stale = False  # a write failed: the next write rewrites the branch
        # This attachment's writer token: its first write (attach's) claims the branch with it, and every
        # later write checks the claim is still its own (schema.py: another store or process attaching
        # the same id takes the branch over, and this one must stop writing into it).
        self._writer = uuid4().hex
        self._claimed = False
        self._take_over = take_over  # attach's: replace another writer's claim (else refuse the attach)
        self._taken_over = False  # refused once: refused for good (the branch is another writer's)
        # The manager's pile and its `changes_made` mark as of the last write (None before the first).
        self._written: tuple[Pile[Message], tuple[int, int]] | None = None

    @property
    def attached(self) -> bool:
        return self.store._attachments.get(self.branch_id) is self

    @property
    def taken_over(self) -> bool:
        """True once a write found that another writer has attached this branch id since (every write
        of this attachment is then a BranchTakenOverError, without reading the file)."""
        return self._taken_over

    def __call__(self, message: Message) -> None:
        self.store._message_added(self, message)

    def _history_changed(self, event: HistoryEvent) -> None:
        self.store._history_changed(self, event)

    def sync(self) -> None:
        """Rewrite the stored branch from the manager now (after changes made behind its back).
        StoreError once detached: the branch id may hold another history by then."""
        # So that a detach or close cannot come between the check and the write; in _write's order.
        with self.manager.messages.thread_lock, self.store._lock:
            if not self.attached:
                raise StoreError(f"store {self.store.path!r}: branch {self.branch_id!r} is detached: nothing to sync")
            self.store._write(self, "the history", None)

    def detach(self) -> None:
        """Stop persisting this history (what is stored stays) and give the branch's claim up, waiting
        for the file's lock half a second at most: while another connection holds it longer the claim
        stays held (see `SQLiteStore.attach`'s take_over). Idempotent."""
        self.store._detach(self)

    def __repr__(self) -> str:
        state = "attached" if self.attached else "detached"
        return f"<Attachment {state}: branch {self.branch_id!r} of store {self.store.path!r}>"

    def __reduce__(self) -> NoReturn:
        # copy.deepcopy and pickle of a history reach its observers: a copy of this one would be a second
        # writer of the stored branch (and an open connection cannot be copied). Said plainly, rather
        # than as "cannot pickle '_thread.RLock' object" from somewhere inside the store.
        raise TypeError(
            f"a history attached to a store is not copied or pickled ({self!r}): copy its record "
            "(from_dict(x.to_dict())), or detach it first"
        )


class SQLiteStore:
    """Many branch histories in one SQLite file; see the module docstring. A context manager:
    `close()` detaches every history and closes the file."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        timeout: float = 5.0,
        read_only: bool = False,
    ) -> None:
        # Of the wrong type, a TypeError (as for every other argument of the library); a bad value of the
        # right type, a ValueError. A bool is no number of seconds (True would be one).
        if not isinstance(synchronous, str):
            raise TypeError(f"synchronous must be 'NORMAL' or 'FULL', got {type(synchronous).__name__}")
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool):
            raise TypeError(f"timeout must be a number of seconds >= 0, got {type(timeout).__name__}")
        if not timeout >= 0:  # NaN fails `>=` too
            raise ValueError(f"timeout must be a number of seconds >= 0, got {timeout!r}")
        _refuse_non_bool("read_only", read_only)
        if timeout > sys.float_info.max:  # an int no float holds: as long as SQLite can wait, as infinity
            timeout = math.inf
        self._timeout = timeout
        named = os.fspath(path)
        if not isinstance(named, str):  # bytes: SQLite and the messages here speak text
            raise TypeError(f"a store path must be a str or an os.PathLike of str, got {type(named).__name__}")
        self.path = named
        if not named:  # SQLite would open a private temporary database, gone at close
            raise ValueError("a store path cannot be empty")
        if "\0" in named:  # SQLite would open the file named by what comes before it
            raise ValueError(f"a store path cannot hold a NUL character, got {named!r}")
        # Every open, stamp and clean-up goes by this one absolute path, through a `file:` URI: a path
        # given as text SQLite would read as a URI itself ("file:x.db?mode=memory"), and the writer and
        # the read-only connections must name the same file, also after the program changed directory.
        # Joined, not normalised: `link/..` must be followed as the file system follows it, not cut as text.
        self._file = os.path.join(os.getcwd(), named)
        self.read_only = read_only
        self._lock = threading.RLock()
        self._attachments: dict[str, Attachment] = {}
        # The file as it was when read as immutable (see _connect_read_only); None otherwise.
        self._immutable_stamp: tuple[int, int, int, bool] | None = None
        if read_only:
            self._connection: sqlite3.Connection | None = self._connect_read_only()
            return
        try:
            connection = sqlite3.connect(
                file_uri(self._file), timeout=timeout, isolation_level=None, check_same_thread=False, uri=True
            )
        except sqlite3.Error as exc:
            raise store_error(f"cannot open store {self.path!r}: {exc}", exc) from exc
        try:
            prepare(connection, self.path, synchronous, timeout)
        except BaseException:
            connection.close()
            raise
        self._connection = connection

    def _connect_read_only(self) -> sqlite3.Connection:
        """SQLite's own read-only mode (nothing can be written, not even the WAL switch, and the file
        must already be a lionmsg store), for looking at a file without changing it. A store in WAL
        mode that no connection has open (no -wal file) is read as immutable: SQLite's read-only mode
        would create -wal and -shm files beside it (or fail where the folder is not writable) and could
        not remove them. Such a connection sees the file as of its stamp; each read checks it (_read)."""
        # Stamped before the check: a writer that opens the file after it then changes the stamp, and the
        # next read opens the file again (one that opened it between the check and a later stamp was
        # stamped in, -wal and all, and its commits never read).
        stamp = file_stamp(self._file)
        immutable = check_before_read_only_open(self._file, self.path) and stamp is not None and not stamp[3]
        stamp = stamp if immutable else None
        target = file_uri(self._file, immutable="1") if immutable else file_uri(self._file, mode="ro")
        try:
            connection = sqlite3.connect(
                target, timeout=self._timeout, isolation_level=None, check_same_thread=False, uri=True
            )
        except sqlite3.Error as exc:
            raise store_error(f"cannot open store {self.path!r}: {exc}", exc) from exc
        try:
            check_store(connection, self.path, self._timeout)
        except BaseException:
            connection.close()
            raise
        self._immutable_stamp = stamp
        return connection

    # -- lifecycle ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Detach every attached history (their claims given up in one transaction that waits for the
        file's lock half a second at most, as `Attachment.detach` does) and close the file. Idempotent.

        Writes from other threads: one in progress (it holds the store's lock) finishes, committed,
        before close() goes on; one that had not taken the lock yet is skipped, as after `detach()`
        (its history keeps the change; the store does not have it) and raises nothing.

        The last connection of a writer to close a file switches it back to SQLite's rollback journal
        (see `schema.release`; two writers closing at the same moment try again, a few milliseconds
        apart, once closed: `schema.release_closed`): a cleanly closed store is one file, which a
        read-only open reads without creating anything. While another connection has it open it stays
        in WAL mode."""
        with self._lock:
            attachments = list(self._attachments.values())
            for attachment in attachments:
                self._detach(attachment, release_claim=False)
            connection, self._connection = self._connection, None
            if connection is None:
                return
            released = self.read_only  # a read-only connection switches nothing
            try:
                self._give_up_claims(connection, attachments)  # one transaction for them all
                released = released or release(connection)
            finally:
                connection.close()
            if not released:
                release_closed(self._file)

    @property
    def closed(self) -> bool:
        return self._connection is None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<SQLiteStore {self.path!r}{' (closed)' if self.closed else ''}>"

    # -- public operations -------------------------------------------------------------------------

    def attach(self, history: MessageManager | Branch, branch_id: str | UUID, *, take_over: bool = True) -> Attachment:
        """Persist `history` (a MessageManager, or a Branch's) as `branch_id`, now and after every
        change: the stored branch becomes exactly this history, and this attachment its one writer. An
        attachment of another store (or process) that held the branch is refused from then on
        (BranchTakenOverError); with `take_over=False` this attach is refused instead while another
        writer holds the branch (BranchHeldError: attached and not detached, or its process ended
        without closing its store). StoreError when the branch id is attached to another history in this
        store, or this history to another branch id of it. A failed attach (those errors, a first write
        that fails) leaves nothing behind: no observer, no listener, the branch id free. A manager whose
        `on_message_added` or `on_history_changed` is not a list (a tuple, None), which cannot take the
        store's hooks, is a TypeError before anything is done, as for a Branch."""
        manager = history.msgs if isinstance(history, Branch) else history
        if not isinstance(manager, MessageManager):
            raise TypeError(f"attach takes a MessageManager or a Branch, got {type(history).__name__}")
        _refuse_non_bool("take_over", take_over)
        refuse_unhookable(manager)
        key = _branch_key(branch_id)
        with manager.messages.thread_lock, self._lock:  # in _write's order: the history's lock first
            self._open()
            if self.read_only:
                raise StoreError(f"store {self.path!r} is open read-only: nothing can be attached")
            if key in self._attachments:
                raise StoreError(f"store {self.path!r}: branch {key!r} is already attached to a history")
            for other in self._attachments.values():
                if other.manager is manager:
                    raise StoreError(
                        f"store {self.path!r}: this history is already attached as branch {other.branch_id!r}"
                    )
            attachment = Attachment(self, manager, key, take_over)
            # Everything from the hooks on is undone by a failure, an interrupt between two of these
            # steps included (review bq: hooks left behind by one made the manager refuse copies).
            try:
                self._hook(attachment)
                manager._track_changes()
                # Registered only once its hooks are in place; a failed first write undoes everything.
                self._attachments[key] = attachment
                self._write(attachment, "the history", None)
            except BaseException:
                self._detach(attachment)
                raise
        return attachment

    def load(self, branch_id: str | UUID) -> MessageManager:
        """A new MessageManager with the stored history of `branch_id` (no observers). Raises
        UnknownBranchError for a branch the store does not hold and CorruptRecordError (naming the
        branch, message id and position) for a row that cannot be loaded; the file is only read."""
        key = _branch_key(branch_id)

        def read(connection: sqlite3.Connection) -> tuple[Any, list[Row]]:
            branch = connection.execute("SELECT system_id FROM branches WHERE branch_id = ?", (key,)).fetchone()
            rows: list[Row] = connection.execute(
                "SELECT message_id, position, record FROM messages WHERE branch_id = ? ORDER BY position", (key,)
            ).fetchall()
            return branch, rows

        branch, rows = self._read(f"branch {key!r}", read)
        if branch is None:
            raise UnknownBranchError(key, self.path)
        messages = [self._decode(key, row) for row in rows]
        self._check_system(key, branch[0], messages)
        try:
            return MessageManager(messages=messages)
        except (TypeError, ValueError) as exc:  # pragma: no cover - the checks above admit only valid histories
            raise CorruptStoreError(f"store {self.path!r}, branch {key!r}: not a valid history: {exc}") from exc

    def branches(self) -> list[str]:
        """The stored branch ids, in the order they were first stored. CorruptStoreError for a stored id
        that is not one (a BLOB or empty text, which this package never writes and `load` cannot take)."""
        stored = self._read(
            "the branch list",
            lambda connection: [
                branch_id for (branch_id,) in connection.execute("SELECT branch_id FROM branches ORDER BY rowid")
            ],
        )
        for branch_id in stored:
            if not isinstance(branch_id, str) or not branch_id:
                why = "is empty" if branch_id == "" else f"is a {type(branch_id).__name__}, not text"
                raise CorruptStoreError(f"store {self.path!r}: the branch list is corrupt: the id {branch_id!r} {why}")
        return stored

    # -- writing (called by attachments) -----------------------------------------------------------

    def _message_added(self, attachment: Attachment, message: Message) -> None:
        # What is written is read under the history's lock, as _write's check is: another thread may
        # take the message out meanwhile (a clear), and it must then be written as gone, not fail.
        with attachment.manager.messages.thread_lock:
            self._write_added(attachment, message)

    def _write_added(self, attachment: Attachment, message: Message) -> None:
        manager = attachment.manager
        current = manager.messages.get(message.id)
        if current is None or not attachment.attached:
            return  # it left the history before this call (the removal was persisted) or we detached
        written = [current]
        if isinstance(current, ActionResponse) and current.content.action_request_id is not None:
            request = manager.messages.get(current.content.action_request_id)
            if isinstance(request, ActionRequest):
                written.insert(0, request)  # the runtime linked it in place to this response

        def write(connection: sqlite3.Connection) -> None:
            rows = [(str(item.id), _position(manager, item), self._record(attachment, item)) for item in written]
            if isinstance(current, System):
                self._put_system(connection, attachment.branch_id, rows[0])
            else:
                connection.executemany(_UPSERT, [(attachment.branch_id, *row) for row in rows])

        self._write(attachment, f"message {current.id}", write)

    def _history_changed(self, attachment: Attachment, event: HistoryEvent) -> None:
        with attachment.manager.messages.thread_lock:  # the system read with the rest (_message_added)
            self._write_history_change(attachment, event)

    def _write_history_change(self, attachment: Attachment, event: HistoryEvent) -> None:
        if not attachment.attached:
            return
        manager, key = attachment.manager, attachment.branch_id
        system = manager.system

        def write(connection: sqlite3.Connection) -> None:
            if event == "clear":
                connection.execute("DELETE FROM messages WHERE branch_id = ? AND position <> 0", (key,))
            if system is not None:
                self._put_system(connection, key, (str(system.id), 0, self._record(attachment, system)))

        self._write(attachment, "the system message" if event == "system" else "the cleared history", write)

    def _write(self, attachment: Attachment, what: str, write: Callable[[sqlite3.Connection], None] | None) -> None:
        """One transaction: the claim checked (BranchTakenOverError, or BranchHeldError for attach's
        write), `write`, then the check against the manager (and the rewrite it may call for); a
        rewrite of the whole branch when `write` is None; nothing once detached. Any failure rolls it
        back and marks the attachment stale; SQLite's errors are raised as StoreError
        (CorruptStoreError for a damaged file), a record that cannot be written as
        UnwritableRecordError (see _record)."""
        # The history's thread lock first, then the store's, in that order everywhere: a write reads the
        # history, and observers and listeners may run while a caller holds the history's lock.
        with attachment.manager.messages.thread_lock, self._lock:
            # Detached meanwhile (by another thread's detach() or close()) before this write took the
            # lock: skipped, what is stored stays, and a closed store is no error here.
            if not attachment.attached:
                return
            if attachment._taken_over:  # refused for good, without waiting for the file's lock
                raise BranchTakenOverError(self.path, attachment.branch_id)
            try:
                with self._transaction("BEGIN IMMEDIATE") as connection:
                    # attach's write claims the branch; every later one first checks it still holds it
                    claimed = self._holds_claim(connection, attachment)
                    if attachment._stale or write is None or not claimed:
                        self._rewrite(connection, attachment)
                    else:
                        try:
                            write(connection)
                        except sqlite3.IntegrityError:  # a position taken or no branch row: out of line
                            self._rewrite(connection, attachment)
                        else:
                            self._keep_in_line(connection, attachment)
                    if not claimed:
                        claim(connection, attachment.branch_id, attachment._writer)
            except sqlite3.Error as exc:
                attachment._stale = True
                what_failed = f"store {self.path!r}, branch {attachment.branch_id!r}: cannot write {what}: {exc}"
                raise store_error(what_failed, exc) from exc
            except BaseException:
                attachment._stale = True
                raise
            attachment._stale = False
            attachment._claimed = True
            pile = attachment.manager.messages
            attachment._written = (pile, changes_made(pile))

    def _holds_claim(self, connection: sqlite3.Connection, attachment: Attachment) -> bool:
        """True while this attachment's claim on its branch stands. BranchTakenOverError when another
        writer (another store, or process) has attached the branch id since, and for good once it has:
        a claim that disappears later does not give the branch back. False before the first write
        (attach's: it claims the branch, BranchHeldError when another writer holds it and the attach
        may not take it over) and when no claim is left (another client deleted the branch or the
        claims): this write then writes the history whole and claims again."""
        if attachment._taken_over:
            raise BranchTakenOverError(self.path, attachment.branch_id)
        latest = claim_holder(connection, attachment.branch_id)  # (token, still held) or None
        if not attachment._claimed:
            if latest is not None and latest[1] and not attachment._take_over:
                raise BranchHeldError(self.path, attachment.branch_id)
            return False
        if latest is not None and latest[0] != attachment._writer:
            attachment._taken_over = True
            raise BranchTakenOverError(self.path, attachment.branch_id)
        return latest is not None

    def _record(self, attachment: Attachment, message: Message) -> str:
        """The message's row: its record, read back as `load` reads it (a field changed in place is
        checked by nobody until now, and one bad row would make the whole branch unloadable)."""
        try:
            record = message.to_json()
        except ValueError as exc:
            raise UnwritableRecordError(self.path, attachment.branch_id, str(message.id), str(exc)) from exc
        try:
            Message.from_dict(loads_json(record))
        except (TypeError, ValueError) as exc:
            reason = f"its record would not load ({exc})"
            raise UnwritableRecordError(self.path, attachment.branch_id, str(message.id), reason) from exc
        return record

    def _keep_in_line(self, connection: sqlite3.Connection, attachment: Attachment) -> None:
        manager = attachment.manager
        written = attachment._written
        if written is None or not manager._nothing_else_since(*written):
            self._rewrite(connection, attachment)
            return
        stored = connection.execute(
            "SELECT message_count, system_id FROM branches WHERE branch_id = ?", (attachment.branch_id,)
        ).fetchone()
        expected = (len(manager), None if manager.system is None else str(manager.system.id))
        if stored is None or tuple(stored) != expected:
            self._rewrite(connection, attachment)

    def _rewrite(self, connection: sqlite3.Connection, attachment: Attachment) -> None:
        """Make the stored branch exactly the manager's history (inside the caller's transaction)."""
        manager, key = attachment.manager, attachment.branch_id
        unordered = out_of_step(manager.messages)
        if unordered is not None:  # its stored branch would miss a message, or iterating it would fail
            raise UnwritableRecordError(self.path, key, str(unordered[0]), unordered[1])
        misplaced = misplaced_system(manager)
        if misplaced is not None:  # its stored branch would not load
            raise UnwritableRecordError(self.path, key, str(misplaced[1].id), misplaced_system_text(*misplaced))
        rows = [(key, str(item.id), _position(manager, item), self._record(attachment, item)) for item in manager]
        system_id = None if manager.system is None else str(manager.system.id)
        connection.execute(
            "INSERT INTO branches (branch_id, created_at, system_id) VALUES (?, ?, ?) "
            "ON CONFLICT (branch_id) DO UPDATE SET system_id = excluded.system_id",
            (key, time.time(), system_id),
        )
        connection.execute("DELETE FROM messages WHERE branch_id = ?", (key,))
        connection.executemany(
            "INSERT INTO messages (branch_id, message_id, position, record) VALUES (?, ?, ?, ?)", rows
        )
        # Heals a count that a writer without the triggers left wrong.
        connection.execute("UPDATE branches SET message_count = ? WHERE branch_id = ?", (len(rows), key))

    @staticmethod
    def _put_system(connection: sqlite3.Connection, key: str, row: Row) -> None:
        message_id, _, record = row
        connection.execute(
            "DELETE FROM messages WHERE branch_id = ? AND position = 0 AND message_id <> ?", (key, message_id)
        )
        connection.execute(_UPSERT, (key, message_id, 0, record))
        connection.execute("UPDATE branches SET system_id = ? WHERE branch_id = ?", (message_id, key))

    @staticmethod
    def _hook(attachment: Attachment) -> None:
        """Put the attachment first among the manager's observers and watch its history; a failure
        (the manager's lists replaced by something else) leaves neither behind."""
        manager = attachment.manager
        manager.on_message_added.insert(0, attachment)
        try:
            attachment._unwatch = watch_history(manager, LockedCall(manager, attachment._history_changed))
        except BaseException:
            _remove(manager.on_message_added, attachment)
            raise

    def _detach(self, attachment: Attachment, *, release_claim: bool = True) -> None:
        with self._lock:
            detaching = self._attachments.get(attachment.branch_id) is attachment
            if detaching:
                del self._attachments[attachment.branch_id]
            _remove(attachment.manager.on_message_added, attachment)
            attachment._unwatch()
            attachment._unwatch = _nothing
            if detaching and release_claim and self._connection is not None:
                self._give_up_claims(self._connection, [attachment])

    def _give_up_claims(self, connection: sqlite3.Connection, attachments: list[Attachment]) -> None:
        """Give the branches up as their attachments detach, so that an attach with take_over=False may
        take them; after the attachments are unhooked, so that nothing here can leave one half detached.
        Best effort, by design: it waits for the file's lock half a second at most (schema.GIVE_UP_WAIT),
        and a claim left held (the file locked longer, or damaged) is what a writer killed before closing
        leaves, which take_over=True replaces; detach and close do not fail for it."""
        claims = [(held.branch_id, held._writer) for held in attachments if held._claimed and not held._taken_over]
        if claims:
            give_up_claims(connection, claims, self._timeout)

    # -- reading -----------------------------------------------------------------------------------

    def _decode(self, key: str, row: Row) -> Message:
        message_id, position, record = row

        def corrupt(reason: str) -> CorruptRecordError:
            return CorruptRecordError(self.path, key, str(message_id), position, reason)

        if not isinstance(message_id, str):
            raise corrupt(f"the message id is a {type(message_id).__name__}, not text")
        if not isinstance(position, int) or position < 0:
            raise corrupt(f"the position {position!r} is not a non-negative integer")
        if not isinstance(record, str):
            raise corrupt(f"the record is a {type(record).__name__}, not JSON text")
        try:
            data = loads_json(record)
        except ValueError as exc:  # JSONDecodeError (with line and column) or a NaN/Infinity constant
            raise corrupt(f"not JSON ({exc})") from exc
        try:
            message = Message.from_dict(data)
        except (TypeError, ValueError) as exc:
            raise corrupt(f"not a valid message record: {exc}") from exc
        if str(message.id) != message_id:
            raise corrupt(f"the record's id is {message.id}")
        if position == 0 and not isinstance(message, System):
            raise corrupt(f"{type(message).__name__} record at position 0, which is the system message's")
        if position != 0 and isinstance(message, System):
            raise corrupt(f"System record at position {position}; the system message belongs at position 0")
        return message

    def _check_system(self, key: str, system_id: str | None, messages: Sequence[Message]) -> None:
        held = str(messages[0].id) if messages and isinstance(messages[0], System) else None
        if held != system_id:
            raise CorruptStoreError(
                f"store {self.path!r}, branch {key!r}: the branch names system message {system_id}, "
                f"position 0 holds {held}"
            )

    # -- the connection ----------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        if self._connection is None:
            raise StoreError(f"store {self.path!r} is closed")
        return self._connection

    def _read(self, what: str, read: Callable[[sqlite3.Connection], _T]) -> _T:
        """`read` in one read transaction; SQLite's errors are raised as StoreError naming the store and
        what was read (CorruptStoreError for a damaged file). A file read as immutable that changed
        meanwhile (a writer opened it: SQLite assumed it would not) is opened again as it now is, and
        read again: what the first read gave may be torn, and later commits would go unseen. When that
        open fails (the file replaced by one that is no store, say) its StoreError is raised and the store
        keeps its connection, so a later read tries again."""
        with self._lock:
            try:
                result = self._read_once(what, read)
            except StoreError:
                if not self._immutable_file_changed():
                    raise
            else:
                if not self._immutable_file_changed():
                    return result
            previous = self._open()
            self._connection = self._connect_read_only()
            previous.close()
            return self._read_once(what, read)

    def _read_once(self, what: str, read: Callable[[sqlite3.Connection], _T]) -> _T:
        try:
            with self._transaction("BEGIN") as connection:
                return read(connection)
        except sqlite3.Error as exc:  # locked, unreadable text, ...: the file may be fine; or damaged
            raise store_error(f"store {self.path!r}: cannot read {what}: {exc}", exc) from exc

    def _immutable_file_changed(self) -> bool:
        return self._immutable_stamp is not None and file_stamp(self._file) != self._immutable_stamp

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[sqlite3.Connection]:
        with self._lock:
            connection = self._open()
            connection.execute(begin)
            try:
                yield connection
                connection.execute("COMMIT")
            finally:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")


def _position(manager: MessageManager, message: Message) -> int:
    """The stored position of a message of the history: its index, shifted so that position 0 stays
    reserved for the system message. The message just appended (what most writes write) is read at the
    end, by position: asking the order for an id's index would make its id -> position index, which a
    history keeps only once something needs it (OrderedIds). The caller holds the history's lock."""
    order = manager.progression
    ident = message.id
    last = len(order) - 1
    index = last if last >= 0 and order[last] == ident else order.index(ident)
    return index if manager.system is not None else index + 1


def _refuse_non_bool(name: str, value: Any) -> None:
    # "no" or 0 would otherwise be read by truth value: an attach that takes the branch over, say.
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__}")


def _branch_key(branch_id: Any) -> str:
    if isinstance(branch_id, UUID):
        return str(branch_id)
    if not isinstance(branch_id, str):
        raise TypeError(f"a branch id is a string or a UUID, got {type(branch_id).__name__}")
    if not branch_id:
        raise ValueError("a branch id cannot be empty")
    if not branch_id.isascii():
        try:
            branch_id.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (an undecodable byte of a command line, say)
            raise ValueError(f"a branch id is text SQLite can hold, not {branch_id!r} (a lone surrogate)") from None
    return branch_id


def _remove(observers: list[Any], attachment: Attachment) -> None:
    """Take this attachment out of an observer list (by identity: observers may compare equal)."""
    for index, observer in enumerate(observers):
        if observer is attachment:
            del observers[index]
            break


def _nothing() -> None:
    """The unwatch of an attachment that watches nothing (detached, or never watching)."""
