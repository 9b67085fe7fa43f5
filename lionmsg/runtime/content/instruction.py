"""Instruction content: a user turn (ADR-0006 D2)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lionmsg.runtime.content.base import MessageContent

__all__ = ["InstructionBehaviour"]


class InstructionBehaviour(MessageContent):
    if TYPE_CHECKING:
        # Fields of the generated subclass, from its schema.
        instruction: str | None
        guidance: str | None
        prompt_context: list[Any]
        plain_content: str | None
        tool_schemas: list[dict[str, Any]]
        response_format: Any
        images: list[str]
        image_detail: str | None
        structure: Any
        _structure_instance: Any
    else:
        __slots__ = ()

    def _normalize(self) -> None:
        # Python callers may pass None for a list: it means "none".
        for name in ("prompt_context", "tool_schemas", "images"):
            if getattr(self, name) is None:
                setattr(self, name, [])
