"""The workloads for the two systems with LionAGI's API: lionmsg and LionAGI 0.36.0.

lionmsg mirrors LionAGI's names (`MessageManager.add_message`, `Pile`, `Progression.index`,
`Exchange.send`/`collect_all`...), so both run literally the same code here; a `LionApi` names the
classes. Each workload prepares its inputs and untimed state, and returns one repetition that times only
the operation and then verifies the result (a broken workload raises instead of reporting).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from time import perf_counter
from typing import Any

from bench import spec
from bench.harness import Rep, Timings, WorkloadFn, expect, memory_per_item, run_coroutine

__all__ = ["LionApi", "exchange_workload", "workloads"]


@dataclass(frozen=True)
class LionApi:
    """The classes of one implementation, and how it projects a history to chat messages uncached."""

    MessageManager: Any
    Instruction: Any
    AssistantResponse: Any
    Exchange: Any
    chat_msgs: Callable[[Any], list[dict[str, Any]]]


# -- building histories (untimed setup) and checking them ---------------------------------------------


def _instruction(api: LionApi, i: int) -> Any:
    return api.Instruction(content=spec.instruction_fields(i), sender="user")


def _response(api: LionApi, i: int) -> Any:
    return api.AssistantResponse(content={"assistant_response": spec.assistant_text(i)})


def _history(api: LionApi, n: int, conversation: bool = False) -> Any:
    """A manager holding n instructions (or, as a conversation, alternating instructions and responses)."""
    messages = [
        _response(api, i) if conversation and spec.is_response_turn(i) else _instruction(api, i) for i in range(n)
    ]
    manager = api.MessageManager(messages=messages)
    expect(len(manager.messages) == n, f"the history holds {len(manager.messages)} messages, not {n}")
    return manager


def _check_instructions(messages: list[Any], n: int) -> None:
    expect(len(messages) == n, f"{len(messages)} messages stored, expected {n}")
    for i in spec.spot_checks(n):
        expect(messages[i].rendered == spec.instruction_text(i), f"instruction {i} renders {messages[i].rendered!r}")


def _check_responses(messages: list[Any], n: int) -> None:
    expect(len(messages) == n, f"{len(messages)} messages stored, expected {n}")
    for i in spec.spot_checks(n):
        expect(messages[i].rendered == spec.assistant_text(i), f"response {i} renders {messages[i].rendered!r}")


# -- workloads ------------------------------------------------------------------------------------------


def add_instruction(api: LionApi, n: int) -> Rep:
    fields = [spec.instruction_fields(i) for i in range(n)]

    def rep() -> Timings:
        manager = api.MessageManager()
        add = manager.add_message
        start = perf_counter()
        for kwargs in fields:
            add(sender="user", **kwargs)
        elapsed = perf_counter() - start
        _check_instructions(list(manager.messages), n)
        return {"add_instruction": elapsed}

    return rep


def add_assistant_response(api: LionApi, n: int) -> Rep:
    texts = [spec.assistant_text(i) for i in range(n)]

    def rep() -> Timings:
        manager = api.MessageManager()
        add = manager.add_message
        start = perf_counter()
        for text in texts:
            add(assistant_response=text)
        elapsed = perf_counter() - start
        _check_responses(list(manager.messages), n)
        return {"add_assistant_response": elapsed}

    return rep


def replace(api: LionApi, n: int) -> Rep:
    manager = _history(api, n)
    stored = list(manager.messages)
    draws = spec.fresh_indices(n, spec.REPLACE_OPS, "replace")
    revisions = [spec.revision(k) for k in range(spec.REPLACE_OPS)]

    def rep() -> Timings:
        positions = next(draws)
        targets = [stored[i] for i in positions]
        add = manager.add_message
        start = perf_counter()
        for message, guidance in zip(targets, revisions, strict=True):
            add(instruction=message, guidance=guidance)  # an existing message: replaced where it stands
        elapsed = perf_counter() - start
        expect(len(manager.messages) == n, f"add-or-replace changed the size to {len(manager.messages)}")
        progression = manager.progression
        for k in spec.spot_checks(len(targets)):
            message = manager.messages[targets[k].id]
            expect(progression.index(message.id) == positions[k], f"replaced message {k} moved")
        last = {id(message): guidance for message, guidance in zip(targets, revisions, strict=True)}
        for message in targets[:16]:
            current = manager.messages[message.id]
            expect(current.content.guidance == last[id(message)], "a replacement did not take effect")
        return {"replace": elapsed}

    return rep


def _probes(api: LionApi, n: int) -> tuple[Any, Iterator[tuple[list[int], list[Any]]]]:
    """A history of n instructions, and for each repetition in turn the positions it probes and their ids."""
    manager = _history(api, n)
    order = list(manager.progression)
    draws = (
        (positions, [order[i] for i in positions]) for positions in spec.fresh_indices(n, spec.LOOKUP_PROBES, "lookup")
    )
    return manager, draws


def contains(api: LionApi, n: int) -> Rep:
    manager, draws = _probes(api, n)

    def rep() -> Timings:
        _, probes = next(draws)
        pile = manager.messages
        start = perf_counter()
        found = [ident in pile for ident in probes]
        elapsed = perf_counter() - start
        expect(all(found), "a stored id was reported absent")
        return {"contains": elapsed}

    return rep


def getitem(api: LionApi, n: int) -> Rep:
    manager, draws = _probes(api, n)

    def rep() -> Timings:
        _, probes = next(draws)
        pile = manager.messages
        start = perf_counter()
        found = [pile[ident] for ident in probes]
        elapsed = perf_counter() - start
        expect(all(m.id == ident for m, ident in zip(found, probes, strict=True)), "pile[id] returned another message")
        return {"getitem": elapsed}

    return rep


def index(api: LionApi, n: int) -> Rep:
    manager, draws = _probes(api, n)

    def rep() -> Timings:
        positions, probes = next(draws)
        progression = manager.progression
        start = perf_counter()
        found = [progression.index(ident) for ident in probes]
        elapsed = perf_counter() - start
        expect(found == positions, "progression.index(id) returned a wrong position")
        return {"index": elapsed}

    return rep


def to_chat_msgs(api: LionApi, n: int) -> Rep:
    manager = _history(api, n, conversation=True)

    def rep() -> Timings:
        start = perf_counter()
        chat = api.chat_msgs(manager)
        elapsed = perf_counter() - start
        expect(len(chat) == n, f"{len(chat)} chat messages for {n} messages")
        for i in spec.spot_checks(n):
            response = spec.is_response_turn(i)
            want = spec.assistant_text(i) if response else spec.instruction_text(i)
            role = "assistant" if response else "user"
            expect(chat[i] == {"role": role, "content": want}, f"chat message {i} is {chat[i]!r}")
        return {"to_chat_msgs": elapsed}

    return rep


def _roundtrip(api: LionApi, n: int, through_json: bool) -> Rep:
    """to_dict + from_dict (or to_json + from_json) of each of n instructions."""
    messages = [_instruction(api, i) for i in range(n)]
    dump, load = ("to_json", api.Instruction.from_json) if through_json else ("to_dict", api.Instruction.from_dict)
    metric = "json_roundtrip" if through_json else "dict_roundtrip"

    def rep() -> Timings:
        start = perf_counter()
        loaded = [load(getattr(message, dump)()) for message in messages]
        elapsed = perf_counter() - start
        _check_roundtrip(messages, loaded)
        return {metric: elapsed}

    return rep


def _check_roundtrip(original: list[Any], loaded: list[Any]) -> None:
    expect(len(loaded) == len(original), "messages were lost in the round trip")
    for i in spec.spot_checks(len(original)):
        before, after = original[i], loaded[i]
        expect(type(after) is type(before) and after.id == before.id, f"message {i} came back as another record")
        expect(after.content == before.content and after.created_at == before.created_at, f"message {i} changed")


def a_add_concurrent(api: LionApi, n: int) -> Rep:
    fields = [spec.instruction_fields(i) for i in range(n)]

    def rep() -> Timings:
        seen: list[Any] = []

        async def on_added(message: Any) -> None:
            await asyncio.sleep(0)  # a real async observer yields (e.g. to persist the message)
            seen.append(message.id)

        manager = api.MessageManager(on_message_added=[on_added])

        async def main() -> float:
            add = manager.a_add_message
            start = perf_counter()
            await asyncio.gather(*(add(sender="user", **kwargs) for kwargs in fields))
            return perf_counter() - start

        elapsed = run_coroutine(main)
        stored = list(manager.messages)
        expect(len(stored) == n and len(seen) == n, f"{len(stored)} stored, {len(seen)} observed, expected {n}")
        expect({m.id for m in stored} == set(seen), "the observer saw other messages than were stored")
        return {"a_add_concurrent": elapsed}

    return rep


def exchange_workload(
    make_exchange: Callable[[], Any],
    n: int,
    broadcast: bool,
    outbox: Callable[[Any, Any], list[Any]],
    last_metric: str | None = None,
) -> Rep:
    """100 owners sending n direct messages, or 10 owners broadcasting n; then one collect_all().
    Shared with the floor, whose exchange has the same four methods; `outbox(exchange, owner)` lists
    what an owner has queued. With `last_metric` the send metric, a repetition stops after the sends
    and checks the outboxes instead of the delivered mail."""
    count = spec.BROADCAST_OWNERS if broadcast else spec.DIRECT_OWNERS
    owners = spec.owner_ids(count)
    plan = [(sender, None, content) for sender, content in spec.broadcast_plan(n)] if broadcast else spec.direct_plan(n)
    kind = "broadcast" if broadcast else "direct"
    send_metric, collect_metric = f"exchange_{kind}_send", f"exchange_{kind}_collect"
    if last_metric not in (None, send_metric, collect_metric):
        raise ValueError(f"the {kind} Exchange workload has no metric {last_metric!r}")
    copies = n * (count - 1) if broadcast else n
    spot_checked = (owners[0], owners[-1])
    expected = {owner: _mail_by_sender(_sent_to(owner, plan)) for owner in spot_checked}
    queued = {owner: _addressed(_sent_by(owner, plan)) for owner in spot_checked}

    def check_outboxes(exchange: Any) -> None:
        waiting = sum(len(outbox(exchange, owner)) for owner in owners)
        expect(waiting == n, f"{waiting} messages queued after {n} {kind} sends")
        for owner in spot_checked:
            mail = [(message.sender, message.recipient, message.content) for message in outbox(exchange, owner)]
            expect(_addressed(mail) == queued[owner], f"{kind} mail of {owner} misqueued")

    def rep() -> Timings:
        exchange = make_exchange()
        for owner in owners:
            exchange.register(owner)
        send = exchange.send
        start = perf_counter()
        for sender, recipient, content in plan:
            send(sender, recipient, content)
        sent = perf_counter()
        if last_metric == send_metric:
            check_outboxes(exchange)
            return {send_metric: sent - start}
        delivered = run_coroutine(exchange.collect_all)
        collected = perf_counter()
        expect(delivered == n, f"collect_all delivered {delivered} of {n} {kind} messages")
        inboxes = sum(len(exchange.receive(owner)) for owner in owners)
        expect(inboxes == copies, f"{inboxes} messages in inboxes after {n} {kind} sends, expected {copies}")
        for owner in spot_checked:
            expect(_mail_by_sender(_received(exchange, owner)) == expected[owner], f"{kind} mail misrouted to {owner}")
        return {send_metric: sent - start, collect_metric: collected - sent}

    return rep


def flow_outbox(exchange: Any, owner: Any) -> list[Any]:
    """What `owner` has queued, in an Exchange with LionAGI's API (a Flow per owner, an 'outbox' progression)."""
    flow = exchange.get(owner)
    return [flow.items[message_id] for message_id in flow.get_progression("outbox")]


