"""bench/instructions.py: reading valgrind's total, the per-operation arithmetic, and the counted child run
(valgrind itself is a developer tool, not a test dependency: the child runs here without it)."""

from __future__ import annotations

import gc
import subprocess
from collections.abc import Iterator

import pytest

from bench import instructions


@pytest.fixture(autouse=True)
def _unfreeze_after() -> Iterator[None]:
    # The child freezes what its preparation made (gc.freeze), as valgrind's run does: undone here, so
    # the objects stay collectable for the rest of the test session.
    yield
    gc.unfreeze()


CACHEGRIND_SUMMARY = """\
==29551== Cachegrind, a cache and branch-prediction profiler
==29551== Command: python -m bench.instructions --child lionmsg replace 1000 2
==29551==
==29551== I   refs:      1,439,186,110
"""


def test_the_total_is_read_from_cachegrinds_summary() -> None:
    assert instructions.parse_total(CACHEGRIND_SUMMARY) == 1_439_186_110


def test_output_without_a_total_is_an_error() -> None:
    with pytest.raises(ValueError, match="no instruction total"):
        instructions.parse_total("==1== valgrind: failed to start tool")


def test_one_operation_costs_the_extra_instructions_of_the_counted_repetitions() -> None:
    # 2 repetitions of 1,000 operations added 65,000,000 instructions: 32,500 per operation.
    assert instructions.instructions_per_op(400_000_000, 465_000_000, reps=2, ops=1_000) == 32_500


@pytest.mark.parametrize(("reps", "ops"), [(0, 1_000), (2, 0)])
def test_nothing_counted_is_an_error(reps: int, ops: int) -> None:
    with pytest.raises(ValueError, match="reps and ops must be positive"):
        instructions.instructions_per_op(1, 2, reps=reps, ops=ops)


def test_the_child_prepares_warms_up_and_repeats_a_workload(capsys: pytest.CaptureFixture[str]) -> None:
    # What valgrind runs: it must complete (the workload checks its own results) and print nothing.
    assert instructions.main(["--child", "lionmsg", "replace", "50", "1"]) == 0
    assert capsys.readouterr().out == ""


