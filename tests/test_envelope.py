"""ADR-0006 D1 "Exact semantics" (one test group per bullet), D6, and design.md §6 decisions 2, 3, 12."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from uuid import UUID, uuid4

import pytest
from pydantic import ValidationError, field_validator

from lionmsg import (
    ActionRequest,
    ActionRequestContent,
    ActionResponse,
    ActionResponseContent,
    AssistantResponse,
    AssistantResponseContent,
    Exchange,
    Instruction,
    InstructionContent,
    Message,
    MessageManager,
    MessageRole,
    Node,
    Progression,
    RoledMessage,
    Sendable,
    System,
    SystemContent,
)
from lionmsg.runtime import envelope, fastpath
from lionmsg.runtime.wire import UNWRITABLE_DEPTH
from tests.conftest import fields_of, value_id
from tests.samples import rich_messages

TYPED = [
    (System, MessageRole.SYSTEM, SystemContent),
    (Instruction, MessageRole.USER, InstructionContent),
    (AssistantResponse, MessageRole.ASSISTANT, AssistantResponseContent),
    (ActionRequest, MessageRole.ACTION, ActionRequestContent),
    (ActionResponse, MessageRole.ACTION, ActionResponseContent),
]
ALL_CLASSES = [Message, *(cls for cls, _, _ in TYPED)]


# -- construction and deserialization: role comes from the class ---------------------------------


@pytest.mark.parametrize(("cls", "role", "content_type"), TYPED)
def test_supplied_role_is_ignored_at_construction(cls: type[Message], role: MessageRole, content_type: type) -> None:
    for forged in ("assistant", "user", "system", "nonsense"):
        assert cls(role=forged).role is role


def test_generic_message_role_is_unset_whatever_is_supplied() -> None:
    assert Message(role="assistant").role is MessageRole.UNSET
    assert Message().role is MessageRole.UNSET


@pytest.mark.parametrize("cls", ALL_CLASSES)
def test_role_is_ignored_by_model_validate_and_from_dict(cls: type[Message]) -> None:
    original = cls()
    forged = {**original.to_dict(), "role": "assistant" if cls is not AssistantResponse else "user"}
    assert cls.model_validate(forged).role is original.role
    assert Message.from_dict(forged).role is original.role
    assert type(Message.from_dict(forged)) is cls


def test_role_is_read_only() -> None:
    message = Instruction()
    with pytest.raises(AttributeError):
        message.role = MessageRole.ASSISTANT  # type: ignore[misc]


# -- serialization: every serializer writes the role, and they agree ------------------------------


@pytest.mark.parametrize("cls", ALL_CLASSES)
def test_every_serializer_carries_role_and_they_agree(cls: type[Message]) -> None:
    message = cls(sender=uuid4(), recipient="alice", channel="c", metadata={"k": [1]})
    record = message.to_dict()
    assert record["role"] == cls().role.value
    assert list(record) == [
        "id",
        "created_at",
        "metadata",
        "content",
        "embedding",
        "sender",
        "recipient",
        "channel",
        "role",
    ]
    assert json.loads(message.model_dump_json()) == record
    assert json.loads(message.to_json()) == record
    assert message.model_dump(mode="json") == record
    # Python mode spells ids, addresses and the role as text too, as LionAGI's model_dump() does, so
    # json.dumps(m.model_dump()) works and model_dump() is the record itself.
    assert message.model_dump() == message.to_dict(mode="python") == record
    assert json.loads(json.dumps(message.model_dump())) == record
    assert record["metadata"] == {"k": [1], "lion_class": cls.__name__}


def test_deserializing_serialized_output_ignores_role_again() -> None:
    record = AssistantResponse(content={"assistant_response": "hi"}).to_dict()
    record["role"] = "user"
    loaded = AssistantResponse.from_dict(record)
    assert type(loaded) is AssistantResponse
    assert loaded.role is MessageRole.ASSISTANT
    assert loaded.to_dict()["role"] == "assistant"


# -- sender and recipient normalization -----------------------------------------------------------


@dataclass
class _HasId:
    id: Any


class _UUIDSubclass(UUID):
    """What libraries such as uuid6 hand out: a UUID subclass."""


NODE = Node()
SOME_UUID = uuid4()
NORMALIZATION = [
    pytest.param(MessageRole.USER, MessageRole.USER, id="role stays a role"),
    pytest.param(SOME_UUID, SOME_UUID, id="uuid stays a uuid"),
    pytest.param(_UUIDSubclass(int=SOME_UUID.int), SOME_UUID, id="a uuid subclass becomes a plain uuid"),
    pytest.param(_HasId(_UUIDSubclass(int=SOME_UUID.int)), SOME_UUID, id="an id that is a uuid subclass too"),
    pytest.param(NODE, NODE.id, id="observable element becomes its uuid"),
    pytest.param(_HasId(SOME_UUID), SOME_UUID, id="object with a uuid id becomes it"),
    pytest.param(_HasId(str(SOME_UUID)), SOME_UUID, id="object with a uuid-string id becomes the uuid"),
    pytest.param("user", MessageRole.USER, id="role string becomes the role"),
    pytest.param("unset", MessageRole.UNSET, id="unset string becomes UNSET"),
    pytest.param(str(SOME_UUID), SOME_UUID, id="uuid string becomes a uuid"),
    pytest.param(SOME_UUID.hex, SOME_UUID, id="bare-hex uuid string becomes a uuid"),
    pytest.param("alice", "alice", id="plain string stays"),
    pytest.param("USER", "USER", id="role strings are case-sensitive"),
    pytest.param("", "", id="empty string stays"),
    pytest.param(None, None, id="explicit None is kept"),
]


@pytest.mark.parametrize(("given", "stored"), NORMALIZATION)
@pytest.mark.parametrize("field", ["sender", "recipient"])
def test_sender_recipient_normalization_at_construction(field: str, given: Any, stored: Any) -> None:
    value = getattr(Message(**{field: given}), field)
    assert value == stored
    assert type(value) is type(stored)


@pytest.mark.parametrize(
    "spelled",
    [SOME_UUID.hex, "{" + str(SOME_UUID) + "}", "urn:uuid:" + str(SOME_UUID)],
    ids=["bare hex", "braces", "urn"],
)
@pytest.mark.parametrize("road", ["fast", "general"])
@pytest.mark.parametrize("field", ["sender", "recipient"])
def test_a_record_keeps_an_address_that_is_not_a_canonical_uuid_as_a_name(field: str, road: str, spelled: str) -> None:
    # The schema: a UUID string (its canonical form) becomes a UUID, every other string stays a plain
    # name. (Python input is friendlier: Message(sender=<bare hex>) stores the UUID, as LionAGI does.)
    record = Message().to_dict()
    record[field] = spelled
    if road == "general":
        record["embedding"] = [1]  # an integer: the one-pass loader declines, pydantic's road loads it
    loaded = Message.from_dict(record)
    assert getattr(loaded, field) == spelled
    assert type(getattr(loaded, field)) is str
    assert loaded.to_dict()[field] == spelled


@pytest.mark.parametrize("field", ["sender", "recipient"])
def test_a_uuid_subclass_address_writes_a_json_record(field: str) -> None:
    message = Message(**{field: _UUIDSubclass(int=SOME_UUID.int)})
    record = message.to_dict()
    assert record[field] == str(SOME_UUID)
    assert record == message.model_dump(mode="json") == json.loads(message.to_json())


@pytest.mark.parametrize(("given", "stored"), NORMALIZATION)
@pytest.mark.parametrize("field", ["sender", "recipient"])
def test_sender_recipient_normalization_on_assignment(field: str, given: Any, stored: Any) -> None:
    message = Instruction()
    setattr(message, field, given)
    value = getattr(message, field)
    assert value == stored
    assert type(value) is type(stored)


INVALID_ADDRESSES = [123, 1.5, True, [1], {"a": 1}, b"x", object(), _HasId(5), _HasId("not-a-uuid")]


@pytest.mark.parametrize("bad", INVALID_ADDRESSES, ids=value_id)
@pytest.mark.parametrize("field", ["sender", "recipient"])
def test_invalid_sender_or_recipient_raises_value_error(field: str, bad: Any) -> None:
    with pytest.raises(ValueError, match="Invalid sender or recipient") as raised:
        Message(**{field: bad})
    assert isinstance(raised.value, ValidationError)
    assert raised.value.errors()[0]["loc"] == (field,)


@pytest.mark.parametrize("bad", INVALID_ADDRESSES, ids=value_id)
def test_invalid_assignment_raises_and_changes_nothing(bad: Any) -> None:
    message = Instruction(sender="alice", recipient=SOME_UUID)
    before = fields_of(message)
    with pytest.raises(ValueError, match="Invalid sender or recipient"):
        message.sender = bad
    with pytest.raises(ValueError, match="Invalid sender or recipient"):
        message.recipient = bad
    assert fields_of(message) == before


# -- explicit None versus absent ------------------------------------------------------------------


def test_omitted_sender_recipient_are_unset_and_explicit_none_is_kept() -> None:
    assert (Message().sender, Message().recipient) == (MessageRole.UNSET, MessageRole.UNSET)
    explicit = Message(sender=None, recipient=None)
    assert (explicit.sender, explicit.recipient) == (None, None)


def test_non_null_addresses_serialize_as_strings_and_none_as_null() -> None:
    node_id = uuid4()
    record = Message(sender=node_id, recipient=None).to_dict()
    assert record["sender"] == str(node_id)
    assert record["recipient"] is None
    record = Message(sender=MessageRole.SYSTEM, recipient="bob").to_dict()
    assert (record["sender"], record["recipient"]) == ("system", "bob")
    assert Message().to_dict()["sender"] == "unset"


@pytest.mark.parametrize("value", ["", "alice", None, MessageRole.UNSET, MessageRole.USER, SOME_UUID])
def test_addresses_survive_a_round_trip_exactly(value: Any) -> None:
    # design.md §6.3: "" stays "" -- a direct message never turns into a broadcast.
    message = Message(sender=value, recipient=value)
    for loaded in (Message.from_dict(message.to_dict()), Message.from_json(message.to_json())):
        assert loaded.sender == value
        assert loaded.recipient == value
        assert type(loaded.recipient) is type(value)
        assert loaded.is_direct is message.is_direct


# -- routing predicates ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("recipient", "broadcast"),
    [(None, True), (MessageRole.UNSET, False), ("alice", False), ("", False), (SOME_UUID, False)],
)
def test_routing_predicates(recipient: Any, broadcast: bool) -> None:
    message = Message(recipient=recipient)
    assert message.is_broadcast is broadcast
    assert message.is_direct is (not broadcast)


def test_default_recipient_unset_counts_as_direct() -> None:
    assert Message().is_direct
    assert not Message().is_broadcast


# -- channel --------------------------------------------------------------------------------------


def test_channel_is_optional_metadata_and_round_trips() -> None:
    assert Message().channel is None
    message = Message(channel="ops")
    assert message.to_dict()["channel"] == "ops"
    assert Message.from_dict(message.to_dict()).channel == "ops"


def test_channel_must_be_a_string() -> None:
    with pytest.raises(ValidationError) as raised:
        Message(channel=5)
    assert raised.value.errors()[0]["loc"] == ("channel",)


# -- generic versus typed content -----------------------------------------------------------------


@pytest.mark.parametrize("content", [{"a": 1}, [1, 2], 5, "text", (1, 2), None, object()], ids=value_id)
def test_generic_message_keeps_content_as_given(content: Any) -> None:
    assert Message(content=content).content is content


_ITERATOR_REFUSED = r"^a message cannot keep an iterator \(\w+\): writing it would use it up; pass a list of its items$"


@pytest.mark.parametrize(
    "content",
    [
        lambda: iter([1, 2]),
        lambda: (n for n in range(2)),
        lambda: map(str, "ab"),
        lambda: {"rows": iter([1])},
        lambda: [1, {"rows": (n for n in range(2))}],
        lambda: ({"rows": iter([])},),
    ],
    ids=["list-iterator", "generator", "map", "in-a-dict", "deeper-in-a-list", "in-a-tuple"],
)
def test_generic_content_that_is_or_holds_an_iterator_is_refused_on_every_road(content: Callable[[], Any]) -> None:
    # Review ar F2: the generic Message kept it, and the first record written used it up (an Exchange's
    # queued mail then came back empty from the next snapshot).
    with pytest.raises(TypeError, match=_ITERATOR_REFUSED):
        Message(content=content())
    with pytest.raises(TypeError, match=_ITERATOR_REFUSED):
        Message.model_validate({"content": content()})
    record = Message(content=[1]).to_dict()
    record["content"] = content()
    with pytest.raises(TypeError, match=_ITERATOR_REFUSED):
        Message.from_dict(record)
    message = Message(content={"kept": 1})
    with pytest.raises(TypeError, match=_ITERATOR_REFUSED):
        message.content = content()
    assert message.content == {"kept": 1}
    exchange = Exchange()
    sender = exchange.register(uuid4()).owner()
    before = exchange.to_dict()["flows"]
    for recipient, channel in ((uuid4(), None), (None, None), ("someone", "ops")):
        with pytest.raises(TypeError, match=_ITERATOR_REFUSED):
            exchange.send(sender, recipient, content(), channel=channel)
    assert exchange.to_dict()["flows"] == before


@pytest.mark.parametrize(("cls", "role", "content_type"), TYPED)
def test_typed_content_coercion(cls: type[Message], role: MessageRole, content_type: type) -> None:
    instance = content_type()
    assert cls(content=instance).content is instance
    assert isinstance(cls(content={}).content, content_type)
    assert cls(content=None).content == content_type()
    assert cls().content == content_type()


@pytest.mark.parametrize(("cls", "role", "content_type"), TYPED)
@pytest.mark.parametrize("bad", ["text", 5, [1], (1,), object()], ids=value_id)
def test_typed_content_rejects_other_values_with_type_error(
    cls: type[Message], role: MessageRole, content_type: type, bad: Any
) -> None:
    with pytest.raises(TypeError, match=f"content must be dict or {content_type.__name__} instance"):
        cls(content=bad)


def test_typed_content_rejects_another_kinds_content() -> None:
    with pytest.raises(TypeError, match="content must be dict or InstructionContent instance"):
        Instruction(content=AssistantResponseContent())


def test_typed_content_dict_with_unknown_field_is_rejected() -> None:
    with pytest.raises(ValidationError, match="has no field"):
        Instruction(content={"instruction": "x", "bogus": 1})


def test_unknown_content_keys_of_mixed_types_are_named_not_a_type_error() -> None:
    content = {1: "a", "b": 2}
    with pytest.raises(ValidationError, match=r"InstructionContent has no field\(s\) 'b', 1 "):
        Instruction(content=content)
    record = {"id": str(uuid4()), "created_at": 1.0, "content": content}
    with pytest.raises(ValidationError, match=r"InstructionContent has no field 'b' \(and 1\)") as raised:
        Instruction.from_dict(record)
    assert raised.value.errors()[0]["loc"] == ("content", "b")
    assert content == {1: "a", "b": 2}


# -- rendering ------------------------------------------------------------------------------------


class _Renders:
    rendered = "from the content"


def test_rendering_delegates_to_content_or_falls_back_to_str() -> None:
    assert Message(content=_Renders()).rendered == "from the content"
    assert Message(content={"a": 1}).rendered == "{'a': 1}"
    assert Message(content=0).rendered == "0"
    assert Message(content=None).rendered == ""
    assert Message().rendered == ""


def test_generic_content_nested_too_deeply_to_render_is_a_value_error_and_no_chat_message() -> None:
    nested: Any = "leaf"
    for _ in range(100_000):  # too deep on every supported Python: 3.12+ let str() recurse past 5,000 levels
        nested = [nested]
    message = Message(content=nested, recipient="user")
    with pytest.raises(ValueError, match=r"^cannot render a value nested this deeply$"):
        message.rendered  # noqa: B018 - the property is what is tested
    assert message.chat_msg is None


# -- chat projection ------------------------------------------------------------------------------


class _Broken:
    @property
    def rendered(self) -> str:
        raise RuntimeError("cannot render")


def test_chat_msg_is_role_and_rendered_text() -> None:
    assert Message(content="hi").chat_msg == {"role": "unset", "content": "hi"}
    assert AssistantResponse(content={"assistant_response": "ok"}).chat_msg == {
        "role": "assistant",
        "content": AssistantResponse(content={"assistant_response": "ok"}).rendered,
    }


def test_chat_msg_contains_projection_failures_as_none() -> None:
    broken = Message(content=_Broken())
    assert broken.chat_msg is None
    with pytest.raises(RuntimeError, match="cannot render"):
        _ = broken.rendered


# -- no stale rendering (design.md §6.12) ---------------------------------------------------------


def test_in_place_mutation_of_generic_content_shows_in_rendering() -> None:
    message = Message(content={"a": [1]})
    assert message.chat_msg == {"role": "unset", "content": "{'a': [1]}"}
    message.content["a"].append(2)
    assert message.chat_msg == {"role": "unset", "content": "{'a': [1, 2]}"}
    listed = Message(content=[1])
    assert listed.chat_msg is not None
    listed.content.append(2)
    assert listed.chat_msg == {"role": "unset", "content": "[1, 2]"}


def test_in_place_mutation_of_typed_content_shows_in_rendering() -> None:
    message = AssistantResponse(content={"assistant_response": "one"})
    first = message.rendered
    message.content.assistant_response = "two"
    assert message.rendered != first
    assert "two" in str(message.rendered)


# -- update() -------------------------------------------------------------------------------------


def test_update_changes_sender_and_recipient_only_to_truthy_values() -> None:
    message = Instruction(sender="alice", recipient="bob")
    message.update(sender=None, recipient=None)
    assert (message.sender, message.recipient) == ("alice", "bob")
    message.update(sender="", recipient=0)
    assert (message.sender, message.recipient) == ("alice", "bob")
    target = uuid4()
    message.update(sender="carol", recipient=str(target))
    assert (message.sender, message.recipient) == ("carol", target)
    message.update(sender=NODE)
    assert message.sender == NODE.id


def test_update_rebuilds_content_and_keeps_other_fields() -> None:
    message = ActionRequest(content={"function": "f", "arguments": {"x": 1}, "action_response_id": str(SOME_UUID)})
    before = message.content
    message.update(function="g")
    assert message.content is not before
    assert message.content.function == "g"
    assert message.content.arguments == {"x": 1}
    assert message.content.action_response_id == str(SOME_UUID)
    assert before.function == "f"


def test_update_with_invalid_input_changes_nothing() -> None:
    message = Instruction(content={"instruction": "q"}, sender="alice", recipient="bob")
    before = fields_of(message)
    content_before = message.content.to_dict()
    with pytest.raises(ValueError, match="Invalid sender or recipient"):
        message.update(sender=123, instruction="changed")
    with pytest.raises(ValueError, match="has no field"):
        message.update(recipient="carol", bogus=1)
    with pytest.raises(ValueError, match="must be a string or null"):
        message.update(sender="dave", instruction=5)
    assert fields_of(message) == before
    assert message.content.to_dict() == content_before


def test_update_of_generic_content_fields_is_a_type_error_and_changes_nothing() -> None:
    message = Message(content={"a": 1}, sender="alice")
    with pytest.raises(TypeError, match="no fields to update"):
        message.update(sender="bob", a=2)
    assert message.content == {"a": 1}
    assert message.sender == "alice"


class _Audited(Instruction):
    """A user's subclass whose validators refuse a sender and a guidance text."""

    @field_validator("sender", mode="after")
    @classmethod
    def _no_eve(cls, value: Any) -> Any:
        if value == "eve":
            raise ValueError("eve may not send")
        return value

    @field_validator("content", mode="after")
    @classmethod
    def _no_shouting(cls, value: InstructionContent) -> InstructionContent:
        if value.guidance is not None and value.guidance.isupper():
            raise ValueError("no shouting")
        return value

    @field_validator("metadata", mode="after")
    @classmethod
    def _no_secrets(cls, value: dict[str, Any]) -> dict[str, Any]:
        if "secret" in value.get("extra", {}):
            raise ValueError("no secrets in metadata")
        return value


