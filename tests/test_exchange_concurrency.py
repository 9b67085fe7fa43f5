"""Exchange under concurrency (ADR-0006 D5, design.md §6.11): many owners sending, collecting, reading and
leaving at once, and failing inbox writes. Afterwards, every sent message is, per intended recipient,
either in exactly one inbox (or popped, or gone with its owner's Flow) or in the drop record: nothing
vanishes, nothing is duplicated, and the collect counts add up to the messages that reached an inbox.

A collect with mail waits at one yield before it takes its outbox, then takes, routes and delivers it with
no further await. So an owner that leaves while collects wait there is never routed to (and its queued
mail is dropped as `DROP_SENDER_UNREGISTERED`, its own collect taking nothing), nothing in these
workloads can drop mail as `DROP_UNREGISTERED`, and a record written by another task at any await holds
all the mail. A message's intended recipients are fixed when it is routed: a spy around the Exchange's
routing step notes the owners registered at that moment (it changes nothing). No timing is asserted:
`asyncio.wait_for` only turns a deadlock into a failure instead of a hang."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from typing import Any
from uuid import UUID, uuid4

import pytest

from lionmsg import Exchange, Flow, Message, MessageRole
from lionmsg.runtime.exchange import (
    DROP_DELIVERY_ERROR,
    DROP_NOT_AN_OWNER,
    DROP_SENDER_UNREGISTERED,
    DROP_UNKNOWN_RECIPIENT,
    DROP_UNREGISTERED,
    route_pairs,
)
from tests.mail import drop_address, failing_deliveries

DEADLOCK_GUARD = 300  # seconds; a guard against hanging forever, not a speed bar
BIG = 1_000_000  # a drop limit no test reaches: every drop stays visible
Pair = tuple[UUID, "str | None"]  # (message id, recipient as the drop record writes it)


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout=DEADLOCK_GUARD))


def inbox_pairs(flow: Flow, owner: UUID) -> list[Pair]:
    return [(ident, str(owner)) for _, inbox in flow.inboxes() for ident in inbox]


def assert_flow_consistent(flow: Flow) -> None:
    """A flow lists each of its messages in exactly one progression."""
    listed = [ident for progression in flow.progressions.values() for ident in progression]
    assert len(listed) == len(set(listed)) == len(flow.items)
    assert set(listed) == set(flow.items.keys())


class Ledger:
    """Everything the test did to one Exchange, and who the Exchange meant each message for."""

    def __init__(self, exchange: Exchange, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ex = exchange
        self.sent: dict[UUID, Message] = {}
        # id -> (intended recipients as text, owners registered at routing, the targets routing chose)
        self.routed: dict[UUID, tuple[list[str | None], list[UUID], list[UUID]]] = {}
        self.routed_twice: list[UUID] = []
        self.popped: Counter[Pair] = Counter()
        # departed flow id -> (flow, its inbox pairs, its outbox), as they were when its owner left
        self.left: dict[UUID, tuple[Flow, list[Pair], list[UUID]]] = {}
        self.pending_at_departure: list[UUID] = []
        self.ever_unregistered: set[UUID] = set()
        self.collecting: Counter[UUID] = Counter()  # owner -> its collects started through `collect`, not done
        self.left_while_collecting = 0  # departures while a collect of the owner's own waited at its yield
        self.collected = 0
        self.delivery_errors_allowed = False
        original = Exchange._route
        ledger = self

        def spy(
            self: Exchange, message: Message, sender: UUID, unroutable: list[Message]
        ) -> list[tuple[UUID, Message]]:
            owners = list(self.owner_ids)
            routes = original(self, message, sender, unroutable)
            if message.id in ledger.routed:
                ledger.routed_twice.append(message.id)
            intended: list[str | None]
            if message.recipient is None:
                intended = [str(owner) for owner in owners if owner != sender]
            else:
                intended = [drop_address(message.recipient)]
            ledger.routed[message.id] = (intended, owners, [target for target, _ in route_pairs(routes)])
            return routes

        monkeypatch.setattr(Exchange, "_route", spy)

    # -- operations ------------------------------------------------------------------------------

    def register(self, owner: UUID, spelling: int = 0) -> None:
        self.ex.register([owner, str(owner), str(owner).upper()][spelling % 3])

    def send(self, sender: UUID, recipient: Any, content: Any) -> Message:
        message = self.ex.send(sender, recipient, content)
        assert message.id not in self.sent
        self.sent[message.id] = message
        return message

    async def collect(self, owner: UUID) -> None:
        if self.ex.has(owner):  # no await between the check and the collect's own check
            self.collecting[owner] += 1
            try:
                count = await self.ex.collect(owner)
            finally:
                self.collecting[owner] -= 1
            self.collected += count  # not `+= await`: that reads the total before awaiting

    async def collect_all(self) -> None:
        count = await self.ex.collect_all()
        self.collected += count

    def unregister(self, owner: UUID) -> None:
        flow = self.ex.unregister(owner)
        if flow is None:
            return
        if self.collecting[owner]:  # that collect waits at its yield, having taken nothing
            self.left_while_collecting += 1
        self.ever_unregistered.add(owner)
        self.left[flow.id] = (flow, inbox_pairs(flow, owner), list(flow.outbox))
        self.pending_at_departure.extend(flow.outbox)

    def pop(self, owner: UUID, sender: UUID) -> None:
        message = self.ex.pop_message(owner, sender)
        if message is not None:
            self.popped[(message.id, str(owner))] += 1

    async def until_quiet(self) -> None:
        """collect_all until no outbox holds anything."""
        for _ in range(100):
            await self.collect_all()
            if not any(len(flow.outbox) for flow in map(self.ex.get, self.ex.owner_ids) if flow is not None):
                return
        raise AssertionError("the outboxes never emptied")

    # -- the property ----------------------------------------------------------------------------

    def assert_conserved(self) -> Counter[str]:
        """Per (message, intended recipient): exactly one inbox copy, pop, departure with its owner or
        drop with the right reason; nothing anywhere else; the collect counts add up. Returns the drop
        reasons seen."""
        assert self.routed_twice == []
        in_inbox: Counter[Pair] = Counter()
        for owner in self.ex.owner_ids:
            flow = self.ex.get(owner)
            assert flow is not None
            assert len(flow.outbox) == 0  # quiet
            assert_flow_consistent(flow)
            in_inbox.update(inbox_pairs(flow, owner))
        left: Counter[Pair] = Counter()
        for flow, pairs, outbox in self.left.values():
            assert inbox_pairs(flow, UUID(flow.name)) == pairs  # nothing was written to a departed mailbox
            assert list(flow.outbox) == outbox  # nor taken from it by a collect that waited when it left
            assert_flow_consistent(flow)
            left.update(pairs)
        dropped: Counter[Pair] = Counter()
        reasons: dict[Pair, str] = {}
        for drop in self.ex.dropped:
            pair = (UUID(drop.message_id), drop.recipient)
            dropped[pair] += 1
            reasons[pair] = drop.reason
            assert drop.sender == str(self.sent[pair[0]].sender)
        assert sum(self.ex.drop_counts.values()) == len(self.ex.dropped)  # nothing evicted
        places: Counter[UUID] = Counter()
        for counter in (in_inbox, left, self.popped, dropped):
            for (ident, _), count in counter.items():
                places[ident] += count
        assert set(places) <= set(self.sent)

        for ident, message in self.sent.items():
            if ident not in self.routed:  # its sender left with it still queued
                assert ident in self.pending_at_departure
                pair = (ident, drop_address(message.recipient))
                assert dropped[pair] == 1
                assert reasons[pair] == DROP_SENDER_UNREGISTERED
                assert places[ident] == 1
                continue
            assert ident not in self.pending_at_departure
            intended, owners_then, targets = self.routed[ident]
            recipient = message.recipient
            if recipient is None:
                assert targets == [owner for owner in owners_then if owner != message.sender]
            else:
                assert targets == ([recipient] if recipient in owners_then else [])
            assert len(set(intended)) == len(intended)
            for name in intended:
                pair = (ident, name)
                found = in_inbox[pair] + left[pair] + self.popped[pair] + dropped[pair]
                assert found == 1, (pair, in_inbox[pair], left[pair], self.popped[pair], dropped[pair])
                if dropped[pair]:
                    self.assert_reason(reasons[pair], recipient, owners_then)
            assert places[ident] == len(intended)
        reached = {ident for counter in (in_inbox, left, self.popped) for ident, _ in counter}
        assert self.collected == len(reached)
        return Counter(self.ex.drop_counts)

    def assert_reason(self, reason: str, recipient: Any, owners_then: list[UUID]) -> None:
        if reason == DROP_DELIVERY_ERROR:
            assert self.delivery_errors_allowed
        elif recipient is not None and not isinstance(recipient, UUID):
            assert reason == DROP_NOT_AN_OWNER
        elif recipient is not None and recipient not in owners_then:
            assert reason == DROP_UNKNOWN_RECIPIENT
        else:  # routed to an owner registered then, and delivered with no await in between
            pytest.fail(f"mail routed to a registered owner and written without fail was dropped: {reason}")

    def assert_round_trips(self) -> None:
        loaded = Exchange.from_dict(self.ex.to_dict())
        assert loaded.owner_ids == self.ex.owner_ids
        for owner in self.ex.owner_ids:
            original, copy = self.ex.get(owner), loaded.get(owner)
            assert original is not None
            assert copy is not None
            assert [(name, list(p)) for name, p in copy.progressions.items()] == [
                (name, list(p)) for name, p in original.progressions.items()
            ]
        assert loaded.dropped == self.ex.dropped


# -- many owners at once --------------------------------------------------------------------------


async def workload(ledger: Ledger, rng: random.Random, owners: int, rounds: int) -> None:
    live: list[UUID] = []
    former: list[UUID] = []
    promised: list[UUID] = []

    def join(owner: UUID) -> None:
        ledger.register(owner, rng.randrange(3))
        live.append(owner)
        for pool in (former, promised):
            if owner in pool:
                pool.remove(owner)

    def recipient_for(sender: UUID) -> Any:
        roll = rng.random()
        if roll < 0.3 or not live:
            return None  # broadcast
        if roll < 0.75:
            return rng.choice(live)
        if roll < 0.8:
            return sender
        if roll < 0.87:
            owner = uuid4()
            promised.append(owner)
            return str(owner).upper()
        if roll < 0.9 and former:
            return rng.choice(former)
        if roll < 0.93:
            return uuid4()
        return rng.choice(["alice", "user", MessageRole.UNSET])

    async def sender(owner: UUID, count: int, then_collect: bool) -> None:
        for index in range(count):
            await asyncio.sleep(0)
            if not ledger.ex.has(owner):
                return
            ledger.send(owner, recipient_for(owner), {"from": str(owner), "n": index})
        if then_collect:
            await ledger.collect(owner)

    async def leaver(owner: UUID, delay: int) -> None:
        for _ in range(delay):
            await asyncio.sleep(0)
        if owner in live:
            live.remove(owner)
            former.append(owner)
            ledger.unregister(owner)
        else:
            assert ledger.ex.unregister(owner) is None

    async def joiner(delay: int) -> None:
        for _ in range(delay):
            await asyncio.sleep(0)
        pools = [pool for pool in (promised, former) if pool]
        join(rng.choice(rng.choice(pools)) if pools and rng.random() < 0.7 else uuid4())

    async def reader(delay: int) -> None:
        for _ in range(delay):
            await asyncio.sleep(0)
        if not live:
            return
        owner = rng.choice(live)
        flow = ledger.ex.get(owner)
        assert flow is not None
        assert [m.id for m in ledger.ex.receive(owner)] == [ident for ident, _ in inbox_pairs(flow, owner)]
        names = [name.removeprefix("inbox_") for name, inbox in flow.inboxes() if len(inbox)]
        if names:
            ledger.pop(owner, UUID(rng.choice(names)))

    for _ in range(owners):
        join(uuid4())
    for _ in range(rounds):
        tasks: list[Any] = []
        for owner in rng.sample(live, min(len(live), 12)):
            tasks.append(sender(owner, rng.randint(1, 4), rng.random() < 0.7))
        for owner in rng.sample(live, min(len(live), 6)):
            tasks.append(ledger.collect(owner))  # may race with the owner's own collect
        tasks.append(ledger.collect_all())
        for owner in rng.sample(live, min(len(live), 2)):
            tasks.append(leaver(owner, rng.randint(0, 3)))
        if former:
            tasks.append(leaver(rng.choice(former), 0))  # not registered: None
        tasks.extend(joiner(rng.randint(0, 3)) for _ in range(2))
        tasks.extend(reader(rng.randint(0, 3)) for _ in range(3))
        rng.shuffle(tasks)
        await asyncio.gather(*tasks)
    await ledger.until_quiet()


@pytest.mark.parametrize("seed", range(4))
def test_fifty_owners_sending_collecting_and_leaving_at_once_lose_and_duplicate_nothing(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(Exchange(drop_limit=BIG), monkeypatch)
    run(workload(ledger, random.Random(seed), owners=50, rounds=25))
    reasons = ledger.assert_conserved()
    ledger.assert_round_trips()
    # The run exercised what it claims: broadcasts, departures while collects wait at their yield (the
    # departing owner's own among them), every routing drop, pops.
    assert len(ledger.sent) > 500
    assert any(message.recipient is None for message in ledger.sent.values())
    for reason in (DROP_SENDER_UNREGISTERED, DROP_UNKNOWN_RECIPIENT, DROP_NOT_AN_OWNER):
        assert reasons[reason] > 0, reason
    # A collect routes and delivers in one step: an owner that left meanwhile is not routed to at all.
    assert reasons[DROP_UNREGISTERED] == 0
    assert ledger.left_while_collecting > 0
    assert sum(ledger.popped.values()) > 0
    assert ledger.left


def test_concurrent_collects_of_one_owner_route_each_message_once(monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = Ledger(Exchange(drop_limit=BIG), monkeypatch)
    owners = [uuid4() for _ in range(10)]
    for owner in owners:
        ledger.register(owner)
    for index in range(30):
        ledger.send(owners[0], None if index % 3 == 0 else owners[1 + index % 9], index)

    async def main() -> list[int]:
        return list(
            await asyncio.gather(
                ledger.ex.collect(owners[0]), ledger.ex.collect(owners[0]), ledger.ex.collect_all(), ledger.ex.sync()
            )
        )

    counts = run(main())
    ledger.collected = sum(counts)
    assert sorted(counts) == [0, 0, 0, 30]
    ledger.assert_conserved()
    assert ledger.ex.dropped == []


def test_owners_leaving_while_broadcasts_are_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every owner broadcasts and collects at once while a task removes owners, one per event-loop turn:
    the first leaves while every collect waits at its yield, having taken nothing. Its queued mail is
    dropped with it, its own collect takes nothing, and the other collects route around it (the one
    message addressed to it finds no such owner); the later departures come after every delivery."""
    ledger = Ledger(Exchange(drop_limit=BIG), monkeypatch)
    owners = [uuid4() for _ in range(50)]
    for owner in owners:
        ledger.register(owner)
    for owner in owners:
        ledger.send(owner, None, str(owner))
        ledger.send(owner, owners[(owners.index(owner) + 1) % 50], "next")
    first = owners[0]
    pending_when_the_first_left: list[int] = []

    async def remove(leaving: list[UUID]) -> None:
        for owner in leaving:
            if owner == first:
                pending_when_the_first_left.append(sum(ledger.collecting.values()))
            ledger.unregister(owner)
            await asyncio.sleep(0)

    async def main() -> None:
        await asyncio.gather(*(ledger.collect(owner) for owner in owners), remove(owners[::5]))
        await ledger.until_quiet()

    run(main())
    assert pending_when_the_first_left == [50]
    assert ledger.left_while_collecting == 1
    reasons = ledger.assert_conserved()
    assert reasons == Counter({DROP_SENDER_UNREGISTERED: 2, DROP_UNKNOWN_RECIPIENT: 1})
    assert not any(message.sender == first for message in ledger.ex.receive(owners[1]))
    for ident, (_, owners_then, targets) in ledger.routed.items():
        assert first not in owners_then
        assert first not in targets
        assert ledger.sent[ident].sender != first
    for owner in owners:
        if owner not in ledger.ever_unregistered:
            # It got the broadcast of every owner that was still registered when that broadcast was routed.
            got = {message.id for message in ledger.ex.receive(owner)}
            expected = {ident for ident, (intended, _, _) in ledger.routed.items() if str(owner) in intended}
            assert got == expected


