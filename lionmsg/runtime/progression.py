"""Progression: an ordered set of UUIDs (ADR-0006 D3: a Pile's order, a Branch's selected view).

Membership, `index()`, replace-at-index, append and removal at either end are O(1) (amortised: a
history's id -> position index is made on first need, see `OrderedIds`); removing
from the middle leaves a gap that later positional look-ups skip in O(log gaps), and gaps are compacted
once they make up half of the storage, as is the room removals from the front leave once it exceeds the
ids held. Inserting at the front reuses head room (grown geometrically), so
putting a system message at index 0 does not make later operations linear.
"""

from __future__ import annotations

import bisect
import contextlib
import operator
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, overload
from uuid import UUID

from pydantic import SerializationInfo, SerializerFunctionWrapHandler, computed_field, field_serializer

from lionmsg.runtime.element import Element, UuidText, record_error
from lionmsg.runtime.fastpath import trusted_instance
from lionmsg.runtime.ids import new_uuid4, uuid_text
from lionmsg.runtime.threadlock import CopiedUnderLock, ThreadLock
from lionmsg.runtime.wire import CANONICAL_UUID

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["OrderSnapshot", "OrderedIds", "Progression", "assigned_back", "to_uuid"]

_EMPTY: Any = None  # a gap left by a removal
_SPARE_HEAD_ROOM = 8  # head room kept beyond the ids held (the least a prepend makes)
_canonical = CANONICAL_UUID.fullmatch
_new_object = object.__new__


def to_uuid(ref: Any) -> UUID:
    """The UUID a reference names: a UUID, a UUID string, or anything whose `id` is a UUID (an element)
    or UUID text (as a message's sender or recipient reads such an object)."""
    if type(ref) is UUID:
        return ref
    if isinstance(ref, str):
        try:
            return UUID(ref)
        except ValueError:
            raise ValueError(f"not a UUID: {ref!r}") from None
    if isinstance(ref, UUID):
        return ref
    ident = getattr(ref, "id", None)
    if isinstance(ident, UUID):
        return ident
    if isinstance(ident, str):
        with contextlib.suppress(ValueError):
            return UUID(ident)
    raise TypeError(f"expected a UUID, a UUID string or an element, got {type(ref).__name__}")


def assigned_back(attribute: str, current: Progression | None, value: object) -> None:
    """The setter of a property that hands out a Progression to change in place. `owner.progression -= ids`
    changes the progression, then assigns the result back to the property: without a setter that took
    it, the statement raised after its change (review bk F2). The very object is taken back (nothing
    to do); any other value, or any value when none was handed out (`current` None), is an
    AttributeError."""
    if current is None or value is not current:
        raise AttributeError(f"{attribute} cannot be assigned: change it in place, through its methods or += and -=")


def _position(index: Any) -> int:
    """A position in a progression: an int (or an object with `__index__`), never a bool, as for
    `Pile[...]` (True would silently mean 1)."""
    if type(index) is int:
        return index
    if isinstance(index, bool) or not hasattr(type(index), "__index__"):
        raise TypeError(f"progression positions are integers, got {type(index).__name__}")
    return operator.index(index)


def _refs(refs: Any) -> list[UUID]:
    """One reference, or an iterable of them, as UUIDs (a string or an element counts as one: a
    Progression too, as in LionAGI, which stands for its own id there)."""
    # A list (the usual argument) skips hasattr(refs, "id"), whose miss raises internally, and the ABC check.
    listed = type(refs) is list
    if not listed and (isinstance(refs, (str, UUID)) or hasattr(refs, "id")):
        return [to_uuid(refs)]
    if listed or isinstance(refs, Iterable):
        return [ref if type(ref) is UUID else to_uuid(ref) for ref in refs]  # a UUID needs no call
    return [to_uuid(refs)]


