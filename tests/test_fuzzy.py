"""Fuzzy dictionary conversion of tool-call arguments: what is accepted, exactly, and what is refused."""

from __future__ import annotations

import json
import os
import re
from collections import OrderedDict, defaultdict
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from lionmsg.runtime.fuzzy import MAX_TEXT_LENGTH, fuzzy_dict

REFUSED = "Arguments must be a dictionary"

ACCEPTED_TEXT: list[tuple[str, dict[str, Any]]] = [
    # Strict JSON (the fast path).
    ('{"a": 1}', {"a": 1}),
    ("{}", {}),
    (
        '{"name": "x", "n": 2.5, "ok": true, "off": false, "none": null, "list": [1, "two", false]}',
        {"name": "x", "n": 2.5, "ok": True, "off": False, "none": None, "list": [1, "two", False]},
    ),
    ('{"a": {"b": {"c": [1, {"d": []}]}}}', {"a": {"b": {"c": [1, {"d": []}]}}}),
    ('{"i": -3, "f": 1.5e-3, "big": 12345678901234567890}', {"i": -3, "f": 0.0015, "big": 12345678901234567890}),
    ('{"städte": ["Zürich", "東京"], "emoji": "🦁"}', {"städte": ["Zürich", "東京"], "emoji": "🦁"}),
    ('{"s": "\\u00e9\\ud83e\\udd81"}', {"s": "é🦁"}),
    (
        '{"q": "say \\"hi\\"", "b": "back\\\\slash", "url": "http:\\/\\/x"}',
        {"q": 'say "hi"', "b": "back\\slash", "url": "http://x"},
    ),
    ('\n\t {\n  "a" :\n 1 ,\n  "b":[ ]\n}\n\n', {"a": 1, "b": []}),
    # Markdown code fences, with and without a language tag, with prose around.
    ('```json\n{"a": 1}\n```', {"a": 1}),
    ('```\n{"a": 1}\n```', {"a": 1}),
    (
        'Here are the arguments:\n\n```json\n{"path": "/tmp/x", "mode": "w"}\n```\nLet me know if that works.',
        {"path": "/tmp/x", "mode": "w"},
    ),
    ("Sure! ```python\n{'a': True,}\n  ```", {"a": True}),
    ('```json\r\n{"a": 1}\r\n```\r\n', {"a": 1}),
    ('```text\nnot this one\n```\nbut:\n```json\n{"b": 2}\n```', {"b": 2}),
    # Python literals.
    ("{'a': True, 'b': False, 'c': None}", {"a": True, "b": False, "c": None}),
    (
        "{'point': (1, 2), 'single': (3,), 'empty': (), 'nested': ((1, 2), [3])}",
        {
            "point": [1, 2],
            "single": [3],
            "empty": [],
            "nested": [[1, 2], [3]],
        },
    ),
    (
        "{'s': 'it\\'s', 'x': '\\x41\\u00e9', 'regex': '\\d+', 'n': '\\N{BULLET}'}",
        {
            "s": "it's",
            "x": "Aé",
            "regex": "\\d+",
            "n": "•",
        },
    ),
    ('{"py": "\\x41", "tab": "a\\tb"}', {"py": "A", "tab": "a\tb"}),
    ("{'octal': '\\101\\0\\777', 'continued': 'a\\\nb'}", {"octal": "A\x00\u01ff", "continued": "ab"}),
    ("{'f': 1e-05, 'g': 1e+16, 'h': -0.5}", {"f": 1e-05, "g": 1e16, "h": -0.5}),
    # Trailing commas at several depths.
    ('{"a": 1,}', {"a": 1}),
    ('{"a": [1, 2,], "b": {"c": 3,},}', {"a": [1, 2], "b": {"c": 3}}),
    ('{"a": [[1,], {"b": [2,  \n],},],}', {"a": [[1], {"b": [2]}]}),
    # Identifier keys.
    ('{a: 1, b_2: "x"}', {"a": 1, "b_2": "x"}),
    ("{outer: {inner: [1, 2]}, _private: true, c: null}", {"outer": {"inner": [1, 2]}, "_private": True, "c": None}),
    ("{null: 1, True: 2}", {"null": 1, "True": 2}),
    ('{ключ: "значение"}', {"ключ": "значение"}),
    # Names joined by "-" or ".", as LionAGI reads them; the rest of the text stays where it was.
    (
        '{max-tokens: 5, user.name: "x", a-1.b_c: -2, x: 1.5}',
        {"max-tokens": 5, "user.name": "x", "a-1.b_c": -2, "x": 1.5},
    ),
    # Any other run a colon follows, after `{` or `,`: query operators, JSON-LD and schema keys, paths
    # (review ch F2: refused, where LionAGI reads them).
    (
        "{filter: {age: {$gte: 18, $lt: 65}}, @type: 'Person', $ref: '#/a', a/b: 1, a+b: 2, a-: 3, -1: 4}",
        {
            "filter": {"age": {"$gte": 18, "$lt": 65}},
            **{"@type": "Person", "$ref": "#/a", "a/b": 1, "a+b": 2, "a-": 3, "-1": 4},
        },
    ),
    ("{ $in : [1, 2] ,\n\t#x:null}", {"$in": [1, 2], "#x": None}),
    # Mixed quoting, raw line breaks in strings, everything at once.
    (
        "{\"a\": 'single', 'b': \"double\", c: 'it\"s', 'd': \"don't\"}",
        {"a": "single", "b": "double", "c": 'it"s', "d": "don't"},
    ),
    ("{'text': 'line1\nline2', \"json\": \"tab\there\"}", {"text": "line1\nline2", "json": "tab\there"}),
    ("{\n  a: 'x',\n  b: [\n    1, (2,),\n  ],\n  'c': {d: None,},\n}\n", {"a": "x", "b": [1, [2]], "c": {"d": None}}),
]


