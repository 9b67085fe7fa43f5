"""Check the schemas: valid against the 2020-12 metaschema, inside the portable subset, local refs only.

    python tools/check_schemas.py [SCHEMA_DIR]

The portable subset (design.md §3) is the part of JSON Schema 2020-12 that draft-07-era tools
(hypothesis-jsonschema, json-schema-to-typescript, fastjsonschema, ajv) read identically.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jsonschema.validators import Draft202012Validator
from referencing.exceptions import Unresolvable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate import SCHEMA_DIR, SchemaFileError, SchemaSet

BASE_URI = "https://lionmsg.dev/schemas/v1/"
DIALECT = "https://json-schema.org/draft/2020-12/schema"

PORTABLE_KEYWORDS = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "enum", "const",
        "anyOf", "oneOf", "allOf", "$ref", "$defs", "format", "default", "title", "description",
        "readOnly", "minimum", "maximum", "minLength", "maxLength", "pattern",
    }
)  # fmt: skip
ROOT_KEYWORDS = frozenset({"$schema", "$id"})
# Escapes ECMA-262 (`u` flag) and Python's `re` read differently (\d and \w take non-ASCII digits and
# letters in Python; \s and \b differ in which spaces count), or that only Python knows (\A, \Z).
_DIALECT_ESCAPES = frozenset("dDwWsSbBAZz")
# Group openings both dialects read alike: plain, non-capturing, lookahead.
_PORTABLE_GROUPS = ("(?:", "(?=", "(?!")
_METASCHEMA = Draft202012Validator(Draft202012Validator.META_SCHEMA)
# Keywords whose value maps names to subschemas, holds one subschema, or a list of them.
_NAMED_SUBSCHEMAS = ("properties", "$defs")
_ONE_SUBSCHEMA = ("items", "additionalProperties")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf")


def subschemas(schema: Any, pointer: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema object inside `schema` (itself included), with its JSON pointer."""
    if not isinstance(schema, dict):
        return
    yield pointer, schema
    for keyword in _NAMED_SUBSCHEMAS:
        for name, sub in schema.get(keyword, {}).items():
            yield from subschemas(sub, f"{pointer}/{keyword}/{name}")
    for keyword in _ONE_SUBSCHEMA:
        if keyword in schema:
            yield from subschemas(schema[keyword], f"{pointer}/{keyword}")
    for keyword in _SUBSCHEMA_LISTS:
        for index, sub in enumerate(schema.get(keyword, [])):
            yield from subschemas(sub, f"{pointer}/{keyword}/{index}")


# The `x-` annotations the generators, the bundle and the clients read; any other is a misspelling.
ANNOTATIONS = frozenset(
    {
        "x-enum-varnames",
        "x-python-type",
        "x-lionmsg-behaviour",
        "x-lionmsg-declared-by",
        "x-lionmsg-deep-copy",
        "x-lionmsg-expected",
        "x-lionmsg-omit",
        "x-lionmsg-plain-update",
        "x-lionmsg-python-fields",
        "x-lionmsg-schema-version",
    }
)


def problems(schemas: SchemaSet) -> Iterator[str]:
    """Every way the schema set breaks a rule; nothing when it is sound."""
    seen_ids: dict[str, str] = {}
    for name, schema in schemas.by_path.items():
        for error in _METASCHEMA.iter_errors(schema):
            yield f"{name}: invalid against the 2020-12 metaschema: {error.message}"
        if schema.get("$schema") != DIALECT:
            yield f"{name}: $schema must be {DIALECT}"
        expected_id = BASE_URI + name
        if schema.get("$id") != expected_id:
            yield f"{name}: $id must be {expected_id}"
        seen_ids[schema.get("$id", "")] = name
        resolver = schemas.resolver(schema)
        if name.startswith("content/"):
            # The generated loader gives a field a record leaves out its default; it compiles no `required`.
            if "required" in schema:
                yield (
                    f"{name}#/required: a content schema cannot require a property (its generated loader "
                    "reads every field as optional, with its `default`): give each property a default instead"
                )
            for field, sub in schema.get("properties", {}).items():
                if "default" not in sub:
                    yield (
                        f"{name}#/properties/{field}: a content property needs a `default` "
                        "(the generated class's value when a record leaves it out)"
                    )
        for pointer, sub in subschemas(schema):
            for keyword in sorted(k for k in sub if k.startswith("x-") and k not in ANNOTATIONS):
                yield f"{name}#{pointer}: unknown annotation {keyword!r} (a misspelling is ignored silently)"
            expected = sub.get("x-lionmsg-expected")
            if "x-lionmsg-expected" in sub and not (isinstance(expected, str) and expected.strip()):
                yield f"{name}#{pointer}: x-lionmsg-expected must be a phrase (the generated error messages use it)"
            keywords = {k for k in sub if not k.startswith("x-")} - (ROOT_KEYWORDS if pointer == "" else frozenset())
            for keyword in sorted(keywords - PORTABLE_KEYWORDS):
                yield f"{name}#{pointer}: keyword {keyword!r} is outside the portable subset"
            pattern = sub.get("pattern")
            if isinstance(pattern, str):
                for problem in pattern_problems(pattern):
                    yield f"{name}#{pointer}: pattern {pattern!r} {problem}"
            values = sub.get("enum")
            if isinstance(values, list) and not all(v is None or isinstance(v, (str, int, float)) for v in values):
                # lionmsg's validator compares enum values as JSON scalars (lionmsg/schema/validator.py)
                yield f"{name}#{pointer}: enum values must be strings, numbers, booleans or null"
            names = sub.get("properties", {})
            for required in sub.get("required", ()) if isinstance(names, dict) and names else ():
                if required not in names:
                    yield f"{name}#{pointer}/required: {required!r} is not one of the properties"
            if "default" in sub:
                yield from _default_problems(schemas, resolver, f"{name}#{pointer}", sub)
            if "properties" in sub and sub.get("type") != "object":
                yield f'{name}#{pointer}: `properties` needs `"type": "object"` beside it (ajv strict mode)'
            if "$ref" in sub:
                ref = sub["$ref"]
                if "://" in ref:
                    yield f"{name}#{pointer}: $ref {ref!r} must be relative"
                try:
                    resolver.lookup(ref)
                except Unresolvable as exc:
                    yield f"{name}#{pointer}: $ref {ref!r} does not resolve locally ({exc})"
        try:
            schemas.inline(schema, resolver, max_depth=32)
        except RecursionError:
            yield f"{name}: recursive $ref (outside the portable subset)"
        except Unresolvable:
            pass  # reported above


