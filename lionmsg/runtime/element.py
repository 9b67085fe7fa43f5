"""Identity base of every record: `Element` (id, created_at, metadata) and `Node` (content, embedding).

Records name their concrete class in `metadata.lion_class` on the wire. Loading resolves that name
through a registry of classes defined in this process (never by importing a module by name).
"""

from __future__ import annotations

import inspect
import math
import re
import sys
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from contextvars import ContextVar
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, NoReturn, TypeVar, cast, overload
from uuid import UUID

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    FieldSerializationInfo,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    field_serializer,
    field_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError, PydanticSerializationError, to_json, to_jsonable_python

from lionmsg.runtime.ids import new_uuid4, uuid_text
from lionmsg.runtime.wire import (
    CANONICAL_UUID,
    UNWRITABLE_DEPTH,
    KeyCollisionError,
    check_finite,
    check_mode,
    finite_parts_noted,
    loads_json,
    refuse_colliding_keys,
    write_json,
)
from lionmsg.runtime.wording import with_article

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "Element",
    "Node",
    "check_embedding",
    "element_class",
    "library_loader",
    "part_of_record",
    "parts_later",
    "record_error",
    "record_of_part",
    "records_of_parts",
]

T = TypeVar("T")
E = TypeVar("E", bound="Element")

_PARTS_LATER_KEY = "lionmsg_parts_later"
_PARTS_LATER: dict[str, Any] = {_PARTS_LATER_KEY: True}  # the serialization context that says so


def chosen_parts(record: dict[str, Any], info: Any, handled: Collection[str]) -> dict[str, Any]:
    """A container's record as its serializer returns it: the keys pydantic's dump made (`handled`, its
    fields, with `include`/`exclude` applied by pydantic) as they are, and the parts the serializer added
    itself, which pydantic's options do not reach, chosen as those options say, at every level."""
    if info.include is None and info.exclude is None:
        return record
    chosen = chosen_keys(
        {key: value for key, value in record.items() if key not in handled}, info.include, info.exclude
    )
    return {
        key: value if key in handled else chosen[key]
        for key, value in record.items()
        if key in handled or key in chosen
    }


def parts_later(info: Any) -> bool:
    """Whether a container's serializer, called with `info`, leaves its parts' records to
    `Element._unchecked_record` (which adds them after pydantic's dump)."""
    context = info.context
    return type(context) is dict and context.get(_PARTS_LATER_KEY) is True


def record_of_part(part: Element, mode: str, place: str) -> dict[str, Any]:
    """`part`'s record, unchecked, for a container that holds it at `place` (`$.messages`): a colliding
    key inside it is named from the top of the container's record (review bv 6)."""
    try:
        return part._unchecked_record(mode)
    except KeyCollisionError as error:
        error.inside(place)
        raise


def records_of_parts(parts: Iterable[Element], mode: str, place: str) -> list[dict[str, Any]]:
    """The records of `parts`, held as the list at `place` (`$.collections`), as `record_of_part`."""
    records: list[dict[str, Any]] = []
    append = records.append
    try:
        for part in parts:
            append(part._unchecked_record(mode))
    except KeyCollisionError as error:
        error.inside(f"{place}[{len(records)}]")  # the part that raised is the next one
        raise
    return records


# The schema's form of `metadata.lion_class`: a class name, or a dotted path of identifiers ending in it.
_LION_CLASS_PATH = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Za-z_][A-Za-z0-9_]*")

# For every Element class, itself and its subclasses by short name: what `metadata.lion_class` resolves
# against. Scoped per class, so a same-named class in another hierarchy never shadows one (see _register).
_CLASSES_BY_NAME: dict[type[Element], dict[str, type[Element]]] = {}


