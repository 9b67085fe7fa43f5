"""Minimal block YAML for prompts: byte-identical to LionAGI 0.36.0's `minimal_yaml`, without PyYAML.

LionAGI prunes empty values, then calls `yaml.dump` with a `SafeDumper` (no aliases, the `|` style for text
holding a newline, block style, insertion order, `allow_unicode`, no line wrapping). This module renders the
same bytes directly from the rules PyYAML's representer, resolver and emitter apply in that configuration.

Compatibility, exactly:

* Byte-identical for JSON-like input: dict, list, tuple, str, int, float (including inf and nan), bool and
  None, nested up to a few hundred levels (deeper is a ValueError: the renderer recurses), with dict keys
  that are str, int, float, bool, None or tuples of these.
* Pruning is LionAGI's: inside the value, None, blank strings (`str.strip() == ""`) and containers that are
  empty, or become empty once pruned, are dropped from dicts, lists and tuples; 0 and False are kept. The
  top-level value is never dropped (an empty one renders as `{}` or `[]`). Dict keys are never pruned.
* A top-level str is rendered as a YAML string. LionAGI parses it as JSON first; callers who want that
  should `json.loads` it themselves.
* Values SafeDumper refuses (LionAGI raises) are converted instead: a pydantic model to
  `model_dump(mode="json")`, an Enum to its value, other Mappings to dicts, sets and frozensets to lists in
  iteration order (PyYAML would write a `!!set` mapping), subclasses of str and numbers to the plain type,
  a date or datetime to SafeDumper's timestamp (`isoformat(" ")` for a datetime; tagged and quoted, as
  SafeDumper writes it, when the offset has seconds, which YAML's timestamp cannot hold), a time to `isoformat()`
  (SafeDumper has no form for it), anything else to `str(value)`. A key that is none of the types above
  becomes the converted scalar, or `str(key)` when the conversion is not a scalar.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Mapping
from datetime import date, datetime, time
from enum import Enum
from functools import lru_cache
from typing import Any

from pydantic import BaseModel

__all__ = ["minimal_yaml"]

# Returned by `_prepare` for a value the pruning removes.
_DROP: Any = object()

_BREAKS = "\n\x85\u2028\u2029"  # what PyYAML treats as line breaks
_BREAK = re.compile("[\n\x85\u2028\u2029]")
_BREAK_RUN = re.compile("[\x85\u2028\u2029]+")
_BREAK_SPLIT = re.compile("([\n\x85\u2028\u2029])")
# A space before a line break forbids single quotes and literals; one after a break forbids single quotes.
_SPACE_BREAK = re.compile(" [\n\x85\u2028\u2029]")
_BREAK_SPACE = re.compile("[\n\x85\u2028\u2029] ")
# Characters PyYAML only writes escaped, in double quotes, even with allow_unicode: C0 controls other than \n
# (tab included), DEL, C1 controls other than NEL, surrogates, BOM, U+FFFE, U+FFFF and U+10FFFF.
_SPECIAL = re.compile(r"[^\n\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010fffe]")
# Inside double quotes PyYAML also escapes '"', '\', NEL, LS, PS and everything above U+FFFD.
_DOUBLE_QUOTED_ESCAPE = re.compile(r"[^\x20\x21\x23-\x5b\x5d-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]")
_NAMED_ESCAPES = {
    **{"\0": "0", "\x07": "a", "\x08": "b", "\t": "t", "\n": "n", "\x0b": "v", "\x0c": "f", "\r": "r"},
    **{"\x1b": "e", '"': '"', "\\": "\\", "\x85": "N", "\u2028": "L", "\u2029": "P"},
}

# Fast path: a letter, '_', '(' or '/' first, then printable ASCII without ':' or '#', no trailing space.
# Such text is plain unless it is one of the words YAML reads as a bool or null.
_COMMON_PLAIN = re.compile(r'[A-Za-z_(/](?:[ -"$-9;-~]*[!-"$-9;-~])?')
_RESERVED_WORDS = frozenset(
    spelling
    for word in ("yes", "no", "true", "false", "on", "off", "null")
    for spelling in (word, word.capitalize(), word.upper())
)
# Plain text that PyYAML's implicit resolvers would read back as something other than a str (bool, null, int,
# float, timestamp, merge `<<`, value `=`); such strings get quoted. Same languages as the resolvers, written as
# one pattern for `fullmatch` (the empty string, which resolves to null, never reaches it).
_IMPLICIT = re.compile(
    r"""
    yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF
    | ~|null|Null|NULL | << | =
    | [-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+][0-9]+)?
    | \.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
    | [-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
    | [-+]?\.(?:inf|Inf|INF) | \.(?:nan|NaN|NAN)
    | [-+]?0b[01_]+ | [-+]?0[0-7_]+ | [-+]?(?:0|[1-9][0-9_]*) | [-+]?0x[0-9a-fA-F_]+
    | [-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+
    | [0-9]{4}-[0-9]{2}-[0-9]{2}
    | [0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?
      (?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?
    """,
    re.VERBOSE,
)
# The timestamp resolver alone: a datetime whose text it does not read back (an offset with seconds,
# `+00:19:32`, as zoneinfo gives for historic local mean time) is written with its tag, quoted.
_RESOLVED_TIMESTAMP = re.compile(
    r"""
    [0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?
    (?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?
    """,
    re.VERBOSE,
)
_LEADING_INDICATORS = "#,[]{}&*!|>'\"%@`"


class _TimestampText(str):
    """A date's or datetime's text, equal only to its own kind's: as a dict key it stays apart from a
    string key with the same text (PyYAML writes both: the string quoted, the timestamp plain; review bp)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((type(self), str.__str__(self)))


class _Timestamp(_TimestampText):
    """A date or datetime as SafeDumper writes it: a plain (unquoted) timestamp scalar. A string with
    the same text is quoted, so that it reads back as a string."""

    __slots__ = ()


class _TaggedTimestamp(_TimestampText):
    """A datetime whose text the timestamp resolver would not read back: SafeDumper writes it with its
    tag, single-quoted (`!!timestamp '1890-01-01 00:00:00+00:19:32'`)."""

    __slots__ = ()


# PyYAML writes a key as `? key` once its text plus its tag (`!!str`, `!!float`...) reaches 128 characters.
_TAG_LENGTHS: dict[type, int] = {str: 5, int: 5, float: 7, bool: 6, type(None): 6, _Timestamp: 11, _TaggedTimestamp: 11}
_SCALAR_TYPES = (str, int, float, bool, type(None))
_JSON_TYPES = frozenset((dict, list, tuple, *_SCALAR_TYPES))

# Where a rendering ends: mid-line, at the start of a line (after a literal), or after a "keep" literal (`|+`),
# which PyYAML follows with the document-end marker `...` when nothing else is written after it.
_MID, _LINE_START, _OPEN_ENDED = 0, 1, 2


def minimal_yaml(value: Any) -> str:
    """Render `value` as LionAGI's minimal YAML: block style, insertion order, empty values pruned. A
    value nested too deeply to render (hundreds of levels: the renderer recurses) is a ValueError."""
    try:
        return _render(value)
    except RecursionError:
        raise ValueError("cannot render a value nested this deeply") from None


def _render(value: Any) -> str:
    data = _prepare(value)
    if data is _DROP:  # LionAGI prunes inside the value, never the value itself
        shape = value if type(value) in _JSON_TYPES else _coerce(value)
        data = {} if isinstance(shape, dict) else [] if isinstance(shape, (list, tuple)) else shape
    out: list[str] = []
    if type(data) is dict and data:
        end = _mapping(data, 0, "", out)
    elif type(data) is list and data:
        end = _sequence(data, 0, "", out)
    else:
        text = _scalar(data, 2)
        if text[0] == "|":
            return text + ("...\n" if "+" in text[1:3] else "")
        # A document that is just a plain scalar is closed with `...`.
        plain = text == data if type(data) is str else not isinstance(data, (dict, list, _TaggedTimestamp))
        return text + ("\n...\n" if plain else "\n")
    return "".join(out) + ("\n", "", "...\n")[end]


# Canonical data: pruning and conversion of what SafeDumper cannot represent.


def _prepare(value: Any) -> Any:
    """`value` as dicts, lists and scalars, pruned like LionAGI's `_prune`, or `_DROP` if it prunes away."""
    kind = type(value)
    if kind is str:
        return value if value and not value.isspace() else _DROP  # isspace: the same whitespace as strip()
    if kind is _Timestamp or kind is _TaggedTimestamp:
        return value
    if kind is dict:
        pruned = {}
        for key, item in value.items():
            item = _prepare(item)
            if item is not _DROP:
                pruned[_key(key)] = item
        return pruned or _DROP
    if kind is list or kind is tuple:
        items = [item for item in map(_prepare, value) if item is not _DROP]
        return items or _DROP
    if kind is int or kind is float or kind is bool:
        return value
    if value is None:
        return _DROP
    return _prepare(_coerce(value))


def _key(key: Any) -> Any:
    """A dict key as canonical data: never pruned, and hashable (sequences become tuples)."""
    kind = type(key)
    if kind is str or kind is int or kind is float or kind is bool or key is None:
        return key
    if kind is tuple:
        return tuple(map(_key, key))
    converted = _coerce(key)
    if type(converted) is list:
        return tuple(map(_key, converted))
    return converted if isinstance(converted, _SCALAR_TYPES) else str(key)


def _coerce(value: Any) -> Any:
    """A JSON-like stand-in for a value that SafeDumper cannot represent."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Enum):
        inner = value.value
        return inner if type(inner) in _SCALAR_TYPES else _coerce(inner)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        return list(value)
    # The classes' own isoformat, PyYAML's spelling of a timestamp: a subclass's override (which SafeDumper
    # refuses to represent) could write any text, a quote included, inside the tagged form's quotes.
    if isinstance(value, datetime):
        text = datetime.isoformat(value, " ")
        return _Timestamp(text) if _RESOLVED_TIMESTAMP.fullmatch(text) else _TaggedTimestamp(text)
    if isinstance(value, date):
        return _Timestamp(date.isoformat(value))
    if isinstance(value, time):  # SafeDumper has no form for it (LionAGI fails to render): its ISO text
        return value.isoformat()
    return str(value)


# Block collections. `indent` is the column of the collection's keys or '-' indicators; `lead` is what precedes
# the first entry ('' at the top, ' ' right after an indicator, else a line break and indentation).


def _mapping(mapping: dict[Any, Any], indent: int, lead: str, out: list[str]) -> int:
    pad = " " * indent
    newline = "\n" + pad
    end = -1
    for key, value in mapping.items():
        out.append(lead if end < 0 else pad if end else newline)
        simple = _simple_key(key)
        if simple is not None:
            out.append(simple + ":")
            end = _node(value, indent, False, out)
        else:  # a complex key: `? key` then `: value` on a line of its own
            out.append("?")
            end = _node(key, indent, True, out)
            out.append((pad if end else newline) + ":")
            end = _node(value, indent, True, out)
    return end


def _sequence(items: list[Any] | tuple[Any, ...], indent: int, lead: str, out: list[str]) -> int:
    pad = " " * indent
    newline = "\n" + pad
    end = -1
    for item in items:
        out.append((lead if end < 0 else pad if end else newline) + "-")
        end = _node(item, indent, True, out)
    return end


def _node(value: Any, indent: int, after_indicator: bool, out: list[str]) -> int:
    """Render `value` after an indicator ('-', '?', or a complex key's ':') written at column `indent`, or
    after the simple key of a mapping at `indent`. Scalars' continuation lines sit at `indent + 2`."""
    kind = type(value)
    if kind is dict and value:
        inner = indent + 2
        return _mapping(value, inner, " " if after_indicator else "\n" + " " * inner, out)
    if (kind is list or kind is tuple) and value:
        if after_indicator:  # `- - x`, `? - x`
            return _sequence(value, indent + 2, " ", out)
        return _sequence(value, indent, "\n" + " " * indent, out)  # under a key, '-' lines up with the key
    if kind is str and _COMMON_PLAIN.fullmatch(value) and value not in _RESERVED_WORDS:
        out.append(" " + value)  # the common case, first
        return _MID
    text = _scalar(value, indent + 2)
    out.append(" " + text)
    if text[0] != "|":
        return _MID
    return _OPEN_ENDED if "+" in text[1:3] else _LINE_START


def _simple_key(key: Any) -> str | None:
    """`key` as written before ':', or None when PyYAML makes it a complex `? key` (a non-empty sequence, an
    empty or multi-line string, or text that is too long)."""
    kind = type(key)
    if kind is str:
        return _simple_str_key(key) if len(key) < 128 - 5 else None
    if kind is tuple:
        return None if key else "[]"
    text = _scalar(key, 0)
    return text if len(key if kind is _TaggedTimestamp else text) + _TAG_LENGTHS[kind] < 128 else None


# Keys recur across records, so their rendering is cached.
@lru_cache(maxsize=4096)
def _simple_str_key(key: str) -> str | None:
    if not key or _BREAK.search(key):
        return None
    return _str_scalar(key, 0)


# Scalars.


def _scalar(value: Any, indent: int) -> str:
    """The text of a canonical scalar or empty collection; `indent` is for continuation lines of strings."""
    kind = type(value)
    if kind is str:
        return _str_scalar(value, indent)
    if kind is _Timestamp:
        return str.__str__(value)
    if kind is _TaggedTimestamp:
        return f"!!timestamp '{value}'"  # a timestamp's characters need no escape in single quotes
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    if kind is float:
        return _float(value)
    if value is None:
        return "null"
    return "{}" if kind is dict else "[]"  # only empty collections get here: PyYAML writes them in flow style


def _float(value: float) -> str:
    if value != value:
        return ".nan"
    if value in (float("inf"), float("-inf")):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value).lower()
    if "." not in text and "e" in text:  # 1e+16 is not a YAML float; 1.0e+16 is
        text = text.replace("e", ".0e", 1)
    return text


def _str_scalar(text: str, indent: int) -> str:
    """`text` in the style PyYAML picks: plain, 'single', "double" quoted, or a `|` literal (LionAGI asks for
    one when the text holds a newline) whose lines sit at `indent`."""
    if _COMMON_PLAIN.fullmatch(text) and text not in _RESERVED_WORDS:
        return text
    if not text:
        return "''"
    special = _SPECIAL.search(text) is not None
    if "\n" in text:
        if special or text[-1] == " " or _SPACE_BREAK.search(text):
            return _double_quoted(text)
        return _literal(text, indent)
    if special:
        return _double_quoted(text)
    if _BREAK.search(text):  # NEL, LS or PS: quoted, with a break written raw and the next line indented
        if _SPACE_BREAK.search(text) or _BREAK_SPACE.search(text):
            return _double_quoted(text)
        return "'" + _BREAK_RUN.sub(r"\g<0>" + " " * indent, text.replace("'", "''")) + "'"
    if text[0] == " " or text[-1] == " " or _has_block_indicator(text) or _IMPLICIT.fullmatch(text):
        return "'" + text.replace("'", "''") + "'"
    return text


def _has_block_indicator(text: str) -> bool:
    """Whether plain `text` would parse as YAML syntax. Only called for one-line text without special
    characters, so ' ' is the only whitespace that can follow or precede an indicator."""
    first = text[0]
    if first in _LEADING_INDICATORS or (first in "?:-" and (len(text) == 1 or text[1] == " ")):
        return True
    return text.startswith(("---", "...")) or ": " in text or text[-1] == ":" or " #" in text


def _literal(text: str, indent: int) -> str:
    # Header hints: an explicit indentation indicator when the text starts with a space or a break, then the
    # chomping: '-' when the text has no final break, '+' when it ends with two or more (or is one break).
    hints = "2" if text[0] in " " + _BREAKS else ""
    if text[-1] not in _BREAKS:
        hints += "-"
    elif len(text) == 1 or text[-2] in _BREAKS:
        hints += "+"
    pad = " " * indent
    parts = _BREAK_SPLIT.split(text)  # lines at even indices, each break (written as is) between them
    parts[::2] = [pad + line if line else line for line in parts[::2]]
    return f"|{hints}\n" + "".join(parts) + ("" if text[-1] in _BREAKS else "\n")


def _double_quoted(text: str) -> str:
    return '"' + _DOUBLE_QUOTED_ESCAPE.sub(_escape, text) + '"'


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED_ESCAPES.get(char)
    if named is not None:
        return "\\" + named
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02X}"
    return f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"
