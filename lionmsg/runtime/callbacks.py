"""Message-added observers (ADR-0006 D4), and the manager's history listeners: admission, running, and
reporting failures.

Callbacks are post-insertion observers: the message is committed before any callback runs, every
callback in the snapshot runs even after others fail, one failure is re-raised as itself and several
as one `BaseExceptionGroup("on_message_added hooks failed", errors)`.

A cancellation is not an observer's failure: when the task running `a_add_message` is cancelled (or its
coroutine closed) while an observer awaits, the `CancelledError` (`GeneratorExit`) propagates at once,
as itself, and later observers do not run, so `asyncio.timeout`, `wait_for`, task groups and
`coroutine.close()` work as asyncio promises. The message stays committed.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
from collections.abc import Callable, Sequence
from types import AsyncGeneratorType, CoroutineType
from typing import Any

if sys.version_info < (3, 11):  # pragma: no cover - exercised by the Python 3.10 CI run
    from exceptiongroup import BaseExceptionGroup

__all__ = [
    "STOPPING",
    "MessageCallback",
    "callable_preflight",
    "history_preflight",
    "is_async_callback",
    "run_async_callbacks",
    "run_sync_callbacks",
    "sync_preflight",
]

MessageCallback = Callable[[Any], Any]

# What stops an async add rather than failing an observer: the task's cancellation, the coroutine's close.
STOPPING = (asyncio.CancelledError, GeneratorExit)


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
    built or inserted."""
    for callback in callbacks:
        if is_async_callback(callback):
            raise RuntimeError(
                f"Async on_message_added callback {callback!r} cannot fire from the sync add_message path. "
                "Use a_add_message from an async context instead."
            )
        if not callable(callback):
            raise _not_callable("on_message_added", callback)


def callable_preflight(callbacks: Sequence[MessageCallback]) -> None:
    """The async path refuses what cannot be called before anything is built or inserted (a hook put on
    the live list after the manager checked its list)."""
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
        try:
            result = callback(message)
            if type(result) is AsyncGeneratorType:
                raise _async_generator_refused(hook, callback)
            if inspect.isawaitable(result):
                if inspect.iscoroutine(result):
                    result.close()  # never awaited: close it rather than leak a warning
                advice = "; use a_add_message" if path == "add_message" else ": it must be a plain function"
                raise TypeError(f"{hook} callback {callback!r} returned an awaitable on the sync {path} path{advice}")
        except BaseException as error:  # every callback runs; failures are re-raised below
            errors.append(error)
    _raise(errors, hook)


async def run_async_callbacks(callbacks: Sequence[MessageCallback], message: Any) -> None:
    errors: list[BaseException] = []
    for callback in callbacks:
        try:
            result = callback(message)
            # A coroutine (an async def observer's result) or None (a plain function's) is told apart
            # without inspect.isawaitable's Python-level call.
            if type(result) is CoroutineType or (result is not None and inspect.isawaitable(result)):
                await result
            elif type(result) is AsyncGeneratorType:
                raise _async_generator_refused("on_message_added", callback)
        except STOPPING as stop:
            # Not a failure to collect: the caller is going away. Earlier failures stay visible as its context.
            if errors and stop.__context__ is None:
                stop.__context__ = _combined(errors, "on_message_added")
            raise
        except BaseException as error:  # every callback runs; failures are re-raised below
            errors.append(error)
    if errors:
        _raise(errors, "on_message_added")


def _async_generator_refused(hook: str, callback: MessageCallback) -> TypeError:
    # An `async def` with a `yield` would never run its body: say so rather than skip it silently.
    return TypeError(f"{hook} callback {callback!r} is an async generator function; its body would never run")


def _raise(errors: list[BaseException], hook: str) -> None:
    if errors:
        raise _combined(errors, hook)


def _combined(errors: list[BaseException], hook: str) -> BaseException:
    """One failure as itself, several as one group."""
    return errors[0] if len(errors) == 1 else BaseExceptionGroup(f"{hook} hooks failed", errors)
