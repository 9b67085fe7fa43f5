"""Validate records against the published schemas, with errors a person can act on.

The verdict is the union schema's (`record.schema.json`, the bundle's root). A union failure alone says
little ("not valid under any of the given schemas"), so the errors come from the one kind the record
names by `metadata.lion_class` (the generic Message when it names none), each with where it is in the
record and where the broken rule is in the schema files. A decoded record holding a NaN or an infinity
is invalid wherever it is: where the schemas allow any value no rule of theirs refuses it, yet it is
not JSON (such an error has no schema path).

Needs the `cli` extra (jsonschema, referencing).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urldefrag, urljoin

import referencing
import referencing.jsonschema
from jsonschema import ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import Draft202012Validator, extend

from lionmsg.schema.files import kind_of_class, load_bundle
from lionmsg.schema.inline import inline_refs
from lionmsg.schema.patterns import python_pattern

__all__ = ["RecordError", "RecordValidator"]

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class RecordError:
    """One broken rule: `location` in the record (a JSONPath), `schema_path` as `file#/json/pointer`."""

    location: str
    schema_path: str
    message: str

    def __str__(self) -> str:
        return f"{self.location}: {self.message} (schema: {self.schema_path})"


def _ecma_pattern(
    validator: Validator, pattern: str, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if isinstance(instance, str) and re.search(python_pattern(pattern), instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _json_number(checker: Any, instance: Any) -> bool:
    # JSON has no NaN or infinity: Python's json module reads them (`NaN`, `1e400`), no other client does.
    # Every integer is a JSON number, however long: one beyond a double breaks a bound, not the type.
    if isinstance(instance, bool):
        return False
    return isinstance(instance, int) or (isinstance(instance, float) and math.isfinite(instance))


_Draft: type[Validator] = extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    {"pattern": _ecma_pattern},
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("number", _json_number),
)


def _without_dialects(bundle: dict[str, Any]) -> dict[str, Any]:
    """The bundle without `$schema` keys (each file is 2020-12, like the bundle itself).

    jsonschema picks a validator class for every subschema that names a dialect, which would swap our
    ECMA `pattern` back for Python's inside every `$ref` target."""
    copy = {key: value for key, value in bundle.items() if key != "$schema"}
    copy["$defs"] = {
        name: {key: value for key, value in schema.items() if key != "$schema"}
        for name, schema in bundle["$defs"].items()
    }
    return copy


