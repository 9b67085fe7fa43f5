"""Instruction content (ADR-0006 D2): context, tool schemas, response formats, structures, rendering."""

from __future__ import annotations

import re
from collections import OrderedDict
from datetime import datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import to_jsonable_python

from lionmsg import Instruction, InstructionContent, Message, MessageManager
from lionmsg.runtime.content.structure import JsonStructure
from lionmsg.runtime.manager import INVALID_PROGRESSION
from lionmsg.runtime.wire import RecordFieldError
from tests.conftest import fields_of


class Answer(BaseModel):
    answer: str
    score: int


TOOL = {"name": "search", "parameters": {"type": "object"}}


# -- context --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("context", "stored"),
    [
        ("a", ["a"]),
        ({"k": 1}, [{"k": 1}]),
        (5, [5]),
        ((1, 2), [(1, 2)]),
        (None, []),
        ([1, "two"], [1, "two"]),
    ],
)
def test_context_is_the_input_name_of_prompt_context_and_scalars_are_wrapped(context: Any, stored: list[Any]) -> None:
    assert InstructionContent.from_dict({"context": context}).prompt_context == stored
    assert Instruction(content={"context": context}).content.prompt_context == stored


def test_context_list_is_copied() -> None:
    source = [1]
    content = InstructionContent.from_dict({"context": source})
    source.append(2)
    assert content.prompt_context == [1]


def test_the_constructor_copies_context_tool_schemas_and_response_format_all_the_way_down() -> None:
    context: list[Any] = [{"doc": {"pages": [1]}}]
    schemas: list[Any] = [{"name": "search", "parameters": {"required": ["q"]}}]
    response_format: dict[str, Any] = {"answer": {"type": "string"}}
    content = InstructionContent(
        instruction="i", prompt_context=context, tool_schemas=schemas, response_format=response_format
    )
    context[0]["doc"]["pages"].append(2)
    schemas[0]["parameters"]["required"].append("n")
    response_format["answer"]["type"] = "number"
    assert content.prompt_context == [{"doc": {"pages": [1]}}]
    assert content.tool_schemas == [{"name": "search", "parameters": {"required": ["q"]}}]
    assert content.response_format == {"answer": {"type": "string"}}


class _Verdict(BaseModel):
    reasons: list[str] = []


def test_the_constructor_copies_a_response_format_of_any_mapping_type_or_a_model_and_keeps_a_class() -> None:
    # Review an F2: only an exact dict was copied; an OrderedDict or a model stayed the caller's object.
    ordered = OrderedDict(type="object", required=["a"])
    model = _Verdict(reasons=["r"])
    by_ordered = InstructionContent(instruction="i", response_format=ordered)
    by_model = InstructionContent(instruction="i", response_format=model)
    ordered["required"].append("b")
    model.reasons.append("s")
    assert type(by_ordered.response_format) is OrderedDict
    assert by_ordered.response_format == {"type": "object", "required": ["a"]}
    assert type(by_model.response_format) is _Verdict
    assert by_model.response_format.reasons == ["r"]
    assert InstructionContent(instruction="i", response_format=_Verdict).response_format is _Verdict


def test_handle_context_extend_and_replace() -> None:
    both = {"prompt_context": ["old"], "context": "new"}
    assert InstructionContent.from_dict(both).prompt_context == ["old", "new"]
    assert InstructionContent.from_dict({**both, "handle_context": "extend"}).prompt_context == ["old", "new"]
    assert InstructionContent.from_dict({**both, "handle_context": "replace"}).prompt_context == ["new"]


@pytest.mark.parametrize("bad", ["append", "", None, "EXTEND"])
def test_any_other_handle_context_is_a_value_error(bad: Any) -> None:
    with pytest.raises(ValueError, match="handle_context must be either 'extend' or 'replace'"):
        InstructionContent.from_dict({"context": "x", "handle_context": bad})
    with pytest.raises(ValueError, match="handle_context must be either 'extend' or 'replace'"):
        InstructionContent.from_dict({"handle_context": bad})


