"""The benchmark driver: `python -m bench.run` (what `make bench` and `make bench-smoke` call).

For every (workload, system, N) it starts a fresh worker process under that system's interpreter
(lionmsg and the floor under this one, LionAGI under `--lionagi-python`), collects the JSON it writes,
then writes `latest.json`, `latest.md` (also printed) and `cost_vs_n.png` (drawn by `bench.plot` under
`--plot-python`, the environment that has matplotlib). Sizes run in ascending order, every system at
one size before the next size. At each size the systems take turns in `--rounds` rounds (a fresh
worker each, its share of the repetitions, the order rotated every round) whose samples are pooled, so
a slow spell of the shared host falls on every system alike instead of on whichever ran during it
(identical repetitions here drift by 2x between spells lasting seconds to minutes). A system's size
whose projected cost (from its smaller sizes) exceeds
`--max-rep` seconds is skipped, and a worker that outlives `--timeout` is killed: both show as "—" with
a footnote, so a slow system never hangs the run. A staged workload (the Exchange's send, then collect)
too slow as a whole at a size has the metrics that fit timed alone there (`--last-metric`).
Exits non-zero when a workload fails, when a lionmsg cell is not measured (skipped as too slow, killed,
cut short),
when the plot cannot be drawn, or, with `--smoke`, when any system's cell is not measured.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench import report, spec
from bench.worker import metric_entry

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
LIONAGI_PYTHON_ENV = "LIONMSG_BENCH_LIONAGI_PYTHON"


@dataclass(frozen=True)
class Settings:
    sizes: tuple[int, ...]
    reps: int
    reps_largest: int
    min_time_s: float
    max_reps: int
    rounds: int
    budget_s: float
    max_rep_s: float
    timeout_s: float
    pythons: dict[str, str]


@dataclass(frozen=True)
class _Share:
    """One round's part of a cell: its repetitions and time budget. Short repetitions are still
    extended per worker to `--min-time` (each fresh process starts cold: see bench/README.md)."""

    reps: int
    budget_s: float


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help=f"N={spec.SMOKE_SIZE}, one repetition, into results/smoke")
    parser.add_argument("--sizes", type=int, nargs="+", help=f"default {' '.join(map(str, spec.SIZES))}")
    parser.add_argument("--reps", type=int, default=5, help="repetitions per system and size, over the rounds (5)")
    parser.add_argument("--reps-largest", type=int, default=3, help="repetitions at the largest size (default 3)")
    parser.add_argument(
        "--min-time", type=float, default=1.0, help="short repetitions go on until this many s were kept (default 1)"
    )
    parser.add_argument("--max-reps", type=int, default=50, help="the most repetitions --min-time adds up to (50)")
    parser.add_argument(
        "--rounds", type=int, default=3, help="interleaved rounds per size, repetitions shared among them (3)"
    )
    parser.add_argument("--systems", nargs="+", choices=spec.SYSTEMS, default=list(spec.SYSTEMS))
    parser.add_argument("--workloads", nargs="+", choices=[w.name for w in spec.WORKLOADS])
    parser.add_argument(
        "--lionagi-python", default=os.environ.get(LIONAGI_PYTHON_ENV), help=f"or ${LIONAGI_PYTHON_ENV}"
    )
    parser.add_argument("--plot-python", help="an interpreter with matplotlib (default: the LionAGI one)")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument(
        "--out", type=Path, help="results directory (default bench/results, smoke: bench/results/smoke)"
    )
    parser.add_argument("--budget", type=float, default=40.0, help="a worker stops repeating after this many s")
    parser.add_argument("--max-rep", type=float, default=200.0, help="skip a size projected to need more s per rep")
    parser.add_argument("--timeout", type=float, default=600.0, help="kill a worker after this many s")
    parser.add_argument("--jobs", type=int, help="workers at once (default 1; smoke 2): timing wants 1")
    return parser.parse_args(argv)


def _project(done: list[dict[str, Any]], n: int, metrics: list[str] | None = None) -> float | None:
    """Seconds one repetition (plus setup) would take at n, extrapolated from the measured sizes; with
    `metrics`, a repetition that times only those (from the sizes where each of them was timed)."""
    points = []
    for record in done:
        if record["status"] != "ok":
            continue
        result = record["result"]
        if metrics is None:
            if "unmeasured" in record:
                continue  # its repetitions stopped early: their wall time is not a whole one's
            points.append((record["n"], result["setup_s"] + min(result["rep_wall_s"])))
        elif all(name in result["metrics"] for name in metrics):
            timed = sum(min(result["metrics"][name]["samples"]) for name in metrics)
            # The repetition's untimed part too (its checks, dropping what it made), in proportion to
            # the share of the timed work kept: a whole one's checks read what its later metrics made.
            every = sum(min(metric["samples"]) for metric in result["metrics"].values())
            untimed = max(0.0, min(result["rep_wall_s"]) - every) * (timed / every if every > 0 else 1.0)
            points.append((record["n"], result["setup_s"] + timed + untimed))
    if not points:
        return None
    (n1, c1), exponent = points[-1], 1.0
    if len(points) >= 2:
        n0, c0 = points[-2]
        if c0 > 0 and c1 > 0 and n1 > n0:
            exponent = min(3.0, max(1.0, math.log(c1 / c0) / math.log(n1 / n0)))
    return float(c1 * (n / n1) ** exponent)


def _run_worker(
    system: str,
    workload: str,
    n: int,
    reps: int,
    share: _Share | None,
    settings: Settings,
    last_metric: str | None = None,
) -> dict[str, Any]:
    """One worker process; `share` None: a fixed count of repetitions (memory: deterministic, one);
    `last_metric`: a staged workload's repetitions stop after it."""
    record: dict[str, Any] = {"workload": workload, "system": system, "n": n, "status": "ok", "reason": ""}
    with tempfile.TemporaryDirectory(prefix="lionmsg-bench-") as tmp:
        out = Path(tmp) / "result.json"
        command = [settings.pythons[system], "-m", "bench.worker", system, workload, str(n)]
        command += ["--reps", str(reps), "--out", str(out)]
        if last_metric is not None:
            command += ["--last-metric", last_metric]
        if share is None:
            command += ["--budget", str(settings.budget_s)]
        else:
            command += ["--budget", str(share.budget_s), "--min-time", str(settings.min_time_s)]
            command += ["--max-reps", str(settings.max_reps)]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        started = time.perf_counter()
        try:
            done = subprocess.run(
                command, cwd=REPO, env=env, capture_output=True, text=True, timeout=settings.timeout_s, check=False
            )
        except subprocess.TimeoutExpired:
            record.update(status="timeout", reason=f"killed after {settings.timeout_s:.0f} s")
        except OSError as error:  # the interpreter cannot be started
            record.update(status="error", reason=f"cannot run {command[0]}: {error}")
        else:
            if done.returncode != 0:
                tail = "\n".join(done.stderr.strip().splitlines()[-12:])
                record.update(status="error", reason=f"exit {done.returncode}: {tail}")
            else:
                record["result"] = json.loads(out.read_text(encoding="utf-8"))
        record["wall_s"] = time.perf_counter() - started
    return record


