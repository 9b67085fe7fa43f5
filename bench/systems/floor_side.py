"""The pydantic floor (`floor_model`), running the same workloads with the same inputs as lion_api.

Where the floor has no manager API, the operation is the plain equivalent: "build + add_message" is
building the model and storing it, "add-or-replace" is rebuilding the content and storing the message
under its id, `progression.index(id)` is `list.index` on the order (a scan: a plain list has no index).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from functools import partial
from time import perf_counter
from typing import Any
from uuid import UUID

import pydantic

from bench import spec
from bench.harness import Rep, Timings, WorkloadFn, expect, memory_per_item, run_coroutine
from bench.systems.floor_model import (
    Envelope,
    FloorExchange,
    History,
    InstructionBody,
    Mail,
    Reply,
    ResponseBody,
    UserTurn,
)
from bench.systems.lion_api import exchange_workload


def _turn(fields: dict[str, Any]) -> UserTurn:
    body = InstructionBody(
        instruction=fields["instruction"], guidance=fields["guidance"], prompt_context=list(fields["context"])
    )
    return UserTurn(content=body, sender="user")


def _history(n: int, conversation: bool = False) -> History:
    history = History()
    for i in range(n):
        if conversation and spec.is_response_turn(i):
            history.add(Reply(content=ResponseBody(spec.assistant_text(i))))
        else:
            history.add(_turn(spec.instruction_fields(i)))
    return history


def _check(history: History, n: int, text: Any) -> None:
    expect(len(history.items) == len(history.order) == n, f"{len(history.items)} messages stored, expected {n}")
    for i in spec.spot_checks(n):
        rendered = history.items[history.order[i]].content.render()
        expect(rendered == text(i), f"message {i} renders {rendered!r}")


def add_instruction(n: int) -> Rep:
    fields = [spec.instruction_fields(i) for i in range(n)]

    def rep() -> Timings:
        history = History()
        add = history.add
        start = perf_counter()
        for f in fields:
            add(_turn(f))
        elapsed = perf_counter() - start
        _check(history, n, spec.instruction_text)
        return {"add_instruction": elapsed}

    return rep


def add_assistant_response(n: int) -> Rep:
    texts = [spec.assistant_text(i) for i in range(n)]

    def rep() -> Timings:
        history = History()
        add = history.add
        start = perf_counter()
        for text in texts:
            add(Reply(content=ResponseBody(text)))
        elapsed = perf_counter() - start
        _check(history, n, spec.assistant_text)
        return {"add_assistant_response": elapsed}

    return rep


def replace(n: int) -> Rep:
    history = _history(n)
    draws = spec.fresh_indices(n, spec.REPLACE_OPS, "replace")
    revisions = [spec.revision(k) for k in range(spec.REPLACE_OPS)]

    def rep() -> Timings:
        positions = next(draws)
        targets = [history.items[history.order[i]] for i in positions]
        add = history.add
        start = perf_counter()
        for message, guidance in zip(targets, revisions, strict=True):
            message.content = dataclasses.replace(message.content, guidance=guidance)
            add(message)
        elapsed = perf_counter() - start
        expect(len(history.order) == n, "add-or-replace changed the size")
        for k in spec.spot_checks(len(targets)):
            expect(history.order[positions[k]] == targets[k].id, f"replaced message {k} moved")
        last = {id(message): guidance for message, guidance in zip(targets, revisions, strict=True)}
        for message in targets[:16]:  # as the other systems check: the revision took effect
            current = history.items[message.id]
            expect(current.content.guidance == last[id(message)], "a replacement did not take effect")
        return {"replace": elapsed}

    return rep


def _probes(n: int) -> tuple[History, Iterator[tuple[list[int], list[Any]]]]:
    """As lion_api._probes: the history, and each repetition's positions and ids."""
    history = _history(n)
    order = history.order
    draws = (
        (positions, [order[i] for i in positions]) for positions in spec.fresh_indices(n, spec.LOOKUP_PROBES, "lookup")
    )
    return history, draws


def contains(n: int) -> Rep:
    history, draws = _probes(n)

    def rep() -> Timings:
        _, probes = next(draws)
        items = history.items
        start = perf_counter()
        found = [ident in items for ident in probes]
        elapsed = perf_counter() - start
        expect(all(found), "a stored id was reported absent")
        return {"contains": elapsed}

    return rep