@pytest.mark.parametrize(
    ("changes", "refusal"),
    [
        ({"sender": "eve"}, "eve may not send"),
        ({"guidance": "LOUD"}, "no shouting"),
        # The sender passes its validator and is assigned before the content's refuses: undone.
        ({"sender": "carol", "guidance": "LOUD"}, "no shouting"),
    ],
)
def test_update_of_a_subclass_runs_its_validators_and_a_refusal_changes_nothing(
    changes: dict[str, Any], refusal: str
) -> None:
    message = _Audited(content={"instruction": "q"}, sender="alice")
    before, fields_set = fields_of(message), set(message.model_fields_set)
    with pytest.raises(ValidationError, match=refusal):
        message.update(**changes)
    assert fields_of(message) == before
    assert message.model_fields_set == fields_set
    message.update(sender="carol", guidance="Quietly.")
    assert (message.sender, message.content.guidance) == ("carol", "Quietly.")
    assert message.model_fields_set == {"content", "sender"}


def test_add_message_revising_or_tagging_a_subclass_runs_its_validators_and_a_refusal_changes_nothing() -> None:
    manager = MessageManager()
    message = _Audited(content={"instruction": "q"}, sender="alice")
    manager.add_message(instruction=message)
    before = fields_of(message)
    with pytest.raises(ValidationError, match="no shouting"):
        manager.add_message(instruction=message, guidance="LOUD")
    with pytest.raises(ValidationError, match="no secrets in metadata"):
        manager.add_message(instruction=message, metadata={"secret": 1})
    # A revision the validators accept, with metadata they refuse: refused before the revision is made.
    with pytest.raises(ValidationError, match="no secrets in metadata"):
        manager.add_message(instruction=message, guidance="Quietly.", metadata={"secret": 1})
    assert fields_of(message) == before
    assert list(manager.messages) == [message]
    manager.add_message(instruction=message, guidance="Quietly.", metadata={"note": 1})
    assert (message.content.guidance, message.metadata["extra"]) == ("Quietly.", {"note": 1})


