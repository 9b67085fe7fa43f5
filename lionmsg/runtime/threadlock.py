"""The thread lock of a pile (shared with its progression) and of an Exchange (README: threads).

A re-entrant lock, as LionAGI's Pile takes: a pile's methods call each other, and a manager holds its
pile's lock around a whole change (build, add or replace, the system message's move) while the pile's
own methods take it again. Deep copies and unpickled objects get a lock of their own: a lock can be
neither copied nor pickled, and a copy is another object that no thread holds. A shallow copy
(`copy.copy`, `model_copy()`) shares its original's storage, and with it the lock that guards it. Also here: how a task
waits for such a lock without stopping its event loop, and the mixin that deep-copies under it.
"""

from __future__ import annotations

import _thread
import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["NOT_HELD", "CopiedUnderLock", "ThreadLock", "acquire_without_blocking_the_loop", "take"]

# How long a task blocks its loop, at most, in one try for a lock another thread holds: the library
# holds its locks for microseconds; only code that holds `thread_lock` itself keeps them longer.
_SLICE_SECONDS = 0.001


class ThreadLock(_thread.RLock):  # type: ignore[misc]  # typeshed marks the C type final; it is subclassable
    """`threading.RLock` that copies and pickles as a new, unheld lock."""

    __slots__ = ()

    if TYPE_CHECKING:  # the C lock's own method (threading.Condition's), which typeshed leaves out

        def _is_owned(self) -> bool:
            """Whether the calling thread holds the lock."""

    def __reduce__(self) -> tuple[type[ThreadLock], tuple[()]]:
        return (ThreadLock, ())

    def __copy__(self) -> ThreadLock:
        return ThreadLock()

    def __deepcopy__(self, memo: dict[int, Any]) -> ThreadLock:
        return ThreadLock()


# What `release()` raises when the calling thread does not hold the lock (the same words on 3.10-3.13):
# a path that took a free lock with a bare acquire tells by it that it was cut short before it took it.
NOT_HELD = ("cannot release un-acquired lock",)  # the RuntimeError's args

# What `take` and the slices pass to `lock.acquire`: at once, or waiting one slice.
_AT_ONCE = ((False,),)
_ONE_SLICE = ((True,), (_SLICE_SECONDS,))


def take(lock: ThreadLock, taken: list[bool], how: tuple[tuple[Any, ...], ...] = _AT_ONCE) -> bool:
    """`lock.acquire(...)` for a path that cannot take the lock in a `with` (it must wait without
    blocking its loop): the result is written to `taken[0]` by the same C call that takes the lock, so
    no interrupt lands between the two (the interpreter handles a signal as a call returns, so after a
    bare `got = lock.acquire()` one could come before `got` was set, and the lock stayed held for good:
    reviews bl, bp). The caller starts with `taken = [False]`, calls this inside its `try`, and its
    `finally` releases the lock exactly when `taken[0]`: never another task's hold (review br)."""
    taken[:] = map(lock.acquire, *how)
    return taken[0]


async def acquire_without_blocking_the_loop(lock: ThreadLock, taken: list[bool]) -> None:
    """Take `lock` (see `take`) from a task that could not take it at once, in slices of at most a
    millisecond, letting the loop's other tasks run between them (blocking until it is free would stop
    them all). Each slice waits in the lock's own queue: polling with a sleep between tries lost the lock
    to a thread taking it in a loop for most of a second at a time."""
    while not take(lock, taken, _ONE_SLICE):
        await asyncio.sleep(0)


class CopiedUnderLock:
    """Mixin for a pydantic model with a `_lock`: `copy.deepcopy` and `model_copy(deep=True)` hold it,
    so that a copy never catches another thread's change half made (pickling does not: README)."""

    if TYPE_CHECKING:
        _lock: ThreadLock

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        with self._lock:
            return super().__deepcopy__(memo)  # type: ignore[misc, no-any-return]  # pydantic's BaseModel
