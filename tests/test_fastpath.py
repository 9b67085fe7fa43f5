"""The envelope's fast roads (lionmsg.runtime.fastpath) give exactly what pydantic's roads give, and
step aside for anything they are not sure about."""

from __future__ import annotations

import collections
import copy
import dataclasses
import functools
import json
import sys
import threading
import types
import uuid
from typing import Any

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lionmsg import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Element,
    Instruction,
    Message,
    MessageManager,
    MessageRole,
    Node,
    Pile,
    System,
)
from lionmsg.generated.content import (
    ActionRequestContent,
    ActionResponseContent,
    AssistantResponseContent,
    InstructionContent,
    SystemContent,
)
from lionmsg.runtime import factories, fastpath
from lionmsg.runtime.content.base import MessageContent, _owned
from lionmsg.runtime.wire import RecordFieldError
from tests.samples import failed_action_response, rich_messages


def everything() -> list[Message]:
    return [*rich_messages(), failed_action_response(), *(cls() for cls in (Message, System, Instruction))]


def state(message: Message) -> tuple[Any, ...]:
    return (type(message), message.model_dump(), message.model_fields_set, message.__pydantic_extra__)


@pytest.mark.parametrize("message", everything(), ids=lambda m: type(m).__name__)
def test_the_fast_record_is_pydantics_json_dump(message: Message) -> None:
    fast = message.to_dict()
    assert fast == message.model_dump(mode="json")
    assert list(fast) == list(message.model_dump(mode="json"))
    assert fast["metadata"] is not message.metadata  # a copy, as a dump is


@pytest.mark.parametrize("message", everything(), ids=lambda m: type(m).__name__)
def test_the_fast_load_is_pydantics_validation(message: Message) -> None:
    record = message.to_dict()
    prepared = dict(record)
    type(message)._prepare_record(prepared)
    slow = type(message).model_validate(prepared)
    one_pass = fastpath.load_record(type(message), record)  # the record of exactly this class
    assert one_pass is not None
    for fast in (Message.from_dict(record), type(message).from_dict(record), one_pass):
        assert state(fast) == state(slow)
        assert fast.to_dict() == record
    assert record == message.to_dict()  # loading changed nothing in the record


@pytest.mark.parametrize(
    "change",
    [
        {"created_at": 3},  # an int: pydantic decides
        {"id": str(uuid.uuid4()).upper()},
        {"embedding": [1, 2.5]},
        {"sender": str(uuid.uuid4())},
        {"metadata": {"k": [1, {"x": None}]}},
        {"channel": "ops"},
    ],
)
def test_records_off_the_fast_road_load_the_same(change: dict[str, Any]) -> None:
    record = {**Instruction(content={"instruction": "hi"}).to_dict(), **change}
    prepared = dict(record)
    Instruction._prepare_record(prepared)
    assert state(Instruction.from_dict(record)) == state(Instruction.model_validate(prepared))


def json_record_cases() -> list[Any]:
    class Answer(dict[str, Any]):
        """A dict subclass: not plain JSON data, so the one-pass record declines it as json_copy does."""

    contents = [m.content for m in everything() if isinstance(m.content, MessageContent)]
    ident = uuid.uuid4()
    contents += [
        Instruction(content={"instruction": "Q?", "context": [{"who": ident}]}).content,  # a UUID deep inside
        Instruction(content={"instruction": "Q?", "context": [float("nan")]}).content,
        Instruction(content={"instruction": "Q?", "response_format": Answer(a=1)}).content,  # a dict subclass
        ActionRequest(content={"function": "f", "arguments": {"t": (1, 2)}}).content,  # a tuple
    ]
    mutated = Instruction(content={"instruction": "Q?"}).content
    mutated.guidance = ident  # type: ignore[assignment]  # changed in place, past the checks
    contents.append(mutated)
    return contents


@pytest.mark.parametrize("content", json_record_cases(), ids=lambda c: type(c).__name__)
def test_the_one_pass_json_record_is_a_json_copy_of_to_dict(content: Any) -> None:
    fast = content._json_record()
    expected = fastpath.json_copy(content.to_dict())
    assert fast == expected
    if fast is not fastpath.MISSING:
        for name, value in fast.items():
            if isinstance(value, (list, dict)):
                assert value is not getattr(content, name), name  # deep-copied, not shared


def test_values_a_json_dump_must_convert_take_pydantics_road() -> None:
    ident = uuid.uuid4()
    message = Message(content={"who": ident}, metadata={"when": ident})
    assert fastpath.json_copy(message.content) is fastpath.MISSING
    assert message.to_dict() == message.model_dump(mode="json")
    assert message.to_dict()["content"] == {"who": str(ident)}


def test_factory_built_messages_equal_constructor_built_ones() -> None:
    manager = MessageManager()
    built = manager.add_message(instruction="Summarise.", guidance="Briefly.", context=[{"doc": 1}], sender="user")
    by_hand = Instruction(
        content={"instruction": "Summarise.", "guidance": "Briefly.", "context": [{"doc": 1}]}, sender="user"
    )
    assert {**built.to_dict(), "id": None, "created_at": None} == {**by_hand.to_dict(), "id": None, "created_at": None}
    assert built.model_fields_set == by_hand.model_fields_set
    reply = manager.add_message(assistant_response="Done.", recipient=None)
    assert type(reply) is AssistantResponse
    assert reply.recipient is MessageRole.USER
    assert reply.model_fields_set == {"content"}
    built.sender = "assistant"  # assignment is still validated
    assert built.sender is MessageRole.ASSISTANT
    with pytest.raises(ValueError, match="Invalid sender or recipient"):
        built.recipient = 3.5
    request = manager.add_message(action_function="add", action_arguments={"a": 1})
    assert type(request) is ActionRequest


def general_road(arguments: dict[str, Any]) -> Message:
    """What `build_message` makes of `add_message`'s arguments (the manager hands it routing and
    metadata apart)."""
    return factories.build_message(
        {k: v for k, v in arguments.items() if k not in ("sender", "recipient", "metadata")},
        arguments.get("sender"),
        arguments.get("recipient"),
        arguments.get("metadata"),
    )


def assert_added_as_the_general_road_builds(arguments: dict[str, Any]) -> None:
    """`add_message(**arguments)` adds what the general road builds, or raises its error and adds nothing."""
    manager = MessageManager()
    first = manager.add_message(instruction="First.")
    expected: Any
    try:
        expected = general_road(arguments)
    except (TypeError, ValueError) as error:
        expected = error
    if isinstance(expected, Exception):
        with pytest.raises(type(expected)) as raised:
            manager.add_message(**arguments)
        assert str(raised.value) == str(expected)
        assert (list(manager.messages), list(manager.progression)) == ([first], [first.id])  # nothing added
        return
    added = manager.add_message(**arguments)
    assert type(added) is type(expected)
    assert without_identity(added) == without_identity(expected)


@pytest.mark.parametrize("text", ["Done.", "x", "  spaced  ", "ünïcode \u2028 line", '{"json": 1}'])
def test_a_text_reply_alone_is_what_the_general_road_builds(text: str) -> None:
    fast = factories.build_text_reply({"assistant_response": text})
    general = factories.build_message({"assistant_response": text}, None, None, None)
    assert fast is not None
    assert type(fast) is type(general) is AssistantResponse
    assert {**fast.to_dict(), "id": None, "created_at": None} == {**general.to_dict(), "id": None, "created_at": None}
    assert state(fast)[2:] == state(general)[2:]  # fields set, extras
    assert fast.content == general.content
    assert fast.rendered == general.rendered == text
    assert fast.id != general.id


@pytest.mark.parametrize(
    "arguments",
    [
        {"sender": "assistant"},
        {"recipient": str(uuid.uuid4()), "sender": None},
        {"metadata": {"model": "m", "usage": {"tokens": [1, 2]}}},
        {"metadata": {}},  # empty: not given, as on the general road
        {"sender": "assistant", "recipient": "user", "metadata": {"k": 1}},
    ],
    ids=["sender", "recipient", "metadata", "empty-metadata", "everything"],
)
def test_a_text_reply_with_routing_and_metadata_is_what_the_general_road_builds(arguments: dict[str, Any]) -> None:
    fast = factories.build_text_reply({"assistant_response": "Done.", **arguments})
    general = general_road({"assistant_response": "Done.", **arguments})
    assert fast is not None
    assert type(fast) is type(general) is AssistantResponse
    assert without_identity(fast) == without_identity(general)
    assert state(fast)[2:] == state(general)[2:]  # fields set, extras
    given = arguments.get("metadata")
    if given:
        assert fast.metadata["extra"] == given
        assert fast.metadata["extra"] is not given  # the caller's dict, and what it holds, stay the caller's
        given["k"] = "changed later"
        assert "changed later" not in fast.metadata["extra"].values()