@pytest.mark.parametrize(("text", "expected"), ACCEPTED_TEXT)
def test_text_is_read(text: str, expected: dict[str, Any]) -> None:
    assert fuzzy_dict(text) == expected


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'{"a": 1}', {"a": 1}),
        (bytearray(b"{'a': (1,)}"), {"a": [1]}),
        ('{"é": "ü"}'.encode(), {"é": "ü"}),
        (b'\xef\xbb\xbf{"bom": true}', {"bom": True}),
    ],
)
def test_bytes_are_decoded_as_utf8(data: bytes | bytearray, expected: dict[str, Any]) -> None:
    assert fuzzy_dict(data) == expected


@pytest.mark.parametrize("text", ['{"bom": true}', "{'bom': True}", "", "  "])
def test_one_bom_is_skipped_in_text_as_in_bytes(text: str) -> None:
    # What reading a file that starts with a BOM as text gives (review bi F7).
    assert fuzzy_dict("\ufeff" + text) == fuzzy_dict(b"\xef\xbb\xbf" + text.encode()) == fuzzy_dict(text)
    with pytest.raises(ValueError, match=REFUSED):  # one, not any number
        fuzzy_dict("\ufeff\ufeff" + text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{'a': '\ud800'}", "\ud800"),
        ("{'a': '\ud800\\n'}", "\ud800\n"),  # with an escape too (review bi F8: refused, reason "utf-8")
        ("{'a': '\\\ud800'}", "\\\ud800"),  # an unknown escape keeps its backslash, as in Python
        ('{"a": "\ud800\\n"}', "\ud800\n"),
    ],
)
def test_a_lone_surrogate_in_a_string_is_kept_with_or_without_escapes(text: str, expected: str) -> None:
    assert fuzzy_dict(text) == {"a": expected}


class _Arguments(Mapping[str, int]):
    def __init__(self, **values: int) -> None:
        self._values = values

    def __getitem__(self, key: str) -> int:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


@pytest.mark.parametrize(
    "mapping",
    [
        {"a": 1, "b": [2]},
        OrderedDict([("a", 1), ("b", [2])]),
        defaultdict(list, {"a": 1, "b": [2]}),
        MappingProxyType({"a": 1, "b": [2]}),
    ],
)
def test_mapping_is_copied(mapping: Mapping[str, Any]) -> None:
    result = fuzzy_dict(mapping)
    assert result == {"a": 1, "b": [2]}
    assert type(result) is dict
    assert result is not mapping
    result["c"] = 3
    assert "c" not in mapping


def test_mapping_subclass_and_keys_kept_as_they_are() -> None:
    assert fuzzy_dict(_Arguments(x=1, y=2)) == {"x": 1, "y": 2}
    # Not validated here: a record's schema decides which keys it takes.
    odd_keys: dict[Any, Any] = fuzzy_dict({1: "one", None: "none"})
    assert odd_keys == {1: "one", None: "none"}


def test_pydantic_model_is_dumped() -> None:
    class Args(BaseModel):
        path: str
        count: int = 1
        tags: tuple[str, ...] = ()

    assert fuzzy_dict(Args(path="/tmp/x", tags=("a",))) == {"path": "/tmp/x", "count": 1, "tags": ("a",)}


def test_none_is_empty() -> None:
    assert fuzzy_dict(None) == {}


@pytest.mark.parametrize("blank", ["", "   \n\t", b"", b"\xef\xbb\xbf"])
def test_blank_text_is_no_arguments_as_providers_send_it_and_lionagi_reads_it(blank: str | bytes) -> None:
    assert fuzzy_dict(blank) == {}


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("{1: 2}", {"1": 2}),
        ("{1.5: 'a', b: 3}", {"1.5": "a", "b": 3}),
        ("{'x': [1, 2], 3: {-4: (5,)}}", {"x": [1, 2], "3": {"-4": [5]}}),
    ],
)
def test_a_number_key_of_a_python_dict_is_its_text_as_lionagi_reads_it(text: str, parsed: dict[str, Any]) -> None:
    assert fuzzy_dict(text) == parsed


