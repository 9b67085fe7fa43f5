"""Behaviour of the message envelope (ADR-0006 D1).

The fields of `Message` and of its five typed kinds are generated from `schemas/` into
`lionmsg/generated/messages.py`; every generated class derives from `MessageBehaviour`, which
supplies what is not data shape: role fixing, routing predicates, rendering, chat projection,
`update()` and `clone()`, and the record hooks.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import (
    BaseModel,
    FieldSerializationInfo,
    WithJsonSchema,
    computed_field,
    field_serializer,
    model_validator,
)

from lionmsg.generated.roles import MessageRole
from lionmsg.runtime.addressing import PlainName, SenderRecipient, normalize_address, record_address
from lionmsg.runtime.concepts import Sendable
from lionmsg.runtime.content.base import MessageContent, copy_value, owned_copy, refuse_iterators
from lionmsg.runtime.element import Node, check_embedding, chosen_data, element_class, record_error
from lionmsg.runtime.fastpath import (
    ENVELOPE_CLASSES,
    ENVELOPE_FIELDS,
    JSON_SCALARS,
    MISSING,
    clone_directly,
    dump_address,
    init_directly,
    json_copy,
    load_envelope,
    load_record,
    set_fields_dict,
    share_field_keys,
    trusted_instance,
)
from lionmsg.runtime.fieldsets import SharedFieldsSet, mark_field_set, own_fields_set, set_fields_set
from lionmsg.runtime.ids import uuid_text
from lionmsg.runtime.wire import UNWRITABLE_DEPTH, RecordFieldError, note_finite, on_fresh_stack
from lionmsg.runtime.wording import with_article

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["MessageBehaviour", "coerce_content"]

# Changes to a message's fields, across threads: each builds a new fields dict from the current one and
# puts it in place under this lock (a change of one value writes it in place), so no change is lost to
# another made meanwhile, and a reader, which reads the fields dict once (records, dumps, copies), sees one
# state or the next, never half of a change. Nothing but dict and set operations runs under it: values are
# validated and content is rebuilt before (a validator may deep-copy a value holding a pile, which takes
# the pile's lock, while a thread holding that lock revises a message). Pydantic's own assignment
# validates on a copy of the fields dict and puts the copy in place, so a change made in between was lost
# with the old dict (9-30 of 1,500 pairs of concurrent assignments to one message, before); a subclass's
# assignments are still pydantic's own (see __setattr__). Re-entrant for safety's sake.
_CHANGING_FIELDS = threading.RLock()
_start_changing_fields, _stop_changing_fields = _CHANGING_FIELDS.acquire, _CHANGING_FIELDS.release


def _stand_in(message: BaseModel) -> Any:
    """A message of the same generated class (no private attributes, no extras) holding a copy of the
    message's values, for pydantic's assignment to run on."""
    return trusted_instance(type(message), dict(message.__dict__), set(message.__pydantic_fields_set__))


C = TypeVar("C", bound=MessageContent)

_GENERATED_MODULE = "lionmsg.generated.messages"
# The generated kinds with typed content (not the generic Message): the ones constructors build directly.
_TYPED_KINDS: set[type[BaseModel]] = set()

RoleText = Annotated[str, WithJsonSchema({"type": "string", "enum": [role.value for role in MessageRole]})]
"""A role written as its value: what pydantic's serialization JSON schema says of it."""


def _record_of_own(data: Any) -> Any:
    """`data`, or a shallow copy of it whose content and metadata are copies, when they hold lists or
    dicts (typed content is built from the copy, so it shares nothing with the caller's record)."""
    if not isinstance(data, Mapping):
        return data  # from_dict's own TypeError
    content = data.get("content")
    metadata = data.get("metadata")
    own_content = owned_copy(content) if _is_container(content) else content
    own_metadata = _owned_metadata(metadata) if _holds_containers(metadata) else metadata
    if own_content is content and own_metadata is metadata:
        return data
    record = dict(data)
    if own_content is not content:
        record["content"] = own_content
    if own_metadata is not metadata:
        record["metadata"] = own_metadata
    return record


