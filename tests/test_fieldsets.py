"""Messages share their fields sets (lionmsg.runtime.fieldsets), and no message's fields set ever changes
through another: assignment and `update()` take a private set first, and a shared set refuses change."""

from __future__ import annotations

import asyncio
import copy
import pickle
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from lionmsg import Exchange, Instruction, MessageManager
from lionmsg.runtime import fastpath, fieldsets
from lionmsg.runtime.fieldsets import SharedFieldsSet, mark_field_set, shared_fields_set

EVERY_FIELD = {"id", "created_at", "metadata", "content", "embedding", "sender", "recipient", "channel"}
REFUSAL = (
    "this fields set is shared by many messages and cannot change in place; "
    "assign the field on the message (or set __pydantic_fields_set__ to a new set)"
)


def built_instructions(count: int) -> list[Instruction]:
    manager = MessageManager()
    return [manager.add_message(instruction=f"step {i}", sender="user") for i in range(count)]


def loaded_instructions(count: int) -> list[Instruction]:
    record = Instruction(content={"instruction": "step"}, sender="user").to_dict()
    return [Instruction.from_dict(record) for _ in range(count)]


def test_loaded_records_share_one_set_of_every_field() -> None:
    first, second = loaded_instructions(2)
    assert first.model_fields_set is second.model_fields_set
    assert type(first.model_fields_set) is SharedFieldsSet
    assert first.model_fields_set == EVERY_FIELD
    assert first.model_dump(exclude_unset=True) == first.model_dump()


def test_a_record_without_some_fields_shares_the_set_of_those_it_has() -> None:
    record = Instruction(content={"instruction": "step"}).to_dict()
    del record["channel"], record["embedding"]
    first, second = Instruction.from_dict(record), Instruction.from_dict(dict(record))
    assert first.model_fields_set is second.model_fields_set
    assert first.model_fields_set == EVERY_FIELD - {"channel", "embedding"}
    assert "channel" not in first.model_dump(exclude_unset=True)


def test_built_messages_share_the_set_of_what_was_given() -> None:
    first, second = built_instructions(2)
    assert first.model_fields_set is second.model_fields_set
    assert first.model_fields_set == {"content", "sender"}


@pytest.mark.parametrize(
    "change",
    [
        lambda message: setattr(message, "recipient", "assistant"),
        lambda message: message.update(recipient="assistant"),
    ],
    ids=["assignment", "update"],
)
def test_a_field_given_later_goes_to_the_messages_own_set(change: Callable[[Instruction], None]) -> None:
    changed, other = built_instructions(2)
    shared = other.model_fields_set
    change(changed)
    assert changed.model_fields_set == {"content", "sender", "recipient"}
    assert type(changed.model_fields_set) is set
    assert other.model_fields_set is shared
    assert shared == {"content", "sender"}
    assert set(other.model_dump(exclude_unset=True)) == {"content", "sender", "role"}
    assert set(changed.model_dump(exclude_unset=True)) == {"content", "sender", "recipient", "role"}


def test_assigning_a_field_already_given_keeps_the_shared_set() -> None:
    first, second = loaded_instructions(2)
    first.sender = "assistant"
    first.update(recipient="user")
    assert first.model_fields_set is second.model_fields_set == EVERY_FIELD
    assert (first.sender, second.sender) == ("assistant", "user")


def test_a_refused_assignment_changes_no_fields_set() -> None:
    refused, other = built_instructions(2)
    with pytest.raises(ValueError, match="Invalid sender or recipient"):
        refused.recipient = 123
    assert refused.model_fields_set == other.model_fields_set == {"content", "sender"}
    assert refused.recipient == other.recipient


def test_content_revised_in_place_is_recorded_in_the_messages_own_set() -> None:
    records = [{"id": str(uuid.uuid4()), "created_at": 1.0} for _ in range(2)]
    revised, other = (Instruction.from_dict(record) for record in records)
    shared = other.model_fields_set
    assert revised.model_fields_set is shared == {"id", "created_at"}
    manager = MessageManager()
    assert manager.add_message(instruction=revised, guidance="be brief") is revised  # revised in place
    assert revised.content.guidance == "be brief"
    assert revised.model_fields_set == {"id", "created_at", "content"}
    assert type(revised.model_fields_set) is set
    assert other.model_fields_set is shared == {"id", "created_at"}


def test_marking_a_field_set_leaves_a_shared_set_alone() -> None:
    first, second = loaded_instructions(2)
    mark_field_set(first, "content")  # already there: nothing to record, the shared set stays
    assert first.model_fields_set is second.model_fields_set
    partial = shared_fields_set(["id", "created_at"])
    assert partial is shared_fields_set(("created_at", "id")) == {"id", "created_at"}


MUTATIONS: dict[str, Callable[[set[str]], Any]] = {
    "add": lambda s: s.add("other"),
    "discard": lambda s: s.discard("id"),
    "remove": lambda s: s.remove("id"),
    "pop": lambda s: s.pop(),
    "clear": lambda s: s.clear(),
    "update": lambda s: s.update({"other"}),
    "difference_update": lambda s: s.difference_update({"id"}),
    "intersection_update": lambda s: s.intersection_update({"id"}),
    "symmetric_difference_update": lambda s: s.symmetric_difference_update({"id"}),
    "|=": lambda s: s.__ior__({"other"}),
    "&=": lambda s: s.__iand__({"id"}),
    "-=": lambda s: s.__isub__({"id"}),
    "^=": lambda s: s.__ixor__({"id"}),
    "__init__": lambda s: s.__init__({"other"}),
}