class OrderedIds:
    """The storage behind a Progression: a slot list with head room and gaps, and an id -> slot index.

    The index is keyed by each id's 128-bit integer, which identifies it exactly as the UUID does
    (UUIDs compare and hash by it): hashing an int is native, `UUID.__hash__` is a Python call.

    Empty storage can drop its index (`forget_map`, as a history's pile does when it starts or is
    cleared) to have it made again when first needed: until then the storage is an `_UnmappedIds`
    (`_mapped` False, `_slot_of` unset: reading it makes it), and a history that only grows by its
    pile's appends (`Pile` appends an item it lacks straight to `_slots` while the order is unmapped)
    keeps none, about 80 bytes per id at 100,000 ids. Every other change reads the index first, so
    while it is unmapped nothing but its pile has changed the order, which then holds exactly the
    pile's ids. A caller that does not hold the owner's lock makes it under that lock
    (`Progression.__contains__`): an append meanwhile would be left out of it.

    `_changes` grows with every change but an append at the end (code that edits the slots directly
    must bump it too, unless it appends): with the length it tells whether anything changed since it was
    last read, at no cost on the hot path, where appends are counted by the length alone (see
    `pile.changes_made`, which a store uses to see changes made behind a manager's back).
    """

    __slots__ = ("_changes", "_gaps", "_head", "_mapped", "_slot_of", "_slots")

    def __init__(self, ids: Iterable[UUID] = ()) -> None:
        self._slots: list[UUID | None] = list(ids)
        self._head = 0  # first used slot; slots before it are head room
        self._gaps: list[int] = []  # sorted slots emptied by removals
        self._changes = 0
        if self._slots:  # (the index made here is the duplicate check's)
            slot_of = {ident.int: slot for slot, ident in enumerate(self._slots)}  # type: ignore[union-attr]
            if len(slot_of) != len(self._slots):
                raise ValueError("a progression holds each id once: the order has duplicates")
        else:
            slot_of = {}
        self._set_map(slot_of)

    def _make_map(self) -> dict[int, int]:
        slots = self._slots
        slot_of = {ident.int: slot for slot in range(self._head, len(slots)) if (ident := slots[slot]) is not None}
        self._set_map(slot_of)
        return slot_of

    def _set_map(self, slot_of: dict[int, int]) -> None:
        # In this order, so that cut short anywhere the storage stays whole: marked mapped with no index,
        # an unmapped class makes it on the next read; with the index, the unmapped class only reads
        # slower; the plain class last (see _UnmappedIds).
        self._mapped = True
        self._slot_of = slot_of
        self._plain_again()

    def _plain_again(self) -> None:
        if type(self) is _UnmappedIds:
            object.__setattr__(self, "__class__", OrderedIds)  # (a plain assignment: mypy narrowed `self`)

    @classmethod
    def of_one(cls, ident: UUID) -> OrderedIds:
        """`OrderedIds([ident])` without the general constructor's work: an Exchange opens an inbox per
        sender and recipient pair with the delivery that needs it, so this is most deliveries at small N."""
        ids = _new_object(cls)
        ids._slots = [ident]
        ids._set_map({ident.int: 0})
        ids._head = 0
        ids._gaps = []
        ids._changes = 0
        return ids

    # -- reading -----------------------------------------------------------------------------------

    def __len__(self) -> int:
        # One read of the index, or of the slots while there is none (unmapped storage has no head room
        # or gaps): an unlocked len() sees no change half made, and never makes the index (see _index_as_is).
        try:
            return len(_index_as_is(self))
        except AttributeError:
            return len(self._slots)

    def __iter__(self) -> Iterator[UUID]:
        if self._gaps:
            return (ident for ident in self._slots[self._head :] if ident is not None)
        return iter(self._slots[self._head :])  # type: ignore[arg-type]  # no gaps: no None slots

    def __reversed__(self) -> Iterator[UUID]:
        return (ident for ident in reversed(self._slots[self._head :]) if ident is not None)

    def reversed_in_place(self) -> Iterator[UUID]:
        """The ids from last to first, read from the slots as they are: for a caller that holds the
        progression's lock until it stops iterating (`reversed()` copies the slots first instead, O(n)
        before the first id, where a search from the end usually stops after a few)."""
        slots, head = self._slots, self._head
        for slot in range(len(slots) - 1, head - 1, -1):
            ident = slots[slot]
            if ident is not None:
                yield ident

    def __contains__(self, ref: Any) -> bool:
        return holds(self._slot_of, ref)

    @overload
    def __getitem__(self, index: int) -> UUID: ...
    @overload
    def __getitem__(self, index: slice) -> list[UUID]: ...
    def __getitem__(self, index: int | slice) -> UUID | list[UUID]:
        if not self._gaps:  # every slot from the head on holds an id: positions are slots
            slots, head = self._slots, self._head
            if type(index) is int and -(len(slots) - head) <= index < len(slots) - head:
                return slots[index if index < 0 else head + index]  # type: ignore[return-value]
            if isinstance(index, slice):
                start, stop, step = index.indices(len(slots) - head)
                if step > 0:  # a negative step's stop may be -1, which a slot slice reads from the end
                    return slots[head + start : head + stop : step]  # type: ignore[return-value]
        if isinstance(index, slice):
            return list(self)[index]
        index = _position(index)
        size = len(self)
        if not -size <= index < size:
            raise IndexError(f"progression index {index} out of range for {size} ids")
        ident = self._slots[self._slot_at(index % size)]
        assert ident is not None
        return ident

    def index(self, ref: Any) -> int:
        """The position of an id; ValueError when absent."""
        ident = to_uuid(ref)
        slot = self._slot_of.get(ident.int)
        if slot is None:
            raise ValueError(f"{ident} is not in the progression")
        return slot - self._head - bisect.bisect_left(self._gaps, slot)

    # -- changing ----------------------------------------------------------------------------------

    def include(self, refs: Any) -> bool:
        """Append the ids not present yet; True when any was added."""
        added = False
        for ident in _refs(refs):
            if ident.int not in self._slot_of:
                self._slot_of[ident.int] = len(self._slots)
                self._slots.append(ident)
                added = True
        return added

    def append(self, ref: Any) -> None:
        """Append one id; ValueError when it is already present. (A flow's `receive` spells this out for
        an inbox: a change here belongs there too.)"""
        ident = ref if type(ref) is UUID else to_uuid(ref)
        key = ident.int
        if key in self._slot_of:
            raise ValueError(f"{ident} is already in the progression")
        self._slot_of[key] = len(self._slots)
        self._slots.append(ident)

    def insert(self, index: int, ref: Any) -> None:
        """Insert one id before position `index` (clamped like `list.insert`); ValueError when present."""
        index = _position(index)
        ident = to_uuid(ref)
        if ident.int in self._slot_of:
            raise ValueError(f"{ident} is already in the progression")
        size = len(self)
        index = max(0, min(size, index + size if index < 0 else index))
        if index == size:
            self.append(ident)
        elif index == 0:
            self._prepend(ident)
        else:
            self._changes += 1
            self._compact()
            slot = self._head + index
            self._slots.insert(slot, ident)
            for later in range(slot, len(self._slots)):
                self._slot_of[self._slots[later].int] = later  # type: ignore[union-attr]

    def replace(self, old: Any, new: Any) -> None:
        """Put `new` where `old` is, in O(1); ValueError when `old` is absent or `new` already present."""
        old_id, new_id = to_uuid(old), to_uuid(new)
        if old_id == new_id and old_id.int in self._slot_of:
            return
        if new_id.int in self._slot_of:
            raise ValueError(f"{new_id} is already in the progression")
        slot = self._slot_of.pop(old_id.int, None)
        if slot is None:
            raise ValueError(f"{old_id} is not in the progression")
        self._slots[slot] = new_id
        self._slot_of[new_id.int] = slot
        self._changes += 1

    def exclude(self, refs: Any) -> bool:
        """Remove the ids present; True when any was removed."""
        removed = False
        for ident in _refs(refs):
            # Not hoisted out of the loop: _empty() may compact (new slot numbers) or clear the storage.
            slot = self._slot_of.pop(ident.int, None)
            if slot is None:
                continue
            removed = True
            if slot == self._head and not self._gaps:  # the oldest id (a mailbox's usual removal): no call
                self._slots[slot] = _EMPTY
                self._head = slot + 1
            else:
                self._empty(slot)
        if removed:
            self._changes += 1
            if not self._slot_of:
                self.clear()
            elif self._head > len(self._slot_of) + _SPARE_HEAD_ROOM:
                # Removals from the front leave head room behind them: a queue that never empties (an
                # inbox read as it fills) would keep every slot it ever used. Dropped once it outgrows
                # the ids held, so each compaction copies fewer ids than removals made it due.
                self._compact()
        return removed

    def remove(self, ref: Any) -> None:
        """Remove one id; ValueError when absent."""
        if not self.exclude([to_uuid(ref)]):
            raise ValueError(f"{to_uuid(ref)} is not in the progression")

    def pop(self, index: int = -1) -> UUID:
        """Remove and return the id at `index` (the last by default); a slice is refused as any other
        position that is no integer (`del p[a:b]` removes a range)."""
        ident = self[_position(index)]
        self.exclude([ident])
        return ident

    def popleft(self) -> UUID:
        """Remove and return the first id, in O(1)."""
        if not self:
            raise IndexError("popleft from an empty progression")
        return self.pop(0)

    def clear(self) -> None:
        # Mapped (an empty index), even if it was not: a progression cleared behind its pile's back leaves
        # the pile's items unordered, which the pile's checks must see (see `forget_map`). One statement,
        # with no call in it for an interrupt to land at; the plain class after it (see _set_map).
        self._mapped, self._slot_of, self._slots, self._head, self._gaps = True, {}, [], 0, []
        self._plain_again()
        self._changes += 1

    def forget_map(self) -> None:
        """Drop the index of empty storage: its pile's appends then keep none until it is needed (for a
        pile that holds nothing either: a history's, as it starts or is cleared). The class goes first
        and the mark last, so that cut short anywhere, the next read makes the index again."""
        if self._slots or not self._mapped:
            return
        self.__class__ = _UnmappedIds  # first: with its `_slot_of` unset, a read makes it again
        del self._slot_of
        self._mapped = False

    def __getstate__(self) -> tuple[None, dict[str, Any]]:
        # The default reads every slot, and reading an unset `_slot_of` would make it (_UnmappedIds),
        # unlocked (a copy or pickle may be made without the owner's lock).
        state = {name: getattr(self, name) for name in ("_changes", "_gaps", "_head", "_slots")}
        try:
            state["_slot_of"] = _index_as_is(self)
        except AttributeError:
            state["_mapped"] = False
        else:
            state["_mapped"] = True
        return None, state

    def __setstate__(self, state: tuple[Any, dict[str, Any]]) -> None:
        for name, value in state[1].items():
            setattr(self, name, value)
        if "_mapped" not in state[1]:  # pickled before the index could be unmade: it has one
            self._mapped = True

    # -- storage -----------------------------------------------------------------------------------

    def _slot_at(self, index: int) -> int:
        """The slot of the id at a valid position, skipping gaps."""
        if not self._gaps:
            return self._head + index
        gaps = self._gaps
        # Count the gaps before the target: the j-th gap has `gaps[j] - head - j` ids before it.
        before = bisect.bisect_right(range(len(gaps)), index, key=lambda j: gaps[j] - self._head - j)
        return self._head + index + before

    def _prepend(self, ident: UUID) -> None:
        if self._head == 0:
            self._compact()
            room = max(8, len(self._slots))  # geometric head room keeps prepends amortised O(1)
            self._slots[:0] = [_EMPTY] * room
            self._head = room
            self._set_map({key: slot + room for key, slot in self._slot_of.items()})
        self._head -= 1
        self._slots[self._head] = ident
        self._slot_of[ident.int] = self._head
        self._changes += 1

    def _empty(self, slot: int) -> None:
        self._slots[slot] = _EMPTY
        if slot == self._head:
            self._head += 1
            if self._gaps and self._gaps[0] == self._head:
                self._skip_leading_gaps()
        elif slot == len(self._slots) - 1:
            self._slots.pop()
            while self._gaps and self._gaps[-1] == len(self._slots) - 1:
                self._gaps.pop()
                self._slots.pop()
        else:
            bisect.insort(self._gaps, slot)
            if len(self._gaps) * 2 > len(self._slot_of):
                self._compact()
        if not self._slot_of:
            self.clear()

    def _skip_leading_gaps(self) -> None:
        while self._gaps and self._gaps[0] == self._head:
            self._gaps.pop(0)
            self._head += 1

    def _settle_append(self, key: int) -> None:
        """`_settle` when an append of `key` was cut short between its two lines (the slot map names the
        slot past the end: O(1) to see), else nothing."""
        if self._slot_of.get(key) == len(self._slots):
            self._settle()

    def _settle(self) -> None:
        """Make the storage whole again after an update an interrupt cut short (an exclusion between
        dropping an id from the slot map and emptying its slot, a compaction between its two halves):
        the ids held are those the slot map names, in slot order (O(n); never on the usual paths)."""
        held = self._slot_of
        ids = [ident for ident in self._slots[self._head :] if ident is not None and ident.int in held]
        self._slots = list[UUID | None](ids)
        self._set_map({ident.int: slot for slot, ident in enumerate(ids)})
        self._head, self._gaps = 0, []
        self._changes += 1

    def _compact(self) -> None:
        """Close the gaps and give up head room (O(n))."""
        if not self._gaps and self._head == 0:
            return
        ids = list(self)
        self._slots = list[UUID | None](ids)
        self._set_map({ident.int: slot for slot, ident in enumerate(ids)})
        self._head, self._gaps = 0, []


