"""The envelope's fast roads: building, dumping and loading messages without pydantic's machinery.

Pydantic validation and serialization of a message cost 10-30 µs, most of it in the Python-level
validators and serializers the envelope needs. For values that already have their final form (content
built by our own factories, records whose every value is plain and canonical), the functions here apply
exactly those validators' rules directly. Whatever they are not sure about returns None, and the caller
takes pydantic's road, which also produces the errors. The tests compare both roads on every record
kind, and the fuzzing and corpus tests run through the fast one.
"""

from __future__ import annotations

import copy
import math
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar
from uuid import UUID

from pydantic import BaseModel

from lionmsg.generated.roles import MessageRole
from lionmsg.runtime.addressing import ROLES_BY_VALUE as _ROLES_BY_VALUE
from lionmsg.runtime.addressing import normalize_address, record_address
from lionmsg.runtime.fieldsets import SharedFieldsSet, set_fields_set, shared_fields_set
from lionmsg.runtime.ids import new_uuid4, parse_canonical_uuid, uuid_text
from lionmsg.runtime.wire import RecordFieldError

__all__ = [
    "ATOMS",
    "ENVELOPE_CLASSES",
    "JSON_SCALARS",
    "MISSING",
    "assemble",
    "clone_directly",
    "copy_message",
    "deep_copy",
    "flat_records_copy",
    "dump_address",
    "init_directly",
    "json_copy",
    "load_envelope",
    "load_record",
    "message_copies",
    "plain_copy",
    "set_fields_dict",
    "share_field_keys",
    "trusted_instance",
]

M = TypeVar("M", bound=BaseModel)

MISSING: Any = object()
"""An argument that was not given (None is a value: an explicit broadcast)."""

ENVELOPE_CLASSES: set[type[BaseModel]] = set()
"""The message classes the roads below build, load, dump and copy: those generated from the schemas,
whose fields are exactly the envelope's (MessageBehaviour registers them). Kept here as a set: a class
attribute read on a pydantic model class costs ~1k instructions (its metaclass defines __getattr__)."""

_FIELD_ORDER = ("id", "created_at", "metadata", "content", "embedding", "sender", "recipient", "channel")
_ALL_FIELDS = set(_FIELD_ORDER)
_RECORD_KEYS = frozenset({*_ALL_FIELDS, "role"})  # role is the class's: a record's is read by nobody

ENVELOPE_FIELDS = frozenset(_ALL_FIELDS)
"""The fields the roads below write and read. A generated class with other fields (the envelope schema
changed, this module not yet) is not registered in ENVELOPE_CLASSES: it takes pydantic's road, correct
and slower, and tests/test_records.py fails until this module learns the new field."""


def assemble(
    cls: type[BaseModel],
    content: Any,
    sender: Any = MISSING,
    recipient: Any = MISSING,
    channel: Any = MISSING,
    extra: dict[str, Any] | None = None,
) -> Any:
    """A new message of `cls` with `content` already in its final form (the kind's content instance),
    routing normalised here, `channel` (when given) a str or None: what
    `cls(content=..., sender=..., recipient=..., channel=...)` builds. `extra` (when given, the
    caller's metadata already copied) becomes its `metadata["extra"]`, as `_merge_extra` puts it."""
    if cls not in ENVELOPE_CLASSES:  # fields this road does not know (see ENVELOPE_FIELDS): pydantic builds it
        given = {"sender": sender, "recipient": recipient, "channel": channel}
        message: Any = cls(content=content, **{name: value for name, value in given.items() if value is not MISSING})
        if extra is not None:  # after construction, as on the general road (metadata is no field given)
            message._merge_extra(extra)
        return message
    defaults = _DEFAULTS[cls]
    fields_set = _BUILT_FIELDS_SETS[channel is not MISSING, sender is not MISSING, recipient is not MISSING]
    if channel is MISSING:
        channel = None
    sender = defaults["sender"] if sender is MISSING else normalize_address(sender)
    recipient = defaults["recipient"] if recipient is MISSING else normalize_address(recipient)
    metadata = {} if extra is None else {"extra": extra}
    return fill_envelope(
        _new_object(cls), fields_set, new_uuid4(), time.time(), metadata, content, None, sender, recipient, channel
    )