def test_without_valgrind_it_says_so(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(instructions.shutil, "which", lambda name: None)
    assert instructions.main(["lionmsg", "replace", "50"]) == 2
    assert "valgrind is not on PATH" in capsys.readouterr().err


def test_a_memory_workload_has_no_operations_to_count(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(instructions.shutil, "which", lambda name: "/usr/bin/valgrind")
    assert instructions.main(["lionmsg", "memory", "50"]) == 2  # refused before anything runs
    assert "memory measures bytes, not operations" in capsys.readouterr().err


SIMULATED_SUMMARY = """\
==29551== I   refs:      1,439,186,110
==29551== I1  misses:        4,365,076
==29551== LLi misses:           12,345
==29551== I1  miss rate:          0.30%
==29551== LLi miss rate:          0.00%
==29551==
==29551== D   refs:        560,123,456  (400,000,000 rd   + 160,123,456 wr)
==29551== D1  misses:        3,693,543  (  3,356,057 rd   +     337,486 wr)
==29551== LLd misses:          534,442  (    516,974 rd   +      17,468 wr)
"""


def test_the_miss_totals_are_read_with_the_instructions_when_the_caches_were_simulated() -> None:
    assert instructions.parse_counts(SIMULATED_SUMMARY, misses=True) == instructions.Counts(
        1_439_186_110, 3_693_543, 534_442
    )
    assert instructions.parse_counts(SIMULATED_SUMMARY, misses=False) == instructions.Counts(1_439_186_110)


def test_a_summary_without_miss_totals_is_an_error_when_they_were_asked_for() -> None:
    with pytest.raises(ValueError, match="no data-miss totals"):
        instructions.parse_counts(CACHEGRIND_SUMMARY, misses=True)


def test_misses_are_counted_under_a_simulated_last_level_of_the_hosts_size(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    commands: list[list[str]] = []
    summaries = iter(
        [
            # Without repetitions, then with 2 of 1,000 operations: 28,500 instructions, 3.3 L1 and
            # 0.5 last-level data misses more per operation.
            "I   refs: 400,000,000\nD1  misses: 100,000 (1 rd + 2 wr)\nLLd misses: 9,000 (1 rd + 2 wr)",
            "I   refs: 457,000,000\nD1  misses: 106,600 (1 rd + 2 wr)\nLLd misses: 10,000 (1 rd + 2 wr)",
        ]
    )

    def run(command: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        commands.append(command)
        return subprocess.CompletedProcess(command, 0, "", next(summaries))

    monkeypatch.setattr(instructions.shutil, "which", lambda name: "/usr/bin/valgrind")
    monkeypatch.setattr(instructions.subprocess, "run", run)
    assert instructions.main(["lionmsg", "replace", "1000", "--misses"]) == 0
    assert capsys.readouterr().out == (
        "lionmsg replace N=1000: 28,500 instructions, 3.3 L1 and 0.5 last-level data misses per operation "
        "(add-or-replace at a random index)\n"
    )
    for command in commands:
        assert command[:4] == ["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--LL=33554432,16,64"]
    # After the warm-up, one repetition in both runs (the first one's misses are not the later ones'); the
    # child runs without the collector (a pass in one run and not the other would move the difference).
    assert [command[-2:] for command in commands] == [["1", "--misses"], ["3", "--misses"]]


def test_without_misses_the_caches_are_not_simulated(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    commands: list[list[str]] = []
    totals = iter(["I   refs: 400,000,000", "I   refs: 457,000,000"])

    def run(command: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        commands.append(command)
        return subprocess.CompletedProcess(command, 0, "", next(totals))

    monkeypatch.setattr(instructions.shutil, "which", lambda name: "/usr/bin/valgrind")
    monkeypatch.setattr(instructions.subprocess, "run", run)
    assert instructions.main(["lionmsg", "replace", "1000"]) == 0
    assert capsys.readouterr().out == (
        "lionmsg replace N=1000: 28,500 instructions per operation (add-or-replace at a random index)\n"
    )
    assert all(command[2] == "--cache-sim=no" for command in commands)
    assert [command[-1] for command in commands] == ["0", "2"]


def test_the_child_counting_misses_runs_without_the_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    disabled: list[bool] = []
    monkeypatch.setattr(instructions.gc, "disable", lambda: disabled.append(True))
    assert instructions.main(["--child", "lionmsg", "replace", "50", "1"]) == 0
    assert disabled == []
    assert instructions.main(["--child", "lionmsg", "replace", "50", "1", "--misses"]) == 0
    assert disabled == [True]


def test_a_last_level_size_without_misses_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        instructions.main(["lionmsg", "replace", "1000", "--last-level", "1048576"])
    assert "--last-level needs --misses" in capsys.readouterr().err


def test_both_counted_runs_get_one_hash_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    # The two runs are subtracted: dicts laid out by different hash seeds moved the difference (see
    # _repeatable_randomness).
    environments: list[dict[str, str]] = []
    totals = iter(["I   refs: 400,000,000", "I   refs: 457,000,000"])

    def run(command: list[str], *, env: dict[str, str], **_: object) -> subprocess.CompletedProcess[str]:
        environments.append(env)
        return subprocess.CompletedProcess(command, 0, "", next(totals))

    monkeypatch.setenv("LIONMSG_TEST_MARK", "kept")
    monkeypatch.setattr(instructions.shutil, "which", lambda name: "/usr/bin/valgrind")
    monkeypatch.setattr(instructions.subprocess, "run", run)
    assert instructions.main(["lionmsg", "replace", "1000"]) == 0
    assert [env["PYTHONHASHSEED"] for env in environments] == ["0", "0"]
    assert all(env["LIONMSG_TEST_MARK"] == "kept" for env in environments)  # the rest of the environment too


def test_the_childs_randomness_comes_from_one_seed_and_is_given_back(monkeypatch: pytest.MonkeyPatch) -> None:
    # Fresh UUIDs come from os.urandom: the same bytes in both counted runs, so both build the same
    # history; the real source is restored when the child is done (here: for the rest of the session).
    real = instructions.os.urandom
    drawn: list[bytes] = []
    workloads = {"replace": lambda n: (drawn.append(instructions.os.urandom(16)), lambda: None)[1]}
    monkeypatch.setattr("bench.systems.lionmsg_side.WORKLOADS", workloads)
    assert instructions.main(["--child", "lionmsg", "replace", "50", "1"]) == 0
    assert instructions.main(["--child", "lionmsg", "replace", "50", "1"]) == 0
    assert drawn[0] == drawn[1]
    assert instructions.os.urandom is real


def test_a_failing_child_gives_its_randomness_back_too(monkeypatch: pytest.MonkeyPatch) -> None:
    real = instructions.os.urandom

    def refuse(n: int) -> None:
        raise RuntimeError("the workload failed to prepare")

    monkeypatch.setattr("bench.systems.lionmsg_side.WORKLOADS", {"replace": refuse})
    with pytest.raises(RuntimeError, match="the workload failed to prepare"):
        instructions.main(["--child", "lionmsg", "replace", "50", "1"])
    assert instructions.os.urandom is real
