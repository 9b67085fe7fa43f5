"""Hypothesis strategies that generate message records from the published bundle.

hypothesis-jsonschema does not follow `$ref`s across resources, so each kind's schema is taken from the
bundle with every `$ref` inlined and every `pattern` read the ECMA-262 way (see `patterns`): Python's
`$` would let it generate a trailing newline that no other validator accepts.

Needs the `fuzz` extra (hypothesis, hypothesis-jsonschema).
"""

from __future__ import annotations

from functools import cache
from typing import Any
from urllib.parse import urldefrag, urljoin

from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from lionmsg.schema.files import KINDS, load_bundle
from lionmsg.schema.patterns import python_pattern

__all__ = ["inlined_kind_schema", "records"]

_ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "title", "description", "default", "readOnly"})


class _Inliner:
    """Replaces each `$ref` by its target (the portable subset has no recursive refs)."""

    def __init__(self, bundle: dict[str, Any]) -> None:
        self._by_id = {schema["$id"]: schema for schema in bundle["$defs"].values()}

    def inline(self, node: Any, base: str) -> Any:
        if isinstance(node, list):
            return [self.inline(item, base) for item in node]
        if not isinstance(node, dict):
            return node
        base = node.get("$id", base)
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _ANNOTATIONS or key.startswith("x-"):
                continue
            if key == "pattern":
                out[key] = python_pattern(value)
            elif key in ("properties", "$defs"):
                out[key] = {name: self.inline(sub, base) for name, sub in value.items()}
            elif key != "$ref":
                out[key] = self.inline(value, base)
        if "$ref" not in node:
            return out
        target = self._target(node["$ref"], base)
        return {**out, "allOf": [*out.get("allOf", []), target]} if out else target

    def _target(self, ref: str, base: str) -> Any:
        uri, fragment = urldefrag(urljoin(base, ref))
        node: Any = self._by_id[uri]
        for part in [p for p in fragment.split("/") if p]:
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return self.inline(node, uri)


@cache
def _inlined(kind: str) -> dict[str, Any]:
    bundle = load_bundle()
    schema: dict[str, Any] = _Inliner(bundle).inline(bundle["$defs"][f"messages.{kind}"], "")
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
