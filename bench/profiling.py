"""`python -m bench.profiling WORKLOAD [N] [--system lionmsg] [--top 20]`: where one repetition spends its time.

Prepares the workload as the benchmark does (untimed), runs one warm-up repetition, then one under
cProfile, and prints the functions with the largest share of the repetition: by time spent in the
function itself and by cumulative time (itself plus what it calls). cProfile inflates the cost of every
Python-level call, so read the shares as where to look, and confirm with an unprofiled measurement.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib
import pstats
import sys
from collections.abc import Mapping
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("workload", choices=sorted(spec.WORKLOADS_BY_NAME))
    parser.add_argument("n", type=int, nargs="?", default=10_000)
    parser.add_argument("--system", choices=spec.SYSTEMS, default="lionmsg")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args(argv)
    module = importlib.import_module(f"bench.systems.{args.system}_side")
    rep = cast("Mapping[str, WorkloadFn]", module.WORKLOADS)[args.workload](args.n)
    rep()  # warm caches and first-call paths so the profile shows the steady state
    gc.collect()
    gc.freeze()
    profiler = cProfile.Profile()
    profiler.enable()
    timings = rep()
    profiler.disable()
    print(f"{args.system} {args.workload} N={args.n:,}: {timings} (seconds, under the profiler)")
    print("\n".join(shares(profiler, args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
