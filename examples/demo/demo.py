"""The lionmsg demo: two agent branches, recorded provider replies, a tool call, routing, persistence.

Offline and deterministic: provider responses are recorded JSON files next to this script, branch ids
are fixed, and nothing printed depends on the clock or on random message ids.

    make demo        (or: python examples/demo/demo.py [OUTPUT_DIR])
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any
from uuid import NAMESPACE_URL, uuid5

from lionmsg import ActionRequest, Branch, Exchange, MessageManager, System
from lionmsg.runtime.render.table import conversation_table
from lionmsg.schema.validator import RecordValidator
from lionmsg.store import SQLiteStore, load_snapshot, save_snapshot

HERE = Path(__file__).resolve().parent
RECORDED = HERE / "recorded"
RESEARCHER = uuid5(NAMESPACE_URL, "https://lionmsg.dev/demo/researcher")
WRITER = uuid5(NAMESPACE_URL, "https://lionmsg.dev/demo/writer")
NAMES = {RESEARCHER: "researcher", WRITER: "writer"}
# A one-pixel PNG: the instruction carries an image the way a real chart would travel.
CHART = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
FORECAST_TOOL = {
    "type": "function",
    "function": {
        "name": "get_forecast",
        "description": "Daily rainfall forecast in millimetres.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city", "days"],
        },
    },
}


def get_forecast(city: str, days: int) -> dict[str, Any]:
    """The demo's tool: a fixed forecast, so the run is reproducible."""
    return {"city": city, "rain_mm": [12, 9, 4, 0, 0][:days]}


def recorded(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((RECORDED / name).read_text(encoding="utf-8"))
    return loaded


def step(number: int, text: str) -> None:
    print(f"{number}. {text}")


def researcher_turn(branch: Branch) -> dict[str, Any]:
    history = branch.msgs
    history.add_message(
        system=System(content={"system_message": "You are a careful travel researcher. Use tools for facts."})
    )
    history.add_message(
        instruction="Plan a rainy-day itinerary for Lyon.",
        guidance="Check the forecast before suggesting anything.",
        context={"traveller": "two adults", "month": "November"},
        tool_schemas=[FORECAST_TOOL],
        images=[CHART],
        image_detail="low",
        sender="user",
        recipient=RESEARCHER,
    )
    step(1, "researcher: system prompt + instruction with context, a tool schema and an image")

    reply = recorded("openai_chat_completion.json")
    history.add_message(assistant_response=reply, sender=RESEARCHER, recipient="user")
    for call in reply["choices"][0]["message"]["tool_calls"]:
        request = history.add_message(
            action_function=call["function"]["name"],
            action_arguments=call["function"]["arguments"],  # a JSON string, parsed on the way in
            sender=RESEARCHER,
            recipient="get_forecast",
        )
        assert isinstance(request, ActionRequest)
        output = get_forecast(**request.content.arguments)
        history.add_message(action_request=request, action_output=output, sender="get_forecast", recipient=RESEARCHER)
    step(2, "OpenAI-shaped reply -> AssistantResponse; its tool call -> linked ActionRequest/ActionResponse")
    last = history.last_response
    assert last is not None
    return {"summary": last.rendered, "forecast": history.action_responses[-1].content.output}


async def route(exchange: Exchange, findings: dict[str, Any]) -> list[Any]:
    exchange.send(RESEARCHER, WRITER, findings, channel="research")
    exchange.send(WRITER, None, "Drafting the travel note now.", channel="status")
    delivered = await exchange.collect_all()
    step(3, f"exchange: researcher -> writer (direct), writer -> everyone (broadcast); {delivered} delivered")
    return exchange.receive(WRITER, sender=RESEARCHER)


def writer_turn(branch: Branch, mail: list[Any]) -> None:
    history = branch.msgs
    history.add_message(system=System(content={"system_message": "You write short, friendly travel notes."}))
    history.add_message(
        instruction="Write a two-sentence travel note from the research.",
        context=[message.content for message in mail],
        sender=RESEARCHER,
        recipient=WRITER,
    )
    history.add_message(assistant_response=recorded("anthropic_message.json"), sender=WRITER, recipient=RESEARCHER)
    step(4, "writer: instruction from the routed mail; Anthropic-shaped reply -> AssistantResponse")


def persist_and_check(branches: list[Branch], exchange: Exchange, out: Path) -> None:
    database = out / "histories.db"
    for stale in out.glob("histories.db*"):
        stale.unlink()
    with SQLiteStore(database) as store:
        for branch in branches:
            store.attach(branch, NAMES[branch.id])
        # One more message after attaching: written through the observer, not by the initial copy.
        branches[0].msgs.add_message(instruction="Thanks, that is all.", sender="user", recipient=RESEARCHER)
    save_snapshot(exchange, out / "exchange.json")

    with SQLiteStore(database) as fresh:
        for branch in branches:
            reloaded = fresh.load(NAMES[branch.id])
            assert [type(m) for m in reloaded] == [type(m) for m in branch.msgs]
            assert [m.to_dict() for m in reloaded] == [m.to_dict() for m in branch.msgs]
    assert load_snapshot(out / "exchange.json", Exchange).to_dict() == exchange.to_dict()
    step(5, f"persisted to {database} (SQLite, WAL) and {out / 'exchange.json'}; reloaded fresh: equal")

    validator = RecordValidator()
    records = [m.to_dict() for branch in branches for m in branch.msgs]
    records += [m.to_dict() for owner in exchange.owner_ids for m in exchange.receive(owner)]
    problems = [str(error) for record in records for error in validator.errors(record)]
    assert not problems, problems
    step(6, f"{len(records)} records valid against the published schemas")


def lionmsg_command() -> str:
    """The `lionmsg` script next to this interpreter (the project's .venv), as a path from here."""
    script = Path(sys.executable).parent / "lionmsg"
    return os.path.relpath(script) if script.exists() else "lionmsg"


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else Path("build/demo")
    out.mkdir(parents=True, exist_ok=True)
    print("lionmsg demo (offline, deterministic)\n")
    researcher = Branch(id=RESEARCHER, msgs=MessageManager())
    writer = Branch(id=WRITER, msgs=MessageManager())
    exchange = Exchange()
    for branch in (researcher, writer):
        exchange.register(branch.id)

    findings = researcher_turn(researcher)
    mail = asyncio.run(route(exchange, findings))
    writer_turn(writer, mail)
    persist_and_check([researcher, writer], exchange, out)

    for branch in (researcher, writer):
        print(f"\n== {NAMES[branch.id]} ==")
        print(conversation_table(branch.msgs, NAMES))
    print("\n== provider chat messages (writer) ==")
    print(json.dumps(writer.msgs.to_chat_msgs(), indent=2, ensure_ascii=False))
    print(f"\nInspect it again with: {lionmsg_command()} show {out / 'histories.db'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
