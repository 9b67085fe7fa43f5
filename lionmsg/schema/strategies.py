"""Hypothesis strategies that generate message records from the published bundle.

hypothesis-jsonschema does not follow `$ref`s across resources, so each kind's schema is taken from the
bundle with every `$ref` inlined and every `pattern` read the ECMA-262 way (see `patterns`): Python's
`$` would let it generate a trailing newline that no other validator accepts.

Left to itself, hypothesis-jsonschema never draws two kinds of value the loader treats apart: an integer
for a `"type": "number"` field (it draws floats only), and a sender or recipient that is a role value or
a UUID (it draws arbitrary text). The schema it is given says what the published one says, with the
number fields spelled "an integer or a number" and the address drawn from a custom format that
favours those values (`generation_schema`), so every record it draws is still valid.

Needs the `fuzz` extra (hypothesis, hypothesis-jsonschema).
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from lionmsg.schema.files import KINDS, load_bundle
from lionmsg.schema.inline import inline_refs
from lionmsg.schema.patterns import python_pattern

__all__ = ["generation_schema", "inlined_kind_schema", "records"]

_ADDRESS_FORMAT = "x-lionmsg-address"


@cache
def _inlined(kind: str) -> dict[str, Any]:
    bundle = load_bundle()
    schema: dict[str, Any] = inline_refs(bundle, bundle["$defs"][f"messages.{kind}"])
    return schema


def inlined_kind_schema(kind: str) -> dict[str, Any]:
    """The schema of one record kind (`instruction`, ...) with no `$ref` left, patterns in Python form."""
    _check_kind(kind)
    return _inlined(kind)


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
    `x-lionmsg-address`, drawn by `addresses()`. It accepts exactly the same records."""
    _check_kind(kind)
    return _generation_schema(kind)


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise KeyError(f"unknown record kind {kind!r}; known: {', '.join(KINDS)}")


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
        st.text(),
    )


def records(kind: str | None = None) -> st.SearchStrategy[dict[str, Any]]:
    """Records of one kind, or of any kind when `kind` is None: a third of them as the schema alone
    draws them, a third with content, a third with every content field (see `_with_content`)."""
    if kind is None:
        return st.one_of([records(name) for name in KINDS])
    _check_kind(kind)
    formats = {_ADDRESS_FORMAT: addresses()}
    schemas = [_generation_schema(kind), _with_content(kind, every_field=False), _with_content(kind, every_field=True)]
    return st.one_of([from_schema(schema, custom_formats=formats) for schema in schemas]).map(_as_record)


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