class _Text(str):
    """Text of a str subclass: the direct road (exact `str` only) leaves it to the general one."""


class _Metadata(dict[str, Any]):
    """Metadata of a dict subclass: the direct road (exact `dict` only) leaves it to the general one."""


class _Ambiguous:
    """A value whose truth cannot be told (as a numpy array's): asking raises."""

    def __bool__(self) -> bool:
        raise ValueError("the truth value of this value is ambiguous")

    def __repr__(self) -> str:
        return "_Ambiguous()"


@pytest.mark.parametrize(
    "arguments",
    [
        {"assistant_response": ""},  # falsy: not a reply (the general road makes an empty instruction)
        {"assistant_response": _Text("a str subclass")},
        {"assistant_response": {"choices": [{"message": {"content": "hi"}}]}},  # a provider payload
        {"assistant_response": "hi", "metadata": {1: "not a str key"}},  # the general road's TypeError
        {"assistant_response": "hi", "metadata": _Metadata(k=1)},
        {"assistant_response": "hi", "metadata": ["k"]},
        {"assistant_response": "hi", "metadata": _Ambiguous()},  # its type is checked before its truth
        {"assistant_response": "hi", "instruction": "two kinds"},
        {"instruction": "hi"},
        {},
    ],
    ids=["empty", "str-subclass", "payload", "int-key", "dict-subclass", "list-metadata", "ambiguous-metadata",
         "two-kinds", "instruction", "nothing"],
)  # fmt: skip
def test_anything_but_a_text_reply_is_not_built_as_one(arguments: dict[str, Any]) -> None:
    assert factories.build_text_reply(dict(arguments)) is None
    assert_added_as_the_general_road_builds(arguments)


def without_identity(message: Message) -> dict[str, Any]:
    return {**message.to_dict(), "id": None, "created_at": None}


@pytest.mark.parametrize(
    "arguments",
    [
        {"instruction": "Summarise."},
        {"instruction": "Summarise.", "guidance": "Briefly.", "context": [{"doc": 1}], "sender": "user"},
        {"guidance": "Briefly.", "plain_content": "Say hi."},
        {"instruction": "Summarise.", "recipient": "assistant", "sender": str(uuid.uuid4())},
        {"instruction": "Summarise.", "guidance": None, "context": None, "sender": None},  # None: not given
        {"context": ["a", {"b": [1]}]},
        {"instruction": "Summarise.", "context": {"doc": 1, "parts": [{"n": 2}]}, "sender": "user"},
        {"instruction": "Summarise.", "context": {}},  # a dict counts unless None, as on the general road
        {"instruction": "Summarise.", "context": [{"doc": 1}], "metadata": {"run": {"step": [3]}}},
        {"instruction": "Summarise.", "metadata": {}},  # empty: not given
        {"instruction": "Look.", "images": ["https://example.com/a.png"], "sender": "user"},
        {"instruction": "Look.", "images": ["https://example.com/a.png"], "image_detail": "low"},
        {"instruction": "Answer.", "response_format": {"answer": "str"}, "metadata": {"k": 1}},
        {"instruction": "Call.", "tool_schemas": [{"name": "f", "parameters": {}}]},
        {"instruction": "Go.", "handle_context": "replace", "context": [1], "images": [], "tool_schemas": None},
        {"instruction": "Go.", "context": "one item", "guidance": "g", "response_format": {}},
        {},
    ],
    ids=["instruction", "usual", "texts", "routing", "nones", "context-only", "dict-context", "empty-dict-context",
         "metadata", "empty-metadata", "images", "image-detail", "format", "tools", "handle-context",
         "text-context-with-option", "nothing"],
)  # fmt: skip
def test_a_new_instruction_is_what_the_general_road_builds(arguments: dict[str, Any]) -> None:
    fast = factories.build_common(dict(arguments))
    general = general_road(arguments)
    assert fast is not None
    assert type(fast) is type(general) is Instruction
    assert without_identity(fast) == without_identity(general)
    assert fast.model_fields_set == general.model_fields_set
    assert fast.rendered == general.rendered
    if arguments.get("context"):
        assert fast.content.prompt_context is not arguments["context"]  # its own list
    if isinstance(arguments.get("context"), dict) and arguments["context"]:
        assert fast.content.prompt_context[0] is not arguments["context"]  # its own copy of the record
        arguments["context"]["doc"] = "changed later"
        assert fast.content.prompt_context[0]["doc"] != "changed later"
    for name, field in (("images", "images"), ("tool_schemas", "tool_schemas"), ("metadata", "metadata")):
        if arguments.get(name):  # the caller's list or dict stays the caller's
            held = getattr(fast if name == "metadata" else fast.content, field)
            assert (held["extra"] if name == "metadata" else held) is not arguments[name]


@pytest.mark.parametrize(
    "arguments",
    [
        {"instruction": ""},  # falsy: not given
        {"instruction": "hi", "context": []},
        {"instruction": "hi", "context": "one item"},
        {"instruction": "hi", "context": ({"doc": 1},)},
        {"instruction": _Text("a str subclass")},
        {"instruction": "", "images": ["https://example.com/a.png"]},  # falsy text with an option
        {"instruction": "hi", "metadata": {1: "not a str key"}},  # the general road's TypeError
        {"instruction": "hi", "metadata": _Metadata(k=1)},
        {"instruction": "hi", "images": ["https://example.com/a.png"], "metadata": ("k",)},
        {"instruction": "hi", "metadata": _Ambiguous()},
        {"instruction": "hi", "images": ["https://example.com/a.png"], "system": "two kinds"},
        {"instruction": 5},  # not text: the general road's error
        {"instruction": "hi", "assistant_response": "both"},  # two kinds: the general road's error
    ],
    ids=["empty", "empty-context", "text-context", "tuple-context", "str-subclass", "falsy-text-with-option",
         "int-key-metadata", "dict-subclass-metadata", "tuple-metadata", "ambiguous-metadata", "option-and-two-kinds",
         "not-text",
         "two-kinds"],
)  # fmt: skip
def test_other_instruction_arguments_take_the_general_road(arguments: dict[str, Any]) -> None:
    assert factories.build_new_instruction(dict(arguments)) is None
    assert_added_as_the_general_road_builds(arguments)


@pytest.mark.parametrize(
    ("name", "build"),
    [
        ("assistant_response", lambda: AssistantResponse(content={"assistant_response": "Done."}, sender="bot")),
        ("action_request", lambda: ActionRequest(content={"function": "f", "arguments": {"a": [1]}})),
        ("instruction", lambda: Instruction(content={"instruction": "Q?", "context": [{"doc": 1}]})),
    ],
    ids=["reply", "request", "instruction"],
)
def test_a_message_built_already_and_given_alone_is_added_as_the_general_road_adds_it(name: str, build: Any) -> None:
    # How LionAGI's operations add what they built: add_message(instruction=ins), (assistant_response=res)...
    direct_message, general_message = build(), build()
    record = general_message.to_dict()
    assert factories.build_common({name: direct_message}) is direct_message
    assert factories.build_message({name: general_message}, None, None, None) is general_message
    assert general_message.to_dict() == record  # the general road's update() changed nothing
    seen: list[Message] = []
    manager = MessageManager(on_message_added=[seen.append])
    added = manager.add_message(**{name: direct_message})
    assert added is direct_message
    assert seen == [direct_message]
    assert list(manager.messages) == [direct_message]
    assert without_identity(direct_message) == without_identity(general_message)


class _CountedCopies:
    """A metadata value that counts how often it is deep-copied."""

    copies = 0

    def __deepcopy__(self, memo: dict[int, Any]) -> _CountedCopies:
        type(self).copies += 1
        return _CountedCopies()


@pytest.mark.parametrize("context", ["one item", ("t",), [], 0], ids=["text", "tuple", "empty-list", "zero"])
def test_a_call_the_direct_road_declines_copies_the_callers_metadata_once(context: Any) -> None:
    _CountedCopies.copies = 0
    message = MessageManager().add_message(instruction="x", context=context, metadata={"v": _CountedCopies()})
    assert _CountedCopies.copies == 1
    assert type(message.metadata["extra"]["v"]) is _CountedCopies


@pytest.mark.parametrize("routing", [{"sender": 3.5}, {"recipient": 3.5}], ids=["sender", "recipient"])
def test_a_constructor_call_refused_for_its_address_copies_the_content_once(routing: dict[str, Any]) -> None:
    # Review ag F7: the direct road built the content before it looked at the addresses, so a refused
    # address made pydantic's road copy the context (and run its user code) a second time.
    _CountedCopies.copies = 0
    with pytest.raises(pydantic.ValidationError, match="Invalid sender or recipient"):
        Instruction(content={"instruction": "x", "context": [_CountedCopies()]}, **routing)
    assert _CountedCopies.copies == 1


