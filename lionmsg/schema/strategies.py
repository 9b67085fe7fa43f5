"""Hypothesis strategies that generate message records from the published bundle.

hypothesis-jsonschema does not follow `$ref`s across resources, so each kind's schema is taken from the
bundle with every `$ref` inlined and every `pattern` read the ECMA-262 way (see `patterns`): Python's
`$` would let it generate a trailing newline that no other validator accepts.

Left to itself, hypothesis-jsonschema never draws two kinds of value the loader treats apart: an integer
for a `"type": "number"` field (it draws floats only), and a sender or recipient that is a role value or
a UUID (it draws arbitrary text). The schema it is given says what the published one says, with the
number fields spelled "an integer or a number" and the address drawn from a custom format that
favours those values (`generation_schema`), so every record it draws is still valid.

Nor does it draw the values JSON allows that readers and writers part on, each of which lionmsg has
code of its own for: text holding a lone surrogate (hypothesis's text leaves them out), an integer
past Python's int-to-text digit limit, a value nested deeper than a few levels, and `-0.0`. Addresses
may hold lone surrogates, and one record in ten to twenty carries such values in its metadata, under
`EDGE_KEY`, a place every kind leaves free (`edge_values`).

Needs the `fuzz` extra (hypothesis, hypothesis-jsonschema).
"""

from __future__ import annotations

import copy
import random
import re
from collections.abc import Callable
from functools import cache
from typing import Any

from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from lionmsg.schema.files import KINDS, kind_named, load_bundle
from lionmsg.schema.inline import inline_refs
from lionmsg.schema.patterns import python_pattern

__all__ = ["EDGE_KEY", "edge_values", "generation_schema", "inlined_kind_schema", "records"]

_ADDRESS_FORMAT = "x-lionmsg-address"


@cache
def _inlined(kind: str) -> dict[str, Any]:
    bundle = load_bundle()
    schema: dict[str, Any] = inline_refs(bundle, bundle["$defs"][f"messages.{kind}"])
    return schema


def inlined_kind_schema(kind: str) -> dict[str, Any]:
    """The schema of one record kind (`instruction`, or its class `Instruction`, ...) with no `$ref`
    left, patterns in Python form: a copy of its own, which the caller may change."""
    return copy.deepcopy(_inlined(_kind(kind)))


@cache
def _generation_schema(kind: str) -> dict[str, Any]:
    bundle = load_bundle()
    address = bundle["$defs"]["envelope"]["$defs"]["address"]
    address["format"] = _ADDRESS_FORMAT  # an annotation: the records it allows are the same
    schema: dict[str, Any] = _integers_too(inline_refs(bundle, bundle["$defs"][f"messages.{kind}"]))
    return schema


def generation_schema(kind: str) -> dict[str, Any]:
    """`inlined_kind_schema(kind)` as the strategies read it: every `number` schema is an `anyOf` of the
    same schema as `integer` and as itself (bounds kept), and addresses carry the format
    `x-lionmsg-address`, drawn by `addresses()`. It accepts exactly the same records. A copy of its own:
    changing it changes nothing `records()` draws."""
    return copy.deepcopy(_generation_schema(_kind(kind)))


def _kind(name: str) -> str:
    """The kind `name` is, as `lionmsg fuzz --kind` reads it: a kind or its class name, in any case."""
    kind = kind_named(name)
    if kind is None:
        raise KeyError(f"unknown record kind {name!r}; known: {', '.join(KINDS)}")
    return kind


_NOT_SCHEMAS = frozenset({"enum", "const", "default", "examples"})  # values, not schemas: left as they are