# -- clone() --------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", ALL_CLASSES)
def test_clone_is_same_class_new_identity_with_source_recorded(cls: type[Message]) -> None:
    source = cls(sender="alice", recipient=None, channel="c", metadata={"k": 1}, embedding=[0.5])
    clone = source.clone()
    assert type(clone) is cls
    assert clone.id != source.id
    assert clone.created_at >= source.created_at
    assert clone.metadata == {"k": 1, "clone_from": str(source.id)}
    assert source.metadata == {"k": 1}
    assert (clone.sender, clone.recipient, clone.channel, clone.embedding) == ("alice", None, "c", [0.5])
    assert clone.content == source.content
    if source.content is not None:
        assert clone.content is not source.content
    assert "clone_from" not in source.metadata


def test_a_clone_keeps_a_name_held_as_text_that_uuid_would_parse() -> None:
    record = Instruction(content={"instruction": "q"}).to_dict()
    record["sender"] = "0123456789abcdef0123456789abcdef"  # names: only the canonical form is a UUID
    record["recipient"] = "{01234567-89ab-cdef-0123-456789abcdef}"
    clone = Message.from_dict(record).clone()
    assert (clone.sender, clone.recipient) == (record["sender"], record["recipient"])
    assert type(clone.sender) is str
    assert type(clone.recipient) is str
    assert (clone.to_dict()["sender"], clone.to_dict()["recipient"]) == (record["sender"], record["recipient"])


