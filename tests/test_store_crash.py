"""Crash safety of the store (issue 8, acceptance 2): a child process writing through a store is
killed with SIGKILL at random points; on reopening, every change whose call had returned is there
exactly once and in order (at most one more change, committed but not yet reported, may be there
too), branches the child did not touch are unchanged, and the file passes `PRAGMA integrity_check`."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lionmsg import Instruction
from lionmsg.store import SQLiteStore

ROOT = Path(__file__).resolve().parent.parent
WRITER = ROOT / "tests" / "store_helpers" / "crash_writer.py"

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")


@dataclass
class State:
    """A branch as the test sees it: non-system ids in order, each instruction's guidance, the system id."""

    order: list[str] = field(default_factory=list)
    guidance: dict[str, str | None] = field(default_factory=dict)
    system: str | None = None


def stored(path: Path, branch_id: str) -> State:
    with SQLiteStore(path) as store:
        if branch_id not in store.branches():
            return State()
        manager = store.load(branch_id)
    state = State(system=None if manager.system is None else str(manager.system.id))
    for message in manager:
        if isinstance(message, Instruction):
            state.order.append(str(message.id))
            state.guidance[str(message.id)] = message.content.guidance
    return state


def run_and_kill(path: Path, branch_id: str, seed: int) -> list[list[str]]:
    """Start a writer, let it report a random number of changes, SIGKILL it (sometimes a moment later,
    so the kill lands anywhere in a write), and return every change it reported."""
    rng = random.Random(seed)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen(
        [sys.executable, str(WRITER), str(path), branch_id, str(seed)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    watchdog = threading.Timer(60, child.kill)  # a hung child fails the test instead of hanging it
    watchdog.start()
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n", child.stderr.read() if child.stderr else ""
        reported = []
        for _ in range(rng.randint(1, 120)):
            line = child.stdout.readline()
            assert line.endswith("\n"), child.stderr.read() if child.stderr else ""
            reported.append(line.split())
        if rng.random() < 0.7:
            time.sleep(rng.uniform(0, 0.003))
        child.send_signal(signal.SIGKILL)
        rest = child.stdout.read()  # not communicate(): it would skip what readline() buffered
        child.wait()
    finally:
        watchdog.cancel()
    assert child.returncode == -signal.SIGKILL
    # Lines printed before the kill; a line cut short by it does not count as reported.
    reported += [line.split() for line in rest.splitlines(keepends=True) if line.endswith("\n")]
    return reported


def apply(state: State, reported: list[list[str]]) -> State:
    expected = State(list(state.order), dict(state.guidance), state.system)
    for change in reported:
        if change[0] == "add":
            expected.order.append(change[1])
            expected.guidance[change[1]] = None
        elif change[0] == "replace":
            expected.guidance[change[1]] = f"v{change[2]}"
        else:
            assert change[0] == "system"
            expected.system = change[1]
    return expected


def unreported(actual: State, expected: State) -> list[str]:
    """How `actual` goes beyond `expected`: each item is one change nobody was told about."""
    extra = []
    if actual.order != expected.order:
        assert actual.order[:-1] == expected.order, "a reported add is missing, duplicated or out of order"
        assert actual.guidance[actual.order[-1]] is None
        extra.append(f"add {actual.order[-1]}")
    extra += [f"replace {i}" for i in expected.order if actual.guidance[i] != expected.guidance[i]]
    if actual.system != expected.system:
        extra.append(f"system {actual.system}")
    return extra


def check_file(path: Path) -> None:
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert connection.execute("PRAGMA foreign_key_check").fetchall() == []
        counts = connection.execute(
            "SELECT b.message_count, (SELECT count(*) FROM messages m WHERE m.branch_id = b.branch_id) FROM branches b"
        ).fetchall()
        assert all(kept == real for kept, real in counts)
    finally:
        connection.close()


def test_killed_writers_lose_no_reported_change(tmp_path: Path) -> None:
    path = tmp_path / "crash.db"
    states = {"a": State(), "b": State()}
    total = 0
    for seed, branch_id in enumerate(["a", "b", "a", "a", "b", "a"]):
        reported = run_and_kill(path, branch_id, seed)
        total += len(reported)
        check_file(path)
        expected = apply(states[branch_id], reported)
        actual = stored(path, branch_id)
        extra = unreported(actual, expected)
        assert len(extra) <= 1, extra  # only the change between commit and print may be unreported
        states[branch_id] = actual
        for other in states.keys() - {branch_id}:
            assert stored(path, other) == states[other]  # a branch nobody wrote to is unchanged
    assert total > 60  # the rounds did real work
