"""A conversation as a plain-text table: one row per message, for people reading a history.

Used by the demo and by `lionmsg show`. Each row shows the position, role, class, sender → recipient
and the rendered content folded onto one line (an instruction's sections, an image count).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from uuid import UUID

from lionmsg.generated.messages import Message
from lionmsg.generated.roles import MessageRole

__all__ = ["address_label", "conversation_table"]

_SPACES = re.compile(r"\s+")


def address_label(address: Any, names: Mapping[UUID, str] | None = None) -> str:
    """A sender or recipient for a person: a known name, a role, a short UUID, `*` for broadcast."""
    if address is None:
        return "*"
    if isinstance(address, MessageRole):
        return address.value
    if isinstance(address, UUID):
        return (names or {}).get(address, str(address)[:8])
    return str(address)


def _summary(message: Message) -> str:
    try:
        rendered = message.rendered
    except Exception as error:  # a table of a broken history should still print: say what broke
        return f"<cannot render: {type(error).__name__}: {error}>"
    if isinstance(rendered, list):  # text then image parts
        texts = [part.get("text", "") for part in rendered if isinstance(part, dict) and part.get("type") == "text"]
        images = sum(1 for part in rendered if isinstance(part, dict) and part.get("type") == "image_url")
        rendered = " ".join(texts) + (f" [+{images} image{'s' if images != 1 else ''}]" if images else "")
    return _SPACES.sub(" ", str(rendered)).strip()


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def conversation_table(
    messages: Iterable[Message], names: Mapping[UUID, str] | None = None, content_width: int = 76
) -> str:
    """The messages, in the given order, as an aligned table (no trailing newline)."""
    header = ("#", "role", "class", "from → to", "content")
    rows = [
        (
            str(index),
            message.role.value,
            type(message).__name__,
            f"{address_label(message.sender, names)} → {address_label(message.recipient, names)}",
            _fit(_summary(message), content_width),
        )
        for index, message in enumerate(messages)
    ]
    table = [header, *rows]
    widths = [max(len(row[column]) for row in table) for column in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([line(header), line(tuple("-" * width for width in widths)), *map(line, rows)])