_INIT_ARGUMENTS = frozenset({"content", "sender", "recipient", "channel", "metadata"})
# A constructed message's fields set: the arguments given, by (content, channel, sender, recipient).
_INIT_FIELDS_SETS = {
    (content, channel, sender, recipient): shared_fields_set(
        name
        for name, given in (("content", content), ("channel", channel), ("sender", sender), ("recipient", recipient))
        if given
    )
    for content in (False, True)
    for channel in (False, True)
    for sender in (False, True)
    for recipient in (False, True)
}
_INIT_FIELDS_SETS_WITH_METADATA = {
    given: shared_fields_set({*fields, "metadata"}) for given, fields in _INIT_FIELDS_SETS.items()
}


def init_directly(message: Any, data: dict[str, Any], coerce_content: Callable[[type[Any], Any], Any]) -> bool:
    """Initialise `message`, new and of a typed kind in ENVELOPE_CLASSES, from constructor arguments
    naming only content, routing and metadata, as pydantic's validation would (the same validators'
    work: `coerce_content`, the content field's, the address rule, and for metadata a new dict of the
    same entries, without pydantic's machinery); False, changing nothing, for anything else or anything
    refused: pydantic's road then builds it or raises its error (ValidationError, or the content's
    TypeError). Metadata is taken here only as a dict with text keys and no `lion_class` (which its
    validator checks against the class and drops)."""
    if not data.keys() <= _INIT_ARGUMENTS:
        return False
    metadata = data.get("metadata", MISSING)
    if metadata is not MISSING:
        if type(metadata) is not dict or "lion_class" in metadata or not all(type(key) is str for key in metadata):
            return False
        metadata = dict(metadata)  # pydantic's dict validation makes a new one; the values stay the caller's
    defaults = _DEFAULTS[type(message)]
    content_type = defaults["content_type"]
    get = data.get
    channel = get("channel", MISSING)
    if content_type is None or not (channel is MISSING or channel is None or type(channel) is str):  # strict
        return False
    content, sender, recipient = get("content", MISSING), get("sender", MISSING), get("recipient", MISSING)
    fields_set = (_INIT_FIELDS_SETS if metadata is MISSING else _INIT_FIELDS_SETS_WITH_METADATA)[
        content is not MISSING, channel is not MISSING, sender is not MISSING, recipient is not MISSING
    ]
    try:
        # The addresses first: a refused one then costs no content build here, and the user code a
        # content may hold (a context item's __deepcopy__) runs once, on pydantic's road. Only a refused
        # content repeats its work there. A role's text (the usual address) is looked up here: what
        # normalize_address does with it first.
        if sender is MISSING:
            sender = defaults["sender"]
        else:
            role = _ROLES_BY_VALUE.get(sender) if type(sender) is str else None
            sender = normalize_address(sender) if role is None else role
        if recipient is MISSING:
            recipient = defaults["recipient"]
        else:
            role = _ROLES_BY_VALUE.get(recipient) if type(recipient) is str else None
            recipient = normalize_address(recipient) if role is None else role
        if type(content) is dict:  # the usual input: what coerce_content does with it
            content = content_type.from_dict(content)
        elif content is MISSING:
            content = defaults["content"]()
        elif type(content) is not content_type:  # its own instance is taken as it is
            content = coerce_content(content_type, content)
    except Exception:  # refused: pydantic's road says so in its own words
        return False
    if channel is MISSING:
        channel = None
    if metadata is MISSING:
        metadata = {}
    fill_envelope(message, fields_set, new_uuid4(), time.time(), metadata, content, None, sender, recipient, channel)
    return True