def _sent_by(owner: Any, plan: list[tuple[Any, Any, Any]]) -> list[tuple[Any, Any, Any]]:
    """What `owner` sent, as (sender, recipient, content), in order."""
    return [mail for mail in plan if mail[0] == owner]


def _addressed(mail: list[tuple[Any, Any, Any]]) -> list[tuple[str, str | None, int]]:
    """Queued mail as (sender, recipient or None for a broadcast, content `seq`), in order, spelled
    alike for every system."""
    return [
        (str(sender), None if recipient is None else str(recipient), content["seq"])
        for sender, recipient, content in mail
    ]


def _sent_to(owner: Any, plan: list[tuple[Any, Any, Any]]) -> list[tuple[Any, Any]]:
    """What `owner` must receive, as (sender, content): what was sent to it and the others' broadcasts."""
    return [
        (sender, content)
        for sender, recipient, content in plan
        if recipient == owner or (recipient is None and sender != owner)
    ]


def _received(exchange: Any, owner: Any) -> list[tuple[Any, Any]]:
    return [(message.sender, message.content) for message in exchange.receive(owner)]


def _mail_by_sender(mail: list[tuple[Any, Any]]) -> dict[str, list[int]]:
    """Each sender's messages (by their content's `seq`), in the order they arrived."""
    grouped: dict[str, list[int]] = {}
    for sender, content in mail:
        grouped.setdefault(str(sender), []).append(content["seq"])
    return grouped


