"""The identity base: Element and Node."""

from __future__ import annotations

import math
import time
from typing import Any
from uuid import UUID, uuid4

import pytest
from pydantic import ValidationError

from lionmsg import Element, Instruction, Message, Node
from tests.samples import HexSpelledUUID


def test_identity_fields_default_and_are_frozen() -> None:
    before = time.time()
    element = Element()
    assert isinstance(element.id, UUID)
    assert before <= element.created_at <= time.time()
    assert element.metadata == {}
    with pytest.raises(ValidationError, match="frozen"):
        element.id = uuid4()  # type: ignore[misc]
    with pytest.raises(ValidationError, match="frozen"):
        element.created_at = 1.0  # type: ignore[misc]


def test_an_id_given_as_a_uuid_subclass_is_held_as_the_plain_uuid_it_names() -> None:
    given = HexSpelledUUID(str(uuid4()))
    message = Message(id=given, content="x")
    assert type(message.id) is UUID
    assert message.id == given
    assert message.to_dict()["id"] == str(UUID(int=given.int))
    assert Message.from_json(message.to_json()).id == given


def test_metadata_is_free_and_mutable() -> None:
    element = Element(metadata={"a": 1})
    element.metadata["b"] = 2
    element.metadata = {"c": 3}
    assert element.metadata == {"c": 3}


def test_node_adds_content_and_embedding() -> None:
    node = Node(content={"any": "thing"}, embedding=[1, 2.5])
    assert node.content == {"any": "thing"}
    assert node.embedding == [1.0, 2.5]
    assert Node().embedding is None


@pytest.mark.parametrize("bad", [["x"], [True], [math.nan], [math.inf], "1,2"])
def test_embedding_must_be_finite_numbers(bad: object) -> None:
    with pytest.raises(ValidationError) as raised:
        Node(embedding=bad)
    assert raised.value.errors()[0]["loc"][0] == "embedding"


@pytest.mark.parametrize("bad", ["2025-01-01", "1.5", True, math.nan, None])
def test_created_at_is_a_finite_number(bad: object) -> None:
    with pytest.raises(ValidationError) as raised:
        Element(created_at=bad)
    assert raised.value.errors()[0]["loc"] == ("created_at",)
    assert Element(created_at=3).created_at == 3.0


def test_equality_and_hash_are_by_identity() -> None:
    message = Instruction(content={"instruction": "a"})
    same = Message.from_dict(message.to_dict())
    assert same == message
    assert hash(same) == hash(message)
    assert len({message, same}) == 1
    assert Instruction(content={"instruction": "a"}) != message
    assert message != "not an element"


def test_unknown_fields_are_rejected() -> None:
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        Element(colour="red")


def test_elements_round_trip_through_records() -> None:
    node = Node(content=[1, "two"], embedding=[0.5], metadata={"m": True})
    record = node.to_dict()
    assert record["metadata"]["lion_class"] == "Node"
    loaded = Element.from_dict(record)
    assert type(loaded) is Node
    assert (loaded.id, loaded.created_at, loaded.content, loaded.embedding, loaded.metadata) == (
        node.id, node.created_at, [1, "two"], [0.5], {"m": True},
    )  # fmt: skip
    assert type(Element.from_dict(Element().to_dict())) is Element


def test_a_class_from_another_hierarchy_is_never_resolved() -> None:
    record = Node().to_dict()
    with pytest.raises(ValidationError, match="does not name Message or a subclass of it"):
        Message.from_dict(record)


def test_a_same_named_class_defined_later_does_not_shadow_the_first() -> None:
    from lionmsg import Instruction

    look_alike = type("Instruction", (Node,), {"__module__": "elsewhere"})
    record = Instruction(content={"instruction": "q"}).to_dict()
    for receiver in (Element, Node, Message):
        assert type(receiver.from_dict(record)) is Instruction
    assert type(look_alike.from_dict(look_alike().to_dict())) is look_alike  # it still loads its own records


@pytest.mark.parametrize(
    ("load", "message"),
    [
        (lambda: Instruction.from_dict([]), "an Instruction record must be a mapping, got list"),  # type: ignore[arg-type]
        (lambda: Instruction.from_json("null"), "an Instruction record must be a mapping, got NoneType"),
        (lambda: Element.from_dict("x"), "an Element record must be a mapping, got str"),  # type: ignore[arg-type]
        (lambda: Node.from_dict(5), "a Node record must be a mapping, got int"),  # type: ignore[arg-type]
    ],
)
def test_a_record_that_is_no_mapping_is_a_type_error_naming_the_class(load: Any, message: str) -> None:
    with pytest.raises(TypeError, match=f"^{message}$"):
        load()
