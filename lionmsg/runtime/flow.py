"""Flow: one owner's mailbox in an Exchange (ADR-0006 D5): the messages it holds and named progressions
over them, `outbox` and one `inbox_<sender>` per sender."""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Iterable, Iterator, Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any
from uuid import UUID

from pydantic import SerializerFunctionWrapHandler, field_validator, model_serializer

from lionmsg.generated.messages import Message
from lionmsg.runtime.element import (
    Element,
    chosen_parts,
    part_of_record,
    parts_later,
    record_error,
    record_of_part,
    records_of_parts,
)
from lionmsg.runtime.ids import uuid_from_int, uuid_text
from lionmsg.runtime.pile import Pile
from lionmsg.runtime.progression import OrderedIds, Progression, assigned_back, to_uuid
from lionmsg.runtime.threadlock import CopiedUnderLock, ThreadLock
from lionmsg.runtime.wire import CANONICAL_UUID

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["OUTBOX", "Flow", "inbox_name"]

OUTBOX = "outbox"
_MESSAGES_ONLY: frozenset[type[Element]] = frozenset({Message})


def inbox_name(sender: Any) -> str:
    """The progression holding mail from `sender`: `inbox_<sender>`, a UUID in its canonical text however
    it is given (a UUID, any text `UUID()` reads, an element; a mailbox for its owner, as the Exchange
    reads one everywhere); a role by its value (`inbox_user`: an enum's str() differs between Python
    versions), any other name as it is."""
    if type(sender) is UUID:
        return _uuid_inbox_name(sender.int)
    if isinstance(sender, Enum):
        sender = sender.value
    elif isinstance(sender, Flow):
        with contextlib.suppress(ValueError):  # a mailbox of no owner: its own id, which sends nothing
            owner = sender.owner()
            if owner is not None:
                return _uuid_inbox_name(owner.int)
    try:
        ident = to_uuid(sender)
    except (TypeError, ValueError):  # not a UUID: a name, kept as it is
        return f"inbox_{sender}"
    return _uuid_inbox_name(ident.int)


# An inbox's ids: its OrderedIds, or its one message's id alone until a second comes (see Flow).
Inbox = OrderedIds | UUID


def _listed(inbox: Inbox) -> Iterable[UUID]:
    return inbox if isinstance(inbox, OrderedIds) else (inbox,)


@functools.lru_cache(maxsize=4096)
def _uuid_inbox_name(sender: int) -> str:
    # Spelling a UUID costs about 5.5k instructions, half as much as filing a delivery, and every flow a
    # sender reaches names the same inbox: remember the names of recent senders (shared, bounded).
    return f"inbox_{uuid_text(uuid_from_int(sender))}"


Queued = tuple[list[UUID], list[int], list[Message], tuple[int, int, int, int]]
"""What `_Storage.queued` lists: the outbox's ids, their integers, their messages, and the outbox's and
the pile's change marks."""

Chosen = tuple[list[UUID], list[int], list[Message], bool]
"""What `_Storage.chosen` picks of them to take: ids, integers, messages, and whether the outbox holds
exactly those."""


