"""ActionRequest and ActionResponse content (ADR-0006 D2)."""

from __future__ import annotations

import functools
import re
import threading
from collections import OrderedDict
from datetime import date
from decimal import Decimal
from typing import Any, NamedTuple

import pytest
from pydantic import BaseModel, ValidationError

from lionmsg import (
    ActionRequest,
    ActionRequestContent,
    ActionResponse,
    ActionResponseContent,
    Message,
    MessageManager,
)
from tests.conftest import fields_of


def my_tool(q: str) -> str:
    return q


class HasFunction:
    function = "from_attr"


class CallableTool:
    def __call__(self) -> None:
        return None


# -- ActionRequest --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("function", "name"),
    [
        (my_tool, "my_tool"),
        (lambda: None, "<lambda>"),
        (HasFunction, "HasFunction"),
        (HasFunction(), "from_attr"),
        ("search", "search"),
        ("", ""),
    ],
    ids=["function", "lambda", "class", "object with .function", "string", "empty"],
)
def test_function_normalisation(function: Any, name: str) -> None:
    assert ActionRequestContent.from_dict({"function": function}).function == name
    assert ActionRequest(content={"function": function}).function == name


@pytest.mark.parametrize("bad", [123, None, ["f"], CallableTool()])
def test_a_non_string_function_is_a_value_error(bad: Any) -> None:
    with pytest.raises(ValueError, match="Function must be a string or callable"):
        ActionRequestContent.from_dict({"function": bad})


@pytest.mark.parametrize(
    "nameless", [functools.partial(print, "x"), type("Tool", (), {"__call__": lambda self: None})()]
)
def test_a_callable_without_a_name_is_a_value_error_that_says_so(nameless: Any) -> None:
    # It said "must be a string or callable" of a callable (review be F2).
    kind = type(nameless).__name__
    expected = rf"^Function must be a string or callable with a __name__ \({kind} has none\): give its name$"
    with pytest.raises(ValueError, match=expected):
        ActionRequestContent.from_dict({"function": nameless})
    with pytest.raises(ValueError, match=expected):
        MessageManager().add_message(action_function=nameless, action_arguments={})


@pytest.mark.parametrize("number", [2**64, -(2**63) - 1, 10**30])
def test_an_integer_beyond_64_bits_in_argument_text_is_kept_exact(number: int) -> None:
    # A documented difference (review bo): LionAGI's orjson reads it as a float, so its prompt shows
    # 1.8446744073709552e+19 for 2**64; the tool gets the number the model wrote here.
    request = ActionRequestContent.from_dict({"function": "f", "arguments": f'{{"a": {number}}}'})
    assert request.arguments == {"a": number}
    assert type(request.arguments["a"]) is int
    assert request.rendered == f"Function: f\nArguments:\n  a: {number}"


def test_arguments_are_copied() -> None:
    source = {"q": {"nested": [1]}}
    request = ActionRequest(content={"function": "f", "arguments": source})
    source["q"]["nested"].append(2)
    source["extra"] = 1
    assert request.arguments == {"q": {"nested": [1]}}


def test_the_typed_constructors_copy_what_they_are_given_all_the_way_down() -> None:
    arguments: dict[str, Any] = {"q": {"nested": [1]}}
    output: dict[str, Any] = {"rows": [{"id": 1}]}
    request = ActionRequestContent(function="f", arguments=arguments)
    response = ActionResponseContent(function="f", arguments=arguments, output=output)
    manager = MessageManager()
    added = manager.add_message(
        action_request=ActionRequest(content=ActionRequestContent(function="f", arguments=arguments))
    )
    arguments["q"]["nested"].append(2)
    arguments["extra"] = 1
    output["rows"][0]["id"] = 99
    assert request.arguments == {"q": {"nested": [1]}}
    assert response.arguments == {"q": {"nested": [1]}}
    assert response.output == {"rows": [{"id": 1}]}
    assert added.content.arguments == {"q": {"nested": [1]}}
    assert manager.messages[added.id].content.arguments == {"q": {"nested": [1]}}