def _canonical_uuid(value: Any) -> Any:
    # The schema's UUID form; pydantic alone would also take braces, URNs and bare hex, and bytes in any
    # of those spellings or as the 16 raw bytes.
    if isinstance(value, str) and CANONICAL_UUID.fullmatch(value) is None:
        raise ValueError(f"expected a UUID in canonical 8-4-4-4-12 form, got {value!r}")
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise ValueError(f"expected a UUID in canonical 8-4-4-4-12 form, got {type(value).__name__}")
    if isinstance(value, UUID) and type(value) is not UUID:  # a subclass may spell itself otherwise
        return UUID(int=value.int)  # in records: held as the plain UUID it names, as a sender is
    return value


def record_error(model: type[Any], loc: tuple[str | int, ...], message: str, value: Any) -> ValidationError:
    """A pydantic ValidationError for one field of a record, raised where pydantic itself cannot see it."""
    detail: InitErrorDetails = {
        "type": PydanticCustomError("invalid_record", message),
        "loc": loc,
        "input": value,
    }
    return ValidationError.from_exception_data(model.__name__, [detail])


def part_of_record(model: type[Any], loc: tuple[str | int, ...], load: Callable[[], T]) -> T:
    """`load()`, which loads a part of a `model` record with the part's own class; its ValidationError
    located within the whole record (a flow's broken progression in an Exchange record is at
    `("flows", 3, "progressions", 1)`, not at a Flow's `("progressions", 1)`, which names no flow)."""
    try:
        return load()
    except ValidationError as error:
        details: list[InitErrorDetails] = [
            {
                "type": PydanticCustomError(item["type"], item["msg"]),  # the message as written: no template
                "loc": (*loc, *item["loc"]),
                "input": item["input"],
            }
            for item in error.errors(include_url=False)
        ]
        raise ValidationError.from_exception_data(model.__name__, details) from None


def element_class(base: type[Element], lion_class: str) -> type[Element] | None:
    """The class a `lion_class` value names among `base` and its subclasses, or None."""
    return _CLASSES_BY_NAME.get(base, {}).get(lion_class_name(lion_class))


def _register(base: type[Element], cls: type[Element]) -> None:
    # The first class of a name wins, so a same-named class defined later elsewhere never shadows it;
    # a redefinition of the same class (same module and qualified name, e.g. a reload) replaces it.
    names = _CLASSES_BY_NAME.setdefault(base, {})
    known = names.get(cls.__name__)
    if known is None or (known.__module__, known.__qualname__) == (cls.__module__, cls.__qualname__):
        names[cls.__name__] = cls


def lion_class_name(value: str) -> str:
    """The class a `lion_class` value names: the last segment of a dotted path of identifiers.

    A value of any other form (`"a..Instruction"`, `".Instruction"`, `"my-pkg.Instruction"`) is returned
    whole, so it names no class: the schemas reject it, and loading must agree."""
    return value.rpartition(".")[2] if _LION_CLASS_PATH.fullmatch(value) else value


_DOUBLE_MAX = sys.float_info.max


def _within_a_double(value: Any) -> Any:
    """An integer beyond a double's range breaks the schema's bounds (float() would round it to the
    largest double, or fail): a ValueError, as the schema validator reports it."""
    if type(value) is int and not -_DOUBLE_MAX <= value <= _DOUBLE_MAX:
        raise ValueError("an integer beyond the range of a double (the schema's minimum/maximum)")
    return value


UuidText = Annotated[str, WithJsonSchema({"type": "string", "format": "uuid"})]
"""A UUID written as text: what pydantic's serialization JSON schema says of it (as of a UUID)."""