class _Storage:
    """A flow's containers, for the paths that run once per message: queueing a send and filing a
    delivery.

    Every attribute read on a pydantic model goes through the slot that BaseModel's `__getattr__`
    installs (about 65 ns in CPython 3.11, against 12 ns on a plain object; the interpreter never
    specialises it), and filing one delivery read seven of them. This plain slots object holds the same
    containers, so those paths read the model once. Nothing is copied: they are the pile's dict, order
    and thread lock, the outbox's ids and the inbox tables, none of which is replaced after the flow is
    built. `message_classes` is the flow's own: the message classes it has stored (the pile's
    admitted-class cache may also know other elements' classes, from before the flow took the pile, and a
    flow refuses those). The caller holds the lock (the whole flow's: see Flow): an Exchange holds it
    around a whole send or collect (it is the Exchange's lock), and a Flow's own methods take it.
    """

    __slots__ = ("inboxes", "lock", "message_classes", "order", "outbox", "pile", "received", "stored", "unwrapped")

    def __init__(
        self, pile: Pile[Message], outbox: OrderedIds, inboxes: dict[str, Inbox], unwrapped: dict[str, float]
    ) -> None:
        self.pile = pile
        self.stored = pile._items
        self.order = pile._order
        self.message_classes: set[type] = set()
        self.lock = pile._lock
        self.outbox = outbox
        self.inboxes = inboxes
        self.unwrapped = unwrapped
        # The message the latest `receive` delivered whole, until the next one begins: what an exception
        # raised as that call returned (a signal handler's) came after (see `Exchange._file`).
        self.received: Message | None = None

    def queue(self, message: Message) -> None:
        """Put an outgoing message in the pile and the outbox. Raised out of, it is in neither: refused,
        nothing changed; cut short by an interrupt, whatever it had done is taken back, unless it was
        queued whole (the outbox lists it, the pile holds it)."""
        # What `_store` refuses (an id the pile holds, or orders behind its back): then nothing is undone.
        given: Any = getattr(message, "id", None)  # (no message at all: `_store` refuses it)
        new_here = type(given) is UUID and given.int not in self.stored and given.int not in self.order._slot_of
        if new_here and given.int in self.outbox._slot_of:  # out of step: refused before anything changes
            raise ValueError(f"{given} is already in the progression")
        try:
            ident = self._store(message)
            self.outbox.append(ident)
        except BaseException:
            if new_here:
                self._settle_queue(message)
            raise

    def _settle_queue(self, message: Message) -> None:
        """After a queue raised out of: the message is in the pile and the outbox, or in neither. Told
        from what the outbox and pile hold, not from what was raised: a signal handler may raise any
        exception (a SIGALRM's TimeoutError) at any line, as an interrupt."""
        key = message.id.int
        outbox = self.outbox
        outbox._settle_append(key)
        if key in outbox._slot_of and self.stored.get(key) is message:
            return  # the interrupt came after the message was queued whole
        self._take_back(message)

    def take_outbox(self) -> list[Message]:
        """Empty the outbox; its messages, taken out of the pile, oldest first (absent ones skipped)."""
        if not self.outbox._slot_of:  # empty: nothing to take, and no change to mark
            return []
        return self.take(self.queued())

    def queued(self) -> Queued:
        """The outbox's ids and messages, oldest first, left where they are (absent ones skipped, as by
        `take_outbox`), and the outbox's and the pile's change marks: what a collect routes before it
        takes anything (`take`)."""
        outbox, order = self.outbox, self.order
        mark = (outbox._changes, len(outbox._slot_of), order._changes, len(order._slot_of))
        ids: list[UUID] = []
        keys: list[int] = []
        messages: list[Message] = []
        get = self.stored.get
        for ident in outbox._slots[outbox._head :]:  # a gap in the slots is None
            if ident is not None:
                key = ident.int
                message = get(key)
                if message is not None:  # a queued message taken out of the pile meanwhile is skipped
                    ids.append(ident)
                    keys.append(key)
                    messages.append(message)
        return ids, keys, messages, mark

    def take(self, queued: Queued) -> list[Message]:
        """Take out of the outbox and the pile the messages `queued()` listed whose ids are still queued;
        those taken, oldest first, as listed (see `chosen` and `remove`)."""
        chosen = self.chosen(queued)
        self.remove(chosen)
        return chosen[2]

    def chosen(self, queued: Queued) -> Chosen:
        """What `take` takes of what `queued()` listed, changing nothing: the messages whose ids are still
        queued (a message replaced under its id meanwhile goes as routed: its id is what is queued).
        Whatever else the outbox holds stays: code run in between (a content's `__deepcopy__`) may have
        queued more."""
        ids, keys, messages, mark = queued
        outbox, order, stored = self.outbox, self.order, self.stored
        if mark == (outbox._changes, len(outbox._slot_of), order._changes, len(order._slot_of)):
            return ids, keys, messages, True  # the usual case: nothing changed in between
        kept = [index for index, key in enumerate(keys) if key in stored and ids[index] in outbox]
        return [ids[i] for i in kept], [keys[i] for i in kept], [messages[i] for i in kept], False

    def remove(self, chosen: Chosen) -> None:
        """Take the chosen messages out of the outbox, the pile and its order."""
        ids, keys, _, whole = chosen
        if whole:
            self.outbox.clear()  # ids whose message left the pile go too, as take_outbox drops them
        else:
            self.outbox.exclude(ids)
        pop = self.stored.pop
        for key in keys:
            pop(key)
        if ids:
            self.order.exclude(ids)

    def finish_removal(self, chosen: Chosen) -> None:
        """What `remove` had not done yet when an interrupt cut it short, whatever it had done: every
        chosen message out of the outbox, the pile and its order. (Not after a delivery into this very
        flow: the caller knows whether `remove` returned.)"""
        ids, keys, _, _ = chosen
        outbox, order = self.outbox, self.order
        outbox._settle()  # an exclusion cut short may have left an id dropped from the map but in its slot
        order._settle()
        queued = [ident for ident in ids if ident in outbox]
        if queued:
            outbox.exclude(queued)
        pop = self.stored.pop
        for key in keys:
            pop(key, None)
        ordered = [ident for ident in ids if ident.int in order._slot_of]
        if ordered:
            order.exclude(ordered)

    def receive(self, message: Message, inbox: str, now: float) -> None:
        """Put an incoming message in the pile and the named inbox, opening it (as of `now`) if new.
        Raised out of, it is in neither: refused, nothing changed; cut short by an interrupt, whatever
        it had done is taken back, unless it was delivered whole (the inbox lists it, the pile holds it)."""
        # What `_store` refuses (an id the pile holds, or orders behind its back): then nothing is undone.
        known = type(message) in self.message_classes
        given: Any = message.id if known else getattr(message, "id", None)  # (no message at all: `_store` refuses it)
        stored, order = self.stored, self.order
        key = given.int if type(given) is UUID else -1  # (-1: no id's integer)
        new_here = key >= 0 and key not in stored and key not in order._slot_of
        self.received = None
        try:
            ids = self.inboxes.get(inbox)
            if ids is not None:
                if not isinstance(ids, OrderedIds):  # its second message: the inbox gets its OrderedIds (the same
                    # ids, so a refusal below still changes nothing one can see)
                    ids = self.inboxes[inbox] = OrderedIds.of_one(ids)
                slot_of = ids._slot_of
                # Out of step (the inbox lists the id already): refused before anything changes. (Not new
                # here, `_store` refuses it.)
                if new_here and key in slot_of:
                    raise ValueError(f"{given} is already in the progression")
            if known and new_here:  # the usual delivery: `_store` spelled out (its call was a tenth of it)
                ident = given
                order._slot_of[key] = len(order._slots)
                order._slots.append(ident)
                stored[key] = message
            else:
                ident = self._store(message)
            if ids is None:  # a new inbox: its one id, bare (see Flow); marked opened first
                self.unwrapped[inbox] = now
                self.inboxes[inbox] = ident
                self.received = message
                return
            # `ids.append(ident)` spelled out (its refusal came first, above)
            slot_of[key] = len(ids._slots)
            ids._slots.append(ident)
            self.received = message
        except BaseException as error:
            if new_here:
                # An Exception (an error, or what a signal handler raised: a SIGALRM's TimeoutError) fails
                # the delivery, which the Exchange records as such: not delivered, even if it had been made
                # whole. Another (a KeyboardInterrupt) stops the collect, and a delivery made whole stays.
                self._settle_receive(message, inbox, keep_whole=not isinstance(error, Exception))
            raise

    def _holds_delivered(self, message: Message, inbox: str) -> bool:
        """Whether the pile holds this very message and the named inbox lists its id: delivered whole."""
        ident = message.id
        if self.stored.get(ident.int) is not message:
            return False
        ids = self.inboxes.get(inbox)
        return ident in ids if isinstance(ids, OrderedIds) else ids == ident

    def _settle_receive(self, message: Message, inbox: str, keep_whole: bool) -> None:
        """After a receive raised out of: the message is in the pile and its inbox (made whole, and
        `keep_whole`), or in neither. Told from what the inbox and pile hold, as `_settle_queue` tells it."""
        ident = message.id
        ids = self.inboxes.get(inbox)
        if isinstance(ids, OrderedIds):
            ids._settle_append(ident.int)
        # Listed by this very receive when the pile holds the message too: it stores before it lists, and
        # refuses an id the inbox listed before (an interrupt may come before that refusal).
        whole = self._holds_delivered(message, inbox)
        if whole and keep_whole:
            return  # the interrupt came after the delivery was whole
        self.received = None
        if whole and ids is ident:  # a new inbox, opened for it: closed again
            del self.inboxes[inbox]
        elif whole and isinstance(ids, OrderedIds):
            ids.exclude([ident])
        if ids is None or (whole and ids is ident):
            self.unwrapped.pop(inbox, None)  # opened for it
        self._take_back(message)

    def _take_back(self, message: Message) -> None:
        """Take a message `_store` was storing out of the pile and its order again: the flow as it was
        before the queue or delivery that raised."""
        ident = message.id
        key = ident.int
        if self.stored.get(key) is message:
            del self.stored[key]
        order = self.order
        order._settle_append(key)  # `_store` cut short between its two order lines
        if key in order._slot_of:
            order.exclude([ident])

    def _store(self, message: Message) -> UUID:
        """Add a message new to the flow to its pile; its id. ValueError, changing nothing, when the flow
        holds that id already (each message is in exactly one of the flow's progressions)."""
        kind = type(message)
        known = kind in self.message_classes
        if not known and not isinstance(message, Message):  # (a pile may admit any element) never routable
            raise TypeError(f"a flow holds messages only, not {kind.__name__}")
        ident = message.id
        key = ident.int
        stored = self.stored
        if key in stored:
            raise ValueError(f"{ident} is already in this flow")
        # `receive` spells out the branch below for its usual road: a change here belongs there too.
        if known:  # `pile.include` spelled out: it reads the model's attributes
            order = self.order
            if key in order._slot_of:  # ordered behind the pile's back: it would be there twice
                raise self.pile._out_of_step()
            order._slot_of[key] = len(order._slots)
            order._slots.append(ident)
            stored[key] = message
        else:  # a message class this flow has not stored yet: the pile checks it (TypeError if not admitted)
            self.pile.include(message)
            self.message_classes.add(kind)
        return ident


