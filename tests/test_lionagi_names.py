"""Names and keyword arguments LionAGI 0.36.0 code calls, kept so that it ports by changing imports
(design.md §4): each gives what LionAGI's gives, or the documented difference."""

from __future__ import annotations

import asyncio
import datetime
import json
from typing import Any
from uuid import UUID

import pytest

from lionmsg import (
    ActionRequestContent,
    ActionResponseContent,
    AssistantResponse,
    Branch,
    Exchange,
    Instruction,
    InstructionContent,
    Message,
    MessageManager,
    Pile,
    Progression,
    System,
    SystemContent,
)


def _records() -> list[Any]:
    ask = Instruction(content={"instruction": "Q?"})
    containers = [Pile(collections=[ask]), Progression(order=[ask.id]), MessageManager(messages=[ask])]
    return [ask, Message(content="x"), *containers, Branch(messages=[ask]), Exchange()]


@pytest.mark.parametrize("held", _records(), ids=lambda held: type(held).__name__)
def test_from_json_and_from_dict_take_lionagis_keyword_names(held: Any) -> None:
    # LionAGI's Element.from_json(json_str) and from_dict(data): keyword calls port unchanged
    kind = type(held)
    assert kind.from_json(json_str=held.to_json()).to_dict() == held.to_dict()
    assert kind.from_dict(data=held.to_dict()).to_dict() == held.to_dict()


def test_pile_takes_lionagis_positional_arguments_and_progression_index_its_keyword() -> None:
    # Pile(collections, item_type, order, strict_type), Progression.index(item, start, end)
    a, b = Instruction(), Instruction()
    pile: Pile[Any] = Pile([a, b], {Instruction}, [b.id, a.id], True)
    assert (pile.strict_type, pile.keys()) == (True, [b.id, a.id])
    with pytest.raises(TypeError, match=r"^this pile accepts exactly Instruction \(strict_type\); got Message$"):
        Pile([Message()], {Instruction}, None, True)
    assert pile.progression.index(item=a.id) == 1
    assert pile.progression.index(item=b.id, start=0, end=1) == 0


def test_class_name_gives_the_module_and_qualified_name_when_full() -> None:
    assert Instruction.class_name() == "Instruction"
    assert Instruction().class_name(full=True) == "lionmsg.generated.messages.Instruction"
    assert Pile.class_name(full=True) == "lionmsg.runtime.pile.Pile"


def test_to_dict_passes_options_on_to_model_dump_as_lionagis_does() -> None:
    message = Instruction(content={"instruction": "x"}, sender="user")
    trimmed = message.to_dict(exclude={"embedding", "channel"})
    assert sorted(trimmed) == ["content", "created_at", "id", "metadata", "recipient", "role", "sender"]
    assert trimmed == {key: value for key, value in message.to_dict().items() if key not in ("embedding", "channel")}
    assert message.to_dict(mode="python", include={"id"}) == {"id": str(message.id)}
    with pytest.raises(ValueError, match="cannot write nan"):  # JSON mode still refuses what JSON cannot hold
        Message(content={"x": float("nan")}).to_dict(exclude={"channel"})


@pytest.mark.parametrize("message", [Instruction(content={"instruction": "é"}), System(), AssistantResponse(), Pile()])
def test_to_json_gives_bytes_when_not_decoded(message: Any) -> None:
    text = message.to_json()
    assert message.to_json(decode=False) == text.encode()
    assert isinstance(message.to_json(decode=False), bytes)
    assert json.loads(message.to_json(exclude={"metadata"})) == {
        key: value for key, value in json.loads(text).items() if key != "metadata"
    }


@pytest.mark.parametrize(
    ("content_type", "names"),
    [
        (
            InstructionContent,
            (
                "instruction",
                "guidance",
                "prompt_context",
                "plain_content",
                "tool_schemas",
                "response_format",
                "images",
                "image_detail",
                "structure",
            ),
        ),
        (ActionRequestContent, ("function", "arguments", "action_response_id")),
        (SystemContent, ("system_message", "system_datetime")),
    ],
)
def test_content_field_names_and_allowed(content_type: Any, names: tuple[str, ...]) -> None:
    assert content_type.field_names() == names
    assert content_type.allowed() == frozenset(names)
    assert content_type.allowed() <= content_type.input_names()