def _integers_too(node: Any) -> Any:
    """`node` with every schema whose `type` allows `number` turned into `anyOf: [integer, itself]`."""
    if isinstance(node, list):
        return [_integers_too(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: value if key in _NOT_SCHEMAS else _integers_too(value) for key, value in node.items()}
    types = out.get("type")
    if types == "number" or (isinstance(types, list) and "number" in types):
        return {"anyOf": [{**out, "type": "integer"}, out]}
    return out


def addresses() -> st.SearchStrategy[str]:
    """Sender/recipient text, each kind the loader reads apart with real odds: a role value (read as the
    role), a canonical UUID, a UUID in any mix of cases (both read as a UUID), any other text (a name)."""
    bundle = load_bundle()
    uuid_pattern = python_pattern(bundle["$defs"]["envelope"]["$defs"]["uuid"]["pattern"])
    return st.one_of(
        st.sampled_from(bundle["$defs"]["role"]["enum"]),
        st.uuids().map(str),
        st.from_regex(uuid_pattern),
        st.text(_ANY_CHARACTER).map(_pairs_apart),
    )


_ANY_CHARACTER = st.characters(codec=None, exclude_categories=())  # lone surrogates too
_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def _pairs_apart(text: str) -> str:
    """`text` with a space between a high surrogate and a low one that follows it: no JSON text holds
    those two code points (its readers read their escapes as the one character they encode), and the
    writers refuse them. (A map, not a filter: the draws, and so a seed's records, stay as they were.)"""
    return _SURROGATE_PAIR.sub(lambda pair: f"{pair[0][0]} {pair[0][1]}", text)


EDGE_KEY = "x-lionmsg-edge"
"""The metadata key under which a share of the records carries one of `edge_values()`."""


def edge_values() -> st.SearchStrategy[dict[str, Any]]:
    """Objects holding some of the JSON values readers and writers part on: text with a lone surrogate
    (`text`, and as a key in `keys`), an integer beyond Python's default int-to-text limit (4,300
    digits: `integer`), a value nested 11 to 400 levels deep (`nested`) and negative zero (`zero`).

    Made from a Random hypothesis seeds: its own choices between such values came out the simplest in
    nine records of ten of a seeded stream (and such values need no shrinking to be read)."""
    return st.randoms(use_true_random=True).map(_edge_object)


def _edge_object(rng: random.Random) -> dict[str, Any]:
    chosen = rng.sample(_EDGE_KINDS, rng.randint(1, len(_EDGE_KINDS)))
    return {name: make(rng) for name, make in _EDGE_KINDS if (name, make) in chosen}


def _lone_surrogate_text(rng: random.Random) -> str:
    around = [chr(rng.choice([rng.randint(0x20, 0x7E), rng.randint(0xA0, 0xD7FF)])) for _ in range(rng.randint(0, 6))]
    around.insert(rng.randint(0, len(around)), chr(rng.randint(0xD800, 0xDFFF)))
    return "".join(around)


def _long_integer(rng: random.Random) -> int:
    magnitude: int = 10 ** rng.randint(4300, 6000) + rng.randint(0, 10**6)  # 4,301+ digits, made without spelling it
    return -magnitude if rng.random() < 0.5 else magnitude


def _nested(rng: random.Random) -> Any:
    value: Any = rng.randint(-5, 5)
    in_objects = rng.random() < 0.5
    for _ in range(rng.randint(11, 400)):
        value = {"v": value} if in_objects else [value]
    return value


_EDGE_KINDS: list[tuple[str, Callable[[random.Random], Any]]] = [
    ("text", _lone_surrogate_text),
    ("keys", lambda rng: {_lone_surrogate_text(rng): rng.randint(-9, 9) for _ in range(rng.randint(1, 2))}),
    ("integer", _long_integer),
    ("nested", _nested),
    ("zero", lambda rng: -0.0),
]


def records(kind: str | None = None) -> st.SearchStrategy[dict[str, Any]]:
    """Records of one kind (`instruction` or `Instruction`), or of any kind when `kind` is None: a third
    of them as the schema alone draws them, a third with content, a third with every content field (see
    `_with_content`); some carry edge values (see the module docstring)."""
    if kind is None:
        return st.one_of([records(name) for name in KINDS])
    kind = _kind(kind)
    formats = {_ADDRESS_FORMAT: addresses()}
    schemas = [_generation_schema(kind), _with_content(kind, every_field=False), _with_content(kind, every_field=True)]
    drawn = st.one_of([from_schema(schema, custom_formats=formats) for schema in schemas]).map(_as_record)
    return st.tuples(drawn, st.randoms(use_true_random=True)).map(_with_edge_values)


def _with_edge_values(drawn: tuple[dict[str, Any], random.Random]) -> dict[str, Any]:
    """Some records carry edge values in their metadata (see the module docstring): one in eight of the
    Randoms hypothesis seeds decides so, one record in ten to twenty of a seeded stream (38 of 400, 14
    of 300), where it draws its simplest seeds again and again (its own choice between branches came
    out one record in ten to one in a hundred)."""
    record, rng = drawn
    if rng.random() >= 1 / 8:
        return record
    metadata = record.get("metadata")  # an object when present: every kind's schema says so
    return {**record, "metadata": {**(metadata or {}), EDGE_KEY: _edge_object(rng)}}


@cache
def _with_content(kind: str, every_field: bool) -> dict[str, Any]:
    """The generation schema narrowed to records that carry content (with every field of typed content,
    for `every_field`): the same rules over fewer records. hypothesis-jsonschema draws each optional
    property with low odds, so the schema alone gave content to a fifth to a third of the records and
    each content field to 2.5-15% of them."""
    schema = copy.deepcopy(_generation_schema(kind))
    schema["required"] = [*schema.get("required", []), "content"]
    if every_field:
        for part in schema["properties"]["content"].get("allOf", []):
            if "properties" in part:
                part["required"] = sorted(part["properties"])
    return schema


def _as_record(value: Any) -> dict[str, Any]:
    assert isinstance(value, dict), value  # every kind schema says "type": "object"
    return value