@pytest.mark.parametrize("mutate", MUTATIONS.values(), ids=MUTATIONS.keys())
def test_a_shared_set_refuses_every_change_and_stays_as_it_was(mutate: Callable[[set[str]], Any]) -> None:
    first, second = loaded_instructions(2)
    with pytest.raises(TypeError) as raised:
        mutate(first.model_fields_set)
    assert str(raised.value) == REFUSAL
    assert first.model_fields_set is second.model_fields_set == EVERY_FIELD


def test_the_empty_shared_set_refuses_to_be_filled_again() -> None:
    # Review bg F6: __init__ refused only a set that held names; `Instruction()` gets the empty one.
    empty = Instruction().model_fields_set
    assert type(empty) is SharedFieldsSet
    with pytest.raises(TypeError) as raised:
        empty.__init__({"channel"})  # type: ignore[misc]
    assert str(raised.value) == REFUSAL
    assert set(Instruction().model_fields_set) == set() == set(empty)


def test_a_shared_set_accepts_adding_a_name_it_holds() -> None:
    (message,) = loaded_instructions(1)
    message.model_fields_set.add("id")  # what pydantic does on assignment: a change of nothing
    assert message.model_fields_set == EVERY_FIELD


@pytest.mark.parametrize(
    "duplicate",
    [copy.copy, lambda s: copy.deepcopy(s), lambda s: pickle.loads(pickle.dumps(s)), set.copy],
    ids=["copy", "deepcopy", "pickle", "set.copy"],
)
def test_copies_of_a_shared_set_are_plain_sets(duplicate: Callable[[set[str]], set[str]]) -> None:
    (message,) = loaded_instructions(1)
    copied = duplicate(message.model_fields_set)
    assert type(copied) is set
    assert copied == EVERY_FIELD
    copied.discard("id")
    assert message.model_fields_set == EVERY_FIELD


@pytest.mark.parametrize(
    "duplicate",
    [
        lambda m: m.model_copy(update={"channel": "ops"}),
        lambda m: m.model_copy(deep=True),
        copy.deepcopy,
        lambda m: pickle.loads(pickle.dumps(m)),
    ],
    ids=["model_copy-update", "model_copy-deep", "deepcopy", "pickle"],
)
def test_copies_of_a_message_have_their_own_plain_sets(duplicate: Callable[[Instruction], Instruction]) -> None:
    (message,) = built_instructions(1)
    shared = message.model_fields_set
    copied = duplicate(message)
    assert type(copied.model_fields_set) is set
    copied.model_fields_set.add("embedding")
    assert message.model_fields_set is shared == {"content", "sender"}


def test_fast_copies_share_a_shared_set_and_copy_a_plain_one() -> None:
    (shared_original,) = built_instructions(1)
    # pydantic's own __init__ gives a plain set (the constructor's direct road gives a shared one)
    plain_original = Instruction.__new__(Instruction)
    BaseModel.__init__(plain_original, content={"instruction": "step"}, sender="user")
    assert type(plain_original.model_fields_set) is set
    assert type(Instruction(content={"instruction": "step"}, sender="user").model_fields_set) is SharedFieldsSet
    for original in (shared_original, plain_original):
        copies = [fastpath.copy_message(original), *fastpath.message_copies(original, 2)]
        sets = {id(message.model_fields_set) for message in [original, *copies]}
        assert len(sets) == (1 if original is shared_original else 4)
        assert all(message.model_fields_set == {"content", "sender"} for message in copies)


def test_broadcast_copies_share_a_set_and_a_change_to_one_reaches_no_other() -> None:
    exchange = Exchange()
    alice, bob, carol = (uuid.uuid4() for _ in range(3))
    for owner in (alice, bob, carol):
        exchange.register(owner)
    exchange.send(alice, None, {"ping": 1})
    asyncio.run(exchange.collect_all())
    (for_bob,), (for_carol,) = exchange.receive(bob), exchange.receive(carol)
    assert for_bob.model_fields_set is for_carol.model_fields_set
    given = set(for_carol.model_fields_set)
    for_bob.metadata = {"read": True}
    assert for_bob.model_fields_set == given | {"metadata"}
    assert for_carol.model_fields_set == given
    assert "metadata" not in for_carol.model_dump(exclude_unset=True)


def test_two_threads_assigning_to_one_message_keep_both_names(monkeypatch: pytest.MonkeyPatch) -> None:
    # The interleaving that lost a name: the first thread has copied the shared set and is about to
    # install its copy when the second assigns another field. The second now waits for the first (for
    # at most the join's timeout here) and records its name in the first's copy.
    (message,) = built_instructions(1)
    install = fieldsets.set_fields_set
    other = threading.Thread(target=setattr, args=(message, "channel", "ops"))

    def install_after_the_other_thread_had_its_turn(model: Any, fields_set: set[str]) -> None:
        if other.ident is None:  # the first call, from this thread: the other one has not started
            other.start()
            other.join(timeout=0.2)
        install(model, fields_set)

    monkeypatch.setattr(fieldsets, "set_fields_set", install_after_the_other_thread_had_its_turn)
    message.recipient = "assistant"
    other.join()
    assert message.model_fields_set == {"content", "sender", "recipient", "channel"}
    assert (message.recipient, message.channel) == ("assistant", "ops")
    assert built_instructions(1)[0].model_fields_set == {"content", "sender"}
