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


def data_of(path: Path) -> bytes:
    """The file's bytes less the two header counters SQLite moves whenever the file changes (the change
    counter, bytes 24-27, and the version-valid-for number, 92-95): a writer's open and close switch the
    journal mode (WAL, then back to the rollback journal), which moves them and nothing else."""
    raw = bytearray(path.read_bytes())
    raw[24:28] = raw[92:96] = bytes(4)
    return bytes(raw)


def journal_mode(path: Path) -> str:
    """The journal mode the file's header records ("wal" or "delete"), read without opening it in SQLite
    (which could change it): bytes 18 and 19 are 2 for WAL, 1 for a rollback journal."""
    with path.open("rb") as file:
        header = file.read(20)
    return {b"\x02\x02": "wal", b"\x01\x01": "delete"}[header[18:20]]


def listing(directory: Path) -> list[str]:
    """The names in a folder: a store is one file, or three while in WAL mode (-wal, -shm)."""
    return sorted(entry.name for entry in directory.iterdir())
