"""Interrupts raised at a chosen line, as a Ctrl-C lands between two statements: for the tests that check
a change cut short anywhere leaves its objects whole."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import CodeType, FrameType
from typing import Any


def interruptible_lines(function: Callable[..., Any]) -> list[int]:
    """The lines of a function's body a trace can stop at, but a `try:`: its line is a no-op outside the
    try's own handlers, which a trace function can raise at and a real interrupt never lands on (the
    interpreter looks for one at calls and jumps only)."""
    code: CodeType = function.__code__
    source, first = inspect.getsourcelines(function)
    lines = {line for _, _, line in code.co_lines() if line is not None and line > code.co_firstlineno}
    return sorted(line for line in lines if source[line - first].strip() != "try:")


@contextmanager
def interrupted_at(
    code: CodeType, line: int, hit: int = 1, error: type[BaseException] = KeyboardInterrupt
) -> Iterator[list[bool]]:
    """Raise `error` (a KeyboardInterrupt, or what a signal handler may raise: a SIGALRM handler's
    TimeoutError) the `hit`-th time `code` reaches `line`; yields [True] once it did."""
    fired: list[bool] = []
    reached = [0]

    def in_frame(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line" and frame.f_lineno == line and not fired:
            reached[0] += 1
            if reached[0] == hit:
                fired.append(True)
                raise error("signal")
        return in_frame

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        return in_frame if frame.f_code is code else None

    sys.settrace(calls)
    try:
        yield fired
    finally:
        sys.settrace(None)