def test_clone_of_generic_content_is_a_deep_copy() -> None:
    source = Message(content={"a": [1]})
    clone = source.clone()
    clone.content["a"].append(2)
    assert source.content == {"a": [1]}


def test_clone_copies_generic_content_and_metadata_as_deep_as_a_record_can_be() -> None:
    nested: Any = "leaf"
    for _ in range(600):  # past what copy.deepcopy reaches (two frames per level); records load it
        nested = [nested]
    source = Message.from_json(Message(content={"a": nested}, metadata={"b": nested}).to_json())
    clone = source.clone()
    assert clone.content == {"a": nested}
    assert clone.metadata == {"b": nested, "clone_from": str(source.id)}
    assert clone.content["a"] is not source.content["a"]
    assert clone.metadata["b"] is not source.metadata["b"]
    assert "clone_from" not in source.metadata


def test_typed_content_deeper_than_deepcopy_reaches_is_cloned_and_copied() -> None:
    nested: Any = "leaf"
    for _ in range(700):  # deepcopy recurses twice per level: ~500 levels is its limit
        nested = [nested]
    source = Instruction(content={"instruction": "q", "context": [nested], "response_format": {"a": 1}})
    for copied in (source.clone(), fastpath.copy_message(source)):
        assert copied.content.prompt_context == [nested]
        assert copied.content.prompt_context[0] is not nested
        copied.content.response_format["a"] = 2
        assert source.content.response_format == {"a": 1}