class Flow(CopiedUnderLock, Element):
    """A mailbox: `items` holds every message the owner has queued or received, and `progressions`
    orders them by name. Each message is in exactly one progression of the flow.

    An inbox opened by a delivery is kept as bare ids and given its Progression (an Element with an id
    of its own) only when `progressions`, `inboxes()` or a record asks for it: an Exchange opens one
    inbox per sender and recipient pair, and building that Element cost more than the rest of the
    delivery. Its `created_at` is still when the inbox opened. Until its second message (or its
    Progression) it is even just that one message's UUID: most pairs exchange few messages, and an
    `OrderedIds` (four containers for the garbage collector to walk) cost a fifth of a delivery.

    Threads: the flow's pile, its progressions and its inboxes share one lock, the pile's
    `thread_lock`, which every change to the flow and every read of its inboxes holds. The flows of an
    Exchange share the Exchange's lock (see `share_lock`), which its sends and collects hold throughout.
    """

    _built_by_its_constructor = True

    name: str | None = None

    if TYPE_CHECKING:
        _items: Pile[Message]
        _progressions: dict[str, Progression]  # the outbox and every inbox given its Progression so far
        _inbox_ids: dict[str, Inbox]  # every inbox's ids, in the order the inboxes opened
        _unwrapped: dict[str, float]  # inboxes with no Progression yet, and when each opened
        _storage: _Storage  # the containers above, for the per-message paths (see _Storage)
        _lock: ThreadLock  # the pile's (see share_lock)

    def __init__(
        self,
        items: Pile[Message] | Mapping[str, Any] | None = None,
        progressions: Iterable[Progression | Mapping[str, Any]] | None = None,
        **data: Any,
    ) -> None:
        super().__init__(**data)
        # Records in place of the parts, as model_validate(model_dump()) passes them.
        if isinstance(items, Mapping):
            items = Pile.from_dict(items)
        pile = items if items is not None else Pile(item_type={Message})
        if not isinstance(pile, Pile):
            raise TypeError(f"a flow's items are a Pile of messages or a pile record, not {type(pile).__name__}")
        if pile.item_type != _MESSAGES_ONLY:  # a pile that admits more (a record with item_type null): check each
            stray = next((item for item in pile if not isinstance(item, Message)), None)
            if stray is not None:  # it could never be routed: collecting would fail on it
                raise ValueError(f"a flow holds messages only, not {type(stray).__name__}")
        lock = pile.thread_lock
        named = {OUTBOX: Progression.over(OrderedIds(), OUTBOX, time.time(), lock)}
        given_names: set[str] = set()
        for given in progressions or []:
            progression = Progression.from_dict(_canonical_inbox(given)) if isinstance(given, Mapping) else given
            if not isinstance(progression, Progression):
                raise TypeError(f"a flow's progressions are Progressions or records, not {type(progression).__name__}")
            if progression.name is None:
                raise ValueError("every progression of a flow needs a name")
            name = _canonical_inbox_name(progression.name)
            if _misnamed(name):
                raise ValueError(_misnamed_text(name))
            if name in given_names:
                raise ValueError(f"two progressions of the flow are named {name!r}")
            given_names.add(name)
            named[name] = progression
        listed = [ident for progression in named.values() for ident in progression]
        if len(listed) != len(set(listed)) or set(listed) != set(pile.keys()):
            raise ValueError("a flow's progressions must list each of its items exactly once")
        for name, progression in named.items():  # every check passed: the flow adopts its progressions
            if progression.name != name:  # an inbox named with an upper-case UUID: deliveries use the lower
                progression.name = name
            object.__setattr__(progression, "_lock", lock)  # the flow's lock guards all of its parts
        inbox_ids: dict[str, Inbox] = {name: p._ids for name, p in named.items() if name != OUTBOX}
        state: dict[str, Any] = {  # plain attributes: pydantic PrivateAttrs are slow
            "_items": pile,
            "_progressions": named,
            "_inbox_ids": inbox_ids,
            "_unwrapped": {},
        }
        for name, value in state.items():
            object.__setattr__(self, name, value)
        storage = _Storage(pile, named[OUTBOX]._ids, state["_inbox_ids"], state["_unwrapped"])
        object.__setattr__(self, "_storage", storage)
        object.__setattr__(self, "_lock", lock)

    @field_validator("name")
    @classmethod
    def _owner_in_canonical_text(cls, name: str | None) -> str | None:
        # The schema's pattern allows A-F; `inbox_name`, records and the Exchange spell an owner in lower case.
        if name is not None and CANONICAL_UUID.fullmatch(name):
            return name.lower()
        return name

    @property
    def items(self) -> Pile[Message]:
        return self._items

    @property
    def progressions(self) -> dict[str, Progression]:
        """Progressions by name: a new dict each time (the outbox first, then the inboxes in the order
        they opened), so that a delivery in another thread cannot change it while it is read. The
        Progressions are the flow's own: change mail through the Exchange, not through them."""
        with self._storage.lock:
            self._wrap_inboxes()
            return dict(self._progressions)

    @property
    def outbox(self) -> Progression:
        return self._progressions[OUTBOX]

    @outbox.setter
    def outbox(self, value: Progression) -> None:
        assigned_back("flow.outbox", self._progressions[OUTBOX], value)

    def get_progression(self, key: str | UUID | Progression) -> Progression:
        """A progression by name (`"outbox"`, `"inbox_<sender>"`), by its own id (a UUID or its text) or
        as the Progression itself, as in LionAGI; KeyError when the flow has none such. Change mail
        through the Exchange, not through the progression: the flow's items must stay in step."""
        progressions = self.progressions
        if isinstance(key, str) and _canonical_inbox_name(key) in progressions:
            return progressions[_canonical_inbox_name(key)]
        wanted = key.id if isinstance(key, Progression) else key
        for progression in progressions.values():
            if progression.id == wanted or (isinstance(wanted, str) and str(progression.id) == wanted.lower()):
                return progression
        raise KeyError(f"no progression {key!r} in this flow")

    def __len__(self) -> int:
        """The messages the flow holds (queued and received)."""
        return len(self._items)

    def __bool__(self) -> bool:
        # An element is always true, as LionAGI's: `if exchange.get(owner):` asks whether the owner is
        # registered, and an empty mailbox must not answer no.
        return True

    def __repr__(self) -> str:
        name = "" if self.name is None else f", name={self.name!r}"
        return f"Flow(items={len(self._items)}, progressions={len(self._progressions) + len(self._unwrapped)}{name})"

    def inboxes(self) -> Iterator[tuple[str, Progression]]:
        return ((name, p) for name, p in self.progressions.items() if name != OUTBOX)

    def queue(self, message: Message) -> None:
        """Put an outgoing message in the outbox (ValueError, nothing changed, if the flow holds it)."""
        with self._storage.lock:
            self._storage.queue(message)

    def take_outbox(self) -> list[Message]:
        """Remove and return the queued messages, oldest first (ids whose message is gone are skipped)."""
        with self._storage.lock:
            return self._storage.take_outbox()

    def deliver(self, message: Message, sender: Any) -> None:
        """Put an incoming message in the inbox of its sender (opened on first delivery); ValueError,
        nothing changed, if the flow holds it already."""
        inbox = inbox_name(sender)
        with self._storage.lock:
            self._storage.receive(message, inbox, time.time())

    def share_lock(self, lock: ThreadLock) -> None:
        """Make `lock` the flow's thread lock: its pile's, its progressions' and its inboxes'. An Exchange
        gives its flows its own lock as it adopts them, so that a send or a collect, which holds it
        throughout, takes no other lock per message. Nothing may be using the flow meanwhile. A
        TypeError, changing nothing, for anything but a ThreadLock (what every lock here is)."""
        if not isinstance(lock, ThreadLock):
            raise TypeError(f"a flow shares a ThreadLock, got {type(lock).__name__}")
        pile = self._items
        object.__setattr__(pile, "_lock", lock)
        object.__setattr__(pile._progression, "_lock", lock)
        for progression in self._progressions.values():
            object.__setattr__(progression, "_lock", lock)
        self._storage.lock = lock
        object.__setattr__(self, "_lock", lock)

    def inbox(self, sender: Any) -> list[Message]:
        name = inbox_name(sender)
        with self._storage.lock:
            inbox = self._inbox_ids.get(name)
            return [] if inbox is None else [self._items[ident] for ident in _listed(inbox)]

    def all_inboxes(self) -> list[Message]:
        with self._storage.lock:
            return [self._items[ident] for inbox in self._inbox_ids.values() for ident in _listed(inbox)]

    def pop_oldest(self, sender: Any) -> Message | None:
        """Remove and return the oldest message from `sender`; None when there is none."""
        name = inbox_name(sender)
        with self._storage.lock:
            inbox = self._inbox_ids.get(name)
            if inbox is None:
                return None
            if isinstance(inbox, OrderedIds) and not inbox:
                return None
            oldest = inbox[0] if isinstance(inbox, OrderedIds) else inbox
            # The pile first: a message taken out of it behind the flow's back is its KeyError, nothing changed.
            message: Message = self._items.pop(oldest)
            if isinstance(inbox, OrderedIds):
                inbox.popleft()
            else:  # its one message: the inbox stays open, empty
                self._inbox_ids[name] = OrderedIds()
            return message

    # An inbox's Progression, and with it its id, is made on first need: a copy made before then would
    # make its own, with another id, and its record would no longer be the original's. Both are made now.
    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        with self._storage.lock:
            self._wrap_inboxes()
            return super().__deepcopy__(memo)

    def __getstate__(self) -> dict[Any, Any]:
        with self._storage.lock:
            self._wrap_inboxes()
        return super().__getstate__()

    def _wrap_inboxes(self) -> None:
        """Give every inbox still kept as bare ids its Progression, in the order the inboxes opened
        (all of them at once, so `progressions` keeps that order). The caller holds the lock."""
        lock = self._storage.lock
        for name, opened in self._unwrapped.items():
            ids = self._inbox_ids[name]
            if not isinstance(ids, OrderedIds):  # the Progression and later deliveries share one OrderedIds
                ids = self._inbox_ids[name] = OrderedIds.of_one(ids)
            self._progressions[name] = Progression.over(ids, name, opened, lock)
        self._unwrapped.clear()

    def owner(self) -> UUID | None:
        return None if self.name is None else UUID(self.name)

    # -- records -----------------------------------------------------------------------------------

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler, info: Any) -> dict[str, Any]:
        with self._storage.lock:  # the items and every progression as of one moment
            record: dict[str, Any] = handler(self)
            handled = set(record)  # the keys pydantic made (its options applied), before the parts
            if not parts_later(info):
                self._add_part_records(record, info.mode)
        return chosen_parts(record, info, handled)

    def _unchecked_record(self, mode: str) -> dict[str, Any]:
        with self._storage.lock:  # the record and its parts' records as of one moment
            return super()._unchecked_record(mode)

    def _add_part_records(self, record: dict[str, Any], mode: str) -> None:
        progressions = self.progressions
        record["items"] = record_of_part(self._items, mode, "$.items")
        record["progressions"] = records_of_parts(progressions.values(), mode, "$.progressions")
        self._check_each_item_listed_once(record["progressions"], progressions)

    def _check_each_item_listed_once(self, written: list[dict[str, Any]], progressions: dict[str, Progression]) -> None:
        """Make the record loadable, as loading checks it, or refuse to write it (ValueError). A queued id
        whose message left the pile behind the flow's back is left out: collecting skips it anyway (the
        ADR's missing queued object). Any other id without its message, or a message in no progression
        or in two (changed behind the flow's back as well), would make a record that cannot load."""
        held = self._items._items
        listed: set[int] = set()
        count = 0
        gone: set[str] = set()
        for name, progression in progressions.items():
            if progression.name != name:  # renamed in place: the record would name the outbox or an inbox wrongly
                raise ValueError(
                    f"cannot write the flow's record: its progression {name!r} is now named {progression.name!r}"
                )
            for ident in progression:
                if ident.int in held:
                    listed.add(ident.int)
                    count += 1
                elif progression.name == OUTBOX:
                    gone.add(str(ident))
                else:
                    where = f"{progression.name} lists {ident}"
                    raise ValueError(f"cannot write the flow's record: {where}, not in its items")
        if count != len(listed) or len(listed) != len(held):
            raise ValueError("cannot write the flow's record: a message in its items is in no progression or in two")
        if gone:  # the outbox's record comes first; its ids are UUIDs or their text, by the dump's mode
            written[0]["order"] = [ident for ident in written[0]["order"] if str(ident) not in gone]

    @classmethod
    def _prepare_record(cls, record: dict[str, Any]) -> None:
        items = record.get("items")
        if isinstance(items, Mapping):
            record["items"] = part_of_record(cls, ("items",), functools.partial(Pile.from_dict, items))
        elif items is not None:
            raise record_error(cls, ("items",), "items must be a pile record", items)
        progressions = record.get("progressions", [])
        if not isinstance(progressions, list):
            raise record_error(cls, ("progressions",), "progressions must be a list of progression records", None)
        names: set[str] = set()
        canonical: list[Mapping[str, Any]] = []
        for index, given in enumerate(progressions):
            if not isinstance(given, Mapping):
                raise record_error(cls, ("progressions", index), "each progression must be a record", given)
            name = given.get("name")
            if name is None:  # what the constructor refuses, located here (review by 2)
                raise record_error(
                    cls, ("progressions", index, "name"), "every progression of a flow needs a name", name
                )
            if type(name) is not str:  # checked before `in`: a list is unhashable
                raise record_error(cls, ("progressions", index, "name"), "a progression's name is a string", name)
            given = _canonical_inbox(given)
            name = given["name"]  # a str still (only an inbox's id is respelled)
            if _misnamed(name):
                raise record_error(cls, ("progressions", index, "name"), _misnamed_text(name), name)
            if name in names:
                raise record_error(cls, ("progressions", index, "name"), f"two progressions are named {name!r}", name)
            names.add(name)
            canonical.append(given)
        record["progressions"] = [
            part_of_record(cls, ("progressions", index), functools.partial(Progression.from_dict, p))
            for index, p in enumerate(canonical)
        ]