def getitem(n: int) -> Rep:
    history, draws = _probes(n)

    def rep() -> Timings:
        _, probes = next(draws)
        items = history.items
        start = perf_counter()
        found = [items[ident] for ident in probes]
        elapsed = perf_counter() - start
        expect(all(m.id == ident for m, ident in zip(found, probes, strict=True)), "items[id] returned another message")
        return {"getitem": elapsed}

    return rep


def index(n: int) -> Rep:
    history, draws = _probes(n)

    def rep() -> Timings:
        positions, probes = next(draws)
        order = history.order
        start = perf_counter()
        found = [order.index(ident) for ident in probes]
        elapsed = perf_counter() - start
        expect(found == positions, "order.index(id) returned a wrong position")
        return {"index": elapsed}

    return rep


def to_chat_msgs(n: int) -> Rep:
    history = _history(n, conversation=True)

    def rep() -> Timings:
        start = perf_counter()
        chat = history.to_chat_msgs()
        elapsed = perf_counter() - start
        expect(len(chat) == n, f"{len(chat)} chat messages for {n} messages")
        for i in spec.spot_checks(n):
            response = spec.is_response_turn(i)
            want = spec.assistant_text(i) if response else spec.instruction_text(i)
            expect(chat[i] == {"role": "assistant" if response else "user", "content": want}, f"chat message {i} wrong")
        return {"to_chat_msgs": elapsed}

    return rep


def _roundtrip(n: int, metric: str, through_json: bool) -> Rep:
    messages = [_turn(spec.instruction_fields(i)) for i in range(n)]

    def rep() -> Timings:
        start = perf_counter()
        if through_json:
            loaded = [UserTurn.model_validate_json(m.model_dump_json()) for m in messages]
        else:
            loaded = [UserTurn.model_validate(m.model_dump(mode="json")) for m in messages]
        elapsed = perf_counter() - start
        expect(len(loaded) == n, "messages were lost in the round trip")
        for i in spec.spot_checks(n):
            expect(loaded[i] == messages[i], f"message {i} changed in the round trip")
        return {metric: elapsed}

    return rep


def a_add_concurrent(n: int) -> Rep:
    fields = [spec.instruction_fields(i) for i in range(n)]

    def rep() -> Timings:
        seen: list[Any] = []

        async def on_added(message: Envelope) -> None:
            await asyncio.sleep(0)  # as in lion_api: a real async observer yields
            seen.append(message.id)

        history = History(observers=[on_added])

        async def main() -> float:
            start = perf_counter()
            await asyncio.gather(*(history.a_add(_turn(f)) for f in fields))
            return perf_counter() - start

        elapsed = run_coroutine(main)
        expect(len(history.order) == n and len(seen) == n, f"{len(history.order)} stored, {len(seen)} observed")
        expect(set(history.order) == set(seen), "the observer saw other messages than were stored")
        return {"a_add_concurrent": elapsed}

    return rep


def memory(n: int) -> Rep:
    def build() -> History:
        history = History()
        for i in range(n):  # inputs made inside the measured region, as on the other sides
            history.add(_turn(spec.instruction_fields(i)))
        return history

    def check(history: History) -> None:
        _check(history, n, spec.instruction_text)

    return partial(memory_per_item, build, n, check)


def _outbox(exchange: FloorExchange, owner: UUID) -> list[Mail]:
    return exchange.mailboxes[owner].outbox


WORKLOADS: dict[str, WorkloadFn] = {
    "add_instruction": add_instruction,
    "add_assistant_response": add_assistant_response,
    "replace": replace,
    "contains": contains,
    "getitem": getitem,
    "index": index,
    "to_chat_msgs": to_chat_msgs,
    "dict_roundtrip": partial(_roundtrip, metric="dict_roundtrip", through_json=False),
    "json_roundtrip": partial(_roundtrip, metric="json_roundtrip", through_json=True),
    "a_add_concurrent": a_add_concurrent,
    "exchange_direct": partial(exchange_workload, FloorExchange, broadcast=False, outbox=_outbox),
    "exchange_broadcast": partial(exchange_workload, FloorExchange, broadcast=True, outbox=_outbox),
    "memory": memory,
}


def describe() -> dict[str, str]:
    return {"pydantic": pydantic.VERSION}