_LOCK = threading.Lock()


@pytest.mark.parametrize(
    ("source", "held"),
    [
        (Instruction(content={"instruction": "q", "context": [_LOCK]}), lambda m: m.content.prompt_context[0]),
        (ActionResponse(content={"function": "f", "output": {"held": _LOCK}}), lambda m: m.content.output["held"]),
        (Message(content={"lock": _LOCK}), lambda m: m.content["lock"]),
        (Instruction(content={"instruction": "q"}, metadata={"lock": _LOCK}), lambda m: m.metadata["lock"]),
    ],
    ids=["instruction-context", "action-output", "generic-content", "metadata"],
)
def test_a_value_deepcopy_cannot_copy_is_shared_by_a_clone_as_construction_kept_it(source: Message, held: Any) -> None:
    assert held(source) is _LOCK  # kept as given when built
    clone = source.clone()
    assert held(clone) is _LOCK
    assert clone.metadata["clone_from"] == str(source.id)
    assert "clone_from" not in source.metadata


@pytest.mark.parametrize("place", ["typed-content", "generic-content", "metadata"])
def test_a_clone_nested_deeper_than_records_are_written_is_the_record_writers_value_error(place: str) -> None:
    nested: Any = "leaf"
    for _ in range(3000):
        nested = {"k": nested}
    source = {
        "typed-content": Instruction(content={"instruction": "q", "context": [nested]}),
        "generic-content": Message(content={"a": nested}),
        "metadata": Message(content={"a": 1}, metadata={"b": nested}),
    }[place]
    with pytest.raises(ValueError, match=f"^{re.escape(UNWRITABLE_DEPTH)}$"):
        source.to_dict()
    with pytest.raises(ValueError, match=f"^{re.escape(UNWRITABLE_DEPTH)}$"):
        source.clone()