def _workload_runs(workload: spec.Workload, systems: list[str], settings: Settings) -> list[dict[str, Any]]:
    """Every system at one N, in interleaved rounds, then every system at the next N: the workers whose
    times a ratio divides run side by side, so a drift of the shared host between them stays small."""
    sizes = settings.sizes[-1:] if workload.largest_only else settings.sizes
    rounds = 1 if workload.reps is not None else settings.rounds  # a fixed count (memory) is deterministic
    done: dict[str, list[dict[str, Any]]] = {system: [] for system in systems}
    for n in sizes:
        turns: dict[str, list[dict[str, Any]]] = {system: [] for system in systems}
        for round_index in range(rounds):
            for system in systems[round_index % len(systems) :] + systems[: round_index % len(systems)]:
                if turns[system] and turns[system][-1]["status"] != "ok":
                    continue  # skipped or failed: the other rounds would only repeat it
                record = _next_size(workload, system, n, done[system], rounds, settings)
                _log(record)
                turns[system].append(record)
        for system in systems:
            done[system].append(merge_rounds(turns[system]))
    return [record for records in done.values() for record in records]


def merge_rounds(records: list[dict[str, Any]]) -> dict[str, Any]:
    """One system's workers at one N as one record: samples pooled, medians over the pool. A round
    that did not measure (skipped, failed) stands for the whole."""
    failed = next((record for record in records if record["status"] != "ok"), None)
    if failed is not None or len(records) == 1:
        return failed or records[0]
    results = [record["result"] for record in records]
    metrics: dict[str, Any] = {}
    for name, first in results[0]["metrics"].items():
        samples = [value for result in results for value in result["metrics"][name]["samples"]]
        metrics[name] = metric_entry(first["unit"], first["ops"], samples)
    merged = {
        **results[0],
        "rounds": len(results),
        "reps_requested": sum(result["reps_requested"] for result in results),
        "reps": sum(result["reps"] for result in results),
        "warmup_discarded": any(result["warmup_discarded"] for result in results),
        "setup_s": statistics.median(result["setup_s"] for result in results),
        "rep_wall_s": [wall for result in results for wall in result["rep_wall_s"]],
        "loadavg": max((result["loadavg"] for result in results), key=lambda load: load[0]),
        "metrics": metrics,
    }
    return {**records[0], "result": merged, "wall_s": sum(record["wall_s"] for record in records)}