def _own_loaded_values(message: Any) -> None:
    """Replace the lists and dicts a message loaded from a caller's record shares with that record by
    copies (the typed content's container fields, generic content, nested metadata values)."""
    values = message.__dict__
    content = values["content"]
    if isinstance(content, MessageContent):
        content._own_containers()
    elif _is_container(content):
        values["content"] = owned_copy(content)  # which refuses an iterator inside
    else:
        refuse_iterators(content)  # an iterator is no record's value: the first record written would use it up
    metadata = values["metadata"]
    if metadata and _holds_containers(metadata):  # usually empty: the class name is not kept in it
        values["metadata"] = owned_copy(metadata)


def _is_container(value: Any) -> bool:
    """Whether a record's value is a container its caller can go on changing: a list or dict, of a
    subclass too (`json.loads(text, object_pairs_hook=OrderedDict)` makes every object one), or a
    tuple or set that may hold them."""
    return type(value) in _CONTAINERS or isinstance(value, _CONTAINER_KINDS)


def _holds_containers(value: Any) -> bool:
    """Whether a record's metadata needs a copy of its own: a dict holding a list or dict (the usual one
    holds the class name only), or any other mapping."""
    if type(value) is dict:
        return not all(type(item) in JSON_SCALARS for item in value.values())
    return isinstance(value, Mapping)


def _owned_metadata(metadata: Any) -> dict[str, Any]:
    # A mapping that is no dict (a mappingproxy, which deepcopy cannot copy) is read into a dict first.
    return owned_copy(metadata if isinstance(metadata, dict) else dict(metadata))  # type: ignore[no-any-return]


_CONTAINERS = (dict, list)
_CONTAINER_KINDS = (Mapping, list, tuple, set, frozenset)