def test_a_new_instruction_with_a_bad_sender_adds_nothing() -> None:
    manager = MessageManager()
    manager.add_message(instruction="First.")
    before = list(manager.progression)
    with pytest.raises(ValueError, match="Invalid sender or recipient"):
        manager.add_message(instruction="Second.", sender=3.5)
    assert list(manager.progression) == before


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"images": ["ftp://example.com/a.png"]}, RecordFieldError, "image scheme 'ftp' is not allowed"),
        ({"image_detail": "huge", "images": ["https://example.com/a.png"]}, ValueError, "image_detail"),
        ({"handle_context": "merge", "context": [1]}, ValueError, "handle_context must be either"),
        ({"context": iter([1]), "images": ["https://example.com/a.png"]}, TypeError, "iterator"),
    ],
    ids=["image", "image-detail", "handle-context", "iterator"],
)
def test_a_new_instruction_refused_on_the_direct_road_adds_nothing(
    arguments: dict[str, Any], error: type[Exception], message: str
) -> None:
    seen: list[Message] = []
    manager = MessageManager(on_message_added=[seen.append])
    first = manager.add_message(instruction="First.")
    metadata = {"run": [1]}
    with pytest.raises(error, match=message):
        manager.add_message(instruction="Second.", metadata=metadata, sender="user", **arguments)
    assert list(manager.messages) == [first]
    assert list(manager.progression) == [first.id]
    assert seen == [first]
    assert metadata == {"run": [1]}


def test_a_text_reply_added_alone_is_stored_observed_and_replaced_like_any_message() -> None:
    seen: list[Message] = []
    manager = MessageManager(on_message_added=[seen.append])
    manager.add_message(instruction="Summarise.")
    reply = manager.add_message(assistant_response="Done.")
    assert list(manager.messages) == [manager.messages[0], reply]
    assert manager.last_response is reply
    assert seen == [manager.messages[0], reply]
    assert manager.to_chat_msgs()[-1] == {"role": "assistant", "content": "Done."}


def stored_instruction() -> Instruction:
    return Instruction(
        content={"instruction": "Summarise.", "guidance": "Be brief.", "context": [{"doc": 1}]},
        sender="user",
        metadata={"k": [1]},
    )


@pytest.mark.parametrize(
    "changes",
    [{"guidance": "Revised."}, {"plain_content": "Say hi."}, {"guidance": "G", "plain_content": "P"}, {}],
    ids=["guidance", "plain_content", "both", "nothing"],
)
def test_a_revision_of_a_stored_instruction_is_what_the_general_road_makes(changes: dict[str, str]) -> None:
    fast_target = stored_instruction()
    general_target = fastpath.copy_message(fast_target)  # the same id and created_at
    before = fast_target.content
    fast = factories.revise_instruction({"instruction": fast_target, **changes})
    general = factories.build_message({"instruction": general_target, **changes}, None, None, None)
    assert fast is fast_target
    assert general is general_target
    assert state(fast) == state(general)
    assert fast.rendered == general.rendered
    if changes:
        assert fast.content is not before  # replaced, not changed in place: the old content is as it was
        assert before == stored_instruction().content
    else:
        assert fast.content is before  # nothing to revise: the content is left as it is


@pytest.mark.parametrize(
    "extra",
    [
        {"guidance": ""},  # falsy: not given (the general road leaves the guidance as it is)
        {"guidance": None},
        {"guidance": _Text("a str subclass")},
        {"context": [{"doc": 2}]},  # not a plain text field
        {"instruction_text": "x"},  # not an argument at all: add_message's TypeError, nothing changed
        {"sender": "assistant"},
        {"metadata": {"k": 2}},
        {"guidance": 5},  # not text: the general road's error, nothing changed
    ],
    ids=["empty", "none", "str-subclass", "context", "unknown", "with-sender", "with-metadata", "not-text"],
)
def test_anything_but_a_text_revision_takes_the_general_road(extra: dict[str, Any]) -> None:
    target = stored_instruction()
    assert factories.revise_instruction({"instruction": target, **extra}) is None
    manager, twin = MessageManager(), MessageManager()
    manager.add_message(instruction=target)
    twin_target = twin.add_message(instruction=fastpath.copy_message(target))
    expected: Any
    if "instruction_text" in extra:  # refused by add_message before anything is built
        expected = TypeError("MessageManager.add_message() got an unexpected keyword argument 'instruction_text'")
    else:
        try:
            expected = factories.build_message(
                {"instruction": twin_target, **{k: v for k, v in extra.items() if k not in ("sender", "metadata")}},
                extra.get("sender"),
                None,
                extra.get("metadata"),
            )
        except ValueError as error:
            expected = error
    before = (state(target), list(manager.progression))
    if isinstance(expected, Exception):
        with pytest.raises(type(expected)) as raised:
            manager.add_message(instruction=target, **extra)
        assert str(raised.value) == str(expected)
        assert (state(target), list(manager.progression)) == before
    else:
        added = manager.add_message(instruction=target, **extra)
        assert added is target
        assert state(added) == state(expected)


def test_a_revision_keeps_its_index_and_is_observed() -> None:
    seen: list[Message] = []
    manager = MessageManager(on_message_added=[seen.append])
    first = manager.add_message(instruction="One.")
    second = manager.add_message(instruction="Two.")
    manager.add_message(assistant_response="Done.")
    revised = manager.add_message(instruction=first, guidance="Shorter.")
    assert revised is first
    assert list(manager.progression) == [first.id, second.id, manager.messages[2].id]
    assert seen[-1] is first
    assert manager.to_chat_msgs()[0] == {"role": "user", "content": "Guidance: Shorter.\nInstruction: One."}


def test_a_self_referencing_message_is_deep_copied_with_its_shape() -> None:
    original = Message(content={"items": [1]})
    original.metadata["self"] = original.metadata
    copied = fastpath.copy_message(original)
    assert copied.metadata is not original.metadata
    assert copied.metadata["self"] is copied.metadata
    assert copied.content == {"items": [1]}
    assert copied.content is not original.content


@pytest.mark.parametrize(
    "content",
    [
        {"seq": 1, "nested": {"list": [1, 2.5, "x", None, True]}},  # plain JSON: copied by json_copy
        {"nan": float("nan"), "tuple": (1, 2)},  # not plain JSON: copied by deepcopy
    ],
    ids=["json", "non-json"],
)
def test_a_message_copy_is_deep_and_keeps_everything_else(content: dict[str, Any]) -> None:
    original = Message(content=content, sender=uuid.uuid4(), recipient="alice", metadata={"tags": ["a"]})
    copied = fastpath.copy_message(original)
    assert state(copied)[0] is Message
    assert copied.id == original.id
    assert repr(copied.model_dump()) == repr(original.model_dump())  # repr: NaN is not equal to itself
    assert copied.model_fields_set == original.model_fields_set
    assert copied.content is not original.content
    assert copied.metadata is not original.metadata
    copied.metadata["tags"].append("b")
    assert original.metadata == {"tags": ["a"]}
    if "nested" in content:
        copied.content["nested"]["list"].append(3)
        assert original.content["nested"]["list"] == [1, 2.5, "x", None, True]


class Text(str):
    """A str subclass: its instances may carry mutable state, so copies must not share them."""


@pytest.mark.parametrize(
    ("content", "metadata", "embedding"),
    [
        ({"seq": 1, "note": "flat", "ratio": float("nan"), "ok": True, "none": None}, {}, None),
        (["flat", 1, 2.5, False, None], {}, None),
        ("just text", {}, None),
        (7, {}, None),
        ({}, {}, None),
        ({"nested": {"list": [1]}}, {}, None),  # not flat: each copy made by copy_message
        ([[1]], {}, None),
        ({"sub": Text("x")}, {}, None),
        ({1: "int key"}, {}, None),
        ({"seq": 1}, {"tags": ["a"]}, None),  # metadata to copy
        ({"seq": 1}, {}, [0.5, 1.5]),  # an embedding to copy
        (Text("x"), {}, None),
    ],
    ids=[
        "flat-dict",
        "flat-list",
        "str",
        "int",
        "empty",
        "nested",
        "nested-list",
        "str-subclass",
        "int-key",
        "metadata",
        "embedding",
        "subclass-atom",
    ],
)
def test_message_copies_are_each_what_copy_message_makes(content: Any, metadata: Any, embedding: Any) -> None:
    original = Message(content=content, sender=uuid.uuid4(), metadata=metadata, embedding=embedding)
    before = repr(original.model_dump())
    copies = fastpath.message_copies(original, 3)
    expected = fastpath.copy_message(original)
    assert len(copies) == 3
    assert len({id(copied) for copied in copies} | {id(original)}) == 4
    for copied in copies:
        assert state(copied)[0] is Message
        assert repr(state(copied)) == repr(state(expected))  # repr: NaN is not equal to itself
        if embedding is not None:
            assert copied.embedding is not original.embedding
        if type(content) is Text:  # not an atom: deep-copied, not shared
            assert copied.content is not original.content
        if type(content) is dict and "sub" in content:
            assert copied.content["sub"] is not original.content["sub"]
    everyone = [*copies, original]
    assert len({id(message.metadata) for message in everyone}) == 4  # no two share a container
    assert len({id(message.model_fields_set) for message in everyone}) == 4
    if isinstance(content, (dict, list)):
        assert len({id(message.content) for message in everyone}) == 4
    assert repr(original.model_dump()) == before
    assert fastpath.message_copies(original, 0) == []


