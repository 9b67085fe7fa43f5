"""Helpers the generated record loaders call: schema patterns and field errors."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from typing import Any

__all__ = ["RecordFieldError", "matches"]


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def matches(pattern: str, text: str) -> bool:
    """Whether `text` matches a schema `pattern` anchored at both ends.

    `fullmatch` keeps ECMA-262 semantics (what ajv and jsonschema-rs apply): Python's `$` alone would
    also accept a trailing newline.
    """
    return _compiled(pattern).fullmatch(text) is not None


class RecordFieldError(ValueError):
    """A content field that breaks its schema; `field` names it, `value` is what was given."""

    def __init__(self, field: str, message: str, value: Any) -> None:
        super().__init__(message)
        self.field = field
        self.value = value

    @classmethod
    def unknown(cls, owner: str, names: Iterable[str], record: Any) -> RecordFieldError:
        first, *rest = sorted(names)
        others = f" (and {', '.join(map(repr, rest))})" if rest else ""
        return cls(first, f"{owner} has no field {first!r}{others}", record)
