"""Timing and memory helpers shared by every system's workloads (standard library only)."""

from __future__ import annotations

import asyncio
import gc
import os
import tracemalloc
from collections.abc import Callable, Coroutine
from time import perf_counter
from typing import Any, TypeVar

__all__ = [
    "Rep",
    "Timings",
    "WorkloadError",
    "WorkloadFn",
    "expect",
    "memory_per_item",
    "repeat",
    "run_coroutine",
]

T = TypeVar("T")

Timings = dict[str, float]
"""One repetition's measurements: metric name -> seconds (or bytes, for memory metrics)."""

Rep = Callable[[], Timings]
"""One repetition of a prepared workload: it times only the operation and verifies the result."""

WorkloadFn = Callable[..., Rep]
"""Prepare a workload at N (inputs, untimed state) and return its repetition: `fn(n)`, and for a staged
workload (`spec.Workload.staged`) `fn(n, last_metric=name)`, a repetition that stops after that metric."""


class WorkloadError(Exception):
    """A workload produced a wrong result: its timings must not be reported."""


def expect(condition: bool, what: str) -> None:
    if not condition:
        raise WorkloadError(what)


def repeat(
    rep: Rep,
    reps: int,
    budget_s: float,
    warmup_below_s: float = 5.0,
    min_time_s: float = 0.0,
    max_reps: int | None = None,
) -> tuple[dict[str, list[float]], list[float], bool]:
    """Run `rep` `reps` times; stop early (after at least one) once `budget_s` of wall time is spent.

    Short repetitions go on past `reps` until the kept ones add up to `min_time_s` (or `max_reps` were
    kept): a median of five repetitions of a few milliseconds each follows the machine's moods of the
    moment (on the shared host timings of identical repetitions drift by 2x and more), one of many does not.

    A first repetition shorter than `warmup_below_s` is discarded as a warm-up: first-call costs (lazy
    imports, caches, cold memory) are fixed, so they distort short repetitions and not long ones, and
    repeating a long one would only cost time. Returns the samples, the wall time of each kept
    repetition, and whether a warm-up was discarded.

    Every repetition starts from a collected heap, so garbage from the previous one is not charged to it.
    The garbage collector stays enabled while timing: collections the operation triggers are its cost.
    """
    samples: dict[str, list[float]] = {}
    walls: list[float] = []
    warmed = False
    limit = max(reps, max_reps or reps)
    while len(walls) < reps or (len(walls) < limit and sum(walls) < min_time_s):
        gc.collect()
        start = perf_counter()
        measured = rep()
        wall = perf_counter() - start
        if not warmed and not walls and wall < warmup_below_s:
            warmed = True
            continue
        for name, value in measured.items():
            samples.setdefault(name, []).append(value)
        walls.append(wall)
        if sum(walls) >= budget_s:
            break
    return samples, walls, warmed


def run_coroutine(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine on a fresh event loop. Making and closing the loop (~36 µs) falls inside a timed
    region where the caller times the call (the Exchange collect), the same for every system."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(make())
    finally:
        loop.close()


def rss_bytes() -> int | None:
    """Resident set size from /proc (Linux); None elsewhere."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def memory_per_item(build: Callable[[], Any], count: int, check: Callable[[Any], None]) -> Timings:
    """Bytes per stored item of what `build()` returns and keeps alive, measured twice.

    `memory_rss`: the growth of the resident set across a first build (includes allocator slack and
    any memory held outside Python's allocator). `memory_traced`: the bytes still allocated through
    Python's allocator after a second build under tracemalloc (exact for Python objects; temporaries
    freed during the build are not counted). The RSS build comes first so tracemalloc's own
    bookkeeping does not inflate it.
    """
    gc.collect()
    before = rss_bytes()
    held = build()
    after = rss_bytes()
    check(held)
    del held
    gc.collect()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        held = build()
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()
    check(held)
    result: Timings = {"memory_traced": traced / count}
    if before is not None and after is not None:
        result["memory_rss"] = (after - before) / count
    return result
