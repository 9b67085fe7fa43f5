"""Rendered text is byte-identical to LionAGI 0.36.0 for the same content (issue: users switching keep
their prompts and prompt caches). ResponseSchema/ResponseFormat wording is lionmsg's own, and a failed
ActionResponse also shows its error; both are documented differences and are not in this table."""

from __future__ import annotations

from typing import Any

import pytest

import lionmsg
from compat.conftest import LionAGI

PNG = "data:image/png;base64,iVBORw0KGgo="
TOOL = {
    "type": "function",
    "function": {"name": "search", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}},
}

TABLE: list[tuple[str, dict[str, Any]]] = [
    # System
    ("SystemContent", {}),
    ("SystemContent", {"system_message": "You are terse."}),
    ("SystemContent", {"system_message": "Be nice", "system_datetime": "2025-01-01T00:00+00:00"}),
    ("SystemContent", {"system_message": "Line one\nLine two\n\nLine four", "system_datetime": "Tuesday"}),
    ("SystemContent", {"system_message": "Ünïcödé — 日本語 🙂"}),
    # Instruction
    ("InstructionContent", {"instruction": "Do X"}),
    ("InstructionContent", {"instruction": "Do X", "guidance": "Be brief"}),
    (
        "InstructionContent",
        {"instruction": "Do X", "guidance": "Be brief", "context": [{"k": "v"}, "s"], "tool_schemas": [{"name": "f"}]},
    ),
    ("InstructionContent", {"instruction": "Summarise", "context": "one scalar"}),
    ("InstructionContent", {"instruction": "Use tools", "tool_schemas": [TOOL, TOOL]}),
    ("InstructionContent", {"instruction": "Use tools", "tool_schemas": {"tools": [TOOL]}}),
    ("InstructionContent", {"instruction": "Nested", "context": [{"a": [1, 2, {"b": None, "c": [[], {}]}]}, [["x"]]]}),
    ("InstructionContent", {"instruction": "Line one\nLine two", "guidance": "trailing newline\n"}),
    ("InstructionContent", {"instruction": "key: value # not a comment", "guidance": "- not a list"}),
    (
        "InstructionContent",
        {"instruction": "'single' and \"double\" quotes", "context": ["@at", "`tick`", "*star", "&amp"]},
    ),
    ("InstructionContent", {"instruction": "yes", "guidance": "null", "context": ["true", "1.5", "0x1F", "~", "NO"]}),
    ("InstructionContent", {"instruction": "  padded  ", "context": [" lead", "trail ", "", None, "   "]}),
    ("InstructionContent", {"instruction": "numbers", "context": [0, -1, 1.5, 1e-7, 1e20, True, False]}),
    ("InstructionContent", {"instruction": "keys", "context": [{"with space": 1, "colon:key": 2, "123": 3, "": 4}]}),
    ("InstructionContent", {"instruction": "Ünïcödé — 日本語 🙂", "context": ["tab\there", "bell\x07"]}),
    ("InstructionContent", {"plain_content": "PLAIN text wins", "instruction": "ignored"}),
    ("InstructionContent", {"instruction": "x" * 300, "context": ["y " * 200]}),
    ("InstructionContent", {"instruction": "Look", "images": [PNG, "https://8.8.8.8/cat.png"], "image_detail": "low"}),
    ("InstructionContent", {"instruction": "Look", "images": [PNG], "image_detail": "high"}),
    ("InstructionContent", {"guidance": "only guidance", "context": {"single": "dict"}}),
    # AssistantResponse
    ("AssistantResponseContent", {"assistant_response": "Plain reply."}),
    ("AssistantResponseContent", {"assistant_response": "Multi\nline reply: with `code`"}),
    # ActionRequest
    ("ActionRequestContent", {"function": "search", "arguments": {"q": "x", "n": 3}}),
    ("ActionRequestContent", {"function": "search", "arguments": {}}),
    (
        "ActionRequestContent",
        {"function": "nested", "arguments": {"filters": {"tags": ["a", "b"], "since": None}, "k": [1, [2, 3]]}},
    ),
    ("ActionRequestContent", {"function": "text", "arguments": {"body": "line one\nline two", "quote": "it's"}}),
    (
        "ActionRequestContent",
        {"function": "typed", "arguments": {"flag": True, "ratio": 0.25, "none": None, "zero": 0}},
    ),
    # Argument text with keys without quotes, read alike (review ch F2).
    (
        "ActionRequestContent",
        {"function": "find", "arguments": "{filter: {age: {$gte: 18}}, @type: 'Person', a/b: 1, max-tokens: 5}"},
    ),
    # ActionResponse
    ("ActionResponseContent", {"function": "f", "arguments": {"a": 1}, "output": {"r": [1, 2]}}),
    ("ActionResponseContent", {"function": "f", "arguments": {"a": 1}, "output": "plain text output"}),
    ("ActionResponseContent", {"function": "f", "arguments": {}, "output": None}),
    ("ActionResponseContent", {"function": "f", "arguments": {"a": 1}, "output": 42}),
    (
        "ActionResponseContent",
        {
            "function": "f",
            "arguments": {"a": 1},
            "output": [{"id": 1, "title": "A: b"}, {"id": 2, "title": "multi\nline"}],
        },
    ),
    (
        "ActionResponseContent",
        {"function": "f", "arguments": {"q": "x"}, "output": {"empty": [], "nested": {"deep": {"er": "yes"}}}},
    ),
]


@pytest.fixture(scope="module")
def lionagi_rendered(lionagi: LionAGI) -> list[Any]:
    rendered: list[Any] = lionagi.run("render", TABLE)
    return rendered


def test_the_table_is_large_enough() -> None:
    assert len(TABLE) >= 30


@pytest.mark.parametrize("index", range(len(TABLE)), ids=[f"{name}-{i}" for i, (name, _) in enumerate(TABLE)])
def test_rendering_is_byte_identical_to_lionagi(index: int, lionagi_rendered: list[Any]) -> None:
    name, content = TABLE[index]
    ours = getattr(lionmsg, name).from_dict(content).rendered
    assert ours == lionagi_rendered[index]
