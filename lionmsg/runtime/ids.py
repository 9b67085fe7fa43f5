"""Fresh and parsed UUIDs without `uuid.UUID.__init__`'s Python-level argument handling, which costs
more than the rest of creating a message."""

from __future__ import annotations

import os
import struct
from typing import Any
from uuid import UUID, SafeUUID

from lionmsg.runtime.wire import CANONICAL_UUID

__all__ = ["new_uuid4", "parse_canonical_uuid", "uuid_from_int", "uuid_text"]


def new_uuid4() -> UUID:
    """A random (version 4, RFC 4122 variant) UUID, as `uuid.uuid4()` makes it: 128 bits from
    `os.urandom`, read 4 KiB at a time, with the version and variant bits set."""
    while True:
        try:
            value = _take_value()
            break
        except IndexError:  # empty (also when other threads emptied it again after our refill)
            _refill()
    return uuid_from_int(value)


def parse_canonical_uuid(text: Any) -> UUID | None:
    """The UUID of canonical 8-4-4-4-12 hex text (the schema's `$defs/uuid`, what records use), None
    for anything else. (The pattern does the checking: int() alone would also take "0x", "_", signs,
    spaces and non-ASCII digits.)"""
    if type(text) is not str or _canonical(text) is None:
        return None
    return uuid_from_int(int(text.replace("-", ""), 16))


def uuid_from_int(value: int) -> UUID:
    """`UUID(int=value)` for a value known to fit in 128 bits."""
    ident = _new_object(UUID)
    _set_int(ident, value)
    _set_safety(ident, _SAFETY_UNKNOWN)
    return ident


def uuid_text(value: UUID) -> str:
    """`str(value)`: the canonical 8-4-4-4-12 text, for about 5.5k instructions against `str()`'s 7.1k."""
    if type(value) is not UUID:  # a subclass may spell itself differently
        return str(value)
    # bytes.hex puts a dash after every 2 bytes (aaaa-bbbb-cccc-dddd-eeee-ffff-gggg-hhhh) in C; dropping
    # three of them takes four slices. Formatting the int as 32 digits and cutting it in five (a format
    # spec to parse, five slices) cost 7.6k instructions, no less than `str()` itself.
    grouped = value.int.to_bytes(16, "big").hex("-", 2)
    return f"{grouped[:4]}{grouped[5:29]}{grouped[30:34]}{grouped[35:]}"


_canonical = CANONICAL_UUID.fullmatch
_new_object = object.__new__
# UUID forbids assignment: its __init__ sets the slots through object.__setattr__; their descriptors'
# own setters do the same at half the cost.
_set_int = UUID.__dict__["int"].__set__
_set_safety = UUID.__dict__["is_safe"].__set__
# Looked up once: reading an enum member off its class costs several hundred nanoseconds on 3.11,
# as much as the rest of building the UUID.
_SAFETY_UNKNOWN = SafeUUID.unknown

# Version-4 UUID values not handed out yet. One os.urandom call per 256 ids instead of one per id; a
# forked child starts empty, so it never repeats ids its parent (or a sibling) hands out.
_POOL: list[int] = []
_take_value = _POOL.pop
_WORDS = struct.Struct(">512Q").unpack  # 4 KiB as 64-bit words: one C call, not 256 slices

# Version 4 (bits 12-15 of the high word) and the RFC 4122 variant (bits 62-63 of the low word):
# cleared by _KEEP, then set by _SET.
_HIGH_KEEP, _HIGH_SET = ~0xF000 & (2**64 - 1), 0x4000
_LOW_KEEP, _LOW_SET = ~(0xC000 << 48) & (2**64 - 1), 0x8000 << 48


def _refill() -> None:
    words = _WORDS(os.urandom(4096))
    _POOL.extend(
        [
            (((high & _HIGH_KEEP) | _HIGH_SET) << 64) | (low & _LOW_KEEP) | _LOW_SET
            for high, low in zip(words[::2], words[1::2], strict=True)
        ]
    )


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_POOL.clear)