def _without_identity(message: Message) -> dict[str, Any]:
    record = message.to_dict()
    del record["id"], record["created_at"], record["metadata"]["clone_from"]
    return record


@pytest.mark.parametrize("source", rich_messages(), ids=lambda m: type(m).__name__)
def test_a_clone_built_directly_is_the_one_the_constructor_builds(
    source: Message, monkeypatch: pytest.MonkeyPatch
) -> None:
    direct = source.clone()
    monkeypatch.setattr(envelope, "clone_directly", lambda *arguments: None)  # the constructor's road
    constructed = source.clone()
    assert _without_identity(direct) == _without_identity(constructed)
    assert direct.model_fields_set == constructed.model_fields_set
    assert list(direct.__dict__) == list(constructed.__dict__)
    assert [type(value) for value in direct.__dict__.values()] == [type(v) for v in constructed.__dict__.values()]
    assert (direct.__pydantic_extra__, direct.__pydantic_private__) == (None, None)
    assert direct.metadata["clone_from"] == constructed.metadata["clone_from"] == str(source.id)


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (lambda m: m.metadata.update(lion_class="System"), ValueError, "Metadata class mismatch"),
        (lambda m: m.metadata.update({1: "not text"}), ValidationError, "metadata"),
        (lambda m: m.embedding.append(float("nan")), ValidationError, "embedding"),
        (lambda m: m.embedding.append("0.5"), ValidationError, "embedding"),
    ],
    ids=["other-lion-class", "int-key", "nan", "text"],
)
def test_a_clone_of_values_changed_in_place_is_refused_as_the_constructor_refuses_them(
    change: Any, error: type[Exception], message: str
) -> None:
    source = Instruction(content={"instruction": "q"}, metadata={"k": 1}, embedding=[0.5])
    change(source)
    with pytest.raises(error, match=message):
        source.clone()


