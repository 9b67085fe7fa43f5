"""A schema of the bundle with every `$ref` replaced by its target, for tools and fast paths that do not
resolve references (hypothesis-jsonschema; the validator's verdict). Annotations and `x-` keywords are
left out and `pattern`s are put in their Python form (see `patterns`). The portable subset has no
recursive `$ref`, so the result is finite.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urldefrag, urljoin

from lionmsg.schema.patterns import python_pattern

__all__ = ["inline_refs"]


def inline_refs(bundle: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` (a part of `bundle`) with no `$ref` left."""
    inlined: dict[str, Any] = _Inliner(bundle).inline(schema, "")
    return inlined


_ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "title", "description", "default", "readOnly"})


class _Inliner:
    """Replaces each `$ref` by its target (the portable subset has no recursive refs)."""

    def __init__(self, bundle: dict[str, Any]) -> None:
        self._by_id = {schema["$id"]: schema for schema in bundle["$defs"].values()}
        self._by_id[bundle["$id"]] = bundle  # its root refers to the record schema as `#/$defs/record`

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