@pytest.mark.parametrize("message", [m for m in everything() if type(m) is not Message], ids=lambda m: type(m).__name__)
def test_content_loaded_from_a_record_equals_content_built_by_the_constructor(message: Message) -> None:
    content_type = type(message.content)
    record = message.content.to_dict()
    loaded, built = content_type.from_record(record), content_type(**record)
    assert loaded == built
    assert type(loaded) is content_type
    for name, value in record.items():
        if isinstance(value, (list, dict)) and value:
            # The constructor keeps none of the caller's containers (ADR D2); the record road may keep the
            # record's (its callers make them the message's own: MessageBehaviour.from_dict copies them)
            assert getattr(built, name) == value, name
            assert getattr(built, name) is not value, name
        elif isinstance(value, (list, dict)) and name != "response_format":  # an empty one: its own
            assert getattr(loaded, name) == value
            assert getattr(loaded, name) is not value, name


@pytest.mark.parametrize("message", everything(), ids=lambda m: type(m).__name__)
def test_a_message_loaded_by_from_dict_shares_no_list_or_dict_with_the_record(message: Message) -> None:
    record = message.to_dict()
    record["metadata"]["nested"] = {"kept": [1]}
    loaded = [
        type(message).from_dict(record),
        Message.from_dict(record),
        Element.from_dict(record),
        Node.from_dict(record),
        MessageManager(messages=[record]).messages[0],
    ]
    held = {id(value) for value in _containers_in(record)}
    for message_loaded in loaded:
        assert held.isdisjoint(id(value) for value in _containers_in(_content_values(message_loaded)))
        assert held.isdisjoint(id(value) for value in _containers_in(message_loaded.metadata))
        assert message_loaded.metadata["nested"] == {"kept": [1]}
        assert message_loaded.metadata["nested"] is not record["metadata"]["nested"]
        assert state(message_loaded) == state(loaded[0])


@pytest.mark.parametrize("message", everything(), ids=lambda m: type(m).__name__)
def test_a_record_read_with_ordered_dicts_is_loaded_into_containers_of_the_messages_own(message: Message) -> None:
    # Review ah F1: `json.loads(text, object_pairs_hook=OrderedDict)` makes every object a dict subclass,
    # which the one-pass road declines; the general road kept the record's lists and dicts then.
    text = message.to_json()
    loaders = [
        type(message).from_dict,
        Message.from_dict,
        lambda record: MessageManager(messages=[record]).messages[0],
        lambda record: Pile(collections=[record])[0],
    ]
    for load in loaders:
        record = json.loads(text, object_pairs_hook=collections.OrderedDict)
        record["metadata"]["nested"] = collections.OrderedDict(kept=[1])
        loaded = load(record)
        held = {id(value) for value in _containers_in(record)}
        assert held.isdisjoint(id(value) for value in _containers_in(_content_values(loaded)))
        assert held.isdisjoint(id(value) for value in _containers_in(loaded.metadata))
        written = message.to_dict()
        assert loaded.to_dict() == {**written, "metadata": {**written["metadata"], "nested": {"kept": [1]}}}


class _ListOfItsOwn(list[Any]):
    """A list subclass, as a caller's own container type may be."""


@pytest.mark.parametrize(
    "content",
    [collections.OrderedDict(a=[1]), ([1],), _ListOfItsOwn([[1]])],
    ids=["ordered-dict", "tuple", "list-subclass"],
)
def test_generic_content_of_a_record_is_copied_whatever_container_holds_it(content: Any) -> None:
    for record in (Message(content="x").to_dict(), collections.OrderedDict(Message(content="x").to_dict())):
        record["content"] = content
        loaded = Message.from_dict(record)
        assert loaded.content == content
        assert type(loaded.content) is type(content)
        assert loaded.content is not content
        inner = content["a"] if isinstance(content, dict) else content[0]
        loaded_inner = loaded.content["a"] if isinstance(content, dict) else loaded.content[0]
        assert loaded_inner == inner
        assert loaded_inner is not inner


def test_a_record_whose_metadata_is_a_read_only_mapping_is_loaded_into_a_dict_of_its_own() -> None:
    record = Instruction(content={"instruction": "q"}).to_dict()
    nested = {"kept": [1]}
    record["metadata"] = types.MappingProxyType({**record["metadata"], "nested": nested})
    loaded = Instruction.from_dict(record)
    assert loaded.metadata == {"nested": {"kept": [1]}}
    assert type(loaded.metadata) is dict
    assert loaded.metadata["nested"] is not nested
    assert loaded.metadata["nested"]["kept"] is not nested["kept"]


@pytest.mark.parametrize("message", everything(), ids=lambda m: type(m).__name__)
def test_a_message_loaded_from_a_pile_record_shares_no_list_or_dict_with_it(message: Message) -> None:
    record = Pile(collections=[message]).to_dict()
    item = record["collections"][0]
    item["metadata"]["nested"] = {"kept": [1]}
    loaded = [Pile.from_dict(record)[0], MessageManager(messages=record).messages[0]]
    held = {id(value) for value in _containers_in(item)}
    for message_loaded in loaded:
        assert held.isdisjoint(id(value) for value in _containers_in(_content_values(message_loaded)))
        assert held.isdisjoint(id(value) for value in _containers_in(message_loaded.metadata))
        assert state(message_loaded) == state(type(message).from_dict(item))


class _AuditedOnLoad(Message):
    """A user's subclass whose from_dict override marks what it loads."""

    @classmethod
    def from_dict(cls, data: Any) -> Any:
        loaded = super().from_dict(data)
        loaded.metadata["audited"] = True
        return loaded


class _PlainUserMessage(Message):
    """A user's subclass with the library's from_dict."""


def test_a_pile_or_a_base_class_loads_a_user_subclass_record_as_message_from_dict_does() -> None:
    for kind in (_AuditedOnLoad, _PlainUserMessage):
        record = kind(content={"rows": [1]}).to_dict()
        pile_record = {**Pile().to_dict(), "collections": [record], "progression": None}
        from_pile = [
            Pile.from_dict(pile_record)[0],
            Pile(collections=[record])[0],
            Element.from_dict(record),
            Node.from_dict(record),
        ]
        for loaded in from_pile:
            assert state(loaded) == state(Message.from_dict(record))
            assert "audited" not in loaded.metadata  # an override is left out on both roads
        # The library's loader either way (the override is left out): the record's lists are not the message's.
        from_pile.append(MessageManager(messages=[record]).messages[0])
        record["content"]["rows"].append(2)
        assert [loaded.content for loaded in from_pile] == [{"rows": [1]}] * 5


class _StaticLoader(Message):
    """A user's from_dict written as a staticmethod: no `__func__` to look at."""

    @staticmethod
    def from_dict(data: Any) -> Any:  # type: ignore[override]
        raise AssertionError("a user's loader is left out")


class _WrappedLoader(Message):
    """A user's override that passes for the library's by its name and module (functools.wraps) and
    loads through the base class: handed back to, it would recurse without end."""

    @classmethod
    @functools.wraps(Message.from_dict.__func__)
    def from_dict(cls, data: Any) -> Any:
        raise AssertionError("a user's loader is left out")


class _RebindsTheLibrarysLoader(_AuditedOnLoad):
    """Takes the library's loader back by assigning it, bound to Message (as a user may, after the class)."""


_RebindsTheLibrarysLoader.from_dict = Message.from_dict  # type: ignore[method-assign]


