"""Exchange: routing the generic Message envelope between owners' mailboxes (ADR-0006 D5).

Owners are UUIDs (a UUID string is normalised). `send` queues a base `Message` in the sender's outbox;
`collect` consumes that outbox and routes each message: `recipient=None` broadcasts a copy (same id) to
every other registered owner, a UUID recipient that is a registered owner gets the message itself, and
anything else (an unknown UUID, a plain name, a role, `MessageRole.UNSET`) is consumed and dropped.
Delivery is best-effort and never reported to the sender; `collect` returns how many distinct message
ids reached at least one inbox.

Beyond the ADR, every message that does not reach an intended recipient is written to a bounded
drop record (`dropped`, with totals by reason in `drop_counts`), so lost mail can be inspected instead of
guessed at. Reasons: `DROP_UNKNOWN_RECIPIENT`, `DROP_NOT_AN_OWNER`, `DROP_UNREGISTERED` (the recipient
left between routing and delivery: only code run while routing, such as a content's `__deepcopy__`, can
unregister it then), `DROP_DELIVERY_ERROR` (the inbox write raised) and
`DROP_SENDER_UNREGISTERED` (the sender left with mail still in its outbox).

Threads: registering, unregistering, sending, collecting, reading a mailbox and writing the record hold
the Exchange's thread lock, which is also the lock of every flow it holds (see `Flow.share_lock`: one
lock per Exchange costs a send or a collect one acquire, not one per message; a flow unregistered keeps
it). A collect waits for it without blocking its event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import sys
import time
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any
from uuid import UUID

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from lionmsg.generated.messages import Message
from lionmsg.generated.roles import MessageRole
from lionmsg.runtime.content.base import MessageContent, copy_value, refuse_iterators
from lionmsg.runtime.element import Element, chosen_parts, part_of_record, parts_later, record_error, records_of_parts
from lionmsg.runtime.fastpath import assemble, message_copies
from lionmsg.runtime.fieldsets import SharedFieldsSet, set_fields_set
from lionmsg.runtime.flow import Chosen, Flow, inbox_name
from lionmsg.runtime.ids import uuid_text
from lionmsg.runtime.threadlock import CopiedUnderLock, ThreadLock, acquire_without_blocking_the_loop, take
from lionmsg.runtime.wire import CANONICAL_UUID

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "DROP_DELIVERY_ERROR",
    "DROP_NOT_AN_OWNER",
    "DROP_SENDER_UNREGISTERED",
    "DROP_UNKNOWN_RECIPIENT",
    "DROP_UNREGISTERED",
    "DroppedMail",
    "Exchange",
]

DROP_UNKNOWN_RECIPIENT = "unknown recipient"
DROP_NOT_AN_OWNER = "recipient is not an owner id"
DROP_UNREGISTERED = "recipient unregistered before delivery"
DROP_DELIVERY_ERROR = "delivery failed"
DROP_SENDER_UNREGISTERED = "sender unregistered before collection"


Routes = list[Any]
"""Where one message goes, as (target owner, the message or a broadcast's copy) pairs laid flat in one
list: `[target, message, target, message...]`. A list of tuples made a tuple for every copy, and the
garbage collector walked all of them while a collect filed the mail: a fifth of a broadcast's
collection at N=10,000 (bench/README.md)."""


def route_pairs(routes: Routes) -> Iterator[tuple[UUID, Message]]:
    """The (target, message) pairs of `routes`."""
    flat = iter(routes)
    return zip(flat, flat, strict=True)


@dataclass(frozen=True, slots=True)
class DroppedMail:
    """One message that did not reach one intended recipient."""

    message_id: str
    sender: str | None
    recipient: str | None
    reason: str
    detail: str = ""
    at: float = 0.0


def _owner_id(owner: Any) -> UUID:
    if isinstance(owner, UUID):  # a subclass (which may spell itself otherwise) as the plain UUID it names
        return owner if type(owner) is UUID else UUID(int=owner.int)
    if isinstance(owner, str):
        with contextlib.suppress(ValueError):  # not a UUID string: the error below says what is wanted
            return UUID(owner)
    # An element (a Branch, say) stands for its id, as it does as a message's sender or recipient; a
    # mailbox for its owner's (its own id is no owner's).
    if isinstance(owner, Flow):
        with contextlib.suppress(ValueError):
            ident = owner.owner()
            if ident is not None:
                return ident
        raise ValueError(
            f"owner ids are UUIDs (or UUID strings, or elements with one), got a mailbox of no owner: {owner!r}"
        )
    ident = None if isinstance(owner, (bytes, int, float)) else getattr(owner, "id", None)
    if isinstance(ident, UUID):
        return ident if type(ident) is UUID else UUID(int=ident.int)
    if isinstance(ident, str):  # UUID text: the owner it names, as such an object is read as a recipient
        with contextlib.suppress(ValueError):
            return UUID(ident)
    raise ValueError(f"owner ids are UUIDs (or UUID strings, or elements with one), got {owner!r}")


def _text(value: Any) -> str | None:
    """An address as the drop record writes it: a role's value, a UUID's canonical form, a name as is
    (text `uuid.UUID()` would read, bare hex say, is a name in a message's address: review ai F1)."""
    if value is None:
        return None
    if isinstance(value, MessageRole):
        return value.value
    if isinstance(value, UUID):
        return uuid_text(value)
    return str(value)


class Exchange(CopiedUnderLock, Element):
    """Mailboxes by owner id (see the module docstring for the routing rules)."""

    _built_by_its_constructor = True

    # Frozen: the drop record's deque was sized by it (model_copy cannot change it either). Strict, as a
    # record's other counts: `true` or "5" is no limit.
    drop_limit: int = Field(default=10_000, ge=0, frozen=True, strict=True)

    if TYPE_CHECKING:
        # By the owner id's 128-bit integer (native hashing: UUID.__hash__ is a Python call, made
        # several times per delivery), with the owner ids themselves in registration order.
        _flows: dict[int, Flow]
        _owners: dict[int, UUID]
        _dropped: deque[DroppedMail]
        _drop_counts: Counter[str]
        _lock: ThreadLock

    def __init__(
        self,
        flows: Iterable[Flow | Mapping[str, Any]] | None = None,
        dropped: Iterable[Any] = (),
        drop_counts: Mapping[str, int] | None = None,
        **data: Any,
    ) -> None:
        super().__init__(**data)
        index: dict[int, Flow] = {}
        owners: dict[int, UUID] = {}
        for given in flows or []:
            flow = Flow.from_dict(given) if isinstance(given, Mapping) else given  # a record: model_validate's
            if not isinstance(flow, Flow):
                raise TypeError(f"an Exchange's flows are Flows or flow records, not {type(flow).__name__}")
            try:
                owner = flow.owner()
            except ValueError:  # a name that is no UUID at all: uuid's own words name neither flow nor rule
                owner = None
            if owner is None or flow.name is None or owner.int in index:
                raise ValueError(f"every flow needs a distinct owner UUID as its name, got {flow.name!r}")
            if flow.name != uuid_text(owner):  # its record must load: records hold the canonical form
                raise ValueError(f"a flow's name is its owner's UUID in canonical 8-4-4-4-12 form, got {flow.name!r}")
            index[owner.int], owners[owner.int] = flow, owner
        # A deque's maxlen is a C ssize_t: a larger limit (JSON allows any) is the same as no limit at all.
        records = deque((_drop_entry(item) for item in dropped), maxlen=min(self.drop_limit, sys.maxsize))
        # Plain attributes: pydantic PrivateAttrs are slow.
        object.__setattr__(self, "_flows", index)
        object.__setattr__(self, "_owners", owners)
        object.__setattr__(self, "_dropped", records)
        # Totals outlive the bounded record: a saved Exchange brings its own, else the kept drops are counted.
        if drop_counts is not None and not isinstance(drop_counts, Mapping):  # Counter() would count a list
            raise ValueError("drop_counts must map reasons to non-negative integers")
        totals = Counter(item.reason for item in records) if drop_counts is None else Counter(drop_counts)
        if any(type(reason) is not str or type(count) is not int or count < 0 for reason, count in totals.items()):
            raise ValueError("drop_counts must map reasons to non-negative integers")  # a bool is no count
        if drop_counts is not None and (undercounted := _undercounted(totals, records)) is not None:
            raise ValueError(undercounted)
        object.__setattr__(self, "_drop_counts", totals)
        lock = ThreadLock()
        for flow in index.values():
            flow.share_lock(lock)
        object.__setattr__(self, "_lock", lock)

    @property
    def thread_lock(self) -> ThreadLock:
        """The re-entrant thread lock of the Exchange and of every flow it holds (see the module's
        docstring): hold it to make several calls one step for other threads."""
        return self._lock

    # -- owners ------------------------------------------------------------------------------------

    def register(self, owner_id: Any) -> Flow:
        owner = _owner_id(owner_id)
        key = owner.int
        with self._lock:
            if key in self._flows:
                raise ValueError(f"Owner {owner} already registered")
            flow = Flow(name=str(owner))
            flow.share_lock(self._lock)
            # The two maps written in one statement, with no call between the writes, once the flow is
            # whole: an interrupt in the calls above left an owner in one map only (review bl F4).
            self._flows[key], self._owners[key] = flow, owner
        return flow

    def unregister(self, owner_id: Any) -> Flow | None:
        """Remove an owner and return its mailbox (None when unknown). Mail still in its outbox can no
        longer be collected and is written to the drop record."""
        with self._lock:
            owner = self._known(owner_id)
            if owner is None:
                return None
            key = owner.int
            flow = self._flows[key]
            stored = flow._storage.stored
            # A queued id whose message left the pile is skipped, as by collect.
            queued = [message for ident in flow.outbox if (message := stored.get(ident.int)) is not None]
            counted = self._drop_counts.total()  # drops recorded before: how many of these were, if cut short
            dropping: Message | None = None
            try:
                del self._flows[key], self._owners[key]
                for dropping in queued:
                    self._drop(dropping, dropping.recipient, DROP_SENDER_UNREGISTERED)
            except BaseException as failure:  # cut short midway: the owner is gone, so its queued mail is recorded
                if key not in self._flows:
                    rest = queued[self._drop_counts.total() - counted :]
                    # An interrupt is no fault of the message it cut short: that one is recorded again. An
                    # error its own drop raised would only come again (review bp): the others are recorded.
                    if isinstance(failure, Exception) and rest and rest[0] is dropping:
                        del rest[0]
                    for message in rest:
                        self._drop(message, message.recipient, DROP_SENDER_UNREGISTERED)
                raise
        return flow

    def get(self, owner_id: Any) -> Flow | None:
        try:
            owner = _owner_id(owner_id)
        except ValueError:
            return None
        return self._flows.get(owner.int)  # one look-up: another thread may unregister the owner

    def has(self, owner_id: Any) -> bool:
        return self._known(owner_id) is not None

    @property
    def owner_ids(self) -> list[UUID]:
        return list(self._owners.values())

    def __len__(self) -> int:
        return len(self._flows)

    def __bool__(self) -> bool:
        # An element is always true, as LionAGI's (`if exchange:`), not false while no owner is registered.
        return True

    def __contains__(self, owner_id: Any) -> bool:
        return self.has(owner_id)

    def _known(self, owner_id: Any) -> UUID | None:
        try:
            owner = _owner_id(owner_id)
        except ValueError:
            return None
        return owner if owner.int in self._flows else None

    # -- sending and routing -----------------------------------------------------------------------

    def send(self, sender: Any, recipient: Any, content: Any, channel: str | None = None) -> Message:
        """Queue a base Message in the sender's outbox; the recipient need not be registered yet."""
        owner = self._known(sender)
        if owner is None:
            raise ValueError(f"Sender {sender} not registered")
        message: Message
        if (channel is None or type(channel) is str) and type(recipient) in _PLAIN_RECIPIENTS:
            refuse_iterators(content)  # what the generic Message's content validator refuses
            message = assemble(Message, content, owner, recipient, channel)  # pydantic would only copy them
        else:  # pydantic checks anything else, and raises its ValidationError for a bad value
            if isinstance(recipient, Flow):  # a mailbox stands for its owner, as everywhere an owner is named
                recipient = _owner_id(recipient)
            message = Message(content=content, sender=owner, recipient=recipient, channel=channel)
        with self._lock:  # not a bare acquire(): an interrupt right after it left the lock held for good
            flow = self._flows.get(owner.int)
            if flow is None:  # unregistered by another thread while the message was built
                raise ValueError(f"Sender {sender} not registered")
            flow._storage.queue(message)
        return message

    async def collect(self, owner_id: Any) -> int:
        """Route everything in the owner's outbox; the number of distinct message ids delivered.

        A collect with mail to route yields to the event loop once, first, and then routes, takes and
        delivers the whole outbox without awaiting again (routing, which runs payloads' `__deepcopy__`,
        changes nothing: what it raises leaves all as it was). So at every await each message is in exactly
        one place (an outbox, its recipients' inboxes, the drop record), and a record another task writes
        then holds all the mail; two concurrent collects never route one message twice; and a collect
        cancelled (or closed) at its yield has taken nothing. The owner is looked up again after the
        yield: one that left meanwhile had its queued mail recorded as dropped, and collects nothing."""
        owner = owner_id if type(owner_id) is UUID else self._known(owner_id)  # the usual UUID: no call
        collected = None if owner is None else await self._collect(owner)
        if collected is None:
            raise ValueError(f"Owner {owner_id} not registered")
        return collected

    async def _collect(self, owner: UUID) -> int | None:
        """`collect` of a registered owner; None, having done nothing, when the owner is not registered."""
        flows = self._flows  # the same table throughout; each target is looked up as it is written
        sending = flows.get(owner.int)
        if sending is None:
            return None
        if not sending._storage.outbox._slot_of:  # nothing queued: no yield (OrderedIds.__len__ is a call)
            return 0
        await asyncio.sleep(0)  # one yield per collect, not per delivery: that cost dominated collection
        lock = self._lock
        taken = [False]  # taken inside the `try`, released exactly when taken: see threadlock.take
        try:
            if not take(lock, taken):  # another thread is changing the Exchange: wait, not block
                await acquire_without_blocking_the_loop(lock, taken)
            sending = flows.get(owner.int)  # the owner may have left, or left and come back, meanwhile
            if sending is None:
                return 0
            storage = sending._storage
            queued = storage.queued()
            route = self._route
            # Routed (the broadcast copies made) before anything is taken or dropped: routing runs the
            # payloads' own code (`__deepcopy__`) and takes the time, so what it raises, or an interrupt
            # while it runs, leaves every outbox and the drop record as they were.
            unroutable: list[Message] = []  # no owner to send these to: dropped once taken
            routed = [route(message, owner, unroutable) for message in queued[2]]
            if flows.get(owner.int) is not sending:  # it left while routing: its mail is in the drop record
                return 0
            chosen = storage.chosen(queued)  # changes nothing: an interrupt until _file's guard loses nothing
            if chosen[2] is not queued[2]:  # some left the outbox while routing: theirs are not delivered
                routed, unroutable = _still_taken(chosen[2], queued[2], routed, unroutable)
            return self._file(sending, chosen, routed, unroutable, owner)
        finally:
            if taken[0]:
                lock.release()

    def _file(
        self,
        sending: Flow,
        chosen: Chosen,
        routed: list[Routes],
        unroutable: list[Message],
        sender: UUID,
    ) -> int:
        """Take the chosen messages out of the sender's flow, record the unroutable ones as drops and
        write each routed one to its targets' inboxes (best effort: a target gone or an inbox write that
        fails is recorded as a drop); the number of messages that reached an inbox. Cut short (an
        interrupt anywhere in it), whatever it had not filed goes to the drop record before the interrupt
        goes on: each message is still in exactly one place."""
        flows = self._flows
        inbox = inbox_name(sender)
        now = time.time()
        delivered = 0
        removed = False
        # Drops recorded before: the unroutable messages are recorded first, so the count since tells how
        # many of them were when an interrupt came (a flag set after each could lag one behind).
        counted = self._drop_counts.total()
        dropped: list[tuple[UUID, Message]] = []  # the routes recorded as drops so far (rare)
        storage = sending._storage
        try:
            storage.remove(chosen)
            removed = True
            for message in unroutable:
                self._drop_unroutable(message)
            for routes in routed:
                reached = False
                # `route_pairs(routes)` by index: making an iterator and a zip cost more than a direct
                # message's one pair took to read.
                at = 0
                while at < len(routes):
                    target, message = routes[at], routes[at + 1]
                    at += 2
                    # Looked up for each route: code this thread runs meanwhile (a signal handler, a
                    # finalizer) may unregister an owner under the re-entrant lock.
                    flow = flows.get(target.int)
                    if flow is None:
                        self._drop(message, target, DROP_UNREGISTERED)
                        dropped.append((target, message))
                        continue
                    receiving = flow._storage
                    try:
                        receiving.receive(message, inbox, now)
                    except Exception as error:  # best-effort fan-out: the failure goes to the drop record
                        if receiving.received is message:
                            # Delivered whole: what came as the call returned (a signal handler's exception,
                            # a SIGALRM's TimeoutError) is no failure of it, and goes on as an interrupt.
                            raise
                        self._drop(message, target, DROP_DELIVERY_ERROR, f"{type(error).__name__}: {error}")
                        dropped.append((target, message))
                        continue
                    reached = True
                delivered += reached  # outbox ids are distinct: each message counts at most once
        except BaseException as error:  # an interrupt midway: the mail taken from the outbox is not lost
            if not removed:  # before anything was delivered: the outbox and the pile put in step first
                storage.finish_removal(chosen)
            for message in unroutable[self._drop_counts.total() - counted :]:
                self._drop_unroutable(message)
            self._drop_undelivered(routed, dropped, f"{type(error).__name__} during delivery")
            raise
        return delivered

    def _drop_unroutable(self, message: Message) -> None:
        recipient = message.recipient
        self._drop(message, recipient, DROP_UNKNOWN_RECIPIENT if isinstance(recipient, UUID) else DROP_NOT_AN_OWNER)

    def _drop_undelivered(self, routed: list[Routes], dropped: list[tuple[UUID, Message]], detail: str) -> None:
        """Record as dropped every route of a delivery cut short that neither reached its inbox nor was
        recorded already, so that each message is still in exactly one inbox or the drop record."""
        flows = self._flows
        recorded = {(id(target), id(message)) for target, message in dropped}
        for routes in routed:
            for target, message in route_pairs(routes):
                flow = flows.get(target.int)
                if flow is not None and flow._storage.stored.get(message.id.int) is message:
                    continue  # delivered
                if (id(target), id(message)) not in recorded:
                    self._drop(message, target, DROP_DELIVERY_ERROR, detail)

    async def collect_all(self) -> int:
        """Collect for a snapshot of the owners, one after another, skipping those gone before their turn."""
        total = 0
        collect = self._collect
        for owner in list(self._owners.values()):
            # One look-up, in _collect: a check here and another in collect() would let another thread
            # unregister the owner in between, and collect() raise for an owner collect_all skips.
            collected = await collect(owner)
            if collected is not None:
                total += collected
        return total

    async def sync(self) -> int:
        """Alias of `collect_all`."""
        return await self.collect_all()

    def _route(self, message: Message, sender: UUID, unroutable: list[Message]) -> Routes:
        """Where a message goes: (owner, the message or a broadcast's copy) pairs, laid flat; a direct
        message with no owner to go to is put on `unroutable`. Changes nothing else: the caller writes
        both."""
        recipient = message.recipient
        if recipient is None:
            skip = sender.int
            targets = [target for key, target in self._owners.items() if key != skip]
            routes: Routes = [None] * (2 * len(targets))
            routes[0::2] = targets
            routes[1::2] = _copies(message, len(targets))  # (as many as there are targets)
            return routes
        if isinstance(recipient, UUID) and recipient.int in self._flows:
            return [recipient, message]
        unroutable.append(message)
        return []

    # -- reading mailboxes -------------------------------------------------------------------------

    def receive(self, owner_id: Any, sender: Any = None) -> list[Message]:
        """The owner's received messages from one sender, oldest first, or from all: inbox by inbox, in the
        order the inboxes opened (as LionAGI groups them); nothing is removed. A sender is named as
        `Flow.inbox` takes it (a UUID in any spelling, an element, a role, a name)."""
        flow = self.get(owner_id)
        if flow is None:
            return []
        return flow.all_inboxes() if sender is None else flow.inbox(sender)

    def pop_message(self, owner_id: Any, sender: Any) -> Message | None:
        """Remove and return the oldest message from `sender`; None for an unknown owner or empty inbox."""
        flow = self.get(owner_id)
        return None if flow is None else flow.pop_oldest(sender)

    # -- the drop record ---------------------------------------------------------------------------

    @property
    def dropped(self) -> list[DroppedMail]:
        """The most recent drops (at most `drop_limit`), oldest first."""
        return list(self._dropped)

    @property
    def drop_counts(self) -> dict[str, int]:
        """How many drops of each reason since the Exchange was created (evicted ones included)."""
        return dict(self._drop_counts)

    def _drop(self, message: Message, recipient: Any, reason: str, detail: str = "") -> None:
        self._dropped.append(
            DroppedMail(str(message.id), _text(message.sender), _text(recipient), reason, detail, time.time())
        )
        self._drop_counts[reason] += 1

    # -- records -----------------------------------------------------------------------------------

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler, info: Any) -> dict[str, Any]:
        with self._lock:  # every flow and the drop record as of one moment
            record: dict[str, Any] = handler(self)
            handled = set(record)  # the keys pydantic made (its options applied), before the parts
            if not parts_later(info):
                self._add_part_records(record, info.mode)
            record["dropped"] = [asdict(item) for item in self._dropped]
            record["drop_counts"] = dict(self._drop_counts)
        return chosen_parts(record, info, handled)

    def _unchecked_record(self, mode: str) -> dict[str, Any]:
        with self._lock:  # the record and its parts' records as of one moment
            return super()._unchecked_record(mode)

    def _add_part_records(self, record: dict[str, Any], mode: str) -> None:
        for key, flow in self._flows.items():
            owner = uuid_text(UUID(int=key))
            if flow.name != owner:  # renamed in place: the record would not load
                raise ValueError(
                    f"cannot write the Exchange's record: the flow of owner {owner} is now named {flow.name!r}"
                )
        record["flows"] = records_of_parts(self._flows.values(), mode, "$.flows")

    @classmethod
    def _prepare_record(cls, record: dict[str, Any]) -> None:
        flows = record.get("flows", [])
        if not isinstance(flows, list) or not all(isinstance(flow, Mapping) for flow in flows):
            raise record_error(cls, ("flows",), "flows must be a list of flow records", flows)
        owners: set[str] = set()
        for position, flow in enumerate(flows):
            name = flow.get("name")
            if type(name) is not str or not CANONICAL_UUID.fullmatch(name):
                message = "a flow's name is its owner's UUID in canonical 8-4-4-4-12 form"
                raise record_error(cls, ("flows", position, "name"), message, name)
            owner = name.lower()  # the schema's pattern allows A-F: one owner, however the record spells it
            if owner in owners:
                raise record_error(cls, ("flows", position, "name"), f"two flows belong to owner {owner}", name)
            owners.add(owner)
        record["flows"] = [
            part_of_record(cls, ("flows", position), functools.partial(Flow.from_dict, flow))
            for position, flow in enumerate(flows)
        ]
        dropped = record.get("dropped", [])
        if not isinstance(dropped, list) or not all(_is_drop_record(item) for item in dropped):
            raise record_error(cls, ("dropped",), "dropped must be a list of drop records", dropped)
        record["dropped"] = [DroppedMail(**item) for item in dropped]
        counts = record.get("drop_counts")
        if counts is not None and not (
            isinstance(counts, Mapping)
            and all(isinstance(k, str) and type(v) is int and v >= 0 for k, v in counts.items())
        ):
            raise record_error(cls, ("drop_counts",), "drop_counts must map reasons to non-negative integers", counts)
        if counts is not None and (undercounted := _undercounted(counts, record["dropped"])) is not None:
            raise record_error(cls, ("drop_counts",), undercounted, counts)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """pydantic's copy; `drop_limit` in `update` is a TypeError (nothing copied): the drop record was
        sized by it, and a copy shares its original's (a deep one copies it at its size)."""
        if update and "drop_limit" in update:
            raise TypeError("an Exchange's drop_limit is fixed at construction: Exchange(drop_limit=...) makes one")
        return super().model_copy(update=update, deep=deep)


def _undercounted(totals: Mapping[str, int], kept: Iterable[DroppedMail]) -> str | None:
    """What is wrong with totals lower than the entries kept for a reason (totals count evicted entries
    too, so never fewer), or None."""
    for reason, count in Counter(item.reason for item in kept).items():
        if totals.get(reason, 0) < count:
            return f"drop_counts counts {totals.get(reason, 0)} drops for {reason!r}, fewer than the {count} kept"
    return None


# Recipients `normalize_address` takes without fail, so `send` may skip pydantic for them.
_PLAIN_RECIPIENTS = frozenset({type(None), UUID, MessageRole, str})
_DROP_FIELDS = {field.name: field for field in fields(DroppedMail)}


def _is_drop_record(item: Any) -> bool:
    """A mapping with exactly DroppedMail's fields (the defaulted ones optional), each of its type."""
    if not isinstance(item, Mapping) or not set(item) <= set(_DROP_FIELDS):
        return False
    if not {"message_id", "sender", "recipient", "reason"} <= set(item):
        return False
    return (
        isinstance(item["message_id"], str)
        and CANONICAL_UUID.fullmatch(item["message_id"]) is not None  # a message's id, as written
        and all(item[key] is None or isinstance(item[key], str) for key in ("sender", "recipient"))
        and isinstance(item["reason"], str)
        and isinstance(item.get("detail", ""), str)
        and _is_finite_number(item.get("at", 0.0))
    )


_DOUBLE_MAX = sys.float_info.max


def _is_finite_number(value: Any) -> bool:
    """A JSON number a double holds: an int within a double's range (math.isfinite raised OverflowError
    for 10**400, review bl F1) or a finite float (NaN and the infinities cannot be written), not a bool."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return -_DOUBLE_MAX <= value <= _DOUBLE_MAX
    return isinstance(value, float) and math.isfinite(value)


def _drop_entry(item: Any) -> DroppedMail:
    """A drop record entry as given (a DroppedMail, or a mapping of its fields as a record holds them),
    checked as `from_dict` checks it: what `to_dict` writes from it must load again."""
    if isinstance(item, DroppedMail):
        item = asdict(item)
    if not _is_drop_record(item):
        wanted = "ids, owners and texts as strings, `at` a finite number"
        raise ValueError(f"a drop record entry has DroppedMail's fields: {wanted}")
    return DroppedMail(**item)


def _still_taken(
    taken: list[Message], queued: list[Message], routed: list[Routes], unroutable: list[Message]
) -> tuple[list[Routes], list[Message]]:
    """The routes and the unroutable messages of those `queued` messages that were `taken`."""
    still = {id(message) for message in taken}
    routes = [routes for message, routes in zip(queued, routed, strict=True) if id(message) in still]
    return routes, [message for message in unroutable if id(message) in still]


def _copies(message: Message, count: int) -> list[Message]:
    """Broadcast copies with the same id. A value deepcopy cannot copy (a lock, a connection) is shared
    inside copies of the lists and dicts around it, as `clone()` shares it; only a payload nested too
    deeply to copy is shared whole (as LionAGI shares any uncopyable one), rather than lose the broadcast."""
    try:
        return message_copies(message, count)
    except Exception:
        try:
            return [_copy_sharing_the_uncopyable(message) for _ in range(count)]
        except ValueError:  # too deep to copy (copy_value's UNWRITABLE_DEPTH)
            return [message.model_copy() for _ in range(count)]


def _copy_sharing_the_uncopyable(message: Message) -> Message:
    content, embedding = message.content, message.embedding
    update = {
        "content": content.copy() if isinstance(content, MessageContent) else copy_value(content),
        "metadata": copy_value(message.metadata),
        "embedding": None if embedding is None else list(embedding),
    }
    copied = message.model_copy(update=update)
    # model_copy records the updated names as given: a copy says what the original says (exclude_unset).
    fields_set = message.__pydantic_fields_set__
    set_fields_set(copied, fields_set if type(fields_set) is SharedFieldsSet else set(fields_set))
    return copied