def test_update_context_follows_handle_context() -> None:
    message = Instruction(content={"instruction": "q", "context": ["x"]})
    message.update(context=["y"])
    assert message.content.prompt_context == ["x", "y"]
    message.update(context="z", handle_context="extend")
    assert message.content.prompt_context == ["x", "y", "z"]
    message.update(context=["w"], handle_context="replace")
    assert message.content.prompt_context == ["w"]
    message.update(prompt_context=["v"])
    assert message.content.prompt_context == ["v"]


def test_update_with_bad_handle_context_changes_nothing() -> None:
    message = Instruction(content={"instruction": "q", "context": ["x"]}, sender="alice")
    before, content = fields_of(message), message.content
    with pytest.raises(ValueError, match="handle_context must be either 'extend' or 'replace'"):
        message.update(sender="bob", context=["y"], handle_context="merge")
    assert fields_of(message) == before
    assert message.content is content
    assert content.prompt_context == ["x"]


# -- tool schemas ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ([TOOL, TOOL], [TOOL, TOOL]),
        ({"tools": [TOOL]}, [TOOL]),
        ({"tools": TOOL}, [TOOL]),
        (TOOL, [TOOL]),
        (None, []),
        ([], []),
    ],
)
def test_tool_schemas_are_stored_flat(given: Any, stored: list[Any]) -> None:
    assert InstructionContent.from_dict({"tool_schemas": given}).tool_schemas == stored
    assert InstructionContent(tool_schemas=given).tool_schemas == stored


@pytest.mark.parametrize("bad", ["search", [1], [TOOL, "x"], {"tools": ["x"]}])
def test_tool_schemas_must_be_objects(bad: Any) -> None:
    with pytest.raises(ValueError, match="tool_schemas must be an array of items that are each an object"):
        InstructionContent(tool_schemas=bad)


# -- response format and structure ----------------------------------------------------------------


def test_dict_response_format_is_kept_in_records() -> None:
    content = InstructionContent(instruction="q", response_format={"answer": "str"})
    assert content.to_dict() == {"instruction": "q", "response_format": {"answer": "str"}}
    assert content.structure is JsonStructure
    assert isinstance(content._structure(), JsonStructure)
    assert content._structure().is_dict_mode


@pytest.mark.parametrize("response_format", [Answer, Answer(answer="a", score=1)], ids=["class", "instance"])
def test_model_response_formats_are_python_only(response_format: Any) -> None:
    content = InstructionContent(instruction="q", response_format=response_format)
    if isinstance(response_format, type):
        assert content.response_format is response_format
    else:  # a copy, as every other road makes (from_dict, the message's content dict, add_message)
        assert content.response_format == response_format
        assert content.response_format is not response_format
    assert content.to_dict() == {"instruction": "q"}
    structure = content._structure()
    assert isinstance(structure, JsonStructure)
    assert structure.response_format is Answer
    assert not structure.is_dict_mode
    assert "response_format" not in Instruction(content=content).to_dict()["content"]


def test_model_response_format_survives_update_and_clone() -> None:
    message = Instruction(content={"instruction": "q", "response_format": Answer})
    message.update(guidance="g")
    assert message.content.response_format is Answer
    assert message.content._structure() is not None
    assert message.clone().content.response_format is Answer


def test_dict_response_format_survives_update() -> None:
    message = Instruction(content={"instruction": "q", "response_format": {"a": "int"}})
    message.update(guidance="g", context=["c"])
    assert message.content.response_format == {"a": "int"}
    assert Message.from_dict(message.to_dict()).content.response_format == {"a": "int"}


