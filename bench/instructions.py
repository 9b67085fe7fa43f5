"""Instructions per operation, counted by valgrind: a measure the shared host's noise cannot move.

On the 2-core VM the same repetition's timing swings up to 2x between runs, so only changes worth 25% or
more show in a timed A/B. The number of machine instructions a repetition executes repeats to within ~1.5%
whatever else runs: it is the A/B measure for CPU work. It does not see memory effects (cache misses,
fresh pages), which the timed runs do, and instructions are not all equally fast, so it complements
`make bench` and never replaces it.

    .venv/bin/python -m bench.instructions lionmsg replace 1000
    .venv/bin/python -m bench.instructions lionagi dict_roundtrip 1000 --python .venv-bench/bin/python

Each count runs the workload's preparation and one warm-up repetition under cachegrind, once with no
further repetition and once with `--reps` more; the difference divided by the operations of those
repetitions is the cost of one operation, preparation and start-up cancelled out. A workload with two
metrics (the Exchange ones: send, then collect) is counted as a whole: per operation of its first
metric. Needs valgrind on PATH; runs about 50x slower than natively.

With `--misses` cachegrind also simulates the data caches and the count adds the L1 and last-level
data misses per operation: what the instruction count cannot see, and what makes an operation at
N=100,000 dearer than at N=1,000 (each last-level miss waits on memory, ~100 ns). The simulated last
level is 32 MiB (`--last-level`, in bytes), the host's L3 as `lscpu` reports it: this VM's CPUID
reports 256 MiB, which valgrind would take, and which holds a 100,000-message history whole. The counted
child runs without the cyclic collector there (a pass in one counted run and not the other moved the
difference by tens of misses per operation), so the misses leave its passes out: none in add-or-replace's
timed repetitions (`bench.profiling replace 100000 --gc`), a fifth or more of some workloads at 100,000
(the build and round-trip rows; see bench/README.md: growth with N). A child run also skips the interpreter's
teardown (`os._exit`): freeing the workload's history at exit is in neither count. Both counted runs
take their randomness from one seed (hash seed, `os.urandom` and so fresh UUIDs), so they lay out
their dicts alike; even so, a lionmsg count at 100,000 moves by a few misses per operation from one
invocation to the next, so count 10 repetitions there (`... replace 100000 10 --misses`: 18.2 and 19.1
last-level misses per add-or-replace at ae299a1 in two invocations, the floor's 61.3 in both). The
simulation does not rank the systems as the timed run does: the floor's add-or-replace, with three times
lionmsg's simulated misses, runs about twice as fast at 100,000.

    .venv/bin/python -m bench.instructions lionmsg replace 100000 10 --misses
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import random
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import NamedTuple, cast

from bench import spec
from bench.harness import WorkloadFn

__all__ = ["Counts", "count_events", "instructions_per_op", "parse_counts", "parse_total"]

# The host's L3 (lscpu): what a simulated last level holds by default (see the module's docstring).
LAST_LEVEL_BYTES = 32 * 1024 * 1024
_TOTAL = re.compile(r"I\s+refs:\s+([\d,]+)")
_L1_DATA_MISSES = re.compile(r"D1\s+misses:\s+([\d,]+)")
_LAST_LEVEL_DATA_MISSES = re.compile(r"LLd\s+misses:\s+([\d,]+)")


class Counts(NamedTuple):
    """What cachegrind counted in one run: instructions and, when it simulated the caches, data misses."""

    instructions: int
    l1_data_misses: int | None = None
    last_level_data_misses: int | None = None


def parse_total(report: str) -> int:
    """The total instruction count in cachegrind's summary (its stderr)."""
    found = _TOTAL.search(report)
    if found is None:
        raise ValueError("no instruction total ('I refs') in valgrind's output")
    return int(found.group(1).replace(",", ""))


def parse_counts(report: str, misses: bool) -> Counts:
    """The instruction total and, with `misses`, the data-miss totals (reads and writes) of the summary."""
    if not misses:
        return Counts(parse_total(report))
    l1, last_level = _L1_DATA_MISSES.search(report), _LAST_LEVEL_DATA_MISSES.search(report)
    if l1 is None or last_level is None:
        raise ValueError("no data-miss totals ('D1 misses', 'LLd misses') in valgrind's output")
    return Counts(parse_total(report), _number(l1), _number(last_level))


def _number(found: re.Match[str]) -> int:
    return int(found.group(1).replace(",", ""))


