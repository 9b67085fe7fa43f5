"""List fields whose empty list is made on first use.

An Instruction's content has three list fields (context, tool schemas, images), usually two of them
empty, and an empty list costs 56 bytes: a tenth of a stored message. A generated content class whose
schema gives a list field the default `[]` keeps that field's slot at `NOT_MADE` while the list would be
empty and nobody has asked for it. The public attribute (`content.images`) makes the list on first
read, so code that appends to it in place keeps what it appended; the library's own code reads and
writes the slot itself, under the name `_raw_<field>` (as fast as any slot), where `NOT_MADE` reads as
an empty sequence (an empty tuple): falsy, of length 0, iterating nothing. The class's `repr`, equality,
pickling and copies (`copy`, `deepcopy`) read the slots too, so logging, comparing or copying content
makes no list either, and give what they gave before (an unmade field shows and compares as `[]`);
`dataclasses.replace`, `asdict` and `fields`-driven code read the public attribute and make it.
"""

from __future__ import annotations

import dataclasses
import reprlib
import threading
from collections.abc import Callable
from types import MemberDescriptorType
from typing import Any, TypeVar

__all__ = ["NOT_MADE", "LazyList", "NotMade", "keep_lazy_in_subclass", "lazy_lists"]

_Class = TypeVar("_Class", bound=type)


class NotMade(tuple[Any, ...]):
    """What a lazy list field's slot holds until its list is made: an empty sequence that is no list
    (the one instance is `NOT_MADE`; copies and pickles of it are that instance). An empty tuple of its
    own class, so its truth, length and iteration are the interpreter's own, never a Python-level call:
    the library's code asks whether such a field holds anything on every write and every copy."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NOT_MADE"

    def __reduce__(self) -> str:
        return "NOT_MADE"  # the module attribute: unpickling gives the one instance

    def __copy__(self) -> NotMade:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> NotMade:
        return self


NOT_MADE = NotMade()

# Held while a list is made and while a field is assigned: two threads reading an unmade field at once
# get the same list (each making its own would lose what one of them appends), and an assignment made
# meanwhile is never overwritten by the new empty list. Only those two steps take it, never a read of a
# list made already. No Python code of anyone else's runs while it is held (the new list is made before,
# a replaced value freed after: freeing runs finalisers), and it is re-entrant, for a signal handler
# that lands inside and touches such a field.
_MAKING = threading.RLock()


class LazyList:
    """The public attribute of a lazy list field, over the field's slot."""

    __slots__ = ("_delete", "_get", "_set")

    def __init__(self, slot: MemberDescriptorType) -> None:
        self._get: Callable[[Any], Any] = slot.__get__
        self._set: Callable[[Any, Any], None] = slot.__set__
        self._delete: Callable[[Any], None] = slot.__delete__

    def __get__(self, content: Any, owner: type | None = None) -> Any:
        if content is None:
            return self
        value = self._get(content)
        if value is NOT_MADE:
            made: list[Any] = []
            with _MAKING:
                value = self._get(content)
                if value is NOT_MADE:
                    self._set(content, made)
                    value = made
        return value

    def __set__(self, content: Any, value: Any) -> None:
        with _MAKING:
            replaced = self._held(content)
            self._set(content, value)
        del replaced  # freed here, outside the lock

    def __delete__(self, content: Any) -> None:
        with _MAKING:
            replaced = self._held(content)
            self._delete(content)
        del replaced

    def _held(self, content: Any) -> Any:
        try:
            return self._get(content)
        except AttributeError:  # not set yet: the dataclass's __init__ assigns it first
            return None


def lazy_lists(*names: str) -> Callable[[_Class], _Class]:
    """Class decorator, above `@dataclass(slots=True)`: the named list fields become lazy (`LazyList`
    on the public name, the slot itself as `_raw_<name>`), and the dataclass's `repr` and equality, and
    the instances' pickled state, read the slots."""

    def install(cls: _Class) -> _Class:
        for name in names:
            slot = cls.__dict__.get(name)
            if type(slot) is not MemberDescriptorType:
                raise TypeError(f"{cls.__name__}.{name} is no slot: lazy lists need @dataclass(slots=True) under them")
            _make_lazy(cls, name, slot)
        cls.__repr__ = _repr  # type: ignore[assignment]
        cls.__eq__ = _eq  # type: ignore[assignment]
        cls.__getstate__ = _getstate  # type: ignore[attr-defined]
        cls.__setstate__ = _setstate  # type: ignore[attr-defined]
        return cls

    return install


