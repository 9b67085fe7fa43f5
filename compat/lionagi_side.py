"""The LionAGI 0.36.0 side of the compatibility tests. Runs in its own environment (never imports lionmsg).

python lionagi_side.py dump    print records LionAGI writes, one per class, as a JSON list
python lionagi_side.py load    read a JSON list of records on stdin; print, for each, the class
                               LionAGI loads it as and that object's own record
"""

from __future__ import annotations

import json
import sys
from typing import Any

from lionagi.protocols import messages as lionagi_messages
from lionagi.protocols.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    MessageRole,
    System,
)

PEER = "11111111-1111-4111-8111-111111111111"
REQUEST_ID = "00000000-0000-4000-8000-0000000000a1"
RESPONSE_ID = "00000000-0000-4000-8000-0000000000a2"


def dump() -> list[dict[str, Any]]:
    meta = {"trace": {"step": 3}}
    messages = [
        Message(content={"k": [1, 2]}, sender=PEER, recipient=None, channel="ops", metadata=meta, embedding=[0.5]),
        System(content={"system_message": "Be terse.", "system_datetime": "2025-01-01T00:00+00:00"}, metadata=meta),
        Instruction(
            content={
                "instruction": "Summarise.",
                "guidance": "One line.",
                "context": [{"doc": "a"}, "plain"],
                "tool_schemas": [{"name": "search"}],
                "images": ["data:image/png;base64,iVBORw0KGgo=", "https://8.8.8.8/cat.png"],
                "image_detail": "low",
            },
            sender=MessageRole.USER,
            recipient=PEER,
            embedding=[1.0, 2.0],
        ),
        AssistantResponse.from_response({"result": "Done."}, sender=PEER),
        ActionRequest(
            id=REQUEST_ID,
            content={"function": "search", "arguments": {"q": "x"}, "action_response_id": RESPONSE_ID},
            sender="assistant",
            recipient="tools",
        ),
        ActionResponse(
            id=RESPONSE_ID,
            content={
                "function": "search",
                "arguments": {"q": "x"},
                "output": {"hits": [1]},
                "action_request_id": REQUEST_ID,
            },
        ),
        ActionResponse(content={"function": "search", "arguments": {}, "error": "timeout"}),
    ]
    return [json.loads(m.to_json()) for m in messages]


def load(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    loaded = []
    for record in records:
        message = Message.from_dict(record)
        loaded.append(
            {
                "class": f"{type(message).__module__}.{type(message).__qualname__}",
                "record": json.loads(message.to_json()),
            }
        )
    return loaded


def render(contents: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    return [getattr(lionagi_messages, name).from_dict(data).rendered for name, data in contents]


if __name__ == "__main__":
    commands = {
        "dump": lambda: dump(),
        "load": lambda: load(json.load(sys.stdin)),
        "render": lambda: render(json.load(sys.stdin)),
    }
    json.dump(commands[sys.argv[1]](), sys.stdout)
