"""The thread lock of a pile (shared with its progression) and of an Exchange (README: threads).

A re-entrant lock, as LionAGI's Pile takes: a pile's methods call each other, and a manager holds its
pile's lock around a whole change (build, add or replace, the system message's move) while the pile's
own methods take it again. Copies and unpickled objects get a lock of their own: a lock can be
neither copied nor pickled, and a copy is another object that no thread holds.
"""

from __future__ import annotations

import _thread
import asyncio
from typing import Any

__all__ = ["ThreadLock", "acquire_without_blocking_the_loop"]

# How long a task waits between tries while another thread holds a lock it needs: short, since the
# library holds its locks for microseconds; only code that holds `thread_lock` itself keeps them longer.
_RETRY_SECONDS = 0.0005


class ThreadLock(_thread.RLock):  # type: ignore[misc]  # typeshed marks the C type final; it is subclassable
    """`threading.RLock` that copies and pickles as a new, unheld lock."""

    __slots__ = ()

    def __reduce__(self) -> tuple[type[ThreadLock], tuple[()]]:
        return (ThreadLock, ())

    def __copy__(self) -> ThreadLock:
        return ThreadLock()

    def __deepcopy__(self, memo: dict[int, Any]) -> ThreadLock:
        return ThreadLock()


async def acquire_without_blocking_the_loop(lock: ThreadLock) -> None:
    """Take `lock` from a task: at once when free (or held by this thread), else by retrying, so that
    the other tasks of the loop run while another thread holds it (blocking would stop them all)."""
    while not lock.acquire(False):
        await asyncio.sleep(_RETRY_SECONDS)
