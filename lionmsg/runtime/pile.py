"""Pile: UUID membership of elements with a type constraint, ordered by its own Progression (ADR-0006 D3)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import operator
import types
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, Union, get_args, get_origin, overload
from uuid import UUID

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from lionmsg.runtime.element import (
    Element,
    chosen_parts,
    element_class,
    library_loader,
    part_of_record,
    parts_later,
    record_error,
    record_of_part,
    records_of_parts,
)
from lionmsg.runtime.progression import Progression, assigned_back, to_uuid
from lionmsg.runtime.threadlock import CopiedUnderLock, ThreadLock

if TYPE_CHECKING:
    from typing_extensions import Self

    from lionmsg.runtime.progression import OrderedIds

__all__ = ["Pile", "changes_made", "out_of_step"]

T = TypeVar("T", bound=Element)
_MISSING: Any = object()


class Pile(CopiedUnderLock, Element, Generic[T]):
    """Elements by UUID, in the order of `progression`.

    `item_type` (a class or several) restricts what the pile accepts: instances of those classes, or with
    `strict_type=True` exactly those classes. Every change is checked in full before anything changes,
    so a rejected call leaves the pile as it was.

    Threads: every change, and every read that combines the items with their order, holds `thread_lock`
    (re-entrant; its progression's lock, so a change made through the progression excludes them too);
    `ref in pile` and `pile[id]` are one dict look-up each and take no lock. `async with pile:` holds the
    pile's asyncio lock for the running loop (`lock`), which excludes that loop's tasks only.
    """

    _built_by_its_constructor = True

    # Frozen, as in LionAGI: the admitted-class cache and the items already held follow it.
    strict_type: bool = Field(default=False, frozen=True)

    if TYPE_CHECKING:
        _items: dict[int, T]  # by the id's 128-bit integer: native hashing (UUID.__hash__ is a Python call)
        _progression: Progression
        _item_type: frozenset[type[Element]] | None
        _admitted: _AdmittedClasses
        _locks: _LoopLocks
        _lock: ThreadLock  # the progression's: see thread_lock
        _order: OrderedIds  # the progression's ids: one attribute load where `_progression._ids` is two

    def __init__(
        self,
        collections: Any = None,
        item_type: type[Element] | Iterable[type[Element]] | None = None,
        order: Iterable[Any] | None = None,
        strict_type: bool = False,
        *,
        progression: Progression | Iterable[Any] | None = None,
        **data: Any,
    ) -> None:
        # LionAGI's positional order (collections, item_type, order, strict_type), so calls port;
        # `progression` is the same argument as `order`, by the attribute's name.
        if order is not None:
            if progression is not None:
                raise ValueError("pass progression or order, not both")
            progression = order
        data["strict_type"] = strict_type  # a field of this class: pydantic validates it with the rest
        super().__init__(**data)
        types = None if item_type is None else _item_types(item_type)
        # Plain attributes, not pydantic PrivateAttrs: those cost microseconds per access.
        state: dict[str, Any] = {
            "_items": {},
            "_item_type": types,
            "_admitted": _AdmittedClasses(),
            "_locks": _LoopLocks(),
            "_progression": Progression(),
        }
        for name, value in state.items():
            object.__setattr__(self, name, value)
        listed: list[Any] = [] if collections is None else self._as_items(collections)
        # Records (any mapping), as model_validate(model_dump()) passes them: told apart by class, once.
        record_kinds = {kind for kind in {type(item) for item in listed} if _is_record_kind(kind)}
        if record_kinds:
            base = Element if types is None else tuple(types)
            listed = [_load_item(base, item) if type(item) in record_kinds else item for item in listed]
        items: list[T] = listed
        self._check(items)
        for item in items:
            if item.id.int in self._items:
                raise ValueError(f"{item.id} appears twice in the collection")
            self._items[item.id.int] = item
        order = [item.id for item in items]
        if progression is not None:
            if isinstance(progression, Progression):
                given = progression
            elif isinstance(progression, Mapping):  # a progression record
                given = Progression.from_dict(progression)
            else:
                given = Progression(order=progression)
            if len(given) != len(order) or any(ident.int not in self._items for ident in given):
                if not given and not isinstance(progression, Mapping):  # an empty one is not given, as LionAGI reads it
                    self._progression.include(order)
                else:
                    raise ValueError("the progression does not list exactly the pile's items")
            else:
                object.__setattr__(self, "_progression", given)
        else:
            self._progression.include(order)
        # Attribute loads on a pydantic model go through its __getattr__ hook, which keeps CPython from
        # specialising them (~400 instructions each): the progression's parts read on every change are
        # kept here too. The pile's progression is never replaced, and copies (shallow or deep, pickled)
        # keep them shared as the originals share them.
        object.__setattr__(self, "_lock", self._progression._lock)
        object.__setattr__(self, "_order", self._progression._ids)

    def __copy__(self) -> Self:
        # A shallow copy shares the storage, not the admitted-class cache: `model_copy(update=...)` may
        # give it another `strict_type`, under which the original's admissions do not hold (review bk).
        twin = super().__copy__()
        object.__setattr__(twin, "_admitted", _AdmittedClasses())
        return twin

    def __setstate__(self, state: dict[Any, Any]) -> None:
        super().__setstate__(state)
        # Pickled before the cache pickled empty, it may name refused classes (False): start afresh.
        object.__setattr__(self, "_admitted", _AdmittedClasses())
        if "_order" not in self.__dict__:  # pickled before piles kept their progression's ids beside it
            object.__setattr__(self, "_order", self._progression._ids)

    # -- reading -----------------------------------------------------------------------------------

    @property
    def progression(self) -> Progression:
        """The order of the items (the pile's own, shared, not a copy)."""
        return self._progression

    @progression.setter
    def progression(self, value: Progression) -> None:
        assigned_back("pile.progression", self._progression, value)

    @property
    def item_type(self) -> frozenset[type[Element]] | None:
        return self._item_type

    @property
    def thread_lock(self) -> ThreadLock:
        """The re-entrant thread lock every change holds (LionAGI's `Pile.lock`): hold it to make several
        calls one step for other threads. It is the progression's lock too."""
        return self._lock

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    def __iter__(self) -> Iterator[T]:  # type: ignore[override]
        return iter(self.values())  # the items as of now: another thread's removal cannot break it

    def __contains__(self, ref: Any) -> bool:
        if type(ref) is UUID:  # the common case first: one dict look-up
            return ref.int in self._items
        try:
            return to_uuid(ref).int in self._items
        except (TypeError, ValueError):
            if isinstance(ref, (list, tuple)):  # every one of them, as LionAGI reads it (none: True)
                return all(member in self for member in ref)
            return False

    def keys(self) -> list[UUID]:
        return list(self._progression)

    def values(self) -> list[T]:
        items = self._items
        with self._lock:
            try:
                return [items[ident.int] for ident in self._order]
            except KeyError:
                raise self._out_of_step() from None

    def items(self) -> list[tuple[UUID, T]]:
        items = self._items
        with self._lock:
            try:
                return [(ident, items[ident.int]) for ident in self._order]
            except KeyError:
                raise self._out_of_step() from None

    def _held(self, ident: UUID) -> T:
        """The item of an id the pile's order names (ValueError when the pile is out of step with it)."""
        try:
            return self._items[ident.int]
        except KeyError:
            raise self._out_of_step() from None

    def _out_of_step(self) -> ValueError:
        problem = out_of_step(self)
        return ValueError("the pile is out of step with its progression" if problem is None else problem[1])

    def get(self, ref: Any, default: Any = None) -> T | Any:
        """`pile[ref]`, or `default` where that raises for an item not there: an id (or its text, or an
        element) not held, a position out of range, or text that is no UUID. What is no reference at all
        (a bool, a type, a function) is the TypeError `pile[...]` raises. A slice is a new pile."""
        if _is_position(ref):  # positions, as LionAGI's get takes
            try:
                return self[ref]
            except IndexError:
                return default
        _refuse_several(ref, "get")
        try:
            return self._items.get(to_uuid(ref).int, default)
        except ValueError:
            return default

    @overload
    def __getitem__(self, key: int | UUID | str | Element) -> T: ...
    @overload
    def __getitem__(self, key: slice) -> Pile[T]: ...
    def __getitem__(self, key: Any) -> T | Pile[T]:
        """By UUID, UUID string or element (KeyError when absent), by position (IndexError), or a slice
        (a new pile with the same constraint)."""
        if type(key) is UUID:  # the common case first: one dict look-up
            found = self._items.get(key.int)
            if found is not None:
                return found
        if isinstance(key, slice):
            with self._lock:
                chosen = [self._held(ident) for ident in self._order[key]]
            return self._like(chosen)
        if _is_position(key):  # the progression reads an `__index__` object (a numpy int) as its int
            with self._lock:
                return self._held(self._progression[key])
        ident = to_uuid(key)
        try:
            return self._items[ident.int]
        except KeyError:
            raise KeyError(f"{ident} is not in the pile") from None

    def index(self, ref: Any) -> int:
        return self._progression.index(ref)

    def is_homogenous(self) -> bool:
        """Whether every item is an instance of the class of the first one added (LionAGI's name and rule,
        in the order items were added, as LionAGI's collections keep it: a subclass after its base counts
        as the same kind, a base after its subclass does not)."""
        with self._lock:
            items = list(self._items.values())
        return len(items) < 2 or all(isinstance(item, type(items[0])) for item in items)

    @overload
    def filter_by_type(
        self,
        item_type: Any,
        strict_type: bool = ...,
        as_pile: Literal[False] = ...,
        reverse: bool = ...,
        num_items: int | None = ...,
    ) -> list[T]: ...

    @overload
    def filter_by_type(
        self,
        item_type: Any,
        strict_type: bool,
        as_pile: Literal[True],
        reverse: bool = ...,
        num_items: int | None = ...,
    ) -> Pile[T]: ...

    @overload
    def filter_by_type(
        self,
        item_type: Any,
        strict_type: bool = ...,
        *,
        as_pile: Literal[True],
        reverse: bool = ...,
        num_items: int | None = ...,
    ) -> Pile[T]: ...

    def filter_by_type(
        self,
        item_type: Any,
        strict_type: bool = False,
        as_pile: bool = False,
        reverse: bool = False,
        num_items: int | None = None,
    ) -> list[T] | Pile[T]:
        """The items of the given classes in order (last first when `reverse`), at most `num_items` of
        them: instances of those classes, or exactly those classes when `strict_type`. A list, or with
        `as_pile` a new pile restricted to those classes (LionAGI 0.36.0's signature and defaults).

        `item_type` is a class, a union (`A | B`) or a list, tuple or set of classes; anything else is a
        TypeError, as is a `num_items` that is not a whole number (a negative one is a ValueError).
        """
        wanted = _item_types(item_type)
        if num_items is not None:
            # Any integer (numpy's too), but not a bool: filter_by_type(X, True, True, False, True) is a slip.
            if isinstance(num_items, bool) or not hasattr(type(num_items), "__index__"):
                raise TypeError(f"num_items must be an int or None, got {type(num_items).__name__}")
            num_items = operator.index(num_items)
            if num_items < 0:
                raise ValueError(f"num_items must not be negative, got {num_items}")
        chosen: list[T] = []
        classes = tuple(wanted)
        if num_items != 0:  # LionAGI returns every match for 0; none is what was asked for
            items = self._items
            with self._lock:
                order = reversed(self._progression) if reverse else iter(self._progression)
                try:
                    for ident in order:
                        item = items[ident.int]
                        if type(item) in wanted if strict_type else isinstance(item, classes):
                            chosen.append(item)
                            if len(chosen) == num_items:
                                break
                except KeyError:
                    raise self._out_of_step() from None
        if as_pile:
            return Pile(chosen, item_type=wanted, strict_type=strict_type)
        return chosen

    # -- changing ----------------------------------------------------------------------------------

    def include(self, items: Any) -> bool:
        """Append the items whose ids are not present yet; an item whose id is present takes the held
        one's place (as LionAGI's `include`, and `update`, do). True when anything changed: an item added,
        or a held one replaced by another object (including the object held is no change)."""
        lock = self._lock
        if self._admitted.get(type(items)):  # the common case, kept cheap: an element of an admitted class
            ident = items.id
            key = ident.int
            # `with`, as everywhere a thread lock is taken: between a bare acquire() and its `try`, a Ctrl-C
            # (any exception a signal handler raises) left the lock held for good (review bl F2).
            with lock:
                held = self._items.get(key)
                if held is not None:
                    self._items[key] = items
                    return held is not items
                order = self._order  # straight into the order's storage
                if not self._orders_only_its_own():
                    slot_of = order._slot_of
                    if key in slot_of:  # ordered behind the pile's back: it would be there twice
                        raise self._out_of_step()
                    slot_of[key] = len(order._slots)
                order._slots.append(ident)
                self._items[key] = items
                return True
        new = self._as_items(items)
        self._check(new)
        changed = False
        with lock:
            self._refuse_ordered_strangers(new)
            for item in new:
                held = self._items.get(item.id.int)
                if held is None:
                    self._order_absent(item.id)
                self._items[item.id.int] = item
                changed = changed or held is not item
        return changed

    def _refuse_ordered_strangers(self, new: list[T]) -> None:
        """The pile's out-of-step ValueError, before anything changes, when an item to add carries an id
        its order already names (put there behind the pile's back): appending it would fail midway."""
        if self._orders_only_its_own():  # no strangers
            return
        slot_of, held = self._order._slot_of, self._items
        if any(item.id.int not in held and item.id.int in slot_of for item in new):
            raise self._out_of_step()

    def update(self, items: Any) -> None:
        """Add or replace: an item whose id is present replaces the old one at the same position."""
        with self._lock:
            self._update_holding_lock(items)

    def _update_holding_lock(self, items: Any) -> None:
        """`update` for a caller that holds `thread_lock` already (a manager's add does): taking it again
        costs as much as the rest of the update of one item."""
        if self._admitted.get(type(items)):  # the common case, kept cheap: an element of an admitted class
            ident = items.id
            held = self._items  # read once: an attribute of a pydantic model is a slow read
            if ident.int not in held:
                order = self._order
                if not order._mapped and len(order._slots) == len(held):  # _orders_only_its_own, inline
                    order._slots.append(ident)  # (the usual add's road): the order lacks the id
                else:
                    try:
                        order.append(ident)  # straight to the storage: one call, not two
                    except ValueError:  # ordered already, behind the pile's back: say so, as include() does
                        raise self._out_of_step() from None
            held[ident.int] = items
            return
        new = self._as_items(items)
        self._check(new)
        self._refuse_ordered_strangers(new)
        for item in new:
            if item.id.int not in self._items:
                self._order_absent(item.id)
            self._items[item.id.int] = item

    def _order_absent(self, ident: UUID) -> None:
        """Append to the order the id of an item the pile lacks (the caller holds the lock and has refused
        ids ordered behind the pile's back: `_refuse_ordered_strangers`)."""
        if self._orders_only_its_own():  # so it lacks the id, and needs no index
            self._order._slots.append(ident)
        else:
            self._order.append(ident)

    def _orders_only_its_own(self) -> bool:
        """Whether the order has no index and holds as many ids as the pile holds items: then only this
        pile has changed it (every other change makes the index first, see OrderedIds), so it orders
        exactly the pile's items, and an item the pile lacks is not in it. The count catches what would
        break that: an append or removal cut short between the order and the items, or one progression
        given to two piles (O(1): unindexed storage has no head room or gaps). The caller holds the lock."""
        order = self._order
        return not order._mapped and len(order._slots) == len(self._items)

    def insert(self, index: int, item: T) -> None:
        """Insert an item before position `index`; ValueError when the pile holds its id (or its order
        names it behind the pile's back: out of step)."""
        self._check([item])
        with self._lock:
            if item.id.int in self._items:
                raise ValueError(f"{item.id} is already in the pile")
            try:
                self._progression.insert(index, item.id)
            except ValueError:  # ordered already, behind the pile's back: say so, as include() does
                raise self._out_of_step() from None
            self._items[item.id.int] = item

    def replace(self, old: Any, new: T) -> None:
        """Put `new` at the position of `old` (O(1)); KeyError when `old` is absent (as for `pop`), and
        ValueError when `new`'s id belongs to another item already in the pile."""
        self._check([new])
        old_id = to_uuid(old)
        with self._lock:
            if old_id.int not in self._items:
                raise KeyError(f"{old_id} is not in the pile")
            if new.id != old_id and new.id.int in self._items:
                raise ValueError(f"{new.id} is already in the pile")
            try:
                self._progression.replace(old_id, new.id)
            except ValueError:  # `old` held but left out of the order, or `new` ordered but not held
                raise self._out_of_step() from None
            del self._items[old_id.int]
            self._items[new.id.int] = new

    def exclude(self, refs: Any) -> bool:
        """Remove the items (or ids) present; True when any was removed."""
        return bool(self.take(refs))

    def take(self, refs: Any) -> list[T]:
        """Remove the items (or ids) present and return them in the order given; absent ones are skipped."""
        pop = self._items.pop
        taken: list[T] = []
        removed: list[UUID] = []
        ids = self._as_ids(refs)
        with self._lock:
            for ident in ids:
                item = pop(ident.int, None)
                if item is not None:
                    taken.append(item)
                    removed.append(ident)
            if removed:
                self._order.exclude(removed)
        return taken

    def pop(self, ref: Any, default: Any = _MISSING) -> T | Any:
        """Remove and return an item, named as `pile[...]` names it: by id (or its text, or an element),
        by position, or a slice (a new pile of the items taken). Without a default, an absent id is a
        KeyError, a position out of range an IndexError and text that is no UUID a ValueError; with one,
        each of those returns it. What is no reference at all (a bool, a type, a function) is the
        TypeError `pile[...]` raises, default or not. Nothing changes unless an item is returned."""
        if _is_position(ref):
            with self._lock:  # the item found is the item taken
                try:
                    found = self[ref]
                except IndexError:
                    if default is _MISSING:
                        raise
                    return default
                # Told apart by the reference, not by what it found: an item may be a pile itself.
                self.take(found.keys() if isinstance(ref, slice) else [found.id])
            return found
        _refuse_several(ref, "pop")
        try:
            ident = to_uuid(ref)
        except ValueError:
            if default is _MISSING:
                raise
            return default
        with self._lock:
            if ident.int not in self._items:
                if default is _MISSING:
                    raise KeyError(f"{ident} is not in the pile")
                return default
            try:
                self._progression.remove(ident)
            except ValueError:  # held, but left out of the order behind the pile's back
                raise self._out_of_step() from None
            return self._items.pop(ident.int)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._progression.clear()

    # LionAGI's names for the same operations.
    def append(self, item: T) -> None:
        """`update(item)`: add it, or replace the item with its id at the same position."""
        self.update(item)

    def remove(self, ref: Any) -> None:
        """Remove one item (or the item with this id); KeyError when absent. A position is a TypeError:
        `pop(index)` removes by position."""
        if _is_position(ref) or isinstance(ref, bool):
            raise TypeError("Pile.remove takes an item or an id, not a position")
        _refuse_several(ref, "remove", "an item, an id or its text")
        self.pop(ref)

    def is_empty(self) -> bool:
        return not self._items

    def size(self) -> int:
        return len(self._items)

    # -- the async lock ----------------------------------------------------------------------------

    @property
    def lock(self) -> asyncio.Lock:
        """The pile's lock for the running event loop (a lock belongs to one loop)."""
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            # Forget the locks of finished loops (closed, or neither running nor holding the lock nor
            # queueing for it: an unclosed loop its owner dropped would stay alive here with its
            # descriptors), never one a loop may hold or be about to: that let a second holder in and
            # made its holder's release fail (a waiter woken in a stopped loop's last turn takes the
            # lock when that loop runs again). Each loop has its own lock, so it excludes the tasks of
            # one loop only (README: threads).
            for other, held in list(self._locks.items()):  # list(): atomic against another thread's turn
                queued = getattr(held, "_waiters", None)  # asyncio.Lock's queue (None until first used)
                if other.is_closed() or (not other.is_running() and not held.locked() and not queued):
                    self._locks.pop(other, None)
            lock = self._locks[loop] = asyncio.Lock()
        return lock

    @property
    def async_lock(self) -> asyncio.Lock:
        """`lock` by LionAGI's name for it: it excludes the tasks of the running loop only."""
        return self.lock

    async def __aenter__(self) -> Self:
        # The asyncio lock only: a thread lock held across the block's awaits would keep out the worker
        # threads the block itself may wait for (`asyncio.to_thread`), and every thread while its loop
        # is not running (README: threads).
        await self.lock.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.lock.release()

    # -- records -----------------------------------------------------------------------------------

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler, info: Any) -> dict[str, Any]:
        with self._lock:  # the items and their order as of one moment
            if len(self._order) != len(self._items):  # a record would leave a held item out
                raise self._out_of_step()
            record: dict[str, Any] = handler(self)
            handled = set(record)  # the keys pydantic made (its options applied), before the parts
            if not parts_later(info):
                self._add_part_records(record, info.mode)
            record["progression"] = record_of_part(self._progression, info.mode, "$.progression")
        record["item_type"] = None if self._item_type is None else sorted(t.__name__ for t in self._item_type)
        return chosen_parts(record, info, handled)

    def _unchecked_record(self, mode: str) -> dict[str, Any]:
        with self._lock:  # the record and its parts' records as of one moment
            if len(self._order) != len(self._items):  # refused before pydantic would wrap it
                raise self._out_of_step()
            return super()._unchecked_record(mode)

    def _add_part_records(self, record: dict[str, Any], mode: str) -> None:
        record["collections"] = records_of_parts(self, mode, "$.collections")

    @classmethod
    def _prepare_record(cls, record: dict[str, Any]) -> None:
        names = record.get("item_type")
        if names is not None:
            if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
                raise record_error(
                    cls, ("item_type",), "item_type must be a non-empty list of class names or null", names
                )
            types = [element_class(Element, name) for name in names]
            missing = [name for name, found in zip(names, types, strict=True) if found is None]
            if missing:
                raise record_error(cls, ("item_type",), f"unknown item class(es) {missing}", names)
            record["item_type"] = types
        base = Element if names is None else tuple(record["item_type"])
        strict = record.get("strict_type", False)
        if type(strict) is not bool:  # pydantic would read 1 or "yes" as True; a record holds a boolean
            raise record_error(cls, ("strict_type",), "strict_type must be a boolean", strict)
        items = record.get("collections")
        if items is None:  # null or absent: no items (a falsy non-list, {} or 0, is no list of records)
            items = []
        if not isinstance(items, list):
            raise record_error(cls, ("collections",), "collections must be a list of records", items)
        for index, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise record_error(cls, ("collections", index), "each item of collections must be a record", item)
        loaded = [
            part_of_record(cls, ("collections", index), functools.partial(_load_item, base, item))
            for index, item in enumerate(items)
        ]
        if strict and names is not None:  # each item exactly of a listed class, as the pile would require
            for index, item in enumerate(loaded):
                if type(item) not in record["item_type"]:
                    accepted = ", ".join(sorted(names))
                    message = f"this pile accepts exactly {accepted} (strict_type); got {type(item).__name__}"
                    loc = ("collections", index, "metadata", "lion_class")
                    raise record_error(cls, loc, message, item.class_name())
        record["collections"] = loaded
        progression = record.get("progression")
        if isinstance(progression, Mapping):
            record["progression"] = part_of_record(
                cls, ("progression",), functools.partial(Progression.from_dict, progression)
            )
            if loaded and not record["progression"]:  # an empty list is "not given"; an empty record is wrong
                message = "the progression does not list exactly the pile's items"
                raise record_error(cls, ("progression",), message, progression)
        elif progression is not None:
            raise record_error(cls, ("progression",), "progression must be a progression record or null", progression)

    # -- helpers -----------------------------------------------------------------------------------

    def _like(self, items: list[T]) -> Pile[T]:
        return Pile(items, item_type=self._item_type, strict_type=self.strict_type)

    def _as_items(self, items: Any) -> list[T]:
        if isinstance(items, Element):
            return [items]  # type: ignore[list-item]
        if isinstance(items, Mapping):  # elements by id, as LionAGI's collections hold them
            if "id" in items or "metadata" in items:  # not that: a record, whose values are no elements
                raise TypeError("expected an element or elements, got a record (a dict): load it with from_dict")
            items = items.values()
        if not isinstance(items, Iterable) or isinstance(items, (str, bytes)):
            raise TypeError(f"expected an element or elements, got {type(items).__name__}")
        return list(items)

    def _as_ids(self, refs: Any) -> list[UUID]:
        # A list (the usual argument) skips isinstance(refs, Element): an ABC check, slow for a list.
        if type(refs) is not list:
            # One reference: an element, a UUID or its text, or anything else whose `id` is a UUID or its
            # text (as `pile[x]` reads it, review bp); else a collection of them, or the TypeError of
            # what is neither.
            one = isinstance(refs, (Element, UUID, str, bytes)) or not isinstance(refs, Iterable)
            ident = getattr(refs, "id", None)
            if one or isinstance(ident, UUID):
                return [to_uuid(refs)]
            if isinstance(ident, str):
                with contextlib.suppress(ValueError):  # an id that is no UUID text: a collection, maybe
                    return [UUID(ident)]
        return [ref if type(ref) is UUID else to_uuid(ref) for ref in refs]  # a UUID needs no call

    def _check(self, items: Sequence[Any]) -> None:
        """Every item must be an element this pile admits; raises before anything changes."""
        for item in items:
            kind = type(item)
            if kind in self._admitted:
                continue
            if not self._admits(kind):
                # Not remembered: a refused call leaves the pile as it was, its pickle included (review bk F3)
                raise TypeError(f"this pile accepts {self._accepted()}; got {kind.__name__}")
            self._admitted[kind] = True

    def _accepted(self) -> str:
        """What the pile accepts, in words (as a record's refusal names it, for a strict pile)."""
        if self._item_type is None:
            return "elements"
        names = ", ".join(sorted(kind.__name__ for kind in self._item_type))
        return f"exactly {names} (strict_type)" if self.strict_type else names

    def _admits(self, kind: type) -> bool:
        if not issubclass(kind, Element):
            return False
        if self._item_type is None:
            return True
        if self.strict_type:
            return kind in self._item_type
        return issubclass(kind, tuple(self._item_type))


def _is_record_kind(kind: type) -> bool:
    """Whether collection entries of this class are records to load: a dict, or any other mapping (an
    OrderedDict from `json.loads(text, object_pairs_hook=OrderedDict)`, a mappingproxy), as from_dict
    reads one."""
    return kind is dict or issubclass(kind, Mapping)


def _load_item(base: type[Element] | tuple[type[Element], ...], record: Any) -> Element:
    """A pile item from its record, loaded as the class it names among the pile's item types, by the
    library's loader (`library_loader`: a user's from_dict override is left out, as wherever a record
    names its class; the loader hands over to the named class's)."""
    if not isinstance(record, Mapping):
        raise TypeError(f"a pile item record must be a mapping, got {type(record).__name__}")
    # In the order of their names, which the pile's record lists: a set's order would change what a
    # wrong name's error names between processes.
    candidates = sorted(base, key=lambda kind: kind.__name__) if isinstance(base, tuple) else [base]
    metadata = record.get("metadata")
    named = metadata.get("lion_class") if isinstance(metadata, Mapping) else None
    names_no_class = "metadata" not in record or (isinstance(metadata, Mapping) and "lion_class" not in metadata)
    if names_no_class and len(candidates) > 1:  # (a malformed name is its loader's error, as below)
        # Any of them could claim it, and loading it as the wrong one would silently change what it is.
        names = ", ".join(kind.__name__ for kind in candidates)
        message = f"a record in a pile of several item types ({names}) must name its class in metadata.lion_class"
        raise record_error(Pile, ("metadata", "lion_class"), message, named)
    chosen = candidates[0]  # the one class; or, for a name none of them knows, the one whose loader refuses it
    if isinstance(named, str):
        chosen = next((candidate for candidate in candidates if element_class(candidate, named) is not None), chosen)
    return library_loader(chosen)(record)


def _item_types(item_type: Any) -> frozenset[type[Element]]:
    """`item_type` as a set of element classes: one class, a union of them (`A | B`) or an iterable of
    at least one (classes, or their names as a record writes them); TypeError otherwise (a pile
    restricted to no class could hold nothing, and its record would not load)."""
    if isinstance(item_type, types.UnionType) or get_origin(item_type) is Union:
        kinds: Any = get_args(item_type)
    else:
        kinds = [item_type] if isinstance(item_type, type) else item_type
    if isinstance(kinds, (str, bytes)) or not isinstance(kinds, Iterable):
        raise TypeError(f"item_type must be an element class or an iterable of them, got {item_type!r}")
    kinds = [element_class(Element, kind) or kind if type(kind) is str else kind for kind in kinds]
    chosen = frozenset(kinds)
    if not chosen or not all(isinstance(kind, type) and issubclass(kind, Element) for kind in chosen):
        raise TypeError(f"item_type must be an element class or an iterable of them, got {item_type!r}")
    return chosen


def out_of_step(pile: Pile[Any]) -> tuple[UUID, str] | None:
    """None when the pile's progression orders exactly the items it holds; else an id that breaks it and
    why. The progression is shared (as LionAGI's), so code may add or remove ids through it that the
    pile's own methods would not; iteration and the record writers then refuse (ValueError) rather than
    fail on a missing item or leave a held one out."""
    items, ids = pile._items, pile._order
    with pile._lock:
        unheld = next((ident for ident in ids if ident.int not in items), None)
        if unheld is not None:
            found, detail = unheld, f"its progression orders {unheld}, which the pile does not hold"
        elif len(ids) != len(items):  # (the index's count, or the slots' while it has none: no index made)
            unordered: UUID | None = next((item.id for key, item in items.items() if key not in ids._slot_of), None)
            if unordered is not None:
                found, detail = unordered, f"it holds {unordered}, which its progression does not order"
            else:  # every item ordered, and more ids than items: one of them twice
                found = _ordered_twice(ids)
                detail = f"its progression orders {found} twice"
        else:
            return None
    return found, (
        f"the pile is out of step with its progression: {detail} (changed through pile.progression; add, "
        "remove and reorder items through the pile)"
    )


def _ordered_twice(ids: OrderedIds) -> UUID:
    """The first id an order holds twice (the caller knows there is one)."""
    seen: set[int] = set()
    for ident in ids:
        if ident.int in seen:
            return ident
        seen.add(ident.int)
    raise AssertionError("no id is ordered twice")


def changes_made(pile: Pile[Any]) -> tuple[int, int]:
    """A mark of the changes the pile's membership and order have seen, whether made through the pile or
    its progression: two marks taken from one pile are equal only if nothing changed between them (the
    count of changes other than appends, which only grows, and the length, which appends grow). An
    item replaced under its own id is not a change here: like content edited in place, it changes what
    a message says, not which messages there are."""
    ids = pile._order
    return ids._changes, len(ids)


def _refuse_several(ref: Any, method: str, one: str = "an id, its text, an element, a position or a slice") -> None:
    """A TypeError for a list (tuple, set) of references given where one is taken: LionAGI's `get` and `pop`
    take several and return a list, so its default, returned here for a reference that names no item,
    would hide that the call did something else."""
    if isinstance(ref, (list, tuple, set, frozenset)):
        raise TypeError(
            f"Pile.{method} takes one reference ({one}), got a {type(ref).__name__}: for several, call it for each"
        )


def _is_position(ref: Any) -> bool:
    """Whether `ref` names items by position: a slice, an int or an object with `__index__` (a numpy
    integer), never a bool (True would silently mean 1). UUIDs, their text and elements have none."""
    if isinstance(ref, (int, slice)):
        return not isinstance(ref, bool)
    return hasattr(type(ref), "__index__")


class _AdmittedClasses(dict[type, bool]):
    """The classes a pile has admitted (each True), so that the next item of one is let in at once. A
    cache, not the pile's state: a copy or an unpickled pile starts empty and fills its own. Pickled, it
    would name classes the pile no longer holds (one defined in a function cannot be pickled at all), and
    copied, it would be read while a change outside the lock (the check before it) adds to it."""

    def __reduce__(self) -> tuple[type[_AdmittedClasses], tuple[()]]:
        return (_AdmittedClasses, ())

    def __deepcopy__(self, memo: dict[int, Any]) -> _AdmittedClasses:
        return _AdmittedClasses()


class _LoopLocks(dict[asyncio.AbstractEventLoop, asyncio.Lock]):
    """A pile's lock per event loop. A copy or an unpickled pile starts with none: an event loop (and
    a lock bound to one) can be neither copied nor pickled, and a copy is another pile with its own lock."""

    def __reduce__(self) -> tuple[type[_LoopLocks], tuple[()]]:
        return (_LoopLocks, ())
