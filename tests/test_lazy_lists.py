"""Lazy list fields (lionmsg.runtime.content.lazylists): an instruction's empty context, tool schemas and
images are made on first read of the public attribute, and nothing the library does makes them."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest

from lionmsg import Instruction, InstructionContent, MessageManager
from lionmsg.runtime.content.lazylists import NOT_MADE, LazyList, NotMade, lazy_lists

LAZY = ("prompt_context", "tool_schemas", "images")
URL = "https://example.com/cat.png"
TOOL = {"name": "search", "parameters": {"type": "object"}}


def unmade(content: InstructionContent) -> set[str]:
    """The lazy fields whose list is not made (read through their slots, which makes nothing)."""
    return {name for name in LAZY if getattr(content, f"_raw_{name}") is NOT_MADE}


def stored_instruction() -> Instruction:
    manager = MessageManager()
    message = manager.add_message(instruction="Summarise.", guidance="Briefly.", context=[{"doc": 1}], sender="user")
    assert isinstance(message, Instruction)
    return message


# -- what stays unmade ----------------------------------------------------------------------------


def test_the_lazy_fields_are_the_instructions_list_fields_with_an_empty_default() -> None:
    lazy = {name for name, value in vars(InstructionContent).items() if isinstance(value, LazyList)}
    assert lazy == set(LAZY)


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: stored_instruction().content, id="add_message"),
        pytest.param(lambda: Instruction(content={"instruction": "x", "context": {"doc": 1}}).content, id="init"),
        pytest.param(lambda: InstructionContent(instruction="x", prompt_context=[{"doc": 1}]), id="content class"),
        pytest.param(lambda: InstructionContent.from_dict({"instruction": "x", "context": [1]}), id="from_dict"),
        pytest.param(
            lambda: InstructionContent.from_record({"instruction": "x", "prompt_context": [1], "images": []}),
            id="from_record",
        ),
        pytest.param(
            lambda: Instruction.from_dict(stored_instruction().to_dict()).content,  # type: ignore[union-attr]
            id="record round trip",
        ),
        pytest.param(
            lambda: Instruction.from_json(stored_instruction().to_json()).content,  # type: ignore[union-attr]
            id="JSON round trip",
        ),
        pytest.param(lambda: stored_instruction().clone().content, id="clone"),
        pytest.param(lambda: stored_instruction().content.copy(), id="content copy"),
        pytest.param(lambda: stored_instruction().content.updated(guidance="Again."), id="plain update"),
        pytest.param(lambda: stored_instruction().content.updated(context=[{"doc": 2}]), id="full rebuild"),
    ],
)
def test_building_loading_and_copying_leave_the_empty_lists_unmade(build: Any) -> None:
    content = build()
    assert unmade(content) == {"tool_schemas", "images"}
    assert content._raw_prompt_context  # the context given is a list of its own


def test_empty_lists_given_are_not_kept_either() -> None:
    content = InstructionContent(instruction="x", prompt_context=[], tool_schemas=[], images=[])
    assert unmade(content) == set(LAZY)
    record = {"instruction": "x", "prompt_context": [], "tool_schemas": [], "images": []}
    loaded = Instruction.from_dict({"content": record, "id": str(stored_instruction().id), "created_at": 1.0})
    assert unmade(loaded.content) == set(LAZY)  # type: ignore[arg-type]
    record["images"].append(URL)  # the record's list was never taken
    assert loaded.content.images == []  # type: ignore[union-attr]


def test_writing_rendering_and_revising_make_nothing() -> None:
    manager = MessageManager()
    message = manager.add_message(instruction="Summarise.", context=[{"doc": 1}], sender="user")
    content = message.content
    assert isinstance(content, InstructionContent)
    message.to_dict()
    message.to_json()
    message.model_dump()
    message.model_dump_json()
    content.to_dict()
    assert "Context:" in message.rendered
    assert manager.to_chat_msgs()[0]["content"] == message.rendered
    manager.add_message(instruction=message, guidance="Briefly.")  # add-or-replace: a revision in place
    assert unmade(content) == {"tool_schemas", "images"}
    assert unmade(manager.messages[0].content) == {"tool_schemas", "images"}  # type: ignore[arg-type]


# -- the public attribute -------------------------------------------------------------------------


def test_reading_makes_the_list_once_and_changes_in_place_are_kept() -> None:
    message = stored_instruction()
    content = message.content
    assert isinstance(content, InstructionContent)
    images = content.images
    assert images == []
    assert type(images) is list
    assert content.images is images
    images.append(URL)
    content.tool_schemas.append(TOOL)
    assert unmade(content) == set()
    assert message.to_dict()["content"]["images"] == [URL]
    assert message.to_dict()["content"]["tool_schemas"] == [TOOL]
    assert message.rendered[1]["image_url"]["url"] == URL  # type: ignore[index]


def test_an_assignment_is_kept_as_given_and_a_rebuild_normalises_it() -> None:
    message = stored_instruction()
    content = message.content
    assert isinstance(content, InstructionContent)
    content.images = None  # type: ignore[assignment]
    assert content.images is None  # not taken for an unmade list
    mine = [URL]
    content.images = mine
    assert content.images is mine
    content.images = None  # type: ignore[assignment]
    message.update(guidance="Again.")  # another type in place: the full rebuild, as before
    assert unmade(message.content) == {"tool_schemas", "images"}  # type: ignore[arg-type]
    assert message.content.images == []  # type: ignore[union-attr]


def test_deleting_the_field_deletes_the_slot() -> None:
    content = InstructionContent(instruction="x")
    del content.images
    with pytest.raises(AttributeError):
        _ = content._raw_images


def test_repr_equality_pickles_and_copies_read_the_slots_and_show_empty_lists() -> None:
    # As before the lists were lazy (an unmade one shows and compares as []), and making none: logging,
    # comparing or copying a message leaves it as small as it was.
    fresh = InstructionContent(instruction="x")
    made = InstructionContent(instruction="x")
    _ = made.images, made.tool_schemas, made.prompt_context
    assert fresh == made
    assert fresh == InstructionContent(instruction="x", images=[], tool_schemas=[], prompt_context=[])
    assert fresh != InstructionContent(instruction="x", images=[URL])
    assert repr(fresh) == repr(made)
    assert repr(fresh) == (
        "InstructionContent(instruction='x', guidance=None, prompt_context=[], plain_content=None, tool_schemas=[], "
        "response_format=None, images=[], image_detail=None, "
        "structure=<class 'lionmsg.runtime.content.structure.JsonStructure'>)"
    )
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        loaded = pickle.loads(pickle.dumps(fresh, protocol))
        assert loaded == fresh
        assert unmade(loaded) == set(LAZY)
    assert unmade(copy.copy(fresh)) == set(LAZY)
    message = stored_instruction()
    logged = f"{message!r} {message}"
    assert "images=[]" in logged
    duplicate = copy.deepcopy(message)
    loaded_message = pickle.loads(pickle.dumps(message))
    assert duplicate.content == message.content == loaded_message.content
    for content in (fresh, message.content, duplicate.content, loaded_message.content):
        assert unmade(content) == {"tool_schemas", "images"} | ({"prompt_context"} if content is fresh else set())  # type: ignore[arg-type]
    assert duplicate.content.images == []  # type: ignore[union-attr]
    assert duplicate.content.images is not message.content.images  # type: ignore[union-attr]
    # dataclasses.replace and asdict read the public attributes: they make the lists, and see them empty.
    replaced = dataclasses.replace(InstructionContent(instruction="x"), images=[URL])
    assert replaced.images == [URL]
    assert replaced.tool_schemas == []
    assert dataclasses.asdict(InstructionContent(instruction="x"))["images"] == []


def test_threads_reading_an_unmade_field_at_once_get_one_list() -> None:
    for _ in range(200):
        content = InstructionContent(instruction="x")
        barrier = threading.Barrier(4)
        seen: list[Any] = []

        def read(
            content: InstructionContent = content, barrier: threading.Barrier = barrier, seen: list[Any] = seen
        ) -> None:
            barrier.wait()
            seen.append(content.images)

        threads = [threading.Thread(target=read) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len({id(images) for images in seen}) == 1
        assert seen[0] is content.images


def test_an_assignment_racing_a_first_read_is_never_lost() -> None:
    for _ in range(200):
        content = InstructionContent(instruction="x")
        barrier = threading.Barrier(2)
        mine = [URL]

        def assign(
            content: InstructionContent = content, barrier: threading.Barrier = barrier, mine: list[str] = mine
        ) -> None:
            barrier.wait()
            content.images = mine

        def read(content: InstructionContent = content, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            _ = content.images

        threads = [threading.Thread(target=assign), threading.Thread(target=read)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert content.images is mine


class _BuildsWhenFreed:
    """An item whose finaliser builds instruction content, which assigns lazy fields."""

    def __del__(self) -> None:
        InstructionContent(instruction="Built while freed.")


def test_a_finaliser_run_by_an_assignment_can_use_lazy_fields() -> None:
    # The replaced list is freed after the lock is let go, and the lock is re-entrant: a finaliser that
    # builds content no longer waits on a lock its own thread holds (review cw M4).
    content = InstructionContent(instruction="x", prompt_context=[{"a": 1}])
    content.prompt_context = [_BuildsWhenFreed()]
    assigning = threading.Thread(target=setattr, args=(content, "prompt_context", []), daemon=True)  # (hangs if not)
    assigning.start()
    assigning.join(timeout=60)
    assert not assigning.is_alive()
    assert content.prompt_context == []


# -- the pieces -----------------------------------------------------------------------------------


def test_not_made_is_one_empty_falsy_value() -> None:
    assert not NOT_MADE
    assert len(NOT_MADE) == 0
    assert list(NOT_MADE) == []
    assert repr(NOT_MADE) == "NOT_MADE"
    assert copy.copy(NOT_MADE) is NOT_MADE
    assert copy.deepcopy(NOT_MADE) is NOT_MADE
    assert pickle.loads(pickle.dumps(NOT_MADE)) is NOT_MADE
    assert isinstance(NOT_MADE, NotMade)
    assert not isinstance(NOT_MADE, list)
    # Its truth and length are the interpreter's (an empty tuple's), never a Python-level call.
    assert isinstance(NOT_MADE, tuple)
    assert not {"__bool__", "__len__", "__iter__"} & set(vars(NotMade))


def test_lazy_lists_installs_on_slots_dataclasses_only() -> None:
    @lazy_lists("items")
    @dataclass(slots=True)
    class Slotted:
        items: list[int] = field(default_factory=list)

    made = Slotted()
    made._raw_items = NOT_MADE  # type: ignore[attr-defined]
    assert made.items == []
    assert isinstance(vars(Slotted)["items"], LazyList)
    assert Slotted.items is vars(Slotted)["items"]  # read on the class: the descriptor itself

    with pytest.raises(TypeError, match=r"Plain\.items is no slot: lazy lists need @dataclass\(slots=True\)"):

        @lazy_lists("items")
        @dataclass
        class Plain:
            items: list[int] = field(default_factory=list)


def test_a_slots_subclass_keeps_the_fields_lazy() -> None:
    # On Python 3.10 @dataclass(slots=True) declares a slot for every field, inherited ones too: the
    # subclass's own slots are made lazy in their turn (keep_lazy_in_subclass), so the inherited code
    # reads the slots its instances fill.
    @dataclass(slots=True)
    class Tagged(InstructionContent):
        tag: str = "t"

    tagged = Tagged(instruction="a", prompt_context=[1])
    assert unmade(tagged) == {"tool_schemas", "images"}
    assert tagged.images == []
    tagged.images.append(URL)
    assert tagged.to_dict()["images"] == [URL]
    revised = tagged.updated(guidance="g")
    assert type(revised) is Tagged
    assert (revised.tag, revised.prompt_context, revised.images) == ("t", [1], [URL])
    assert unmade(revised) == {"tool_schemas"}
