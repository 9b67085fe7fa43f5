"""Sender and recipient values: what they may be and how they are normalised (ADR-0006 D1)."""

from __future__ import annotations

from typing import Any, TypeAlias
from uuid import UUID

from lionmsg.generated.roles import MessageRole
from lionmsg.runtime.ids import parse_canonical_uuid

__all__ = ["ROLES_BY_VALUE", "PlainName", "SenderRecipient", "normalize_address", "record_address"]

SenderRecipient: TypeAlias = MessageRole | UUID | str
"""A role, a UUID, or any other name."""

ROLES_BY_VALUE: dict[str, MessageRole] = {role.value: role for role in MessageRole}
# `uuid.UUID()` reads 32 hex digits after taking out every `urn:`, `uuid:`, brace and hyphen: no
# shorter text can be one (the usual names are, and skip its Python-level parse), and longer text is
# tried whatever its spelling, as a Progression and an Exchange read an owner's id.
_SHORTEST_UUID_TEXT = 32


class PlainName(str):
    """A record's sender or recipient that is a plain name, marked so that validation keeps it as text
    even where `uuid.UUID()` would parse it (see `record_address`)."""


def record_address(text: str) -> SenderRecipient:
    """A sender or recipient as a record spells it: a role's value is the role, a canonical UUID (the
    schema's `$defs/uuid`) is the UUID, and any other text is a plain name, even text `uuid.UUID()`
    would parse (bare hex, braces, `urn:uuid:`): reading it as a UUID would change the record, which
    the schema says holds a name there. (Python input is friendlier: see `normalize_address`.)"""
    role = ROLES_BY_VALUE.get(text)
    if role is not None:
        return role
    ident = parse_canonical_uuid(text)
    return text if ident is None else ident


def normalize_address(value: Any) -> SenderRecipient | None:
    """Normalise a sender or recipient.

    A role stays a role, a UUID stays a UUID (a subclass's value becomes a plain UUID), an object with
    an ``id`` becomes that UUID, a role string
    becomes the role, a UUID string becomes a UUID, any other string stays as it is and ``None`` stays
    ``None`` (explicit broadcast). Anything else raises ``ValueError("Invalid sender or recipient")``.
    """
    kind = type(value)
    if kind is MessageRole or kind is UUID or value is None:
        return value  # type: ignore[no-any-return]
    if isinstance(value, str):
        if isinstance(value, MessageRole):
            return value
        if kind is PlainName:
            return str(value)
        role = ROLES_BY_VALUE.get(value)
        if role is not None:
            return role
        return _uuid_or_none(value) or str(value)
    if isinstance(value, UUID):  # a subclass (uuid6's, say) is stored as the plain UUID it names
        return UUID(int=value.int)
    ident = getattr(value, "id", None)
    if isinstance(ident, UUID):
        return ident if type(ident) is UUID else UUID(int=ident.int)
    if isinstance(ident, str):
        parsed = _uuid_or_none(ident)
        if parsed is not None:
            return parsed
    raise ValueError("Invalid sender or recipient")


def _uuid_or_none(text: str) -> UUID | None:
    if len(text) < _SHORTEST_UUID_TEXT:
        return None
    try:
        return UUID(text)
    except ValueError:
        return None
