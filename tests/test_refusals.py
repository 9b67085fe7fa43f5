"""Bad input is refused with its documented error and changes nothing: the history's messages, order and
hooks, a message's fields, an Exchange's outboxes, inboxes and drops, a progression's ids (review ax:
each case here changed state, or had no test that it did not)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any
from uuid import UUID, uuid4

import pytest
from pydantic import ValidationError, model_validator

from lionmsg import Branch, Exchange, Flow, Instruction, Message, MessageManager, Pile, Progression, System

OUT_OF_STEP = "^the pile is out of step with its progression: "


def state(manager: MessageManager) -> Any:
    items = manager.messages._items.values()
    return (
        list(manager.progression),
        {message.id: id(message) for message in items},
        [message.to_dict() for message in items],
        list(manager.on_message_added),
        list(manager.on_history_changed),
    )


def history() -> tuple[MessageManager, dict[str, Message]]:
    manager = MessageManager(system=System(content={"system_message": "S"}))
    assert manager.system is not None
    held = {
        "system": manager.system,
        "instruction": manager.add_message(instruction="hi"),
        "reply": manager.add_message(assistant_response="r"),
        "request": manager.add_message(action_function="f", action_arguments={"x": 1}),
    }
    return manager, held


def adder(manager: MessageManager, path: str) -> Callable[..., Any]:
    if path == "sync":
        return manager.add_message
    return lambda **arguments: asyncio.run(manager.a_add_message(**arguments))


REVISIONS = [
    ({"system": "system", "system_datetime": 5}, "SystemContent.system_datetime must be a string or null"),
    ({"system": "system", "recipient": "bob", "system_datetime": object()}, "SystemContent.system_datetime must be"),
    ({"action_request": "request", "action_arguments": 5}, "Arguments must be a dictionary: unsupported type int"),
    ({"action_request": "request", "action_arguments": "{not json"}, "Arguments must be a dictionary: unexpected"),
    ({"action_request": "request", "action_function": 5, "sender": "bob"}, "Function must be a string or callable"),
    ({"instruction": "instruction", "response_format": 5, "sender": "bob"}, "response_format must be a dict, a"),
    ({"instruction": "instruction", "tool_schemas": 5}, "InstructionContent.tool_schemas must be an array of items"),
    ({"instruction": "instruction", "guidance": 5}, "InstructionContent.guidance must be a string or null"),
    ({"assistant_response": "reply", "guidance": "g"}, "guidance cannot be used when adding a message of kind"),
    ({"action_request": "request", "action_output": 1, "sender": 5}, "Invalid sender or recipient"),
]


@pytest.mark.parametrize("path", ["sync", "async"])
@pytest.mark.parametrize(("arguments", "error"), REVISIONS, ids=[error[:32] for _, error in REVISIONS])
def test_revising_a_held_message_with_bad_input_changes_nothing(path: str, arguments: Any, error: str) -> None:
    manager, held = history()
    before = state(manager)
    given = {name: held.get(value, value) if isinstance(value, str) else value for name, value in arguments.items()}
    with pytest.raises(ValueError, match=f"^{re.escape(error)}"):
        adder(manager, path)(**given)
    assert state(manager) == before


@pytest.mark.parametrize("path", ["sync", "async"])
def test_a_system_given_to_a_history_whose_order_names_an_unheld_head_is_refused_before_it_is_revised(
    path: str,
) -> None:
    """Review ax F1: the given System was revised (sender, time, metadata), then the out-of-step error."""
    manager, held = history()
    manager.progression.insert(0, uuid4())  # behind the pile's back
    loose = System(content={"system_message": "new"})
    records = (held["system"].to_dict(), loose.to_dict())
    before = state(manager)
    for arguments in (
        {"system": held["system"], "sender": "x"},
        {"system": loose, "system_datetime": "T"},
        {"system": held["system"], "metadata": {"k": 1}},
    ):
        with pytest.raises(ValueError, match=OUT_OF_STEP):
            adder(manager, path)(**arguments)
    assert (held["system"].to_dict(), loose.to_dict()) == records
    assert state(manager) == before


class Guarded(Instruction):
    """A user's subclass whose model validator looks at two fields together."""

    @model_validator(mode="after")
    def _no_bob_with_k(self) -> Guarded:
        if self.sender == "bob" and (self.metadata.get("extra") or {}).get("k"):
            raise ValueError("bob may not carry k")
        return self


def test_an_assignment_a_subclass_model_validator_refuses_changes_nothing() -> None:
    """Review ax F2: pydantic writes the field before an "after" model validator runs."""
    guarded = Guarded(content={"instruction": "a"}, sender="u", metadata={"extra": {"k": 1}})
    before, fields_set = guarded.to_dict(), set(guarded.model_fields_set)
    with pytest.raises(ValidationError, match="bob may not carry k"):
        guarded.sender = "bob"
    assert (guarded.to_dict(), guarded.model_fields_set) == (before, fields_set)
    guarded.sender = "ann"  # an accepted one still lands
    assert guarded.sender == "ann"


@pytest.mark.parametrize("path", ["sync", "async"])
def test_a_revision_whose_metadata_merge_a_subclass_refuses_changes_nothing(path: str) -> None:
    """Review ax F3: the merge is refused for what the revision changed; the revision is undone too."""
    manager = MessageManager()
    guarded = Guarded(content={"instruction": "a"}, sender="u")
    manager.add_message(instruction=guarded)
    before = state(manager)
    with pytest.raises(ValidationError, match="bob may not carry k"):
        adder(manager, path)(instruction=guarded, sender="bob", metadata={"k": 1})
    assert state(manager) == before
    adder(manager, path)(instruction=guarded, sender="bob", metadata={"j": 1})  # accepted: both land
    assert (guarded.sender, guarded.metadata["extra"]) == ("bob", {"j": 1})


