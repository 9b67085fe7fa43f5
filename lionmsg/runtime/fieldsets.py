"""Fields sets that many messages share.

Pydantic keeps, per model instance, the set of field names given explicitly (`model_fields_set`, what
`exclude_unset` dumps read). For messages that set is one of a handful (every field, for a loaded record;
`content` plus the routing given, for a built one), yet one per message costs 216 B (728 B with all eight
names) and one more object for every full pass of the garbage collector to walk. Sharing them took a built
Instruction from 1,499 to 1,283 B, and made a `to_dict` + `from_dict` round trip of 100k records take a fifth
less time (the collector's passes, mostly).

So the fast roads (`lionmsg.runtime.fastpath`) give a message a `SharedFieldsSet`, one per distinct set
of names. Pydantic only ever adds a name to a fields set (on assignment, and on `model_copy(update=...)`,
to a copy); adding one already there changes nothing. A message about to record a name its shared set
lacks takes a private `set` first (`mark_field_set`, and `MessageBehaviour.__setattr__` before
pydantic's assignment), so no message's fields set ever changes through another; two threads assigning
to one message take the same private set. A shared set refuses every change through its own methods
(TypeError), so code that edits `model_fields_set` in place cannot reach other messages either; its copies
(`copy`, `deepcopy`, pickling, `set.copy`) are plain sets. Code that goes around both guards reaches every
message sharing the set, and the messages made after: `set.add(shared, name)` called on the set type, or
pydantic's `BaseModel.__setattr__` or `validate_assignment` called directly on a message (skipping its
`__setattr__`), which add the name in C.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any, NoReturn

from pydantic import BaseModel

__all__ = ["SharedFieldsSet", "mark_field_set", "own_fields_set", "set_fields_set", "shared_fields_set"]

_SHARED_REFUSAL = (
    "this fields set is shared by many messages and cannot change in place; "
    "assign the field on the message (or set __pydantic_fields_set__ to a new set)"
)


class SharedFieldsSet(set[str]):
    """A `model_fields_set` shared by messages: a set that refuses to change (see the module)."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(_SHARED_REFUSAL)

    def add(self, name: str) -> None:
        if name not in self:  # adding a name already there changes nothing: pydantic does it freely
            self._refuse()

    def __init__(self, names: Iterable[str] = ()) -> None:
        # Called on a built set, set.__init__ would empty and refill it (the empty shared set too): the
        # sets are filled by `shared_fields_set` alone, through set.__init__.
        self._refuse()

    discard = remove = pop = clear = update = _refuse
    difference_update = intersection_update = symmetric_difference_update = _refuse
    __ior__ = __iand__ = __isub__ = __ixor__ = _refuse

    # Copies are the copier's own, hence plain sets (set.copy() already makes one).
    def __copy__(self) -> set[str]:
        return set(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> set[str]:
        return set(self)

    def __reduce__(self) -> tuple[type[set[str]], tuple[list[str]]]:
        return set, (list(self),)


_SHARED: dict[frozenset[str], SharedFieldsSet] = {}


def shared_fields_set(names: Iterable[str]) -> SharedFieldsSet:
    """The one shared fields set holding exactly `names`."""
    key = frozenset(names)
    found = _SHARED.get(key)
    if found is None:
        made = SharedFieldsSet.__new__(SharedFieldsSet)
        set.__init__(made, key)
        found = _SHARED.setdefault(key, made)
    return found


set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
"""Give a model a fields set: BaseModel's slot, set through its descriptor (BaseModel.__setattr__ would
treat the name as a field's)."""


def own_fields_set(model: BaseModel) -> set[str]:
    """The model's fields set, made its private copy first when it is a shared one."""
    fields_set = model.__pydantic_fields_set__
    if type(fields_set) is SharedFieldsSet:
        # Under a lock, looked at again: two threads that each copied the shared set would each install
        # their copy, and the name recorded in the first would be lost with it.
        with _OWNING:
            fields_set = model.__pydantic_fields_set__
            if type(fields_set) is SharedFieldsSet:
                fields_set = set(fields_set)
                set_fields_set(model, fields_set)
    return fields_set


_OWNING = threading.Lock()  # taken once per message at most: its first assignment of a name not given


def mark_field_set(model: BaseModel, name: str) -> None:
    """Record that `name` was given explicitly (what pydantic's assignment records), never in a set
    other messages share."""
    if name not in model.__pydantic_fields_set__:
        own_fields_set(model).add(name)
