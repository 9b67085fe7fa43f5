"""Shared vocabulary of the Exchange tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from lionmsg import Flow, Message, MessageRole


def drop_address(address: Any) -> str | None:
    """An address as the drop record writes it: a role's value, a UUID's canonical text, a name as is."""
    if address is None:
        return None
    if isinstance(address, MessageRole):
        return address.value
    return str(address)


@contextmanager
def failing_deliveries(
    broken: Flow | None, error: Exception, poison: Callable[[Message], Exception | None] = lambda message: None
) -> Iterator[None]:
    """Make a collect's inbox writes fail: every write into `broken` raises `error`, and a write of a
    message for which `poison` returns an exception raises that; every other write goes through.

    A collect files each delivery with the recipient flow's storage (`flow._storage.receive`), which is
    where this patches."""
    storage = type(Flow()._storage)
    original = storage.receive

    def receive(self: Any, message: Message, inbox: str, now: float) -> None:
        if broken is not None and self is broken._storage:
            raise error
        fault = poison(message)
        if fault is not None:
            raise fault
        original(self, message, inbox, now)

    with mock.patch.object(storage, "receive", receive):
        yield
