"""`python -m bench.profiling WORKLOAD [N] [--system lionmsg] [--top 20] [--gc]`: where one repetition spends its time.

Prepares the workload as the benchmark does (untimed), runs one warm-up repetition, then one under
cProfile, and prints the functions with the largest share of the repetition: by time spent in the
function itself and by cumulative time (itself plus what it calls). cProfile inflates the cost of every
Python-level call, so read the shares as where to look, and confirm with an unprofiled measurement.

With `--gc` the repetition runs unprofiled and the garbage collector's passes are counted instead: per
generation, how many ran and how long they took (through `gc.callbacks`). A full (generation 2) pass
walks every tracked object made since the preparation, so its cost grows with N where the
operation's own does not: it is what makes per-operation costs at N=100,000 exceed those at N=1,000.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib
import pstats
import sys
from collections.abc import Mapping
from time import perf_counter
from types import TracebackType
from typing import Any, cast

from bench import spec
from bench.harness import WorkloadFn


def _name(key: tuple[str, int, str]) -> str:
    filename, line, function = key
    if filename == "~":  # built-ins
        return function
    return f"{filename.rsplit('/', 1)[-1]}:{line}({function})"


def shares(profiler: cProfile.Profile, top: int) -> list[str]:
    """Lines of `own% cum% calls function` for the top functions by own and by cumulative time."""
    stats = pstats.Stats(profiler)
    table = cast("dict[tuple[str, int, str], tuple[Any, ...]]", stats.stats)  # type: ignore[attr-defined]
    total = max(sum(entry[2] for entry in table.values()), 1e-12)  # sum of own times = profiled time
    rows = [(key, calls, own, cumulative) for key, (_, calls, own, cumulative, _) in table.items()]
    lines = []
    for title, index in (("by own time", 2), ("by cumulative time", 3)):
        lines.append(f"\n{title}:   own%   cum%      calls  function")
        for key, calls, own, cumulative in sorted(rows, key=lambda row: row[index], reverse=True)[:top]:
            lines.append(f"{'':>14}{own / total:6.1%} {cumulative / total:6.1%} {calls:>10,}  {_name(key)}")
    return lines


class GcTally:
    """The collector's passes while it is entered (a `gc.callbacks` entry): per generation, how many
    ran and the seconds they took."""

    def __init__(self) -> None:
        self.passes = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = perf_counter()
        else:
            generation = info["generation"]
            self.passes[generation] += 1
            self.seconds[generation] += perf_counter() - self._started

    def __enter__(self) -> GcTally:
        gc.callbacks.append(self)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        gc.callbacks.remove(self)

    def lines(self, total_s: float, ops: int) -> list[str]:
        """One line per generation: passes, milliseconds, share of `total_s`, microseconds per op."""
        lines = ["generation  passes        ms   share  µs/op"]
        for generation, (passes, seconds) in enumerate(zip(self.passes, self.seconds, strict=True)):
            share = seconds / total_s if total_s > 0 else 0.0
            per_op_us = seconds / ops * 1e6
            lines.append(f"{generation:>10} {passes:>7} {seconds * 1e3:>9.1f} {share:>7.1%} {per_op_us:>6.2f}")
        return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("workload", choices=sorted(spec.WORKLOADS_BY_NAME))
    parser.add_argument("n", type=int, nargs="?", default=10_000)
    parser.add_argument("--system", choices=spec.SYSTEMS, default="lionmsg")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--gc", action="store_true", help="count the garbage collector's passes instead")
    args = parser.parse_args(argv)
    module = importlib.import_module(f"bench.systems.{args.system}_side")
    rep = cast("Mapping[str, WorkloadFn]", module.WORKLOADS)[args.workload](args.n)
    rep()  # warm caches and first-call paths so the profile shows the steady state
    gc.collect()
    gc.freeze()
    if args.gc:
        with GcTally() as tally:
            started = perf_counter()
            timings = rep()
            wall = perf_counter() - started
        ops = spec.METRICS_BY_NAME[next(iter(timings))].ops(args.n)
        print(f"{args.system} {args.workload} N={args.n:,}: {timings} (seconds); the garbage collector:")
        print("\n".join(tally.lines(sum(timings.values()), ops)))
        print(f"(shares of the timed {sum(timings.values()):.3f} s; the repetition took {wall:.3f} s with its checks)")
        return 0
    profiler = cProfile.Profile()
    profiler.enable()
    timings = rep()
    profiler.disable()
    print(f"{args.system} {args.workload} N={args.n:,}: {timings} (seconds, under the profiler)")
    print("\n".join(shares(profiler, args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
