"""A progression's id -> position index is made when first needed (lionmsg.runtime.progression.OrderedIds):
a history that only grows by its pile's appends keeps none, and whatever needs one finds it whole."""

from __future__ import annotations

import asyncio
import copy
import pickle
import sys
import threading
from collections.abc import Callable
from contextlib import suppress
from functools import partial
from typing import Any
from uuid import UUID, uuid4

import pytest

from lionmsg import AssistantResponse, Branch, Instruction, Message, MessageManager, Pile
from lionmsg.runtime.progression import OrderedIds, Progression, _UnmappedIds
from tests.interrupts import interrupted_at, interruptible_lines

OUT_OF_STEP = "^the pile is out of step with its progression: "


def mapped(manager: MessageManager) -> bool:
    return manager.messages._order._mapped


def grown(count: int) -> MessageManager:
    manager = MessageManager()
    for i in range(count):
        manager.add_message(instruction=f"Question {i}.", context=[{"doc": i}], sender="user")
    return manager


def assert_index_whole(ids: OrderedIds) -> None:
    """The index names every id held, at its slot, and nothing else."""
    held = {ident.int: slot for slot, ident in enumerate(ids._slots) if ident is not None and slot >= ids._head}
    assert ids._slot_of == held
    assert len(ids) == len(held)


# -- what keeps the order unmapped ----------------------------------------------------------------


def test_a_history_grown_by_add_message_keeps_no_index() -> None:
    manager = grown(20)
    reply = AssistantResponse(content={"assistant_response": "Built already."})
    manager.add_message(assistant_response=reply)  # a message given alone: checked in step, no index made
    manager.add_message(assistant_response="Text.")
    manager.messages.include(Instruction(content={"instruction": "Through the pile."}))
    manager.messages.update([Instruction(content={"instruction": "A list of them."})])
    assert not mapped(manager)
    # Reading it in order or by position needs no index either.
    assert len(manager.messages) == len(manager.progression) == 24
    assert manager.to_chat_msgs()[0]["content"].startswith("Instruction: Question 0.")
    assert manager.messages[3].content.instruction == "Question 3."  # type: ignore[union-attr]
    assert manager.progression[-1] == list(manager.messages)[-1].id
    assert manager.to_dict()["messages"]["progression"]["order"][0] == str(manager.messages[0].id)
    assert not mapped(manager)


def test_add_or_replace_revises_in_place_with_no_index() -> None:
    manager = grown(6)
    target = manager.messages[4]
    manager.add_message(instruction=target, guidance="Revised.")
    assert not mapped(manager)
    assert manager.messages[4].content.guidance == "Revised."  # type: ignore[union-attr]
    assert manager.progression.index(target.id) == 4


def test_a_branch_view_places_appended_messages_without_the_history_index() -> None:
    manager = grown(5)
    branch = Branch(msgs=manager)
    first = manager.messages[0].id
    branch.metadata["current_progression"] = Progression(order=[first], name="recent")
    added = [manager.add_message(instruction=f"Later {i}.") for i in range(2)]
    added.append(asyncio.run(manager.a_add_message(instruction="Later, async.")))
    assert list(branch.progression) == [first, *(message.id for message in added)]
    assert not mapped(manager)

    # One placed anywhere but last (an observer added after it, before the view heard) is placed by
    # the history's index, made then.
    def follow_up(message: Any) -> None:
        if message.content.instruction == "Question.":
            manager.add_message(instruction="Follow-up.")

    manager.on_message_added.insert(0, follow_up)
    question = manager.add_message(instruction="Question.")
    assert list(branch.progression)[-2:] == [question.id, manager.progression[-1]]
    assert mapped(manager)


