"""The benchmark driver's interleaved rounds (bench/run.py): who runs when, and how rounds are pooled."""

from __future__ import annotations

import statistics
from typing import Any

import pytest

from bench import run, spec
from bench.worker import metric_entry


def _settings(rounds: int, sizes: tuple[int, ...] = (1000, 10000)) -> run.Settings:
    return run.Settings(
        sizes=sizes,
        reps=5,
        reps_largest=3,
        min_time_s=1.0,
        max_reps=50,
        rounds=rounds,
        budget_s=30.0,
        max_rep_s=200.0,
        timeout_s=600.0,
        pythons={},
    )


def _result(samples: list[float], **extra: Any) -> dict[str, Any]:
    """A worker's result for one round (bench.worker's shape), per-op figures from its own median."""
    median = statistics.median(samples)
    metric = {"unit": "s", "ops": 1000, "samples": samples, "median": median}
    metric.update(per_op_s=median / 1000, ops_per_s=1000 / median)
    return {
        "reps_requested": 2,
        "reps": len(samples),
        "warmup_discarded": False,
        "setup_s": 0.5,
        "rep_wall_s": samples,
        "loadavg": [0.5, 0.5, 0.5],
        "metrics": {"replace": metric},
        **extra,
    }


def _record(samples: list[float], **extra: Any) -> dict[str, Any]:
    result = _result(samples, **extra)
    return {"workload": "replace", "system": "lionmsg", "n": 1000, "status": "ok", "reason": "", "result": result}


def test_rounds_pool_the_samples_and_take_the_median_of_the_pool() -> None:
    merged = run.merge_rounds(
        [
            {**_record([3.0, 4.0], loadavg=[0.2, 0.1, 0.1]), "wall_s": 1.0},
            {**_record([1.0, 9.0], warmup_discarded=True, loadavg=[0.9, 0.5, 0.4]), "wall_s": 2.0},
            {**_record([2.0, 5.0], setup_s=0.7), "wall_s": 3.0},
        ]
    )
    result = merged["result"]
    metric = result["metrics"]["replace"]
    assert metric["samples"] == [3.0, 4.0, 1.0, 9.0, 2.0, 5.0]
    assert metric["median"] == 3.5
    assert metric["per_op_s"] == 3.5 / 1000
    assert metric["ops_per_s"] == 1000 / 3.5
    assert (result["rounds"], result["reps"], result["reps_requested"]) == (3, 6, 6)
    assert result["warmup_discarded"] is True
    assert result["setup_s"] == 0.5
    assert result["rep_wall_s"] == [3.0, 4.0, 1.0, 9.0, 2.0, 5.0]
    assert result["loadavg"] == [0.9, 0.5, 0.4]  # the busiest start is the one worth reporting
    assert merged["wall_s"] == 6.0
    assert merged["status"] == "ok"


def test_a_round_that_did_not_measure_stands_for_the_cell() -> None:
    failed = {"workload": "replace", "system": "lionmsg", "n": 1000, "status": "error", "reason": "exit 1: boom"}
    assert run.merge_rounds([{**_record([1.0]), "wall_s": 1.0}, failed]) is failed
    single = {**_record([1.0]), "wall_s": 1.0}
    assert run.merge_rounds([single]) is single


def _fake_workers(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int, Any]]:
    calls: list[tuple[str, int, int, Any]] = []

    def fake(
        system: str, workload: str, n: int, reps: int, share: Any, settings: run.Settings, last_metric: Any = None
    ) -> dict[str, Any]:
        assert last_metric is None
        calls.append((system, n, reps, share))
        record = _record([0.001 * n] * reps)
        return {**record, "workload": workload, "system": system, "n": n, "wall_s": 0.1}

    monkeypatch.setattr(run, "_run_worker", fake)
    return calls


