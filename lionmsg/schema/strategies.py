"""Hypothesis strategies that generate message records from the published bundle.

hypothesis-jsonschema does not follow `$ref`s across resources, so each kind's schema is taken from the
bundle with every `$ref` inlined and every `pattern` read the ECMA-262 way (see `patterns`): Python's
`$` would let it generate a trailing newline that no other validator accepts.

Needs the `fuzz` extra (hypothesis, hypothesis-jsonschema).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from lionmsg.schema.files import KINDS, load_bundle
from lionmsg.schema.inline import inline_refs

__all__ = ["inlined_kind_schema", "records"]


@cache
def _inlined(kind: str) -> dict[str, Any]:
    bundle = load_bundle()
    schema: dict[str, Any] = inline_refs(bundle, bundle["$defs"][f"messages.{kind}"])
    return schema


def inlined_kind_schema(kind: str) -> dict[str, Any]:
    """The schema of one record kind (`instruction`, ...) with no `$ref` left, patterns in Python form."""
    if kind not in KINDS:
        raise KeyError(f"unknown record kind {kind!r}; known: {', '.join(KINDS)}")
    return _inlined(kind)


def records(kind: str | None = None) -> st.SearchStrategy[dict[str, Any]]:
    """Records of one kind, or of any kind when `kind` is None."""
    if kind is None:
        return st.one_of([records(name) for name in KINDS])
    # Records are objects by schema; the cast keeps the strategy's type honest for callers.
    return from_schema(inlined_kind_schema(kind)).map(_as_record)


def _as_record(value: Any) -> dict[str, Any]:
    assert isinstance(value, dict), value  # every kind schema says "type": "object"
    return value
