"""`minimal_yaml` against LionAGI 0.36.0's PyYAML-based original, byte for byte."""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from datetime import date, datetime, timedelta, timezone
from enum import Enum
from typing import Any
from uuid import UUID

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from lionmsg.runtime.render.minimal_yaml import minimal_yaml

# The reference: LionAGI 0.36.0 `lionagi.libs.schema.minimal_yaml`, as published.


class _MinimalDumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_MinimalDumper.add_representer(str, _represent_str)


def _is_empty(x: Any) -> bool:
    if x is None:
        return True
    if isinstance(x, str):
        return x.strip() == ""
    if isinstance(x, dict):
        return len(x) == 0
    if isinstance(x, (list, tuple, set)):
        return len(x) == 0
    return False


def _prune(x: Any) -> Any:
    if isinstance(x, dict):
        pruned = {k: _prune(v) for k, v in x.items() if not _is_empty(v)}
        return {k: v for k, v in pruned.items() if not _is_empty(v)}
    if isinstance(x, list):
        pruned_list = [_prune(v) for v in x if not _is_empty(v)]
        return [v for v in pruned_list if not _is_empty(v)]
    if isinstance(x, tuple):
        pruned_list = [_prune(v) for v in x if not _is_empty(v)]
        return tuple(v for v in pruned_list if not _is_empty(v))
    if isinstance(x, set):
        pruned_set = {_prune(v) for v in x if not _is_empty(v)}
        return {v for v in pruned_set if not _is_empty(v)}
    return x


def _dump(data: Any, indent: int = 2, line_width: int = 2**31 - 1, sort_keys: bool = False) -> str:
    return yaml.dump(
        data,
        Dumper=_MinimalDumper,
        default_flow_style=False,
        sort_keys=sort_keys,
        allow_unicode=True,
        indent=indent,
        width=line_width,
    )


def lionagi_minimal_yaml(value: Any, *, drop_empties: bool = True) -> str:
    if isinstance(value, str):
        value = json.loads(value)
    data = _prune(value) if drop_empties else value
    return _dump(data)


def reference(value: Any) -> str:
    """LionAGI's output, except that a top-level str is rendered as text (ours does not parse it as JSON)."""
    if isinstance(value, str):
        return _dump(_prune(value))
    return lionagi_minimal_yaml(value)


# Hand-picked cases: every style decision and layout rule of the emitter, and their edges.