@pytest.mark.parametrize("bad", ["json", [1], 5, int])
def test_other_response_formats_are_rejected(bad: Any) -> None:
    with pytest.raises(ValueError, match="response_format must be a dict, a pydantic model class or a pydantic model"):
        InstructionContent(response_format=bad)


class Bullets:
    """A custom structure: shows the format as a bullet list, no schema."""

    def __init__(self, response_format: Any) -> None:
        self.response_format = response_format

    def schema(self) -> None:
        return None

    def render(self) -> str:
        fields = self.response_format if isinstance(self.response_format, dict) else self.response_format.model_fields
        return "\n".join(f"- {name}" for name in fields)


@pytest.mark.parametrize("structure", [None, "json", "lndl", "anything"])
def test_none_and_every_string_resolve_to_the_json_structure(structure: Any) -> None:
    content = InstructionContent(structure=structure, response_format={"a": 1})
    assert content.structure is JsonStructure
    assert isinstance(content._structure(), JsonStructure)


def test_a_structure_class_is_used_directly_and_instantiated_only_with_a_response_format() -> None:
    assert InstructionContent(structure=Bullets).structure is Bullets
    assert InstructionContent(structure=Bullets)._structure() is None
    assert InstructionContent()._structure() is None
    with_format = InstructionContent(structure=Bullets, response_format=Answer)
    assert isinstance(with_format._structure(), Bullets)
    assert with_format.rendered == "ResponseFormat: |-\n  - answer\n  - score"


def test_a_structure_must_be_a_class_or_a_string() -> None:
    with pytest.raises(ValueError, match="structure must be None, a string or a class"):
        InstructionContent(structure=5)


class _FormatRefused(ValueError):
    """A user's structure class's own error."""


class _RefusingStructure:
    """A user's structure class that refuses every format, with its own error."""

    def __init__(self, response_format: Any) -> None:
        raise _FormatRefused("this structure takes no format")


def test_a_structure_classs_own_error_reaches_the_caller_as_it_raised_it() -> None:
    # Review cu 3: a broad `except ValueError` turned it into the library's RecordFieldError, its frame hidden.
    with pytest.raises(_FormatRefused, match=r"^this structure takes no format$") as raised:
        InstructionContent(structure=_RefusingStructure, response_format={"a": 1})
    assert type(raised.value) is _FormatRefused
    assert any(entry.name == "__init__" for entry in raised.traceback)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("response_format", 5, "response_format must be a dict"), ("structure", 5, "structure must be None")],
)
def test_a_format_or_structure_changed_in_place_is_refused_at_its_field_by_every_rebuild(
    field: str, value: Any, message: str
) -> None:
    # Review cu 8: the text-only shortcut of updated() rebuilt the structure outside the field's refusal.
    content = InstructionContent.from_dict({"instruction": "x", "response_format": {"a": 1}})
    setattr(content, field, value)
    for rebuild in (lambda: content.updated(instruction="y"), lambda: content.updated(context=[1])):
        with pytest.raises(RecordFieldError, match=f"^{message}") as raised:
            rebuild()
        assert raised.value.field == field


@pytest.mark.parametrize("structure", [None, "json"])
def test_a_structure_set_in_place_to_a_name_is_resolved_by_every_rebuild(structure: Any) -> None:
    # Review cv 1: the text-only rebuild handed the raw value to the structure step (None is no class).
    content = InstructionContent.from_dict({"instruction": "x", "response_format": {"a": 1}})
    content.structure = structure
    for rebuilt in (content.updated(instruction="y"), content.updated(context=[1])):
        assert isinstance(rebuilt._structure(), JsonStructure)
        assert "ResponseFormat" in rebuilt.rendered


def test_a_model_instance_without_a_json_schema_is_the_input_its_refusal_names() -> None:
    # Review cv 3: the refusal named the instance's class as the value given.
    given = _NoSchema(held=_Opaque())
    with pytest.raises(ValidationError) as raised:
        Instruction(content={"response_format": given})
    (error,) = raised.value.errors(include_url=False)
    assert error["loc"] == ("content", "response_format")
    assert type(error["input"]) is _NoSchema  # the content's own copy of the instance given, not its class


