"""bench/instructions.py: reading valgrind's total, the per-operation arithmetic, and the counted child run
(valgrind itself is a developer tool, not a test dependency: the child runs here without it)."""

from __future__ import annotations

import pytest

from bench import instructions

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
