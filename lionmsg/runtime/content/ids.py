"""Record ids held inside content (the reciprocal action links)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

__all__ = ["record_id"]


def record_id(value: Any) -> Any:
    """Content stores a linked record's id as its UUID string; a UUID is converted, the rest is
    left for the generated schema check to accept or reject."""
    return str(value) if isinstance(value, UUID) else value