# -- rendering ------------------------------------------------------------------------------------


def test_sections_render_in_order_through_minimal_yaml() -> None:
    content = InstructionContent.from_dict(
        {"instruction": "Do X", "guidance": "Be brief", "context": [{"k": "v"}, "s"], "tool_schemas": [{"name": "f"}]}
    )
    assert content.rendered == "Guidance: Be brief\nInstruction: Do X\nContext:\n- k: v\n- s\nTools:\n- name: f"


def test_empty_sections_are_left_out() -> None:
    assert InstructionContent(instruction="Only this").rendered == "Instruction: Only this"
    assert InstructionContent(instruction="x", guidance="", prompt_context=[]).rendered == "Instruction: x"
    assert InstructionContent().rendered == "{}"


def test_plain_content_wins_when_non_empty() -> None:
    content = InstructionContent(instruction="q", guidance="g", plain_content="PLAIN", response_format=Answer)
    assert content.rendered == "PLAIN"
    assert InstructionContent(instruction="q", plain_content="").rendered == "Instruction: q"


def test_dict_response_format_renders_a_format_section_only() -> None:
    rendered = InstructionContent(instruction="q", response_format={"answer": "str"}).rendered
    assert rendered == (
        "Instruction: q\nResponseFormat: |-\n"
        "  Reply with one JSON object of this shape, in a ```json code block:\n"
        '  ```json\n  {"answer": "str"}\n  ```'
    )


def test_an_empty_dict_response_format_is_kept_but_renders_no_section_as_in_lionagi() -> None:
    content = InstructionContent(instruction="q", response_format={})
    assert (content.rendered, content.to_dict()) == ("Instruction: q", {"instruction": "q", "response_format": {}})
    content.response_format["answer"] = "str"  # filled in place: the format shows from then on
    assert content.rendered == InstructionContent(instruction="q", response_format={"answer": "str"}).rendered


def test_model_response_format_renders_its_schema_and_format() -> None:
    rendered = InstructionContent(instruction="q", response_format=Answer).rendered
    assert isinstance(rendered, str)
    assert rendered.startswith("Instruction: q\nResponseSchema:\n  properties:\n    answer:\n")
    assert "  title: Answer\n" in rendered
    assert rendered.endswith('  ```json\n  {"answer": "string", "score": "integer"}\n  ```')


class _NoFields(BaseModel):
    pass


@pytest.mark.parametrize("response_format", [_NoFields, _NoFields()], ids=["class", "instance"])
def test_a_model_without_fields_shows_its_schema_and_no_format_section_as_in_lionagi(response_format: Any) -> None:
    # Its example would be `{}`, which an empty dict format does not show either.
    content = InstructionContent(instruction="q", response_format=response_format)
    assert content.rendered == "Instruction: q\nResponseSchema:\n  title: _NoFields\n  type: object"
    assert JsonStructure(_NoFields).render() == ""


def test_images_turn_the_rendering_into_text_and_image_parts() -> None:
    png = "data:image/png;base64,iVBORw0KGgo="
    content = InstructionContent(instruction="Look", images=[png, "https://example.org/a.png", "iVBORw0KGgo="])
    assert content.rendered == [
        {"type": "text", "text": "Instruction: Look"},
        {"type": "image_url", "image_url": {"url": png, "detail": "auto"}},
        {"type": "image_url", "image_url": {"url": "https://example.org/a.png", "detail": "auto"}},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,iVBORw0KGgo=", "detail": "auto"}},
    ]
    low = InstructionContent(instruction="Look", images=[png], image_detail="low").rendered
    assert isinstance(low, list)
    assert low[1]["image_url"]["detail"] == "low"
    assert Instruction(content={"images": [png]}).content.image_detail == "auto"
    assert Instruction(content={"instruction": "Look", "images": [png]}).chat_msg == {
        "role": "user",
        "content": Instruction(content={"instruction": "Look", "images": [png]}).rendered,
    }