def test_systems_take_turns_in_rotated_rounds_sharing_the_repetitions(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_workers(monkeypatch)
    systems = ["lionmsg", "lionagi", "floor"]
    records = run._workload_runs(spec.WORKLOADS_BY_NAME["replace"], systems, _settings(rounds=3))
    order = [(system, n) for system, n, _, _ in calls]
    assert order == [
        *[("lionmsg", 1000), ("lionagi", 1000), ("floor", 1000)],
        *[("lionagi", 1000), ("floor", 1000), ("lionmsg", 1000)],
        *[("floor", 1000), ("lionmsg", 1000), ("lionagi", 1000)],
        *[("lionmsg", 10000), ("lionagi", 10000), ("floor", 10000)],
        *[("lionagi", 10000), ("floor", 10000), ("lionmsg", 10000)],
        *[("floor", 10000), ("lionmsg", 10000), ("lionagi", 10000)],
    ]
    # 5 repetitions (3 at the largest N) in three rounds: 2 (1) each, and a third of the time budget.
    assert {(n, reps) for _, n, reps, _ in calls} == {(1000, 2), (10000, 1)}
    assert {share for _, _, _, share in calls} == {run._Share(reps, 10.0) for reps in (1, 2)}
    assert [(r["system"], r["n"], r["result"]["rounds"]) for r in records] == [
        (system, n, 3) for system in systems for n in (1000, 10000)
    ]


def test_a_fixed_count_workload_runs_once_per_size(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_workers(monkeypatch)
    run._workload_runs(spec.WORKLOADS_BY_NAME["memory"], ["lionmsg", "floor"], _settings(rounds=3))
    assert calls == [("lionmsg", 10000, 1, None), ("floor", 10000, 1, None)]


def test_a_skipped_system_is_not_retried_in_later_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_workers(monkeypatch)
    settings = _settings(rounds=3, sizes=(10, 1_000_000))
    records = run._workload_runs(spec.WORKLOADS_BY_NAME["replace"], ["lionmsg"], settings)
    # Half a second at N=10 (setup and a repetition) projects past the 200 s limit at N=1,000,000:
    # the size is skipped once, not once per round.
    assert [n for _, n, _, _ in calls] == [10, 10, 10]
    assert [(r["n"], r["status"]) for r in records] == [(10, "ok"), (1_000_000, "skipped")]


def _staged_workers(monkeypatch: pytest.MonkeyPatch, per_message: dict[str, float]) -> list[tuple[int, Any]]:
    """Workers of the broadcast workload whose send and collection take `per_message` seconds a message;
    a repetition stopped after a metric reports only the metrics up to it."""
    calls: list[tuple[int, Any]] = []
    names = [metric.name for metric in spec.WORKLOADS_BY_NAME["exchange_broadcast"].metrics]

    def fake(
        system: str, workload: str, n: int, reps: int, share: Any, settings: run.Settings, last_metric: Any = None
    ) -> dict[str, Any]:
        calls.append((n, last_metric))
        timed = names if last_metric is None else names[: names.index(last_metric) + 1]
        result = _result([sum(per_message[name] for name in timed) * n] * reps, setup_s=0.0)
        result["metrics"] = {name: metric_entry("s", n, [per_message[name] * n] * reps) for name in timed}
        record = {"workload": workload, "system": system, "n": n, "status": "ok", "reason": "", "result": result}
        return {**record, "wall_s": 0.1}

    monkeypatch.setattr(run, "_run_worker", fake)
    return calls


def test_a_staged_repetition_too_slow_as_a_whole_still_times_its_first_metric(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # LionAGI's broadcast at 100k: the collection alone is projected at minutes, the send at seconds.
    per_message = {"exchange_broadcast_send": 0.0001, "exchange_broadcast_collect": 0.01}
    calls = _staged_workers(monkeypatch, per_message)
    settings = _settings(rounds=1, sizes=(1_000, 10_000, 100_000, 1_000_000))
    records = run._workload_runs(spec.WORKLOADS_BY_NAME["exchange_broadcast"], ["lionagi"], settings)
    # 10.1 s at 1k and 101 s at 10k as a whole; 1,010 s projected at 100k, its send 10 s.
    assert calls == [
        (1_000, None),
        (10_000, None),
        (100_000, "exchange_broadcast_send"),
        (1_000_000, "exchange_broadcast_send"),
    ]
    by_n = {record["n"]: record for record in records}
    assert "unmeasured" not in by_n[10_000]
    assert by_n[100_000]["unmeasured"] == {
        "metrics": ["exchange_broadcast_collect"],
        "reason": "projected 1.01e+03 s per repetition > 200 s limit; repetitions stopped after "
        "Exchange send, broadcast (10 owners)",
    }
    # A size after one cut short is cut short too, whatever the (now stale) whole-repetition points say.
    assert by_n[1_000_000]["unmeasured"]["reason"] == (
        "N=100,000 was too slow for a whole repetition; repetitions stopped after Exchange send, broadcast (10 owners)"
    )
    assert list(by_n[100_000]["result"]["metrics"]) == ["exchange_broadcast_send"]


def test_a_staged_repetition_whose_first_metric_is_too_slow_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    per_message = {"exchange_broadcast_send": 0.005, "exchange_broadcast_collect": 0.005}
    calls = _staged_workers(monkeypatch, per_message)
    settings = _settings(rounds=1, sizes=(1_000, 10_000, 100_000))
    records = run._workload_runs(spec.WORKLOADS_BY_NAME["exchange_broadcast"], ["lionagi"], settings)
    assert calls == [(1_000, None), (10_000, None)]  # 100 s at 10k: its send alone projects to 500 s
    assert records[-1]["status"] == "skipped"
    assert records[-1]["reason"] == "projected 1e+03 s per repetition > 200 s limit"


def test_a_cut_short_lionmsg_cell_fails_the_run_and_says_what_was_not_timed() -> None:
    unmeasured = {"metrics": ["exchange_broadcast_collect"], "reason": "projected 600 s per repetition"}
    cut = {"workload": "exchange_broadcast", "system": "lionmsg", "n": 100000, "status": "ok", "reason": ""}
    cut["unmeasured"] = unmeasured
    other = {**cut, "system": "lionagi"}
    assert run.failed_cells([cut, other], smoke=False) == [cut]
    assert run.failed_cells([cut, other], smoke=True) == [cut, other]
    # Review ct 4: it printed "ok: " with an empty reason.
    assert run.failure_line(cut) == (
        "FAILED exchange_broadcast lionmsg N=100000: cut short, exchange_broadcast_collect not timed: "
        "projected 600 s per repetition"
    )
    killed = {**cut, "status": "timeout", "reason": "killed after 600 s"}
    assert run.failure_line(killed) == "FAILED exchange_broadcast lionmsg N=100000: timeout: killed after 600 s"


def test_a_shortened_repetition_is_projected_with_its_untimed_part() -> None:
    # Review ct 5: the checks and clean-up of a repetition (here 4 of its 10 s) were left out; review cu 6:
    # all of them, though the send is a sixth of the timed work, made the projection ~3x too long.
    result = _result([10.0], setup_s=0.5)
    result["metrics"] = {
        "exchange_broadcast_send": metric_entry("s", 1000, [1.0]),
        "exchange_broadcast_collect": metric_entry("s", 1000, [5.0]),
    }
    done = [{"workload": "exchange_broadcast", "system": "lionagi", "n": 1000, "status": "ok", "result": result}]
    assert run._project(done, 1000) == 10.5
    assert run._project(done, 2000, ["exchange_broadcast_send"]) == pytest.approx(2 * (0.5 + 1.0 + 4.0 / 6))
