"""Record ids held inside content (the reciprocal action links)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from lionmsg.runtime.wire import CANONICAL_UUID

__all__ = ["record_id"]


def record_id(value: Any) -> Any:
    """Content stores a linked record's id as its UUID string in lower case, as every id is written
    (the schema's pattern allows A-F too); a UUID is converted, the rest is left for the generated
    schema check to accept or reject."""
    if isinstance(value, UUID):
        return str(value)
    if type(value) is str and CANONICAL_UUID.fullmatch(value):
        return value.lower()
    return value