def memory(api: LionApi, n: int) -> Rep:
    def build() -> Any:
        manager = api.MessageManager()
        for i in range(n):  # inputs made inside the measured region: what the messages keep is counted
            manager.add_message(sender="user", **spec.instruction_fields(i))
        return manager

    def check(manager: Any) -> None:
        _check_instructions(list(manager.messages), n)

    return partial(memory_per_item, build, n, check)


def _exchange(api: LionApi, n: int, broadcast: bool, last_metric: str | None = None) -> Rep:
    return exchange_workload(api.Exchange, n, broadcast, flow_outbox, last_metric)


def workloads(api: LionApi) -> dict[str, WorkloadFn]:
    """Every workload of `spec.WORKLOADS`, bound to one implementation."""
    table: dict[str, Callable[..., Rep]] = {
        "add_instruction": add_instruction,
        "add_assistant_response": add_assistant_response,
        "replace": replace,
        "contains": contains,
        "getitem": getitem,
        "index": index,
        "to_chat_msgs": to_chat_msgs,
        "dict_roundtrip": partial(_roundtrip, through_json=False),
        "json_roundtrip": partial(_roundtrip, through_json=True),
        "a_add_concurrent": a_add_concurrent,
        "exchange_direct": partial(_exchange, broadcast=False),
        "exchange_broadcast": partial(_exchange, broadcast=True),
        "memory": memory,
    }
    return {name: partial(fn, api) for name, fn in table.items()}