class _Rows(list[Any]):
    """A list subclass: a container type of the caller's own."""


class _Point(NamedTuple):
    x: list[int]
    y: int


@pytest.mark.parametrize(
    ("wrap", "rows_of"),
    [
        (lambda rows: (rows,), lambda held: held[0]),
        (lambda rows: OrderedDict(rows=rows), lambda held: held["rows"]),
        (lambda rows: _Rows([rows]), lambda held: held[0]),
        (lambda rows: _Point(rows, 2), lambda held: held.x),
        (lambda rows: {"nested": (rows,)}, lambda held: held["nested"][0]),
    ],
    ids=["tuple", "ordered-dict", "list-subclass", "named-tuple", "tuple-in-dict"],
)
def test_the_typed_constructor_copies_an_output_of_any_container_type(wrap: Any, rows_of: Any) -> None:
    # Review an F2: only an exact list or dict was copied, so the caller's later change rewrote the record.
    rows = [1]
    output = wrap(rows)
    response = ActionResponseContent(function="f", output=output)
    record = response.to_dict(mode="json")
    assert type(response.output) is type(output)
    assert response.output is not output
    rows.append(2)
    assert rows_of(response.output) == [1]
    assert response.to_dict(mode="json") == record


@pytest.mark.parametrize(
    "output",
    [iter([1, 2]), (n for n in range(2)), map(str, "ab"), ([1], iter([3]))],
    ids=["list-iterator", "generator", "map", "iterator-in-tuple"],
)
def test_the_typed_constructor_refuses_an_iterator_as_output(output: Any) -> None:
    # Review an F1: the first record written used it up, every later one held nothing.
    with pytest.raises(TypeError, match=r"^a message cannot keep an iterator \(\w+\): writing it would use it up"):
        ActionResponseContent(function="f", output=output)


def test_a_class_given_as_output_is_kept_as_the_class() -> None:
    assert ActionResponseContent(function="f", output=Decimal).output is Decimal


_LOCK = threading.Lock()


@pytest.mark.parametrize(
    ("wrap", "rows_of"),
    [
        (lambda rows: OrderedDict(lock=_LOCK, rows=rows), lambda held: held["rows"]),
        (lambda rows: (_LOCK, rows), lambda held: held[1]),
        (lambda rows: _Point(rows, _LOCK), lambda held: held.x),  # type: ignore[arg-type]
        (lambda rows: _Rows([_LOCK, rows]), lambda held: held[1]),
    ],
    ids=["ordered-dict", "tuple", "named-tuple", "list-subclass"],
)
def test_a_container_of_any_type_holding_a_lock_is_copied_around_it(wrap: Any, rows_of: Any) -> None:
    # Review an F3: only a plain dict or list was rebuilt around what deepcopy cannot copy; any other
    # container was kept whole, so the caller's later changes beside the lock rewrote the recorded turn.
    rows = [1]
    manager = MessageManager()
    given = wrap(rows)
    call = manager.add_message(action_function="f", action_arguments={"held": given})
    result = manager.add_message(action_request=call, action_output=wrap(rows))
    rows.append(2)
    for held in (call.content.arguments["held"], result.content.output):
        assert type(held) is type(given)
        assert held is not given
        assert rows_of(held) == [1]
        assert _LOCK in (held.values() if isinstance(held, dict) else held)
    clone = result.clone()
    rows_of(clone.content.output).append(3)
    assert rows_of(result.content.output) == [1]