def test_a_lion_class_naming_the_class_put_in_metadata_is_dropped_by_the_clone() -> None:
    source = Instruction(content={"instruction": "q"})
    source.metadata["lion_class"] = "Instruction"
    assert source.clone().metadata == {"clone_from": str(source.id)}


# -- D6: compatibility labels ---------------------------------------------------------------------


def test_roled_message_is_message() -> None:
    assert RoledMessage is Message
    assert RoledMessage().role is MessageRole.UNSET


def test_sendable_is_a_marker_without_abstract_members() -> None:
    assert Sendable.__abstractmethods__ == frozenset()
    assert isinstance(Message(), Sendable)
    assert issubclass(Instruction, Sendable)

    class Bare(Sendable):
        pass

    assert isinstance(Bare(), Sendable)
    assert not hasattr(Bare(), "sender")


def test_message_role_vocabulary() -> None:
    assert [r.value for r in MessageRole] == ["system", "user", "assistant", "unset", "action"]
    assert MessageRole.allowed() == ("system", "user", "assistant", "unset", "action")
    assert MessageRole("user") is MessageRole.USER
    assert isinstance(MessageRole.USER, str)


def test_class_defaults_route_system_and_assistant() -> None:
    system = System()
    assert (system.sender, system.recipient) == (MessageRole.SYSTEM, MessageRole.ASSISTANT)
    assert System(sender=None, recipient=None).recipient is None
    assert AssistantResponse().recipient is MessageRole.USER
    assert isinstance(Message().id, UUID)


