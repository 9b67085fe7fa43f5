"""Action request content: a tool call (ADR-0006 D2)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lionmsg.runtime.content.base import MessageContent
from lionmsg.runtime.content.ids import record_id

__all__ = ["ActionRequestBehaviour"]


class ActionRequestBehaviour(MessageContent):
    if TYPE_CHECKING:
        # Fields of the generated subclass, from its schema.
        function: str
        arguments: dict[str, Any]
        action_response_id: str | None
    else:
        __slots__ = ()

    def _normalize(self) -> None:
        self.action_response_id = record_id(self.action_response_id)