# The verdict needs no error messages, and jsonschema's spell the failing value with repr(), which runs
# out of recursion on a value nested hundreds of levels deep (a generic message's content, checked
# against the typed kinds' branches of the union), even where no rule fails on it: these keywords give
# the same verdicts without spelling the value.
def _type_verdict(validator: Validator, types: Any, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    if not any(validator.is_type(instance, kind) for kind in ([types] if isinstance(types, str) else types)):
        yield ValidationError("not of the type")


def _valid_under(validator: Any, subschema: Any, instance: Any) -> bool:
    # `descend` (the keywords' own way into a subschema) is on jsonschema's classes, not its protocol.
    return next(validator.descend(instance, subschema), None) is None


def _one_of_verdict(
    validator: Validator, subschemas: list[Any], instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if sum(1 for subschema in subschemas if _valid_under(validator, subschema, instance)) != 1:
        yield ValidationError("not valid under exactly one of the given schemas")


def _any_of_verdict(
    validator: Validator, subschemas: list[Any], instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not any(_valid_under(validator, subschema, instance) for subschema in subschemas):
        yield ValidationError("not valid under any of the given schemas")


def _enum_verdict(
    validator: Validator, values: list[Any], instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not any(_same_json_scalar(value, instance) for value in values):
        yield ValidationError("not one of the values")


def _same_json_scalar(value: Any, instance: Any) -> bool:
    """JSON equality for an enum's values, all scalars in these schemas (`make check` holds them to it): a
    boolean equals only itself (1 is not true), a number any equal number, text or null itself."""
    if isinstance(value, bool) or isinstance(instance, bool):
        return value is instance
    if isinstance(value, (int, float)):
        return isinstance(instance, (int, float)) and value == instance
    return type(value) is type(instance) and value == instance


_Verdict: type[Validator] = extend(  # type: ignore[no-untyped-call]
    _Draft, {"type": _type_verdict, "oneOf": _one_of_verdict, "anyOf": _any_of_verdict, "enum": _enum_verdict}
)


class RecordValidator:
    """Validators for the union and each kind, built once from the bundle."""

    def __init__(self, bundle: dict[str, Any] | None = None) -> None:
        self._bundle = _without_dialects(bundle if bundle is not None else load_bundle())
        resource = referencing.jsonschema.DRAFT202012.create_resource(self._bundle)
        # No `retrieve`: a $ref outside the bundle fails instead of touching the network.
        self._registry: referencing.Registry[Any] = (
            referencing.Registry().with_resource(self._bundle["$id"], resource).crawl()
        )
        self._base = self._bundle["$id"].rsplit("/", 1)[0] + "/"
        self._union = _Draft(self._bundle, registry=self._registry)
        # The verdict, from the union with every $ref inlined: the same rules, without the per-$ref
        # resolver look-ups that made validation cost milliseconds per record.
        self._verdict = _Verdict(inline_refs(self._bundle, self._bundle))
        self._kinds = {
            name.removeprefix("messages."): _Draft(schema, registry=self._registry)
            for name, schema in self._bundle["$defs"].items()
            if name.startswith("messages.")
        }

    def is_valid(self, record: Any) -> bool:
        return _spelling_long_integers_short(self._is_valid, record)

    def _is_valid(self, record: Any) -> bool:
        return next(_non_finite_paths(record), None) is None and bool(self._verdict.is_valid(record))

    def kind_of(self, record: Any) -> str:
        """The kind a record claims to be (`instruction`, ...; `message` when it names none)."""
        metadata = record.get("metadata") if isinstance(record, dict) else None
        return kind_of_class(metadata.get("lion_class") if isinstance(metadata, dict) else None)

    def errors(self, record: Any) -> list[RecordError]:
        """Every broken rule, in record order; empty when the record is valid. A record nested too deeply
        for jsonschema (it recurses per level, and spells failing values with repr) is one error."""
        try:
            return _spelling_long_integers_short(self._errors, record)
        except RecursionError:
            return [RecordError("$", "", "nested too deeply to validate (jsonschema recurses per level)")]

    def _errors(self, record: Any) -> list[RecordError]:
        if self._is_valid(record):
            return []
        found: list[tuple[list[int], str, RecordError]] = []
        reported: set[tuple[Any, ...]] = set()
        if not self._verdict.is_valid(record):  # invalid for its shape (maybe a non-finite number too)
            validator = self._kinds[self.kind_of(record)]
            broken = list(validator.iter_errors(record))
            if not broken:  # valid as its kind, yet not exactly one kind of the union: report the union's view
                validator, broken = self._union, list(self._union.iter_errors(record))
            for error in broken:
                reported.add(tuple(error.absolute_path))
                where = RecordError(error.json_path, self._schema_path(validator, error), error.message)
                found.append((_record_order(record, error.absolute_path), error.message, where))
        # A non-finite number where the schemas allow any value (content, metadata...) breaks no rule of
        # theirs, but no JSON reader but Python's reads it: reported where no rule of theirs did already.
        for path, value in _non_finite_paths(record):
            if tuple(path) not in reported:
                message = f"{value!r} is not a JSON number: numbers must be finite"
                where = RecordError(ValidationError(message, path=path).json_path, "", message)
                found.append((_record_order(record, path), message, where))
        return [where for _, _, where in sorted(found, key=lambda entry: entry[:2])]

    def _schema_path(self, validator: Validator, error: ValidationError) -> str:
        """Follow the error's schema path through `$ref`s to the file and JSON pointer of the rule.

        jsonschema leaves the `$ref` step out of the path: a key a node lacks is looked up in its target."""
        node: Any = validator.schema
        uri, pointer = node["$id"], ""  # the bundle's own id for the union: a file like any other
        for key in error.absolute_schema_path:
            if key == "$ref" and isinstance(node, dict) and "$ref" in node:
                node, uri, pointer = self._follow(node, uri)
                continue
            while isinstance(node, dict) and key not in node and "$ref" in node:
                node, uri, pointer = self._follow(node, uri)
            node = node[key]
            pointer += "/" + str(key).replace("~", "~0").replace("/", "~1")
        return f"{uri.removeprefix(self._base)}#{pointer}"

    def _follow(self, node: dict[str, Any], uri: str) -> tuple[Any, str, str]:
        target, fragment = urldefrag(urljoin(uri, node["$ref"]))
        found: Any = self._registry.contents(target)
        for part in [p for p in fragment.split("/") if p]:
            found = found[part.replace("~1", "/").replace("~0", "~")]
        if isinstance(found, dict) and "$id" in found:  # a file embedded in the bundle: named as itself
            return found, found["$id"], ""
        return found, target, fragment


# -- integers too long to spell ---------------------------------------------------------------------


def _spelling_long_integers_short(check: Callable[[Any], _T], record: Any) -> _T:
    """`check(record)`, or, when jsonschema cannot spell a failing value (it builds every message with
    repr(), even in a union branch that does not decide the verdict, and repr() refuses an integer past
    sys.get_int_max_str_digits()), `check` of a copy whose long integers spell themselves abbreviated.

    The copy's integers are the same numbers (an int subclass), so the verdict is the same; only the
    messages differ. Nothing process-wide changes: raising the digit limit would, for every thread."""
    try:
        return check(record)
    except ValueError as error:
        if "integer string conversion" not in str(error):
            raise
    return check(_long_integers_abbreviated(record))


class _LongInteger(int):
    """An integer too long for repr(): spelled as its leading and trailing digits and its length."""

    __slots__ = ()

    def __repr__(self) -> str:
        magnitude = abs(self)
        digits = _digit_count(magnitude)
        head, tail = magnitude // 10 ** (digits - _SHOWN), magnitude % 10**_SHOWN
        return f"{'-' if self < 0 else ''}{head}...{tail:0{_SHOWN}d} ({digits} digits)"

    __str__ = __repr__


_SHOWN = 6  # digits shown at each end of a long integer
_ALWAYS_SPELLED_BITS = 2000  # below 640 digits, the smallest digit limit Python allows


def _digit_count(magnitude: int) -> int:
    """The decimal digits of a positive integer, without converting it to text."""
    count = int((magnitude.bit_length() - 1) * math.log10(2)) + 1  # exact or one short
    while 10**count <= magnitude:
        count += 1
    while count > 1 and 10 ** (count - 1) > magnitude:
        count -= 1
    return count


def _long_integers_abbreviated(value: Any) -> Any:
    """`value` (decoded JSON) with every integer repr() refuses replaced by an equal _LongInteger."""
    if isinstance(value, dict):
        return {key: _long_integers_abbreviated(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_long_integers_abbreviated(item) for item in value]
    if type(value) is int and value.bit_length() > _ALWAYS_SPELLED_BITS and not _spells(value):
        return _LongInteger(value)
    return value


def _spells(value: int) -> bool:
    try:
        repr(value)
    except ValueError:
        return False
    return True


def _non_finite_paths(record: Any) -> Iterator[tuple[list[Any], float]]:
    """Each NaN or infinity in decoded JSON, with its path (keys and indexes), in record order: a walk
    of its own, no recursion, so a record nested deeper than the stack allows is walked too."""
    pending: list[tuple[list[Any], Any]] = [([], record)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, float):
            if not math.isfinite(value):
                yield path, value
        elif isinstance(value, dict):
            pending.extend(reversed([([*path, key], item) for key, item in value.items()]))
        elif isinstance(value, list):
            pending.extend(reversed([([*path, index], item) for index, item in enumerate(value)]))


def _record_order(record: Any, path: Iterable[Any]) -> list[int]:
    """Where a value sits in the record, as positions: an index, or a key's place among its object's keys
    (`images[2]` before `images[10]`, `id` before `created_at` when written so)."""
    positions: list[int] = []
    node = record
    for part in path:
        if isinstance(node, dict):
            positions.append(next((place for place, key in enumerate(node) if key == part), len(node)))
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            positions.append(part)
            node = node[part]
        else:
            positions.append(0)
            node = None
    return positions