def pattern_problems(pattern: str) -> Iterator[str]:
    """What keeps every client from reading `pattern` alike (see README "Schema rules"): it must be
    anchored (`^...$`, the final `$` unescaped, no `|` outside a group: validators search where the
    generated loader matches whole strings), and hold only what ECMA-262 (`u` flag) and Python read the
    same way: no `.` outside a class (line separators), no \\d \\w \\s \\b or their negations (beyond
    ASCII; `[\\b]`, a backspace in both, is fine), no \\p{...}, \\u{...} or a backslash before a digit
    (back-references, octal), no inline flags, named groups or lookbehind, no `[]` or `[^]`, no
    possessive quantifier and no `{,n}`."""
    found: list[str] = []
    depth, in_class, index = 0, False, 0
    top_level_bar = False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            escaped = pattern[index + 1 : index + 2]
            if escaped in _DIALECT_ESCAPES and not (in_class and escaped == "b"):
                found.append(f"uses \\{escaped}, which ECMA-262 and Python read differently: spell the class out")
            elif escaped in ("p", "P") or escaped.isdigit() or pattern.startswith("u{", index + 1):
                spelled = pattern[index : index + (2 if escaped.isdigit() else 3)]
                found.append(f"uses {spelled!r}, which only one of ECMA-262 and Python reads")
            index += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            if pattern.startswith(("[]", "[^]"), index):
                found.append("uses `[]` or `[^]`, which ECMA-262 and Python read differently")
            in_class = True
            index += 2 if pattern.startswith("[^", index) else 1  # a `]` first in a class is no end in Python
            continue
        elif char == "(":
            if pattern.startswith("(?", index) and not pattern.startswith(_PORTABLE_GROUPS, index):
                found.append(
                    f"uses {pattern[index : index + 3]!r}: only (...), (?:...), (?=...) and (?!...) read alike"
                )
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            top_level_bar = True
        elif char == ".":
            found.append("uses `.` outside a class, which ECMA-262 and Python match differently: spell the class out")
        elif char in "*+?}" and pattern.startswith("+", index + 1):
            found.append("uses a possessive quantifier, which ECMA-262 does not know")
        elif char == "{" and pattern.startswith(",", index + 1):
            found.append("uses {,n}, which Python reads as {0,n} and ECMA-262 as text")
        index += 1
    try:
        re.compile(pattern)
    except re.error as error:
        found.append(f"is no regular expression Python reads ({error})")
    ends_unescaped = pattern.endswith("$") and (len(pattern) - len(pattern[:-1].rstrip("\\")) - 1) % 2 == 0
    if not (pattern.startswith("^") and ends_unescaped) or top_level_bar:
        found.insert(0, "must be anchored with ^...$, an alternation inside a group (^(?:a|b)$)")
    yield from dict.fromkeys(found)  # each problem once


def _default_problems(schemas: SchemaSet, resolver: Any, where: str, sub: dict[str, Any]) -> Iterator[str]:
    """A `default` its own schema refuses: the generated classes would write records the schemas refuse."""
    try:
        whole = schemas.inline(sub, resolver, max_depth=32)
    except (RecursionError, Unresolvable):
        return  # reported where the $ref is
    try:
        for error in Draft202012Validator(whole).iter_errors(sub["default"]):
            yield f"{where}: its default {sub['default']!r} breaks the schema: {error.message}"
    except Unresolvable:  # a keyword outside the subset ($dynamicRef), reported as such
        return
    except re.error:  # a pattern Python cannot read: reported where the pattern is
        return


def main(argv: list[str]) -> int:
    try:
        schemas = SchemaSet.load(Path(argv[0]) if argv else SCHEMA_DIR)
    except SchemaFileError as exc:
        print(exc, file=sys.stderr)
        return 1
    found = list(problems(schemas))
    for problem in found:
        print(problem, file=sys.stderr)
    if not found:
        print(f"{len(schemas.by_path)} schemas valid, portable and self-contained")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
