"""One measurement in a fresh process: `python -m bench.worker SYSTEM WORKLOAD N --reps R --out FILE`.

The driver (`bench.run`) starts this under the system's own interpreter. It prepares the workload
(untimed), moves everything the preparation made out of the garbage collector's sight (so collections
during timing traverse only what the operation creates, for every system alike), runs the repetitions
(after a discarded warm-up when one repetition is short: see `harness.repeat`) and writes one JSON
document. A wrong result raises: the exit status is then non-zero and nothing is
written.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import platform
import statistics
import sys
from collections.abc import Callable, Mapping
from time import perf_counter
from typing import Any, cast

from bench import spec
from bench.harness import WorkloadFn, repeat


def metric_entry(unit: str, ops: int, samples: list[float]) -> dict[str, Any]:
    """One metric's samples with their median and, for times, the per-operation figures."""
    median = statistics.median(samples)
    entry: dict[str, Any] = {"unit": unit, "ops": ops, "samples": samples, "median": median}
    if unit == "s":
        entry["per_op_s"] = median / ops
        entry["ops_per_s"] = ops / median if median > 0 else None
    return entry


def measure(
    system: str,
    workload: str,
    n: int,
    reps: int,
    budget_s: float,
    min_time_s: float = 0.0,
    max_reps: int | None = None,
    last_metric: str | None = None,
) -> dict[str, Any]:
    load = os.getloadavg()  # other work on the machine distorts timings: recorded so the report can say so
    module = importlib.import_module(f"bench.systems.{system}_side")
    workloads = cast("Mapping[str, WorkloadFn]", module.WORKLOADS)
    describe = cast("Callable[[], dict[str, str]]", module.describe)
    started = perf_counter()
    if last_metric is None:
        rep = workloads[workload](n)
    elif spec.WORKLOADS_BY_NAME[workload].staged:
        rep = workloads[workload](n, last_metric=last_metric)
    else:
        raise ValueError(f"workload {workload!r} times its metrics together: it cannot stop after {last_metric!r}")
    setup_s = perf_counter() - started
    gc.collect()
    gc.freeze()
    warmup_below_s = spec.WARMUP_BELOW_S if spec.WORKLOADS_BY_NAME[workload].warmup else 0.0
    samples, walls, warmed = repeat(rep, reps, budget_s, warmup_below_s, min_time_s, max_reps)
    metrics = {}
    for name, values in samples.items():
        metric = spec.METRICS_BY_NAME[name]
        metrics[name] = metric_entry(metric.unit, metric.ops(n), values)
    return {
        "system": system,
        "workload": workload,
        "n": n,
        "reps_requested": reps,
        "reps": len(walls),
        "warmup_discarded": warmed,
        "setup_s": setup_s,
        "rep_wall_s": walls,
        "metrics": metrics,
        "loadavg": load,
        "python": platform.python_version(),
        "versions": describe(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("system", choices=spec.SYSTEMS)
    parser.add_argument("workload", choices=sorted(spec.WORKLOADS_BY_NAME))
    parser.add_argument("n", type=int)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--budget", type=float, default=40.0, help="stop repeating after this many seconds")
    parser.add_argument("--min-time", type=float, default=0.0, help="repeat past --reps until this many s were kept")
    parser.add_argument("--max-reps", type=int, help="the most repetitions --min-time may add up to")
    parser.add_argument("--last-metric", help="a staged workload's repetitions stop after this metric")
    parser.add_argument("--out", help="write the JSON result here (default: stdout)")
    args = parser.parse_args(argv)
    result = measure(
        args.system, args.workload, args.n, args.reps, args.budget, args.min_time, args.max_reps, args.last_metric
    )
    text = json.dumps(result)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            out.write(text)
    else:
        sys.stdout.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
