"""List fields whose empty list is made on first use.

An Instruction's content has three list fields (context, tool schemas, images), usually two of them
empty, and an empty list costs 56 bytes: a tenth of a stored message. A generated content class whose
schema gives a list field the default `[]` keeps that field's slot at `NOT_MADE` while the list would be
empty and nobody has asked for it. The public attribute (`content.images`) makes the list on first
read, so code that appends to it in place keeps what it appended; the library's own code reads and
writes the slot itself, under the name `_raw_<field>` (as fast as any slot), where `NOT_MADE` reads as
an empty sequence (an empty tuple): falsy, of length 0, iterating nothing. Equality, `repr`, pickling and
`dataclasses.replace` read the public attribute, so they see an empty list.
"""

from __future__ import annotations

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
# list made already.
_MAKING = threading.Lock()


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
            with _MAKING:
                value = self._get(content)
                if value is NOT_MADE:
                    value = []
                    self._set(content, value)
        return value

    def __set__(self, content: Any, value: Any) -> None:
        with _MAKING:
            self._set(content, value)

    def __delete__(self, content: Any) -> None:
        with _MAKING:
            self._delete(content)


def lazy_lists(*names: str) -> Callable[[_Class], _Class]:
    """Class decorator, above `@dataclass(slots=True)`: the named list fields become lazy (`LazyList`
    on the public name, the slot itself as `_raw_<name>`)."""

    def install(cls: _Class) -> _Class:
        for name in names:
            slot = cls.__dict__.get(name)
            if type(slot) is not MemberDescriptorType:
                raise TypeError(f"{cls.__name__}.{name} is no slot: lazy lists need @dataclass(slots=True) under them")
            _make_lazy(cls, name, slot)
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