FUZZY = [
    ('{"a": 1}', {"a": 1}),
    ("{'a': 1, 'b': 'x'}", {"a": 1, "b": "x"}),
    ("{'a': 1, b: 2,}", {"a": 1, "b": 2}),
    ('{"a": [1, 2,], "b": {"c": 3,},}', {"a": [1, 2], "b": {"c": 3}}),
    ("{a: 1, b_2: 'x'}", {"a": 1, "b_2": "x"}),
    ("{'ok': True, 'no': False, 'none': None}", {"ok": True, "no": False, "none": None}),
    ('```json\n{"q": "cats"}\n```', {"q": "cats"}),
    ('Here you go: ```\n{"q": "dogs"}\n``` done', {"q": "dogs"}),
    ('  {"q": "spaced"}  \n', {"q": "spaced"}),
    ("{'t': (1, 2)}", {"t": [1, 2]}),
    (b'{"raw": "bytes"}', {"raw": "bytes"}),
    (None, {}),
    ("", {}),  # what providers send for a tool without arguments
    ("{1: 'one'}", {"1": "one"}),
]


@pytest.mark.parametrize(("arguments", "parsed"), FUZZY, ids=[repr(a)[:40] for a, _ in FUZZY])
def test_non_dict_arguments_go_through_fuzzy_conversion(arguments: Any, parsed: dict[str, Any]) -> None:
    assert ActionRequestContent.from_dict({"function": "f", "arguments": arguments}).arguments == parsed
    assert ActionRequestContent(function="f", arguments=arguments).arguments == parsed


class Query(BaseModel):
    q: str
    n: int = 3


def test_model_arguments_become_their_dump() -> None:
    assert ActionRequestContent.from_dict({"arguments": Query(q="x")}).arguments == {"q": "x", "n": 3}


@pytest.mark.parametrize("bad", ["not json", "[1, 2]", "5", 5, [1, 2], "{'a': }", "__import__('os').system('x')"])
def test_unconvertible_arguments_are_a_value_error(bad: Any) -> None:
    with pytest.raises(ValueError, match="Arguments must be a dictionary"):
        ActionRequestContent.from_dict({"function": "f", "arguments": bad})


def test_bad_function_or_arguments_leave_an_existing_request_unchanged() -> None:
    request = ActionRequest(content={"function": "f", "arguments": {"a": 1}}, sender="assistant")
    before, content = fields_of(request), request.content.to_dict()
    with pytest.raises(ValueError, match="Function must be a string or callable"):
        request.update(function=5)
    with pytest.raises(ValueError, match="Arguments must be a dictionary"):
        request.update(sender="x", arguments="not json")
    assert fields_of(request) == before
    assert request.content.to_dict() == content


def test_is_responded_follows_the_link() -> None:
    request = ActionRequest(content={"function": "f"})
    assert not request.is_responded()
    response = ActionResponse(content={"function": "f", "action_request_id": request.id})
    request.update(action_response_id=response.id)
    assert request.is_responded()
    assert request.content.action_response_id == str(response.id)
    assert response.content.action_request_id == str(request.id)


_NOT_A_LINK_ID = "must be a UUID in its hyphenated text form (8-4-4-4-12 hexadecimal digits) or null"


def test_a_link_id_that_is_no_uuid_is_named_in_words_and_changes_nothing() -> None:
    """The message says what a link id is (the schema's `x-lionmsg-expected`), not its pattern."""
    request = ActionRequest(content={"function": "f"})
    before, content = fields_of(request), request.content.to_dict()
    with pytest.raises(ValueError, match=f"^{re.escape(f'ActionRequestContent.action_response_id {_NOT_A_LINK_ID}')}$"):
        request.update(action_response_id="call_abc")
    assert (fields_of(request), request.content.to_dict()) == (before, content)
    with pytest.raises(ValueError, match=f"^{re.escape(f'ActionResponseContent.action_request_id {_NOT_A_LINK_ID}')}$"):
        ActionResponseContent.from_dict({"function": "f", "action_request_id": "9d8e7f6a\n"})


def test_request_rendering() -> None:
    request = ActionRequest(content={"function": "search", "arguments": {"q": "x", "n": 3}})
    assert request.rendered == "Function: search\nArguments:\n  q: x\n  n: 3"
    assert request.content.render_compact() == "search(q='x', n=3)"
    assert ActionRequest(content={"function": "f"}).rendered == "Function: f"