@pytest.mark.parametrize(
    ("extra", "error", "said"),
    [
        ({"system_datetime": "T"}, ValueError, "system_datetime goes with a system prompt given as text"),
        ({"user": 3}, ValidationError, "Invalid sender or recipient"),
        ({"name": 3}, ValidationError, "Input should be a valid string"),
        ({"bogus": 1}, ValidationError, "Extra inputs are not permitted"),
        ({"system": 5}, ValueError, "system must be a System or a string, got int"),
        ({"metadata": {"current_progression": {"order": "x"}}}, ValidationError, "Field required"),
    ],
)
def test_a_refused_branch_leaves_the_given_manager_unhooked(
    extra: dict[str, Any], error: type[Exception], said: str
) -> None:
    manager, _ = history()
    before = state(manager)
    with pytest.raises(error, match=re.escape(said)):
        Branch(msgs=manager, **extra)
    assert state(manager) == before


def test_a_refused_history_leaves_the_callers_progression_as_it_was() -> None:
    first, one, two = Instruction(), System(), System()
    given = Progression(order=[first.id, one.id, two.id])
    with pytest.raises(ValueError, match="holds one system message"):
        MessageManager(messages=[first, one, two], progression=given)
    with pytest.raises(ValueError, match="holds one system message"):
        Branch(messages=[first, one, two], progression=given)
    assert list(given) == [first.id, one.id, two.id]


ITERATOR = "a message cannot keep an iterator (list_iterator): writing it would use it up; pass a list of its items"
NO_OWNER = "owner ids are UUIDs (or UUID strings, or elements with one), got "


@pytest.mark.parametrize(
    ("bad", "error", "said"),
    [
        (lambda x, a, b: x.send(a, b, iter([1])), TypeError, ITERATOR),
        (lambda x, a, b: x.send(a, b, {"rows": [iter([1])]}), TypeError, ITERATOR),
        (lambda x, a, b: x.send(a, Flow(), "x"), ValueError, NO_OWNER + "a mailbox of no owner"),
        (lambda x, a, b: x.register(a), ValueError, "already registered"),
        (lambda x, a, b: x.register("nope"), ValueError, NO_OWNER + "'nope'"),
        (lambda x, a, b: x.register(Flow()), ValueError, NO_OWNER + "a mailbox of no owner"),
        (lambda x, a, b: asyncio.run(x.collect("nope")), ValueError, "Owner nope not registered"),
        (lambda x, a, b: x.get(a).share_lock(object()), TypeError, "a flow shares a ThreadLock, got object"),
    ],
)
def test_exchange_refusals_leave_every_outbox_inbox_and_drop_as_they_were(
    bad: Callable[[Exchange, UUID, UUID], Any], error: type[Exception], said: str
) -> None:
    exchange = Exchange()
    a, b = uuid4(), uuid4()
    exchange.register(a)
    exchange.register(b)
    exchange.send(a, b, "delivered")
    asyncio.run(exchange.collect(a))
    exchange.send(a, b, "queued")
    before = exchange.to_dict(mode="python")
    with pytest.raises(error, match=re.escape(said)):
        bad(exchange, a, b)
    assert exchange.to_dict(mode="python") == before


@pytest.mark.parametrize(
    ("bad", "error", "said"),
    [
        (lambda p, ids: p.__delitem__(slice(None, None, 0)), ValueError, "slice step cannot be zero"),
        (lambda p, ids: p.remove("not a uuid"), ValueError, "not a UUID: 'not a uuid'"),
        (lambda p, ids: p.__isub__([ids[0], "bad"]), ValueError, "not a UUID: 'bad'"),
        (lambda p, ids: p.__iadd__([uuid4(), 5]), TypeError, "expected a UUID, a UUID string or an element, got int"),
        (lambda p, ids: p.insert(1, [ids[0]]), TypeError, "expected a UUID, a UUID string or an element, got list"),
    ],
)
def test_more_progression_refusals_change_nothing(
    bad: Callable[[Progression, list[UUID]], Any], error: type[Exception], said: str
) -> None:
    ids = [uuid4() for _ in range(4)]
    progression = Progression(order=ids)
    progression.remove(ids[1])  # a gap in its storage
    before = list(progression)
    with pytest.raises(error, match=f"^{re.escape(said)}$"):
        bad(progression, ids)
    assert list(progression) == before


def test_taking_out_a_held_item_its_order_left_out_is_the_out_of_step_error_and_changes_nothing() -> None:
    items = [Instruction() for _ in range(3)]
    pile: Pile[Message] = Pile(items, item_type={Message})
    pile.progression.remove(items[1].id)  # behind the pile's back
    before = (dict(pile._items), list(pile.progression))
    held_unordered = f"{OUT_OF_STEP}it holds {items[1].id}, which its progression does not order"
    for bad in (
        lambda: pile.pop(items[1].id),
        lambda: pile.remove(items[1]),
        lambda: pile.replace(items[1], Instruction()),
    ):
        with pytest.raises(ValueError, match=held_unordered):
            bad()
        assert (dict(pile._items), list(pile.progression)) == before