@pytest.mark.parametrize(
    "value",
    [
        # Text without an object.
        "not json",
        "[1, 2]",
        '[{"a": 1}]',
        "5",
        '"text"',
        "true",
        "null",
        "```json\n[1, 2]\n```",
        "Sure, the arguments are {a: 1}",
        # Malformed text.
        '{"a": 1',
        '{"a": 1}}',
        '{"a": [1, 2}',
        "```json\n{a: 1}",
        '{"a": 1,, "b": 2}',
        "{'a': 1},",
        "{'a' 'b': 1}",
        "{1, 2}",
        "{'a': '\\N{NO SUCH NAME}'}",
        "{'a': 0x1F}",
        '{"x": NaN}',
        '{"x": -Infinity}',
        '{"x": 1e999}',
        # Python expressions: refused, never evaluated.
        "__import__('os').system('x')",
        "{'a': __import__('os').system('x')}",
        "{'a': 1 + 2}",
        "{'a': f'{x}'}",
        "{'a': b'bytes'}",
        "{'a': {1, 2}}",
        "{'a': print('x')}",
        # Other types.
        5,
        1.5,
        True,
        [1, 2],
        [{"a": 1}],
        ("a", 1),
        {1, 2},
        frozenset({("a", 1)}),
        object(),
        b"\xff\xfe",
        memoryview(b'{"a": 1}'),
    ],
)
def test_refused(value: Any) -> None:
    with pytest.raises(ValueError, match=REFUSED):
        fuzzy_dict(value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("[1, 2]", f"{REFUSED}: expected a JSON object, got an array"),
        ("'text'", f"{REFUSED}: expected a JSON object, got a string"),
        ("None", f"{REFUSED}: expected a JSON object, got null"),
        ("not json", f"{REFUSED}: unexpected name 'not' at position 0"),
        ("{a: b-c}", f"{REFUSED}: unexpected name 'b-c' at position 4"),  # a joined name is a key only
        ("{a b: 1}", f"{REFUSED}: unexpected name 'a' at position 1"),  # a key is one run
        ("{a: b/c}", f"{REFUSED}: unexpected name 'b' at position 4"),  # such a run is a key, never a value
        ("[$a: 1]", f"{REFUSED}: unexpected character '$' at position 1"),  # only after `{` or `,`
        ("{'a': 1", f"{REFUSED}: Expecting ',' delimiter"),
        ("{'a: 1}", f"{REFUSED}: unterminated string at position 1"),
        (5, f"{REFUSED}: unsupported type int"),
    ],
)
def test_refusal_says_why(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        fuzzy_dict(value)


def test_python_expressions_are_never_executed(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(os, "system", calls.append)
    for text in ("__import__('os').system('x')", "{'a': __import__('os').system('x')}", "```\nos.system('x')\n```"):
        with pytest.raises(ValueError, match=REFUSED):
            fuzzy_dict(text)
    assert calls == []


def test_size_is_bounded() -> None:
    padding = MAX_TEXT_LENGTH - len('{"a": ""}')
    at_limit = '{"a": "' + "x" * padding + '"}'
    assert len(at_limit) == MAX_TEXT_LENGTH
    assert fuzzy_dict(at_limit) == {"a": "x" * padding}
    too_long = f"{REFUSED}: text longer than {MAX_TEXT_LENGTH} characters"
    for value in (at_limit + " ", (at_limit + " ").encode(), "x" * (10 * 1024 * 1024)):
        with pytest.raises(ValueError, match=too_long):
            fuzzy_dict(value)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000,
        "(" * 100_000,
        '{"a":' * 100_000 + "1" + "}" * 100_000,
        "{a:" * 100_000 + "1" + "}" * 100_000,
        "```json\n" + "{'a': [" * 50_000 + "\n```",
    ],
)
def test_deep_nesting_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=REFUSED):
        fuzzy_dict(text)


@pytest.mark.parametrize(
    "text",
    [
        '"' + "a" * 500_000,
        "{'a': '" + "\\'" * 300_000,
        "a```\n" * 200_000,
        "```" + " " * 1_000_000,  # a fence's blanks with no line break (quadratic before review bi)
        "```" + " \t" * 250_000 + "json" + "\t " * 250_000,
        "{" + "-1" * 500_000,  # a key's run is scanned once, not again from each number in it
        "{" + "a/" * 500_000 + "}",
        "{" + "a:{" * 200_000,
    ],
)
def test_hostile_text_is_refused_quickly(text: str) -> None:
    with pytest.raises(ValueError, match=REFUSED):
        fuzzy_dict(text)


# JSON values: finite floats only, as neither form can carry NaN or infinity.
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=12,
)
_json_objects = st.dictionaries(st.text(), _json_values, max_size=5)


def _with_tuples(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _with_tuples(item) for key, item in value.items()}
    if isinstance(value, list):
        return tuple(_with_tuples(item) for item in value)
    return value


@given(_json_objects)
def test_json_and_python_literal_forms_round_trip(data: dict[str, Any]) -> None:
    assert fuzzy_dict(json.dumps(data)) == data
    assert fuzzy_dict(json.dumps(data, ensure_ascii=False).encode()) == data
    assert fuzzy_dict(repr(data)) == data
    assert fuzzy_dict(repr(_with_tuples(data))) == data
    assert fuzzy_dict(f"Arguments:\n```json\n{json.dumps(data, indent=2)}\n```\n") == data