TRICKY: list[Any] = [
    # Top-level scalars: a plain one closes the document with `...`.
    None,
    True,
    False,
    0,
    -7,
    10**40,
    1.5,
    -0.0,
    1e-05,
    1e16,
    -2.5e-300,
    math.inf,
    -math.inf,
    math.nan,
    "abc",
    "",
    "   ",
    "yes",
    "x\n\n",
    "\n",
    "a\nb\u2028",
    # Empty and pruned containers.
    {},
    [],
    (),
    {"a": None, "b": "", "c": " \t\n", "d": [], "e": {}, "f": ()},
    [None, "", [[]], {"x": {"y": [None]}}],
    {"keep": [0, False, 0.0, "0", " x "]},
    # Layout: nested mappings, indentless sequences under keys, `- - x`, mappings in sequences.
    {"Function": "search", "Arguments": {"q": "x", "n": 3}},
    {"a": {"b": {"c": {"d": "deep"}}}},
    {"a": [1, [2, [3, [4]]], {"b": [5, {"c": 6}]}]},
    [[["x"]], [{"k": [["y"]]}]],
    [{"a": 1, "b": 2}, {"c": 3}],
    ("t", ("u", 1), {"v": (2, 3)}),
    # Keys: quoting, non-str keys, complex `? key` entries.
    {"": 1, "a b": 2, "a: b": 3, "#x": 4, "- x": 5, "yes": 6, "1": 7, "é": 8, "\t": 9},
    {1: "int", 0: "zero", -1: "neg", 1.5: "float", math.nan: "nan", math.inf: "inf", -math.inf: "-inf"},
    {True: "t", False: "f", None: "n", "null": "quoted", "true": "quoted"},
    {(1, 2): "pair", (): "empty", ((), "x", None, ""): "nested"},
    {"x" * 122: "fits", "y" * 123: "too long"},
    {10**121: "fits", 10**122: "too long"},
    {"a\nb": [1, 2], "c\u2028d": {"e": 1}, "f": "g"},
    [{(1, (2, 3)): {"k": "v"}}],
    # Strings that plain style would misread.
    ["---", "...", "--- x", "-", "- x", "-x", "?", "? x", "?x", ":", ": x", ":x", "x:", "x :y", "x: y"],
    ["#x", "x #y", "x#y", "@x", "`x", "%x", "!x", "&x", "*x", "|x", ">x", "'x'", '"x"', "x'y", "[x]", "{x}"],
    [",x", "x,y", "x[0]", "a{b}", "x?", "<<", "=", "~", "null", "Null", "NULL", "nul"],
    ["True", "ON", "off", "n", "Y", "No", "no way"],
    ["0", "-1", "+1", "0x1F", "0o17", "0b101", "0755", "089", "1_000", "1:30", "190:20:30.15", "1e5"],
    [".5", "1.", "1.0e+5", "1.0E-5", ".inf", "-.Inf", ".NaN", ".nan ", "1.5.2", "+.5"],
    ["2001-12-14", "2001-12-14 21:59:43.10 -5", "2001-12-14t21:59:43.10-05:00", "2001-1-1", "2001-12-14x"],
    # Whitespace and quotes.
    ["  lead", "trail  ", "a  b", "mixed 'quote\" chars", "back\\slash", "it's", "''"],
    # Unicode and characters that force double quotes.
    ["é", "東京", "\U0001f981", "a \U0001f981 b", "\xa0x", "x\xa0", "\ufeff", "\ufffe", "\U0010ffff", "\U0010fffe"],
    ["\t", "a\tb", "\x00", "\x07\x08\x0b\x0c\x1b", "\x7f", "\x9f", "\x85", "\r", "\ud800x", 'q"b\\'],
    # Multi-line text: the literal style, its header hints, and when PyYAML falls back to double quotes.
    {"a": "a\nb", "b": "a\n", "c": "a\n\n", "d": "\na", "e": " a\nb", "f": "a\n b", "g": "\n\n\nx\n\n"},
    {"space before break": "a \nb", "trailing space": "a\nb ", "tab": "a\tb\nc", "crlf": "a\r\nb"},
    {"a": "a\nb\u2028c", "b": "a\nb\u2028", "c": "x"},
    ["a\u2028b", "a\u2028 b", "a \u2028b", "\u2028a", "a\u2028", "a\x85\x85b", "it's\u2029x"],
    {"k": ["x\n\n"]},
    {"k": "x\n\n", "z": 1},
    {"k": "x\n\n", "z": {"y": "w\n\n\n"}},
    [{"a": "m\nl"}, "n\no", ["p\nq"]],
    {"\n": 1},
    {"a\n\n": "v", "b": "c"},
    ["x\n" * 3, "\n" * 3 + "x"],
    # Prompts as LionAGI renders them.
    {"Guidance": "Be brief", "Instruction": "Do X", "Context": [{"k": "v"}, "s"], "Tools": [{"name": "f"}]},
    {"role": "user", "content": "Summarize:\n\n- point one\n- point two\n", "meta": {"tokens": 42, "ok": True}},
    {"path": "/tmp/x.txt", "url": "https://example.com/a?b=c#d", "cmd": "ls -la | grep x", "glob": "*.py"},
    {"json": '{"a": [1, 2]}', "yaml": "a: [1, 2]", "md": "**bold** _it_ `code`", "pct": "50%"},
]


@pytest.mark.parametrize("value", TRICKY, ids=[f"{i}:{v!r:.40}" for i, v in enumerate(TRICKY)])
def test_tricky_cases_match_lionagi(value: Any) -> None:
    assert minimal_yaml(value) == reference(value)


