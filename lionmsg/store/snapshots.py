"""JSON snapshots of a MessageManager, a Branch or an Exchange, replaced atomically.

A snapshot file is one JSON object:

    {"format": "lionmsg-snapshot", "version": 1, "kind": "MessageManager" | "Branch" | "Exchange",
     "data": <the object's to_dict() record>}

so any JSON client can tell what it holds, and `load_snapshot` returns the right type.

`save_snapshot` serializes first and reads the result back as `load_snapshot` would: an object that
cannot be serialized never touches the disk, nor one whose record would not load back (content changed in
place, say: a SnapshotError). Then it writes a temporary file next to the target, flushes and fsyncs it,
opens the directory, renames the file over the target (`os.replace`, atomic on POSIX and Windows), then
fsyncs the directory so the rename itself is durable. A failure up to the rename (the directory cannot be
opened included) leaves the previous snapshot as it was and removes the temporary file; a crash at any
point leaves the previous snapshot or the new one, whole (a killed process may leave a temporary file
behind, `.<name>.<random>.tmp`, which is never read). Only the directory's fsync comes after the rename:
when it fails (an I/O error), the error is raised with the new snapshot in place, and the rename may not
survive a power loss.
The replaced file keeps the previous file's permission bits. Observers (`on_message_added`) are
callables and are not part of a snapshot.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar, overload

from lionmsg.runtime.branch import Branch
from lionmsg.runtime.exchange import Exchange
from lionmsg.runtime.manager import MessageManager
from lionmsg.runtime.wire import loads_json, write_json
from lionmsg.runtime.wording import with_article
from lionmsg.store.errors import SnapshotError

__all__ = ["SNAPSHOT_FORMAT", "SNAPSHOT_VERSION", "Snapshotable", "load_snapshot", "save_snapshot"]

SNAPSHOT_FORMAT = "lionmsg-snapshot"
SNAPSHOT_VERSION = 1

Snapshotable = MessageManager | Branch | Exchange
T = TypeVar("T", MessageManager, Branch, Exchange)

_KINDS: dict[str, type[MessageManager] | type[Branch] | type[Exchange]] = {
    "MessageManager": MessageManager,
    "Branch": Branch,
    "Exchange": Exchange,
}
_KEYS = {"format", "version", "kind", "data"}


def save_snapshot(obj: Snapshotable, path: str | os.PathLike[str]) -> None:
    """Write `obj` to `path` as a snapshot, replacing any previous file atomically. An error raised
    before the rename leaves the previous file; only a failed fsync of the directory, after the rename,
    is raised with the new snapshot in place (see the module docstring)."""
    kind = next((name for name, cls in _KINDS.items() if isinstance(obj, cls)), None)
    if kind is None:
        raise TypeError(f"save_snapshot takes a MessageManager, a Branch or an Exchange, got {type(obj).__name__}")
    named = os.fspath(path)
    # "out/" and "out/." would write a file named out (pathlib drops both), "" the folder itself.
    if named.endswith(("/", os.sep)) or os.path.basename(named) in ("", ".", ".."):
        raise ValueError(f"a snapshot path names a file, got {named!r}")
    document = {"format": SNAPSHOT_FORMAT, "version": SNAPSHOT_VERSION, "kind": kind, "data": obj.to_dict()}
    payload = write_json(document).encode("utf-8")  # a lone surrogate written as an escape, as every record
    # Read back as load_snapshot reads it, before the disk is touched: content changed in place is
    # checked by nobody until now, and a snapshot that cannot load would replace one that can.
    try:
        snapshot_from_bytes(named, payload, _KINDS[kind])
    except SnapshotError as exc:
        raise SnapshotError(exc.path, f"not saved: the {kind} would not load back ({exc.reason})") from exc
    _replace_atomically(Path(named), payload)


@overload
def load_snapshot(path: str | os.PathLike[str]) -> Snapshotable: ...
@overload
def load_snapshot(path: str | os.PathLike[str], kind: type[T]) -> T: ...
def load_snapshot(path: str | os.PathLike[str], kind: type[Any] | None = None) -> Any:
    """The object a snapshot file holds (of `kind`, when given). A file that is not a valid snapshot,
    or holds another kind, is a SnapshotError naming it; a missing file is a FileNotFoundError."""
    if kind is not None and kind not in _KINDS.values():
        raise TypeError(f"kind must be MessageManager, Branch or Exchange, got {kind!r}")
    return snapshot_from_bytes(os.fspath(path), Path(path).read_bytes(), kind)


def snapshot_from_bytes(name: str, raw: bytes, kind: type[Any] | None = None) -> Any:
    """`load_snapshot` of a file's bytes, already read (`name` names it in errors): what reads a file
    once, as `lionmsg show` does (a pipe cannot be read twice)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SnapshotError(name, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    try:
        document = loads_json(text)
    except json.JSONDecodeError as exc:
        raise SnapshotError(name, f"not JSON ({exc})") from exc
    except ValueError as exc:
        raise SnapshotError(name, f"not JSON ({exc})") from exc
    stored = _check_header(name, document)
    if kind is not None and stored is not kind:
        raise SnapshotError(name, f"holds {with_article(stored.__name__)}, not {with_article(kind.__name__)}")
    data = document["data"]
    if not isinstance(data, Mapping):
        raise SnapshotError(name, f"invalid {stored.__name__} data: a {type(data).__name__}, not an object")
    try:
        return stored.from_dict(data)
    except (TypeError, ValueError, KeyError) as exc:
        raise SnapshotError(name, f"invalid {stored.__name__} data: {exc}") from exc


def _check_header(name: str, document: Any) -> type[MessageManager] | type[Branch] | type[Exchange]:
    if not isinstance(document, dict) or document.get("format") != SNAPSHOT_FORMAT:
        raise SnapshotError(name, f'not a lionmsg snapshot (no "format": "{SNAPSHOT_FORMAT}")')
    version = document.get("version")
    if type(version) is not int or version != SNAPSHOT_VERSION:
        raise SnapshotError(
            name, f"snapshot version {_shown(version)} is not supported (this lionmsg reads version {SNAPSHOT_VERSION})"
        )
    if set(document) != _KEYS:
        missing, extra = sorted(_KEYS - set(document)), sorted(set(document) - _KEYS)
        raise SnapshotError(name, f"a snapshot has exactly the keys {sorted(_KEYS)}; missing {missing}, extra {extra}")
    kind = document["kind"]
    if not isinstance(kind, str) or kind not in _KINDS:
        raise SnapshotError(name, f"unknown kind {_shown(kind)} (expected one of {', '.join(_KINDS)})")
    return _KINDS[kind]


def _shown(value: Any) -> str:
    """`repr(value)`, or what it is when Python refuses to spell it (an integer beyond its digit limit)."""
    try:
        return repr(value)
    except ValueError:
        return "<an integer too long to show>" if isinstance(value, int) else "<a value too long to show>"


def _replace_atomically(path: Path, payload: bytes) -> None:
    temporary = path.parent / f".{_cut(path.name, 64)}.{secrets.token_hex(8)}.tmp"
    try:
        _replace_through(temporary, path, payload)
    except OSError as exc:  # named for the caller's file, not the hidden temporary one
        if exc.filename != os.fspath(temporary):
            raise
        # A new error: its text is made when it is (filename2 set to None afterwards would print "-> None").
        renamed = type(exc)(exc.errno, exc.strerror, os.fspath(path))
        raise renamed.with_traceback(exc.__traceback__) from None


def _cut(name: str, size: int) -> str:
    """`name` cut to at most `size` bytes as the file system stores it (a name's limit is in bytes: 60
    four-byte characters would not fit a temporary name cut at 64 characters)."""
    encoded = os.fsencode(name)
    return name if len(encoded) <= size else os.fsdecode(encoded[:size])  # a cut character: its bytes kept


def _replace_through(temporary: Path, path: Path, payload: bytes) -> None:
    directory = path.parent
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    descriptor = os.open(temporary, flags, 0o666)  # the umask applies, as for any new file
    try:
        with open(descriptor, "wb") as file:
            previous = _previous_file_mode(path)
            if previous is not None:
                os.chmod(temporary, previous)
            file.write(payload)
            file.flush()
            os.fsync(file.fileno())
        # Opened before the rename: a folder that cannot be opened (write and search permission but
        # no read permission, say) fails the save while the previous snapshot is still in place.
        folder = _open_directory(directory)
        try:
            os.replace(temporary, path)
        except BaseException:
            _close_directory(folder)
            raise
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    try:
        _fsync_directory(folder)
    finally:
        _close_directory(folder)


def _previous_file_mode(path: Path) -> int | None:
    """The permission bits of the file the snapshot replaces (a link's target file), to keep; None when
    there is no such file: nothing there, a link to a folder (whose mode, 1777 for /tmp, no file should
    get), or one that leads nowhere, in a loop or through a folder that cannot be searched (the rename
    replaces the link itself, which needs none of that)."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return stat.S_IMODE(found.st_mode) if stat.S_ISREG(found.st_mode) else None


def _open_directory(directory: Path) -> int | None:
    """A descriptor of the folder, for fsyncing the rename (None on Windows, which has none)."""
    if os.name == "nt":  # pragma: no cover - Windows has no directory descriptors
        return None
    return os.open(directory, os.O_RDONLY)


def _fsync_directory(descriptor: int | None) -> None:
    """Make the rename durable (POSIX); a file system that cannot fsync a directory is left as is."""
    if descriptor is None:  # pragma: no cover - Windows
        return
    try:
        os.fsync(descriptor)
    except OSError as exc:  # pragma: no cover - e.g. some network file systems
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise


def _close_directory(descriptor: int | None) -> None:
    if descriptor is not None:
        os.close(descriptor)
