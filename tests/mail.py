"""Shared vocabulary of the Exchange tests."""

from __future__ import annotations

from typing import Any

from lionmsg import MessageRole


def drop_address(address: Any) -> str | None:
    """An address as the drop record writes it: a role's value, a UUID's canonical text, a name as is."""
    if address is None:
        return None
    if isinstance(address, MessageRole):
        return address.value
    return str(address)