def _canonical_inbox(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """A progression record whose name is an inbox's in another spelling of its sender (`_canonical_inbox_name`)
    as a copy with the canonical name, which `inbox_name` gives every spelling of that sender; any other
    record as it is (the caller's record is never changed)."""
    name = record.get("name")
    canonical = _canonical_inbox_name(name) if type(name) is str else name
    if canonical != name:
        return {**record, "name": canonical}
    return record


def _canonical_inbox_name(name: str) -> str:
    """An inbox's name as `inbox_name` spells its sender (a UUID in any spelling `UUID()` reads, braces,
    `urn:uuid:` or bare hex, in its canonical lower-case text: every reader finds it by any spelling);
    any other name as it is."""
    if not name.startswith("inbox_") or (name.islower() and CANONICAL_UUID.fullmatch(name, len("inbox_"))):
        return name  # not an inbox, or one named as inbox_name names it (the usual case: no parse)
    return inbox_name(name[len("inbox_") :])


def _misnamed_text(name: str) -> str:
    return f"a flow's progressions are {OUTBOX!r} and 'inbox_<sender>', not {name!r}"


def _misnamed(name: str) -> bool:
    """Whether a flow cannot hold a progression of this name: its mail would be reachable by no sender
    (`receive(owner, sender)`, `pop_message`) and never collected."""
    return name != OUTBOX and not name.startswith("inbox_")