def test_no_stale_rendering_after_in_place_mutation() -> None:
    message = Instruction(content={"instruction": "one"})
    assert message.chat_msg == {"role": "user", "content": "Instruction: one"}
    message.content.instruction = "two"
    message.content.prompt_context.append("ctx")
    assert message.chat_msg == {"role": "user", "content": "Instruction: two\nContext:\n- ctx"}


def test_records_reject_python_conveniences() -> None:
    record = Instruction(content={"instruction": "q"}).to_dict()
    for content in ({"context": ["x"]}, {"tool_schemas": {"tools": []}}, {"prompt_context": "x"}):
        with pytest.raises(ValidationError):
            Message.from_dict({**record, "content": content})


class _Model(BaseModel):
    answer: str


@pytest.mark.parametrize("later", [None, {"b": 2}, _Model])
@pytest.mark.parametrize("first", [None, {"a": 1}])
def test_reassigning_the_response_format_renders_what_a_reload_renders(first: Any, later: Any) -> None:
    # design.md 6.12: rendering never serves a stale value after in-place mutation of content.
    message = Instruction(content={"instruction": "q", "response_format": first})
    assert ("ResponseFormat" in message.rendered) == (first is not None)  # rendered with the first format
    message.content.response_format = later
    fresh = Instruction(content={"instruction": "q", "response_format": later})
    assert message.rendered == fresh.rendered
    if isinstance(later, dict):
        assert Instruction.from_dict(message.to_dict()).rendered == message.rendered


def test_reassigning_the_structure_class_renders_with_the_new_one() -> None:
    message = Instruction(content={"instruction": "q", "response_format": {"a": 1}})
    assert "- a" not in message.rendered
    message.content.structure = Bullets
    assert (
        message.rendered
        == Instruction(content={"instruction": "q", "response_format": {"a": 1}, "structure": Bullets}).rendered
    )


class _StructureWithoutSchema:
    """A structure class with neither lionmsg's `schema()` nor LionAGI's `request_schema()`."""

    def __init__(self, response_format: Any) -> None:
        self.response_format = response_format

    def render(self) -> str:
        return "x"


class _Answer(BaseModel):
    score: int


class _LionagiStyleStructure:
    """A structure class written for LionAGI: `is_dict_mode`, `request_schema()` (a model class), `render()`."""

    def __init__(self, response_format: Any) -> None:
        self.is_dict_mode = isinstance(response_format, dict)

    def request_schema(self) -> type[BaseModel]:
        return _Answer

    def render(self) -> str:
        return "RETURN JSON"


def test_a_structure_class_written_for_lionagi_renders_as_lionagi_renders_it() -> None:
    # LionAGI 0.36.0's text for the same class (bench/.venv-bench, compared by hand): the model's JSON
    # Schema as ResponseSchema unless in dict mode, then the class's own ResponseFormat.
    in_dict_mode = Instruction(
        content={"instruction": "x", "response_format": {"a": 1}, "structure": _LionagiStyleStructure}
    )
    assert in_dict_mode.rendered == "Instruction: x\nResponseFormat: RETURN JSON"
    with_a_model = Instruction(
        content={"instruction": "x", "response_format": _Answer, "structure": _LionagiStyleStructure}
    )
    assert with_a_model.rendered == (
        "Instruction: x\nResponseSchema:\n  properties:\n    score:\n      title: Score\n      type: integer\n"
        "  required:\n  - score\n  title: _Answer\n  type: object\nResponseFormat: RETURN JSON"
    )