_index_as_is = OrderedIds.__dict__["_slot_of"].__get__
"""An OrderedIds' index as it is: AttributeError when it is not made, never making it (the slot's own
reader, which no `__getattr__` follows): for readers that may not hold the owner's lock."""


def holds(slot_of: dict[int, int], ref: Any) -> bool:
    """Whether an index names `ref` (an id, its text, an element; a list or tuple: every one of them, as
    LionAGI reads it, none: True)."""
    try:
        return to_uuid(ref).int in slot_of
    except (TypeError, ValueError):
        if isinstance(ref, (list, tuple)):
            return all(holds(slot_of, member) for member in ref)
        return False


class _UnmappedIds(OrderedIds):
    """OrderedIds whose index is not made yet: reading `_slot_of` makes it, and the storage becomes a
    plain OrderedIds (`_set_map`). A class of its own because a class with `__getattr__` has every
    attribute read go through it (about 31 ns against 13 in CPython 3.11, and the interpreter does not
    specialise them), and the Exchange's filing reads its storage's attributes on every delivery."""

    __slots__ = ()

    if TYPE_CHECKING:
        _slot_of: dict[int, int]
    else:

        def __getattr__(self, name: str) -> Any:
            # Only for an unset slot: the index is made now (the caller holds the owner's lock, as for
            # any other read of it).
            if name == "_slot_of":
                return self._make_map()
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


