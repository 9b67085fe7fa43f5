"""Assistant response content and the normalisation of provider responses (ADR-0006 D2)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from lionmsg.runtime.content.base import MessageContent

__all__ = ["AssistantResponseBehaviour", "parse_provider_response"]


class AssistantResponseBehaviour(MessageContent):
    if TYPE_CHECKING:
        # Fields of the generated subclass, from its schema.
        assistant_response: str
    else:
        __slots__ = ()

    @property
    def response(self) -> str:
        """Alias of `assistant_response`."""
        return self.assistant_response

    @property
    def rendered(self) -> str:
        return self.assistant_response


def parse_provider_response(response: Any) -> tuple[str, Any]:
    """The display text of a provider response and the raw value to keep in `metadata["model_response"]`.

    Text comes from a string; `content` (a string, strings, or typed blocks of type "text");
    OpenAI `choices` (`message` or `delta`, a list or a single choice); Responses-API `output`
    items of type "message" (their "output_text" parts); or `result`. The first of those keys present
    in a dict wins. A list is a sequence of responses. Fragments join with no delimiter. A pydantic
    model is read (and kept) as its dump.
    """
    items = response if isinstance(response, list) else [response]
    texts: list[str] = []
    raw: list[Any] = []
    for item in items:
        if isinstance(item, BaseModel):
            item = item.model_dump(exclude_none=True, exclude_unset=True)
        raw.append(item)
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, dict):
            texts.extend(_dict_texts(item))
    return "".join(texts), raw[0] if len(raw) == 1 else raw


def _dict_texts(item: dict[str, Any]) -> list[str]:
    if "content" in item:
        return [text for block in _listed(item["content"]) for text in _block_text(block, "text")]
    if "choices" in item:
        texts = []
        for choice in _listed(item["choices"]):
            part = choice.get("message") or choice.get("delta") if isinstance(choice, dict) else None
            content = part.get("content") if isinstance(part, dict) else None
            if isinstance(content, str):
                texts.append(content)
            else:  # content parts (or one part alone), as OpenAI-compatible servers may send
                texts.extend(text for block in _listed(content) for text in _block_text(block, "text"))
        return texts
    if "output" in item:
        return [
            text
            for output in _listed(item["output"])
            if isinstance(output, dict) and output.get("type") == "message"
            for block in _listed(output.get("content"))
            for text in _block_text(block, "output_text")
        ]
    if "result" in item:
        result = item["result"]
        if result is None:
            return []
        if isinstance(result, str):
            return [result]
        try:
            return [json.dumps(result, ensure_ascii=False, default=str, allow_nan=False)]
        except ValueError as exc:  # what no record could keep either (as model_response)
            raise ValueError(f"a provider response's result holds a number JSON cannot write: {exc}") from None
    return []


def _listed(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _block_text(block: Any, text_type: str) -> list[str]:
    if isinstance(block, str):
        return [block]
    if isinstance(block, dict) and block.get("type") == text_type and isinstance(block.get("text"), str):
        return [block["text"]]
    return []