def test_content_to_dict_leaves_out_excluded_fields_and_writes_json_values() -> None:
    content = InstructionContent(instruction="x", guidance="g")
    assert content.to_dict(exclude={"instruction"}) == {"guidance": "g"}
    assert content.to_dict(exclude=["guidance", "unknown"], mode="json") == {"instruction": "x"}
    output = {"when": datetime.datetime(2024, 1, 2), "id": UUID(int=1), "pair": (1, 2)}
    result = ActionResponseContent(function="f", output=output)
    assert result.to_dict()["output"] is result.output  # python mode: the values as they are
    assert result.to_dict(mode="json")["output"] == {
        "when": "2024-01-02T00:00:00",
        "id": "00000000-0000-0000-0000-000000000001",
        "pair": [1, 2],
    }
    assert result.output == output  # nothing changed
    with pytest.raises(TypeError, match=r"^exclude must be a collection of field names, got str$"):
        content.to_dict(exclude="instruction")
    with pytest.raises(ValueError, match="mode"):
        content.to_dict(mode="yaml")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"cannot write nan as JSON \(at \$\.output\)"):
        ActionResponseContent(function="f", output=float("nan")).to_dict(mode="json")


def test_is_homogenous_as_lionagi_reads_it() -> None:
    base, sub = Message(), Instruction()
    assert Pile().is_homogenous()
    assert Pile([sub]).is_homogenous()
    assert Pile([sub, Instruction()]).is_homogenous()
    assert Pile([base, sub]).is_homogenous()  # every item an instance of the first one's class
    assert not Pile([sub, base]).is_homogenous()


def test_is_homogenous_reads_the_items_in_the_order_they_were_added_as_lionagis_collections() -> None:
    sub, base = Instruction(), Message()
    pile = Pile([sub])
    pile.insert(0, base)  # first in order, but added after the Instruction
    assert [type(item) for item in pile] == [Message, Instruction]
    assert not pile.is_homogenous()


def test_options_choose_a_containers_parts_too() -> None:
    pile = Pile([Instruction()])
    kept = ["created_at", "id", "metadata", "strict_type"]
    assert sorted(pile.to_dict(exclude={"collections", "progression", "item_type"})) == kept
    assert list(pile.to_dict(include={"id"})) == ["id"]
    assert list(pile.to_dict(exclude={"collections": True, "metadata": True}, include={"id", "collections"})) == ["id"]
    assert json.loads(pile.to_json(exclude={"collections"})).keys() == pile.to_dict(exclude={"collections"}).keys()


def test_the_managers_private_observer_list_is_lionagis_name_for_the_same_list() -> None:
    # LionAGI 0.36.0's MessageManager has only `_on_message_added`; its Branch and tests append to it.
    seen: list[Message] = []
    manager = MessageManager()
    manager._on_message_added.append(seen.append)
    assert manager._on_message_added is manager.on_message_added
    added = manager.add_message(instruction="Q?")
    assert seen == [added]
    replacement: list[Any] = []
    manager._on_message_added = replacement
    assert manager.on_message_added is replacement
    manager.add_message(instruction="Again?")
    assert seen == [added]


def test_async_with_a_branch_gives_the_branch_and_leaves_it_as_it_is() -> None:
    # LionAGI's docs: `async with Branch(system=...) as branch:` (on exit LionAGI dumps its logs).
    async def main() -> tuple[Branch, Message]:
        async with Branch(system="Assistant") as branch:
            added = await branch.msgs.a_add_message(instruction="Q?")
        with pytest.raises(LookupError, match="raised inside"):  # an error inside is not swallowed
            async with branch:
                raise LookupError("raised inside")
        return branch, added

    branch, added = asyncio.run(main())
    assert isinstance(branch, Branch)
    assert list(branch.messages) == [branch.system, added]
