"""History-change events for a store: `watch_history` listens to a MessageManager's `on_history_changed`.

The manager calls its `on_message_added` observers only when a message is added or replaced; a store
must also hear about `set_system` and `clear_messages`, which the manager reports through
`on_history_changed` (see MessageManager).
"""

from __future__ import annotations

from collections.abc import Callable

from lionmsg.runtime.callbacks import is_async_callback
from lionmsg.runtime.manager import HistoryEvent, HistoryListener, MessageManager

__all__ = ["HistoryEvent", "HistoryListener", "watch_history"]


def watch_history(manager: MessageManager, listener: HistoryListener) -> Callable[[], None]:
    """Call `listener(event)` after each `set_system` / `clear_messages` of `manager` returns; returns
    the function that stops it (once; a listener added twice is called twice and stopped per call).
    Listeners run like message-added observers: all of them, in order, each failure raised after the
    others ran (the change itself stays). A listener that is not callable, or is async, is a TypeError
    here, before anything changes."""
    if not isinstance(manager, MessageManager):  # a Branch's history is `branch.msgs`
        raise TypeError(f"watch_history watches a MessageManager, got {type(manager).__name__}")
    if not callable(listener):
        raise TypeError(f"a history listener must be callable, got {type(listener).__name__}")
    if is_async_callback(listener):
        raise TypeError("a history listener must be a plain function: set_system and clear_messages do not await")
    listeners = manager.on_history_changed
    if not isinstance(listeners, list):  # a tuple or None: the manager calls them, but nothing can join them
        raise TypeError(f"the manager's on_history_changed must be a list, got {type(listeners).__name__}")
    listeners.append(listener)
    watching = True

    def unwatch() -> None:
        nonlocal watching
        # Only the first call removes a registration: a second must not remove another watch's. By
        # identity: a listener before it that compares equal is another's (review bq).
        if watching:
            held = manager.on_history_changed
            for index, other in enumerate(held):
                if other is listener:
                    del held[index]
                    break
        watching = False

    return unwatch