def instructions_per_op(without: int, with_reps: int, reps: int, ops: int) -> float:
    """What one operation costs: the extra instructions (or misses) of `reps` repetitions of `ops` operations each."""
    if reps <= 0 or ops <= 0:
        raise ValueError("reps and ops must be positive")
    return (with_reps - without) / (reps * ops)


def count_events(python: str, system: str, workload: str, n: int, reps: int, last_level: int | None = None) -> Counts:
    """What one child run under cachegrind executes (preparation, a warm-up and `reps` repetitions):
    instructions, and with a simulated last-level cache of `last_level` bytes the data misses too."""
    simulation = ["--cache-sim=no"] if last_level is None else ["--cache-sim=yes", f"--LL={last_level},16,64"]
    command = [
        "valgrind",
        "--tool=cachegrind",
        *simulation,
        "--cachegrind-out-file=/dev/null",
        python,
        "-m",
        "bench.instructions",
        "--child",
        system,
        workload,
        str(n),
        str(reps),
        *([] if last_level is None else ["--misses"]),
    ]
    # One hash seed for both counted runs (see _repeatable_randomness).
    environment = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=environment)
    if done.returncode != 0:
        raise RuntimeError(f"the counted run failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return parse_counts(done.stderr, misses=last_level is not None)


@contextmanager
def _repeatable_randomness() -> Iterator[None]:
    """`os.urandom` (fresh UUIDs, LionAGI's too) from one seed while the workload runs.

    The two counted runs are subtracted, so they must run the same program up to the extra repetitions.
    With fresh random ids (and, without PYTHONHASHSEED, fresh hash seeds) every dict of a history is laid
    out anew: at N=100,000 the preparation's last-level misses then differed between two runs by more
    than the repetitions make (a count of -186 misses per add-or-replace)."""
    urandom = os.urandom
    os.urandom = random.Random(0).randbytes
    try:
        yield
    finally:
        os.urandom = urandom


def _child(system: str, workload: str, n: int, reps: int, misses: bool = False) -> None:
    with _repeatable_randomness():
        # As bench.worker prepares a repetition: setup, then the preparation's objects frozen.
        module = importlib.import_module(f"bench.systems.{system}_side")
        rep = cast("Mapping[str, WorkloadFn]", module.WORKLOADS)[workload](n)
        gc.collect()
        gc.freeze()
        if misses:
            # A collector's pass in one counted run and not in the other moved the difference by tens of
            # misses per operation; the timed repetitions these counts explain run without one (at 100k
            # too: `bench.profiling replace 100000 --gc`).
            gc.disable()
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
    parser.add_argument("--misses", action="store_true", help="also simulate the data caches: misses per operation")
    parser.add_argument(
        "--last-level", type=int, default=None, help="with --misses: the simulated last level in bytes (32 MiB)"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.system, args.workload, args.n, args.reps, args.misses)
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not on PATH (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    metric = spec.WORKLOADS_BY_NAME[args.workload].metrics[0]
    if metric.unit != "s":
        print(f"{args.workload} measures {metric.unit}, not operations", file=sys.stderr)
        return 2
    if args.last_level is not None and not args.misses:
        parser.error("--last-level needs --misses")
    last_level = (LAST_LEVEL_BYTES if args.last_level is None else args.last_level) if args.misses else None
    # Misses: both runs make one repetition after the warm-up and only those after it count (the first
    # one's misses differ from the later ones').
    base = 1 if args.misses else 0
    without = count_events(args.python, args.system, args.workload, args.n, base, last_level)
    with_reps = count_events(args.python, args.system, args.workload, args.n, base + args.reps, last_level)
    print(describe(args.system, args.workload, args.n, without, with_reps, args.reps))
    return 0


def describe(system: str, workload: str, n: int, without: Counts, with_reps: Counts, reps: int) -> str:
    """The report line: each counted event per operation of the workload's first metric."""
    metric = spec.WORKLOADS_BY_NAME[workload].metrics[0]
    ops = metric.ops(n)

    def per_op(field: int) -> float:
        return instructions_per_op(cast(int, without[field]), cast(int, with_reps[field]), reps, ops)

    counted = f"{per_op(0):,.0f} instructions"
    if with_reps.last_level_data_misses is not None:
        counted += f", {per_op(1):,.1f} L1 and {per_op(2):,.1f} last-level data misses"
    return f"{system} {workload} N={n}: {counted} per operation ({metric.label})"


if __name__ == "__main__":
    status = main()
    if "--child" in sys.argv:
        # No interpreter teardown: it frees the workload's history, touching every message, and touches
        # more after repetitions that changed messages, so the two counted runs' teardowns would not
        # cancel out (about 37k last-level misses between a 100k history revised and one not).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)
