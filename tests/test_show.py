"""`lionmsg show` and the conversation table: every kind of stored history prints the same table, and
bad input is a one-line error with the documented exit status, never a traceback."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from lionmsg import Branch, Exchange, MessageManager, MessageRole, System
from lionmsg.cli import main
from lionmsg.runtime.render.table import address_label, conversation_table
from lionmsg.store import SQLiteStore, save_snapshot

PEER = UUID("11111111-1111-4111-8111-111111111111")


def history() -> MessageManager:
    manager = MessageManager(system=System(content={"system_message": "Be terse."}))
    manager.add_message(instruction="Add 2 and 2.", images=["https://example.org/a.png"], sender="user")
    request = manager.add_message(action_function="add", action_arguments={"a": 2, "b": 2})
    manager.add_message(action_request=request, action_output=4)
    manager.add_message(assistant_response="4\n(four)", sender=PEER, recipient=None)
    return manager


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


def test_the_table_has_one_aligned_row_per_message() -> None:
    table = conversation_table(history(), names={PEER: "peer"}).splitlines()
    assert table[0].split() == ["#", "role", "class", "from", "→", "to", "content"]
    assert set(table[1].replace(" ", "")) == {"-"}
    assert [row.split()[:3] for row in table[2:]] == [
        ["0", "system", "System"],
        ["1", "user", "Instruction"],
        ["2", "action", "ActionRequest"],
        ["3", "action", "ActionResponse"],
        ["4", "assistant", "AssistantResponse"],
    ]
    assert table[2].endswith("system → assistant  Be terse.")
    assert table[3].endswith("Instruction: Add 2 and 2. [+1 image]")
    assert table[6].endswith("peer → user         4 (four)")  # newlines folded
    column = table[0].index("content")
    assert [row[column:] for row in table[2:4]] == ["Be terse.", "Instruction: Add 2 and 2. [+1 image]"]


def test_long_content_is_cut_with_an_ellipsis_and_labels_are_short() -> None:
    manager = MessageManager()
    manager.add_message(instruction="x" * 200)
    row = conversation_table(manager, content_width=20).splitlines()[2]
    assert row.endswith("Instruction: xxxxxx…")
    assert address_label(PEER) == "11111111"
    assert address_label(None) == "*"  # broadcast
    assert address_label(MessageRole.UNSET) == "unset"
    assert address_label("tool") == "tool"


def test_an_ascii_table_escapes_before_it_measures_so_its_columns_stay_aligned() -> None:
    manager = MessageManager()
    manager.add_message(instruction="café " * 30, sender="zoë", recipient="user")
    manager.add_message(assistant_response="ok", sender="assistant", recipient="zoë")
    table = conversation_table(manager, content_width=20, ascii_only=True).splitlines()
    assert all(line.isascii() for line in table)
    assert table[0].split() == ["#", "role", "class", "from", "->", "to", "content"]
    assert table[2].endswith("zo\\xeb -> user       Instruction: 'caf...")
    assert table[3].endswith("assistant -> zo\\xeb  ok")
    column = table[0].index("content")
    assert [row[column:] for row in table[2:]] == ["Instruction: 'caf...", "ok"]


def test_show_prints_every_branch_of_a_store_and_one_on_request(tmp_path: Path) -> None:
    database = tmp_path / "h.db"
    manager = history()
    with SQLiteStore(database) as store:
        store.attach(manager, "first")
        store.attach(MessageManager(system=System()), "second")
    status, text = run("show", str(database))
    assert status == 0
    assert "branch first (5 messages)" in text
    assert "branch second (1 message)" in text
    status, text = run("show", str(database), "--branch", "first", "--chat")
    assert status == 0
    assert "branch second" not in text
    assert conversation_table(manager) in text
    chat = json.loads(text[text.index("\n[") + 1 :])
    assert chat == manager.to_chat_msgs()


@pytest.mark.parametrize("kind", ["manager", "branch"])
def test_show_prints_a_snapshot(tmp_path: Path, kind: str) -> None:
    manager = history()
    path = tmp_path / "snap.json"
    save_snapshot(manager if kind == "manager" else Branch(msgs=manager), path)
    status, text = run("show", str(path))
    assert status == 0
    assert conversation_table(manager) in text


def test_show_prints_the_mailboxes_of_an_exchange_snapshot(tmp_path: Path) -> None:
    import asyncio

    exchange = Exchange()
    a, b = exchange.register(PEER).owner(), exchange.register(UUID(int=7)).owner()
    exchange.send(a, b, "hello b")
    asyncio.run(exchange.collect_all())
    exchange.send(b, None, "queued")
    path = tmp_path / "exchange.json"
    save_snapshot(exchange, path)
    status, text = run("show", str(path))
    assert status == 0
    assert f"owner {b}: inbox_{a}" in text
    assert "hello b" in text
    assert f"owner {b}: outbox" in text
    assert f"owner {a}: outbox" not in text  # an empty outbox is left out


def test_an_inbox_name_a_terminal_would_act_on_is_quoted(tmp_path: Path) -> None:
    import asyncio

    exchange = Exchange()
    a, b = exchange.register(PEER).owner(), exchange.register(UUID(int=7)).owner()
    exchange.send(a, b, "hello b")
    asyncio.run(exchange.collect_all())
    path = tmp_path / "exchange.json"
    save_snapshot(exchange, path)
    document = json.loads(path.read_text(encoding="utf-8"))
    renamed = 0
    for flow in document["data"]["flows"]:
        for progression in flow["progressions"]:
            if progression["name"].startswith("inbox_"):  # a snapshot's names are any text
                progression["name"] = "inbox_\x1b[2Jevil\u202e"
                renamed += 1
    assert renamed == 1
    path.write_text(json.dumps(document), encoding="utf-8")
    status, text = run("show", str(path))
    assert status == 0
    assert f'owner {b}: "inbox_\\u001b[2Jevil\\u202e"\n' in text
    assert all(char.isprintable() or char == "\n" for char in text)


def test_show_prints_json_lines_records(tmp_path: Path) -> None:
    manager = history()
    path = tmp_path / "records.jsonl"
    path.write_text("\n".join(m.to_json() for m in manager) + "\n", encoding="utf-8")
    status, text = run("show", str(path))
    assert status == 0
    assert conversation_table(manager) in text


def test_a_bad_record_names_its_line_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "records.jsonl"
    path.write_text(history().messages[0].to_json() + '\n{"id": 3}\n', encoding="utf-8")
    status, text = run("show", str(path))
    assert status == 1
    assert text == ""
    error = capsys.readouterr().err
    assert error.startswith(f"lionmsg: {path}:2: not a message record: ")
    assert "Traceback" not in error


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["show", "{missing}"], "lionmsg: cannot read {missing}: No such file or directory\n"),
        (["show", "{records}", "--branch", "x"], "lionmsg: --branch applies to a SQLite store only\n"),
        (["show", "{store}", "--branch", "nope"], "lionmsg: unknown branch 'nope' in store '{store}'\n"),
        # Review as F4: names holding a control character quoted as JSON, as the commands quote every name.
        (["show", "{store}", "--branch", "x\x1bq"], "lionmsg: unknown branch \"x\\u001bq\" in store '{store}'\n"),
        (["show", "{odd_store}", "--branch", "nope"], "lionmsg: unknown branch 'nope' in store {odd_store_json}\n"),
    ],
)
def test_usage_errors_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    paths: dict[str, Any] = {
        "missing": tmp_path / "missing.db",
        "records": tmp_path / "r.jsonl",
        "store": tmp_path / "s.db",
        "odd_store": tmp_path / "s\x1b[2J.db",
    }
    paths["records"].write_text("", encoding="utf-8")
    SQLiteStore(paths["store"]).close()
    SQLiteStore(paths["odd_store"]).close()
    paths["odd_store_json"] = json.dumps(str(paths["odd_store"]))
    status, _ = run(*(arg.format(**paths) for arg in argv))
    assert status == 2
    assert capsys.readouterr().err == message.format(**paths)


@pytest.mark.parametrize(
    ("branch", "problem"),
    [
        # No store holds one (SQLiteStore refuses it), so it is refused with the other bad arguments.
        ("", "a branch id cannot be empty"),
        # A command-line byte that is not UTF-8 reaches Python as a lone surrogate: no store can hold it.
        ("b\udcff", 'a branch id is UTF-8 text, not "b\\udcff"'),
    ],
    ids=["empty", "not UTF-8"],
)
def test_a_branch_id_no_store_can_hold_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], branch: str, problem: str
) -> None:
    database = tmp_path / "s.db"
    with SQLiteStore(database) as store:
        store.attach(history(), "first")
    with pytest.raises(SystemExit) as raised:
        run("show", str(database), "--branch", branch)
    assert raised.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("usage: lionmsg show ")
    assert error.endswith(f"\nlionmsg show: error: argument --branch: {problem}\n")


@pytest.mark.parametrize(
    ("statements", "problem"),
    [
        (["CREATE TABLE things (x)"], "a SQLite database, but not a lionmsg store"),
        (["CREATE TABLE t (x)", "DROP TABLE t"], "an empty SQLite database, not a lionmsg store"),
        # in WAL mode: SQLite's read-only open would leave -wal and -shm files beside it
        (["PRAGMA journal_mode = WAL", "CREATE TABLE things (x)"], "a SQLite database, but not a lionmsg store"),
    ],
    ids=["foreign", "empty", "foreign-in-wal-mode"],
)
def test_a_foreign_or_empty_sqlite_file_is_refused_and_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], statements: list[str], problem: str
) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as connection:
        for statement in statements:
            connection.execute(statement)
    connection.close()
    raw = path.read_bytes()
    status, _ = run("show", str(path))
    assert status == 1
    assert capsys.readouterr().err == f"lionmsg: store {str(path)!r}: {problem}\n"
    assert path.read_bytes() == raw
    assert [entry.name for entry in tmp_path.iterdir()] == ["other.db"]


def test_showing_a_store_changes_nothing_even_while_a_writer_holds_its_lock(tmp_path: Path) -> None:
    database = tmp_path / "h.db"
    with SQLiteStore(database) as store:
        store.attach(history(), "first")
    raw = database.read_bytes()
    blocker = sqlite3.connect(database, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # a writer in the middle of a transaction
    try:
        status, text = run("show", str(database))
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert status == 0
    assert "branch first (5 messages)" in text
    assert database.read_bytes() == raw


def test_show_says_when_what_it_read_holds_nothing_to_show(tmp_path: Path) -> None:
    # Review cn F4: a store with no branches or an Exchange with no mail printed nothing (status 0), as
    # if nothing had been read.
    database = tmp_path / "empty.db"
    SQLiteStore(database).close()
    snapshot = tmp_path / "exchange.json"
    hub = Exchange()
    hub.register(UUID(int=1))
    save_snapshot(hub, snapshot)
    for path in (database, snapshot):
        assert run("show", str(path)) == (0, "nothing to show: no branch, history or mail\n")