def keep_lazy_in_subclass(cls: type) -> None:
    """For `__init_subclass__`: a subclass that declares a slot of its own under a lazy field's name
    (Python 3.10's `@dataclass(slots=True)` declares every field's, inherited ones too) would hide the
    lazy attribute behind that slot, and the inherited code, which reads `_raw_<name>`, would read
    the base class's slot, never set; the subclass's slot is made lazy in its turn."""
    for name, slot in list(vars(cls).items()):
        if type(slot) is MemberDescriptorType and any(
            isinstance(vars(base).get(name), LazyList) for base in cls.__mro__[1:]
        ):
            _make_lazy(cls, name, slot)


def _make_lazy(cls: type, name: str, slot: MemberDescriptorType) -> None:
    setattr(cls, f"_raw_{name}", slot)
    setattr(cls, name, LazyList(slot))


# -- what the decorator installs: the dataclass's repr and equality, and the pickled state, read the slots
# of lazy fields (an unmade one as []), so none of them makes a list.

_READERS: dict[type, dict[str, str]] = {}
_SHOWN: dict[type, tuple[tuple[str, str], ...]] = {}
_COMPARED: dict[type, tuple[tuple[str, str], ...]] = {}


def _readers(cls: type) -> dict[str, str]:
    """Per slot of the class and its bases: the attribute to read it by (`_raw_<name>` for a lazy field)."""
    readers = _READERS.get(cls)
    if readers is None:
        readers = {}
        for klass in reversed(cls.__mro__):
            declared = vars(klass).get("__slots__", ())
            for name in (declared,) if isinstance(declared, str) else declared:
                if name not in ("__dict__", "__weakref__"):
                    readers[name] = f"_raw_{name}" if isinstance(getattr(cls, name, None), LazyList) else name
        _READERS[cls] = readers
    return readers


def _fields(cls: type, table: dict[type, tuple[tuple[str, str], ...]], kind: str) -> tuple[tuple[str, str], ...]:
    """The fields the dataclass shows (`kind` "repr") or compares ("compare"), with their readers."""
    chosen = table.get(cls)
    if chosen is None:
        readers = _readers(cls)
        chosen = table[cls] = tuple((f.name, readers[f.name]) for f in dataclasses.fields(cls) if getattr(f, kind))
    return chosen


def _value(content: Any, reader: str) -> Any:
    value = getattr(content, reader)
    return [] if value is NOT_MADE else value


@reprlib.recursive_repr()
def _repr(content: Any) -> str:
    shown = (f"{name}={_value(content, reader)!r}" for name, reader in _fields(type(content), _SHOWN, "repr"))
    return f"{type(content).__qualname__}({', '.join(shown)})"


def _eq(content: Any, other: Any) -> Any:
    if other.__class__ is not content.__class__:
        return NotImplemented
    compared = _fields(type(content), _COMPARED, "compare")
    # Tuples, as the dataclass compares them: a value is equal to itself (a NaN too).
    return tuple(_value(content, reader) for _, reader in compared) == tuple(
        _value(other, reader) for _, reader in compared
    )


def _getstate(content: Any) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    # The default state's shape (an instance dict, if any, and the slots that are set), each slot read
    # as it is: NOT_MADE pickles and copies as itself.
    slots = {}
    for name, reader in _readers(type(content)).items():
        try:
            slots[name] = getattr(content, reader)
        except AttributeError:  # never set
            continue
    return getattr(content, "__dict__", None) or None, slots


def _setstate(content: Any, state: Any) -> None:
    values, slots = state if isinstance(state, tuple) else (state, None)
    if values:
        content.__dict__.update(values)
    readers = _readers(type(content))
    for name, value in (slots or {}).items():
        setattr(content, readers.get(name, name), value)
