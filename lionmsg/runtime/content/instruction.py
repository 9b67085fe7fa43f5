"""Instruction content: a user turn (ADR-0006 D2)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from lionmsg.runtime.content.base import MessageContent, owned_copy
from lionmsg.runtime.content.images import image_problem, image_url
from lionmsg.runtime.content.lazylists import NOT_MADE, NotMade
from lionmsg.runtime.content.structure import JsonStructure, build_structure, resolve_structure, response_schema
from lionmsg.runtime.render.minimal_yaml import minimal_yaml
from lionmsg.runtime.wire import RecordFieldError

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["InstructionBehaviour"]

_HANDLE_CONTEXT = ("extend", "replace")
_TEXT_AND_CONTEXT = frozenset({"instruction", "guidance", "plain_content", "context"})


def _as_list(value: Any) -> list[Any]:
    """A list as given (copied); None as no items; any other value as a one-item list."""
    if type(value) is list or isinstance(value, list):
        return list(value)
    return [] if value is None else [value]


def _flat_tool_schemas(value: Any) -> list[Any]:
    # A flat list stays flat, the {"tools": [...]} wrapper tool managers emit is unwrapped, and a
    # single schema becomes a one-item list.
    if isinstance(value, dict) and "tools" in value:
        value = value["tools"]
    return _as_list(value)


class InstructionBehaviour(MessageContent):
    """Context handling, tool schema flattening, response formats, image checks and rendering.

    `from_dict` (and so `Instruction(content={...})` and `update()`) also takes `context` (the
    compatibility name of `prompt_context`) with `handle_context`: "extend" (default) appends it to
    any `prompt_context`, "replace" replaces it.
    """

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
        # The slots of the lazy list fields (lionmsg.runtime.content.lazylists): NOT_MADE while empty.
        _raw_prompt_context: list[Any] | NotMade
        _raw_tool_schemas: list[dict[str, Any]] | NotMade
        _raw_images: list[str] | NotMade
        _CHOICES: ClassVar[dict[str, frozenset[Any]]]  # the schema's enums (generated)
    else:
        __slots__ = ()

    _INPUT_ALIASES = frozenset({"context", "handle_context"})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        # Text and a context (a list, or one record), as an instruction is usually given: the text-only
        # road of MessageContent.from_dict with a copy of the context put in, as _from_input would.
        if type(data) is dict and "context" in data and data.keys() <= _TEXT_AND_CONTEXT:
            context = data["context"]
            if type(context) is dict:
                context = [context]
            texts = {}
            for name, value in data.items():
                if name != "context":
                    if type(value) is not str and value is not None:  # not text: the general road's
                        context = None
                    texts[name] = value
            if type(context) is list:
                made = cls._new_with_plain(texts)
                if made is not None:
                    made._raw_prompt_context = owned_copy(context) or NOT_MADE
                    return made
        return super().from_dict(data)

    @classmethod
    def _from_input(cls, data: dict[str, Any]) -> Self:
        handle_context = data.pop("handle_context", "extend")
        if handle_context not in _HANDLE_CONTEXT:
            raise RecordFieldError(
                "handle_context", "handle_context must be either 'extend' or 'replace'", handle_context
            )
        if "context" in data:
            context = data.pop("context")
            if type(context) is not list:  # a list is taken as it is: _normalize() copies prompt_context
                context = _as_list(context)
            if handle_context == "extend" and data.get("prompt_context") is not None:
                context = _as_list(data["prompt_context"]) + context
            data["prompt_context"] = context
        if data.get("images") and data.get("image_detail") is None:
            data["image_detail"] = "auto"
        return cls._from_owned(data)

    def _plain_changes_keep_the_rest(self) -> bool:
        # _from_input gives images without a detail "auto" (LionAGI's from_dict rule): content loaded
        # from a record keeps null, and a rebuild would fill it in.
        return not (self._raw_images and self.image_detail is None)

    @classmethod
    def _record_field_error(cls, field: str, message: str, value: Any) -> RecordFieldError:
        # The schema's image rule recited is three patterns long: name the image and why, as building
        # the content does (image_problem gives the schema's verdict on each reference).
        if field == "images" and type(value) is list:
            for index, ref in enumerate(value):
                problem = image_problem(ref)
                if problem is not None:
                    return RecordFieldError("images", f"InstructionContent.images[{index}]: {problem}", ref)
        return super()._record_field_error(field, message, value)

    def _normalize(self) -> None:
        # Lists, the usual values (and all a record holds), are copied without the helpers' calls; an
        # empty one is left unmade (NOT_MADE, as it may be already: see lazylists).
        context, schemas, images = self._raw_prompt_context, self._raw_tool_schemas, self._raw_images
        if context is not NOT_MADE:
            self._raw_prompt_context = (list(context) if type(context) is list else _as_list(context)) or NOT_MADE
        if schemas is not NOT_MADE:
            schemas = list(schemas) if type(schemas) is list else _flat_tool_schemas(schemas)
            self._raw_tool_schemas = schemas or NOT_MADE
        if images is not NOT_MADE:
            self._raw_images = images = (list(images) if type(images) is list else _as_list(images)) or NOT_MADE
        for index, ref in enumerate(images):
            problem = image_problem(ref)
            if problem is not None:
                raise RecordFieldError("images", f"InstructionContent.images[{index}]: {problem}", ref)
        structure = self.structure
        # Their refusals name their fields (RecordFieldError), as the images' do; a structure class's own
        # error is left as it raised it.
        self.structure = JsonStructure if structure is None else resolve_structure(structure)
        self._derive()

    def _derive(self) -> None:
        # Built with the content, so a structure class that rejects the format fails there; kept with
        # the class and format it was built from (see _structure).
        response_format = self.response_format
        if response_format is None:  # the usual case: nothing to build or remember
            self._structure_instance = None
        else:
            # Resolved here too: the text-only rebuild (_with_plain_changes) reaches this without
            # _normalize, and `structure` may have been set in place to None, "json" or a wrong value.
            structure = self.structure
            resolved = JsonStructure if structure is None else resolve_structure(structure)
            self._structure_instance = (structure, response_format, build_structure(resolved, response_format))

    def _structure(self) -> Any:
        """The structure instance for the current `structure` and `response_format`: rebuilt when either
        was reassigned since it was built, so rendering never shows a format the content no longer has
        (a change inside a dict format shows anyway: the instance holds the dict itself)."""
        response_format = self.response_format
        if response_format is None:
            return None  # (an empty format renders nothing by the default structure; a structure class decides)
        structure, cached = self.structure, self._structure_instance
        if cached is not None and cached[0] is structure and cached[1] is response_format:
            return cached[2]
        resolved = JsonStructure if structure is None else resolve_structure(structure)
        built = build_structure(resolved, response_format)
        self._structure_instance = (structure, response_format, built)
        return built

    @property
    def rendered(self) -> str | list[dict[str, Any]]:
        """The prompt text; with images, a provider-neutral list: one text part, then image parts."""
        text = self._text()
        images = self._raw_images  # read, not made: rendering changes nothing
        if not images:
            return text
        detail = self.image_detail or "auto"
        allowed = self._CHOICES["image_detail"]  # assigned since construction, perhaps: checked again
        if detail not in allowed:
            named = ", ".join(sorted(str(value) for value in allowed if value is not None))
            raise ValueError(f"InstructionContent.image_detail {detail!r} is not one of {named}")
        parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
        parts.extend({"type": "image_url", "image_url": {"url": _sendable(ref), "detail": detail}} for ref in images)
        return parts

    def _text(self) -> str:
        if self.plain_content:
            return self.plain_content
        structure = self._structure()
        context, schemas = self._raw_prompt_context, self._raw_tool_schemas  # read, not made
        sections: dict[str, Any] = {
            "Guidance": self.guidance,
            "Instruction": self.instruction,
            "Context": None if context is NOT_MADE else context,
            "Tools": None if schemas is NOT_MADE else schemas,
            "ResponseSchema": None if structure is None else response_schema(structure),
            "ResponseFormat": None if structure is None else structure.render(),
        }
        shown = {name: value for name, value in sections.items() if value not in (None, "", [], {})}
        return minimal_yaml(shown).strip()


def _sendable(ref: Any) -> str:
    """The URL a provider gets for an image, checked again: the content's lists and fields can be
    changed in place after it was built (`content.images.append(...)`), and a file:// URL or any
    other broken reference must never reach a provider."""
    problem = image_problem(ref)
    if problem is not None:
        raise ValueError(f"InstructionContent.images: {problem}")
    return image_url(ref)