def test_created_datetime_is_created_at_as_a_utc_datetime_as_in_lionagi() -> None:
    message = Instruction.from_dict({**Instruction().to_dict(), "created_at": 1700000000.5})
    assert message.created_datetime == datetime(2023, 11, 14, 22, 13, 20, 500000, tzinfo=timezone.utc)
    assert Progression().created_datetime.tzinfo is timezone.utc
    assert "created_datetime" not in message.to_dict()  # a view, not a field


def test_image_content_is_the_chat_messages_image_parts_as_in_lionagi() -> None:
    image = "data:image/png;base64,iVBORw0KGgo="
    message = Instruction(content={"instruction": "Describe", "images": [image], "image_detail": "low"})
    assert message.image_content == [{"type": "image_url", "image_url": {"url": image, "detail": "low"}}]
    assert Instruction(content={"instruction": "Describe"}).image_content is None  # text only
    assert AssistantResponse(content={"assistant_response": "hi"}).image_content is None
    message.content.images.append("ftp://not/an/image")  # changed in place: rendering refuses it
    assert message.chat_msg is None
    assert message.image_content is None


def test_every_change_swaps_in_a_new_fields_dict_and_leaves_the_one_a_reader_holds_as_it_was() -> None:
    # A reader (a record, a dump, a clone) reads the fields dict once, then several of its values: it sees
    # the message as it was, never half of a change nor one address of a change beside the other of the
    # next one (a one-address update wrote in place before review ap).
    message = Instruction(content={"instruction": "q"}, recipient="assistant")
    changes: list[Callable[[], None]] = [
        lambda: message.update(sender="user"),
        lambda: message.update(recipient="tool-7"),
        lambda: message.update(sender="tool-7", recipient="user"),
        lambda: setattr(message, "channel", "ops"),
        lambda: message.update(guidance="Briefly."),
        lambda: message._merge_extra({"a": 1}),
    ]
    for change in changes:
        held = message.__dict__
        before = dict(held)
        change()
        assert message.__dict__ is not held
        assert held == before
    message.update(recipient=None, sender=None)  # falsy: nothing to change
    assert (message.sender, message.recipient, message.channel) == ("tool-7", MessageRole.USER, "ops")
    assert (message.content.guidance, message.metadata["extra"]) == ("Briefly.", {"a": 1})
    assert {"sender", "recipient", "channel"} <= message.model_fields_set


@pytest.mark.parametrize("created_at", [1e308, 253402300800.0, 1e18, -1e15])
def test_a_created_at_no_datetime_holds_is_one_value_error(created_at: float) -> None:
    # Review bg O1: the schema allows any finite number; fromtimestamp raised three types by value.
    message = Instruction(content={}, created_at=created_at)
    with pytest.raises(ValueError, match=r"^created_at .* is no time a datetime can hold \(years 1 to 9999\)$"):
        message.created_datetime  # noqa: B018
    assert message.created_at == created_at