def test_a_compact_call_quotes_text_and_shows_every_other_value_as_str_does() -> None:
    # LionAGI 0.36.0's rule (`{k}={v!r}` for a str, `{k}={v}` otherwise): a date reads as a date.
    arguments = {"day": date(2024, 1, 2), "amount": Decimal("9.99"), "note": "a'b", "tags": ["x"], "none": None}
    request = ActionRequest(content={"function": "book", "arguments": arguments})
    assert (
        request.content.render_compact() == """book(day=2024-01-02, amount=9.99, note="a'b", tags=['x'], none=None)"""
    )
    assert ActionRequest(content={}).content.render_compact() == "unknown()"


# -- ActionResponse -------------------------------------------------------------------------------


@pytest.mark.parametrize(("error", "success"), [(None, True), ("boom", False), ("", False)])
def test_success_is_exactly_error_is_none(error: str | None, success: bool) -> None:
    content = ActionResponseContent(function="f", error=error)
    assert content.success is success
    assert ActionResponse(content=content).success is success


def test_aliases() -> None:
    content = ActionResponseContent(
        function="f", output={"v": 1}, action_request_id="00000000-0000-4000-8000-000000000001"
    )
    assert content.request_id == "00000000-0000-4000-8000-000000000001"
    assert content.result == {"v": 1}
    assert ActionResponse(content=content).output == {"v": 1}


@pytest.mark.parametrize(
    ("output", "error", "summary"),
    [
        (None, None, "ok"),
        ("text", None, "text"),
        ({"a": 1}, None, "a: 1\n"),
        ([1, 2], None, "- 1\n- 2\n"),
        (3, None, "3"),
        (0, None, "0"),
        (None, "boom", "error: boom"),
        ({"a": 1}, "boom", "error: boom"),
        (None, "", "error: unknown"),
    ],
)
def test_render_summary(output: Any, error: str | None, summary: str) -> None:
    assert ActionResponseContent(output=output, error=error).render_summary() == summary


def test_error_round_trips() -> None:
    failed = ActionResponse(content={"function": "f", "error": "timeout"})
    for loaded in (Message.from_dict(failed.to_dict()), Message.from_json(failed.to_json())):
        assert loaded.content.error == "timeout"
        assert loaded.success is False
    assert Message.from_dict(ActionResponse(content={"function": "f"}).to_dict()).success is True


def test_response_arguments_given_as_none_are_no_arguments_as_for_a_request() -> None:
    for content in (
        ActionResponseContent.from_dict({"function": "f", "arguments": None, "output": 1}),
        ActionResponse(content={"function": "f", "arguments": None, "output": 1}).content,
    ):
        assert content.arguments == {}
        assert content.rendered == "Function: f\nOutput: 1"  # LionAGI's text
    record = ActionResponse(content={"function": "f", "output": 1}).to_dict()
    record["content"]["arguments"] = None
    with pytest.raises(ValidationError, match=r"ActionResponseContent\.arguments must be an object"):
        Message.from_dict(record)  # a record is strict: its schema says an object


def test_response_rendering() -> None:
    response = ActionResponse(content={"function": "f", "arguments": {"a": 1}, "output": {"r": [1, 2]}})
    assert response.rendered == "Function: f\nArguments:\n  a: 1\nOutput:\n  r:\n  - 1\n  - 2"
    failed = ActionResponse(content={"function": "f", "error": "timeout"})
    assert failed.rendered == "Function: f\nError: timeout"


def test_request_arguments_as_deep_as_a_record_holds_are_built_updated_and_written() -> None:
    nested: Any = "leaf"
    for _ in range(900):  # past what copy.deepcopy reaches (two frames per level); records hold it
        nested = [nested]
    request = ActionRequest(content={"function": "f", "arguments": {"a": nested}})
    loaded = Message.from_json(request.to_json())
    loaded.update(function="g")
    assert (loaded.content.function, loaded.content.arguments) == ("g", {"a": nested})
    assert loaded.content.arguments["a"] is not nested
