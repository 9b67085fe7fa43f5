"""Assistant response content (ADR-0006 D2)."""

from __future__ import annotations

from lionmsg.runtime.content.base import MessageContent

__all__ = ["AssistantResponseBehaviour"]


class AssistantResponseBehaviour(MessageContent):
    __slots__ = ()
