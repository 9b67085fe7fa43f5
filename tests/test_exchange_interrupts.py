"""A KeyboardInterrupt that cuts a collect short, at every line of the code that takes mail out of an
outbox and files it (review bc F1): each message stays in exactly one place for each recipient it was
meant for (the sender's outbox, the recipient's inbox, the drop record), and the Exchange can still be
written, loaded and used. The interrupt is raised from a trace function at one line, as a Ctrl-C lands
between two statements."""

from __future__ import annotations

import asyncio
import inspect
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from types import CodeType, FrameType
from typing import Any, cast
from uuid import UUID, uuid4

import pytest

from lionmsg import Exchange, Message
from lionmsg.runtime import exchange as exchange_module
from lionmsg.runtime import flow as flow_module
from lionmsg.runtime.progression import OrderedIds

# The code a collect runs from routing on (the order's exclusion of the taken ids included), apart from
# the drop record's own two-line bookkeeping (`Exchange._drop`), which the README names as outside it.
FILING_CODE: list[Callable[..., Any]] = [
    exchange_module.Exchange._collect,
    exchange_module.Exchange._file,
    exchange_module.Exchange._drop_unroutable,
    flow_module._Storage.chosen,
    flow_module._Storage.remove,
    flow_module._Storage.receive,
    flow_module._Storage._store,
    OrderedIds.exclude,
    OrderedIds._empty,
    OrderedIds.append,
]


def _lines(function: Callable[..., Any]) -> list[int]:
    """The lines of a function's body a trace can stop at, but a `try:`: its line is a no-op outside the
    try's own handlers, which a trace function can raise at and a real interrupt never lands on (the
    interpreter looks for one at calls and jumps only)."""
    code: CodeType = function.__code__
    source, first = inspect.getsourcelines(function)
    lines = {line for _, _, line in code.co_lines() if line is not None and line > code.co_firstlineno}
    return sorted(line for line in lines if source[line - first].strip() != "try:")


CASES = [(function, line) for function in FILING_CODE for line in _lines(function)]


@contextmanager
def interrupted_at(code: CodeType, line: int, hit: int = 1) -> Iterator[list[bool]]:
    """Raise KeyboardInterrupt the `hit`-th time `code` reaches `line`; yields [True] once it did."""
    fired: list[bool] = []
    reached = [0]

    def in_frame(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line" and frame.f_lineno == line and not fired:
            reached[0] += 1
            if reached[0] == hit:
                fired.append(True)
                raise KeyboardInterrupt
        return in_frame

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        return in_frame if frame.f_code is code else None

    sys.settrace(calls)
    try:
        yield fired
    finally:
        sys.settrace(None)


def mail_in_flight() -> tuple[Exchange, UUID, dict[str, tuple[Message, list[Any]]]]:
    """An Exchange whose owner `a` has queued mail of every kind: direct messages, a broadcast, one to a
    name and one to an id no owner has (so the drop loop runs more than once), into inboxes open
    already and new ones; each with the recipients it is meant for."""
    exchange = Exchange()
    a, b, c = (cast(UUID, exchange.register(uuid4()).owner()) for _ in range(3))
    for recipient in (b, b, c):  # inboxes open already: b's holds two (an append), c's one (bare)
        exchange.send(a, recipient, "earlier")
    asyncio.run(exchange.collect(a))
    stranger = uuid4()
    mail = {
        "direct": (exchange.send(a, b, "direct"), [b]),
        "broadcast": (exchange.send(a, None, "everyone"), [b, c]),
        "name": (exchange.send(a, "nobody", "to a name"), ["nobody"]),
        "stranger": (exchange.send(a, stranger, "to no owner"), [stranger]),
        "second direct": (exchange.send(a, c, "direct to c"), [c]),
    }
    return exchange, a, mail


def places(exchange: Exchange, sender: UUID, message: Message, recipient: Any) -> list[str]:
    """Every place one message is for one recipient: its sender's outbox, the recipient's inbox, the
    drop record (once per entry)."""
    found = []
    outbox = exchange.get(sender)
    assert outbox is not None
    if message.id in outbox.outbox:
        found.append("outbox")
    if isinstance(recipient, UUID) and any(
        received.id == message.id for received in exchange.receive(recipient, sender)
    ):
        found.append("inbox")
    text = str(recipient)
    found += ["dropped" for drop in exchange.dropped if drop.message_id == str(message.id) and drop.recipient == text]
    return found


@pytest.mark.parametrize("hit", [1, 2, 3])  # lines in loops: the first, second and third time through
@pytest.mark.parametrize(("function", "line"), CASES, ids=[f"{f.__qualname__}:{line}" for f, line in CASES])
def test_an_interrupt_anywhere_in_a_collect_loses_and_duplicates_no_mail(
    function: Callable[..., Any], line: int, hit: int
) -> None:
    exchange, a, mail = mail_in_flight()
    with interrupted_at(function.__code__, line, hit), suppress(KeyboardInterrupt):
        asyncio.run(exchange.collect(a))
    for label, (message, recipients) in mail.items():
        for recipient in recipients:
            assert len(places(exchange, a, message, recipient)) == 1, (label, recipient)
    flows_before = exchange.to_dict()
    again = Exchange.from_dict(flows_before)
    assert again.to_dict() == flows_before
    later = exchange.send(a, mail["direct"][1][0], "later")
    asyncio.run(exchange.collect(a))
    assert places(exchange, a, later, mail["direct"][1][0]) == ["inbox"]


def test_every_case_is_reached_by_some_scenario() -> None:
    # The lines are those of the code itself: at least the usual road's must fire, or the test above
    # would check an uninterrupted collect only.
    reached = 0
    for function, line in CASES:
        exchange, a, _ = mail_in_flight()
        with interrupted_at(function.__code__, line) as fired, suppress(KeyboardInterrupt):
            asyncio.run(exchange.collect(a))
        reached += bool(fired)
    assert reached >= len(CASES) // 2
