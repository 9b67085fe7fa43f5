"""Instructions per operation, counted by valgrind: a measure the shared host's noise cannot move.

On the 2-core VM the same repetition's timing swings up to 2x between runs, so only changes worth 25% or
more show in a timed A/B. The number of machine instructions a repetition executes repeats to within ~1.5%
(hash seeds and fresh UUIDs vary a little), whatever else runs: it is the A/B measure for CPU work. It
does not see memory effects (cache misses, fresh pages), which the timed runs do, and instructions are not
all equally fast, so it complements `make bench` and never replaces it.

    .venv/bin/python -m bench.instructions lionmsg replace 1000
    .venv/bin/python -m bench.instructions lionagi dict_roundtrip 1000 --python .venv-bench/bin/python

Each count runs the workload's preparation and one warm-up repetition under cachegrind, once with no
further repetition and once with `--reps` more; the difference divided by the operations of those
repetitions is the cost of one operation, preparation and start-up cancelled out. A workload with two
metrics (the Exchange ones: send, then collect) is counted as a whole: per operation of its first
metric. Needs valgrind on PATH; runs about 50x slower than natively.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import cast

from bench import spec
from bench.harness import WorkloadFn

__all__ = ["count_instructions", "instructions_per_op", "parse_total"]

_TOTAL = re.compile(r"I\s+refs:\s+([\d,]+)")


def parse_total(report: str) -> int:
    """The total instruction count in cachegrind's summary (its stderr)."""
    found = _TOTAL.search(report)
    if found is None:
        raise ValueError("no instruction total ('I refs') in valgrind's output")
    return int(found.group(1).replace(",", ""))


def instructions_per_op(without: int, with_reps: int, reps: int, ops: int) -> float:
    """What one operation costs: the extra instructions of `reps` repetitions of `ops` operations each."""
    if reps <= 0 or ops <= 0:
        raise ValueError("reps and ops must be positive")
    return (with_reps - without) / (reps * ops)


def count_instructions(python: str, system: str, workload: str, n: int, reps: int) -> int:
    """Instructions of one child run under cachegrind: preparation, a warm-up and `reps` repetitions."""
    command = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        python,
        "-m",
        "bench.instructions",
        "--child",
        system,
        workload,
        str(n),
        str(reps),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the counted run failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return parse_total(done.stderr)


def _child(system: str, workload: str, n: int, reps: int) -> None:
    # As bench.worker prepares a repetition: setup, then the preparation's objects frozen.
    module = importlib.import_module(f"bench.systems.{system}_side")
    rep = cast("Mapping[str, WorkloadFn]", module.WORKLOADS)[workload](n)
    gc.collect()
    gc.freeze()
    rep()  # the warm-up: first-call costs are in both counts, so they cancel out
    for _ in range(reps):
        rep()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__.split("\n")[0])
    parser.add_argument("system", choices=spec.SYSTEMS)
    parser.add_argument("workload", choices=sorted(spec.WORKLOADS_BY_NAME))
    parser.add_argument("n", type=int)
    parser.add_argument("reps", type=int, nargs="?", default=2, help="repetitions counted (default 2)")
    parser.add_argument("--python", default=sys.executable, help="the system's interpreter (LionAGI: .venv-bench)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.system, args.workload, args.n, args.reps)
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not on PATH (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    metric = spec.WORKLOADS_BY_NAME[args.workload].metrics[0]
    if metric.unit != "s":
        print(f"{args.workload} measures {metric.unit}, not operations", file=sys.stderr)
        return 2
    without = count_instructions(args.python, args.system, args.workload, args.n, 0)
    with_reps = count_instructions(args.python, args.system, args.workload, args.n, args.reps)
    per_op = instructions_per_op(without, with_reps, args.reps, metric.ops(args.n))
    print(f"{args.system} {args.workload} N={args.n}: {per_op:,.0f} instructions per operation ({metric.label})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