def test_a_record_written_while_collects_wait_at_their_yield_loses_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """design.md §6.13 under concurrency: a task writes the Exchange's record while every collect waits at
    its yield, just after some owners left. No collect has taken anything then, so the record holds every
    message once: queued in its sender's outbox, or dropped with its departed sender. Restored and
    collected, it ends exactly as the live Exchange did (same inboxes, same drops, same count), and the
    live one lost nothing."""
    ledger = Ledger(Exchange(drop_limit=BIG), monkeypatch)
    rng = random.Random(11)
    owners = [uuid4() for _ in range(20)]
    for owner in owners:
        ledger.register(owner)
    for owner in owners:
        for index in range(4):
            recipient = rng.choice([None, rng.choice(owners), rng.choice(owners), uuid4(), "alice"])
            ledger.send(owner, recipient, {"from": str(owner), "n": index})
    leaving = owners[2::6]
    records: list[dict[str, Any]] = []

    async def leave_then_write_the_record() -> None:
        # gather started every collect first: each waits at its yield with its outbox untouched.
        assert sum(ledger.collecting.values()) == len(owners)
        for owner in leaving:
            ledger.unregister(owner)
        records.append(ledger.ex.to_dict())

    async def main() -> None:
        await asyncio.gather(*(ledger.collect(owner) for owner in owners), leave_then_write_the_record())

    run(main())
    assert ledger.left_while_collecting == len(leaving)
    reasons = ledger.assert_conserved()
    assert reasons[DROP_SENDER_UNREGISTERED] == 4 * len(leaving)
    assert reasons[DROP_UNREGISTERED] == 0

    (record,) = records
    restored = Exchange.from_dict(record)
    assert restored.owner_ids == [owner for owner in owners if owner not in leaving]
    held: Counter[UUID] = Counter()
    for owner in restored.owner_ids:
        flow = restored.get(owner)
        assert flow is not None
        assert restored.receive(owner) == []  # nothing delivered yet...
        assert [ledger.sent[ident].sender for ident in flow.outbox] == [owner] * 4  # ...nor taken
        held.update(flow.outbox)
    assert {drop.reason for drop in restored.dropped} == {DROP_SENDER_UNREGISTERED}
    held.update(UUID(drop.message_id) for drop in restored.dropped)
    assert held == Counter(set(ledger.sent))  # every message, each once

    monkeypatch.undo()  # the spy's ledger is done: the restored Exchange routes the same ids again
    collected = run(restored.collect_all())
    assert collected == ledger.collected
    assert restored.owner_ids == ledger.ex.owner_ids
    for owner in restored.owner_ids:
        again, live = restored.get(owner), ledger.ex.get(owner)
        assert again is not None
        assert live is not None
        assert [(name, list(p)) for name, p in again.inboxes()] == [(name, list(p)) for name, p in live.inboxes()]
        assert [m.to_dict() for m in again.all_inboxes()] == [m.to_dict() for m in live.all_inboxes()]
        assert len(again.outbox) == 0
    drop_keys = [(d.message_id, d.sender, d.recipient, d.reason, d.detail) for d in ledger.ex.dropped]
    assert [(d.message_id, d.sender, d.recipient, d.reason, d.detail) for d in restored.dropped] == drop_keys
    assert restored.drop_counts == ledger.ex.drop_counts