@pytest.mark.parametrize("kind", [_StaticLoader, _WrappedLoader, _RebindsTheLibrarysLoader], ids=lambda k: k.__name__)
def test_whatever_a_user_class_puts_in_from_dict_the_library_loads_its_records_itself(kind: type[Message]) -> None:
    record = kind(content={"rows": [1]}).to_dict()
    loaded = [
        Element.from_dict(record),
        Node.from_dict(record),
        Message.from_dict(record),
        Pile(collections=[record])[0],
        Pile.from_dict({**Pile().to_dict(), "collections": [record], "progression": None})[0],
        MessageManager(messages=[record]).messages[0],
    ]
    for message in loaded:
        assert type(message) is kind
        assert message.to_dict() == record
        assert "audited" not in message.metadata
    record["content"]["rows"].append(2)
    assert [message.content for message in loaded] == [{"rows": [1]}] * len(loaded)


@pytest.mark.parametrize("message", everything(), ids=lambda m: type(m).__name__)
def test_the_base_class_loads_a_record_of_a_kind_as_that_kind_loads_it(message: Message) -> None:
    record = message.to_dict()
    assert state(Message.from_dict(record)) == state(type(message).from_dict(record))
    assert state(Message.from_json(message.to_json())) == state(type(message).from_json(message.to_json()))


def _content_values(message: Message) -> Any:
    content = message.content
    if isinstance(content, MessageContent):
        return [getattr(content, name) for name in content.to_dict()]
    return content


def _containers_in(value: Any) -> list[Any]:
    found: list[Any] = []
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            found.append(item)
            pending.extend(item.values())
        elif isinstance(item, list):
            found.append(item)
            pending.extend(item)
    return found


# -- content updates: the plain-field road against the full rebuild ------------------------------

PLAIN_VALUES: dict[str, list[Any]] = {
    "instruction": ["Translate.", None, 5],
    "guidance": ["Two lines.", None, ["not", "text"]],
    "plain_content": ["Just this.", None, 1.5],
    "system_message": ["Be kind.", 7],
    "assistant_response": ["Changed.", None],
    "function": ["lookup", 3],
    "arguments": [{"q": [1]}, None, ["not an object"]],
    "output": [{"rows": [1]}, None, "text"],
    "error": ["boom", None, 42],
    # A linked record's id: canonical text, in upper case, a UUID, malformed, of the wrong type.
    "action_response_id": [
        "0f8fad5b-d9cb-469f-a165-70867728950e",
        "0F8FAD5B-D9CB-469F-A165-70867728950E",
        uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e"),
        None,
        "not-an-id",
        7,
    ],
}
PLAIN_VALUES["action_request_id"] = PLAIN_VALUES["action_response_id"]


def updatable_contents() -> list[Any]:
    class Answer(pydantic.BaseModel):
        text: str

    # Every content class (a request's only plain field is its response's id).
    contents = [m.content for m in everything() if isinstance(m.content, MessageContent) and m.content._PLAIN_FIELDS]
    for response_format in ({"answer": "str"}, Answer, Answer(text="x")):
        contents.append(Instruction(content={"instruction": "Q?", "response_format": response_format}).content)
    # Loaded from a record: images and no detail, which the full rebuild's input rules would fill in.
    record = Instruction(content={"instruction": "Look", "images": ["https://example.org/cat.png"]}).to_dict()
    del record["content"]["image_detail"]
    contents.append(Instruction.from_dict(record).content)
    return contents


def outcome(build: Any) -> tuple[Any, ...]:
    try:
        content = build()
    except RecordFieldError as error:
        return ("error", type(error), str(error), error.field, error.value)
    return (
        "content",
        type(content),
        content,
        content.to_dict(),
        content.rendered,
        type(content._structure()) if isinstance(content, InstructionContent) else None,  # the same derived state
    )


@pytest.mark.parametrize("content", updatable_contents(), ids=lambda c: type(c).__name__)
def test_updating_plain_fields_gives_what_a_full_rebuild_gives(content: Any) -> None:
    before = copy.deepcopy(content)
    for name in sorted(content._PLAIN_FIELDS):
        for value in PLAIN_VALUES[name]:
            fast = outcome(lambda: content.updated(**{name: value}))  # noqa: B023 (called at once)
            full = outcome(lambda: content._from_input({**content.field_values(), name: value}))  # noqa: B023
            assert fast == full, (name, value)
            if fast[0] == "content":
                updated = content.updated(**{name: value})
                assert updated is not content
                for field in dataclasses.fields(updated):
                    mine = getattr(updated, field.name)
                    if isinstance(mine, (list, dict)) and field.name not in content._PLAIN_FIELDS:
                        assert mine is not getattr(content, field.name), field.name  # containers are its own
                structure = updated._structure() if isinstance(updated, InstructionContent) else None
                if structure is not None:
                    assert structure is not content._structure()  # derived state is rebuilt...
                    if isinstance(updated.response_format, dict):  # ...from the copy's own dict
                        assert structure.response_format is updated.response_format
    assert content == before  # the original is untouched, also after failed updates


def _result(build: Any) -> tuple[Any, ...]:
    try:
        content = build()
    except (TypeError, ValueError) as error:
        return ("error", type(error), str(error))
    return ("content", type(content), content, content.to_dict())


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda: InstructionContent(instruction="Q?", prompt_context=[1]), "prompt_context"),
        (lambda: InstructionContent(instruction="Q?"), "tool_schemas"),
        (lambda: InstructionContent(instruction="Q?"), "images"),
        (lambda: ActionResponseContent(function="f", arguments={"a": 1}), "arguments"),
        # Review ch F1: the request's arguments (copied deep) had no such check: text set in place stayed
        # text, and the message wrote a record its own loader refuses.
        (lambda: ActionRequestContent(function="f", arguments={"a": 1}), "arguments"),
    ],
)
@pytest.mark.parametrize(
    "value", [{"a": 1}, "abc", "{'a': 2}", (1, 2), None], ids=["dict", "text", "argument-text", "tuple", "none"]
)
def test_a_container_set_to_another_type_in_place_is_updated_as_a_full_rebuild_updates_it(
    make: Any, name: str, value: Any
) -> None:
    """Review av F1: the plain road copied the other fields with list()/dict(), which kept a dict's keys
    or a text's characters; a field no longer of its type now takes the full rebuild. (Items changed in
    place inside a list that is still a list are not checked again: README, "Where lionmsg differs".)"""
    content = make()
    plain = {InstructionContent: "guidance", ActionResponseContent: "action_request_id"}.get(
        type(content), "action_response_id"
    )
    change = "g" if plain == "guidance" else str(uuid.UUID(int=7))
    setattr(content, name, copy.deepcopy(value))
    fast = _result(lambda: content.updated(**{plain: change}))
    full = _result(lambda: content._from_input({**content.field_values(), plain: change}))
    assert fast == full
    if fast[0] == "content":  # what the message then holds, it can write and load again
        assert type(fast[2]).from_dict(fast[3]) == fast[2]


def test_a_stored_instruction_whose_context_was_set_in_place_keeps_it_through_add_or_replace() -> None:
    manager = MessageManager()
    stored = manager.add_message(instruction="Q?", context=[1])
    stored.content.prompt_context = {"a": 1}
    manager.add_message(instruction=stored, guidance="g")
    assert (stored.content.guidance, stored.content.prompt_context) == ("g", [{"a": 1}])


def test_an_updated_request_shares_no_argument_with_the_content_it_replaced() -> None:
    # ActionRequestBehaviour._from_input copies the arguments deep on every build; the plain road too.
    manager = MessageManager()
    request = manager.add_message(action_function="search", action_arguments={"filters": [{"k": 1}]})
    before = request.content
    manager.add_message(action_request=request, action_output={"hits": []})  # links: a new content
    linked = request.content
    request.update(action_response_id=str(uuid.uuid4()))
    for old, new in ((before, linked), (linked, request.content)):
        assert new is not old
        assert new.arguments == old.arguments
        assert new.arguments["filters"] is not old.arguments["filters"]
        assert new.arguments["filters"][0] is not old.arguments["filters"][0]


@dataclasses.dataclass(slots=True)
class _KeepsIdAsGiven(ActionRequestContent):
    """A content subclass with its own rule for the response's id: kept as given."""

    def _normalize(self) -> None:
        given = self.action_response_id
        ActionRequestContent._normalize(self)
        self.action_response_id = given


def test_a_content_subclass_sees_a_plain_change_as_given() -> None:
    upper = "0F8FAD5B-D9CB-469F-A165-70867728950E"
    request = ActionRequest(content=_KeepsIdAsGiven(function="f"))
    request.update(action_response_id=upper)  # the full rebuild: the library's rule is not applied first
    assert type(request.content) is _KeepsIdAsGiven
    assert request.content.action_response_id == upper == _KeepsIdAsGiven(action_response_id=upper).action_response_id


