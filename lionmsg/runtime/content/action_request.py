"""Action request content: a tool call (ADR-0006 D2)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from lionmsg.runtime.content.base import MessageContent, owned_copy
from lionmsg.runtime.content.ids import record_id
from lionmsg.runtime.fuzzy import fuzzy_dict
from lionmsg.runtime.render.minimal_yaml import minimal_yaml
from lionmsg.runtime.wire import RecordFieldError

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["ActionRequestBehaviour", "function_name"]


def function_name(function: Any) -> str:
    """A callable's `__name__`, an object's `.function`, or the string itself."""
    if callable(function) and isinstance(getattr(function, "__name__", None), str):
        function = function.__name__
    elif hasattr(function, "function"):
        function = function.function
    if not isinstance(function, str):
        if callable(function):  # a partial, an object with __call__: callable, but it names no function
            kind = type(function).__name__
            raise ValueError(f"Function must be a string or callable with a __name__ ({kind} has none): give its name")
        raise ValueError("Function must be a string or callable")
    return function


class ActionRequestBehaviour(MessageContent):
    if TYPE_CHECKING:
        # Fields of the generated subclass, from its schema.
        function: str
        arguments: dict[str, Any]
        action_response_id: str | None
    else:
        __slots__ = ()

    # Linking a request and its response (ADR D2) copies the content, never rebuilds it.
    _PLAIN_NORMALISERS: ClassVar[Mapping[str, Callable[[Any], Any]]] = {"action_response_id": record_id}

    @classmethod
    def _from_input(cls, data: dict[str, Any]) -> Self:
        # The request owns its arguments: later changes to the caller's objects must not leak in (and an
        # update's new content shares none of the old one's).
        if "arguments" in data:
            data["arguments"] = owned_copy(data["arguments"])
        return cls._from_owned(data)

    def _normalize(self) -> None:
        # A refusal names its field (RecordFieldError), so a ValidationError locates it there, as a
        # record's: ("content", "function").
        try:
            self.function = function_name(self.function)
        except ValueError as exc:
            raise RecordFieldError("function", str(exc), self.function) from None
        if not isinstance(self.arguments, dict):
            try:
                self.arguments = fuzzy_dict(self.arguments)
            except ValueError as exc:
                raise RecordFieldError("arguments", str(exc), self.arguments) from None
        self.action_response_id = record_id(self.action_response_id)

    @property
    def rendered(self) -> str:
        return minimal_yaml({"Function": self.function, "Arguments": self.arguments}).strip()

    def render_compact(self) -> str:
        """A call-like one-liner: `search(q='x', n=3)` (text quoted, any other value as `str` shows it, as
        LionAGI writes it: `day=2024-01-02`)."""
        arguments = ", ".join(
            f"{key}={value!r}" if isinstance(value, str) else f"{key}={value}" for key, value in self.arguments.items()
        )
        return f"{self.function or 'unknown'}({arguments})"