# -- failing inbox writes -------------------------------------------------------------------------


def test_failed_inbox_writes_are_recorded_contained_and_not_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = Ledger(Exchange(drop_limit=BIG), monkeypatch)
    ledger.delivery_errors_allowed = True
    owners = [uuid4() for _ in range(10)]
    for owner in owners:
        ledger.register(owner)
    broken_owner = owners[3]
    broken = ledger.ex.get(broken_owner)

    def poisoned(message: Message) -> Exception | None:
        if isinstance(message.content, dict) and message.content.get("poison"):
            return RuntimeError("poisoned payload")
        return None

    senders = [owner for owner in owners if owner != broken_owner][:5]
    healthy = {sender: next(o for o in owners if o not in (sender, broken_owner)) for sender in senders}
    sent: dict[UUID, dict[str, Message]] = {}
    for sender in senders:
        sent[sender] = {
            "broadcast": ledger.send(sender, None, {"hello": str(sender)}),  # everyone but the broken inbox
            "to broken": ledger.send(sender, broken_owner, "into the void"),  # reaches nobody
            "poison broadcast": ledger.send(sender, None, {"poison": True}),  # reaches nobody
            "direct": ledger.send(sender, healthy[sender], "ok"),
        }

    async def main() -> list[int]:
        counts: list[int] = await asyncio.gather(*(ledger.ex.collect(sender) for sender in senders))
        return counts

    with failing_deliveries(broken, OSError("disk full"), poisoned):
        counts = run(main())
    ledger.collected = sum(counts)
    # Only the broadcast and the healthy direct message reached an inbox: messages reaching nobody do not count.
    assert counts == [2] * len(senders)

    drops = {(d.message_id, d.recipient): (d.reason, d.detail) for d in ledger.ex.dropped}
    others = [owner for owner in owners if owner != broken_owner]
    for sender in senders:
        broadcast, to_broken, poison = (sent[sender][k] for k in ("broadcast", "to broken", "poison broadcast"))
        # The broken inbox's failure is recorded with the error text...
        for message in (broadcast, to_broken):
            assert drops[(str(message.id), str(broken_owner))] == (DROP_DELIVERY_ERROR, "OSError: disk full")
        # ...and the other recipients of the same broadcast still got it.
        for owner in others:
            if owner != sender:
                assert broadcast.id in {message.id for message in ledger.ex.receive(owner, sender)}
                assert drops[(str(poison.id), str(owner))] == (DROP_DELIVERY_ERROR, "RuntimeError: poisoned payload")
        assert drops[(str(poison.id), str(broken_owner))] == (DROP_DELIVERY_ERROR, "OSError: disk full")
        assert sent[sender]["direct"] in ledger.ex.receive(healthy[sender], sender)
    assert ledger.ex.receive(broken_owner) == []
    reasons = ledger.assert_conserved()
    # Per sender: the broadcast and the direct message to the broken inbox fail there, the poisoned
    # broadcast fails for all nine recipients.
    assert reasons == Counter({DROP_DELIVERY_ERROR: len(senders) * (2 + 9)})