@pytest.mark.parametrize(
    ("content_class", "name"),
    [(ActionRequestContent, "action_response_id"), (ActionResponseContent, "action_request_id")],
)
def test_a_new_content_from_a_plain_id_is_normalised_as_the_constructor_normalises_it(
    content_class: Any, name: str
) -> None:
    ident = uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e")
    for value in (ident, str(ident).upper(), str(ident)):
        made = content_class._new_with_plain({name: value})
        assert made == content_class(**{name: value})
        assert getattr(made, name) == str(ident)
        assert content_class.from_dict({name: str(ident).upper()}) == made  # the text-only road too


def test_a_content_subclass_takes_the_full_road() -> None:
    @dataclasses.dataclass(slots=True)
    class Tagged(InstructionContent):
        tag: str = "t"

    tagged = Tagged(instruction="a")
    updated = tagged.updated(guidance="g")
    assert type(updated) is Tagged
    assert (updated.tag, updated.instruction, updated.guidance) == ("t", "a", "g")


def test_a_new_content_from_plain_fields_equals_the_constructed_one() -> None:
    for content_class in (InstructionContent, AssistantResponseContent):
        values = {name: f"{name} text" for name in content_class._PLAIN_FIELDS}
        made = content_class._new_with_plain(values)
        assert type(made) is content_class
        assert made == content_class(**values)
    first = InstructionContent._new_with_plain({"instruction": "a"})
    assert first is not None
    first.prompt_context.append("changed in place")  # the shared default instance is never handed out
    second = InstructionContent._new_with_plain({"instruction": "a"})
    assert second == InstructionContent(instruction="a")
    with pytest.raises(RecordFieldError, match=r"InstructionContent\.guidance must be a string or null"):
        InstructionContent._new_with_plain({"guidance": 5})


def test_revising_an_instruction_whose_content_is_a_subclass_rebuilds_it_as_that_subclass() -> None:
    @dataclasses.dataclass(slots=True)
    class Tagged(InstructionContent):
        tag: str = "t"

    message = Instruction(content=Tagged(instruction="a", tag="kept"), sender="user")
    manager = MessageManager(messages=[message])
    revised = manager.add_message(instruction=message, guidance="g")
    assert revised is message
    assert type(message.content) is Tagged
    assert (message.content.tag, message.content.instruction, message.content.guidance) == ("kept", "a", "g")
    assert list(manager.messages) == [message]


_STORED = object()  # stands for a stored Instruction (a fresh one, and its twin, per example)
_REQUEST = object()  # stands for a stored ActionRequest (likewise)
_ARGUMENT_VALUES = st.one_of(
    st.sampled_from(
        [None, "", "text", "user", "assistant", "low", _Text("sub"), [], [1, {"a": [2]}], ("t",), 5, {"k": 1},
         {1: "k"}, _Metadata(k=1), ["https://example.com/a.png"], [{"name": "f"}], _Ambiguous(), _STORED]
    ),
    st.builds(lambda: iter([1])),  # a fresh iterator per example: refused when copied
)  # fmt: skip
_ARGUMENT_NAMES = st.sampled_from(
    ["instruction", "guidance", "plain_content", "context", "sender", "recipient", "assistant_response",
     "metadata", "handle_context", "images", "image_detail", "tool_schemas", "response_format"]
)  # fmt: skip
_METADATA = st.sampled_from([{"k": [1]}, {}, None, {1: "k"}, _Metadata(k=1), ["k"], _Ambiguous()])


def _outcome(build: Any) -> tuple[Any, ...]:
    try:
        message = build()
    except (TypeError, ValueError) as error:
        return ("error", type(error), str(error))
    if message is None:
        return ("declined",)
    return ("message", type(message), without_identity(message), message.model_fields_set)


# A tool call and its result, with a value that turns the direct road away now and then.
_ACTION_CALLS = st.one_of(
    st.fixed_dictionaries(
        {"action_function": st.sampled_from(["search", "search", "search", "", _Text("f"), 5, None, print])},
        optional={
            "action_arguments": st.one_of(
                st.sampled_from([{"q": [1]}, {}, None, '{"q": 1}', ["x"], _Metadata(k=1), {"q": (1, "t")}]),
                st.builds(lambda: {"rows": iter([1])}),  # refused when copied
            ),
            "sender": st.sampled_from(["assistant", None, 3.5]),
            "recipient": st.sampled_from(["tool", str(uuid.uuid4()), None]),
            "metadata": _METADATA,
        },
    ),
    st.fixed_dictionaries(
        {
            "action_request": st.sampled_from([_REQUEST, _REQUEST, _REQUEST, None, "not a request"]),
            "action_output": st.one_of(
                st.sampled_from([{"rows": [1]}, 0, "", None, [None], (1, "t")]), st.builds(lambda: iter([1]))
            ),
        },
        optional={
            "action_function": st.sampled_from(["other", None]),
            "sender": st.sampled_from(["tool", None, 3.5]),
            "recipient": st.sampled_from(["assistant", None]),
            "metadata": _METADATA,
        },
    ),
)

# Mostly the shapes the direct roads take, with a value that turns one away now and then.
_COMMON_CALLS = st.one_of(
    st.dictionaries(_ARGUMENT_NAMES, _ARGUMENT_VALUES, max_size=4),
    st.fixed_dictionaries(
        {"instruction": st.sampled_from(["text", _STORED])},
        optional={
            "guidance": st.sampled_from(["g", "", None, 5]),
            "plain_content": st.sampled_from(["p", None]),
            "context": st.sampled_from([[1], [{"a": 1}], [], None, "c"]),
            "sender": st.sampled_from(["user", str(uuid.uuid4()), None, 3.5]),
            "recipient": st.sampled_from(["assistant", None]),
            "metadata": _METADATA,
            "images": st.sampled_from([["https://example.com/a.png"], ["not an image"], [], None, "x", _Ambiguous()]),
            "image_detail": st.sampled_from(["low", "huge", None]),
            "tool_schemas": st.one_of(
                st.sampled_from([[{"name": "f"}], ["not a schema"], None]), st.builds(lambda: iter([{"name": "f"}]))
            ),
            "response_format": st.sampled_from([{"answer": "str"}, {}, None, 5]),
            "handle_context": st.sampled_from(["replace", "extend", "other", None]),
        },
    ),
    st.fixed_dictionaries(
        {"assistant_response": st.sampled_from(["Done.", "", _Text("x"), _STORED])},
        optional={
            "sender": st.sampled_from(["assistant", None, 3.5]),
            "recipient": st.sampled_from(["user", None]),
            "metadata": _METADATA,
        },
    ),
    _ACTION_CALLS,
)


@given(_COMMON_CALLS)
def test_every_direct_road_builds_what_the_general_road_builds(drawn: dict[str, Any]) -> None:
    assert_the_direct_road_builds_what_the_general_road_builds(drawn)


@settings(max_examples=400)  # most draws are turned away: enough to reach every road often
@given(_ACTION_CALLS)
def test_a_tool_call_and_its_result_are_built_as_the_general_road_builds_them(drawn: dict[str, Any]) -> None:
    assert_the_direct_road_builds_what_the_general_road_builds(drawn)


@pytest.mark.parametrize(
    "arguments",
    [
        {"action_function": "search"},
        {"action_function": "search", "action_arguments": {"q": "x", "filters": [{"k": 1}]}},
        {"action_function": "search", "action_arguments": {}, "sender": "assistant", "recipient": "tool"},
        {"action_function": "search", "action_arguments": None, "metadata": {"run": {"step": [1]}}},
        {"action_request": _REQUEST, "action_output": {"hits": [1, 2]}},
        {"action_request": _REQUEST, "action_output": 0, "sender": "tool", "recipient": "assistant"},
        {"action_request": _REQUEST, "action_output": "", "metadata": {"ms": [3]}},
    ],
    ids=["function", "arguments", "routing", "metadata", "output", "falsy-output", "response-metadata"],
)
def test_a_tool_call_and_its_result_take_the_direct_road(arguments: dict[str, Any]) -> None:
    request = ActionRequest(content={"function": "search", "arguments": {"q": [1]}}, sender="assistant")
    twin = fastpath.copy_message(request)
    mine = {k: request if v is _REQUEST else v for k, v in arguments.items()}
    fast = factories.build_action(dict(mine))
    general = general_road({k: twin if v is _REQUEST else v for k, v in arguments.items()})
    assert fast is not None
    assert type(fast) is type(general)
    assert without_identity(fast) == without_identity(general)
    assert fast.model_fields_set == general.model_fields_set
    assert fast.rendered == general.rendered
    for name, held in (("action_arguments", "arguments"), ("action_output", "output")):
        if isinstance(arguments.get(name), dict) and arguments[name]:  # the caller's dict stays the caller's
            assert getattr(fast.content, held) == arguments[name]
            assert getattr(fast.content, held) is not arguments[name]
    if type(fast) is ActionResponse:
        assert request.content.action_response_id == str(fast.id)  # linked both ways
        assert fast.content.action_request_id == str(request.id)
        assert fast.content.arguments == request.content.arguments
        assert fast.content.arguments is not request.content.arguments  # the response's own copy
    if arguments.get("metadata"):
        assert fast.metadata["extra"] == arguments["metadata"]
        assert fast.metadata["extra"] is not arguments["metadata"]