def test_a_branch_view_of_a_history_whose_order_was_emptied_behind_its_back_says_so() -> None:
    # The order holds none of the pile's messages (cleared through the progression): placing one in the
    # view is the order's ValueError for the id, raised as an observer's failure, not an IndexError.
    manager = grown(3)
    branch = Branch(msgs=manager)
    branch.metadata["current_progression"] = Progression(order=[manager.messages[0].id], name="recent")

    def empty_the_order(message: Any) -> None:
        if message.content.instruction == "Cut.":
            manager.progression.clear()

    manager.on_message_added.insert(0, empty_the_order)
    with pytest.raises(ValueError, match=r" is not in the progression$") as raised:
        manager.add_message(instruction="Cut.")
    named = UUID(str(raised.value).split()[0])
    assert manager.messages[named].content.instruction == "Cut."  # type: ignore[union-attr]  # (held: it stays)
    assert len(branch.progression) == 1  # not placed


def test_clearing_the_history_drops_the_index_and_its_appends_keep_none() -> None:
    manager = grown(5)
    _ = manager.messages[2].id in manager.progression
    assert mapped(manager)
    manager.clear_messages()
    assert not mapped(manager)
    manager.add_message(instruction="Again.")
    assert not mapped(manager)
    assert manager.progression.index(manager.messages[0].id) == 0


# -- what makes it, whole -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "look_up",
    [
        pytest.param(lambda manager, ident: ident in manager.progression, id="in"),
        pytest.param(lambda manager, ident: manager.progression.index(ident), id="index"),
        pytest.param(lambda manager, ident: manager.progression.count(ident), id="count"),
        pytest.param(lambda manager, ident: manager.messages.index(ident), id="pile.index"),
        pytest.param(lambda manager, ident: manager.progression.remove(ident), id="remove"),
        pytest.param(lambda manager, ident: manager.messages.pop(ident), id="pile.pop"),
        pytest.param(lambda manager, ident: manager.add_message(system="Be brief."), id="system at the front"),
    ],
)
def test_the_first_look_up_or_change_makes_the_index_whole(look_up: Any) -> None:
    manager = grown(12)
    ids = [message.id for message in manager.messages]
    look_up(manager, ids[5])
    order = manager.messages._order
    assert order._mapped
    assert_index_whole(order)
    manager.add_message(instruction="After.")  # appends keep a made index up to date
    assert_index_whole(order)
    held = [message.id for message in manager.messages]
    assert [manager.progression.index(ident) for ident in held] == list(range(len(held)))


def test_an_unmapped_empty_progression_of_its_own_makes_its_index_on_first_use() -> None:
    progression = Progression()
    assert progression._ids._mapped  # only a history's drops it
    progression._ids.forget_map()
    assert not progression._ids._mapped
    first, second = uuid4(), uuid4()
    progression.append(first)
    progression.include([second, first])
    assert list(progression) == [first, second]
    with pytest.raises(ValueError, match="is already in the progression"):
        progression.append(first)
    assert progression.index(second) == 1
    assert_index_whole(progression._ids)


# -- behind the pile's back -----------------------------------------------------------------------


def test_a_progression_changed_behind_the_piles_back_is_seen_as_before() -> None:
    manager = grown(3)
    stray = uuid4()
    manager.progression.append(stray)  # a public change: it makes the index first
    assert mapped(manager)
    before = dict(manager.messages._items)
    ghost = Instruction(id=stray, content={"instruction": "Ordered, not held."})
    with pytest.raises(ValueError, match=OUT_OF_STEP + f"its progression orders {stray}"):
        manager.add_message(instruction=ghost)
    assert manager.messages._items == before
    assert list(manager.progression)[-1] == stray


def test_a_progression_cleared_behind_the_piles_back_is_seen_as_before() -> None:
    manager = grown(3)
    held = manager.messages[1]
    manager.progression.clear()  # empties the order only: the pile's items are left unordered
    assert mapped(manager)
    with pytest.raises(ValueError, match=OUT_OF_STEP + "it holds"):
        manager.add_message(instruction=held, guidance="Revised.")
    assert held.content.guidance is None  # type: ignore[union-attr]
    assert len(manager.progression) == 0


