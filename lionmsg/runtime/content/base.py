"""The base every content dataclass derives from."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Collection, Iterator, Mapping, MutableMapping, MutableSequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic_core import to_jsonable_python

from lionmsg.runtime.content.lazylists import NOT_MADE, LazyList, keep_lazy_in_subclass
from lionmsg.runtime.fastpath import ATOMS, MISSING, deep_copy, flat_records_copy, json_copy, plain_copy
from lionmsg.runtime.wire import (
    UNWRITABLE_DEPTH,
    RecordFieldError,
    check_finite,
    check_mode,
    on_fresh_stack,
    refuse_colliding_keys,
    sorted_names,
)

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["MessageContent", "copy_field", "copy_value", "owned_copy", "refuse_iterators", "shallow_copy"]


class MessageContent:
    """Typed message content: a slots dataclass generated from its schema plus a behaviour class.

    Construction copies the lists and dicts it is given (deeply: the caller's stay the caller's), then
    runs `_normalize()` (Python-side conveniences, e.g. `system_datetime=True`) and the generated field
    checks. `from_dict` is the Python-friendly constructor (it also takes the
    input names LionAGI accepts); `from_record` (generated) loads the strict record form.
    """

    __slots__ = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        keep_lazy_in_subclass(cls)

    _WIRE_FIELDS: ClassVar[frozenset[str]]
    # Extra input names `from_dict` accepts beyond the dataclass fields (LionAGI compatibility).
    _INPUT_ALIASES: ClassVar[frozenset[str]] = frozenset()
    # Fields that `_from_input` does not read, that `_normalize` changes only as `_PLAIN_NORMALISERS`
    # do, and that no other field depends on (the schema marks them `x-lionmsg-plain-update`;
    # generated): `updated()` changing only these copies the content and checks just them (generated
    # `_with_plain_changes`) instead of rebuilding and re-checking every field.
    _PLAIN_FIELDS: ClassVar[frozenset[str]] = frozenset()
    # Per plain field that `_normalize` changes, its rule (a linked record's id as lower-case text),
    # applied to a new value before the copy takes it.
    _PLAIN_NORMALISERS: ClassVar[Mapping[str, Callable[[Any], Any]]] = {}

    def _normalize(self) -> None:
        """Hook: turn Python-side input conveniences into schema values (runs on every construction;
        a kind with private derived state ends by building it with `_derive()`). Values already
        normalised must come out unchanged."""

    def _derive(self) -> None:
        """Hook: build private derived state from the normalised fields. A copy that changes only
        `_PLAIN_FIELDS` runs just this: normalising its other, already normalised, fields is a no-op."""

    if TYPE_CHECKING:
        # Generated per class from its schema.
        def to_dict(
            self, exclude: Collection[str] | None = None, *, mode: Literal["python", "json"] = "python"
        ) -> dict[str, Any]: ...

        def _with_plain_changes(self, changes: Mapping[str, Any]) -> Self | None: ...

        def _json_record(self) -> Any: ...

        @classmethod
        def from_record(cls, data: Mapping[str, Any]) -> Self: ...

        # Each kind's behaviour class renders its content (the prompt text, or text and image parts).
        @property
        def rendered(self) -> Any: ...

    @classmethod
    def _record_field_error(cls, field: str, message: str, value: Any) -> RecordFieldError:
        """What `from_record` raises for a field that breaks its schema (`message` says what the schema
        wants); a kind whose own rules can say why instead (an instruction's images) overrides it."""
        return RecordFieldError(field, message, value)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The public fields, in declaration order (LionAGI's name)."""
        return _public_fields(cls)

    @classmethod
    def allowed(cls) -> frozenset[str]:
        """The public fields as a set (LionAGI's name); `input_names` adds the input names `from_dict`
        takes besides them."""
        return frozenset(_public_fields(cls))

    @classmethod
    def input_names(cls) -> frozenset[str]:
        """The names `from_dict` accepts: public dataclass fields plus `_INPUT_ALIASES`."""
        names = _INPUT_NAMES.get(cls)
        if names is None:
            names = _INPUT_NAMES[cls] = frozenset(_public_fields(cls)) | cls._INPUT_ALIASES
        return names

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Build from field values; an unknown name raises ValueError naming it, and anything but a
        mapping is a TypeError."""
        if type(data) is dict and data.keys() <= cls._PLAIN_FIELDS and _all_text(data):
            # Text only (as most content is given): the class's default instance copied with it, no
            # rebuild; text needs no copy of its own. None for a subclass, which takes the general road.
            made = cls._new_with_plain(data)
            if made is not None:
                return made
        if not isinstance(data, Mapping):
            raise TypeError(f"{cls.__name__}.from_dict takes a mapping of field values, got {type(data).__name__}")
        cls._check_input_names(data)
        return cls._from_input(_owned(data))

    @classmethod
    def _check_input_names(cls, given: Mapping[str, Any]) -> None:
        unknown = given.keys() - cls.input_names()
        if unknown:
            ordered = sorted_names(unknown)  # the first is where a ValidationError locates it (coerce_content)
            message = f"{cls.__name__} has no field(s) {', '.join(map(repr, ordered))}"
            raise RecordFieldError(ordered[0], message, given[ordered[0]])

    @classmethod
    def _from_input(cls, data: dict[str, Any]) -> Self:
        """Hook: map input names onto fields (a private copy of the caller's dict, its values the new
        content's own already) and build."""
        return cls._from_owned(data)

    @classmethod
    def _from_owned(cls, data: dict[str, Any]) -> Self:
        """`cls(**data)` for values that are the new content's own already (copied on the way in, or made
        fresh): the dataclass's `__init__` without `__post_init__`'s copy of the caller's lists and dicts,
        which would copy them a second time. A class not generated from the schemas (a subclass may add
        fields and a `__post_init__` of its own) is built by its constructor."""
        init = _init_fields(cls)
        if init is None:
            return cls(**data)
        content = object.__new__(cls)
        taken = 0
        for name, attribute, default, factory in init:
            value = data.get(name, _ABSENT)
            if value is _ABSENT:
                if default is dataclasses.MISSING and factory is dataclasses.MISSING:
                    raise TypeError(f"{cls.__name__}() missing the field {name!r}")
                value = default if factory is dataclasses.MISSING else factory()
            else:
                taken += 1
            setattr(content, attribute, value)
        if taken < len(data):
            unknown = sorted_names(set(data) - {name for name, _, _, _ in init})
            raise TypeError(f"{cls.__name__}() got an unexpected keyword argument {unknown[0]!r}")
        content._normalize_and_check()
        return content

    if TYPE_CHECKING:

        def _normalize_and_check(self) -> None:
            """Generated per class: `_normalize()`, then each field checked against its schema."""

    if TYPE_CHECKING:

        def _own_containers(self) -> None:
            """Generated per class: replace the lists and dicts its fields hold by copies (content
            loaded from a caller's record shares them with the record until then; derived state is
            kept with the values it was built from, so it is rebuilt on use)."""

    def _plain_changes_keep_the_rest(self) -> bool:
        """Whether the full rebuild (`_from_input`) of this content with its plain fields changed would
        leave every other field as it is, so that `_with_plain_changes` may copy them: a kind whose
        input rules fill a field in from another (an instruction's image detail) says when not."""
        return True

    def field_values(self) -> dict[str, Any]:
        """The public field values, containers copied (shallowly) so the result is independent."""
        return {name: shallow_copy(getattr(self, name)) for name in _public_fields(type(self))}

    def updated(self, **changes: Any) -> Self:
        """A new content with `changes` applied through `from_dict`; this one is left untouched."""
        if any(type(value) is not str for value in changes.values()):  # text (the usual change) is immutable
            changes = _owned(changes)
        if changes.keys() <= self._PLAIN_FIELDS:  # fields, so input names: nothing for the name check to find
            content = self._with_plain_changes(_normalised(self._PLAIN_NORMALISERS, changes))
            if content is not None:
                return content
        self._check_input_names(changes)
        return self._from_input({**self.field_values(), **changes})  # a fresh dict: from_dict's copy is not needed

    @classmethod
    def _new_with_plain(cls, values: Mapping[str, Any]) -> Self | None:
        """`cls(**values)` for `values` naming only `_PLAIN_FIELDS`: the class's default instance
        copied with them changed (`_with_plain_changes`: its other fields are the normalised defaults,
        derived state is rebuilt, the given fields checked). None where that declines (a subclass)."""
        blank = _BLANKS.get(cls)
        if blank is None:
            if cls.__module__ != _GENERATED_MODULE:  # a subclass's default may not even be valid
                return None
            blank = _BLANKS[cls] = cls()  # never handed out: copies take its fields
        normalisers = cls._PLAIN_NORMALISERS
        return blank._with_plain_changes(_normalised(normalisers, values) if normalisers else values)

    def copy(self) -> Self:
        """A deep copy (classes referenced by a field, such as a response model, are shared). A value
        deepcopy cannot copy (a lock) is shared, as construction keeps it as given; one nested deeper
        than records are written is the record writers' ValueError. A generated class copies field by
        field (generated `copy`: each value by `copy_field`, so a list or dict that plain JSON holds
        twice is copied twice, as `clone()` copies metadata); a subclass, which may hold more than its
        dataclass fields, by deepcopy."""
        try:
            return copy.deepcopy(self)
        except Exception:  # deeper than deepcopy reaches (two frames per level), or a value it cannot copy
            duplicate = copy.copy(self)  # the same class and every slot, derived state included
            for name in _public_fields(type(self)):
                # one frame per level for plain JSON; derived state that held the old values is rebuilt
                # on use, since it is kept with the values it was built from (InstructionContent._structure)
                object.__setattr__(duplicate, name, copy_value(getattr(self, name)))
            return duplicate


# Per content class, computed once: `dataclasses.fields` rebuilds its answer on every call.
_INPUT_NAMES: dict[type[MessageContent], frozenset[str]] = {}
_INIT_FIELDS: dict[type[MessageContent], tuple[tuple[str, str, Any, Any], ...] | None] = {}
_GENERATED_MODULE = "lionmsg.generated.content"
_ABSENT: Any = object()


def _init_fields(cls: type[MessageContent]) -> tuple[tuple[str, str, Any, Any], ...] | None:
    """A generated class's `__init__` parameters as (name, attribute to set, default, default factory):
    a lazy list field is set through its slot, unmade by default (see lazylists); None for any other
    class (see MessageContent._from_owned)."""
    if cls in _INIT_FIELDS:
        return _INIT_FIELDS[cls]
    init = None
    if cls.__module__ == _GENERATED_MODULE:
        fields = dataclasses.fields(cls)  # type: ignore[arg-type]
        init = tuple(
            (f.name, f"_raw_{f.name}", NOT_MADE, dataclasses.MISSING)
            if isinstance(cls.__dict__.get(f.name), LazyList)
            else (f.name, f.name, f.default, f.default_factory)
            for f in fields
            if f.init
        )
    _INIT_FIELDS[cls] = init
    return init


_PUBLIC_FIELDS: dict[type[MessageContent], tuple[str, ...]] = {}
_BLANKS: dict[type[MessageContent], Any] = {}


def _public_fields(cls: type[MessageContent]) -> tuple[str, ...]:
    names = _PUBLIC_FIELDS.get(cls)
    if names is None:
        fields = dataclasses.fields(cls)  # type: ignore[arg-type]
        names = _PUBLIC_FIELDS[cls] = tuple(f.name for f in fields if not f.name.startswith("_"))
    return names


def shaped_record(record: dict[str, Any], exclude: Collection[str] | None, mode: str) -> dict[str, Any]:
    """A content record without the `exclude`d fields, its values as JSON in `mode="json"` (what a
    message's JSON record holds of them: a NaN or an infinity is a ValueError there)."""
    check_mode(mode)
    if exclude is not None:
        if isinstance(exclude, (str, bytes)) or not isinstance(exclude, Collection):
            raise TypeError(f"exclude must be a collection of field names, got {type(exclude).__name__}")
        record = {name: value for name, value in record.items() if name not in exclude}
    if mode == "json":
        plain = json_copy(record)
        if plain is MISSING:
            refuse_colliding_keys(record, "$")
            record = to_jsonable_python(record)
        else:
            record = plain
        check_finite(record)
    return record


def owned_copy(value: Any) -> Any:
    """A caller's input value deep-copied: content keeps its own lists and dicts, so a caller that goes
    on changing its `context` dict or a tool's output never rewrites a recorded message. A value that
    deepcopy cannot copy (a lock, a live connection) is kept as given, inside copies of the lists and
    dicts around it. A list or dict nested too deep to copy is a new one whose members are copied one
    by one, those too deep themselves kept as given (no record can hold them: the writers refuse it)."""
    if type(value) is str:
        return value
    copied = plain_copy(value)
    if copied is not MISSING:  # plain JSON: the usual case
        return copied
    _refuse_iterators(value)
    try:
        return _copy_at_any_depth(_copy_or_keep, value)
    except RecursionError:
        # Still the caller's own members' copies beside the deep one: a flat list next to it in a
        # metadata dict or a context list is the message's, as it would be without the deep one.
        if type(value) is list:
            return [_copy_or_keep_too_deep(item) for item in value]
        if type(value) is dict:
            return {key: _copy_or_keep_too_deep(item) for key, item in value.items()}
        return value


def _copy_at_any_depth(copy_of: Callable[[Any], Any], value: Any) -> Any:
    """`copy_of(value)`; when the caller's stack is too deep for it, plain JSON data is copied again on
    a fresh stack, so whether a message owns such a copy, or can be cloned, does not depend on how deep
    its caller is. Nothing else is: copying it runs its own `__deepcopy__`, which may wait for a lock
    this thread holds (a Pile's) while this thread waits for the copy. RecursionError otherwise."""
    try:
        return copy_of(value)
    except RecursionError:
        copied = on_fresh_stack(json_copy, value)  # RecursionError when too deep there too
        if copied is MISSING:
            raise
        return copied


def _copy_or_keep(value: Any) -> Any:
    """A deep copy; a value deepcopy cannot copy is kept as given inside copies of what is around it.
    RecursionError when `value` is nested too deep for either."""
    try:
        return copy.deepcopy(value)
    except RecursionError:
        raise
    except Exception:
        return _copy_around_uncopyable(value)


def _copy_or_keep_too_deep(value: Any) -> Any:
    try:
        return _copy_or_keep(value)
    except RecursionError:
        return value


def refuse_iterators(value: Any) -> None:
    """`_refuse_iterators` for a value a message keeps as given (generic content): a dict or list of
    plain scalars, the usual payload, is passed over without the general walk's calls."""
    kind = type(value)
    if kind in ATOMS:
        return
    if kind is dict or kind is list:
        for member in value.values() if kind is dict else value:  # a loop: all() of a generator costs more
            if type(member) not in ATOMS:
                break
        else:
            return
    _refuse_iterators(value)


def _refuse_iterators(value: Any) -> None:
    """TypeError for an iterator (a generator, a map...) in a caller's value, which is no plain JSON:
    the first record written would use it up (JSON holds its items, the next record none), and rendering
    shows the object, not its items."""
    pending, seen = [value], set()
    while pending:
        item = pending.pop()
        if isinstance(item, Iterator):
            raise TypeError(
                f"a message cannot keep an iterator ({type(item).__name__}): writing it would use it up; "
                "pass a list of its items"
            )
        if isinstance(item, (Mapping, list, tuple, set, frozenset)) and id(item) not in seen:  # subclasses too
            seen.add(id(item))  # a value may hold itself
            pending.extend(item.values() if isinstance(item, Mapping) else item)


def own_container(value: list[Any] | dict[Any, Any]) -> Any:
    """`owned_copy` of a list or dict: an empty one (usually a field's default) by a new empty one, the
    usual list of flat records (a loaded context) without the general road's calls."""
    if not value:
        return type(value)()
    if type(value) is list:
        copied = flat_records_copy(value)
        if copied is not None:
            return copied
    return owned_copy(value)


# What deepcopy shares rather than copies: immutable scalars and classes (a subclass of a scalar may
# be mutable, and is copied).
_SHARED_BY_COPIES = ATOMS | {type}


def copy_field(value: Any) -> Any:
    """A content field's value as the generated `copy()` copies it: what deepcopy shares (scalars, a
    class) shared, an empty list or dict (the usual defaults) a new one, anything else by `copy_value`."""
    kind = type(value)
    if kind in _SHARED_BY_COPIES:
        return value
    if (kind is list or kind is dict) and not value:
        return kind()
    return copy_value(value)


def copy_value(value: Any) -> Any:
    """`deep_copy(value)` for copies of a message (`clone`, `MessageContent.copy`): a value deepcopy
    cannot copy is shared, inside copies of the lists and dicts around it (construction kept it as
    given); one nested too deep is the ValueError of the record writers, which could not write it."""
    try:
        try:
            return _copy_at_any_depth(deep_copy, value)
        except RecursionError:
            raise
        except Exception:
            return _copy_around_uncopyable(value)
    except RecursionError:
        raise ValueError(UNWRITABLE_DEPTH) from None


def _copy_around_uncopyable(value: Any) -> Any:
    """A container that holds something deepcopy cannot copy, copied with that something shared, so the
    copy's containers are still its own: a dict, list or tuple rebuilt, a named tuple by its `_make`,
    another mutable mapping or sequence (an OrderedDict, a list subclass) kept of its type, copied by
    `copy.copy` and its members replaced by their copies. Anything else deepcopy refused, and a
    container `copy.copy` cannot copy either, is shared as it is."""
    kind = type(value)
    if kind is dict:
        return {key: _copy_part(item) for key, item in value.items()}
    if kind is list:
        return [_copy_part(item) for item in value]
    if kind is tuple:
        return tuple(_copy_part(item) for item in value)
    if isinstance(value, tuple) and hasattr(kind, "_make"):  # a named tuple
        return kind._make(_copy_part(item) for item in value)
    if not isinstance(value, (MutableMapping, MutableSequence)):
        return value
    try:
        duplicate = copy.copy(value)
    except Exception:  # as uncopyable to copy.copy as to deepcopy: shared, as construction kept it
        return value
    if duplicate is value:
        return value
    keys = list(duplicate.keys()) if isinstance(duplicate, MutableMapping) else range(len(duplicate))
    for key in keys:
        duplicate[key] = _copy_part(duplicate[key])
    return duplicate


def _copy_part(value: Any) -> Any:
    try:
        return deep_copy(value)
    except RecursionError:
        raise
    except Exception:  # rebuilt around the uncopyable part (only on this rare road: quadratic in depth)
        return _copy_around_uncopyable(value)


def _normalised(normalisers: Mapping[str, Callable[[Any], Any]], changes: Mapping[str, Any]) -> Mapping[str, Any]:
    """`changes` with each value a normaliser names put through it (a new mapping: the caller's is left
    as it is for the full rebuild, should the copy decline)."""
    if not normalisers or changes.keys().isdisjoint(normalisers):
        return changes
    return {name: normalisers[name](value) if name in normalisers else value for name, value in changes.items()}


def _all_text(values: Mapping[str, Any]) -> bool:
    """Whether every value is a str or None (nothing a content copies)."""
    for value in values.values():  # noqa: SIM110 (a loop: all() of a generator costs a frame per call)
        if type(value) is not str and value is not None:
            return False
    return True


def _owned(values: Mapping[str, Any]) -> dict[str, Any]:
    return {name: owned_copy(value) for name, value in values.items()}


def shallow_copy(value: Any) -> Any:
    """A list or dict copied one level deep (so the copy's container is its own); anything else as is."""
    kind = type(value)
    if kind is list or (kind is not str and isinstance(value, list)):
        return list(value)
    if kind is dict or (kind is not str and isinstance(value, dict)):
        return dict(value)
    return value
