"""MessageManager: a branch's ordered history (ADR-0006 D3) and its message-added observers (D4)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from inspect import CO_COROUTINE
from types import FunctionType
from typing import Any, Literal, NoReturn, cast
from uuid import UUID

from pydantic import ValidationError
from pydantic_core import InitErrorDetails
from typing_extensions import Unpack  # at run time too: typing.get_type_hints(add_message) needs it

from lionmsg.generated.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    Message,
    System,
)
from lionmsg.runtime.callbacks import (
    MessageCallback,
    callable_preflight,
    check_observer_list,
    history_preflight,
    observer_failed,
    raise_hook_failures,
    raise_listeners_outcome,
    run_async_callbacks,
    run_listeners_on_loop,
    run_sync_callbacks,
    sync_preflight,
)
from lionmsg.runtime.element import part_of_record, record_error, record_of_part
from lionmsg.runtime.factories import (
    AddMessageArguments,
    build_common,
    build_message,
    create_action_response,
    revise_instruction,
)
from lionmsg.runtime.ids import parse_canonical_uuid
from lionmsg.runtime.pile import Pile, changes_made
from lionmsg.runtime.progression import Progression, assigned_back
from lionmsg.runtime.threadlock import NOT_HELD, acquire_without_blocking_the_loop, take
from lionmsg.runtime.wire import (
    UNWRITABLE_DEPTH,
    check_finite,
    check_mode,
    finite_parts_noted,
    loads_json,
    write_json,
)
from lionmsg.runtime.wording import counted

__all__ = [
    "INVALID_PROGRESSION",
    "HistoryEvent",
    "HistoryListener",
    "MessageManager",
    "misplaced_system",
    "misplaced_system_text",
    "refuse_misplaced_system",
]

INVALID_PROGRESSION = "One or more messages in the requested progression are invalid."

HistoryEvent = Literal["system", "clear"]
"""`"system"`: `set_system` returned (the system message was set, replaced or updated in place);
`"clear"`: `clear_messages` returned (only the system message is left)."""

HistoryListener = Callable[[HistoryEvent], Any]

_EVENT_METHODS: dict[str, str] = {"system": "set_system", "clear": "clear_messages"}


class MessageManager:
    """A Pile of messages, its Progression, the one system message (always at index 0), factories that
    add or replace one message, typed views, and projection to provider chat messages.

    `on_message_added` is the live list of observers (kept by reference): each is called with the message
    after it is committed. The sync `add_message` refuses async observers before changing anything; the
    async `a_add_message` awaits them after releasing the pile's lock, so an observer may add again.

    `on_history_changed` (beyond the ADR, for stores) is the live list of listeners for the two other
    changes to a history: each is called with `"system"` after `set_system` returns (the system message
    set, replaced or updated in place, `add_message(system=...)` included) and with `"clear"` after
    `clear_messages` returns (`aclear_messages` included). A call that raises changed nothing and is not
    reported. Listeners run like sync observers: all of them, in order, failures raised after; an async
    one is refused (TypeError) before anything changes. When `add_message(system=...)` (or
    `a_add_message`) sets the system message, its observers still run if a listener failed; the
    listeners' failure is raised after them, alone or, when observers failed too, with theirs in one
    `BaseExceptionGroup("add_message hooks failed", [listeners', observers'])` (`"a_add_message hooks
    failed"` on the async path).
    """

    def __init__(
        self,
        messages: Any = None,
        progression: Progression | list[Any] | None = None,
        system: System | None = None,
        on_message_added: list[MessageCallback] | None = None,
    ) -> None:
        if system is not None and not isinstance(system, System):
            raise ValueError("System message must be a System instance.")
        observers = _observer_list(on_message_added)
        identity: dict[str, Any] = {}
        if isinstance(messages, Mapping):
            # A serialized pile is this history's own record: keep its identity and its order's.
            messages = Pile.from_dict(messages)
            # Its order lists every item: one that is no message cannot be left out as a list's is.
            stranger = next((item for item in messages if not isinstance(item, Message)), None)
            if stranger is not None:
                raise ValueError(
                    f"a history's pile record holds messages only: item {stranger.id} is a {type(stranger).__name__}"
                )
            identity = {"id": messages.id, "created_at": messages.created_at, "metadata": dict(messages.metadata)}
            if progression is None:
                progression = messages.progression
        loaded = _messages_from(messages)
        pile: Pile[Message] = Pile(loaded, item_type={Message}, strict_type=False, progression=progression, **identity)
        systems = [message for message in pile if isinstance(message, System)]
        if len(systems) > 1 and system is None:
            raise ValueError(
                f"a history holds one system message; the messages hold {len(systems)} (MessageManager(messages="
                "..., system=<the System to keep>) loads them without the others)"
            )
        # A history grows by appends and is rarely asked for a position: its order makes its id -> position
        # index when first needed (OrderedIds; nothing to drop when it starts with messages).
        pile._order.forget_map()
        self.messages = pile
        self.on_message_added: list[MessageCallback] = observers
        self.on_history_changed: list[HistoryListener] = []
        # `changes_made(messages)` as the latest change made through the manager began and as it ended
        # (still under the pile's lock); None until a store asks for them (`_track_changes`), so that
        # untracked histories pay nothing per change.
        self._latest_change_began: tuple[int, int] | None = None
        self._latest_change_ended: tuple[int, int] | None = None
        if system is None and systems:
            system = systems[0]
        if system is not None:
            self.set_system(system)  # which takes every other System out

    @property
    def _on_message_added(self) -> list[MessageCallback]:
        """LionAGI 0.36.0's name for the observer list (its only one: its Branch and tests append to
        it): the same list as `on_message_added`, so such code ports unchanged."""
        return self.on_message_added

    @_on_message_added.setter
    def _on_message_added(self, observers: list[MessageCallback]) -> None:
        self.on_message_added = observers

    # -- the system message ------------------------------------------------------------------------

    @property
    def progression(self) -> Progression:
        """The order of the whole history (the pile's own progression)."""
        return self.messages.progression

    @progression.setter
    def progression(self, value: Progression) -> None:
        assigned_back("manager.progression", self.messages.progression, value)

    @property
    def system(self) -> System | None:
        """The system message: the first message, when it is a System. Read from the pile, so changes
        made through `messages` (the public pile) behind the manager's back are seen: a system taken
        out, or moved from index 0, is no longer the system (`set_system` puts one back at index 0).
        Set it with `set_system` (there is no assignment). An order that leaves every held message out
        (ids removed through `progression`) names no first message: None, as for an empty history."""
        messages = self.messages
        with messages._lock:  # another thread may empty the history between the test and the look-up
            if not messages._order:
                return None
            first = messages[0]
        return first if isinstance(first, System) else None

    def set_system(self, system: System) -> None:
        """Make `system` the system message at index 0: the first is inserted, a different one replaces
        the current one (which leaves the history), the current one is updated in place. Any other
        System the history holds (one moved from index 0 or added through the pile) leaves it too, so
        the history again holds one system message and its records can be written."""
        if not isinstance(system, System):
            raise ValueError("System message must be a System instance.")
        self._checked_listeners("system")  # refused at once, not after waiting for the lock
        with self.messages.thread_lock:
            listeners = self._checked_listeners("system")  # again: one put on while this call waited
            if self._latest_change_began is not None:
                self._latest_change_began = changes_made(self.messages)
            self._install_system(system)
            self._note_change_ended()
        self._history_changed("system", listeners)

    def _install_system(self, system: System) -> None:
        self.messages._refuse_ordered_strangers([system])  # the out-of-step error, not the order's own
        current = self.system  # None when none is at index 0 (taken out or moved through the pile)
        if current is not None and current.id != system.id:
            if system.id in self.messages:
                self.messages.exclude(system.id)
            self.messages.replace(current.id, system)
        elif current is not None:
            self.messages.update(system)
        else:
            if system.id in self.messages:
                self.messages.exclude(system.id)
            self.messages.insert(0, system)
        # O(n), as rare as set_system: a System elsewhere only comes in behind the manager's back
        strays = [held.id for held in list(self.messages._items.values()) if isinstance(held, System)]
        strays.remove(system.id)
        if strays:
            self.messages.exclude(strays)

    def clear_messages(self) -> None:
        """Empty the history, keeping only the system message (at index 0)."""
        self._checked_listeners("clear")
        with self.messages.thread_lock:
            listeners = self._checked_listeners("clear")
            self._clear_holding_lock()
        self._history_changed("clear", listeners)

    def _clear_holding_lock(self) -> None:
        if self._latest_change_began is not None:
            self._latest_change_began = changes_made(self.messages)
        system = self.system
        self.messages.clear()
        self.messages._order.forget_map()  # as in __init__
        if system is not None:
            self.messages.include(system)
        self._note_change_ended()

    def _checked_listeners(self, event: HistoryEvent, path: str | None = None) -> tuple[HistoryListener, ...]:
        """The history listeners to tell of a change, as a snapshot (as for observers: one added meanwhile
        hears the next change), checked before the change is made: a list, a tuple or None (an iterator
        would be used up by the check, and its listeners silently skipped), each a plain callable. Taken
        under the lock that guards the change, so exactly the checked ones run (`path` names the call)."""
        listeners = self.on_history_changed
        if listeners is None:
            return ()
        if not isinstance(listeners, (list, tuple)):
            raise TypeError(f"on_history_changed must be a list of callables, got {type(listeners).__name__}")
        snapshot = tuple(listeners)
        history_preflight(snapshot, path or _EVENT_METHODS[event])
        return snapshot

    def _history_changed(
        self, event: HistoryEvent, listeners: Sequence[HistoryListener], path: str | None = None
    ) -> None:
        if listeners:
            run_sync_callbacks(listeners, event, "on_history_changed", path or _EVENT_METHODS[event])

    async def _history_changed_on_loop(
        self, event: HistoryEvent, listeners: Sequence[HistoryListener], path: str
    ) -> tuple[BaseException | None, BaseException | None]:
        """`_history_changed` from an async path: the listeners' failure and a stop (see
        `run_listeners_on_loop`), returned."""
        if not listeners:
            return None, None
        return await run_listeners_on_loop(listeners, event, path)

    def _system_listeners_failed(self, listeners: Sequence[HistoryListener]) -> BaseException | None:
        """The history listeners told of `add_message(system=...)`: their failure is returned, to be
        raised after the message-added observers ran (the system message is committed either way)."""
        try:
            self._history_changed("system", listeners, "add_message(system=...)")
        except BaseException as failure:
            return failure
        return None

    async def aclear_messages(self) -> None:
        self._checked_listeners("clear", "aclear_messages")
        async with self.messages:
            # The thread lock as a_add_message takes it: a blocking wait for another thread would stop the
            # loop's other tasks.
            thread_lock = self.messages._lock
            taken = [False]  # see a_add_message
            try:
                if not take(thread_lock, taken):
                    await acquire_without_blocking_the_loop(thread_lock, taken)
                listeners = self._checked_listeners("clear", "aclear_messages")  # one put on while it waited
                self._clear_holding_lock()
            finally:
                if taken[0]:
                    thread_lock.release()
        # Both locks released first, as clear_messages does: a listener that waits for another thread's
        # change (or task's) must not wait on a lock this call still holds (review bk F1).
        raise_listeners_outcome(*await self._history_changed_on_loop("clear", listeners, "aclear_messages"))

    # -- adding ------------------------------------------------------------------------------------

    def add_message(self, **arguments: Unpack[AddMessageArguments]) -> Message:
        """Build or update one message (see `lionmsg.runtime.factories`), add or replace it, then call
        the observers. An observer's failure is raised after all have run; the message stays.

        The keyword arguments are those of `AddMessageArguments` (LionAGI's names); None means "not
        given" for every one of them."""
        if not arguments.keys() <= _ADD_ARGUMENTS:
            _reject_arguments("add_message", arguments)
        pile = self.messages
        with pile._lock:  # not the property (pydantic's attribute hook); `with`, not acquire(): see Pile.include
            # A snapshot, before the build (ADR D4): observers added meanwhile, even by an observer, wait
            # for the next message. Taken under the lock, so an observer hooked in under it (a store's
            # attach, which writes the history as it is) either runs for this message or sees it written.
            observers = self.on_message_added
            callbacks: Sequence[MessageCallback] = ()
            if observers:
                check_observer_list(observers)
                callbacks = tuple(observers)
                sync_preflight(callbacks)
            elif type(observers) is not list and observers is not None:  # None is none, as at construction;
                check_observer_list(observers)  # {} or 0 put there is no list of observers, empty or not
            message, listeners = self._change(pile, arguments)  # type: ignore[arg-type]  # a fresh dict per call: ours to consume
            if self._latest_change_began is not None:
                self._note_change_ended()
        # What the history listeners raised for a system message (they run after the lock is released);
        # raised after the observers ran.
        listeners_failed = None if listeners is None else self._system_listeners_failed(listeners)
        if callbacks:
            try:
                run_sync_callbacks(callbacks, message)
            except BaseException as observers_failed:  # the sync path cannot be cancelled: every one is a failure
                raise_hook_failures(listeners_failed, observers_failed, "add_message")
        if listeners_failed is not None:
            raise listeners_failed
        return message

    async def a_add_message(self, **arguments: Unpack[AddMessageArguments]) -> Message:
        """`add_message` for async code: builds and commits under the pile's lock, releases it, then
        calls (and awaits) a snapshot of the observers taken after the commit."""
        if not arguments.keys() <= _ADD_ARGUMENTS:
            _reject_arguments("a_add_message", arguments)
        # The locks' own acquire and release rather than `async with self.messages`: the pile's
        # __aenter__/__aexit__ are two more coroutines per call (~8k of ~137k instructions).
        pile = self.messages
        lock = pile.lock
        await lock.acquire()
        try:
            thread_lock = pile._lock
            # Taken inside the `try` (a `with` cannot wait without blocking the loop) and released exactly
            # when this call took it, also when a Ctrl-C lands as acquire() returns (reviews bl, bp, br).
            # Usually no thread holds it: then a bare acquire() will do, and the release in the `finally`
            # tells whether it was taken (RuntimeError when this thread does not hold it; `take` and its
            # record cost ~2% of an add). Held by this thread already (re-entered: a release after an
            # interrupt before the acquire, which Python 3.10 can handle there, would let go of the hold
            # around this call) or by another (then waited for), `taken` records it, as `take` writes it.
            taken = [False] if thread_lock._is_owned() else None
            try:
                if taken is not None:
                    take(thread_lock, taken)
                elif not thread_lock.acquire(False):  # another thread holds the pile: wait, not block
                    taken = [False]
                    await acquire_without_blocking_the_loop(thread_lock, taken)
                observers = self.on_message_added  # here, not before the wait: a hook put on it meanwhile counts
                if observers or (type(observers) is not list and observers is not None):  # {} or 0 refused too
                    callable_preflight(observers)
                message, listeners = self._change(pile, arguments, "a_add_message")  # type: ignore[arg-type]  # a fresh dict per call: ours to consume
                if self._latest_change_began is not None:
                    self._note_change_ended()
            finally:
                if taken is None:
                    # No call between a test and the release, where a Ctrl-C could land.
                    try:
                        thread_lock.release()
                    except RuntimeError as error:  # cut short before it was taken; a signal handler's own
                        if error.args != NOT_HELD:  # error, raised as release() returned, goes on
                            raise
                elif taken[0]:
                    thread_lock.release()
            # Neither is read again, and the frame waits on the observers below: thousands of adds can wait
            # at once (a gather), and the collector walks what each one keeps (see run_async_callbacks).
            del taken, arguments
            # The snapshot (ADR D4: after the commit), before the history listeners run: what they change
            # applies to the next add, as on the sync path.
            callbacks = list(self.on_message_added or ())
            listeners_failed = None
            if listeners is not None:
                listeners_failed, stop = await self._history_changed_on_loop(
                    "system", listeners, "a_add_message(system=...)"
                )
                if stop is not None:  # the observers do not run, as when a stop comes while one awaits
                    raise_listeners_outcome(listeners_failed, stop)
        finally:
            lock.release()
        # The usual observers, `async def` functions, are called and awaited here: one coroutine fewer for
        # each of thousands of adds waiting at once (see run_async_callbacks). run_async_callbacks runs
        # the rest from the first other observer, or after the first failure (settled by its rules).
        position = 0
        failed: tuple[BaseException, ...] = ()
        while position < len(callbacks) and not failed:
            callback = callbacks[position]
            if type(callback) is not FunctionType or not callback.__code__.co_flags & CO_COROUTINE:
                break
            position += 1
            made = None
            try:
                made = callback(message)
                await made
            except BaseException as error:
                failed = observer_failed(
                    error, made is None, failed, callbacks, position, message, listeners_failed, "a_add_message"
                )
        if position < len(callbacks) or failed or listeners_failed is not None:
            await run_async_callbacks(callbacks, message, listeners_failed, "a_add_message", position, failed)
        return message

    def _change(
        self, pile: Pile[Message], arguments: dict[str, Any], caller: str = "add_message"
    ) -> tuple[Message, tuple[HistoryListener, ...] | None]:
        """Build, add or replace the message; with it, when it is the system message, the history
        listeners to tell (checked before the change), else None. The caller holds
        the pile's thread lock, so a message revised in place is not seen half revised by another thread;
        `caller` names its public method in errors."""
        if self._latest_change_began is not None:
            self._latest_change_began = changes_made(pile)
        given = arguments.get("instruction")
        if type(given) is Instruction:  # the one message the direct roads revise in place (add-or-replace)
            stored = _holds_in_step(pile, given)  # before the revision: refused, it must change nothing
            revised = revise_instruction(arguments)  # what build_common does for it
            if revised is not None:
                # A new message, or a copy of the stored one: added, or put at its index (revise_instruction
                # revises the given message in place, so `revised is given` whenever it held already).
                if not stored or revised is not given:
                    pile._update_holding_lock(revised)
                return revised, None
        else:
            direct = build_common(arguments)  # the usual calls: no kind to resolve (never a system message)
            if direct is not None:
                given_alone = arguments.get("assistant_response"), arguments.get("action_request")
                kept_as_given = direct is given_alone[0] or direct is given_alone[1]
                if kept_as_given:
                    _holds_in_step(pile, direct)  # a reply or tool call given alone: kept as it is, not revised
                pile._update_holding_lock(direct)
                return direct, None
        listeners = None
        if arguments.get("system"):  # before the build, which may revise the given System in place
            listeners = self._checked_listeners("system", f"{caller}(system=...)")
            # _install_system reads the current system after the build has revised the given one: an
            # order whose head the pile does not hold (out of step) must refuse before, here.
            _ = self.system
        _refuse_revising_out_of_step(pile, arguments)
        pop = arguments.pop
        message = build_message(arguments, pop("sender", None), pop("recipient", None), pop("metadata", None))
        if isinstance(message, System):
            self._install_system(message)
            return message, listeners or ()
        pile._update_holding_lock(message)  # add-or-replace: a present id keeps its index
        return message, None

    create_action_response = staticmethod(create_action_response)

    # -- changes behind the manager's back (for stores) -------------------------------------------

    def _track_changes(self) -> None:
        """Start noting where each change made through the manager begins (see `_nothing_else_since`)."""
        if self._latest_change_began is None:
            self._latest_change_began = changes_made(self.messages)

    def _note_change_ended(self) -> None:
        """Mark where the latest change made through the manager ended (the caller holds the pile's lock):
        a change made through the pile between it and a store's write then shows (`_nothing_else_since`)."""
        if self._latest_change_began is not None:
            self._latest_change_ended = changes_made(self.messages)

    def _nothing_else_since(self, pile: Pile[Message], seen: tuple[int, int]) -> bool:
        """Whether `pile` is still the history and, since `changes_made` marked it `seen`, changed only
        through the latest change made through the manager, or not at all. False means its messages or
        their order were changed through the pile or its progression directly (or the pile replaced),
        also after that change and before the caller's write: a store that wrote the history as of
        `seen` must rewrite it. Needs `_track_changes` first."""
        if pile is not self.messages:
            return False
        now = changes_made(pile)
        return seen == now or (seen == self._latest_change_began and now == self._latest_change_ended)

    # -- views -------------------------------------------------------------------------------------

    @property
    def instructions(self) -> Pile[Message]:
        return self.messages.filter_by_type(Instruction, strict_type=True, as_pile=True)

    @property
    def assistant_responses(self) -> Pile[Message]:
        return self.messages.filter_by_type(AssistantResponse, strict_type=True, as_pile=True)

    @property
    def actions(self) -> Pile[Message]:
        return self.messages.filter_by_type((ActionRequest, ActionResponse), strict_type=True, as_pile=True)

    @property
    def action_requests(self) -> Pile[Message]:
        return self.messages.filter_by_type(ActionRequest, strict_type=True, as_pile=True)

    @property
    def action_responses(self) -> Pile[Message]:
        return self.messages.filter_by_type(ActionResponse, strict_type=True, as_pile=True)

    @property
    def last_response(self) -> AssistantResponse | None:
        return self._last(AssistantResponse)  # type: ignore[return-value]

    @property
    def last_instruction(self) -> Instruction | None:
        return self._last(Instruction)  # type: ignore[return-value]

    def _last(self, kind: type[Message]) -> Message | None:
        messages = self.messages
        with messages._lock:  # held while the search walks back from the end: nothing is copied first
            for ident in messages.progression._reversed_holding_lock():
                try:
                    message = messages[ident]
                except KeyError:  # an id put in the order behind the pile's back: as every read says
                    raise messages._out_of_step() from None
                if type(message) is kind:
                    return message
        return None

    # -- projection --------------------------------------------------------------------------------

    def to_chat_msgs(self, progression: Any = None, *, _use_render_cache: bool = True) -> list[dict[str, Any]]:
        """`{"role", "content"}` for each message of `progression` (ids, UUID strings or positions), or
        of the whole history when it is None or falsy; an empty list gives an empty list. A reference
        to no message, or a message that cannot render, raises ValueError. `_use_render_cache` is
        LionAGI's keyword, taken so that code passing it ports: rendering is never cached here."""
        if isinstance(progression, list) and not progression:
            return []
        messages = self.messages
        with messages._lock:  # the messages as of one moment, the order given or the history's own
            order = progression if progression else messages.progression
            try:
                return [_chat_msg(messages[ref]) for ref in order]
            except Exception as exc:
                # The history's own order naming an id the pile lacks is the cause, not its KeyError; a
                # KeyError raised while rendering is its own.
                if not progression and isinstance(exc, KeyError) and any(ref not in messages for ref in order):
                    raise ValueError(INVALID_PROGRESSION) from messages._out_of_step()
                raise ValueError(INVALID_PROGRESSION) from exc

    # -- container protocol and records ------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.messages)

    def __repr__(self) -> str:
        try:
            current = self.system
        except ValueError:  # out of step: said, not raised (a debugger or a log line asks exactly then)
            system = "unknown (the pile is out of step with its progression)"
        else:
            system = "none" if current is None else str(current.id)
        return (
            f"<MessageManager: {counted(len(self.messages), 'message')}, system {system}, "
            f"{counted(len(self.on_message_added or ()), 'observer')}, "  # None is none, as add_message reads it
            f"{counted(len(self.on_history_changed or ()), 'history listener')}>"
        )

    def __bool__(self) -> bool:
        return bool(self.messages)

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages)

    def __contains__(self, ref: Any) -> bool:
        return ref in self.messages

    def to_dict(self, mode: Literal["json", "python"] = "json") -> dict[str, Any]:
        """The history as a record: the messages (a pile record, in order) and the system's id. `mode`
        as every container's (`"python"` keeps free-form values as they are; anything else is the
        ValueError the piles raise). In JSON mode a NaN or infinity in a message is a ValueError naming
        where it is in this record."""
        check_mode(mode)
        with self.messages._lock, finite_parts_noted() as finite_parts:  # the history as of one moment
            refuse_misplaced_system(self)
            system = self.system
            try:
                messages = record_of_part(self.messages, mode, "$.messages")
            except RecursionError:
                raise ValueError(UNWRITABLE_DEPTH) from None
        record = {
            "messages": messages,
            "system": None if system is None else str(system.id),
        }
        if mode == "json":
            check_finite(record, finite_parts)
        return record

    def to_json(self) -> str:
        """The record as compact JSON text, written as every element's `to_json` writes."""
        return write_json(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MessageManager:
        """The history a record holds: `messages` (a pile record) and `system` (the id of the system
        message it holds, in any case the schema's UUID pattern allows, or null). A ValueError when it
        is malformed: a pydantic ValidationError (a ValueError, titled MessageManager) for `messages`
        that is no pile record or a malformed one (located within the whole record, at
        `("messages", "collections", 2, ...)`) or a key other than those two (`extra_forbidden`, as the
        element records give), else a plain one."""
        if not isinstance(data, Mapping) or "messages" not in data:
            raise ValueError("a MessageManager record needs `messages` (a pile record)")
        _refuse_unknown_keys(data)
        messages = data["messages"]
        if not isinstance(messages, Mapping):  # what to_dict writes; a list is the constructor's form
            raise record_error(cls, ("messages",), "messages must be a pile record", messages)
        manager = part_of_record(cls, ("messages",), functools.partial(cls, messages=messages))
        system_id = data.get("system")
        system = manager.system
        # A UUID itself is a python-mode record's spelling (model_dump); text is the schema's.
        named_id = system_id if type(system_id) is UUID else parse_canonical_uuid(system_id)
        named = system_id is None if system is None else named_id == system.id
        if not named:  # compared as UUIDs: the record may spell the id in upper case
            expected = None if system is None else str(system.id)
            raise ValueError(f"the record names system {system_id!r}, its messages hold {expected!r}")
        return manager

    @classmethod
    def from_json(cls, json_str: str | bytes) -> MessageManager:
        return cls.from_dict(loads_json(json_str))


_RECORD_KEYS = frozenset({"messages", "system"})

# The arguments that may give a message the call revises in place and adds (an action request given
# with a tool's output is linked to the new response, not added).
_REVISED_MESSAGE_ARGUMENTS = ("instruction", "system", "assistant_response", "action_response")


def _refuse_revising_out_of_step(pile: Pile[Message], arguments: Mapping[str, Any]) -> None:
    """The pile's out-of-step ValueError, before any builder revises a given message in place, when the
    history's order names that message's id but its pile does not hold it, or the pile holds it but its
    order leaves it out (changed through `manager.progression`, behind the pile's back)."""
    names = list(_REVISED_MESSAGE_ARGUMENTS)
    if arguments.get("action_output") is None and not arguments.get("action_response"):
        names.append("action_request")
    for name in names:
        given = arguments.get(name)
        # None and text, the usual values, first: pydantic's isinstance for a model class is a Python-level
        # call that raises and catches an AttributeError for them (~2.5k instructions each).
        if given is not None and type(given) is not str and isinstance(given, Message):
            _holds_in_step(pile, given)


def _holds_in_step(pile: Pile[Message], message: Message) -> bool:
    """Whether the pile holds this very message (so storing it again would change nothing); the pile's
    out-of-step ValueError when the message's id is ordered but not held (adding it would fail midway),
    or held but left out of the order (a replacement would have no index, and the observers that place
    it none to read)."""
    key = message.id.int
    held, order = pile._items, pile._order  # (a pydantic model's attributes: each read once)
    stored = held.get(key)
    # An order that holds only the pile's own ids (Pile._orders_only_its_own, inline) is in step, with no
    # index to make.
    if (order._mapped or len(order._slots) != len(held)) and (stored is None) is (key in order._slot_of):
        raise pile._out_of_step()
    return stored is message


def _refuse_unknown_keys(data: Mapping[str, Any]) -> None:
    """A ValidationError (`extra_forbidden`, one error per key, as pydantic reports it for Branch, Pile
    and the other records) when a manager record holds a key other than `messages` and `system`."""
    errors: list[InitErrorDetails] = [
        {"type": "extra_forbidden", "loc": (key,), "input": data[key]} for key in data if key not in _RECORD_KEYS
    ]
    if errors:
        raise ValidationError.from_exception_data(MessageManager.__name__, errors)


def misplaced_system(manager: MessageManager) -> tuple[int, System] | None:
    """The first System message the history holds after index 0 (put there through the pile, behind
    the manager's back), with its index, or None. A record of such a history would not load (a System
    among the messages becomes the system at index 0), so the record writers refuse it."""
    for index, message in enumerate(manager.messages):
        if index and isinstance(message, System):
            return index, message
    return None


def refuse_misplaced_system(manager: MessageManager) -> None:
    """ValueError when the history holds a System message anywhere but at index 0."""
    found = misplaced_system(manager)
    if found is not None:
        raise ValueError(misplaced_system_text(*found))


def refuse_unhookable(manager: MessageManager) -> None:
    """TypeError unless the manager's observer and listener lists are lists: code that follows a history
    (a Branch's view, a store) puts its hooks into them, which a tuple or None (what `add_message` also
    takes for none) cannot hold. Both are checked before either changes."""
    for hooks in ("on_message_added", "on_history_changed"):
        if not isinstance(getattr(manager, hooks), list):
            raise TypeError(f"the manager's {hooks} must be a list, got {type(getattr(manager, hooks)).__name__}")


def misplaced_system_text(index: int, system: System) -> str:
    return (
        f"the history holds a System message at index {index} ({system.id}); the system message belongs "
        "at index 0 (set_system puts it there)"
    )


def _chat_msg(message: Message) -> dict[str, Any]:
    # Strict, unlike Message.chat_msg: a rendering failure propagates (no holes in the projection).
    return {"role": message.role.value, "content": message.rendered}


def _messages_from(messages: Any) -> list[Message]:
    """Messages from a list or tuple (dicts rebuilt as records, other entries ignored as ADR D3 says), a
    Pile, or a serialized pile; anything else is a TypeError (design.md §6.8)."""
    if messages is None:
        return []
    if isinstance(messages, Pile):
        messages = list(messages)
    if not isinstance(messages, (list, tuple)):
        raise TypeError(f"messages must be a list, a tuple, a Pile or a serialized pile, got {type(messages).__name__}")
    loaded = []
    for entry in messages:
        if isinstance(entry, Message):
            loaded.append(entry)
        elif isinstance(entry, Mapping):
            loaded.append(Message.from_dict(entry))
    return loaded


_ADD_ARGUMENTS = AddMessageArguments.__optional_keys__


def _keyword_signature(method: Any) -> inspect.Signature:
    """`method`'s signature as `help()` and IDEs should show it: LionAGI's keyword arguments, each
    defaulting to None, in place of `**arguments` (which saves binding twenty defaults per call)."""
    keywords = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=_annotation_text(annotation))
        for name, annotation in AddMessageArguments.__annotations__.items()
    ]
    signature = inspect.signature(method)
    return signature.replace(parameters=[signature.parameters["self"], *keywords])


