"""Behaviour of individual message kinds, mixed into the generated classes (their schemas name them
in `x-lionmsg-behaviour`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lionmsg.runtime.addressing import normalize_address
from lionmsg.runtime.content.assistant_response import parse_provider_response
from lionmsg.runtime.content.base import owned_copy

if TYPE_CHECKING:
    from typing_extensions import Self

    from lionmsg.generated.content import ActionRequestContent, ActionResponseContent, AssistantResponseContent

__all__ = ["ActionRequestKind", "ActionResponseKind", "AssistantResponseKind"]


class AssistantResponseKind:
    if TYPE_CHECKING:
        content: AssistantResponseContent
        metadata: dict[str, Any]

        def __init__(self, **data: Any) -> None: ...

    @property
    def response(self) -> str:
        """The normalised display text."""
        return self.content.assistant_response

    @property
    def model_response(self) -> Any:
        """The raw provider response kept in `metadata["model_response"]` ({} when there is none)."""
        return self.metadata.get("model_response", {})

    @classmethod
    def from_response(cls, response: Any, sender: Any = None, recipient: Any = None) -> Self:
        """An AssistantResponse from a provider response in any supported shape (see
        `parse_provider_response`); the raw value goes into `metadata["model_response"]`. Without a
        sender or recipient, the class defaults apply (sender unset, recipient user). The raw value is
        copied, as every input the history keeps: the caller's later changes do not rewrite it."""
        text, raw = parse_provider_response(response)
        raw = owned_copy(raw)
        # Normalised here: a bad address is normalize_address's own ValueError, not a ValidationError.
        routing = {
            key: normalize_address(value)
            for key, value in (("sender", sender), ("recipient", recipient))
            if value is not None
        }
        return cls(content={"assistant_response": text}, metadata={"model_response": raw}, **routing)


class _ActionKind:
    """What both halves of a tool call expose: the function and its arguments."""

    if TYPE_CHECKING:
        content: ActionRequestContent | ActionResponseContent

    @property
    def function(self) -> str:
        return self.content.function

    @property
    def arguments(self) -> dict[str, Any]:
        return self.content.arguments


class ActionRequestKind(_ActionKind):
    if TYPE_CHECKING:
        content: ActionRequestContent

    def is_responded(self) -> bool:
        """Whether a response has been linked (its id is stored in this request)."""
        return self.content.action_response_id is not None


class ActionResponseKind(_ActionKind):
    if TYPE_CHECKING:
        content: ActionResponseContent

    @property
    def output(self) -> Any:
        return self.content.output

    @property
    def success(self) -> bool:
        return self.content.success