def test_a_tool_result_refused_on_the_direct_road_links_nothing() -> None:
    manager = MessageManager()
    request = manager.add_message(action_function="search", action_arguments={"q": "x"})
    before = request.to_dict()
    with pytest.raises(ValueError, match="Invalid sender or recipient"):
        manager.add_message(action_request=request, action_output={"hits": []}, sender=3.5)
    with pytest.raises(TypeError, match="iterator"):
        manager.add_message(action_request=request, action_output={"rows": iter([1])})
    assert request.to_dict() == before  # not linked to a response that was never added
    assert list(manager.messages) == [request]


def assert_the_direct_road_builds_what_the_general_road_builds(drawn: dict[str, Any]) -> None:
    stored = Instruction(content={"instruction": "Stored.", "guidance": "Old."}, sender="user")
    request = ActionRequest(content={"function": "search", "arguments": {"q": [1]}}, sender="assistant")
    twins = {_STORED: fastpath.copy_message(stored), _REQUEST: fastpath.copy_message(request)}  # the same ids
    mine = {k: {_STORED: stored, _REQUEST: request}.get(v, v) if type(v) is object else v for k, v in drawn.items()}
    theirs = {k: twins.get(v, v) if type(v) is object else v for k, v in drawn.items()}
    direct_message: list[Any] = []
    direct = _outcome(lambda: direct_message.append(factories.build_common(dict(mine))) or direct_message[0])
    if direct == ("declined",):
        assert without_identity(request) == without_identity(twins[_REQUEST])  # declined: nothing linked
        return  # not a common call: the manager takes the general road itself
    general_message: list[Any] = []
    general = _outcome(lambda: general_message.append(general_road(theirs)) or general_message[0])
    assert direct == general
    # The request is linked to the new response on both roads, or left as it was on both.
    made = [found[0] if found else None for found in (direct_message, general_message)]
    for message, held in zip(made, (request, twins[_REQUEST]), strict=True):
        expected = str(message.id) if type(message) is ActionResponse else None
        assert held.content.action_response_id == expected


class _TaggedForCopies(Message):
    """A user's subclass that adds a mutable field and a private attribute."""

    tags: list[str] = pydantic.Field(default_factory=list)
    _hits: int = pydantic.PrivateAttr(default=0)


def test_a_user_subclass_is_copied_by_pydantic_with_its_own_fields() -> None:
    original = _TaggedForCopies(content={"k": "v"}, tags=["a"], recipient=None)
    copies = [fastpath.copy_message(original), *fastpath.message_copies(original, 2)]
    for copied in copies:
        assert type(copied) is _TaggedForCopies
        assert copied.model_dump() == original.model_dump()
        assert copied._hits == 0
        copied.tags.append("changed")
    assert original.tags == ["a"]  # no copy shares the subclass's list
    assert len({id(copied.tags) for copied in copies}) == len(copies)


class _Answer(pydantic.BaseModel):
    text: str = ""
    notes: list[str] = []


_HELD_LOCK = threading.Lock()


@pytest.mark.parametrize(
    "fields",
    [
        {"instruction": "plain", "context": [{"doc": 1, "nested": {"k": [1]}}], "tool_schemas": [{"name": "f"}]},
        {"instruction": "a class", "response_format": _Answer},
        {"instruction": "an instance", "response_format": _Answer(text="x", notes=["n"])},
        {"instruction": "a dict", "response_format": {"answer": "str", "items": ["a"]}},
        {"instruction": "not JSON", "context": [(1, 2), float("nan"), {1: "int key"}, uuid.UUID(int=7)]},
        {"instruction": "a lock", "context": [{"held": _HELD_LOCK}]},
        {"instruction": "images", "images": ["https://example.com/a.png"], "image_detail": "high"},
    ],
    ids=["plain", "model-class", "model-instance", "dict-format", "not-json", "lock", "images"],
)
def test_a_generated_contents_copy_is_deep_field_by_field_and_renders_the_same(fields: dict[str, Any]) -> None:
    content = InstructionContent.from_dict(fields)
    rendered_before = content.rendered
    copied = content.copy()
    assert type(copied) is InstructionContent
    assert repr(copied.to_dict()) == repr(content.to_dict())  # repr: NaN is not equal to itself
    assert copied.rendered == rendered_before
    if fields.get("response_format") is _Answer:
        assert copied.response_format is _Answer  # a class is shared, as deepcopy shares it
    elif "response_format" in fields:
        assert copied.response_format is not content.response_format
        assert copied.response_format == content.response_format
    if "lock" in fields["instruction"]:
        assert copied.prompt_context[0]["held"] is _HELD_LOCK  # what deepcopy cannot copy is shared
    for name in content.field_names():
        value = getattr(content, name)
        if isinstance(value, (list, dict, pydantic.BaseModel)):
            assert getattr(copied, name) is not value
    copied.prompt_context.append("only the copy's")
    assert "only the copy's" not in content.prompt_context
    assert content.rendered == rendered_before


def test_a_copy_builds_its_response_structure_from_its_own_format() -> None:
    content = InstructionContent.from_dict({"instruction": "i", "response_format": {"answer": "str"}})
    copied = content.copy()
    copied.response_format["answer"] = "int"  # a change inside the copy's format shows in its rendering alone
    assert "int" in copied.rendered
    assert "int" not in content.rendered


@dataclasses.dataclass(slots=True)
class _NotedInstruction(InstructionContent):
    notes: list[str] = dataclasses.field(default_factory=list)


def test_a_subclass_of_a_generated_content_is_deep_copied_with_what_it_adds() -> None:
    content = _NotedInstruction(instruction="i", notes=["a"])
    copied = content.copy()
    assert type(copied) is _NotedInstruction
    assert copied.notes == ["a"]
    assert copied.notes is not content.notes
    assert copied.instruction == "i"


def _containers(value: Any) -> set[int]:
    """The ids of `value` and of the lists and dicts it holds directly."""
    held = value if isinstance(value, list) else list(value.values())
    return {id(item) for item in (value, *held) if isinstance(item, (list, dict))}


@pytest.mark.parametrize(
    "value",
    [
        [{"doc": 1, "topic": "t", "score": 0.5, "none": None, "flag": True}, "note", 3],  # the flat road
        [{"doc": 1, "nested": [1]}],  # not flat: json_copy
        [{1: "int key"}],  # not JSON: deepcopy
        [{"x": float("nan")}],
        {"a": [{"b": 1}]},
        [],
    ],
    ids=["flat records", "nested", "int key", "nan", "dict", "empty"],
)
def test_deep_copy_equals_deepcopy_and_shares_no_container(value: Any) -> None:
    copied = fastpath.deep_copy(value)
    assert repr(copied) == repr(copy.deepcopy(value))  # repr: NaN != NaN
    assert not _containers(value) & _containers(copied)


def _lists_in(value: Any) -> list[list[Any]]:
    if isinstance(value, dict):
        return [found for item in value.values() for found in _lists_in(item)]
    if isinstance(value, list):
        return [value, *(found for item in value for found in _lists_in(item))]
    return []


@pytest.mark.parametrize(
    "value",
    [[{"doc": 1, "topic": "t"}], [{"doc": 1}, "note", 3, {"doc": 2}], [{"doc": [1, 2, [3]]}, [4]], []],
    ids=["one flat record", "flat records and atoms", "nested", "empty"],
)
def test_a_copied_list_keeps_no_spare_room(value: list[Any]) -> None:
    # A stored message keeps its copy for life: a list grown by append holds spare slots (a one-item
    # context took 88 B on 3.11 where 64 B hold it).
    copied = fastpath.deep_copy(value)
    message = MessageManager().add_message(instruction="x", context=value)
    for lists in (_lists_in(copied), _lists_in(message.content.prompt_context)):
        assert [sys.getsizeof(item) for item in lists] == [sys.getsizeof(item.copy()) for item in lists]


# Content given as text (and an instruction's context), as most content is given: the text-only road.
_GIVEN_VALUES = st.sampled_from(
    ["text", "", None, 5, _Text("sub"), ["x"], [{"doc": 1}], {"doc": [1]}, "0F8FAD5B-D9CB-469F-A165-70867728950E"]
)
_CONTENT_NAMES = st.sampled_from(
    ["instruction", "guidance", "plain_content", "context", "system_message", "assistant_response", "function",
     "output", "error", "action_request_id", "action_response_id", "arguments", "unknown"]
)  # fmt: skip
_CONTENT_CLASSES = [
    SystemContent,
    InstructionContent,
    AssistantResponseContent,
    ActionRequestContent,
    ActionResponseContent,
]