def failed_cells(records: list[dict[str, Any]], smoke: bool) -> list[dict[str, Any]]:
    """The cells that fail a run: any system's error, and a lionmsg cell left unmeasured (skipped as too
    slow, killed, or cut short: some of its metrics not timed), which the report counts as a miss; in a
    smoke run, anything not measured. Another system too slow at the largest size (LionAGI's broadcast
    collection) is expected and only skipped or cut short."""
    return [
        record
        for record in records
        if record["status"] == "error"
        or ((smoke or record["system"] == "lionmsg") and (record["status"] != "ok" or "unmeasured" in record))
    ]


def failure_line(failure: dict[str, Any]) -> str:
    """What the driver prints for one of `failed_cells` (or a failure of the run itself, the plot's)."""
    where = f"{failure.get('workload', '')} {failure.get('system', '')} N={failure.get('n', '')}"
    if failure["status"] == "ok":  # cut short: measured, but not every metric
        cut = failure["unmeasured"]
        return f"FAILED {where}: cut short, {', '.join(cut['metrics'])} not timed: {cut['reason']}"
    return f"FAILED {where}: {failure['status']}: {failure['reason']}"


def _next_size(
    workload: spec.Workload, system: str, n: int, done: list[dict[str, Any]], rounds: int, settings: Settings
) -> dict[str, Any]:
    """One system's worker at n for one of `rounds` rounds, or why it is skipped (`done`: its runs at
    the smaller sizes)."""
    last_metric, unmeasured = None, None  # set when only the first metrics fit: the repetition stops there
    projected = _project(done, n)
    cut_short = bool(done) and "unmeasured" in done[-1]  # a size too slow for a whole repetition: larger ones too
    if cut_short or (projected is not None and projected > settings.max_rep_s):
        reason = (
            f"N={done[-1]['n']:,} was too slow for a whole repetition"
            if cut_short
            else f"projected {projected:.3g} s per repetition > {settings.max_rep_s:.3g} s limit"
        )
        timed = _affordable_metrics(workload, done, n, settings)
        if not timed:
            return {"workload": workload.name, "system": system, "n": n, "status": "skipped", "reason": reason}
        reason += f"; repetitions stopped after {timed[-1].label}"
        last_metric = timed[-1].name
        unmeasured = {"metrics": [metric.name for metric in workload.metrics[len(timed) :]], "reason": reason}
    if done and done[-1]["status"] != "ok":
        reason = f"not run: N={done[-1]['n']:,} was {done[-1]['status']}"
        return {"workload": workload.name, "system": system, "n": n, "status": "skipped", "reason": reason}
    if workload.reps is not None:
        return _run_worker(system, workload.name, n, workload.reps, None, settings)
    reps = settings.reps_largest if n == max(settings.sizes) and len(settings.sizes) > 1 else settings.reps
    share = _Share(reps=math.ceil(reps / rounds), budget_s=settings.budget_s / rounds)
    record = _run_worker(system, workload.name, n, share.reps, share, settings, last_metric)
    if unmeasured is not None and record["status"] == "ok":
        record["unmeasured"] = unmeasured
    return record


def _affordable_metrics(
    workload: spec.Workload, done: list[dict[str, Any]], n: int, settings: Settings
) -> list[spec.Metric]:
    """The longest run of a staged workload's first metrics whose repetition is projected within the
    limit at n (none for a workload that times its metrics together)."""
    if not workload.staged:
        return []
    for count in range(len(workload.metrics) - 1, 0, -1):
        first = list(workload.metrics[:count])
        projected = _project(done, n, [metric.name for metric in first])
        if projected is not None and projected <= settings.max_rep_s:
            return first
    return []


def _log(record: dict[str, Any]) -> None:
    where = f"{record['workload']:<24} {record['system']:<8} N={record['n']:<7,}"
    if record["status"] != "ok":
        print(f"  {where} {record['status'].upper()}: {record['reason']}", file=sys.stderr, flush=True)
        return
    result = record["result"]
    shown = []
    for name, metric in result["metrics"].items():
        value = f"{metric['per_op_s'] * 1e6:.2f} µs/op" if metric["unit"] == "s" else f"{metric['median']:.0f} B"
        shown.append(f"{name}={value}")
    if "unmeasured" in record:
        shown.append(f"not timed: {', '.join(record['unmeasured']['metrics'])} ({record['unmeasured']['reason']})")
    print(
        f"  {where} {record['wall_s']:6.1f} s  reps={result['reps']}  {'  '.join(shown)}", file=sys.stderr, flush=True
    )


