"""The library's own hooks on a history (a store's writer and its history listener, a Branch's view
tracking), and how the async paths call them without blocking their event loop.

Such a hook takes its history's thread lock when it is called, blocking, as sync code does. Called by
`a_add_message` or `aclear_messages`, on the loop's thread, that wait stopped the loop for as long as
another thread held the lock, and for good when that thread was itself waiting for the loop (review bq).
So the async paths take the lock for the hook first, as they take it for their own change (in slices,
letting the loop's other tasks run: `acquire_without_blocking_the_loop`), and call the hook holding it;
the hook re-enters it.

The message or change is committed by then, and these hooks record it (a write-through, a view that must
name it), whatever stops the caller: after a cancellation (while one waits, or while a user's observer
before them awaits) each runs at once if its lock is free, else a thread of its own waits for the lock
and runs it, and the cancelled task ends at once (a thread holding the lock may be waiting for it to
end: review bu; a task of the loop was left undone by the loop's shutdown: review bv). After a close,
which allows no more awaiting, they wait for their lock blocking. So a store and a Branch on one
history both record a stopped add (review bs).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from lionmsg.runtime.threadlock import ThreadLock, acquire_without_blocking_the_loop, take
from lionmsg.runtime.wire import start_with_enough_stack

__all__ = [
    "LockedCall",
    "LockingHook",
    "call_holding_its_lock",
    "handed_on",
    "run_now_or_in_a_thread",
    "run_the_rest_after_a_stop",
]


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


async def call_holding_its_lock(
    hook: LockingHook, argument: Any
) -> tuple[bool, BaseException | None, BaseException | None]:
    """Call `hook(argument)` holding its history's thread lock, taken without blocking the loop. Returns
    whether it ran, what it raised (or what else was raised while it waited, a Ctrl-C: then it does not
    run, and that is reported as its failure, as when it waited blocking) and what came to stop the
    caller while it waited: a CancelledError returns at once, the hook not run, for the caller to hand
    on (`run_now_or_in_a_thread`); a GeneratorExit (a close: nothing can be awaited any more) has the
    hook called, waiting blocking."""
    while True:
        lock: ThreadLock = hook.manager.messages._lock
        taken = [False]
        try:
            if not take(lock, taken):
                # The wait is here, not in a helper coroutine: a coroutine's close() closes the coroutine
                # it awaits and then raises GeneratorExit in its own frame too, so only this frame, the one
                # that calls the hook, can still call it.
                try:
                    await acquire_without_blocking_the_loop(lock, taken)
                except asyncio.CancelledError as cancelled:  # thrown in at an await: the lock not held
                    return False, None, cancelled
                except GeneratorExit as closed:
                    return True, _called(hook, argument), closed
            # The history's pile replaced while this waited: the hook takes the current one's lock.
            if hook.manager.messages._lock is not lock:
                continue
        except BaseException as error:  # raised while waiting: the hook's failure, as if it waited itself
            return False, error, None
        else:
            return True, _called(hook, argument), None
        finally:
            if taken[0]:
                lock.release()


def run_now_or_in_a_thread(hook: LockingHook, argument: Any, stop: BaseException) -> BaseException | None:
    """Call a library hook after a stop, without waiting: the change is committed and the hook records
    it, but a cancelled task must end at once (a thread holding the lock may be waiting for it to end,
    review bu). Holding its lock at once, the hook runs now and its failure is returned; else a thread
    of its own runs it, waiting for the lock there: not on the loop, whose shutdown or closing would
    leave it undone (review bv); its failure is that thread's (`threading.excepthook` reports it), and
    a thread that cannot be started is the hook's failure, returned. After a close (`stop` a
    GeneratorExit), in an `atexit` handler, or where the interpreter's exit refuses new threads (3.12),
    it is called now and waits blocking."""
    if isinstance(stop, GeneratorExit):
        return _called(hook, argument)
    lock: ThreadLock = hook.manager.messages._lock
    taken = [False]
    try:
        if take(lock, taken) and hook.manager.messages._lock is lock:
            return _called(hook, argument)
    finally:
        if taken[0]:
            lock.release()
    main = threading.main_thread()
    if threading.current_thread() is main and not main.is_alive():
        # An `atexit` handler: a thread started now is waited for by nobody (3.12 does not start it),
        # and the change would go unrecorded (review bx 2).
        return _called(hook, argument)
    # Named for its class only: a repr (a Branch's holds its metadata) may be long, or may raise.
    runner = threading.Thread(
        target=_run_when_free, args=(hook, argument), name=f"lionmsg: {type(hook).__name__}", daemon=False
    )
    with _RUNNING_LOCK:
        _RUNNING.add(runner)
    try:
        # Its stack deep enough for any record the hook writes, whatever the program set `stack_size()`
        # to: waiting here instead blocked the loop again (review bx 1).
        start_with_enough_stack(runner)
    except BaseException as error:  # no thread to be had ("can't start new thread"): the hook's failure
        with _RUNNING_LOCK:
            _RUNNING.discard(runner)
        if isinstance(error, RuntimeError) and not main.is_alive():
            # The main thread has ended and the interpreter waits for its threads: 3.12 starts none
            # then, where 3.10, 3.11 and 3.13 start and wait for them (review bz 1): wait here.
            return _called(hook, argument)
        return error
    return None


# The threads running library hooks that a stopped add or clear handed on (until each ends).
_RUNNING: set[threading.Thread] = set()
_RUNNING_LOCK = threading.Lock()


def _run_when_free(hook: LockingHook, argument: Any) -> None:
    try:
        while True:  # the lock of the history's pile; again if the pile was replaced while this waited
            lock: ThreadLock = hook.manager.messages._lock
            with lock:
                if hook.manager.messages._lock is lock:  # (review bx 3, as call_holding_its_lock)
                    failure = _called(hook, argument)  # the hook re-enters the lock
                    break
        if failure is not None:
            raise failure  # this thread's error: threading.excepthook reports it
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(threading.current_thread())


def handed_on() -> list[threading.Thread]:
    """The threads still running library hooks a stopped change handed on: join them to know the
    change is recorded (tests, a program about to read the store from another process)."""
    with _RUNNING_LOCK:
        return list(_RUNNING)


def run_the_rest_after_a_stop(hooks: Sequence[Any], argument: Any, stop: BaseException) -> list[BaseException]:
    """`run_now_or_in_a_thread` for each of the library's hooks among `hooks` (those after the one a stop
    came to; the user's do not run); the failures of those that ran now."""
    failures: list[BaseException] = []
    for hook in hooks:
        if isinstance(hook, LockingHook):
            failure = run_now_or_in_a_thread(hook, argument, stop)
            if failure is not None:
                _cut_at(failure, stop)
                failures.append(failure)
    return failures


def _cut_at(failure: BaseException, stop: BaseException) -> None:
    """Raised while the caller handled `stop`, `failure` has it in its context chain; it is reported at
    the end of the stop's own chain, so the link back is cut (else the chain would loop: review bu)."""
    link, seen = failure, {id(failure)}
    while link.__context__ is not None and id(link.__context__) not in seen:
        if link.__context__ is stop:
            link.__context__ = None
            return
        link = link.__context__
        seen.add(id(link))


def _called(hook: LockingHook, argument: Any) -> BaseException | None:
    try:
        hook(argument)
    except BaseException as error:  # the hook's failure, reported with the other hooks'
        return error
    return None