def _built(build: Any) -> tuple[Any, ...]:
    try:
        content = build()
    except (TypeError, ValueError) as error:
        return ("error", type(error), str(error))
    return ("content", type(content), content, content.to_dict(), content.rendered)


@given(st.sampled_from(_CONTENT_CLASSES), st.dictionaries(_CONTENT_NAMES, _GIVEN_VALUES, max_size=4))
def test_content_from_a_dict_is_what_the_full_build_makes(content_class: Any, data: dict[str, Any]) -> None:
    def full_build() -> Any:
        content_class._check_input_names(data)
        return content_class._from_input(_owned(data))

    assert _built(lambda: content_class.from_dict(dict(data))) == _built(full_build)


def test_content_from_text_and_a_context_keeps_its_own_context() -> None:
    context = [{"doc": {"pages": [1, 2]}}]
    content = InstructionContent.from_dict({"instruction": "Read.", "context": context})
    assert content.prompt_context == context
    assert content.prompt_context is not context
    assert content.prompt_context[0]["doc"]["pages"] is not context[0]["doc"]["pages"]
    record = {"doc": 1}
    assert InstructionContent.from_dict({"guidance": "g", "context": record}).prompt_context == [record]
    assert InstructionContent.from_dict({"guidance": "g", "context": record}).prompt_context[0] is not record


_ADDRESSES = st.sampled_from(["user", "assistant", "tool-7", "", None, 3.5, str(uuid.uuid4()), MessageRole.SYSTEM])
_CONSTRUCTOR_ARGUMENTS = st.fixed_dictionaries(
    {},
    optional={
        "content": st.one_of(
            st.dictionaries(_CONTENT_NAMES, _GIVEN_VALUES, max_size=3),
            st.sampled_from([None, "text", [1], {"instruction": "Q?", "context": [{"doc": 1}]}, {}]),
        ),
        "sender": _ADDRESSES,
        "recipient": _ADDRESSES,
        "channel": st.sampled_from(["c", None, 5, _Text("s")]),
        "metadata": st.sampled_from(
            [
                {"k": 1},
                {},
                {"nested": {"rows": [1]}},
                {"lion_class": "Instruction"},  # checked against the class and dropped: pydantic's road
                {"lion_class": "System"},
                {1: "not text"},
                {_Text("k"): 1},
                collections.OrderedDict(k=1),
                "not a mapping",
                None,
            ]
        ),
        "role": st.sampled_from(["user", "system"]),  # ignored: the class decides it
    },
)


@settings(max_examples=300)  # many draws are refused: enough to reach every road often
@given(st.sampled_from([System, Instruction, AssistantResponse, ActionRequest, ActionResponse]), _CONSTRUCTOR_ARGUMENTS)
def test_a_message_constructed_is_what_pydantics_validation_makes(kind: Any, arguments: dict[str, Any]) -> None:
    def made(build: Any) -> tuple[Any, ...]:
        try:
            message = build()
        except (TypeError, ValueError) as error:
            return ("error", type(error), str(error))
        fields = {name: value for name, value in message.__dict__.items() if name not in ("id", "created_at")}
        return ("message", type(message), fields, message.model_fields_set, message.model_extra)

    def by_pydantic() -> Any:  # pydantic's own __init__ (model_validate would call the class's)
        message = kind.__new__(kind)
        pydantic.BaseModel.__init__(message, **arguments)
        return message

    constructed = made(lambda: kind(**arguments))
    assert constructed == made(by_pydantic)
    assert constructed == made(lambda: kind.model_validate(arguments))  # which calls the class's __init__
    if constructed[0] == "message" and isinstance(arguments.get("content"), dict):  # the caller's stay the caller's
        held = {id(value) for value in _containers_in(arguments["content"])}
        assert held.isdisjoint(id(value) for value in _containers_in(_content_values(kind(**arguments))))
    given = arguments.get("metadata")
    if constructed[0] == "message" and isinstance(given, dict):  # a new dict, its values shared, as pydantic's
        message = kind(**arguments)
        assert message.metadata is not given
        assert [type(key) for key in message.metadata] == [type(key) for key in made(by_pydantic)[2]["metadata"]]
        assert all(message.metadata[key] is value for key, value in given.items() if key != "lion_class")


@dataclasses.dataclass(slots=True)
class _NeedsAnInstruction(InstructionContent):
    """A user's content subclass whose default (no instruction) is not valid."""

    def _normalize(self) -> None:
        if not self.instruction:
            raise ValueError("an instruction is required")
        InstructionContent._normalize(self)


def test_a_content_subclass_given_text_is_built_by_its_constructor_never_from_a_default() -> None:
    for data in ({"instruction": "Summarise."}, {"instruction": "Summarise.", "context": [{"doc": 1}]}):
        made = _NeedsAnInstruction.from_dict(data)
        assert type(made) is _NeedsAnInstruction
        assert made.instruction == "Summarise."
        assert made.prompt_context == data.get("context", [])
    assert _NeedsAnInstruction._new_with_plain({"instruction": "x"}) is None


def test_the_text_and_context_road_reads_the_plain_text_fields() -> None:
    from lionmsg.runtime.content import instruction

    assert InstructionContent._PLAIN_FIELDS | {"context"} == instruction._TEXT_AND_CONTEXT


class _ReadsContext(Instruction):
    """A user's subclass whose validator reads pydantic's validation context."""

    @pydantic.field_validator("channel", mode="before")
    @classmethod
    def _tag(cls, value: Any, info: pydantic.ValidationInfo) -> Any:
        return f"{value}|{(info.context or {}).get('k')}"


def test_model_validate_keeps_pydantics_own_validation_and_its_options() -> None:
    # The constructor's direct road is no custom __init__ to pydantic: model_validate never goes through it.
    assert Instruction.__pydantic_custom_init__ is False
    assert _ReadsContext.model_validate({"channel": "a"}, context={"k": 1}).channel == "a|1"
    assert _ReadsContext.model_validate_json('{"channel": "a"}', context={"k": 2}).channel == "a|2"
    with pytest.raises(pydantic.ValidationError) as refused:
        Instruction.model_validate({"id": str(uuid.uuid4())}, strict=True)  # text is no UUID in strict mode
    assert refused.value.errors()[0]["loc"] == ("id",)
    with pytest.raises(pydantic.ValidationError):
        Instruction.model_validate({1: 2})  # a key that is not text: pydantic's error, not a TypeError


def _made_on_every_direct_road() -> dict[str, Message]:
    manager = MessageManager()
    added = manager.add_message(instruction="Summarise.", context=[{"doc": 1}], sender="user")
    constructed = Instruction(content={"instruction": "Summarise."}, sender="user")
    broadcast = fastpath.assemble(Message, {"seq": 1}, uuid.uuid4(), None, None)
    return {
        "add_message": added,
        "constructor": constructed,
        "from_dict": Instruction.from_dict(added.to_dict()),
        "copy_message": fastpath.copy_message(added),
        "message_copies": fastpath.message_copies(broadcast, 2)[1],
    }


def test_messages_built_on_the_direct_roads_share_their_class_key_table() -> None:
    # CPython 3.10-3.12 keep one table of field names per class for dicts built as the roads build them: the
    # dict holds only its values, smaller than an ordinary copy of it. 3.13 does not for classes with slots.
    for _ in range(64):  # a class's first instances have room for more keys: past them, the steady size
        made = _made_on_every_direct_road()
    sharing = sys.version_info < (3, 13)
    for road, message in made.items():
        fields = message.__dict__
        assert (sys.getsizeof(fields) < sys.getsizeof(dict(fields))) is sharing, road
        assert list(fields) == list(Message.model_fields), road


def test_initialising_a_message_again_puts_a_new_fields_dict_in_place() -> None:
    message = Instruction(content={"instruction": "first"}, sender="user")
    first = message.__dict__
    kept = dict(first)
    message.__init__(content={"instruction": "second"})  # type: ignore[misc]
    assert message.__dict__ is not first
    assert first == kept  # whoever read the old dict keeps what it held
    by_pydantic = Instruction(content={"instruction": "first"}, sender="user")
    pydantic.BaseModel.__init__(by_pydantic, content={"instruction": "second"})
    assert message.content.instruction == "second"
    assert message.model_dump(exclude={"id", "created_at"}) == by_pydantic.model_dump(exclude={"id", "created_at"})
    assert message.model_fields_set == by_pydantic.model_fields_set == {"content"}