def _machine() -> dict[str, Any]:
    cores, load = os.cpu_count(), os.getloadavg()
    return {"platform": platform.platform(), "cpu": _cpu_name(), "cores": cores, "loadavg_start": load}


def _cpu_name() -> str:
    """The model name from /proc/cpuinfo; where there is none (macOS, Windows), what `platform` says."""
    fallback = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            return next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), fallback)
    except OSError:
        return fallback


def _plot(plot_python: str, json_path: Path, png_path: Path) -> str | None:
    done = subprocess.run(
        [plot_python, "-m", "bench.plot", str(json_path), str(png_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    return None if done.returncode == 0 else done.stderr.strip() or f"exit {done.returncode}"


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    sizes = tuple(args.sizes or ((spec.SMOKE_SIZE,) if args.smoke else spec.SIZES))
    out: Path = args.out or (RESULTS / "smoke" if args.smoke else RESULTS)
    pythons = {"lionmsg": sys.executable, "floor": sys.executable}
    if "lionagi" in args.systems:
        if not args.lionagi_python:
            print(f"give --lionagi-python or set ${LIONAGI_PYTHON_ENV} (or leave lionagi out with --systems)")
            return 2
        pythons["lionagi"] = args.lionagi_python
    missing = sorted({python for python in pythons.values() if shutil.which(python) is None})
    if missing:
        print(f"no such interpreter: {', '.join(missing)} (make bench creates .venv-bench)")
        return 2
    plot_python = args.plot_python or args.lionagi_python
    settings = Settings(
        sizes=tuple(sorted(sizes)),
        reps=1 if args.smoke else args.reps,
        reps_largest=1 if args.smoke else args.reps_largest,
        min_time_s=0.0 if args.smoke else args.min_time,
        max_reps=1 if args.smoke else args.max_reps,
        rounds=1 if args.smoke else max(1, args.rounds),
        budget_s=args.budget,
        max_rep_s=args.max_rep,
        timeout_s=min(args.timeout, 120.0) if args.smoke else args.timeout,
        pythons=pythons,
    )
    workloads = [w for w in spec.WORKLOADS if args.workloads is None or w.name in args.workloads]
    jobs = args.jobs or (2 if args.smoke else 1)
    started_at = datetime.now(timezone.utc)
    started = time.perf_counter()
    machine = _machine()
    print(f"bench: sizes {settings.sizes}, systems {args.systems}, {jobs} worker(s) at a time", file=sys.stderr)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        runs = pool.map(lambda workload: _workload_runs(workload, args.systems, settings), workloads)
        records = [record for records in runs for record in records]
    machine["loadavg_end"] = os.getloadavg()
    document = {
        "started_at": started_at.isoformat(timespec="seconds"),
        "wall_s": time.perf_counter() - started,
        "smoke": args.smoke,
        "settings": {
            "sizes": settings.sizes,
            "reps": settings.reps,
            "reps_largest": settings.reps_largest,
            "min_time_s": settings.min_time_s,
            "max_reps": settings.max_reps,
            "rounds": settings.rounds,
            "warmup_below_s": spec.WARMUP_BELOW_S,
            "budget_s": settings.budget_s,
            "max_rep_s": settings.max_rep_s,
            "timeout_s": settings.timeout_s,
            "jobs": jobs,
            "systems": args.systems,
        },
        "machine": machine,
        "records": records,
    }
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path, png_path = out / "latest.json", out / "latest.md", out / "cost_vs_n.png"
    json_path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    markdown = report.render(document)
    md_path.write_text(markdown, encoding="utf-8")
    print(markdown)
    failures = failed_cells(records, args.smoke)
    if not args.no_plot:
        if plot_python is None:
            failures.append({"status": "error", "reason": "no --plot-python (an interpreter with matplotlib)"})
        else:
            problem = _plot(plot_python, json_path, png_path)
            if problem is not None:
                failures.append({"status": "error", "reason": f"plot failed: {problem}"})
    for failure in failures:
        print(failure_line(failure), file=sys.stderr)
    print(f"wrote {md_path}, {json_path}" + ("" if args.no_plot else f", {png_path}"), file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
