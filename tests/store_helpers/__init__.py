"""Helpers shared by the store tests: what "the same history" means, and a raw view of a store file."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lionmsg import Message, MessageManager
from tests.conftest import fields_of


def history(manager: MessageManager | Iterable[Message]) -> list[dict[str, Any]]:
    """Every field of every message (and its class), in order: what a reload must reproduce."""
    return [fields_of(message) for message in manager]


def assert_same_history(loaded: MessageManager, manager: MessageManager) -> None:
    assert history(loaded) == history(manager)
    assert [message.to_dict() for message in loaded] == [message.to_dict() for message in manager]
    assert (loaded.system is None) == (manager.system is None)
    if manager.system is not None:
        assert loaded.system is not None
        assert loaded.system.id == manager.system.id
        assert loaded.messages[0] is loaded.system


def rows(path: Path, branch_id: str) -> list[tuple[str, int, str]]:
    """(message id, position, record) of a branch, in stored order, read with a separate connection."""
    return query(
        path, "SELECT message_id, position, record FROM messages WHERE branch_id = ? ORDER BY position", branch_id
    )


def query(path: Path, sql: str, *parameters: Any) -> list[tuple[Any, ...]]:
    """Rows of a query, read with a separate connection."""
    connection = sqlite3.connect(path)
    try:
        return connection.execute(sql, parameters).fetchall()
    finally:
        connection.close()


def dump(path: Path) -> list[str]:
    """The whole database as SQL: equal dumps mean nothing was changed."""
    connection = sqlite3.connect(path)
    try:
        return list(connection.iterdump())
    finally:
        connection.close()


def execute(path: Path, sql: str, *parameters: Any) -> None:
    """Change the file behind the store's back (to corrupt it on purpose)."""
    connection = sqlite3.connect(path)
    try:
        with connection:
            connection.execute(sql, parameters)
    finally:
        connection.close()