def test_a_structure_class_renders_its_own_section_for_an_empty_format_as_in_lionagi() -> None:
    # Only the default structure renders nothing for `{}`: a class written for LionAGI is asked, as LionAGI
    # asks it (LionAGI 0.36.0 gives this very text; review be F1: the class was skipped).
    content = {"instruction": "x", "response_format": {}, "structure": _LionagiStyleStructure}
    assert Instruction(content=content).rendered == "Instruction: x\nResponseFormat: RETURN JSON"
    assert Instruction(content={"instruction": "x", "response_format": {}}).rendered == "Instruction: x"


def test_an_attribute_error_while_rendering_is_a_rendering_failure_not_a_repr() -> None:
    message = Instruction(
        content={"instruction": "q", "response_format": {"a": 1}, "structure": _StructureWithoutSchema}
    )
    with pytest.raises(AttributeError, match="schema"):
        _ = message.rendered
    assert message.chat_msg is None  # ADR D1: a failure in the projection is contained as None
    manager = MessageManager(messages=[message])
    with pytest.raises(ValueError, match=re.escape(INVALID_PROGRESSION)):
        manager.to_chat_msgs()


class _Opaque:
    """A type pydantic holds but has no JSON Schema for."""


class _NoSchema(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    held: _Opaque


def test_a_response_format_without_a_json_schema_is_refused_when_built_and_changes_nothing() -> None:
    expected = r"^response_format _NoSchema has no JSON Schema to show: Cannot generate a JsonSchema"
    manager = MessageManager()
    for response_format in (_NoSchema, _NoSchema(held=_Opaque())):
        with pytest.raises(ValueError, match=expected):
            manager.add_message(instruction="x", response_format=response_format)
    assert len(manager) == 0
    message = manager.add_message(instruction="x", response_format=Answer)
    before = fields_of(message)
    with pytest.raises(ValueError, match=expected):
        manager.add_message(instruction=message, response_format=_NoSchema)
    assert fields_of(message) == before
    assert manager.to_chat_msgs()[0]["content"].startswith("Instruction: x")


# -- rendering across a record round trip -----------------------------------------------------------

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)


@given(context=_json_values, guidance=st.text(), instruction=st.text())
def test_json_content_renders_the_same_after_a_record_round_trip(context: Any, guidance: str, instruction: str) -> None:
    # Content that is JSON data already is what the record holds: a saved and loaded history projects the
    # same prompts.
    message = Instruction(content={"instruction": instruction, "guidance": guidance, "context": context})
    assert Instruction.from_dict(message.to_dict()).rendered == message.rendered
    assert Instruction.from_json(message.to_json()).rendered == message.rendered


@pytest.mark.parametrize(
    ("value", "built", "loaded"),
    [
        (b"PK", "- b'PK'", "- PK"),  # the record holds the bytes' UTF-8 text
        (datetime(2024, 1, 2, 3, 4, 5), "- 2024-01-02 03:04:05", "- '2024-01-02T03:04:05'"),
        ({1: "a"}, "- 1: a", "- '1': a"),
        ({None: 1}, "- null: 1", "- None: 1"),
    ],
    ids=["bytes", "datetime", "int key", "None key"],
)
def test_content_that_is_no_json_renders_as_its_record_once_loaded(value: Any, built: str, loaded: str) -> None:
    # README "Rendering": a message renders the content it holds; a record holds JSON, so a loaded message
    # renders what its record wrote (as a message built from that JSON would), not the Python value.
    message = Instruction(content={"instruction": "q", "context": [value]})
    reloaded = Instruction.from_dict(message.to_dict())
    as_json = Instruction(content={"instruction": "q", "context": [to_jsonable_python(value)]})
    assert reloaded.rendered == Instruction.from_json(message.to_json()).rendered
    assert reloaded.rendered.endswith("\n" + loaded)
    assert message.rendered.endswith("\n" + built)
    if not isinstance(value, dict) or None not in value:  # pydantic spells a None key "None", not "null"
        assert reloaded.rendered == as_json.rendered
