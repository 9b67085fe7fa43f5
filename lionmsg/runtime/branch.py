"""Branch: the thin facade over one MessageManager that operations own (ADR-0006 D3). No model calls."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from uuid import UUID

from pydantic import SerializerFunctionWrapHandler, ValidationError, field_serializer, field_validator, model_serializer
from pydantic_core import InitErrorDetails

from lionmsg.generated.messages import Message, System
from lionmsg.generated.roles import MessageRole
from lionmsg.runtime.addressing import PlainName, SenderRecipient, normalize_address, record_address
from lionmsg.runtime.callbacks import MessageCallback
from lionmsg.runtime.element import (
    Element,
    chosen_keys,
    chosen_parts,
    part_of_record,
    parts_later,
    record_error,
    record_of_part,
)
from lionmsg.runtime.fastpath import dump_address
from lionmsg.runtime.ids import parse_canonical_uuid, uuid_text
from lionmsg.runtime.lockinghooks import LockedCall
from lionmsg.runtime.manager import MessageManager, refuse_misplaced_system, refuse_unhookable
from lionmsg.runtime.pile import Pile
from lionmsg.runtime.progression import Progression, assigned_back, to_uuid

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["Branch"]

CURRENT_PROGRESSION = "current_progression"


class Branch(Element):
    """An identified conversation: `msgs` (its MessageManager), `messages` (the Pile of records) and
    `progression`, which is `metadata["current_progression"]` when set (a selected view; the records it
    leaves out stay in `messages`) and the whole history otherwise.

    As in LionAGI, the view follows its history: a message added (or replaced) joins it when it is not
    in it yet, and after `set_system` / `clear_messages` it names only messages the history holds, with
    the current system message first. The branch does this through one message-added observer and
    one history listener on its manager (they appear in `msgs.on_message_added` and
    `msgs.on_history_changed`).

    `user` (who the branch speaks for: a role, a UUID or a name, normalised as a sender is) and `name`
    are LionAGI's labels, kept in the branch's record; `user` is the sender of a system prompt given as
    text unless `system_sender` names another."""

    _built_by_its_constructor = True

    user: SenderRecipient | None = None
    name: str | None = None

    if TYPE_CHECKING:
        _msgs: MessageManager

    def __init__(
        self,
        messages: Any = None,
        system: System | str | None = None,
        progression: Progression | list[Any] | None = None,
        on_message_added: list[MessageCallback] | None = None,
        msgs: MessageManager | None = None,
        system_datetime: Any = None,
        system_sender: Any = None,
        **data: Any,
    ) -> None:
        super().__init__(**data)
        if msgs is None and _is_branch_record(messages, system, data):
            # A Branch record's form, as model_validate(model_dump()) passes it: `system` is the id of
            # the system message the pile record holds, checked as from_dict checks it.
            msgs = MessageManager.from_dict({"messages": messages, "system": system})
            messages = system = None
        if msgs is not None and not isinstance(msgs, MessageManager):
            raise TypeError(f"msgs must be a MessageManager, got {type(msgs).__name__}")
        if not isinstance(system, System) and not system:
            system = None  # an empty (falsy) prompt is no prompt, as LionAGI's Branch and add_message read it
        elif not isinstance(system, (System, str)):  # as add_message(system=...) refuses it
            raise ValueError(f"system must be a System or a string, got {type(system).__name__}")
        given = (messages, system, progression, on_message_added)
        if msgs is not None and any(value is not None for value in given):
            raise ValueError("pass either msgs or messages/system/progression/on_message_added, not both")
        # LionAGI's Branch tests system_datetime and system_sender for truth: falsy ones are "not given",
        # and a sender with no system message to build is ignored, as there. The time alone gives the
        # default system message, but only to a branch given no messages, whose own System it would
        # otherwise replace.
        no_messages = messages is None or (isinstance(messages, (list, tuple, Pile)) and not len(messages))
        time_alone = system is None and msgs is None and no_messages
        if system_datetime and not (isinstance(system, str) or time_alone):
            raise ValueError("system_datetime goes with a system prompt given as text")
        if system_sender and isinstance(system, System):
            raise ValueError("system_sender goes with a system prompt given as text")
        if isinstance(system, str) or (time_alone and system_datetime):
            # LionAGI's Branch(system="..."): a system message to this branch
            content = {"system_datetime": system_datetime or None}
            if system is not None:
                content["system_message"] = system
            sender = system_sender or self.user or MessageRole.SYSTEM  # LionAGI's choice, in its order
            system = System(content=content, sender=sender, recipient=self.id)
        # A selected view's record is read before the manager is built: that may move a system message to
        # the front of the caller's progression, which a refused record must leave as it was.
        view = self.metadata.get(CURRENT_PROGRESSION)
        selected = None
        if isinstance(view, Mapping):  # its errors located in the branch's record (review by 2)
            selected = part_of_record(
                type(self), ("metadata", CURRENT_PROGRESSION), lambda: Progression.from_dict(view)
            )
        # The ids of the messages given, when a view comes with them: the new manager may leave some out
        # (the Systems other than the one it keeps), and the view must not name those.
        offered = _ids_given(messages) if msgs is None and CURRENT_PROGRESSION in self.metadata else []
        # `is None`, not `or`: an empty manager is falsy, and the caller's (with its observers) must stay.
        manager = msgs if msgs is not None else MessageManager(messages, progression, system, on_message_added)
        object.__setattr__(self, "_msgs", manager)  # plain attribute: pydantic PrivateAttrs are slow
        if selected is not None:
            self.metadata[CURRENT_PROGRESSION] = selected
        # The selected view follows the history, as LionAGI's branch keeps it: added messages join it,
        # and set_system / clear_messages never leave it naming messages the history no longer holds.
        # First, and sync: an observer before it that fails does not stop it, but a cancellation while one
        # awaits stops every later one, and the committed message must still join the view.
        # What can raise comes before the hooks go on: a refused Branch leaves a manager it was given as it
        # was. (Its system is read only for a manager built here, in step: a caller's manager whose order
        # names an id its pile does not hold is wrapped as it is, and says so when used.)
        kept = manager.system if offered else None
        refuse_unhookable(manager)
        manager.on_message_added.insert(0, LockedCall(manager, self._track_in_view))
        manager.on_history_changed.append(LockedCall(manager, self._keep_view_in_step))
        left_out = [ident for ident in offered if ident not in manager.messages]
        if left_out:
            self._drop_from_view(left_out)
        if kept is not None:
            self._put_first_in_view(kept.id)  # the manager put it at index 0 (a view naming it follows)

    def _put_first_in_view(self, system_id: UUID) -> None:
        """Move the system message to the front of a view given with the messages, when the view names
        it elsewhere; a view that does not name it is left alone (as are a list's or tuple's spellings)."""
        view = self.metadata.get(CURRENT_PROGRESSION)
        if isinstance(view, Progression):
            if system_id in view and view[0] != system_id:
                view.exclude(system_id)
                view.insert(0, system_id)
        elif isinstance(view, (list, tuple)):
            naming = [ref for ref in view if _as_id(ref) == system_id]
            if naming and view[0] is not naming[0]:
                rest = [ref for ref in view if _as_id(ref) != system_id]
                self.metadata[CURRENT_PROGRESSION] = type(view)([*naming, *rest])

    def _drop_from_view(self, left_out: list[UUID]) -> None:
        """Take the messages the new manager left out of a view given with them (nothing else in it
        changes; a list or tuple stays one, an entry that is no id stays for `progression` to report)."""
        view = self.metadata.get(CURRENT_PROGRESSION)
        if isinstance(view, Progression):
            view.exclude([ident for ident in left_out if ident in view])
        elif isinstance(view, (list, tuple)):
            gone = set(left_out)
            self.metadata[CURRENT_PROGRESSION] = type(view)(ref for ref in view if _as_id(ref) not in gone)

    def _view(self) -> Progression | None:
        """The selected view: a Progression, or a list or tuple of ids (LionAGI honours those too), kept
        as a Progression from its first use so that it follows the history; None when there is none or
        the value cannot be one (the `progression` property says why; the observers leave it alone)."""
        with self._msgs.messages._lock:  # two threads converting one list would each keep their own
            view = self.metadata.get(CURRENT_PROGRESSION)
            if isinstance(view, (list, tuple)):
                try:
                    converted = Progression(order=view)
                except (TypeError, ValueError):  # not ids, or an id twice: reading the view reports it
                    return None
                view = self.metadata[CURRENT_PROGRESSION] = converted
        return view if isinstance(view, Progression) else None

    # The view follows the history under the history's thread lock: observers run after the lock is
    # released, and threads adding at once would otherwise place their messages by positions that
    # another thread's placement has just changed.

    def _track_in_view(self, message: Message) -> None:
        with self._msgs.messages._lock:
            view = self._view()
            if view is None or isinstance(message, System) or message.id in view:
                return  # a system message is placed by _keep_view_in_step
            # Only while the history holds it: an observer before this one may have cleared it, and an
            # observer list shared with another history calls this for that history's messages too.
            if message.id not in self._msgs.messages:
                return
            # Where the history has it: observers run after the addition, so another message may have
            # been added (and tracked) since (an observer that adds one, concurrent adds).
            history = self._msgs.progression
            if history and history[-1] == message.id:  # appended (the usual add): after every id the view names, and
                view.append(message.id)  # placed without the history's id -> position index (made on first use)
                return
            place = history.index(message.id)
            slot = len(view)
            while slot and _place_in(history, view[slot - 1]) > place:
                slot -= 1
            if slot == len(view):
                view.append(message.id)
            else:
                view.insert(slot, message.id)

    def _keep_view_in_step(self, event: str) -> None:
        with self._msgs.messages._lock:
            view = self._view()
            if view is None:
                return
            held = self._msgs.messages
            gone = [ident for ident in view if ident not in held]  # a replaced system, or all cleared
            if gone:
                view.exclude(gone)
            system = self._msgs.system
            if system is not None and (not view or view[0] != system.id):  # the current system first
                view.exclude(system.id)
                view.insert(0, system.id)

    @field_validator("user", mode="plain")
    @classmethod
    def _normalize_user(cls, value: Any) -> SenderRecipient | None:
        return normalize_address(value)

    @field_serializer("user")
    def _write_user(self, value: SenderRecipient | None) -> Any:
        return dump_address(value)

    async def __aenter__(self) -> Self:
        """`async with Branch(...) as branch:` as LionAGI's docs write it. LionAGI dumps the branch's
        logs on exit; a lionmsg branch keeps none, so leaving changes nothing (and takes no lock)."""
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    @property
    def msgs(self) -> MessageManager:
        return self._msgs

    @property
    def messages(self) -> Pile[Message]:
        return self._msgs.messages

    @property
    def on_message_added(self) -> list[MessageCallback]:
        """The manager's live observer list, as LionAGI's Branch gives it (the branch's own observer,
        which keeps its current progression, is in it)."""
        return self._msgs.on_message_added

    @property
    def system(self) -> System | None:
        return self._msgs.system

    @property
    def progression(self) -> Progression:
        """`metadata["current_progression"]` when present (a Progression, or a list or tuple of ids),
        else the whole history's order. Any other value there is a TypeError, and a list that cannot be
        a Progression raises what its constructor raises (TypeError for an entry of no id's type,
        ValueError for text that is no UUID or an id twice)."""
        view = self._view()
        if view is not None:
            return view
        self._check_view()
        return self._msgs.progression

    @progression.setter
    def progression(self, value: Progression) -> None:
        # The view when one is selected (`branch.progression -= ids` drops ids from the view). Compared
        # with what the metadata holds, unread: reading the property would turn a list view into a
        # Progression, a change made by an assignment that is refused (review bp).
        view = self.metadata.get(CURRENT_PROGRESSION)
        current = self._msgs.progression if view is None else view
        if not isinstance(current, Progression):  # a list not read as a view yet: nothing handed out
            current = None
        assigned_back("branch.progression", current, value)

    def _check_view(self) -> None:
        """Raise what makes `metadata["current_progression"]` no view, changing nothing."""
        given = self.metadata.get(CURRENT_PROGRESSION)
        if given is None or isinstance(given, Progression):
            return
        if isinstance(given, (list, tuple)):
            Progression(order=given)  # raises what makes it no view: not ids (TypeError), an id twice
            return
        raise TypeError(
            f"metadata[{CURRENT_PROGRESSION!r}] must be a Progression or a list of ids, not {type(given).__name__}"
        )

    def _unchecked_record(self, mode: str) -> dict[str, Any]:
        with self._msgs.messages._lock:  # the view, the messages and the system as of one moment
            return super()._unchecked_record(mode)

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler, info: Any) -> dict[str, Any]:
        with self._msgs.messages._lock:
            return self._record(handler, info)

    def _record(self, handler: SerializerFunctionWrapHandler, info: Any) -> dict[str, Any]:
        record: dict[str, Any] = handler(self)
        handled = set(record)  # the keys pydantic made (its options applied), before the parts
        view = self.metadata.get(CURRENT_PROGRESSION)  # as it is: writing a record changes nothing
        metadata = record.get("metadata")  # absent when model_dump(exclude=...) leaves it out
        if metadata is not None and CURRENT_PROGRESSION not in metadata:  # the view excluded by the options
            metadata = None
        if metadata is not None and isinstance(view, Progression):
            metadata[CURRENT_PROGRESSION] = record_of_part(view, info.mode, f"$.metadata.{CURRENT_PROGRESSION}")
        elif metadata is not None and isinstance(view, (list, tuple)):
            try:
                listed = Progression(order=view)
            except (TypeError, ValueError):  # no view: _check_view refuses the record below
                listed = None
            if listed is not None:  # ids as text in both modes, as a Progression view writes them
                metadata[CURRENT_PROGRESSION] = [uuid_text(ident) for ident in listed]
        if metadata is not None and CURRENT_PROGRESSION in metadata:
            # Written here, over pydantic's dump of it: the options reach into it as pydantic's reached.
            chosen = chosen_keys(
                {"metadata": {CURRENT_PROGRESSION: metadata[CURRENT_PROGRESSION]}}, info.include, info.exclude
            )
            metadata[CURRENT_PROGRESSION] = chosen["metadata"][CURRENT_PROGRESSION]
        if not parts_later(info):
            self._add_part_records(record, info.mode)
        return chosen_parts(record, info, handled)

    def _add_part_records(self, record: dict[str, Any], mode: str) -> None:
        # In the asked mode, unchecked: to_dict checks the whole record (naming `$.messages...`), and a
        # python-mode dump keeps what JSON cannot hold (NaN).
        refuse_misplaced_system(self._msgs)  # its record would not load
        self._check_view()  # nor would one with a view that is no Progression or list of ids
        record["messages"] = record_of_part(self._msgs.messages, mode, "$.messages")
        system = self._msgs.system
        record["system"] = None if system is None else str(system.id)

    @classmethod
    def _prepare_record(cls, record: dict[str, Any]) -> None:
        # The constructor's own arguments are no record keys: refused as any other unknown key is, not
        # dropped unread (review ci F3).
        errors: list[InitErrorDetails] = [
            {"type": "extra_forbidden", "loc": (key,), "input": record[key]}
            for key in _CONSTRUCTOR_ONLY
            if key in record
        ]
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, errors)
        _check_recorded_view(cls, record.get("metadata"))
        user = record.get("user")
        if type(user) is str:  # as a message record's sender: a name stays a name, even bare hex
            address = record_address(user)
            record["user"] = PlainName(address) if type(address) is str else address
        system_id = record.pop("system", None)
        if "messages" in record:  # the manager's errors are the Branch record's, at the same places
            manager_record = {"messages": record.pop("messages"), "system": system_id}
            record["msgs"] = part_of_record(cls, (), functools.partial(MessageManager.from_dict, manager_record))
        elif system_id is not None:
            raise record_error(cls, ("system",), "the record names a system message but holds no messages", system_id)


# Branch(...) takes these; its records never hold them.
_CONSTRUCTOR_ONLY = ("msgs", "progression", "on_message_added", "system_datetime", "system_sender")


def _check_recorded_view(cls: type[Branch], metadata: Any) -> None:
    """A ValidationError naming `metadata.current_progression` when a record's view is one the branch
    could not write back (`_check_view`): neither null, a progression record (which loading checks) nor
    a list of distinct ids."""
    if not isinstance(metadata, Mapping) or CURRENT_PROGRESSION not in metadata:
        return
    view = metadata[CURRENT_PROGRESSION]
    if view is None or isinstance(view, Mapping):
        return
    loc = ("metadata", CURRENT_PROGRESSION)
    if not isinstance(view, list):
        message = f"{CURRENT_PROGRESSION} must be a progression record, a list of ids or null"
        raise record_error(cls, loc, message, view)
    try:
        Progression(order=view)
    except (TypeError, ValueError) as error:  # not ids, or an id twice
        raise record_error(cls, loc, f"{CURRENT_PROGRESSION} is no list of distinct ids: {error}", view) from None


def _is_branch_record(messages: Any, system: Any, data: Mapping[str, Any]) -> bool:
    """Whether the constructor's arguments are a Branch record's (a pile record and its system's id):
    `system` is UUID text, or text or null with the record's own `id` and `created_at` beside it (a whole
    record, as model_validate passes it: read as from_dict reads it). Other text given with a serialized pile is a
    prompt, as with a list of messages (LionAGI's Branch reads it so)."""
    if not _is_pile_record(messages):
        return False
    if "id" in data and "created_at" in data:  # the record's own identity: a whole record, as dumped
        return system is None or isinstance(system, str)
    return isinstance(system, str) and parse_canonical_uuid(system) is not None


def _is_pile_record(messages: Any) -> bool:
    """Whether `messages` is a whole pile record (what a Branch record holds), not a list or a Pile."""
    return isinstance(messages, Mapping) and "id" in messages and "created_at" in messages


def _place_in(history: Progression, ident: UUID) -> int:
    """An id's index in the history; -1 for one it does not hold (a view may name other ids)."""
    return history.index(ident) if ident in history else -1


def _ids_given(messages: Any) -> list[UUID]:
    """The ids of the messages given to build a history (elements, message records, a Pile or a pile
    record's items), for what the manager may leave out; entries without one are skipped."""
    if isinstance(messages, Pile):
        return messages.keys()
    items = messages.get("collections") if isinstance(messages, Mapping) else messages
    if not isinstance(items, (list, tuple)):
        return []
    found = (_as_id(item.get("id") if isinstance(item, Mapping) else getattr(item, "id", None)) for item in items)
    return [ident for ident in found if ident is not None]


def _as_id(ref: Any) -> UUID | None:
    """The id a view's entry or a given message names, in any spelling a Progression takes; None for none."""
    try:
        return to_uuid(ref)
    except (TypeError, ValueError):
        return None