def test_exact_renderings() -> None:
    assert minimal_yaml({"Function": "search", "Arguments": {"q": "x", "n": 3}}).strip() == (
        "Function: search\nArguments:\n  q: x\n  n: 3"
    )
    context = {"Guidance": "Be brief", "Instruction": "Do X", "Context": [{"k": "v"}, "s"], "Tools": [{"name": "f"}]}
    assert minimal_yaml(context) == "Guidance: Be brief\nInstruction: Do X\nContext:\n- k: v\n- s\nTools:\n- name: f\n"
    assert (
        minimal_yaml({"text": "line one\nline two", "skip": None, "items": []}) == "text: |-\n  line one\n  line two\n"
    )
    assert minimal_yaml([[1, 2], {"a": "yes", "b": "x: y"}]) == "- - 1\n  - 2\n- a: 'yes'\n  b: 'x: y'\n"
    assert minimal_yaml("plain") == "plain\n...\n"
    assert minimal_yaml({"t": "a\tb"}) == 't: "a\\tb"\n'
    assert minimal_yaml({}) == "{}\n"


def test_top_level_text_is_rendered_not_parsed_as_json() -> None:
    assert minimal_yaml('{"a": 1}') == "'{\"a\": 1}'\n"
    assert lionagi_minimal_yaml('{"a": 1}') == "a: 1\n"


class _Color(Enum):
    RED = "red"


class _Point(BaseModel):
    x: int
    label: str | None = None


def test_values_pyyaml_refuses_are_converted() -> None:
    uid = UUID("12345678-1234-5678-1234-567812345678")
    value = {
        "model": _Point(x=1),
        "enum": _Color.RED,
        "uuid": uid,
        "set": {1},
        "ordered": OrderedDict(b=1, a=None),
        _Color.RED: "enum key",
    }
    assert minimal_yaml(value) == (
        "model:\n  x: 1\nenum: red\nuuid: 12345678-1234-5678-1234-567812345678\n"
        "set:\n- 1\nordered:\n  b: 1\nred: enum key\n"
    )
    assert minimal_yaml(_Point(x=2, label="p")) == "x: 2\nlabel: p\n"
    with pytest.raises(yaml.representer.RepresenterError):
        lionagi_minimal_yaml({"uuid": uid})


def test_dates_and_datetimes_are_plain_timestamps_as_pyyaml_writes_them() -> None:
    value = {
        "when": datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc),
        "at": [datetime(2024, 1, 2, 3, 4, 5, 123)],
        "day": date(2024, 1, 2),
        date(2024, 1, 3): "a date key",
        "text": "2024-01-02",  # a string that reads as a date stays quoted
    }
    expected = (
        "when: 2024-01-02 03:04:05+00:00\nat:\n- 2024-01-02 03:04:05.000123\nday: 2024-01-02\n"
        "2024-01-03: a date key\ntext: '2024-01-02'\n"
    )
    assert minimal_yaml(value) == expected
    assert lionagi_minimal_yaml(value) == expected


def test_a_datetime_whose_offset_has_seconds_is_tagged_and_quoted_as_pyyaml_writes_it() -> None:
    # Review bo: YAML's timestamp has no seconds in its offset, so SafeDumper writes such a datetime with
    # its tag, in single quotes (zoneinfo gives such offsets for historic local mean time); lionmsg wrote
    # it plain.
    odd = datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(seconds=30)))
    historic = datetime(1900, 1, 1, tzinfo=timezone(-timedelta(minutes=17, seconds=32)))
    cases: list[Any] = [odd, [odd], {"at": odd}, {odd: [historic, {"x": odd}]}, {(odd, 1): 2}]
    for value in cases:
        assert minimal_yaml(value) == lionagi_minimal_yaml(value)
    assert minimal_yaml({"at": odd}) == "at: !!timestamp '2024-01-02 03:04:05+00:00:30'\n"
    assert minimal_yaml(historic) == "!!timestamp '1900-01-01 00:00:00-00:17:32'\n"


def test_a_timestamp_key_and_a_string_key_with_the_same_text_are_two_entries() -> None:
    # Review bp LOW 5: the timestamp's text compared equal to the string, so one pair overwrote the other
    # (and kept the first key's spelling): a pair of the prompt's data lost.
    odd = datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(seconds=30)))
    cases: list[Any] = [
        {"2024-01-02 03:04:05": 1, datetime(2024, 1, 2, 3, 4, 5): 2},
        {datetime(2024, 1, 2, 3, 4, 5): 2, "2024-01-02 03:04:05": 1},
        {"2024-01-02 03:04:05+00:00:30": 1, odd: 2},
        {"2024-01-02": "s", date(2024, 1, 2): "d"},
        {date(2024, 1, 2): {"2024-01-02": [date(2024, 1, 2)]}},
    ]
    for value in cases:
        assert minimal_yaml(value) == lionagi_minimal_yaml(value)
    assert minimal_yaml(cases[0]) == "'2024-01-02 03:04:05': 1\n2024-01-02 03:04:05: 2\n"


