"""Exchange as a state machine (ADR-0006 D5, design.md §6.11/§6.13): random registrations, departures,
direct and broadcast sends, collections (plain, stepped through their one yield; with an owner leaving,
and perhaps coming back, while the collect waits at that yield; cancelled or closed there; with an owner
leaving while the collect routes; with a broken inbox), reads and pops, against a model of every mailbox
and of the drop record.

The property checked after every step, and at a collect's yield (on the Exchange and on a record written
there): every sent message is, per intended recipient, either in exactly one inbox or in the drop record
-- nothing vanishes, nothing is duplicated. A collect with mail yields once, having taken nothing, and
then takes, routes and delivers its owner's outbox as it is by then, with no await in between. A
message's intended recipients are fixed when it is routed: for a broadcast every owner registered then
except the sender, for a direct message its recipient, whatever it is. Until then it is pending in its
sender's outbox (or dropped with `DROP_SENDER_UNREGISTERED` when the sender leaves first). Mail that was
delivered and then popped, or that left with its owner's Flow, is accounted for by the model."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid4

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from lionmsg import DroppedMail, Exchange, Flow, Message, MessageRole
from lionmsg.runtime.exchange import (
    DROP_DELIVERY_ERROR,
    DROP_NOT_AN_OWNER,
    DROP_SENDER_UNREGISTERED,
    DROP_UNKNOWN_RECIPIENT,
    DROP_UNREGISTERED,
)
from tests.mail import drop_address, failing_deliveries

BIG = 1_000_000  # a drop limit no run reaches: every drop stays visible
REASONS = {DROP_UNKNOWN_RECIPIENT, DROP_NOT_AN_OWNER, DROP_UNREGISTERED, DROP_DELIVERY_ERROR, DROP_SENDER_UNREGISTERED}
NAMES = ["alice", "bob", "Alice", ""]  # plain names: direct mail that no owner can receive
ROLE_TEXTS = {"user": MessageRole.USER, "assistant": MessageRole.ASSISTANT, "system": MessageRole.SYSTEM}
contents = (
    st.integers(-5, 5)
    | st.text(max_size=4)
    | st.lists(st.integers(0, 3), max_size=2)
    | st.dictionaries(st.sampled_from(["k", "v"]), st.integers(0, 3), max_size=2)
)
channels = st.sampled_from([None, "ch", ""])


def spellings(owner: UUID) -> list[Any]:
    """Ways to name an owner: the UUID, its canonical text, upper case, bare hex."""
    return [owner, str(owner), str(owner).upper(), owner.hex]


def drop_key(drop: DroppedMail) -> tuple[str, str | None, str | None, str, str]:
    return (drop.message_id, drop.sender, drop.recipient, drop.reason, drop.detail)


class LeavesWhenCopied(dict[str, str]):
    """Broadcast content whose copying unregisters an owner: code run while a collect routes (the Exchange
    deep-copies a broadcast's content for each recipient), the one way left for an owner to go between
    the routing of mail and its delivery. The copies, and the record, hold a plain dict of the same items."""

    def __init__(self, exchange: Exchange, owner: UUID) -> None:
        super().__init__(leaves=str(owner))
        self.exchange, self.owner = exchange, owner

    def __deepcopy__(self, memo: Any) -> dict[str, str]:
        self.exchange.unregister(self.owner)  # the first copy's; later ones find the owner gone already
        return dict(self)


@dataclass
class Sent:
    message: Message  # the object send() returned (what a direct recipient must get)
    sender: UUID
    recipient: Any  # normalised: None (broadcast), a UUID, a MessageRole or a name
    state: str = "pending"  # pending -> routed | unrouted (sender left first)


class ExchangeMachine(RuleBasedStateMachine):
    """One Exchange and a model: owners in registration order, outboxes, inboxes by owner and sender,
    the fate of every (message, intended recipient) pair and the expected drop record."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.ex = Exchange(drop_limit=BIG)
        self.owners: list[UUID] = []
        self.former: list[UUID] = []  # owners that unregistered (and may register again)
        self.promised: list[UUID] = []  # recipients of sent mail, never registered yet
        self.outbox: dict[UUID, list[UUID]] = {}
        self.inbox: dict[UUID, dict[UUID, list[UUID]]] = {}  # owner -> sender -> ids, oldest first
        self.sent: dict[UUID, Sent] = {}
        self.intended: dict[UUID, list[str | None]] = {}  # id -> recipients (as text), fixed at routing
        self.fate: dict[tuple[UUID, str | None], str] = {}  # (id, recipient) -> inbox|popped|left|a reason
        self.drops: list[tuple[str, str | None, str | None, str, str]] = []
        self.made = 0

    def fresh(self) -> UUID:
        """A new owner id. Deterministic per run (hypothesis replays a run to shrink it), version 4, and
        spread over the whole 128 bits so that sorting or upper-casing has something to do."""
        self.made += 1
        return UUID(int=(self.made * 0x9E3779B97F4A7C15F39CC0605CEDC835) % (1 << 128), version=4)

    def teardown(self) -> None:
        try:
            self.check_round_trip()
            for reason in sorted({drop[3] for drop in self.drops}):
                event(f"dropped: {reason}")
            fates = Counter(self.fate.values())
            for fate in ("inbox", "popped", "left"):
                if fates[fate]:
                    event(f"a message {fate}")
            event(f"messages sent: {min(len(self.sent) // 10 * 10, 40)}+")
        finally:
            self.loop.close()

    # -- helpers -----------------------------------------------------------------------------------

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def snapshot(self) -> dict[str, Any]:
        return self.ex.to_dict()

    def refused(self, error: type[Exception], match: str, call: Any, *arguments: Any) -> None:
        before = self.snapshot()

        def attempt() -> None:
            result = call(*arguments)
            if asyncio.iscoroutine(result):
                self.run(result)

        with pytest.raises(error, match=match):
            attempt()
        assert self.snapshot() == before

    def drop(self, ident: UUID, recipient: str | None, reason: str, detail: str = "") -> None:
        self.drops.append((str(ident), str(self.sent[ident].sender), recipient, reason, detail))

    def model_register(self, owner: UUID) -> None:
        self.owners.append(owner)
        self.outbox[owner] = []
        self.inbox[owner] = {}
        for pool in (self.former, self.promised):
            if owner in pool:
                pool.remove(owner)

    def model_unregister(self, owner: UUID) -> None:
        for ident in self.outbox.pop(owner):
            self.sent[ident].state = "unrouted"
            self.drop(ident, drop_address(self.sent[ident].recipient), DROP_SENDER_UNREGISTERED)
        for ids in self.inbox.pop(owner).values():
            for ident in ids:
                self.fate[(ident, str(owner))] = "left"
        self.owners.remove(owner)
        self.former.append(owner)

    def model_collect(self, sender: UUID, broken: UUID | None = None, copying: tuple[UUID, UUID] | None = None) -> int:
        """Collect the sender's outbox as the Exchange must once past its yield, all in one step: route
        every queued message, taking nothing; unless the sender left meanwhile (its queued mail then went
        to the drop record), take the outbox and write the messages with no owner to go to to the drop
        record, then each other one in order to its targets' inboxes. With `copying=(ident, leaver)`,
        making the copies of broadcast `ident` unregisters `leaver` (when it has anyone to copy it for):
        mail routed to the leaver is then dropped at delivery, the only way left to `DROP_UNREGISTERED`."""
        ids = list(self.outbox[sender])
        routed: list[tuple[UUID, list[UUID] | str]] = []
        intended: dict[UUID, list[str | None]] = {}
        for ident in ids:
            recipient = self.sent[ident].recipient
            if recipient is None:
                targets = [owner for owner in self.owners if owner != sender]
                intended[ident] = [str(target) for target in targets]
                routed.append((ident, targets))
                if copying is not None and copying[0] == ident and targets and copying[1] in self.owners:
                    self.model_unregister(copying[1])
            else:
                intended[ident] = [drop_address(recipient)]
                if recipient in self.owners:
                    routed.append((ident, [recipient]))
                else:
                    routed.append((ident, DROP_UNKNOWN_RECIPIENT if isinstance(recipient, UUID) else DROP_NOT_AN_OWNER))
        if sender not in self.owners:  # it left while its mail was routed: none of it was taken
            return 0
        self.outbox[sender] = []
        self.intended.update(intended)
        for ident, targets in routed:
            self.sent[ident].state = "routed"
            if isinstance(targets, str):  # no owner to send it to: dropped before any delivery
                address = intended[ident][0]
                self.drop(ident, address, targets)
                self.fate[(ident, address)] = targets
        delivered: set[UUID] = set()
        for ident, targets in routed:
            if isinstance(targets, str):
                continue
            for target in targets:
                key = (ident, str(target))
                if target not in self.owners:  # unregistered while the outbox was routed
                    self.drop(ident, str(target), DROP_UNREGISTERED)
                    self.fate[key] = DROP_UNREGISTERED
                elif target == broken:
                    self.drop(ident, str(target), DROP_DELIVERY_ERROR, broken_detail(target))
                    self.fate[key] = DROP_DELIVERY_ERROR
                else:
                    self.inbox[target].setdefault(sender, []).append(ident)
                    self.fate[key] = "inbox"
                    delivered.add(ident)
        return len(delivered)

    def stepped(self, coro: Any, at_each_yield: Any) -> tuple[int, Any]:
        """Run a coroutine one step at a time, with no event loop, calling `at_each_yield` whenever it
        yields; (how many times it yielded, what it returned)."""
        yields = 0
        try:
            while True:
                coro.send(None)
                yields += 1
                at_each_yield()
        except StopIteration as stop:
            return yields, stop.value

    def check_at_a_yield(self) -> None:
        """What holds at every await: the Exchange matches the model and conserves all mail, and so does
        the Exchange restored from a record written right then."""
        for exchange in (self.ex, Exchange.from_dict(self.ex.to_dict())):
            self.check_matches_model(exchange)
            self.check_conserved(exchange)

    def expected_message(self, ident: UUID, owner: UUID, received: Message) -> None:
        """A received message: the sent object itself when direct, an equal copy when broadcast."""
        sent = self.sent[ident]
        assert received.id == ident
        assert type(received) is Message
        if sent.recipient is None:
            assert received is not sent.message
            assert received.recipient is None
            assert received.to_dict() == sent.message.to_dict()
        else:
            assert received is sent.message
            assert received.recipient == owner

    # -- owners ------------------------------------------------------------------------------------

    @initialize(data=st.data(), count=st.integers(0, 4))
    def some_owners(self, data: st.DataObject, count: int) -> None:
        for _ in range(count):
            self.register(data, "fresh")

    @rule(data=st.data())
    def register(self, data: st.DataObject, source: str | None = None) -> None:
        """A fresh UUID, a promised recipient of mail already sent, or a former owner coming back."""
        pools = {"promised": self.promised, "former": self.former}
        source = source or data.draw(st.sampled_from(["fresh", *(name for name, pool in pools.items() if pool)]))
        owner = self.fresh() if source == "fresh" else data.draw(st.sampled_from(pools[source]))
        flow = self.ex.register(data.draw(st.sampled_from(spellings(owner))))
        event(f"register {source}")
        assert isinstance(flow, Flow)
        assert flow.name == str(owner)
        assert list(flow.progressions) == ["outbox"]
        assert self.ex.get(owner) is flow
        self.model_register(owner)

    @precondition(lambda self: self.owners)
    @rule(data=st.data())
    def unregister(self, data: st.DataObject) -> None:
        owner = data.draw(st.sampled_from(self.owners))
        pending = list(self.outbox[owner])
        held = {sender: list(ids) for sender, ids in self.inbox[owner].items()}
        flow = self.ex.unregister(data.draw(st.sampled_from(spellings(owner))))
        event("unregister")
        # The mailbox leaves with its owner: its outbox and inboxes as they were.
        assert flow is not None
        assert flow.name == str(owner)
        assert list(flow.outbox) == pending
        assert {name: list(p) for name, p in flow.inboxes()} == {f"inbox_{s}": ids for s, ids in held.items()}
        self.model_unregister(owner)
        assert not self.ex.has(owner)
        assert self.ex.get(owner) is None
        assert owner not in self.ex

    def stranger(self, data: st.DataObject) -> Any:
        """Something that names no registered owner."""
        source = data.draw(st.sampled_from(["fresh", "former", "promised", "name", "role", "none"]))
        pool = {"former": self.former, "promised": self.promised}.get(source) or [self.fresh()]
        if source in ("fresh", "former", "promised"):
            return data.draw(st.sampled_from(spellings(data.draw(st.sampled_from(pool)))))
        return {"name": "alice", "role": "user", "none": None}[source]

    @rule(
        data=st.data(),
        kind=st.sampled_from(["register twice", "register a non-uuid", "unknown owner", "send", "collect"]),
    )
    def refused_or_unknown(self, data: st.DataObject, kind: str) -> None:
        """ADR D5: duplicate registration and sending or collecting for an unregistered owner raise
        ValueError; unregistering, getting, receiving for or popping from an unknown owner give None or
        []. Nothing changes either way."""
        if kind == "register twice" and not self.owners:
            kind = "unknown owner"
        if kind == "register twice":
            owner = data.draw(st.sampled_from(self.owners))
            spelled = data.draw(st.sampled_from(spellings(owner)))
            self.refused(ValueError, f"^Owner {owner} already registered$", self.ex.register, spelled)
        elif kind == "register a non-uuid":
            bad = data.draw(st.sampled_from(["alice", "", "user", 5, None, 1.5, MessageRole.USER]))
            self.refused(ValueError, "^owner ids are UUIDs", self.ex.register, bad)
        elif kind == "send":
            stranger = self.stranger(data)
            recipient = data.draw(st.sampled_from([None, *self.owners]))
            self.refused(ValueError, "^Sender .* not registered$", self.ex.send, stranger, recipient, "x")
        elif kind == "collect":
            self.refused(ValueError, "^Owner .* not registered$", self.ex.collect, self.stranger(data))
        else:
            unknown = self.stranger(data)
            before = self.snapshot()
            assert self.ex.unregister(unknown) is None
            assert self.ex.get(unknown) is None
            assert not self.ex.has(unknown)
            assert unknown not in self.ex
            assert self.ex.receive(unknown) == []
            assert self.ex.pop_message(unknown, data.draw(st.sampled_from([self.fresh(), *self.senders()]))) is None
            assert self.snapshot() == before
        event(f"refused: {kind}")

    # -- sending -----------------------------------------------------------------------------------

    def sent_ok(self, spelled: Any, sender: UUID, given: Any, expected: Any, content: Any, channel: Any) -> Message:
        message = self.ex.send(spelled, given, content, channel)
        assert type(message) is Message
        assert message.role is MessageRole.UNSET
        assert message.sender == sender
        assert type(message.recipient) is type(expected)
        assert message.recipient == expected
        assert message.channel == channel
        assert message.content == content
        assert message.id not in self.sent
        self.sent[message.id] = Sent(message, sender, expected)
        self.outbox[sender].append(message.id)
        return message

    def direct_recipient(self, data: st.DataObject, sender: UUID) -> tuple[Any, Any]:
        """(what is passed to send, the normalised recipient) for one kind of direct recipient."""
        kinds = ["owner", "self", "promised", "unknown uuid", "name", "role text", "role"]
        kind = data.draw(st.sampled_from(kinds + (["former"] if self.former else [])))
        event(f"send {kind}")
        if kind == "owner":
            owner = data.draw(st.sampled_from(self.owners))
            return data.draw(st.sampled_from(spellings(owner))), owner
        if kind == "self":
            return data.draw(st.sampled_from(spellings(sender))), sender
        if kind == "promised":  # not registered yet; it may register before the collect
            again = data.draw(st.booleans())
            if self.promised and again:
                owner = data.draw(st.sampled_from(self.promised))
            else:
                owner = self.fresh()
                self.promised.append(owner)
            return data.draw(st.sampled_from(spellings(owner))), owner
        if kind == "unknown uuid":  # never registered
            owner = self.fresh()
            return data.draw(st.sampled_from([owner, str(owner).upper()])), owner
        if kind == "former":
            owner = data.draw(st.sampled_from(self.former))
            return data.draw(st.sampled_from(spellings(owner))), owner
        if kind == "role text":
            given = data.draw(st.sampled_from(sorted(ROLE_TEXTS)))
            return given, ROLE_TEXTS[given]
        if kind == "role":
            role = data.draw(st.sampled_from([MessageRole.UNSET, MessageRole.USER]))
            return role, role
        name = data.draw(st.sampled_from(NAMES))
        return name, name

    @precondition(lambda self: self.owners)
    @rule(data=st.data(), count=st.integers(1, 3))
    def send_direct(self, data: st.DataObject, count: int) -> None:
        for _ in range(count):
            sender = data.draw(st.sampled_from(self.owners))
            given, expected = self.direct_recipient(data, sender)
            spelled = data.draw(st.sampled_from(spellings(sender)))
            self.sent_ok(spelled, sender, given, expected, data.draw(contents), data.draw(channels))

    @precondition(lambda self: self.owners)
    @rule(data=st.data(), count=st.integers(1, 2))
    def broadcast(self, data: st.DataObject, count: int) -> None:
        for _ in range(count):
            sender = data.draw(st.sampled_from(self.owners))
            spelled = data.draw(st.sampled_from(spellings(sender)))
            message = self.sent_ok(spelled, sender, None, None, data.draw(contents), data.draw(channels))
            assert message.is_broadcast
        event("broadcast")

    # -- collecting --------------------------------------------------------------------------------

    @precondition(lambda self: self.owners)
    @rule(data=st.data())
    def collect(self, data: st.DataObject) -> None:
        """Stepped through by hand: a collect with mail yields exactly once, having taken nothing (the
        Exchange, and a record written then, are as before it began), and delivers without awaiting
        again; one with an empty outbox returns 0 without yielding."""
        owner = data.draw(st.sampled_from(self.owners))
        before = self.snapshot()

        def at_the_yield() -> None:
            assert self.snapshot() == before
            self.check_at_a_yield()

        yields, count = self.stepped(self.ex.collect(data.draw(st.sampled_from(spellings(owner)))), at_the_yield)
        assert yields == (1 if self.outbox[owner] else 0)
        assert count == self.model_collect(owner)
        event("collect")
        if count > 0:
            event("collect delivered")

    @precondition(lambda self: any(self.outbox.values()) and len(self.owners) > 1)
    @rule(data=st.data())
    def collect_with_a_broken_inbox(self, data: st.DataObject) -> None:
        sender = data.draw(st.sampled_from([owner for owner in self.owners if self.outbox[owner]]))
        broken = data.draw(st.sampled_from(self.owners))
        broken_flow = self.ex.get(broken)
        with failing_inbox(broken_flow, broken_detail(broken)):
            count = self.run(self.ex.collect(sender))
        assert count == self.model_collect(sender, broken=broken)
        event("collect broken inbox")

    @precondition(lambda self: self.owners)
    @rule(data=st.data(), comes_back=st.booleans(), sends=st.integers(0, 2))
    def collect_while_an_owner_leaves(self, data: st.DataObject, comes_back: bool, sends: int) -> None:
        """The leaver unregisters while the collect waits at its yield, and may register again at once
        (queueing new mail then). The collect has taken nothing at its yield, so the leaver's queued mail
        is dropped as its sender left, and the mail stays whole at every step. The collect then takes
        its owner's outbox as it is by then: nothing when the owner left, its new flow's when it came
        back, and routes it among the owners registered then (an owner with an empty outbox had nothing
        to wait for: its collect was over, returning 0, before the leaver left)."""
        sender = data.draw(st.sampled_from(self.owners))
        leaver = data.draw(st.sampled_from(self.owners))
        waits = bool(self.outbox[sender])
        before = self.snapshot()

        async def scenario() -> tuple[int, Flow | None]:
            collecting = asyncio.ensure_future(self.ex.collect(sender))
            await asyncio.sleep(0)  # the collect ran up to its yield, if it had mail
            assert collecting.done() is not waits
            assert self.snapshot() == before  # nothing taken
            self.check_at_a_yield()
            gone = self.ex.unregister(data.draw(st.sampled_from(spellings(leaver))))
            self.model_unregister(leaver)
            self.check_at_a_yield()
            if comes_back:
                assert self.ex.register(data.draw(st.sampled_from(spellings(leaver)))) is not gone
                self.model_register(leaver)
                for _ in range(sends):
                    if data.draw(st.booleans()):
                        given, expected = self.direct_recipient(data, leaver)
                    else:
                        given = expected = None
                    self.sent_ok(leaver, leaver, given, expected, data.draw(contents), data.draw(channels))
                self.check_at_a_yield()
            return await collecting, gone

        count, gone = self.run(scenario())
        assert gone is not None
        # Resumed after the departure (and the return), it took the owner's outbox as it was then.
        assert count == (self.model_collect(sender) if waits and sender in self.owners else 0)
        event("collect while leaving" if waits else "collect while leaving: nothing to wait for")
        if waits and leaver == sender:
            event("collect while the sender leaves" + (" and comes back" if comes_back else ""))
            if comes_back and sends:
                event("collect while the sender leaves and comes back with mail")

    @precondition(lambda self: any(self.outbox.values()))
    @rule(data=st.data(), how=st.sampled_from(["cancel", "close"]))
    def collect_stopped_at_its_yield(self, data: st.DataObject, how: str) -> None:
        """A collect cancelled at its yield, or closed there (a pending task destroyed with its loop), has
        taken nothing: the Exchange is as before, the mail still queued for a later collect."""
        sender = data.draw(st.sampled_from([owner for owner in self.owners if self.outbox[owner]]))
        before = self.snapshot()
        collecting = self.ex.collect(data.draw(st.sampled_from(spellings(sender))))
        if how == "cancel":

            async def scenario() -> None:
                task = asyncio.ensure_future(collecting)
                await asyncio.sleep(0)  # the collect waits at its yield
                assert not task.done()
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task

            self.run(scenario())
        else:
            collecting.send(None)  # up to its yield
            collecting.close()
        assert self.snapshot() == before
        event(f"collect stopped at its yield: {how}")

    @precondition(lambda self: len(self.owners) > 1)
    @rule(data=st.data())
    def collect_while_an_owner_leaves_during_routing(self, data: st.DataObject) -> None:
        """A broadcast queued after the sender's other mail unregisters an owner while its copies are
        made: mail routed to that owner before then, this broadcast's copy among it, is dropped as
        `DROP_UNREGISTERED`; everyone else still gets theirs. When the owner leaving is the sender, its
        mail, routed but not taken yet, is dropped as `DROP_SENDER_UNREGISTERED` and none delivered."""
        sender = data.draw(st.sampled_from(self.owners))
        leaver = data.draw(st.sampled_from(self.owners))
        content = LeavesWhenCopied(self.ex, leaver)
        message = self.sent_ok(sender, sender, None, None, content, data.draw(channels))
        count = self.run(self.ex.collect(data.draw(st.sampled_from(spellings(sender)))))
        assert count == self.model_collect(sender, copying=(message.id, leaver))
        assert not self.ex.has(leaver)
        event("collect while an owner leaves during routing")
        if leaver == sender:
            event("collect while the sender leaves during routing")

    @rule(alias=st.booleans())
    def collect_all(self, alias: bool) -> None:
        count = self.run(self.ex.sync() if alias else self.ex.collect_all())
        assert count == sum(self.model_collect(owner) for owner in list(self.owners))
        event("sync" if alias else "collect_all")

    # -- reading -----------------------------------------------------------------------------------

    def senders(self) -> list[UUID]:
        return sorted({sender for inboxes in self.inbox.values() for sender in inboxes} | set(self.owners))

    @precondition(lambda self: self.owners)
    @rule(data=st.data(), by_sender=st.booleans())
    def receive(self, data: st.DataObject, by_sender: bool) -> None:
        owner = data.draw(st.sampled_from(self.owners))
        spelled = data.draw(st.sampled_from(spellings(owner)))
        if by_sender:
            choices = [*self.senders(), self.fresh(), "alice"]
            sender = data.draw(st.sampled_from(choices))
            given = data.draw(st.sampled_from(spellings(sender))) if isinstance(sender, UUID) else sender
            expected = list(self.inbox[owner].get(sender, [])) if isinstance(sender, UUID) else []
            received = self.ex.receive(spelled, given)
        else:
            expected = [ident for ids in self.inbox[owner].values() for ident in ids]
            received = self.ex.receive(spelled)
        assert [message.id for message in received] == expected
        for message in received:
            self.expected_message(message.id, owner, message)
        again = self.ex.receive(spelled, given) if by_sender else self.ex.receive(spelled)
        assert [message.id for message in again] == expected  # non-destructive
        event("receive")
        if bool(expected):
            event("receive some")

    @precondition(lambda self: self.owners)
    @rule(data=st.data())
    def pop_message(self, data: st.DataObject) -> None:
        owner = data.draw(st.sampled_from(self.owners))
        full = [sender for sender, ids in self.inbox[owner].items() if ids]
        choices: list[UUID | str] = [*self.senders(), self.fresh(), "alice"]
        from_full = data.draw(st.booleans())
        sender = data.draw(st.sampled_from(full if full and from_full else choices))
        given = data.draw(st.sampled_from(spellings(sender))) if isinstance(sender, UUID) else sender
        popped = self.ex.pop_message(data.draw(st.sampled_from(spellings(owner))), given)
        queue = self.inbox[owner].get(sender, []) if isinstance(sender, UUID) else []
        if not queue:
            assert popped is None
            event("pop none")
            return
        ident = queue.pop(0)
        assert popped is not None
        self.expected_message(ident, owner, popped)
        self.fate[(ident, str(owner))] = "popped"
        event("pop")

    @rule()
    def round_trip(self) -> None:
        self.check_round_trip()

    def check_round_trip(self) -> None:
        """design.md §6.13: owners in order, outboxes, inboxes in order and drops survive a record."""
        loaded = Exchange.from_dict(self.ex.to_dict())
        assert loaded.drop_limit == self.ex.drop_limit
        assert loaded.owner_ids == self.ex.owner_ids
        for owner in self.ex.owner_ids:
            original, copy = self.ex.get(owner), loaded.get(owner)
            assert original is not None
            assert copy is not None
            assert copy.name == original.name
            assert list(copy.outbox) == list(original.outbox)
            assert [(name, list(p)) for name, p in copy.progressions.items()] == [
                (name, list(p)) for name, p in original.progressions.items()
            ]
            assert [m.to_dict() for m in copy.items] == [m.to_dict() for m in original.items]
            assert [m.to_dict() for m in loaded.receive(owner)] == [m.to_dict() for m in self.ex.receive(owner)]
        assert loaded.dropped == self.ex.dropped
        assert loaded.drop_counts == self.ex.drop_counts
        event("round trip")

    # -- invariants --------------------------------------------------------------------------------

    @invariant()
    def nothing_vanishes_and_nothing_is_duplicated(self) -> None:
        self.check_conserved(self.ex)

    @invariant()
    def the_exchange_matches_the_model(self) -> None:
        self.check_matches_model(self.ex)

    def check_conserved(self, exchange: Exchange) -> None:
        """The issue's property, read off the Exchange (or a copy restored from its record) itself: the
        model only says what was sent, what was popped or left with its owner, and who the intended
        recipients are."""
        Pair = tuple[UUID, "str | None"]
        in_inbox: Counter[Pair] = Counter()
        in_outbox: Counter[UUID] = Counter()
        holder: dict[UUID, UUID] = {}
        for owner in exchange.owner_ids:
            flow = exchange.get(owner)
            assert flow is not None
            for ident in flow.outbox:
                in_outbox[ident] += 1
                holder[ident] = owner
            for _, progression in flow.inboxes():
                for ident in progression:
                    in_inbox[(ident, str(owner))] += 1
        dropped: Counter[Pair] = Counter()
        reasons: dict[Pair, str] = {}
        for drop in exchange.dropped:
            assert drop.reason in REASONS
            assert drop.at > 0
            pair = (UUID(drop.message_id), drop.recipient)
            dropped[pair] += 1
            reasons[pair] = drop.reason
        gone = {pair for pair, fate in self.fate.items() if fate in ("popped", "left")}
        # Every place a message id is found (an inbox copy, a drop, popped, left with its owner).
        places: Counter[UUID] = Counter()
        for pair, count in (*in_inbox.items(), *dropped.items()):
            places[pair[0]] += count
        for pair in gone:
            places[pair[0]] += 1
        assert set(in_outbox) | set(places) <= set(self.sent)

        for ident, sent in self.sent.items():
            if sent.state == "pending":  # in its sender's outbox, once, and nowhere else
                assert in_outbox[ident] == 1
                assert holder[ident] == sent.sender
                assert places[ident] == 0
            elif sent.state == "unrouted":  # its sender left first: one drop, nowhere else
                assert in_outbox[ident] == 0
                pair = (ident, drop_address(sent.recipient))
                assert dropped[pair] == 1
                assert reasons[pair] == DROP_SENDER_UNREGISTERED
                assert places[ident] == 1
            else:  # routed: each intended recipient has it in one place, nobody else has it
                assert in_outbox[ident] == 0
                for recipient in self.intended[ident]:
                    pair = (ident, recipient)
                    found = in_inbox[pair] + dropped[pair] + (pair in gone)
                    assert found == 1, (pair, in_inbox[pair], dropped[pair], self.fate.get(pair))
                    if dropped[pair]:
                        assert reasons[pair] == self.fate[pair]
                assert places[ident] == len(self.intended[ident])
                assert len(set(self.intended[ident])) == len(self.intended[ident])

    def check_matches_model(self, exchange: Exchange) -> None:
        assert exchange.owner_ids == self.owners
        assert len(exchange) == len(self.owners)
        for owner in self.owners:
            flow = exchange.get(str(owner).upper())
            assert flow is not None
            assert exchange.has(owner)
            assert list(flow.outbox) == self.outbox[owner]
            inboxes = {name: list(p) for name, p in flow.inboxes()}
            assert inboxes == {f"inbox_{sender}": ids for sender, ids in self.inbox[owner].items()}
            # A flow lists each of its messages in exactly one progression.
            listed = [ident for p in flow.progressions.values() for ident in p]
            assert len(listed) == len(set(listed)) == len(flow.items)
            assert set(listed) == set(flow.items.keys())
        assert [drop_key(drop) for drop in exchange.dropped] == self.drops
        assert exchange.drop_counts == dict(Counter(drop[3] for drop in self.drops))


def broken_detail(owner: UUID) -> str:
    return f"OSError: the inbox of {owner} is broken"


@contextmanager
def failing_inbox(broken: Flow | None, detail: str) -> Iterator[None]:
    """Make the inbox writes of one flow raise (every other flow delivers as usual)."""
    with failing_deliveries(broken, OSError(detail.removeprefix("OSError: "))):
        yield


# The active profile ("dev" or "ci": its examples and deadline), each example a sequence of up to 50 steps.
ExchangeMachine.TestCase.settings = settings(stateful_step_count=50)
TestExchangeMachine = ExchangeMachine.TestCase


# -- a small drop limit: the most recent drops are kept, the totals are not forgotten ----------------


drop_causes = st.lists(
    st.sampled_from(
        [
            "unknown",
            "name",
            "role",
            "sender leaves",
            "recipient leaves at the yield",
            "recipient leaves in routing",
            "broken",
        ]
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=50)
@given(limit=st.integers(1, 5), causes=drop_causes)
def test_a_small_drop_limit_keeps_the_latest_drops_and_every_total(limit: int, causes: list[str]) -> None:
    exchange = Exchange(drop_limit=limit)
    a, b = uuid4(), uuid4()
    exchange.register(a)
    expected: list[tuple[str, str | None, str | None, str, str]] = []
    loop = asyncio.new_event_loop()
    try:
        for cause in causes:
            if not exchange.has(b):
                exchange.register(b)
            if cause == "sender leaves":
                message = exchange.send(b, a, cause)
                exchange.unregister(b)
                expected.append((str(message.id), str(b), str(a), DROP_SENDER_UNREGISTERED, ""))
                continue
            if cause == "recipient leaves at the yield":  # before the collect routes: no such owner then
                message = exchange.send(a, b, cause)

                async def scenario() -> int:
                    collecting = asyncio.ensure_future(exchange.collect(a))
                    await asyncio.sleep(0)
                    exchange.unregister(b)
                    return await collecting

                assert loop.run_until_complete(scenario()) == 0
                expected.append((str(message.id), str(a), str(b), DROP_UNKNOWN_RECIPIENT, ""))
                continue
            if cause == "recipient leaves in routing":  # routed to, then gone before the copy was written
                message = exchange.send(a, None, LeavesWhenCopied(exchange, b))
                assert loop.run_until_complete(exchange.collect(a)) == 0
                expected.append((str(message.id), str(a), str(b), DROP_UNREGISTERED, ""))
                continue
            recipient: Any = {"unknown": uuid4(), "name": "carol", "role": MessageRole.UNSET, "broken": b}[cause]
            message = exchange.send(a, recipient, cause)
            with failing_inbox(exchange.get(b) if cause == "broken" else None, broken_detail(b)):
                assert loop.run_until_complete(exchange.collect(a)) == 0
            reason = {"unknown": DROP_UNKNOWN_RECIPIENT, "broken": DROP_DELIVERY_ERROR}.get(cause, DROP_NOT_AN_OWNER)
            detail = broken_detail(b) if cause == "broken" else ""
            expected.append((str(message.id), str(a), drop_address(recipient), reason, detail))
    finally:
        loop.close()
    assert [drop_key(drop) for drop in exchange.dropped] == expected[-limit:]
    assert exchange.drop_counts == dict(Counter(drop[3] for drop in expected))
    assert sum(exchange.drop_counts.values()) == len(causes)
    # The kept drops survive a record, and the limit with them.
    loaded = Exchange.from_dict(exchange.to_dict())
    assert loaded.drop_limit == limit
    assert loaded.dropped == exchange.dropped


def test_drop_totals_survive_a_record_after_eviction() -> None:
    """`drop_counts` counts every drop "since the Exchange was created (evicted ones included)"; a record
    keeps the Exchange's id and created_at, and design.md §6.13 says its state round-trips with nothing
    lost: the totals included, not just the drops still kept."""
    exchange = Exchange(drop_limit=2)
    owner = uuid4()
    exchange.register(owner)
    for index in range(5):
        exchange.send(owner, "alice", index)
    assert asyncio.run(exchange.collect(owner)) == 0
    assert len(exchange.dropped) == 2
    assert exchange.drop_counts == {DROP_NOT_AN_OWNER: 5}
    for loaded in (Exchange.from_dict(exchange.to_dict()), Exchange.from_json(exchange.to_json())):
        assert (loaded.id, loaded.created_at, loaded.drop_limit) == (exchange.id, exchange.created_at, 2)
        assert loaded.dropped == exchange.dropped
        assert loaded.drop_counts == {DROP_NOT_AN_OWNER: 5}
