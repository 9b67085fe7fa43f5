"""How an instruction asks for a structured response: the ResponseSchema and ResponseFormat sections.

A structure class takes the response format (a JSON object, or a pydantic model class) in its
constructor and offers `schema()` (the JSON Schema shown as ResponseSchema, or None) and `render()`
(the ResponseFormat text). `JsonStructure` is the default; pass another class as
`InstructionContent(structure=...)` to change the wording. The wording is lionmsg's own. A structure
class written for LionAGI (`is_dict_mode`, `request_schema()` giving a model class, `render()`) works
as it does there: see `response_schema`.
"""

from __future__ import annotations

import json
import weakref
from typing import Any

from pydantic import BaseModel

from lionmsg.runtime.wire import RecordFieldError

__all__ = ["JsonStructure", "build_structure", "resolve_structure", "response_schema"]


class JsonStructure:
    """Ask for one JSON object: shows the model's JSON Schema (for a model class) and an example."""

    def __init__(self, response_format: type[BaseModel] | dict[str, Any]) -> None:
        self.response_format = response_format
        self.is_dict_mode = isinstance(response_format, dict)

    def schema(self) -> dict[str, Any] | None:
        if isinstance(self.response_format, dict):
            return None
        return self.response_format.model_json_schema()

    def example(self) -> dict[str, Any]:
        """The shape to reply with: the dict as given, or each model field with its JSON type."""
        if isinstance(self.response_format, dict):
            return self.response_format
        properties = self.response_format.model_json_schema().get("properties", {})
        return {name: spec.get("type", "any") for name, spec in properties.items()}

    def render(self) -> str:
        """The ResponseFormat text; empty (no section) for a model without fields, whose example would be
        `{}`: an empty dict format renders none either, as in LionAGI (the model's ResponseSchema stays)."""
        shape = self.example()
        if not shape:
            return ""
        example = json.dumps(shape, ensure_ascii=False, default=str)
        return f"Reply with one JSON object of this shape, in a ```json code block:\n```json\n{example}\n```"


def response_schema(structure: Any) -> Any:
    """What a structure shows as ResponseSchema: its `schema()`; for a class with LionAGI's protocol instead
    (`request_schema()`, no `schema()`), the JSON Schema of the model `request_schema()` gives, none in
    dict mode, as LionAGI shows it. A class with neither fails here (an AttributeError: the message
    then renders to no chat message)."""
    kind = type(structure)
    if hasattr(kind, "schema") or not hasattr(kind, "request_schema"):
        return structure.schema()
    if structure.is_dict_mode:
        return None
    return structure.request_schema().model_json_schema()


def resolve_structure(structure: Any) -> Any:
    """None, "json" and every other string select JsonStructure; a class is used as given."""
    if structure is None or isinstance(structure, str):
        return JsonStructure
    if isinstance(structure, type):
        return structure
    # A RecordFieldError (a ValueError) names the field, so a ValidationError locates it there.
    raise RecordFieldError(
        "structure", f"structure must be None, a string or a class, got {type(structure).__name__}", structure
    )


def _with_json_schema(model: type[BaseModel], given: Any) -> type[BaseModel]:
    """`model` (the class of `given`, the response format, or `given` itself), once it is known to
    have a JSON Schema: one it cannot give (a field of an arbitrary type) would fail every rendering of
    the message and every projection of its history, so it is refused when the content is built. Each
    class is asked once."""
    if model not in _SCHEMA_GIVEN:
        try:
            model.model_json_schema()
        except Exception as error:  # pydantic's PydanticInvalidForJsonSchema, or a user's schema hook
            message = f"response_format {model.__name__} has no JSON Schema to show: {error}"
            raise RecordFieldError("response_format", message, given) from None
        _SCHEMA_GIVEN.add(model)
    return model


_SCHEMA_GIVEN: weakref.WeakSet[type[BaseModel]] = weakref.WeakSet()


def build_structure(structure_cls: Any, response_format: Any) -> Any:
    """The structure instance for a response format, or None without one."""
    if response_format is None:
        return None
    if isinstance(response_format, BaseModel):
        return structure_cls(_with_json_schema(type(response_format), response_format))
    if isinstance(response_format, type) and issubclass(response_format, BaseModel):
        return structure_cls(_with_json_schema(response_format, response_format))
    if isinstance(response_format, dict):
        return structure_cls(response_format)
    raise RecordFieldError(
        "response_format",
        "response_format must be a dict, a pydantic model class or a pydantic model instance, "
        f"got {type(response_format).__name__}",
        response_format,
    )
