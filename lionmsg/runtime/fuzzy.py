"""Fuzzy dictionary conversion of tool-call arguments (ADR-0006: `ActionRequest` content).

LLMs emit tool-call arguments as almost-JSON. `fuzzy_dict` accepts:

- a `Mapping` -> a shallow `dict` copy, keys as they are (the record's schema validates them);
- a pydantic model instance -> `model_dump()`;
- `None` -> `{}`;
- `str`, `bytes` or `bytearray` (UTF-8, an optional BOM skipped) -> the JSON object the text holds; empty
  (or blank) text -> `{}`, as providers send it for a tool that takes no arguments.

Everything else, and text that holds no object, raises `ValueError("Arguments must be a dictionary: <reason>")`.

Text is read by the first of these that yields an object, tried on the whole text and then on the body of
each markdown code fence (three backticks, an optional language tag, the body, then a line that starts
with three backticks), so prose around a fence is ignored:

1. strict `json.loads` (the fast path);
2. the lenient grammar: JSON plus single-quoted strings with Python escapes (`'it\\'s'`, `'\\x41'`; a
   double-quoted string takes them too where JSON rejects its escapes),
   `True`/`False`/`None`, parentheses as arrays (Python tuples), trailing commas at any depth, and
   keys without quotes (`{a: 1, b_2: "x", 3: 4}`, `{max-tokens: 5, user.name: "x"}`, `{$gte: 18,
   @type: "x", a/b: 1}`: after `{` or `,`, any run of characters but blanks, quotes, brackets, commas
   and colons that a colon follows; a key is always its text as written, so `{null: 1}` is
   `{"null": 1}` and `{1: 2}` is `{"1": 2}`, as LionAGI reads them).
   Raw newlines and tabs inside strings are kept. It is rewritten token by token into strict JSON and
   parsed again, so nothing is ever evaluated.

The value must be an object; non-finite numbers (`NaN`, `Infinity`, `1e999`) are rejected as JSON cannot carry
them. Text longer than `MAX_TEXT_LENGTH` is rejected unread, and nesting too deep for the parser is
rejected, so hostile input costs bounded time and memory.

Where this departs from LionAGI 0.36.0 (`ln.fuzzy.to_dict(..., fuzzy_parse=True)` in `ActionRequestContent`):

- Lists, sets, other iterables and arbitrary objects are rejected; LionAGI keys a list by index, a set by
  its values, reads `__dict__`, dataclasses, `to_dict()`/`json()` methods, and unwraps a top-level JSON
  array to its first element.
- Missing closing brackets are not invented (LionAGI appends them): truncated text is rejected.
- Quotes are converted per string token, with no fallback to a blanket `'` -> `"` replacement as in
  LionAGI, so apostrophes inside strings survive and each string's escapes follow its own quoting.
- Python literals (`True`/`None`, tuples, `\\x` escapes) and fenced blocks with any or no language tag
  are read; LionAGI's `to_dict` reads neither.
- The size limit is 1 MiB, not 10 MB: no tool call is that large, and the lenient pass is pure Python.
- Integers are read exactly, however long; LionAGI's orjson makes one beyond 64 bits a float
  (`18446744073709551616` -> `1.8446744073709552e+19`), which shows in the rendered prompt.
- A leading BOM and a lone surrogate's escape are read; orjson refuses both.
- A key without quotes holds no bracket or colon: LionAGI's key rule takes any run of characters but
  blanks and double quotes, so `{http://x: 1}` is `{"http://x": 1}` there and refused here.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel

from lionmsg.runtime.wire import loads_json

__all__ = ["MAX_TEXT_LENGTH", "fuzzy_dict"]

MAX_TEXT_LENGTH = 1 << 20
"""Longest argument text (characters, or bytes before decoding) that is parsed at all."""

_MESSAGE = "Arguments must be a dictionary"

# One token of the lenient grammar, matched at a position. Strings use the unrolled-loop form so an
# unterminated string fails in linear time; a number swallows letters so `1e5` is not split into `1` and
# a name `e5` (json.loads judges the number afterwards).
_TOKEN = re.compile(
    r"""
      (?P<space>\s+)
    | (?P<string>"[^"\\]*(?:\\.[^"\\]*)*"|'[^'\\]*(?:\\.[^'\\]*)*')
    | (?P<number>-?\.?\d[\w.]*(?:(?<=[eE])[-+]\d*)?)
    | (?P<name>[^\W\d]\w*(?:[-.]\w+)*)
    | (?P<punct>[{}\[\]():,])
    """,
    re.VERBOSE | re.DOTALL,
)
_COLON_AHEAD = re.compile(r"\s*:")
# Where a key may stand (after `{` or `,`), any run of characters but blanks, quotes, brackets, commas and
# colons that a colon follows is a key, its text as written: `$gte`, `@type`, `a/b`, as LionAGI reads them.
# Tried only there, so each run is scanned once (runs end at the next `,` or `{`): linear however long.
_BARE_KEY = re.compile(r"""[^\s"'{}\[\]():,]+(?=\s*:)""")
_KEYWORDS = {"true": "true", "True": "true", "false": "false", "False": "false", "null": "null", "None": "null"}
_BRACKETS = {"(": "[", ")": "]"}
_CLOSERS = frozenset("}])")

# Escapes are normalised before literal_eval so it never warns: a backslash Python does not know is doubled
# (the value Python gives it anyway) and an octal escape becomes `\uXXXX` (Python 3.12 warns above \377).
# Raw line breaks become escapes so a multi-line single-quoted string parses.
_PY_ESCAPE = re.compile(r"\\([0-7]{1,3}|.)|\n|\r", re.DOTALL)
_SURROGATE = re.compile("[\ud800-\udfff]")
_PY_VALID_ESCAPES = frozenset("\\'\"abfnrtvxNuU\n")

# The language name is one optional run: with `[ \t]*[\w+.-]*[ \t]*` both blank runs could take the same
# blanks, so a fence followed by many blanks and no line break took time quadratic in their number.
_FENCE_OPEN = re.compile(r"```[ \t]*(?:[\w+.-]+[ \t]*)?\r?\n")
_FENCE_CLOSE = re.compile(r"^[ \t]*```", re.MULTILINE)

_JSON_TYPE_NAMES = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def fuzzy_dict(value: Any) -> dict[str, Any]:
    """Tool-call arguments as a dictionary; see the module docstring for what is accepted."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, BaseModel):
        return value.model_dump()
    if value is None:
        return {}
    if isinstance(value, (bytes, bytearray)):
        _check_length(value)
        try:
            value = value.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ValueError(f"{_MESSAGE}: bytes are not UTF-8") from None
    if isinstance(value, str):
        # One BOM skipped, as for bytes: what reading a file that has one as text leaves (review bi F7).
        return _parse_text(value[1:] if value.startswith("\ufeff") else value)
    raise ValueError(f"{_MESSAGE}: unsupported type {type(value).__name__}")


def _check_length(text: str | bytes | bytearray) -> None:
    if len(text) > MAX_TEXT_LENGTH:
        raise ValueError(f"{_MESSAGE}: text longer than {MAX_TEXT_LENGTH} characters")


def _parse_text(text: str) -> dict[str, Any]:
    _check_length(text)
    if not text.strip():
        return {}
    reason = ""
    # The last failure is reported: when the text has fences, what their bodies hold is what matters.
    for candidate in _candidates(text):
        try:
            return _parse_object(candidate)
        except RecursionError:
            reason = "nested too deeply"
        except MemoryError:
            reason = "too large to parse"
        except ValueError as exc:
            reason = str(exc)
    raise ValueError(f"{_MESSAGE}: {reason}")


def _candidates(text: str) -> Iterator[str]:
    """The whole text, then each fenced block's body (lazily: fences are looked for only if needed)."""
    yield text
    pos = 0
    while opening := _FENCE_OPEN.search(text, pos):
        closing = _FENCE_CLOSE.search(text, opening.end())
        if closing is None:
            # No later fence can close either; stopping here keeps the scan linear.
            return
        yield text[opening.end() : closing.start()]
        pos = closing.end()


def _parse_object(text: str) -> dict[str, Any]:
    try:
        value = loads_json(text)
    except ValueError:
        try:
            value = loads_json(_to_strict_json(text))
        except json.JSONDecodeError as exc:
            # Its position is in the rewritten text, which the caller never saw.
            raise ValueError(exc.msg) from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {_JSON_TYPE_NAMES.get(type(value), 'null')}")
    return value


def _to_strict_json(text: str) -> str:
    """Rewrite lenient-grammar text as strict JSON, token by token (iterative: depth costs no stack)."""
    out: list[str] = []
    # A comma is written only once the next token shows it is not trailing.
    pending_comma = False
    key_may_follow = False  # the last token was `{` or `,`
    pos = 0
    while pos < len(text):
        if key_may_follow and (key := _BARE_KEY.match(text, pos)) is not None:
            if pending_comma:
                out.append(",")
            out.append(json.dumps(key.group()))
            pending_comma = key_may_follow = False
            pos = key.end()
            continue
        match = _TOKEN.match(text, pos)
        if match is None:
            problem = "unterminated string" if text[pos] in "\"'" else f"unexpected character {text[pos]!r}"
            raise ValueError(f"{problem} at position {pos}")
        kind, token, pos = match.lastgroup, match.group(), match.end()
        if kind == "space":
            continue
        if token == ",":
            if pending_comma:
                out.append(",")  # `,,` stays invalid
            pending_comma = key_may_follow = True
            continue
        if pending_comma and token not in _CLOSERS:
            out.append(",")
        pending_comma = False
        key_may_follow = token == "{"
        if kind == "string":
            out.append(json.dumps(_decode_string(token)))
        elif kind == "name":
            out.append(_rewrite_name(token, text, match.start(), pos))
        elif kind == "number" and _COLON_AHEAD.match(text, pos):  # a Python dict's number key: its text
            out.append(json.dumps(token))
        else:
            out.append(_BRACKETS.get(token, token))
    if pending_comma:
        out.append(",")
    return "".join(out)


def _rewrite_name(name: str, text: str, start: int, end: int) -> str:
    if _COLON_AHEAD.match(text, end):
        return json.dumps(name)
    if name in _KEYWORDS:
        return _KEYWORDS[name]
    raise ValueError(f"unexpected name {name!r} at position {start}")


def _decode_string(token: str) -> str:
    body = token[1:-1]
    if "\\" not in body:
        return body
    if token[0] == '"':
        # JSON escapes first (`\/`, surrogate pairs); Python's (`\x41`) if JSON rejects the string.
        try:
            decoded: str = json.loads(token, strict=False)
            return decoded
        except ValueError:
            pass
    try:
        # A lone string literal: literal_eval evaluates nothing, it only decodes escapes.
        # Python source cannot hold a lone surrogate (a raw one is kept where the string has no escape):
        # written as its escape, the literal gives it back.
        escaped = _SURROGATE.sub(_surrogate_escape, _PY_ESCAPE.sub(_fix_escape, body))
        literal: str = ast.literal_eval(token[0] + escaped + token[0])
    except (SyntaxError, ValueError) as exc:
        raise ValueError(f"invalid string {token[:40]!r}: {exc.args[0] if exc.args else exc}") from None
    return literal


def _surrogate_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _fix_escape(match: re.Match[str]) -> str:
    escaped = match.group(1)
    if escaped is None:
        return "\\n" if match.group() == "\n" else "\\r"
    if escaped[0] in "01234567":
        return f"\\u{int(escaped, 8):04x}"
    return match.group() if escaped in _PY_VALID_ESCAPES else "\\" + match.group()
