"""Persistence for lionmsg histories: a SQLite store written through as histories change, and JSON
snapshots replaced atomically (design.md §4, issue 8).

```python
from lionmsg.store import SQLiteStore, load_snapshot, save_snapshot

with SQLiteStore("histories.db") as store:
    store.attach(manager, "support-42")  # persists the history now and after every change
    ...
    again = store.load("support-42")  # a new MessageManager with the same history
save_snapshot(branch, "branch.json")
assert load_snapshot("branch.json", Branch).id == branch.id
```

Records are stored as the wire format's JSON (schema-valid, readable by any client), never pickled.

Errors (all subclasses of `StoreError`):

- `UnknownBranchError` (also a `KeyError`): `load` of a branch the store does not hold;
  `"unknown branch 'x' in store '/path/histories.db'"`.
- `CorruptStoreError` (also a `ValueError`): a damaged file, met on open, on a read or on a write
  (SQLite's "database disk image is malformed"; "file is not a database", which is also what a file
  that never was a database gives); a stored branch id that is not text; a branch whose system message
  is missing. Nothing is changed.
- `CorruptRecordError` (a `CorruptStoreError`): a stored row that cannot be loaded; names the store,
  branch, message id and position and says why. Loading only reads: nothing is changed, other branches
  load as before.
- `UnwritableRecordError` (also a `ValueError`): a message whose record `to_json` refuses (a NaN in
  its content, say); raised from the change that wrote it, rolled back, and met again by every later
  write of that branch until the message is replaced or removed.
- `BranchTakenOverError`: a write of an attachment whose branch id another store or process has
  attached since (attach takes a branch over); refused and rolled back, as is every later write of it,
  so two histories never mix in one branch. The history keeps its changes.
- `BranchHeldError`: `attach(..., take_over=False)` of a branch another writer holds; nothing written.
- `SnapshotError` (also a `ValueError`): a file that is not a valid snapshot of the expected kind;
  `"snapshot '/path/file.json': <why>"`. A missing file is the usual `FileNotFoundError`.
- `StoreError` itself: a closed store, a SQLite database that is not a lionmsg store (or a newer
  format), a write SQLite refused (raised from the `add_message` / `set_system` / `clear_messages` that
  caused it).
"""

from lionmsg.store.errors import (
    BranchHeldError,
    BranchTakenOverError,
    CorruptRecordError,
    CorruptStoreError,
    SnapshotError,
    StoreError,
    UnknownBranchError,
    UnwritableRecordError,
)
from lionmsg.store.hooks import HistoryEvent, HistoryListener, watch_history
from lionmsg.store.schema import FORMAT_VERSION
from lionmsg.store.snapshots import SNAPSHOT_FORMAT, SNAPSHOT_VERSION, Snapshotable, load_snapshot, save_snapshot
from lionmsg.store.sqlite import Attachment, SQLiteStore

__all__ = [
    "FORMAT_VERSION",
    "SNAPSHOT_FORMAT",
    "SNAPSHOT_VERSION",
    "Attachment",
    "BranchHeldError",
    "BranchTakenOverError",
    "CorruptRecordError",
    "CorruptStoreError",
    "HistoryEvent",
    "HistoryListener",
    "SQLiteStore",
    "SnapshotError",
    "Snapshotable",
    "StoreError",
    "UnknownBranchError",
    "UnwritableRecordError",
    "load_snapshot",
    "save_snapshot",
    "watch_history",
]
