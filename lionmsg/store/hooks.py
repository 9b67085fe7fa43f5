"""History-change events for a MessageManager: the stand-in for a runtime hook that does not exist yet.

The manager calls its `on_message_added` observers only when a message is added or replaced. A store
must also hear about the two other changes to a history: `set_system` (a system message set, replaced
or updated in place) and `clear_messages` (also reached through `aclear_messages`). Until the runtime
offers an event for them, `watch_history` wraps those two methods *on the manager instance* (an
instance attribute shadows the class method; MessageManager is a plain class, so nothing else is
touched), calls the original, and then notifies the listeners. A call that raises changed nothing
(both methods validate first), so listeners are not told about it.

The wrappers are installed once per manager and shared by all listeners; they are removed when the
last listener stops watching (unless someone wrapped the methods again on top of them, in which case
the empty wrappers stay and cost one empty loop).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from lionmsg.generated.messages import System
from lionmsg.runtime.callbacks import run_sync_callbacks
from lionmsg.runtime.manager import MessageManager

__all__ = ["HistoryEvent", "HistoryListener", "watch_history"]

HistoryEvent = Literal["system", "clear"]
"""`"system"`: `set_system` returned (the system message was set, replaced or updated in place);
`"clear"`: `clear_messages` returned (only the system message is left)."""

HistoryListener = Callable[[HistoryEvent], Any]

_LISTENERS = "_lionmsg_history_listeners"
_WRAPPED = ("set_system", "clear_messages")


def watch_history(manager: MessageManager, listener: HistoryListener) -> Callable[[], None]:
    """Call `listener(event)` after each `set_system` / `clear_messages` of `manager` returns; returns
    the function that stops it. Listeners run like message-added observers: all of them, in order,
    each failure raised after the others ran (the change itself stays)."""
    listeners: list[HistoryListener] | None = manager.__dict__.get(_LISTENERS)
    if listeners is None:
        listeners = []
        _install(manager, listeners)
    listeners.append(listener)

    def unwatch() -> None:
        if listener in listeners:
            listeners.remove(listener)
        if not listeners:
            _uninstall(manager, listeners)

    return unwatch


def _install(manager: MessageManager, listeners: list[HistoryListener]) -> None:
    original_set_system = manager.set_system
    original_clear = manager.clear_messages

    def set_system(system: System) -> None:
        original_set_system(system)
        run_sync_callbacks(list(listeners), "system")

    def clear_messages() -> None:
        original_clear()
        run_sync_callbacks(list(listeners), "clear")

    set_system.__doc__ = MessageManager.set_system.__doc__
    clear_messages.__doc__ = MessageManager.clear_messages.__doc__
    vars(manager).update({_LISTENERS: listeners, "set_system": set_system, "clear_messages": clear_messages})


def _uninstall(manager: MessageManager, listeners: list[HistoryListener]) -> None:
    state = vars(manager)
    if state.get(_LISTENERS) is not listeners:
        return
    # Only our own wrappers are removed: a wrapper installed later on top of ours still calls ours.
    ours = all(getattr(state.get(name), "__qualname__", "").startswith(_install.__qualname__) for name in _WRAPPED)
    if ours:
        for name in (*_WRAPPED, _LISTENERS):
            del state[name]
