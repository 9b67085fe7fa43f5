"""Schema `pattern`s are ECMA-262 regular expressions; Python's `re` reads them almost the same way.

The difference that matters for our anchored patterns is `$`: in ECMA-262 (what ajv and every
JavaScript client apply) it matches only at the very end, while Python's `$` also matches before a
trailing newline, so `"...\\n"` would pass a Python validator and fail everywhere else. Every Python
consumer of a schema pattern (the record validator, the fuzzing strategies) uses `python_pattern`.
"""

from __future__ import annotations

from functools import cache

__all__ = ["python_pattern"]


@cache
def python_pattern(pattern: str) -> str:
    """`pattern` with every unescaped `$` outside a character class turned into `\\Z`."""
    out: list[str] = []
    escaped = in_class = False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "$":
            out.append("\\Z")
            continue
        out.append(char)
    return "".join(out)