class OrderSnapshot(list[UUID]):
    """What `Progression.order` returns: the ids in order, as a list that refuses changes. LionAGI's
    `order` is the progression's own storage, so code written for it may append to it to change the
    order; here that would change a copy and nothing else, so it is a TypeError saying where to change
    it. Slicing, concatenating, copying or pickling it gives a plain list."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            "Progression.order is a snapshot: change the order through the Progression itself "
            "(append, insert, remove, exclude, pop...)"
        )

    append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse

    def __reduce__(self) -> tuple[type[list[UUID]], tuple[list[UUID]]]:
        return list, (list(self),)

    def __copy__(self) -> list[UUID]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[UUID]:
        return list(self)  # UUIDs are immutable: a deep copy shares them


class Progression(CopiedUnderLock, Element):
    """An ordered set of UUIDs with a name. Elements given where an id is expected stand for their ids.

    Reading and changing methods are those of `OrderedIds`; equality is by name and order (not id),
    as in LionAGI. Each change, and each read that combines more than one of the storage's parts, holds
    `_lock` (a pile's progression shares the pile's lock), so threads sharing a progression never see or
    leave it half changed; a membership test or `len()` is one dict operation and needs none.
    """

    _built_by_its_constructor = True

    name: str | None = None

    def __init__(self, order: Any = None, **data: Any) -> None:
        super().__init__(**data)
        # Plain attributes, not pydantic PrivateAttrs: those cost microseconds per access.
        object.__setattr__(self, "_ids", OrderedIds([] if order is None else _refs(order)))
        object.__setattr__(self, "_lock", ThreadLock())

    if TYPE_CHECKING:
        _ids: OrderedIds
        _lock: ThreadLock

    @classmethod
    def _prepare_record(cls, record: dict[str, Any]) -> None:
        # A record's ids are in the schema's canonical form, as its own `id` must be (UUID objects are
        # taken too: a record a caller assembled in Python may hold them).
        order = record.get("order")
        if order is not None and not (
            type(order) is list and all(type(ref) is UUID or (type(ref) is str and _canonical(ref)) for ref in order)
        ):
            raise record_error(cls, ("order",), "order must be a list of UUIDs in canonical 8-4-4-4-12 form", order)
        distinct = {ref.int if type(ref) is UUID else int(ref.replace("-", ""), 16) for ref in order or ()}
        if len(distinct) < len(order or ()):  # the same UUID, however spelled
            raise record_error(cls, ("order",), "a progression holds each id once: the order has duplicates", order)

    @classmethod
    def empty(cls, name: str | None = None) -> Self:
        """A new empty progression: `Progression(name=name)` without pydantic's validation, which costs
        more than the rest of a delivery when an Exchange opens an inbox."""
        return cls.over(OrderedIds(), name, time.time())

    @classmethod
    def over(cls, ids: OrderedIds, name: str | None, created_at: float, lock: ThreadLock | None = None) -> Self:
        """A new progression whose order is `ids` itself (shared, not copied), guarded by `lock` (a new
        one by default): a Flow keeps an inbox as bare ids under its pile's lock and gives it a
        Progression only when someone asks for one."""
        if cls is not Progression:  # a subclass may add fields: let pydantic fill them in
            progression = cls(name=name, created_at=created_at)
        else:
            values = {"id": new_uuid4(), "created_at": created_at, "metadata": {}, "name": name}
            progression = trusted_instance(cls, values, {"name"})
        object.__setattr__(progression, "_ids", ids)
        object.__setattr__(progression, "_lock", ThreadLock() if lock is None else lock)
        return progression

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """pydantic's copy; an `order` in `update` gives the copy that order, in storage of its own (as
        LionAGI's copy takes it), checked as the constructor checks it before anything is copied."""
        if not update or "order" not in update:
            return super().model_copy(update=update, deep=deep)
        ids = OrderedIds(_refs(update["order"]))
        rest = {key: value for key, value in update.items() if key != "order"}
        copied = super().model_copy(update=rest, deep=deep)
        object.__setattr__(copied, "_ids", ids)
        object.__setattr__(copied, "_lock", ThreadLock())
        return copied

    @computed_field  # type: ignore[prop-decorator]
    @property
    def order(self) -> list[UUID]:
        """The ids, in order: a snapshot (an `OrderSnapshot`, which refuses changes)."""
        with self._lock:
            return OrderSnapshot(self._ids)

    @field_serializer("order", mode="wrap")
    def _write_order(
        self, ids: list[UUID], handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> list[UuidText]:
        # Text in both modes, as LionAGI's model_dump() writes them: JSON mode's is pydantic's own (native)
        # writer, several times faster than spelling each id here. Positions chosen by include/exclude
        # are pydantic's to apply (the handler), in both modes.
        if info.mode == "json":
            written: list[UuidText] = handler(ids)
            return written
        if info.include is None and info.exclude is None:
            return [uuid_text(ident) for ident in ids]
        return [uuid_text(ident) for ident in handler(ids)]

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[UUID]:  # type: ignore[override]
        with self._lock:  # the ids as of now: OrderedIds slices its storage when iteration begins
            return iter(self._ids)

    def __reversed__(self) -> Iterator[UUID]:
        with self._lock:
            return reversed(self._ids)

    def _reversed_holding_lock(self) -> Iterator[UUID]:
        """`reversed()` for a caller that holds `_lock` while it iterates: no copy of the ids first."""
        return self._ids.reversed_in_place()

    def __contains__(self, ref: Any) -> bool:
        return holds(self._index(), ref)

    def _index(self) -> dict[int, int]:
        """The storage's index for a read that holds no lock: as it is, or made under the lock (a pile may
        be appending meanwhile, and an append during an unlocked making would be left out of it)."""
        try:
            return _index_as_is(self._ids)  # type: ignore[no-any-return]
        except AttributeError:
            with self._lock:
                return self._ids._slot_of

    @overload
    def __getitem__(self, index: int) -> UUID: ...
    @overload
    def __getitem__(self, index: slice) -> Progression: ...
    def __getitem__(self, index: int | slice) -> UUID | Progression:
        """An id by position; a slice is a new, unnamed Progression of those ids (as in LionAGI, so it
        can serve as a Branch's selected view)."""
        with self._lock:
            ids = self._ids
            if type(index) is int and not ids._gaps:  # OrderedIds.__getitem__'s first case, without its call
                slots, head = ids._slots, ids._head
                if -(len(slots) - head) <= index < len(slots) - head:
                    return slots[index if index < 0 else head + index]  # type: ignore[return-value]
            if isinstance(index, slice):
                return Progression(order=ids[index])
            return ids[index]

    def __setitem__(self, index: int, ref: Any) -> None:
        """`p[i] = ref`: the id at position `i` replaced by `ref`, as in LionAGI (a slice is a TypeError;
        an id held at another position is a ValueError, as for `replace`; nothing changes then)."""
        if isinstance(index, slice):
            raise TypeError("a Progression takes one id per position: assign p[i] = id, or use include/exclude")
        with self._lock:
            self._ids.replace(self._ids[_position(index)], ref)

    def __delitem__(self, index: int | slice) -> None:
        """`del p[i]` or `del p[a:b]`: those positions removed, as in LionAGI."""
        with self._lock:
            if isinstance(index, slice):
                self._ids.exclude(self._ids[index])
            else:
                self._ids.pop(_position(index))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Progression):
            return NotImplemented
        return self.name == other.name and len(self) == len(other) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        return bool(self._ids)

    def index(self, item: Any, start: int = 0, end: int | None = None) -> int:
        """The position of an id (`item`, LionAGI's name); ValueError when absent, or outside `[start:end]`
        as `list.index` says."""
        with self._lock:  # `with`: no interrupt lands between taking the lock and the block that releases it
            position = self._ids.index(item)
            if start == 0 and end is None:
                return position
            low, high, _ = slice(start, end).indices(len(self))
        if not low <= position < high:
            raise ValueError(f"{to_uuid(item)} is not in the progression between {start} and {end}")
        return position

    def count(self, ref: Any) -> int:
        """1 when the id is present, else 0: an ordered set holds each id once."""
        return 1 if to_uuid(ref).int in self._index() else 0

    def include(self, refs: Any) -> bool:
        with self._lock:
            return self._ids.include(refs)

    def extend(self, other: Progression) -> None:
        """Append another progression's ids in its order (LionAGI's `extend`); a ValueError, with nothing
        changed, when `other` is no Progression or holds an id already here."""
        if not isinstance(other, Progression):
            raise ValueError("Can only extend with another Progression.")
        self._append_all(list(other))

    def _append_all(self, ids: list[UUID]) -> None:
        with self._lock:
            known = self._ids._slot_of
            seen: set[int] = set()
            for ident in ids:
                if ident.int in known or ident.int in seen:
                    raise ValueError(f"{ident} is already in the progression")
                seen.add(ident.int)
            self._ids.include(ids)

    # LionAGI's operators, as an ordered set: `+` and `+=` refuse an id already present (ValueError,
    # nothing changed), `-` drops the ids given, `-=` removes ids that must be present.
    def __add__(self, other: Any) -> Progression:
        return Progression(order=[*self, *_refs(other)])

    def __radd__(self, other: Any) -> Progression:
        return Progression(order=[*_refs(other), *self])

    def __iadd__(self, other: Any) -> Self:
        self._append_all(_refs(other))
        return self

    def __sub__(self, other: Any) -> Progression:
        dropped = {ident.int for ident in _refs(other)}
        return Progression(order=[ident for ident in self if ident.int not in dropped])

    def __isub__(self, other: Any) -> Self:
        refs = _refs(other)
        with self._lock:
            missing = next((ident for ident in refs if ident.int not in self._ids._slot_of), None)
            if missing is not None:
                raise ValueError(f"{missing} is not in the progression")
            self._ids.exclude(refs)
        return self

    def append(self, ref: Any) -> None:
        with self._lock:
            self._ids.append(ref)

    def insert(self, index: int, ref: Any) -> None:
        with self._lock:
            self._ids.insert(index, ref)

    def replace(self, old: Any, new: Any) -> None:
        with self._lock:
            self._ids.replace(old, new)

    def exclude(self, refs: Any) -> bool:
        with self._lock:
            return self._ids.exclude(refs)

    def remove(self, ref: Any) -> None:
        with self._lock:
            self._ids.remove(ref)

    def pop(self, index: int = -1) -> UUID:
        with self._lock:
            return self._ids.pop(index)

    def popleft(self) -> UUID:
        with self._lock:
            return self._ids.popleft()

    def clear(self) -> None:
        with self._lock:
            self._ids.clear()