class Element(BaseModel):
    """Anything with a durable identity: a frozen `id`, a frozen `created_at` and free `metadata`."""

    # `ser_json_inf_nan="constants"`: a NaN or infinity in free-form data stays a float through
    # model_dump, so to_dict/to_json can refuse it; pydantic's default would write `null` silently.
    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, arbitrary_types_allowed=True, ser_json_inf_nan="constants"
    )

    id: Annotated[UUID, BeforeValidator(_canonical_uuid)] = Field(default_factory=new_uuid4, frozen=True)
    created_at: Annotated[float, BeforeValidator(_within_a_double)] = Field(
        default_factory=time.time, frozen=True, strict=True, allow_inf_nan=False
    )
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        for ancestor in cls.__mro__:
            if isinstance(ancestor, type) and issubclass(ancestor, Element):
                _register(ancestor, cls)

    @field_validator("metadata")
    @classmethod
    def _strip_lion_class(cls, value: Any) -> Any:
        # `lion_class` is a wire discriminator, not user data: check it names this class, then drop it.
        # After pydantic's validation: whatever Mapping was given is a dict of text keys by then (a bytes
        # key `b"lion_class"` included). A subclass may declare metadata otherwise (None allowed, say);
        # a new dict is made, in case its type keeps the caller's own.
        if isinstance(value, Mapping) and "lion_class" in value:
            named = value["lion_class"]
            if not isinstance(named, str) or lion_class_name(named) != cls.__name__:
                # Located at ("metadata", "lion_class") as `from_dict` locates it: pydantic puts this
                # error's place under the field's.
                message = f"Metadata class mismatch: lion_class {named!r} does not name {cls.__name__}"
                raise record_error(cls, ("lion_class",), message, named)
            value = {key: item for key, item in value.items() if key != "lion_class"}
        return value

    # `dict[Any, Any]`: pydantic writes the keys of a `dict[str, ...]` return lossily, a lone surrogate as
    # three U+FFFD, where an untyped key is an error (`model_dump` then keeps it).
    @field_serializer("metadata")
    def _write_lion_class(self, value: dict[str, Any], info: FieldSerializationInfo) -> dict[Any, Any]:
        written = {**value, "lion_class": type(self).__name__}
        if info.include is None and info.exclude is None:
            return written
        return chosen_keys(written, info.include, info.exclude)  # `exclude={"metadata": {"note"}}`

    @field_serializer("id")
    def _write_id(self, value: UUID) -> UuidText:
        # Text in both modes, as LionAGI's model_dump() writes it: json.dumps(x.model_dump()) works.
        return uuid_text(value)

    def __eq__(self, other: object) -> bool:
        # Identity semantics, as in LionAGI: two records are the same record when their ids are.
        if not isinstance(other, Element):
            return NotImplemented
        return self.id == other.id

    def __hash__(self) -> int:
        return hash(self.id)

    # True for a class whose constructor builds state besides the fields (a pile's items, a progression's
    # ids, a branch's manager, a mailbox's mail): model_construct goes through that constructor.
    _built_by_its_constructor: ClassVar[bool] = False

    # The pydantic mypy plugin declares model_construct itself, with the fields as parameters.
    @classmethod  # type: ignore[no-redef]
    def model_construct(cls, _fields_set: set[str] | None = None, **values: Any) -> Self:  # type: ignore[override]
        """pydantic's construction without validation; for a class whose state is more than its fields,
        its constructor with its checks (pydantic's own would leave that state unmade, and the object
        failed at first use with an AttributeError)."""
        if not cls._built_by_its_constructor:
            return super().model_construct(_fields_set, **values)
        built = cls(**values)
        if _fields_set is not None:
            object.__setattr__(built, "__pydantic_fields_set__", set(_fields_set))
        return built

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """pydantic's copy, except that every key of `update` must be a field of the model. pydantic
        writes any other (a computed `role`, a LionAGI-only name such as a pile's `collections`) into the
        copy's `__dict__`, where nothing reads it: the copy kept what it was asked to change, silently.
        A TypeError instead, before anything is copied (a Progression takes `order`). The values are
        pydantic's to write as given, unchecked (its rule: the caller trusts them), since checking them
        one field at a time would refuse what a model's own cross-field rules accept."""
        if update:
            fields = type(self).model_fields
            unknown = [key for key in update if key not in fields]
            if unknown:
                raise TypeError(
                    f"{type(self).__name__}.model_copy(update=...) sets its fields ({', '.join(fields)}); "
                    f"not a field: {', '.join(map(repr, unknown))}"
                )
        return super().model_copy(update=update, deep=deep)

    @classmethod
    def class_name(cls, full: bool = False) -> str:
        """The class's name; with `full=True`, its module and qualified name (LionAGI's signature)."""
        return f"{cls.__module__}.{cls.__qualname__}" if full else cls.__name__

    @property
    def created_datetime(self) -> datetime:
        """`created_at` as a UTC-aware datetime, as LionAGI gives it; a ValueError for a time no datetime
        holds (the schema allows any finite number: LionAGI raises OverflowError, OSError or ValueError
        by the platform's and the value's limits)."""
        try:
            return datetime.fromtimestamp(self.created_at, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise ValueError(
                f"created_at {self.created_at!r} is no time a datetime can hold (years 1 to 9999)"
            ) from None

    # -- records -------------------------------------------------------------------------------

    def to_dict(self, mode: Literal["json", "python"] = "json", **options: Any) -> dict[str, Any]:
        """The record: JSON-ready by default (`mode="python"` spells ids as text too, as LionAGI does). In JSON
        mode a NaN or infinity anywhere in it is a ValueError; `mode="python"` keeps it. A value that
        refers to itself or is nested too deeply to write is a ValueError where the writer recurses
        (JSON mode always; python mode keeps plain values as they are). `options` (`exclude`,
        `include`...) go to pydantic's `model_dump`, as LionAGI passes them: a part of the record then,
        which `from_dict` may not load."""
        check_mode(mode)
        with finite_parts_noted() as finite_parts:  # the messages' one-pass records, checked as they were built
            try:
                record = self.model_dump(mode=mode, **options) if options else self._unchecked_record(mode)
            except RecursionError:
                raise ValueError(UNWRITABLE_DEPTH) from None
        if mode == "json":
            check_finite(record, finite_parts)
        return record

    def _unchecked_record(self, mode: str) -> dict[str, Any]:
        """`to_dict(mode)`'s record without its finiteness check (a container checks its whole record
        once). A container's parts are added after pydantic's dump, not inside its serializer, where
        pydantic would count the nesting of every part's values against its depth limit (~255)."""
        record: dict[str, Any] = self.model_dump(mode=mode, context=_PARTS_LATER)
        self._add_part_records(record, mode)
        return record

    def model_dump(self, *, mode: Literal["json", "python"] | str = "python", **options: Any) -> dict[str, Any]:
        """Pydantic's dump, except that in JSON mode a dict key holding a lone surrogate is kept, as the
        one-pass roads and the JSON writers keep it: pydantic-core refuses such a key there
        (UnicodeEncodeError), so the python-mode dump is brought to JSON form around it. A key that is no
        string and whose text another key of its dict has in free-form values (content, metadata) is a
        ValueError there: the JSON record would keep one of the two values."""
        if mode == "json":
            if options.get("include") is None and options.get("exclude") is None:
                self._refuse_colliding_keys()
            else:  # a part of the record: pydantic's rule holds, also in the parts a container adds
                token = _PYDANTIC_KEY_RULE.set(True)
                try:
                    return self._pydantic_dump(mode, options)
                finally:
                    _PYDANTIC_KEY_RULE.reset(token)
        return self._pydantic_dump(mode, options)

    def _pydantic_dump(self, mode: str, options: dict[str, Any]) -> dict[str, Any]:
        try:
            return super().model_dump(mode=mode, **options)
        except PydanticSerializationError as error:
            _raised_options_error(error)
        except UnicodeEncodeError:
            if mode != "json":
                raise
            return jsonable_keeping_keys(super().model_dump(mode="python", **options))  # type: ignore[no-any-return]

    def _refuse_colliding_keys(self) -> None:
        """For a whole dump (no include or exclude, which may leave out either key: then pydantic's own
        rule, the last of the two written, holds, in every part of it)."""
        if not _PYDANTIC_KEY_RULE.get():
            self._check_own_keys()

    def _own_keys_collide(self) -> bool:
        """Whether its own free-form fields hold two keys with one JSON text (see `_refuse_colliding_keys`)."""
        try:
            self._check_own_keys()
        except KeyCollisionError:
            return True
        return False

    def _check_own_keys(self) -> None:
        values = self.__dict__
        for name in _FREE_FORM_FIELDS:
            if name in values:
                refuse_colliding_keys(values[name], f"$.{name}")

    def _add_part_records(self, record: dict[str, Any], mode: str) -> None:
        """A container puts the records of what it holds (messages, piles, flows) into its own record;
        its serializer leaves them out when `parts_later(info)` says `_unchecked_record` adds them."""

    @overload
    def to_json(self, decode: Literal[True] = True, **options: Any) -> str: ...
    @overload
    def to_json(self, decode: Literal[False], **options: Any) -> bytes: ...
    @overload
    def to_json(self, decode: bool = ..., **options: Any) -> str | bytes: ...
    def to_json(self, decode: bool = True, **options: Any) -> str | bytes:
        """The record as compact JSON text: `to_dict(**options)` written out, so what it refuses (NaN, an
        infinity, bytes that are not UTF-8) is a ValueError here too, wherever it sits. `decode=False`
        gives its UTF-8 bytes, as LionAGI's does."""
        if options:
            options.pop("mode", None)  # always JSON, as LionAGI's
            text = write_json(self.to_dict(**options))
        else:
            text = write_json(self.to_dict())
        return text if decode else text.encode()

    def model_dump_json(self, **options: Any) -> str:
        """`to_json()` when called plainly; with options (indent, exclude...), pydantic's JSON dump,
        refusing NaN and infinities where it would write them bare (`NaN`, not JSON: the config that
        lets `to_dict` see them) but not inside a nested model of its own config, which writes null."""
        if not options:
            return self.to_json()
        if options.get("include") is None and options.get("exclude") is None:
            self._refuse_colliding_keys()  # (indent, exclude_none...: pydantic's writer, the same data)
            try:
                text = super().model_dump_json(**options)
            except PydanticSerializationError as error:
                _raised_options_error(error)
        elif set(options) <= _JSON_DUMP_OPTIONS:
            token = _PYDANTIC_KEY_RULE.set(True)  # the parts a container adds keep the last of two keys
            try:
                if self._own_keys_collide():
                    # Written from the JSON-mode dump: pydantic's JSON writer would write both keys of
                    # such a pair (`{"1":"a","1":"b"}`), where the dict dump keeps the last (review by 4).
                    layout = {name: options.pop(name) for name in ("indent", "ensure_ascii") if name in options}
                    text = to_json(self.model_dump(mode="json", **options), **layout).decode()
                else:  # pydantic's own text (a NaN in a nested model of its own config as null: review bz 2)
                    text = super().model_dump_json(**options)
            except PydanticSerializationError as error:
                _raised_options_error(error)
            finally:
                _PYDANTIC_KEY_RULE.reset(token)
        else:  # an option model_dump_json does not take: pydantic's own TypeError
            text = super().model_dump_json(**options)
        if "NaN" in text or "Infinity" in text:  # rare: most likely inside a string
            try:
                loads_json(text)
            except ValueError:  # pydantic writes valid JSON but for those constants
                raise ValueError("cannot write NaN or an infinity as JSON (to_json() says where it is)") from None
        return text

    @classmethod
    def from_json(cls, json_str: str | bytes) -> Self:
        """The element a JSON record holds (`json_str`: LionAGI's name for it, so keyword calls port)."""
        try:
            data = loads_json(json_str)
        except ValueError as exc:  # not JSON, or NaN/Infinity (which no record can hold)
            raise ValueError(f"not a JSON document: {exc}") from exc
        return cls._from_own_record(data)

    @classmethod
    def _from_own_record(cls, data: Any) -> Self:
        """`from_dict` for a record nothing else holds (just read from JSON text): a class whose
        `from_dict` copies what the caller's record holds skips that copy here."""
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Load a record: the class named by `metadata.lion_class` (this class when absent), which must
        be this class or a subclass of it. Records must carry `id` and `created_at`."""
        if type(data) is not dict and not isinstance(data, Mapping):
            raise TypeError(f"{with_article(cls.__name__)} record must be a mapping, got {type(data).__name__}")
        target = cls._record_class(data)
        if target is not cls:
            # The named class's loader as the library defines it (a message keeps its own copies of the
            # record's lists and dicts, and takes its kind's fast road); a user's override is left out,
            # as everywhere a record names its class.
            return library_loader(target)(data)
        record = dict(data)
        for key in ("id", "created_at"):
            if key not in record:
                raise record_error(target, (key,), "Field required", record)
        target._prepare_record(record)
        return target._load_prepared(record)

    @classmethod
    def _record_class(cls, data: Mapping[str, Any]) -> type[Self]:
        metadata = data.get("metadata")
        if (type(metadata) is not dict and not isinstance(metadata, Mapping)) or "lion_class" not in metadata:
            return cls
        named = metadata["lion_class"]
        if type(named) is str and named == cls.__name__:  # the common case: the record names this class
            return cls
        if not isinstance(named, str):
            raise record_error(cls, ("metadata", "lion_class"), "lion_class must be a string", named)
        found = element_class(cls, named)
        if found is None:
            raise record_error(
                cls,
                ("metadata", "lion_class"),
                f"lion_class {named!r} does not name {cls.__name__} or a subclass of it",
                named,
            )
        return cast("type[Self]", found)

    @classmethod
    def _prepare_record(cls, record: dict[str, Any]) -> None:
        """Hook: turn record values into what the model validates (in place, on a private copy)."""

    @classmethod
    def _load_prepared(cls, record: dict[str, Any]) -> Self:
        """Hook: the instance of a prepared record (a subclass may take a faster road to the same result)."""
        return cls.model_validate(record)


_CLASSES_BY_NAME.setdefault(Element, {})["Element"] = Element


def library_loader(cls: type[E]) -> Callable[[Mapping[str, Any]], E]:
    """`cls.from_dict` as the library defines it for `cls`: the one of the nearest lionmsg class in its
    MRO that defines one, bound to `cls`. What a user's class puts there itself (an override, a
    staticmethod, a wrapper of the library's) is left out: it is told apart by the class that holds
    it, never by the function's own (copyable) module name."""
    for ancestor in cls.__mro__:
        if "from_dict" in ancestor.__dict__ and ancestor.__module__.startswith("lionmsg."):
            return ancestor.__dict__["from_dict"].__get__(None, cls)  # type: ignore[no-any-return]
    raise TypeError(f"{cls.__name__} is not an element class")  # unreachable: Element defines one


# The fields that hold a caller's data as it came: the only places a key that is no string can sit.
_FREE_FORM_FIELDS = ("content", "metadata")


def jsonable_keeping_keys(value: Any) -> Any:
    """A python-mode dump in JSON form as pydantic's JSON mode writes it (another key as its text, by
    pydantic's rule), its string keys kept as they are (a lone surrogate included: JSON writes it as an
    escape)."""
    kind = type(value)
    if kind is dict:
        return {
            key if type(key) is str else next(iter(to_jsonable_python({key: None}))): jsonable_keeping_keys(item)
            for key, item in value.items()
        }
    if kind is list or kind is tuple:
        return [jsonable_keeping_keys(item) for item in value]
    return to_jsonable_python(value)


def chosen_keys(record: dict[str, Any], include: Any, exclude: Any) -> dict[str, Any]:
    """`record` as `include`/`exclude` choose from it, in pydantic's grammar at every level (sets or
    dicts of keys, list positions, `__all__`): what a serializer that builds a dict itself (a
    container's parts, content, metadata with its class name) applies, since pydantic's own options
    do not reach into a value a serializer returns. pydantic applies them (python mode: the values are
    the record's already)."""
    chosen: dict[str, Any] = chosen_data(record, include, exclude)
    return chosen


def chosen_data(data: Any, include: Any, exclude: Any) -> Any:
    """`chosen_keys` of any plain data: a list's positions are chosen as a dict's keys are."""
    if include is None and exclude is None:
        return data
    try:
        return _PLAIN_DATA.dump_python(data, include=include, exclude=exclude)
    except TypeError as error:  # options of the wrong shape here (`{"collections": 5}`): pydantic's words
        raise DumpOptionsError(str(error)) from None


class DumpOptionsError(TypeError):
    """Options that do not fit the part they reach, found inside a serializer, which pydantic wraps in a
    `PydanticSerializationError` (a ValueError): the dumps unwrap it, so the error is the TypeError that
    pydantic raises for the same options on a plain model."""


# Set while a dump with `include`/`exclude` runs: its parts' keys follow pydantic's rule too (review by 3).
_PYDANTIC_KEY_RULE: ContextVar[bool] = ContextVar("lionmsg_pydantic_key_rule", default=False)

_JSON_DUMP_OPTIONS = frozenset(inspect.signature(BaseModel.model_dump_json).parameters) - {"self"}


def _raised_options_error(error: PydanticSerializationError) -> NoReturn:
    cause: BaseException | None = error
    while isinstance(cause, PydanticSerializationError):  # a JSON dump wraps the serializer's error again
        cause = cause.__cause__
    if isinstance(cause, (DumpOptionsError, KeyCollisionError)):
        raise cause from None
    if isinstance(cause, RecursionError) or str(error).endswith(": RecursionError"):  # a container's parts
        raise ValueError(UNWRITABLE_DEPTH) from None
    # A JSON dump keeps only the text of the error it wrapped: the options error is named in it.
    _, named, words = str(error).partition(f"{DumpOptionsError.__name__}: ")
    if named:
        raise DumpOptionsError(words) from None
    _, named, words = str(error).partition(f"{KeyCollisionError.__name__}: ")
    if named:
        raise ValueError(words) from None
    raise error


_PLAIN_DATA: TypeAdapter[Any] = TypeAdapter(Any)

# What pydantic never reads as a list (an embedding given as one is its ValidationError as it is).
_NOT_A_LIST = (str, bytes, bytearray, memoryview, Mapping)


class Node(Element):
    """An Element with content and an optional embedding."""

    content: Any = None
    embedding: list[Annotated[float, Field(strict=True, allow_inf_nan=False)]] | None = None

    @field_validator("embedding", mode="before")
    @classmethod
    def _embedding_within_doubles(cls, value: Any) -> Any:
        # One pass over the list here rather than a validator call per number (embeddings are long). Any
        # other sequence or iterable pydantic reads as a list is made one first, so it is checked too.
        if type(value) is not list and isinstance(value, Iterable) and not isinstance(value, _NOT_A_LIST):
            value = list(value)
        if type(value) is list:
            for number in value:
                if type(number) is int:
                    _within_a_double(number)
        return value

    def _unchecked_record(self, mode: str) -> dict[str, Any]:
        if mode == "json" and self.embedding is not None:
            check_embedding(self, self.embedding)
        return super()._unchecked_record(mode)


def check_embedding(owner: Element, embedding: list[Any]) -> bool:
    """Whether an embedding holds finite floats only, what a record writes as they are; a ValueError naming
    the entry when it holds something no record can (a bool, a string, an integer beyond a double):
    changed in place since it was checked, where pydantic's dump would write it into the record or fail
    with a TypeError. False for an integer within a double's range and a float subclass's value (numpy's
    float64: pydantic's dump writes either as a float) and for a NaN or an infinity, which is left to the
    JSON writers' check, naming where it sits in the whole record."""
    if set(map(type, embedding)) <= {float}:  # the usual case, in C
        return all(map(math.isfinite, embedding))
    plain = True
    for index, number in enumerate(embedding):
        kind = type(number)
        if kind is float:
            plain = plain and math.isfinite(number)
        elif (kind is int and -_DOUBLE_MAX <= number <= _DOUBLE_MAX) or isinstance(number, float):
            plain = False  # a float subclass (numpy's float64, say) is written as the float it is
        else:
            shown = "an integer beyond the range of a double" if kind is int else repr(number)
            raise ValueError(
                f"cannot write {shown} in the embedding of {type(owner).__name__} {owner.id} (at index {index}): "
                "an embedding holds numbers"
            )
    return plain
