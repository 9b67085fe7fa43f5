"""System content (ADR-0006 D2)."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from pydantic import ValidationError

from lionmsg import Message, MessageManager, MessageRole, System, SystemContent

MINUTE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d\+00:00")


def _is_now(stamp: str) -> bool:
    moment = dt.datetime.fromisoformat(stamp)
    return abs(dt.datetime.now(dt.timezone.utc) - moment) < dt.timedelta(minutes=2)


@pytest.mark.parametrize(
    "build",
    [
        lambda: SystemContent(system_datetime=True),
        lambda: SystemContent.from_dict({"system_datetime": True}),
        lambda: System(content={"system_datetime": True}).content,
        lambda: SystemContent().updated(system_datetime=True),
    ],
    ids=["constructor", "from_dict", "message", "updated"],
)
def test_true_stamps_the_current_utc_minute_however_built(build) -> None:  # type: ignore[no-untyped-def]
    stamp = build().system_datetime
    assert MINUTE.fullmatch(stamp)
    assert _is_now(stamp)


@pytest.mark.parametrize("value", [False, None])
def test_false_and_none_mean_no_time(value: object) -> None:
    assert SystemContent(system_datetime=value).system_datetime is None
    assert SystemContent.from_dict({"system_datetime": value}).system_datetime is None


def test_a_string_time_is_kept() -> None:
    assert SystemContent(system_datetime="2024 custom").system_datetime == "2024 custom"


@pytest.mark.parametrize(
    ("given", "text"),
    [(dt.date(2024, 1, 2), "2024-01-02"), (dt.datetime(2024, 1, 2, 3, 4), "2024-01-02 03:04:00")],
    ids=["date", "datetime"],
)
def test_a_date_or_datetime_is_kept_as_the_text_lionagi_renders(given: dt.date, text: str) -> None:
    system = MessageManager().add_message(system="S", system_datetime=given)
    assert system.content.system_datetime == text  # text: the record holds it as it renders
    assert system.rendered == f"System Time: {text}\n\nS"  # LionAGI 0.36.0's text for the same input
    assert SystemContent.from_dict({"system_datetime": given}).system_datetime == text


def test_a_time_that_is_neither_text_nor_a_date_is_refused() -> None:
    with pytest.raises(ValueError, match="system_datetime must be a string or null"):
        SystemContent(system_datetime=5)


def test_rendering() -> None:
    timed = System(content={"system_message": "Be nice", "system_datetime": "2025-01-01T00:00+00:00"})
    assert timed.rendered == "System Time: 2025-01-01T00:00+00:00\n\nBe nice"
    assert System(content={"system_message": "Be nice"}).rendered == "Be nice"
    assert System().rendered == "You are a helpful AI assistant. Let's think step by step."
    assert timed.chat_msg == {"role": "system", "content": "System Time: 2025-01-01T00:00+00:00\n\nBe nice"}


def test_default_routing_is_system_to_assistant() -> None:
    system = System()
    assert (system.sender, system.recipient) == (MessageRole.SYSTEM, MessageRole.ASSISTANT)


@pytest.mark.parametrize("bad", [5, None, {"a": 1}])
def test_system_message_must_be_a_string(bad: object) -> None:
    with pytest.raises(ValueError, match="system_message must be a string"):
        SystemContent(system_message=bad)  # type: ignore[arg-type]


def test_records_hold_the_time_as_text() -> None:
    record = System(content={"system_datetime": "2025-01-01T00:00+00:00"}).to_dict()
    record["content"]["system_datetime"] = True
    with pytest.raises(ValidationError) as raised:
        Message.from_dict(record)
    assert raised.value.errors()[0]["loc"] == ("content", "system_datetime")