def test_one_progression_behind_two_histories_is_refused_as_out_of_step() -> None:
    # Each history drops the shared order's index; the second add finds more ids ordered than its pile
    # holds and takes the checked road (review cw H1).
    shared = Progression()
    first, second = MessageManager(progression=shared), MessageManager(progression=shared)
    message = Instruction(content={"instruction": "Hi."})
    first.add_message(instruction=message)
    with pytest.raises(ValueError, match=OUT_OF_STEP + f"its progression orders {message.id}"):
        second.add_message(instruction=message)
    assert list(shared) == [message.id]
    assert len(second.messages._items) == 0


def test_an_unlocked_membership_test_makes_the_index_under_the_lock_only() -> None:
    manager = grown(3)
    first = manager.messages[0].id
    answers: list[bool] = []
    with manager.messages.thread_lock:  # held by this thread: the other one must wait to make the index
        asking = threading.Thread(target=_ask, args=(manager, first, threading.Barrier(1), answers))
        asking.start()
        asking.join(timeout=0.2)
        assert asking.is_alive()
        assert not mapped(manager)
    asking.join()
    assert answers == [True]
    assert mapped(manager)
    with manager.messages.thread_lock:  # made already: read without the lock
        asking = threading.Thread(target=_ask, args=(manager, first, threading.Barrier(1), answers))
        asking.start()
        asking.join(timeout=60)
        assert answers == [True, True]


# -- threads, copies, pickles ---------------------------------------------------------------------


def test_a_membership_test_from_another_thread_makes_the_index_under_the_lock() -> None:
    # Threads switched every microsecond, so appends land in the middle of an index being made.
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        _race_membership_tests_against_appends()
    finally:
        sys.setswitchinterval(previous)


