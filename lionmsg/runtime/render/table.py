"""A conversation as a plain-text table: one row per message, for people reading a history.

Used by the demo and by `lionmsg show`. Each row shows the position, role, class, sender → recipient
and the rendered content folded onto one line (an instruction's sections, an image count). A cell never
holds a character a terminal would act on or could not print (a control such as ESC, a line or
paragraph separator, a format character, a lone surrogate): it is written as a JSON escape (`\\u001b`),
and a sender or recipient name holding one is quoted whole as JSON, as `lionmsg validate` quotes ids.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from uuid import UUID

from lionmsg.generated.messages import Message
from lionmsg.generated.roles import MessageRole

__all__ = ["address_label", "cannot_render", "conversation_table", "escape_unprintable"]

_SPACES = re.compile(r"\s+")


def escape_unprintable(text: str, keep: str = "") -> str:
    """`text` with every character that is not printable (`str.isprintable`), other than those in
    `keep`, written as its JSON escape: `\\u001b` for ESC, `\\n`, `\\ud800` for a lone surrogate."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() or char in keep else json.dumps(char)[1:-1] for char in text)


def cannot_render(error: BaseException) -> str:
    """What stands in for the content of a message that cannot render (a history should still print)."""
    return f"<cannot render: {type(error).__name__}: {error}>"


def address_label(address: Any, names: Mapping[UUID, str] | None = None) -> str:
    """A sender or recipient for a person: a known name, a role, a short UUID, `*` for broadcast. A
    name that is not printable (a newline, an escape sequence) is quoted as JSON."""
    if address is None:
        return "*"
    if isinstance(address, MessageRole):
        return address.value
    label = (names or {}).get(address, str(address)[:8]) if isinstance(address, UUID) else str(address)
    return label if label.isprintable() else json.dumps(label)


def _summary(message: Message) -> str:
    try:
        rendered = message.rendered
    except Exception as error:  # a table of a broken history should still print: say what broke
        return escape_unprintable(_SPACES.sub(" ", cannot_render(error)))
    if isinstance(rendered, list):  # text then image parts
        texts = [part.get("text", "") for part in rendered if isinstance(part, dict) and part.get("type") == "text"]
        images = sum(1 for part in rendered if isinstance(part, dict) and part.get("type") == "image_url")
        rendered = " ".join(texts) + (f" [+{images} image{'s' if images != 1 else ''}]" if images else "")
    return escape_unprintable(_SPACES.sub(" ", str(rendered)).strip())


def _fit(text: str, width: int, ellipsis: str = "…") -> str:
    return text if len(text) <= width else text[: width - len(ellipsis)] + ellipsis


def _ascii(text: str) -> str:
    return text.encode("ascii", "backslashreplace").decode("ascii")


def conversation_table(
    messages: Iterable[Message],
    names: Mapping[UUID, str] | None = None,
    content_width: int = 76,
    *,
    ascii_only: bool = False,
) -> str:
    """The messages, in the given order, as an aligned table (no trailing newline). `ascii_only` (for an
    output that cannot encode more, an ASCII terminal) draws `->` and `...` and writes other non-ASCII
    characters as backslash escapes before the columns are measured, so they stay aligned."""
    arrow, ellipsis, cell = (" -> ", "...", _ascii) if ascii_only else (" → ", "…", str)
    header = ("#", "role", "class", f"from{arrow}to", "content")
    rows = [
        (
            str(index),
            message.role.value,
            type(message).__name__,
            cell(address_label(message.sender, names)) + arrow + cell(address_label(message.recipient, names)),
            _fit(cell(_summary(message)), content_width, ellipsis),
        )
        for index, message in enumerate(messages)
    ]
    table = [header, *rows]
    widths = [max(len(row[column]) for row in table) for column in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([line(header), line(tuple("-" * width for width in widths)), *map(line, rows)])