class _OwnSpelling(datetime):
    def isoformat(self, sep: str = "T", timespec: str = "auto") -> str:
        return "it's now"


def test_a_datetime_subclass_renders_the_time_it_holds_not_its_own_spelling() -> None:
    # Review bp: a subclass's isoformat wrote its own text, a quote included, inside the tagged form's
    # quotes (SafeDumper refuses a subclass, so there is no reference to follow).
    moment = _OwnSpelling(2024, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(seconds=30)))
    assert minimal_yaml({"at": moment}) == "at: !!timestamp '2024-01-02 03:04:05+00:00:30'\n"
    plain = _OwnSpelling(2024, 1, 2, 3, 4, 5)
    assert minimal_yaml([plain]) == "- 2024-01-02 03:04:05\n"


_OFFSETS = st.builds(timezone, st.timedeltas(min_value=timedelta(hours=-23), max_value=timedelta(hours=23)))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.datetimes(timezones=st.none() | _OFFSETS), min_size=1, max_size=3))
def test_datetimes_with_any_offset_render_as_pyyaml_writes_them(moments: list[datetime]) -> None:
    value = {"at": moments, moments[0]: "a key"}
    assert minimal_yaml(value) == lionagi_minimal_yaml(value)
    assert minimal_yaml(moments[0]) == lionagi_minimal_yaml(moments[0])


# Differential tests over generated JSON-like values.

_SYNTAX = [
    *" \n\t\r:#-?,[]{}&*!|>'\"%@`~.\\0123456789aeyYnNtTfFoOlux",
    *("\x00", "\x85", "\xa0", "\u2028", "\u2029", "\ufeff", "\ud800", "\U0010ffff", "é", "\U0001f981"),
]
_WORDS = ["yes", "No", "null", "~", "1.5", "0x1F", "1:30", "2001-12-14", "<<", "=", ".inf", "---", "...", "- ", ": "]

texts = st.one_of(
    st.text(max_size=16),
    st.text(st.sampled_from(_SYNTAX), max_size=10),
    st.lists(st.sampled_from(_WORDS + _SYNTAX), max_size=4).map("".join),
)
numeric = st.one_of(st.integers(), st.floats(), st.sampled_from([0.0, -0.0, 1e16, 1e-05, math.inf, -math.inf]))
scalars = st.one_of(st.none(), st.booleans(), numeric, texts)
keys = st.one_of(texts, st.integers(), st.sampled_from([None, True, False, 1.5, math.inf]))


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(keys, children, max_size=5),
        st.lists(children, max_size=3).map(tuple),
    )


json_like = st.recursive(scalars, _containers, max_leaves=25)


# Tuple keys are rare in practice but exercise complex `? key` entries.
def _tuples(children: st.SearchStrategy[Any]) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.lists(children, max_size=3).map(tuple)


tuple_keys = st.recursive(st.one_of(texts, st.integers(), st.none()), _tuples)


@settings(max_examples=1500)
@given(json_like)
def test_matches_lionagi_on_json_like_values(value: Any) -> None:
    assert minimal_yaml(value) == reference(value)


@settings(max_examples=500)
@given(scalars)
def test_matches_lionagi_on_scalars(value: Any) -> None:
    assert minimal_yaml(value) == reference(value)
    assert minimal_yaml({"k": value, "l": [value]}) == reference({"k": value, "l": [value]})


@settings(max_examples=300)
@given(st.dictionaries(tuple_keys, json_like, min_size=1, max_size=3))
def test_matches_lionagi_with_complex_keys(value: dict[Any, Any]) -> None:
    assert minimal_yaml(value) == reference(value)
    assert minimal_yaml([value]) == reference([value])


def test_a_value_nested_too_deeply_to_render_is_a_value_error() -> None:
    nested: Any = "leaf"
    for _ in range(5000):
        nested = [nested]
    with pytest.raises(ValueError, match=r"^cannot render a value nested this deeply$"):
        minimal_yaml({"context": nested})