# What clone() passes its class's constructor: every field but the new identity.
_CLONED_FIELDS_SET = shared_fields_set(name for name in _FIELD_ORDER if name not in ("id", "created_at"))
# An address a message holds in its final form (a plain name is an exact str: see normalize_address).
_FINAL_ADDRESS_TYPES = frozenset({MessageRole, UUID, str, type(None)})


def clone_directly(cls: type[BaseModel], values: dict[str, Any], content: Any, metadata: dict[str, Any]) -> Any:
    """The clone `message.clone()` builds with its class's constructor, built directly: what
    `cls(content=..., metadata=..., embedding=..., sender=..., recipient=..., channel=...)` makes of
    values all still in their final form (a message's values may be changed in place). `values` is the
    message's fields dict as read once (another thread's update swaps in a new one: the clone shows one
    or the other); `content` and `metadata` are the clone's copies. None, having made nothing, for
    anything else: a class the roads do not serve, generic content, metadata with a key that is not
    text or with a `lion_class` (the constructor checks and drops it), an embedding not of finite
    floats; the constructor then builds the clone or raises its error."""
    if cls not in ENVELOPE_CLASSES:
        return None
    content_type = _DEFAULTS[cls]["content_type"]
    if content_type is None or not isinstance(content, content_type):  # generic content: the constructor's
        return None
    if "lion_class" in metadata or not all(type(key) is str for key in metadata):
        return None
    embedding, sender, recipient = values["embedding"], values["sender"], values["recipient"]
    channel = values["channel"]
    if embedding is not None:
        embedding = list(embedding)  # checked as copied: another thread may change the clone's original
        if not (set(map(type, embedding)) <= {float} and all(map(_isfinite, embedding))):
            return None
    if (
        type(sender) not in _FINAL_ADDRESS_TYPES
        or type(recipient) not in _FINAL_ADDRESS_TYPES
        or not (channel is None or type(channel) is str)
    ):
        return None
    return fill_envelope(
        _new_object(cls),
        _CLONED_FIELDS_SET,
        new_uuid4(),
        time.time(),
        metadata,
        content,
        embedding,
        sender,
        recipient,
        channel,
    )


def load_record(cls: type[BaseModel], record: dict[str, Any]) -> Any:
    """`cls.from_dict(record)` in one pass, for a record of exactly this class (its `lion_class`, when
    present, names `cls`) whose content loads and whose every value is plain and canonical; None for
    anything else, which takes the general road (and its errors)."""
    metadata = record.get("metadata")
    if type(metadata) is dict:
        named = metadata.get("lion_class", MISSING)
        if named is not MISSING and (type(named) is not str or named != cls.__name__):
            return None
    if "id" not in record or "created_at" not in record:
        return None
    content = record.get("content", MISSING)
    content_type = _DEFAULTS[cls]["content_type"]
    if content_type is not None and content is not MISSING:
        if type(content) is not dict:
            return None
        try:
            content = content_type.from_record(content)
        except RecordFieldError:  # the general road raises it, naming the record's field
            return None
    return load_envelope(cls, record, content)


def load_envelope(cls: type[BaseModel], record: dict[str, Any], content: Any) -> Any:
    """The message a record describes, given its loaded content (MISSING when the record has none;
    the record's own `content`, `role` and `metadata.lion_class` are not read), or None when any value
    is not already in its plain canonical form."""
    if not record.keys() <= _RECORD_KEYS:
        return None
    ident = parse_canonical_uuid(record["id"])
    created_at = record["created_at"]
    if ident is None or type(created_at) is not float or not _isfinite(created_at):
        return None
    defaults = _DEFAULTS[cls]
    metadata: dict[str, Any] = {}
    given_metadata = record.get("metadata", metadata)
    if type(given_metadata) is not dict:
        return None
    for key, value in given_metadata.items():
        if type(key) is not str:
            return None
        if key != "lion_class":  # the discriminator, already resolved to `cls`
            metadata[key] = value
    if content is MISSING:
        content = defaults["content"]()
    elif defaults["content_type"] is not None and type(content) is not defaults["content_type"]:
        return None
    embedding = record.get("embedding")
    if embedding is not None:
        if type(embedding) is not list:
            return None
        embedding = list(embedding)  # the copy kept is the one checked
        if not all(type(x) is float and _isfinite(x) for x in embedding):
            return None
    channel = record.get("channel")
    if channel is not None and type(channel) is not str:
        return None
    sender = _record_address(record, "sender", defaults)
    recipient = _record_address(record, "recipient", defaults)
    if sender is MISSING or recipient is MISSING:
        return None
    # The fields the record sets (role is not a field): usually all of them.
    given = len(record) - ("role" in record)
    fields_set = _EVERY_FIELD_SET if given == len(_ALL_FIELDS) else shared_fields_set(k for k in record if k != "role")
    return fill_envelope(
        _new_object(cls), fields_set, ident, created_at, metadata, content, embedding, sender, recipient, channel
    )