def _annotation_text(annotation: Any) -> Any:
    # A TypedDict keeps postponed annotations as ForwardRefs: show their text, as for the other parameters.
    return getattr(annotation, "__forward_arg__", annotation)


for _method in (MessageManager.add_message, MessageManager.a_add_message):
    cast(Any, _method).__signature__ = _keyword_signature(_method)


def _reject_arguments(method: str, arguments: Mapping[str, Any]) -> NoReturn:
    # What Python says for a keyword the signature lacks (the first one, in the order given).
    unknown = next(name for name in arguments if name not in _ADD_ARGUMENTS)
    raise TypeError(f"MessageManager.{method}() got an unexpected keyword argument {unknown!r}")


def _observer_list(observers: Any) -> list[MessageCallback]:
    """The observers list a manager keeps: a list itself (by reference: the caller may change it later),
    another iterable copied (text, bytes and mappings are none); TypeError for anything else or an
    entry that is not callable."""
    if observers is None:
        return []
    if isinstance(observers, (str, bytes, Mapping)) or not isinstance(observers, Iterable):
        raise TypeError(f"on_message_added must be a list of callables, got {type(observers).__name__}")
    listed = observers if isinstance(observers, list) else list(observers)
    for observer in listed:
        if not callable(observer):
            raise TypeError(f"on_message_added must be a list of callables, got an entry {observer!r}")
    return listed