def _merged_extra(metadata: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """A new metadata dict whose (new) `extra` dict holds `values` over the old one's."""
    merged = dict(metadata)
    extra = merged.get("extra")
    merged["extra"] = {**({} if extra is None else extra), **values}
    return merged


def coerce_content(content_type: type[C], value: Any) -> C:
    """A typed kind's content from Python input: its dataclass as is, a dict through `from_dict`,
    None as empty content; anything else is a TypeError (ADR-0006 D1). A field the dict gets wrong is
    a ValidationError located at that field, which pydantic puts under `content` (as `from_dict` of a
    record does)."""
    if isinstance(value, content_type):
        return value
    if value is None:
        return content_type()
    if isinstance(value, dict):
        try:
            return content_type.from_dict(value)
        except RecordFieldError as exc:
            raise record_error(content_type, (exc.field,), str(exc), exc.value) from None
    raise TypeError(f"content must be dict or {content_type.__name__} instance")


def keep_generic_content(value: Any) -> Any:
    """The generic Message's content: the caller's value itself (as LionAGI keeps it), but never an
    iterator, at any depth: the first record written would use it up (README: content behaviour)."""
    refuse_iterators(value)
    return value


class MessageBehaviour(Node, Sendable):
    """What every message does, whatever its kind."""

    _role: ClassVar[MessageRole]
    _content_type: ClassVar[type[MessageContent] | None]

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        # The classes generated from the schemas (fields exactly the envelope's, no validator,
        # serializer or private attribute of their own) are the ones the fast roads serve; a user's
        # subclass may add any of those, so it always takes pydantic's road.
        if cls.__module__ == _GENERATED_MODULE and set(cls.model_fields) == ENVELOPE_FIELDS:
            ENVELOPE_CLASSES.add(cls)
            share_field_keys(cls)
            if cls.__dict__.get("_content_type") is not None:
                _TYPED_KINDS.add(cls)

    if not TYPE_CHECKING:  # type checkers keep the signature pydantic's plugin gives each class

        def __init__(self, /, **data: Any) -> None:
            # A library kind built from its content and routing (how messages are usually made) is set up
            # as the add roads build one; anything else, and anything refused, goes to pydantic, whose
            # errors are the contract.
            if type(self) not in _TYPED_KINDS or not init_directly(self, data, coerce_content):
                super().__init__(**data)

        # Not a custom __init__ to pydantic: model_validate, model_validate_json and nested fields keep
        # pydantic's own validation, with its options (context=, strict=, by_alias=...), which a
        # constructor's keyword arguments cannot carry.
        __init__.__pydantic_base_init__ = True

    def __setattr__(self, name: str, value: Any) -> None:
        if type(self) in ENVELOPE_CLASSES and name in ENVELOPE_FIELDS:
            # Pydantic's assignment (the envelope's validators, which look at the value only) runs on a
            # stand-in holding this message's values, outside the lock; the value it validated is then put
            # in a copy of this message's current fields dict, swapped in under the lock.
            stand_in = _stand_in(self)
            BaseModel.__setattr__(stand_in, name, value)
            validated = stand_in.__dict__[name]
            with _CHANGING_FIELDS:
                fields = self.__dict__.copy()  # copy() keeps the shared key table; dict() would not
                fields[name] = validated
                set_fields_dict(self, fields)
                mark_field_set(self, name)  # as pydantic records it: never in a set other messages share
            return
        # A subclass's validators may look at the message itself (its private attributes, its identity, other
        # fields): pydantic's own assignment, on the message, as for any model (not atomic against changes
        # other threads make meanwhile). Pydantic records the name in the fields set: never in a shared one.
        # It writes the field before an "after" model validator runs: one that refuses leaves it written,
        # so a refusal puts the fields back.
        undo = self._undo_point()
        fields_set = self.__pydantic_fields_set__
        if type(fields_set) is SharedFieldsSet and name not in fields_set:
            own_fields_set(self)
        try:
            super().__setattr__(name, value)
        except BaseException:
            undo()
            raise

    if TYPE_CHECKING:
        # Declared by the generated classes, from schemas/envelope.schema.json.
        sender: SenderRecipient | None
        recipient: SenderRecipient | None
        channel: str | None

    @model_validator(mode="before")
    @classmethod
    def _ignore_role(cls, data: Any) -> Any:
        # The class decides the role; a supplied one (e.g. from a record) is dropped, never trusted.
        if isinstance(data, (dict, Mapping)) and "role" in data:  # dict first: the usual, and fast
            data = {k: v for k, v in data.items() if k != "role"}
        return data

    @field_serializer("content")
    def _serialize_content(self, value: Any, info: FieldSerializationInfo) -> Any:
        # Generic content may be a kind's content object (Exchange traffic carries them): it is
        # written as its record, as `to_dict` writes it; anything else as pydantic writes any value.
        # The typed kinds override this (same name).
        written = value.to_dict() if isinstance(value, MessageContent) else value
        if type(written) in (dict, list) and (info.include is not None or info.exclude is not None):
            return chosen_data(written, info.include, info.exclude)  # keys or positions, as pydantic chooses
        return written

    @computed_field  # type: ignore[prop-decorator]
    @property
    def role(self) -> MessageRole:
        """The role fixed by the class."""
        return self._role

    # A role's value and a UUID's text in both modes, as LionAGI's model_dump() writes them. The return
    # types are what pydantic's serialization JSON schema says of the fields (as before they were text).
    @field_serializer("sender", "recipient", check_fields=False)
    def _write_address(self, value: SenderRecipient | None) -> SenderRecipient | None:
        return dump_address(value)  # type: ignore[no-any-return]

    @field_serializer("role")
    def _write_role(self, value: MessageRole) -> RoleText:
        return value._value_

    @property
    def is_broadcast(self) -> bool:
        """True when the recipient is explicitly None."""
        return self.recipient is None

    @property
    def is_direct(self) -> bool:
        """True for every non-null recipient, `MessageRole.UNSET` included (deliverability is not checked)."""
        return self.recipient is not None

    @property
    def rendered(self) -> Any:
        """The content's own rendering when it has one; otherwise `str(content)`, and "" for None.

        Computed on every access, so in-place changes to the content always show.
        """
        content = self.content
        if isinstance(content, MessageContent):
            # Not through hasattr(): an AttributeError raised while rendering (say, by a structure class
            # written for LionAGI) would be swallowed, and the content's repr sent to the model.
            return content.rendered
        if hasattr(content, "rendered"):
            return content.rendered
        if content is None:
            return ""
        try:
            return str(content)
        except RecursionError:  # a list or dict nested thousands deep: the typed renderers' ValueError
            raise ValueError("cannot render a value nested this deeply") from None

    @property
    def chat_msg(self) -> dict[str, Any] | None:
        """`{"role": ..., "content": rendered}`; None when rendering fails (the failure is contained)."""
        try:
            return {"role": self._role.value, "content": self.rendered}
        except Exception:
            return None

    @property
    def image_content(self) -> list[dict[str, Any]] | None:
        """The image parts of the chat message (`{"type": "image_url", ...}`), as LionAGI gives them;
        None when the chat message is text only or rendering fails."""
        chat = self.chat_msg
        if chat is not None and isinstance(chat["content"], list):
            return [part for part in chat["content"] if part.get("type") == "image_url"]
        return None

    def update(self, sender: Any = None, recipient: Any = None, **content_fields: Any) -> None:
        """Change the sender or recipient (only to a truthy value) and rebuild the content with
        `content_fields`. Everything is validated before anything changes."""
        new_sender = normalize_address(sender) if sender else None
        new_recipient = normalize_address(recipient) if recipient else None
        content = self.__dict__["content"]
        new_content = self._updated_content(content, content_fields) if content_fields else None
        if type(self) not in ENVELOPE_CLASSES:
            changes = {"sender": new_sender, "recipient": new_recipient, "content": new_content}
            self._assign_all({name: value for name, value in changes.items() if value is not None})
            return
        # Every value is already validated: store it without a second validation pass, unless another
        # thread replaced the content meanwhile: then the change is made again on what it holds now.
        if new_content is None and (new_sender is None or new_recipient is None):
            self._store_one_address(new_sender, new_recipient)
            return
        while True:
            with _CHANGING_FIELDS:
                fields = self.__dict__.copy()
                if new_content is None or fields["content"] is content:
                    for name, changed in (
                        ("sender", new_sender),
                        ("recipient", new_recipient),
                        ("content", new_content),
                    ):
                        if changed is not None:
                            fields[name] = changed
                            mark_field_set(self, name)
                    set_fields_dict(self, fields)
                    return
            content = self.__dict__["content"]
            new_content = self._updated_content(content, content_fields)

    def _store_one_address(self, sender: Any, recipient: Any) -> None:
        """`update()` of one address (or none), valid already, under the lock that every change of the
        fields takes. Swapped in, not written in place: a reader (a record, a dump, a clone) reads the
        fields dict once and then several of its values, so it sees the message before this change or
        after it, never one address of a change beside the other of the next."""
        name, value = ("sender", sender) if recipient is None else ("recipient", recipient)
        if value is None:
            return
        _start_changing_fields()  # not `with`: half the cost
        try:
            fields = self.__dict__.copy()
            fields[name] = value
            set_fields_dict(self, fields)
            mark_field_set(self, name)
        finally:
            _stop_changing_fields()

    def _assign_all(self, changes: dict[str, Any]) -> None:
        """A subclass's road for a change of several fields: pydantic's assignment of each, on the message
        (its validators may look at it), undone when one refuses, so a refused change changes no field
        and no fields set. As atomic against other threads as any pydantic model's assignments."""
        undo = self._undo_point()
        try:
            for name, value in changes.items():
                setattr(self, name, value)
        except BaseException:
            undo()
            raise

    def _undo_point(self) -> Callable[[], None]:
        """What puts this message's fields and fields set back as they are now (its content object is
        replaced by a change, never changed in place, so it comes back as it was)."""
        fields, fields_set = dict(self.__dict__), self.__pydantic_fields_set__
        # A shared set never changes in place (the message takes its own first); its own set does.
        saved_set = fields_set if type(fields_set) is SharedFieldsSet else set(fields_set)

        def undo() -> None:
            set_fields_dict(self, fields)
            set_fields_set(self, saved_set)

        return undo

    def _updated_content(self, content: Any, changes: dict[str, Any]) -> MessageContent:
        if not isinstance(content, MessageContent):
            names = ", ".join(sorted(changes))
            raise TypeError(f"{type(self).__name__}.update(): its content has no fields to update ({names})")
        return content.updated(**changes)

    def _replace_content(self, base: MessageContent, content: MessageContent) -> bool:
        """Store `content`, already valid for this kind, made from `base` (what `update` does last), without
        validation; False, changing nothing, when the message no longer holds `base` (another thread
        replaced it: make the change again on what it holds now)."""
        _start_changing_fields()  # not `with`: half the cost, on every revision in place (add-or-replace)
        try:
            fields = self.__dict__
            if fields["content"] is not base:
                return False
            fields["content"] = content  # in place: one value, so no reader sees half of the change
            if "content" not in self.__pydantic_fields_set__:
                mark_field_set(self, "content")
            return True
        finally:
            _stop_changing_fields()

    def _merge_extra(self, values: dict[str, Any]) -> None:
        """Merge `values` (the caller's, copied) into `metadata["extra"]`, LionAGI's place for metadata given
        with a message; new dicts, so a reader of the old ones never sees them change."""
        if type(self) not in ENVELOPE_CLASSES:  # a subclass's validators see the new metadata (update())
            self._assign_all({"metadata": _merged_extra(self.metadata, values)})
            return
        with _CHANGING_FIELDS:
            fields = self.__dict__.copy()
            fields["metadata"] = _merged_extra(fields["metadata"], values)
            set_fields_dict(self, fields)

    def clone(self) -> Self:
        """The same class and content under a new identity; `metadata["clone_from"]` names the source.
        Content and metadata are deep copies (a list plain JSON holds twice is copied twice)."""
        # One read of the fields dict: a change swaps in a new one (or writes one value in it), so another
        # thread's update() never shows in the clone half made.
        values = self.__dict__
        content, embedding = values["content"], values["embedding"]
        # copy_value: plain JSON as deep as a record can be (deepcopy recurses twice per level)
        content = content.copy() if isinstance(content, MessageContent) else copy_value(content)
        metadata = copy_value(values["metadata"])
        metadata["clone_from"] = uuid_text(values["id"])
        cloned = clone_directly(type(self), values, content, metadata)  # values as validated: no constructor
        if cloned is not None:
            return cloned  # type: ignore[no-any-return]
        # A subclass's own fields (or a generated class's the fast roads do not know) are cloned too.
        extra = {} if type(self) in ENVELOPE_CLASSES else self._fields_beyond_the_envelope()
        sender, recipient = values["sender"], values["recipient"]
        return type(self)(
            content=content,
            metadata=metadata,
            embedding=None if embedding is None else list(embedding),
            # A name held as text stays one, though the constructor reads bare hex or braces as a UUID.
            sender=PlainName(sender) if type(sender) is str else sender,
            recipient=PlainName(recipient) if type(recipient) is str else recipient,
            channel=values["channel"],
            **extra,
        )

    def _fields_beyond_the_envelope(self) -> dict[str, Any]:
        return {
            name: copy.deepcopy(getattr(self, name))
            for name in type(self).model_fields
            if name not in ENVELOPE_FIELDS and name in self.__pydantic_fields_set__
        }

    # -- records: the fast roads (lionmsg.runtime.fastpath), pydantic's when they decline ----------

    def to_dict(self, mode: Literal["json", "python"] = "json", **options: Any) -> dict[str, Any]:
        """The record: JSON-ready by default (`mode="python"` spells ids, addresses and the role as text too,
        as LionAGI does, and keeps free-form values as they are); `options` as for `Element.to_dict`."""
        if mode == "json" and not options:
            try:
                try:
                    record = self._plain_record()
                except RecursionError:  # json_copy recurses once per level: again where the stack is empty
                    record = on_fresh_stack(self._plain_record)
            except RecursionError:  # too deep there too
                raise ValueError(UNWRITABLE_DEPTH) from None
            if record is not None:
                return record
        return super().to_dict(mode, **options)

    def _unchecked_record(self, mode: str) -> dict[str, Any]:
        # The plain record holds finite numbers only (json_copy refuses the rest): noted so, the container's
        # check of its whole record does not walk it again.
        record = None
        if mode == "json":
            try:
                record = self._plain_record()
            except RecursionError:  # as in to_dict (a container turns one raised again into its ValueError)
                record = on_fresh_stack(self._plain_record)
        if record is None:
            return self.model_dump(mode=mode)
        note_finite(record)
        return record

    def _plain_record(self) -> dict[str, Any] | None:
        """`model_dump(mode="json")`, built directly when every value is plain JSON data already (and the
        class is a generated one: see `fastpath.ENVELOPE_CLASSES`)."""
        values = self.__dict__
        embedding = values["embedding"]
        # Changed in place since checked, perhaps: both roads need it checked (pydantic's names a NaN).
        # The copy is what is checked and written: another thread may change the list meanwhile, and the
        # record is marked finite for the containers' check (`note_finite`).
        if embedding is not None:
            embedding = list(embedding)
            if not check_embedding(self, embedding):
                return None
        if type(self) not in ENVELOPE_CLASSES:
            return None
        content = values["content"]
        body = content._json_record() if isinstance(content, MessageContent) else json_copy(content)
        metadata = values["metadata"]
        metadata = json_copy(metadata) if metadata else {}  # usually empty: no copy to walk
        if body is MISSING or metadata is MISSING:
            return None
        metadata["lion_class"] = type(self).__name__
        return {
            "id": uuid_text(values["id"]),
            "created_at": values["created_at"],
            "metadata": metadata,
            "content": body,
            "embedding": embedding,
            "sender": dump_address(values["sender"]),
            "recipient": dump_address(values["recipient"]),
            "channel": values["channel"],
            "role": self._role._value_,  # `.value` is a Python-level enum property: slower
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Load a record (see Element.from_dict). The message keeps its own copies of the lists and dicts
        in the record's content and metadata, as of everything a caller passes: changing the record
        afterwards, or loading it twice, never makes two histories share a value."""
        if type(data) is dict and cls in ENVELOPE_CLASSES:
            loaded: Self | None = load_record(cls._named_in(data), data)
            if loaded is not None:
                _own_loaded_values(loaded)  # only the values that can be shared: cheaper than copying first
                return loaded
        return super().from_dict(_record_of_own(data))

    @classmethod
    def _from_own_record(cls, data: Any) -> Self:
        if type(data) is dict and cls in ENVELOPE_CLASSES:
            loaded: Self | None = load_record(cls._named_in(data), data)
            if loaded is not None:
                return loaded
        return super().from_dict(data)

    @classmethod
    def _named_in(cls, record: dict[str, Any]) -> type[Self]:
        """The generated class a record's `lion_class` names by its short name, when it is this class or
        a subclass of it (`Message.from_dict` of an Instruction record); else this class, whose fast road
        then declines the record and leaves it, and its errors, to the general road."""
        metadata = record.get("metadata")
        named = metadata.get("lion_class") if type(metadata) is dict else None
        if type(named) is not str or named == cls.__name__:
            return cls
        found = element_class(cls, named)
        return found if found in ENVELOPE_CLASSES else cls  # type: ignore[return-value]

    @classmethod
    def _load_prepared(cls, record: dict[str, Any]) -> Self:
        if cls in ENVELOPE_CLASSES:
            loaded: Self | None = load_envelope(cls, record, record.get("content", MISSING))
            if loaded is not None:
                return loaded
        return cls.model_validate(record)

    @classmethod
    def _prepare_record(cls, record: dict[str, Any]) -> None:
        record.pop("role", None)
        for name in ("sender", "recipient"):  # text as the schema reads it: see record_address
            address = record.get(name)
            if type(address) is str:
                address = record_address(address)
                record[name] = PlainName(address) if type(address) is str else address
        content_type = cls._content_type
        if content_type is None or "content" not in record:
            return
        value = record["content"]
        if not isinstance(value, dict):
            raise TypeError(
                f"content of {with_article(cls.__name__)} record must be an object, got {type(value).__name__}"
            )
        try:
            record["content"] = content_type.from_record(value)
        except RecordFieldError as exc:
            raise record_error(cls, ("content", exc.field), str(exc), exc.value) from None