def _record_address(record: dict[str, Any], name: str, defaults: dict[str, Any]) -> Any:
    """A record's sender or recipient normalised (the class default when absent), or MISSING when it
    is not plain text or null."""
    address = record.get(name, MISSING)
    if address is MISSING:
        return defaults[name]
    if type(address) is str:
        role = _ROLES_BY_VALUE.get(address)  # the usual value: no call
        return record_address(address) if role is None else role
    return None if address is None else MISSING


_isfinite = math.isfinite

# The fields sets the roads above give (lionmsg.runtime.fieldsets): a built message's is `content` and the
# routing given (channel, sender, recipient: given or not), a loaded one's usually every field.
# (The constructor's, _INIT_FIELDS_SETS, may also leave content out.)
_BUILT_FIELDS_SETS = {given[1:]: fields for given, fields in _INIT_FIELDS_SETS.items() if given[0]}
_EVERY_FIELD_SET = shared_fields_set(_ALL_FIELDS)


class _ClassDefaults(dict[type[BaseModel], dict[str, Any]]):
    """Per class, made on first use: its routing defaults, its content factory and type (`model_fields`
    is slow). Read by subscription: a hit costs no Python-level call."""

    def __missing__(self, cls: type[BaseModel]) -> dict[str, Any]:
        fields = cls.model_fields
        content = fields["content"]
        found = self[cls] = {
            "sender": fields["sender"].default,
            "recipient": fields["recipient"].default,
            "content": lambda: content.get_default(call_default_factory=True),
            "content_type": getattr(cls, "_content_type", None),
        }
        return found


_DEFAULTS = _ClassDefaults()


def json_copy(value: Any) -> Any:
    """A deep copy of plain JSON data (str keys, finite floats), or MISSING when `value` holds anything
    a JSON dump would have to convert (a UUID, a model, NaN...)."""
    kind = type(value)
    if kind in JSON_SCALARS:
        return value
    if kind is dict:
        copied: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                return MISSING
            if type(item) not in JSON_SCALARS:  # leaves are common: no call for them
                item = json_copy(item)
                if item is MISSING:
                    return MISSING
            copied[key] = item
        return copied
    if kind is list:
        items: list[Any] = value.copy()  # exact size (see flat_records_copy); containers replaced below
        index = 0
        for item in value:
            if type(item) not in JSON_SCALARS:
                item = json_copy(item)
                if item is MISSING:
                    return MISSING
                items[index] = item
            index += 1  # noqa: SIM113  (enumerate costs ~800 instructions more a call, see flat_records_copy)
        return items
    if kind is float and math.isfinite(value):
        return value
    return MISSING


JSON_SCALARS = frozenset({str, int, bool, type(None)})


