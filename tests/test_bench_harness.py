"""The benchmark harness (bench/harness.py, bench/spec.py): the repetitions a worker keeps, what each probes."""

from __future__ import annotations

from bench import spec
from bench.harness import Rep, Timings, repeat


def _counting_rep() -> tuple[list[int], Rep]:
    calls: list[int] = []

    def rep() -> Timings:
        calls.append(len(calls))
        return {"op": float(len(calls))}

    return calls, rep


def test_a_fixed_count_runs_that_many_after_discarding_a_short_first_one() -> None:
    calls, rep = _counting_rep()
    samples, walls, warmed = repeat(rep, reps=3, budget_s=60.0)
    assert warmed is True
    assert len(calls) == 4
    assert samples == {"op": [2.0, 3.0, 4.0]}  # the first call (the warm-up) is not among them
    assert len(walls) == 3


def test_short_repetitions_go_on_until_the_minimum_time_or_the_cap() -> None:
    _, rep = _counting_rep()
    # Each repetition takes microseconds: 60 s are never reached, so the cap decides.
    samples, walls, _ = repeat(rep, reps=3, budget_s=60.0, min_time_s=60.0, max_reps=9)
    assert len(walls) == 9
    assert samples["op"] == [float(k) for k in range(2, 11)]


def test_without_a_cap_the_minimum_time_adds_nothing() -> None:
    _, rep = _counting_rep()
    _, walls, _ = repeat(rep, reps=3, budget_s=60.0, min_time_s=60.0)
    assert len(walls) == 3


def test_a_cap_below_the_count_does_not_cut_the_count() -> None:
    _, rep = _counting_rep()
    _, walls, _ = repeat(rep, reps=4, budget_s=60.0, min_time_s=60.0, max_reps=2)
    assert len(walls) == 4


def test_the_budget_stops_a_worker_after_its_first_kept_repetition() -> None:
    _, rep = _counting_rep()
    _, walls, _ = repeat(rep, reps=5, budget_s=0.0, min_time_s=60.0, max_reps=50)
    assert len(walls) == 1


def test_each_repetition_probes_fresh_positions_the_same_for_every_system() -> None:
    # Probing the previous repetition's positions again would find them in the CPU caches.
    first, second = spec.fresh_indices(100_000, 2_000, "lookup"), spec.fresh_indices(100_000, 2_000, "lookup")
    draws = [next(first) for _ in range(3)]
    assert draws == [next(second) for _ in range(3)]  # seeded: every system's worker gets the same draws
    assert all(len(draw) == 2_000 and all(0 <= i < 100_000 for i in draw) for draw in draws)
    assert len({tuple(draw) for draw in draws}) == 3
    assert len(set(draws[0]) & set(draws[1])) < 100  # ~40 shared of 2,000 by chance
