"""One richly filled message of every class: every field away from its default."""

from __future__ import annotations

from uuid import UUID

from lionmsg import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    MessageRole,
    System,
)

REQUEST_ID = UUID("00000000-0000-4000-8000-0000000000a1")
RESPONSE_ID = UUID("00000000-0000-4000-8000-0000000000a2")
PEER = UUID("11111111-1111-4111-8111-111111111111")
PNG = "data:image/png;base64,iVBORw0KGgo="


class HexSpelledUUID(UUID):
    """A UUID subclass that spells itself as bare hex (the schema's pattern refuses that spelling)."""

    def __str__(self) -> str:
        return self.hex


def rich_messages() -> list[Message]:
    """Six messages, one per class, with non-default content, routing, metadata and embedding."""
    common = {"metadata": {"trace": {"step": 3}, "tags": ["a"]}, "embedding": [0.25, -1.0, 3.0], "channel": "ops"}
    return [
        Message(content={"k": [1, 2], "nested": {"x": None}}, sender=PEER, recipient=None, **common),
        System(content={"system_message": "Be terse.", "system_datetime": "2025-01-01T00:00+00:00"}, **common),
        Instruction(
            content={
                "instruction": "Summarise.",
                "guidance": "One line.",
                "prompt_context": [{"doc": "a"}, "plain", 3],
                "tool_schemas": [{"name": "search", "parameters": {"type": "object"}}],
                "images": [PNG, "https://example.org/cat.png"],
                "image_detail": "low",
            },
            sender=MessageRole.USER,
            recipient=PEER,
            **common,
        ),
        AssistantResponse(
            content={"assistant_response": "Done."},
            metadata={"model_response": {"result": "Done."}},
            sender=PEER,
            embedding=[1.0],
        ),
        ActionRequest(
            id=REQUEST_ID,
            content={"function": "search", "arguments": {"q": "x", "n": 3}, "action_response_id": str(RESPONSE_ID)},
            sender="assistant",
            recipient="tools",
            **common,
        ),
        ActionResponse(
            id=RESPONSE_ID,
            content={
                "function": "search",
                "arguments": {"q": "x", "n": 3},
                "output": {"hits": [1, 2]},
                "action_request_id": str(REQUEST_ID),
            },
            sender="tools",
            recipient="assistant",
            **common,
        ),
    ]


def failed_action_response() -> ActionResponse:
    return ActionResponse(content={"function": "search", "arguments": {}, "error": "timeout"})