def copy_message(message: M) -> M:
    """A deep copy of a message with the same id: `model_copy(deep=True)` at a fraction of its cost (the
    envelope's immutable values are shared; content, metadata and embedding are copied). Unlike
    deepcopy, a list or dict that plain JSON content or metadata holds twice is copied twice. A class
    not generated from the schemas (a user's subclass, which may add fields) gets `model_copy(deep=True)`."""
    if type(message) not in ENVELOPE_CLASSES:
        return message.model_copy(deep=True)
    values = message.__dict__.copy()  # a shared key table is copied with it (see share_field_keys)
    content = values["content"]
    # Typed content copies itself (as deep as a record can be); anything else by deep_copy.
    typed = type(content) is _DEFAULTS[type(message)]["content_type"]
    values["content"] = content.copy() if typed else deep_copy(content)
    metadata = values["metadata"]
    values["metadata"] = deep_copy(metadata) if metadata else {}  # usually empty: nothing to walk
    if values["embedding"] is not None:
        values["embedding"] = list(values["embedding"])
    copied: M = trusted_instance(type(message), values, _fields_set_for_a_copy(message))
    return copied


def _fields_set_for_a_copy(message: BaseModel) -> set[str]:
    """A copy's fields set: the original's when shared (no message changes a shared one), else a copy."""
    fields_set = message.__pydantic_fields_set__
    return fields_set if type(fields_set) is SharedFieldsSet else fields_set.copy()


def message_copies(message: M, count: int) -> list[M]:
    """`count` copies of a message, each what `copy_message` makes. A broadcast's usual payload (flat
    content, no metadata, no embedding) is checked once for all of them, and its content then copied
    by `dict.copy` or `list.copy`: json_copy's walk for each copy cost a sixth of delivering it."""
    values = message.__dict__
    content = values["content"]
    copy_content = _flat_copier(content)
    if (
        copy_content is None
        or values["metadata"]
        or values["embedding"] is not None
        or type(message) not in ENVELOPE_CLASSES
    ):
        return [copy_message(message) for _ in range(count)]
    cls = type(message)
    fields_set = message.__pydantic_fields_set__
    shared = type(fields_set) is SharedFieldsSet
    copies: list[M] = []
    for _ in range(count):  # trusted_instance spelled out: its call was a tenth of a copy
        copied = values.copy()
        copied["content"] = copy_content(content)
        copied["metadata"] = {}
        made = _new_object(cls)
        set_fields_dict(made, copied)
        set_fields_set(made, fields_set if shared else fields_set.copy())
        _set_extra(made, None)
        _set_private(made, None)
        copies.append(made)
    return copies


# Values a deep copy shares rather than copies (their instances are immutable; subclasses may not be).
ATOMS = frozenset({str, int, float, bool, type(None)})
"""The immutable scalars a copy shares rather than copies (a subclass of one may be mutable)."""


def _flat_copier(value: Any) -> Any:
    """A function that deep-copies `value` by copying it one level down (dict.copy, list.copy, or keeping
    an atom), when everything in it is an atom; None otherwise."""
    kind = type(value)
    if kind in ATOMS:
        return _same
    if kind is dict:
        for key, item in value.items():
            if type(key) not in ATOMS or type(item) not in ATOMS:
                return None
        return dict.copy
    if kind is list:
        for item in value:
            if type(item) not in ATOMS:
                return None
        return list.copy
    return None


def flat_records_copy(items: list[Any]) -> list[Any] | None:
    """A copy of a list of atoms and dicts of atoms with str keys, each dict copied; None for any other."""
    # Copied whole, then each dict replaced by its copy: a list grown by append keeps spare room (a
    # one-item context took 88 B instead of 64), and a stored message keeps its context for life.
    copied = items.copy()
    index = 0
    for item in items:
        kind = type(item)
        if kind is dict:
            for key, field in item.items():
                if type(key) is not str or type(field) not in ATOMS:
                    return None
            copied[index] = item.copy()
        elif kind not in ATOMS:
            return None
        index += 1  # noqa: SIM113  (enumerate: ~800 instructions more a call, on every added instruction)
    return copied


def _same(value: Any) -> Any:
    return value


def deep_copy(value: Any) -> Any:
    """A deep copy: plain JSON (the usual content and metadata) by json_copy, several times faster than
    deepcopy; anything else (typed content, NaN, tuples...) by deepcopy (classes are shared). A list of
    atoms and flat records (the usual instruction context) is copied without json_copy's recursion."""
    copied = plain_copy(value)
    return copy.deepcopy(value) if copied is MISSING else copied


