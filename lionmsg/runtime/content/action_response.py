"""Action response content: a tool result (ADR-0006 D2)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from lionmsg.runtime.content.base import MessageContent
from lionmsg.runtime.content.ids import record_id
from lionmsg.runtime.render.minimal_yaml import minimal_yaml

__all__ = ["ActionResponseBehaviour"]


class ActionResponseBehaviour(MessageContent):
    """The call succeeded exactly when `error is None`."""

    if TYPE_CHECKING:
        # Fields of the generated subclass, from its schema.
        function: str
        arguments: dict[str, Any]
        output: Any
        action_request_id: str | None
        error: str | None
    else:
        __slots__ = ()

    # Linking a request and its response (ADR D2) copies the content, never rebuilds it.
    _PLAIN_NORMALISERS: ClassVar[Mapping[str, Callable[[Any], Any]]] = {"action_request_id": record_id}

    def _normalize(self) -> None:
        if self.arguments is None:  # None is "no arguments", as for a request (and LionAGI)
            self.arguments = {}
        self.action_request_id = record_id(self.action_request_id)

    @property
    def success(self) -> bool:
        return self.error is None

    @property
    def request_id(self) -> str | None:
        """Alias of `action_request_id`."""
        return self.action_request_id

    @property
    def result(self) -> Any:
        """Alias of `output`."""
        return self.output

    def render_summary(self) -> str:
        """One short line for round summaries: "ok", the output, or "error: <message>"."""
        if not self.success:
            return f"error: {self.error or 'unknown'}"
        if self.output is None:
            return "ok"
        if isinstance(self.output, str):
            return self.output
        if isinstance(self.output, dict | list):
            return minimal_yaml(self.output)
        return str(self.output)

    @property
    def rendered(self) -> str:
        # Unlike LionAGI 0.36.0, a failed call shows its error: the model must see that it failed.
        doc: dict[str, Any] = {"Function": self.function, "Arguments": self.arguments, "Output": self.output}
        if self.error is not None:
            doc["Error"] = self.error or "unknown"
        return minimal_yaml(doc).strip()
