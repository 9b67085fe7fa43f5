"""The Markdown report of a benchmark run: `python -m bench.report results/latest.json` re-renders one."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bench import spec
from bench.spec import TIMES

__all__ = ["render"]

_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


@dataclass
class _Notes:
    """Numbered footnotes, each text once."""

    texts: list[str] = field(default_factory=list)

    def mark(self, text: str) -> str:
        if text not in self.texts:
            self.texts.append(text)
        return str(self.texts.index(text) + 1).translate(_SUPERSCRIPT)


@dataclass
class _Run:
    records: dict[tuple[str, str, int], dict[str, Any]]
    sizes: tuple[int, ...]
    notes: _Notes = field(default_factory=_Notes)
    misses: list[str] = field(default_factory=list)
    floor_misses: int = 0  # misses the floor shares (see _floor_value)

    def metric(self, metric: spec.Metric, workload: str, system: str, n: int) -> dict[str, Any] | None:
        record = self.records.get((workload, system, n))
        if record is None or record["status"] != "ok":
            return None
        entry: dict[str, Any] | None = record["result"]["metrics"].get(metric.name)
        return entry

    def cell(self, metric: spec.Metric, workload: str, system: str, n: int) -> str:
        record = self.records.get((workload, system, n))
        if record is None:
            return "—"
        unmeasured = _unmeasured(record, metric)
        if unmeasured is not None:
            return "—" + self.notes.mark(f"{spec.SYSTEM_LABELS[system]}: {unmeasured}")
        entry = record["result"]["metrics"][metric.name]
        text = _count(entry["ops_per_s"]) if metric.unit == "s" else f"{entry['median']:,.0f}"
        result = record["result"]
        if result["reps"] < result["reps_requested"]:
            text += self.notes.mark(f"{spec.SYSTEM_LABELS[system]}: fewer repetitions (time budget); see latest.json")
        return text


def _unmeasured(record: dict[str, Any], metric: spec.Metric) -> str | None:
    """Why `record` has no figure for `metric` (skipped, failed, or a staged repetition stopped before
    it), or None when it has one."""
    if record["status"] != "ok":
        return str(record["reason"].splitlines()[0] if record["reason"] else record["status"])
    if metric.name not in record["result"]["metrics"]:
        return str(record.get("unmeasured", {}).get("reason", "not timed"))
    return None


def _count(ops_per_s: float | None) -> str:
    if ops_per_s is None:
        return "—"
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if ops_per_s >= scale:
            return f"{ops_per_s / scale:.3g}{suffix}"
    return f"{ops_per_s:.3g}"


def _ratio(value: float | None) -> str:
    """Three significant digits, more when those would round a value onto a target's bound: 9.996
    below a 10x bar reads "9.996x", never "10x" beside its cross (a value that still prints as the bound
    at 12 digits is within `_meets`' tolerance of it, and met). From 1,000 up, a whole number with
    thousands separators ("2,350x", not "2.35e+03x")."""
    if value is None:
        return "—"
    rounded = float(f"{value:.3g}")
    if rounded >= 1000:  # 999.5 rounds to 1,000 too
        return f"{rounded:,.0f}{TIMES}"
    digits = 3
    while float(f"{value:.{digits}g}") in _BOUNDS and float(f"{value:.{digits}g}") != value and digits < 12:
        digits += 1
    return f"{value:.{digits}g}{TIMES}"


_BOUNDS = frozenset(
    target.bound for workload in spec.WORKLOADS for metric in workload.metrics for target in metric.targets
)


def _throughput_ratio(
    run: _Run, metric: spec.Metric, workload: str, n: int, other: str, system: str = "lionmsg"
) -> float | None:
    """`system`'s ops/s over `other`'s (for bytes: `system`'s bytes over `other`'s)."""
    mine, theirs = run.metric(metric, workload, system, n), run.metric(metric, workload, other, n)
    if mine is None or theirs is None:
        return None
    numerator, denominator = (
        (mine["median"], theirs["median"]) if metric.unit == "bytes" else (theirs["per_op_s"], mine["per_op_s"])
    )
    return float(numerator) / float(denominator) if denominator else None  # e.g. no RSS growth at a tiny N


def _growth(run: _Run, metric: spec.Metric, workload: str, n: int, system: str = "lionmsg") -> float | None:
    first, now = run.metric(metric, workload, system, run.sizes[0]), run.metric(metric, workload, system, n)
    if first is None or now is None or n == run.sizes[0] or not first["per_op_s"]:
        return None
    return float(now["per_op_s"]) / float(first["per_op_s"])


def _floor_value(run: _Run, metric: spec.Metric, target: spec.Target, workload: str, n: int) -> float | None:
    """What the plain-pydantic floor measures against the same bar (None for the bars relative to it,
    and for a growth the floor's different algorithm makes meaningless): a miss the floor shares asks
    for more than plain pydantic delivers."""
    if target.kind in ("speedup", "memory_vs_lionagi"):
        return _throughput_ratio(run, metric, workload, n, "lionagi", system="floor")
    if target.kind == "growth" and metric.floor_growth_comparable:
        return _growth(run, metric, workload, n, system="floor")
    return None


# A ratio of two floats lands a hair off its bar (0.003 s against 0.03 s is 9.999999999999998): within
# this relative distance it is on the bar, and meets it.
_TOLERANCE = 1e-9


def _meets(target: spec.Target, value: float) -> bool:
    if target.kind in ("growth", "memory_vs_lionagi", "memory_vs_floor"):
        return value <= target.bound * (1 + _TOLERANCE)
    return value >= target.bound * (1 - _TOLERANCE)


def _verdict(run: _Run, metric: spec.Metric, target: spec.Target, workload: str, n: int, value: float | None) -> str:
    if value is None:
        return f"{target.label} n/a"
    met = _meets(target, value)
    if not met:
        miss = f"{metric.label}, N={n:,}: {target.label} — measured {_ratio(value)}"
        floor = _floor_value(run, metric, target, workload, n)
        if floor is not None:
            shared = not _meets(target, floor)
            miss += f" (floor: {_ratio(floor)}{', missed too' if shared else ''})"
            run.floor_misses += shared
        run.misses.append(miss)
    return f"{target.label} {'✓' if met else '✗'}"


def _targets(run: _Run, metric: spec.Metric, workload: str, n: int) -> str:
    mine = run.records.get((workload, "lionmsg", n))
    reason = None if mine is None else _unmeasured(mine, metric)
    if mine is not None and reason is not None:
        # lionmsg too slow to finish (or broken) is the worst result a row can have, never "n/a"
        status = mine["status"] if mine["status"] != "ok" else "cut short"
        run.misses.append(f"{metric.label}, N={n:,}: not measured — {status}: {reason}")
        return "lionmsg not measured ✗"
    verdicts = []
    for target in metric.targets:
        if target.kind in ("speedup", "memory_vs_lionagi"):
            value = _throughput_ratio(run, metric, workload, n, "lionagi")
        elif target.kind in ("floor_ratio", "memory_vs_floor"):
            value = _throughput_ratio(run, metric, workload, n, "floor")
        elif n == run.sizes[-1] and len(run.sizes) > 1:
            value = _growth(run, metric, workload, n)
        else:
            continue  # growth is judged once, at the largest size
        verdicts.append(_verdict(run, metric, target, workload, n, value))
    return " · ".join(verdicts)


def _timing_table(run: _Run, workloads: Iterable[spec.Workload]) -> list[str]:
    first = f"{run.sizes[0]:,}"
    lines = [
        f"| workload | N | lionmsg ops/s | LionAGI ops/s | floor ops/s | lionmsg ÷ LionAGI | lionmsg ÷ floor "
        f"| lionmsg cost/op vs N={first} | targets |",
        "|---|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for workload in workloads:
        for metric in workload.metrics:
            for n in run.sizes:
                cells = [run.cell(metric, workload.name, system, n) for system in spec.SYSTEMS]
                ratios = [_throughput_ratio(run, metric, workload.name, n, other) for other in ("lionagi", "floor")]
                growth = _growth(run, metric, workload.name, n)
                row = [metric.label, f"{n:,}", *cells, *map(_ratio, ratios)]
                row += ["" if n == run.sizes[0] else _ratio(growth), _targets(run, metric, workload.name, n)]
                lines.append("| " + " | ".join(row) + " |")
    return lines


def _memory_table(run: _Run, workload: spec.Workload) -> list[str]:
    n = run.sizes[-1]
    lines = [
        f"| bytes per stored message, N={n:,} | lionmsg | LionAGI | floor | lionmsg ÷ LionAGI | lionmsg ÷ floor "
        "| targets |",
        "|---|--:|--:|--:|--:|--:|---|",
    ]
    for metric in workload.metrics:
        cells = [run.cell(metric, workload.name, system, n) for system in spec.SYSTEMS]
        ratios = [_throughput_ratio(run, metric, workload.name, n, other) for other in ("lionagi", "floor")]
        row = [metric.label, *cells, *map(_ratio, ratios), _targets(run, metric, workload.name, n)]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def _more(settings: dict[str, Any]) -> str:
    """How short repetitions were extended (older result files predate it)."""
    min_time, max_reps = settings.get("min_time_s"), settings.get("max_reps")
    if not min_time or not max_reps:
        return ""
    return f", more for short ones: until {min_time:g} s of repetitions or {max_reps} of them"


def _rounds(settings: dict[str, Any]) -> str:
    """How the systems took turns (older result files ran each system's cell in one go)."""
    rounds = settings.get("rounds", 1)
    if rounds <= 1:
        return ""
    return (
        f", pooled from {rounds} rounds in which the systems take turns (each round 1/{rounds} of the "
        "repetitions, rounded up, and the minimum time again), so slow spells of the shared host fall on all of them"
    )


def _header(document: dict[str, Any], run: _Run) -> list[str]:
    settings, machine = document["settings"], document["machine"]
    versions: dict[str, str] = {}
    pythons: set[str] = set()
    loads = []
    for record in document["records"]:
        if record["status"] == "ok":
            versions.update(record["result"]["versions"])
            pythons.add(record["result"]["python"])
            loads.append(record["result"]["loadavg"][0])
    described = ", ".join(f"{name} {version}" for name, version in sorted(versions.items()))
    lines = [
        f"# lionmsg benchmark{' (smoke)' if document['smoke'] else ''} — {document['started_at']}",
        "",
        f"{machine['cpu']}, {machine['cores']} cores; Python {', '.join(sorted(pythons))}; {described}.",
        f"Median of at least {settings['reps']} repetition{'' if settings['reps'] == 1 else 's'} "
        f"({settings['reps_largest']} at N={run.sizes[-1]:,})"
        f"{_more(settings)}{_rounds(settings)}, "
        f"one fresh process per workload, system and N{' and round' if settings.get('rounds', 1) > 1 else ''} "
        f"(a first repetition under {settings.get('warmup_below_s', 5.0):g} s is discarded as a warm-up); "
        f"total wall time {document['wall_s'] / 60:.1f} min.",
    ]
    if document["smoke"]:
        lines.append(
            "Smoke run: tiny N and one repetition after the warm-up. It checks that the harness works; "
            "its numbers mean nothing."
        )
    if loads:
        lines.append(
            f"1-minute load average when workers started (each cell's highest round): {min(loads):.2f} to "
            f"{max(loads):.2f} "
            f"({machine['cores']} cores; other work on the machine inflates timings)."
        )
    lines += [
        "",
        "ops/s: operations per second (higher is better); an operation is one message for build, render, "
        f"round-trip and Exchange rows, one call for add-or-replace ({spec.REPLACE_OPS:,} per repetition) and "
        f"look-ups ({spec.LOOKUP_PROBES:,} per repetition). lionmsg ÷ X: lionmsg's ops/s over X's. "
        f"Cost/op vs the smallest N: lionmsg's per-operation cost relative to it (≈1{TIMES} means O(1) per operation, "
        "i.e. linear total cost).",
        "",
    ]
    return lines


def render(document: dict[str, Any]) -> str:
    records = {(r["workload"], r["system"], r["n"]): r for r in document["records"]}
    run = _Run(records=records, sizes=tuple(document["settings"]["sizes"]))
    present = {r["workload"] for r in document["records"]}
    timed = [w for w in spec.WORKLOADS if w.name in present and not w.largest_only]
    lines = _header(document, run) + _timing_table(run, timed)
    for workload in spec.WORKLOADS:
        if workload.name in present and workload.largest_only:
            lines += ["", *_memory_table(run, workload)]
    lines += [
        "",
        "Notes: the floor is a plain pydantic v2 model with the same envelope fields and slots-dataclass "
        "content in a dict + list (bench/systems/floor_model.py); its `progression.index(id)` is "
        "`list.index`, a scan. LionAGI's `to_chat_msgs` runs with `_use_render_cache=False` (every message "
        "rendered). Memory (one measurement: it is deterministic): tracemalloc counts what Python's allocator still "
        "holds after building the manager; RSS delta is the resident-set growth of a separate build.",
    ]
    if run.notes.texts:
        lines += ["", *(f"{str(k + 1).translate(_SUPERSCRIPT)} {text}" for k, text in enumerate(run.notes.texts))]
    summary = f"**Targets missed: {len(run.misses)}**"
    if run.floor_misses:
        summary += f", {run.floor_misses} of them missed by the plain-pydantic floor too"
    lines += ["", summary + (":" if run.misses else "")]
    lines += [f"- {miss}" for miss in run.misses]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m bench.report RESULTS.json", file=sys.stderr)
        return 2
    with open(args[0], encoding="utf-8") as source:
        sys.stdout.write(render(json.load(source)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