def plain_copy(value: Any) -> Any:
    """`deep_copy`'s fast roads: a copy of plain JSON data, or MISSING for anything else (a value a JSON
    dump would convert, or one nested too deeply or referring to itself, whose shape deepcopy keeps)."""
    if type(value) is list:
        copied = flat_records_copy(value)
        if copied is not None:
            return copied
    try:
        return json_copy(value)
    except RecursionError:
        return MISSING


def dump_address(value: Any) -> Any:
    """A sender or recipient as JSON: a role's value, a UUID's text, a name as is, None."""
    kind = type(value)
    if kind is MessageRole:
        return value._value_  # `.value` is a Python-level enum property: several times slower
    if kind is UUID:
        return uuid_text(value)
    return value


# Key sharing. CPython 3.10-3.12 let the instances of a class share one table of attribute names: each
# instance's fields dict then holds only its values (240 B for a message's eight fields on 3.11, against
# 360 B for a dict of its own; 224 against 440 on 3.10), as long as the fields are written into the
# dict the instance makes for itself (`_get_fields_dict` of a new message), in the order the table has
# them. The table is filled by the first instance that writes attributes, and a class whose first
# instances write none (pydantic's construction puts a whole dict in place) loses the room for them; so
# each envelope class writes its fields once, when it is created. Whatever goes wrong here costs memory,
# never correctness: a dict that cannot share turns into an ordinary one. 3.13 shares only for classes
# without slots (BaseModel has four), so there each message gets a dict of its own, as pydantic makes.
_SHARES_KEYS = sys.version_info < (3, 13)


def share_field_keys(cls: type[BaseModel]) -> None:
    """Fill the key table the instances of `cls`, an envelope class just created, share (see above)."""
    if _SHARES_KEYS:
        first = _new_object(cls)
        for name in _FIELD_ORDER:
            _object_setattr(first, name, None)


# BaseModel's slots, set through their descriptors (what object.__setattr__ finds, at half its cost):
# BaseModel.__setattr__ would validate.
set_fields_dict = BaseModel.__dict__["__dict__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
_get_fields_dict = BaseModel.__dict__["__dict__"].__get__
_new_object = object.__new__
_object_setattr = object.__setattr__


def fill_envelope(
    message: Any,
    fields_set: set[str],
    ident: UUID,
    created_at: float,
    metadata: dict[str, Any],
    content: Any,
    embedding: list[float] | None,
    sender: Any,
    recipient: Any,
    channel: str | None,
) -> Any:
    """`message` (new, of a class in ENVELOPE_CLASSES) holding these values, each already valid and in
    final form, as pydantic's own construction leaves it (no extras, no private attributes)."""
    fields = _get_fields_dict(message) if _SHARES_KEYS else None
    if fields is None or fields:  # no key sharing, or a message initialised again: a dict of its own
        fields = {
            "id": ident,
            "created_at": created_at,
            "metadata": metadata,
            "content": content,
            "embedding": embedding,
            "sender": sender,
            "recipient": recipient,
            "channel": channel,
        }
        set_fields_dict(message, fields)
    else:  # the class's shared key table (see share_field_keys), written in its order
        fields["id"] = ident
        fields["created_at"] = created_at
        fields["metadata"] = metadata
        fields["content"] = content
        fields["embedding"] = embedding
        fields["sender"] = sender
        fields["recipient"] = recipient
        fields["channel"] = channel
    set_fields_set(message, fields_set)
    _set_extra(message, None)
    _set_private(message, None)
    return message


def trusted_instance(cls: type[BaseModel], values: dict[str, Any], fields_set: set[str]) -> Any:
    """An instance of `cls` holding `values` (every field, each already valid and in final form) as
    pydantic's own construction leaves it (no extras, no private attributes)."""
    message = _new_object(cls)
    set_fields_dict(message, values)
    set_fields_set(message, fields_set)
    _set_extra(message, None)
    _set_private(message, None)
    return message
