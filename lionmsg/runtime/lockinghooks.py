"""The library's own hooks on a history (a store's writer and its history listener, a Branch's view
tracking), and how the async paths call them without blocking their event loop.

Such a hook takes its history's thread lock when it is called, blocking, as sync code does. Called by
`a_add_message` or `aclear_messages`, on the loop's thread, that wait stopped the loop for as long as
another thread held the lock, and for good when that thread was itself waiting for the loop (review bq).
So the async paths take the lock for the hook first, as they take it for their own change (in slices,
letting the loop's other tasks run: `acquire_without_blocking_the_loop`), and call the hook holding it;
the hook re-enters it.

The message or change is committed by then, and these hooks record it (a write-through, a view that must
name it): a cancellation, or the coroutine's close, that comes while one waits is held back until the
hook has run, and then raised. A close cannot await any more: the hook waits for the lock blocking then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lionmsg.runtime.threadlock import ThreadLock, acquire_without_blocking_the_loop, take

__all__ = ["LockedCall", "LockingHook", "call_holding_its_lock"]

# What `take` passes to `lock.acquire` to wait as long as it takes.
_BLOCKING = ((True,), (-1,))


class LockingHook:
    """Base of the library's hooks that take `manager.messages`'s thread lock when called. `manager`
    (typed loosely: this module sits below the manager's) is the history the hook follows."""

    __slots__ = ()

    manager: Any

    if TYPE_CHECKING:

        def __call__(self, argument: Any, /) -> None:
            """Called with the message added, or the history event, as any hook of its list is."""


class LockedCall(LockingHook):
    """A method of the library's (a Branch's, an attachment's) put on a history's hook list as a
    LockingHook; it reads as the method it calls."""

    __slots__ = ("call", "manager")

    def __init__(self, manager: Any, call: Callable[[Any], None]) -> None:
        self.manager = manager
        self.call = call

    def __call__(self, argument: Any) -> None:
        self.call(argument)

    def __repr__(self) -> str:
        return repr(self.call)


async def call_holding_its_lock(hook: LockingHook, argument: Any) -> tuple[BaseException | None, BaseException | None]:
    """Call `hook(argument)` holding its history's thread lock, taken without blocking the loop. Returns
    what the hook raised and what came to stop the caller while it waited (a CancelledError or a
    GeneratorExit), for the caller to report and raise; anything else raised while waiting (a Ctrl-C)
    propagates at once, and the hook does not run."""
    lock: ThreadLock = hook.manager.messages._lock
    taken = [False]
    failure: BaseException | None = None
    stop: BaseException | None = None
    try:
        if not take(lock, taken):
            # The wait is here, not in a helper coroutine: a coroutine's close() closes the coroutine it
            # awaits and then raises GeneratorExit in its own frame too, so only this frame, the one that
            # calls the hook, can still call it.
            while True:
                try:
                    await acquire_without_blocking_the_loop(lock, taken)
                    break
                except asyncio.CancelledError as cancelled:
                    stop = cancelled  # thrown in at an await, where the lock is not held: wait on
                except GeneratorExit as closed:  # nothing can be awaited any more
                    take(lock, taken, _BLOCKING)
                    stop = closed
                    break
        try:
            hook(argument)
        except BaseException as error:  # the hook's failure, reported with the other hooks'
            failure = error
    finally:
        if taken[0]:
            lock.release()
    return failure, stop