def _race_membership_tests_against_appends() -> None:
    for _ in range(20):
        manager = grown(2000)
        start = threading.Barrier(2)
        answers: list[bool] = []
        threads = [
            threading.Thread(target=_append_more, args=(manager, start)),
            threading.Thread(target=_ask, args=(manager, manager.messages[0].id, start, answers)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert answers == [True]
        assert_index_whole(manager.messages._order)
        assert len(manager.messages) == 2300


def _append_more(manager: MessageManager, start: threading.Barrier) -> None:
    start.wait()
    for i in range(300):
        manager.add_message(instruction=f"More {i}.")


def _ask(manager: MessageManager, ident: Any, start: threading.Barrier, answers: list[bool]) -> None:
    start.wait()
    answers.append(ident in manager.progression)


def test_copies_and_pickles_keep_the_index_as_it_is() -> None:
    manager = grown(4)
    for duplicate in (copy.deepcopy(manager), pickle.loads(pickle.dumps(manager))):
        assert not mapped(duplicate)
        assert [m.id for m in duplicate.messages] == [m.id for m in manager.messages]
        assert duplicate.progression.index(manager.messages[3].id) == 3
    assert not mapped(manager)
    pile = Pile([Instruction(), Instruction()])
    assert pile._order._mapped
    loaded = pickle.loads(pickle.dumps(pile))
    assert_index_whole(loaded._order)


def test_storage_pickled_before_the_mark_existed_is_mapped() -> None:
    ident = uuid4()
    state = OrderedIds([ident]).__getstate__()
    del state[1]["_mapped"]  # as pickles made before it existed hold it
    old = OrderedIds.__new__(OrderedIds)
    old.__setstate__(state)
    assert old._mapped
    assert old.index(ident) == 0


def test_unmapped_storage_has_a_class_of_its_own_until_its_index_is_made() -> None:
    # A class with __getattr__ has every attribute read go through it: the plain class has none.
    assert "__getattr__" not in vars(OrderedIds)
    ids = OrderedIds()
    assert type(ids) is OrderedIds
    ids.forget_map()
    assert type(ids) is _UnmappedIds
    ids._slots.append(uuid4())  # as its pile appends
    assert_index_whole(ids)
    assert type(ids) is OrderedIds
    ids.clear()
    ids.forget_map()
    assert type(ids) is _UnmappedIds
    assert not ids._mapped


def test_an_index_marked_but_not_set_is_made_on_the_next_read() -> None:
    # What _set_map cut short after its first line leaves, as forget_map cut short after its second: the
    # unmapped class, marked mapped, with no index. The pile's append then takes the checked road, which
    # makes it.
    ids = OrderedIds()
    ids.forget_map()
    ids._slots.append(uuid4())
    ids._mapped = True
    ids.append(uuid4())
    assert type(ids) is OrderedIds
    assert_index_whole(ids)
    with pytest.raises(AttributeError, match="'_UnmappedIds' object has no attribute 'missing'"):
        _ = MessageManager().messages._order.missing  # type: ignore[attr-defined]


# -- interrupts -----------------------------------------------------------------------------------


def _adding() -> tuple[MessageManager, list[Message], Callable[[], Any]]:
    manager = grown(3)
    message = Instruction(content={"instruction": "New."})
    return manager, [message], lambda: manager.add_message(instruction=message)


def _clearing() -> tuple[MessageManager, list[Message], Callable[[], Any]]:
    manager = grown(3)
    _ = manager.progression.index(manager.messages[0].id)  # mapped, so clearing drops the index
    return manager, list(manager.messages), manager.clear_messages


def _indexing() -> tuple[MessageManager, list[Message], Callable[[], Any]]:
    manager = grown(3)
    first = manager.messages[0]
    return (
        manager,
        [*manager.messages, Instruction(content={"instruction": "New."})],
        lambda: first.id in manager.progression,
    )


INTERRUPTED_CODE: list[tuple[Callable[[], tuple[MessageManager, list[Message], Callable[[], Any]]], Any]] = [
    (_adding, Pile._update_holding_lock),
    (_clearing, MessageManager._clear_holding_lock),
    (_clearing, Pile.clear),
    (_clearing, OrderedIds.clear),
    (_clearing, OrderedIds.forget_map),
    (_indexing, Progression._index),
    (_indexing, _UnmappedIds.__getattr__),
    (_indexing, OrderedIds._make_map),
    (_indexing, OrderedIds._set_map),
]


@pytest.mark.parametrize(("scenario", "function"), INTERRUPTED_CODE, ids=lambda value: value.__qualname__)
def test_an_interrupt_anywhere_leaves_the_history_whole(scenario: Any, function: Any) -> None:
    """Cut short at any line (KeyboardInterrupt raised by a trace, as a Ctrl-C lands between statements),
    the order never holds an id twice, its index names exactly its ids, and adding the messages involved
    again either works or is the pile's out-of-step error, never a duplicate."""
    fired_lines = []
    for line in interruptible_lines(function):
        manager, involved, change = scenario()
        with interrupted_at(function.__code__, line) as fired, suppress(KeyboardInterrupt):
            change()
        if fired:
            fired_lines.append(line)
        for message in involved:
            refused = _refusal(partial(manager.add_message, instruction=message))
            assert refused is None or refused.startswith("the pile is out of step with its progression")
        ordered = list(manager.progression)
        assert len(ordered) == len(set(ordered))
        assert_index_whole(manager.messages._order)
    assert fired_lines  # the scenario reaches the code


def _refusal(call: Callable[[], Any]) -> str | None:
    """The ValueError's message when `call` raises one, else None."""
    try:
        call()
    except ValueError as error:
        return str(error)
    return None


def test_an_order_holding_an_id_twice_is_named_as_such() -> None:
    # Unreachable through the library's methods (the pile checks the count before it appends unchecked),
    # but what the out-of-step check says if storage were ever left so: never a bare StopIteration.
    manager = grown(2)
    order = manager.messages._order
    twice = order._slots[0]
    assert twice is not None
    order._slots.append(twice)
    with pytest.raises(ValueError, match=OUT_OF_STEP + f"its progression orders {twice} twice"):
        manager.to_dict()
