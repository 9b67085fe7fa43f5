"""The library's own hooks on a history (a store's writer and its history listener, a Branch's view
tracking), and how the async paths call them without blocking their event loop.

Such a hook takes its history's thread lock when it is called, blocking, as sync code does. Called by
`a_add_message` or `aclear_messages`, on the loop's thread, that wait stopped the loop for as long as
another thread held the lock, and for good when that thread was itself waiting for the loop (review bq).
So the async paths take the lock for the hook first, as they take it for their own change (in slices,
letting the loop's other tasks run: `acquire_without_blocking_the_loop`), and call the hook holding it;
the hook re-enters it.

The message or change is committed by then, and these hooks record it (a write-through, a view that must
name it): a cancellation, or the coroutine's close, that comes while one waits (or while a user's observer
before them awaits) is held back until every library hook of the list has run, and then raised: a store
and a Branch on one history both record it (review bs). A close cannot await any more: the hooks wait
for their lock blocking then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from lionmsg.runtime.threadlock import ThreadLock, acquire_without_blocking_the_loop, take

__all__ = ["LockedCall", "LockingHook", "call_holding_its_lock", "run_the_rest_after_a_stop"]

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
    what the hook raised (or what else was raised while it waited, a Ctrl-C: then it does not run,
    and that is reported as its failure, as when it waited blocking) and what came to stop the caller
    while it waited (a CancelledError or a GeneratorExit), for the caller to report and raise."""
    stop: BaseException | None = None
    while True:
        lock: ThreadLock = hook.manager.messages._lock
        taken = [False]
        try:
            if not take(lock, taken):
                # The wait is here, not in a helper coroutine: a coroutine's close() closes the coroutine
                # it awaits and then raises GeneratorExit in its own frame too, so only this frame, the one
                # that calls the hook, can still call it.
                while True:
                    try:
                        await acquire_without_blocking_the_loop(lock, taken)
                        break
                    except asyncio.CancelledError as cancelled:
                        stop = cancelled  # thrown in at an await, where the lock is not held: wait on
                    except GeneratorExit as closed:  # nothing can be awaited any more: the hook, called
                        return _called(hook, argument), closed  # now, waits for its lock blocking
            # The history's pile replaced while this waited: the hook takes the current one's lock.
            if hook.manager.messages._lock is not lock:
                continue
        except BaseException as error:  # raised while waiting: the hook's failure, as if it waited itself
            return error, stop
        else:
            return _called(hook, argument), stop
        finally:
            if taken[0]:
                lock.release()


async def run_the_rest_after_a_stop(hooks: Sequence[Any], argument: Any, stop: BaseException) -> list[BaseException]:
    """Call the library's hooks among `hooks` (those after the one that a stop came to), as
    `call_holding_its_lock` does, and return their failures: the change is committed and they record it,
    whatever stops the caller (the user's hooks do not run). After a close nothing can be awaited:
    each then waits for its lock blocking."""
    failures: list[BaseException] = []
    closing = isinstance(stop, GeneratorExit)
    for hook in hooks:
        if not isinstance(hook, LockingHook):
            continue
        if closing:
            failure = _called(hook, argument)
        else:
            try:
                failure, _ = await call_holding_its_lock(hook, argument)  # a second stop: it stops anyway
            except GeneratorExit:  # closed while it waited: it ran (its failure went with the close)
                closing = True
                continue
        if failure is not None:
            failures.append(failure)
    return failures


def _called(hook: LockingHook, argument: Any) -> BaseException | None:
    try:
        hook(argument)
    except BaseException as error:  # the hook's failure, reported with the other hooks'
        return error
    return None
