"""Message-added observers (ADR-0006 D4), and the manager's history listeners: admission, running, and
reporting failures. The library's own hooks on these lists (a store's, a Branch's: `LockingHook`) are
given their history's thread lock by the async paths, without blocking the loop (see lockinghooks).

Callbacks are post-insertion observers: the message is committed before any callback runs, every
callback in the snapshot runs even after others fail, one failure is re-raised as itself and several
as one `BaseExceptionGroup("on_message_added hooks failed", errors)`; a lone CancelledError or
StopIteration comes in a group of one (see `_NEVER_ALONE`). The exception raised does not name the
committed message (README: build the message and pass it in to know its id).

A cancellation is not an observer's failure: when the task running `a_add_message` is cancelled (or its
coroutine closed) while an observer awaits, the `CancelledError` (`GeneratorExit`) propagates at once,
as itself, and later observers do not run (the library's own do, at once or in a thread: see
`run_the_rest_after_a_stop`), so `asyncio.timeout`, `wait_for`, task groups and `coroutine.close()` work
as asyncio promises, also when the observer turns the cancellation into another error (3.11+); one that
swallows it hides it from the add, as from any code awaiting it. The message stays committed. A
`CancelledError` an observer raises while nobody cancels the add (its own inner task was cancelled) is
that observer's failure; only Python 3.11+ can tell the two apart (`Task.cancelling()`), so on 3.10
every one out of an await stops the add. What an observer raises when it is called, before any await, is
always its failure: a stop is only ever thrown in at an await.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
from collections.abc import Callable, Sequence
from types import AsyncGeneratorType, CoroutineType
from typing import Any, NoReturn, cast

from lionmsg.runtime.lockinghooks import (
    LockingHook,
    call_holding_its_lock,
    run_now_or_in_a_thread,
    run_the_rest_after_a_stop,
)

if sys.version_info < (3, 11):  # pragma: no cover - exercised by the Python 3.10 CI run
    from exceptiongroup import BaseExceptionGroup

__all__ = [
    "MessageCallback",
    "callable_preflight",
    "check_observer_list",
    "history_preflight",
    "is_async_callback",
    "observer_failed",
    "raise_hook_failures",
    "raise_listeners_outcome",
    "run_async_callbacks",
    "run_listeners_on_loop",
    "run_sync_callbacks",
    "sync_preflight",
]

MessageCallback = Callable[[Any], Any]

# What may stop an async add rather than fail an observer: the task's cancellation, the coroutine's close.
_STOPPING = (asyncio.CancelledError, GeneratorExit)


def _stops_the_add(error: BaseException) -> bool:
    """Whether `error`, raised out of an awaited observer, is the add being stopped (else an observer's
    own failure): its coroutine closed, or, while the task running it is being cancelled, a CancelledError
    or an error the observer made of one (raised while handling it: its cleanup failed, a client wrapped
    it). An exit or interrupt (`SystemExit`, `KeyboardInterrupt`) is never made into a stop."""
    if isinstance(error, GeneratorExit):
        return True
    cancelled_error = isinstance(error, asyncio.CancelledError)
    if not cancelled_error and not (isinstance(error, Exception) and _made_of_a_cancellation(error)):
        return False
    if sys.version_info < (3, 11):  # 3.10 cannot tell: every CancelledError stops it, nothing else
        return cancelled_error
    try:
        task = asyncio.current_task()
    except RuntimeError:  # driven by hand, with no loop: only a cancellation throws one in
        return cancelled_error
    if task is None:
        return cancelled_error
    return task.cancelling() > 0


def _made_of_a_cancellation(error: BaseException) -> bool:
    """Whether a CancelledError is among what `error` was raised from or while handling."""
    seen: set[int] = set()
    cause = error.__cause__ or error.__context__
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, asyncio.CancelledError):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def is_async_callback(callback: Any) -> bool:
    """A coroutine function, a partial of one, or an object whose `__call__` is one."""
    target = callback
    while isinstance(target, functools.partial):
        target = target.func
    if inspect.iscoroutinefunction(target):
        return True
    if inspect.isfunction(target) or inspect.ismethod(target) or inspect.isbuiltin(target):
        return False
    # Looked up on the class (as the call itself does); `callable()` cannot tell async from sync.
    call = next((klass.__dict__["__call__"] for klass in type(target).__mro__ if "__call__" in klass.__dict__), None)
    # The wrappers are no functions: what they wrap is (inspect sees through partialmethod only on 3.13+).
    while isinstance(call, (staticmethod, classmethod, functools.partial, functools.partialmethod)):
        call = call.func if isinstance(call, (functools.partial, functools.partialmethod)) else call.__func__
    return inspect.iscoroutinefunction(call)


def sync_preflight(callbacks: Sequence[MessageCallback]) -> None:
    """The sync path refuses async callbacks, and anything that cannot be called, before anything is
    built or inserted. An async one anywhere in the list is the ADR's RuntimeError, as in LionAGI, even
    after something that cannot be called (which is then the TypeError)."""
    for callback in callbacks:
        if is_async_callback(callback):
            raise RuntimeError(
                f"Async on_message_added callback {callback!r} cannot fire from the sync add_message path. "
                "Use a_add_message from an async context instead."
            )
    for callback in callbacks:
        if not callable(callback):
            raise _not_callable("on_message_added", callback)


def check_observer_list(observers: object) -> None:
    """The live `on_message_added` must stay a list (or tuple): an iterator assigned there would be used
    up by the first look at it, and its observers silently skipped."""
    if not isinstance(observers, (list, tuple)):
        raise TypeError(f"on_message_added must be a list of callables, got {type(observers).__name__}")


def callable_preflight(callbacks: Sequence[MessageCallback]) -> None:
    """The async path refuses what cannot be called before anything is built or inserted (a hook put on
    the live list after the manager checked its list)."""
    check_observer_list(callbacks)
    for callback in callbacks:
        if not callable(callback):
            raise _not_callable("on_message_added", callback)


def history_preflight(listeners: Sequence[Callable[[Any], Any]], path: str) -> None:
    """History listeners run on sync paths only (`path` names the method): an async one, or one that
    cannot be called, is refused before the change it would be told of, as the sync `add_message`
    refuses async observers."""
    for listener in listeners:
        if is_async_callback(listener):
            raise TypeError(
                f"on_history_changed callback {listener!r} is async, but history listeners run synchronously "
                f"(here from {path}): it must be a plain function"
            )
        if not callable(listener):
            raise _not_callable("on_history_changed", listener)


def _not_callable(hook: str, callback: Any) -> TypeError:
    return TypeError(f"{hook} callback {callback!r} is not callable")


def run_sync_callbacks(
    callbacks: Sequence[MessageCallback], message: Any, hook: str = "on_message_added", path: str = "add_message"
) -> None:
    """Call each callback with `message`; `hook` (the list's name) and `path` (the sync method running
    them) name the failures."""
    errors: list[BaseException] = []
    for callback in callbacks:
        failure = _call_sync(callback, message, hook, path)
        if failure is not None:
            errors.append(failure)
    _raise(errors, hook)


async def run_listeners_on_loop(
    listeners: Sequence[Callable[[Any], Any]], event: str, path: str
) -> tuple[BaseException | None, BaseException | None]:
    """`run_sync_callbacks` for history listeners told of a change made by an async path: the library's
    own (`LockingHook`) get their history's lock without blocking the loop. Returns the listeners'
    failure (one, or a group, as the sync path raises it) and what came to stop the caller while one of
    them waited (see `call_holding_its_lock`). Every listener runs, also after a stop (they never
    await; the library's then at once or in a thread: `run_now_or_in_a_thread`)."""
    errors: list[BaseException] = []
    stop: BaseException | None = None
    for listener in listeners:
        if not isinstance(listener, LockingHook):
            failure = _call_sync(listener, event, "on_history_changed", path)
        elif stop is not None:  # no more waiting: at once, or in a thread
            failure = run_now_or_in_a_thread(listener, event, stop)
        else:
            try:
                ran, failure, stop = await call_holding_its_lock(listener, event)
            except GeneratorExit as closed:  # it ran (its failure went with the close); no more waiting
                ran, failure, stop = True, None, closed
            if not ran and stop is not None:  # cancelled while it waited
                failure = run_now_or_in_a_thread(listener, event, stop)
        if failure is not None:
            errors.append(failure)
    return (_combined(errors, "on_history_changed") if errors else None), stop


def raise_listeners_outcome(failed: BaseException | None, stop: BaseException | None) -> None:
    """Raise what `run_listeners_on_loop` returned: the stop, with the listeners' failure at the end of
    its context chain, else the failure; nothing when neither came."""
    if stop is not None:
        if failed is not None:
            _end_context_chain(stop, failed)
        raise stop
    if failed is not None:
        raise failed


def _call_sync(callback: Callable[[Any], Any], argument: Any, hook: str, path: str) -> BaseException | None:
    """Call one callback of a sync hook list; what it raised (or its refused result) is returned."""
    try:
        result = callback(argument)
        if type(result) is AsyncGeneratorType:
            raise _async_generator_refused(hook, callback)
        if inspect.isawaitable(result):
            if inspect.iscoroutine(result):
                result.close()  # never awaited: close it rather than leak a warning
            advice = "; use a_add_message" if path == "add_message" else ": it must be a plain function"
            raise TypeError(f"{hook} callback {callback!r} returned an awaitable on the sync {path} path{advice}")
    except BaseException as error:  # every callback runs; failures are re-raised by the caller
        return error
    return None


async def run_async_callbacks(
    callbacks: Sequence[MessageCallback],
    message: Any,
    failed_before: BaseException | None,
    path: str,
    start: int = 0,
    errors: tuple[BaseException, ...] = (),
) -> None:
    """Call and await each callback with `message`; then raise the failures as `raise_hook_failures` does,
    with `failed_before` (what the history listeners raised when a system message was set by `path`, or
    None). A stop (see `_stops_the_add`) propagates at once, as itself (the library's hooks after it
    run at once or in a thread: `run_the_rest_after_a_stop`), with every failure before it at the end
    of its context chain (after what an observer was handling when it was stopped); a stop the observer
    turned into another error (3.11+) as a fresh CancelledError, that error first in its chain.

    A caller that ran `callbacks[:start]` itself hands over the rest, with the failures they had
    (`errors`, each settled by `observer_failed`): `a_add_message` calls and awaits the `async def`
    functions before any other observer and before the first failure in its own frame, one coroutine
    fewer for each add waiting on its observers (calling one runs none of its body, only binds the
    message to its parameter)."""
    # Thousands of adds can wait on their observers at once (a gather of a_add_message calls), each
    # keeping this frame: it keeps no iterator, enumerate tuple or empty error list, objects that would
    # bring the garbage collector's passes sooner and that each pass would walk while they wait.
    position = start
    while position < len(callbacks):
        callback = callbacks[position]
        position += 1  # from here: the position of the callbacks after this one
        if isinstance(callback, LockingHook):  # the library's own: its lock taken without blocking the loop
            try:
                ran, failure, stop = await call_holding_its_lock(callback, message)
            except GeneratorExit as closed:  # it ran (its failure went with the close)
                ran, failure, stop = True, None, closed
            if failure is not None:
                errors += (failure,)
            if stop is not None:  # the library's hooks from here on run at once or in a thread
                rest = callbacks[position if ran else position - 1 :]
                errors += tuple(run_the_rest_after_a_stop(rest, message, stop))
                _chain_earlier(stop, errors, failed_before, path)
                raise stop
            continue
        try:
            result = callback(message)
        except BaseException as error:  # raised by the call, never thrown in at an await: always a failure
            # Not callable: put on the live list (by another thread) after the preflight, named as it names it.
            errors += (error if callable(callback) else _not_callable("on_message_added", callback),)
            continue
        # A coroutine (an async def observer's result) or None (a plain function's) is told apart
        # without inspect.isawaitable's Python-level call.
        if type(result) is CoroutineType or (result is not None and inspect.isawaitable(result)):
            try:
                await result
            except BaseException as error:
                errors = observer_failed(error, False, errors, callbacks, position, message, failed_before, path)
        elif type(result) is AsyncGeneratorType:
            errors += (_async_generator_refused("on_message_added", callback),)
    if errors:
        raise_hook_failures(failed_before, _combined(errors, "on_message_added"), path)
    if failed_before is not None:
        raise failed_before


def observer_failed(
    error: BaseException,
    by_the_call: bool,
    errors: tuple[BaseException, ...],
    callbacks: Sequence[MessageCallback],
    after: int,
    message: Any,
    failed_before: BaseException | None,
    path: str,
) -> tuple[BaseException, ...]:
    """Settle what an observer raised when called (`by_the_call`: always its failure) or awaited, inside
    the `except` that caught it (what is raised from here takes it as its context, as a bare `raise`
    there would): its failure is returned after the earlier ones (`errors`); a stop is raised, the
    library's hooks among `callbacks[after:]` run first, the failures so far chained to it."""
    if by_the_call or not _stops_the_add(error):
        return (*errors, error)
    if isinstance(error, _STOPPING):
        errors += tuple(run_the_rest_after_a_stop(callbacks[after:], message, error))
        _chain_earlier(error, errors, failed_before, path)
        raise error
    stop = asyncio.CancelledError()  # the observer made another error of the cancellation
    stop.__context__ = error  # (first in the chain; the earlier failures after it)
    errors += tuple(run_the_rest_after_a_stop(callbacks[after:], message, stop))
    _chain_earlier(stop, errors, failed_before, path)
    raise stop from error


def _chain_earlier(
    stop: BaseException, errors: Sequence[BaseException], failed_before: BaseException | None, path: str
) -> None:
    """Not a failure to collect: the caller is going away. The failures before it stay reachable, at the
    end of the stop's context chain."""
    earlier = [failed_before] if failed_before is not None else []
    if errors:
        earlier.append(_combined(errors, "on_message_added"))
    if len(earlier) > 1:
        _end_context_chain(stop, BaseExceptionGroup(f"{path} hooks failed", earlier))
    elif earlier:
        _end_context_chain(stop, earlier[0])


def raise_hook_failures(listeners_failed: BaseException | None, observers_failed: BaseException, path: str) -> NoReturn:
    """The observers' failure as itself, or with the history listeners' (a system message set by `path`)
    as one group: neither hides the other."""
    if listeners_failed is None:
        raise observers_failed
    # `from None`: the group's members are its story; the handled member is no separate context.
    members = [_unwrapped(listeners_failed), _unwrapped(observers_failed)]
    raise BaseExceptionGroup(f"{path} hooks failed", members) from None


def _end_context_chain(error: BaseException, earlier: BaseException) -> None:
    """Make `earlier` the oldest exception in `error`'s `__context__` chain: what `error` was raised while
    handling stays its own context, and what failed before all of them comes last."""
    seen = {id(error)}
    last = error
    while last.__context__ is not None:
        last = last.__context__
        if id(last) in seen:  # a cycle: leave the chain as it is
            return
        seen.add(id(last))
    if id(earlier) not in seen:
        last.__context__ = earlier


def _async_generator_refused(hook: str, callback: MessageCallback) -> TypeError:
    # An `async def` with a `yield` would never run its body: say so rather than skip it silently.
    return TypeError(f"{hook} callback {callback!r} is an async generator function; its body would never run")


def _raise(errors: list[BaseException], hook: str) -> None:
    if errors:
        raise _combined(errors, hook)


# Failures that cannot reach the caller as themselves: a CancelledError would read as the add's own
# cancellation (asyncio marks the calling task cancelled, and a task group drops it), and a coroutine
# turns a StopIteration into a RuntimeError (PEP 479). Alone, they come in a group of one, on both paths.
_NEVER_ALONE = (asyncio.CancelledError, StopIteration)


def _combined(errors: Sequence[BaseException], hook: str) -> BaseException:
    """One failure as itself (but see `_NEVER_ALONE`), several as one group."""
    if len(errors) == 1 and not isinstance(errors[0], _NEVER_ALONE):
        return errors[0]
    group = BaseExceptionGroup(f"{hook} hooks failed", list(errors))  # a list, as the sync path's: its repr shows it
    if len(errors) == 1:
        group._lionmsg_lone = True  # type: ignore[attr-defined]  # see _unwrapped
    return group


def _unwrapped(failure: BaseException) -> BaseException:
    """A failure `_combined` put in a group of one, as itself again: in a group with another it is safe.
    Only such a group (marked so): an observer's own group of one stays as it raised it."""
    if getattr(failure, "_lionmsg_lone", False):
        return cast("BaseExceptionGroup[BaseException]", failure).exceptions[0]
    return failure
