"""AssistantResponse and the normalisation of provider responses (ADR-0006 D2)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from lionmsg import AssistantResponse, Message, MessageManager, MessageRole

ANTHROPIC = {
    "content": [
        {"type": "text", "text": "A"},
        {"type": "tool_use", "id": "t1", "name": "search", "input": {}},
        {"type": "text", "text": "B"},
    ]
}
OPENAI = {"choices": [{"message": {"content": "C1"}}, {"message": {"content": "C2"}}]}
RESPONSES_API = {
    "output": [
        {"type": "reasoning", "summary": []},
        {"type": "message", "content": [{"type": "output_text", "text": "O1"}, {"type": "output_text", "text": "O2"}]},
    ]
}

SHAPES = [
    pytest.param("hello", "hello", id="plain string"),
    pytest.param(ANTHROPIC, "AB", id="anthropic typed blocks"),
    pytest.param({"content": "plain"}, "plain", id="content string"),
    pytest.param({"content": ["s1", "s2"]}, "s1s2", id="content list of strings"),
    pytest.param(OPENAI, "C1C2", id="openai choices list"),
    pytest.param({"choices": [{"message": {"content": None, "tool_calls": []}}]}, "", id="openai tool calls only"),
    pytest.param({"choices": [{"delta": {"content": "D"}}]}, "D", id="openai stream delta"),
    pytest.param(
        {"choices": [{"message": {"content": [{"type": "text", "text": "P1"}, {"type": "image_url"}, "P2"]}}]},
        "P1P2",
        id="openai choice content as parts",
    ),
    pytest.param(
        {"choices": [{"message": {"content": {"type": "text", "text": "P"}}}]}, "P", id="openai choice content one part"
    ),
    pytest.param({"choices": [{"message": {"content": 5}}]}, "", id="openai choice content a number"),
    pytest.param({"choices": [{"message": None, "delta": {"content": "D"}}]}, "D", id="null message beside delta"),
    pytest.param({"output": [{"type": "message", "content": "S"}]}, "S", id="responses output content as text"),
    pytest.param({"choices": [{"message": {}, "delta": {"content": "D"}}]}, "D", id="empty message beside delta"),
    pytest.param({"choices": [{"message": "M"}]}, "", id="a choice message that is no object"),
    pytest.param({"choices": {"message": {"content": "X"}}}, "X", id="openai single choice"),
    pytest.param(RESPONSES_API, "O1O2", id="responses api output"),
    pytest.param({"output": [{"type": "message", "content": "S"}]}, "S", id="responses api string content"),
    pytest.param({"result": "R"}, "R", id="claude code result"),
    pytest.param({"result": {"a": 1}}, '{"a": 1}', id="non-string result as JSON"),
    pytest.param({"content": "K", "choices": [{"message": {"content": "no"}}]}, "K", id="content wins over choices"),
    pytest.param(["a", "b", "c"], "abc", id="list of strings"),
    pytest.param(["x", {"content": "y"}, {"result": "z"}], "xyz", id="mixed list"),
    pytest.param({"unknown": 1}, "", id="unknown dict"),
    pytest.param(5, "", id="number"),
    pytest.param(None, "", id="none"),
    pytest.param([], "", id="empty list"),
]


def test_a_result_holding_a_number_json_cannot_write_is_a_value_error() -> None:
    expected = r"^a provider response's result holds a number JSON cannot write: Out of range float values"
    for response in ({"result": float("nan")}, {"result": {"score": float("inf")}}):
        with pytest.raises(ValueError, match=expected):
            AssistantResponse.from_response(response)
        manager = MessageManager()
        with pytest.raises(ValueError, match=expected):
            manager.add_message(assistant_response=response)
        assert len(manager) == 0


@pytest.mark.parametrize(("response", "text"), SHAPES)
def test_from_response_extracts_the_text_and_keeps_the_raw_value(response: Any, text: str) -> None:
    message = AssistantResponse.from_response(response)
    assert message.response == text
    assert message.content.assistant_response == text
    assert message.rendered == text
    assert message.model_response == response
    assert message.metadata == {"model_response": response}


class Completion(BaseModel):
    choices: list[dict[str, Any]]
    usage: dict[str, int] | None = None


def test_a_pydantic_model_is_read_and_kept_as_its_dump() -> None:
    message = AssistantResponse.from_response(Completion(choices=[{"message": {"content": "hi"}}]))
    assert message.response == "hi"
    assert message.model_response == {"choices": [{"message": {"content": "hi"}}]}
    assert Message.from_dict(message.to_dict()).model_response == message.model_response


def test_default_routing_is_to_the_user() -> None:
    message = AssistantResponse.from_response("hi")
    assert (message.sender, message.recipient) == (MessageRole.UNSET, MessageRole.USER)
    routed = AssistantResponse.from_response("hi", sender="gpt", recipient="alice")
    assert (routed.sender, routed.recipient) == ("gpt", "alice")
    assert AssistantResponse().recipient is MessageRole.USER


def test_chat_projection_of_a_response() -> None:
    assert AssistantResponse.from_response(OPENAI).chat_msg == {"role": "assistant", "content": "C1C2"}


def test_the_raw_provider_response_is_kept_as_a_copy() -> None:
    response = {"choices": [{"message": {"content": "hi"}}], "usage": {"tokens": 1}}
    built = AssistantResponse.from_response(response)
    added = MessageManager().add_message(assistant_response=response)
    response["usage"]["tokens"] = 999  # the caller goes on using its payload
    response["choices"].append({"message": {"content": "later"}})
    for message in (built, added):
        assert message.model_response == {"choices": [{"message": {"content": "hi"}}], "usage": {"tokens": 1}}


def test_model_response_defaults_to_empty() -> None:
    assert AssistantResponse().model_response == {}
