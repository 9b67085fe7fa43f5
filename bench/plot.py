"""`python -m bench.plot RESULTS.json OUT.png`: per-operation cost against N, log-log, one panel per metric.

Runs in the bench environment (matplotlib is not a lionmsg dependency); reads only the results file.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import matplotlib  # type: ignore[import-not-found, unused-ignore]

matplotlib.use("Agg")  # no display: render straight to the file
import matplotlib.pyplot as plt  # type: ignore[import-not-found, unused-ignore]

from bench import spec

COLOURS = {"lionmsg": "#1b9e77", "lionagi": "#d95f02", "floor": "#7570b3"}


def _series(document: dict[str, Any], metric: spec.Metric, system: str) -> tuple[list[int], list[float]]:
    points = []
    for record in document["records"]:
        if record["system"] != system or record["status"] != "ok":
            continue
        entry = record["result"]["metrics"].get(metric.name)
        if entry is not None:
            points.append((record["n"], entry["per_op_s"] * 1e6))
    points.sort()
    return [n for n, _ in points], [cost for _, cost in points]


def _memory_panel(axes: Any, document: dict[str, Any]) -> None:
    values = {}
    for record in document["records"]:
        if record["workload"] == "memory" and record["status"] == "ok":
            values[record["system"]] = record["result"]["metrics"]["memory_traced"]["median"]
    systems = [s for s in spec.SYSTEMS if s in values]
    axes.bar(
        [spec.SYSTEM_LABELS[s] for s in systems], [values[s] for s in systems], color=[COLOURS[s] for s in systems]
    )
    axes.set_title("bytes per stored Instruction (tracemalloc)", fontsize=9)
    axes.tick_params(labelsize=7)


def draw(document: dict[str, Any], path: str) -> None:
    metrics = [m for w in spec.WORKLOADS if not w.largest_only for m in w.metrics]
    columns = 4
    rows = math.ceil((len(metrics) + 1) / columns)
    figure, grid = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.2 * rows), squeeze=False)
    panels = [axes for row in grid for axes in row]
    for axes, metric in zip(panels, metrics, strict=False):  # more panels than metrics
        for system in spec.SYSTEMS:
            sizes, costs = _series(document, metric, system)
            if sizes:
                axes.plot(sizes, costs, marker="o", color=COLOURS[system], label=spec.SYSTEM_LABELS[system])
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_title(metric.label.replace("`", ""), fontsize=9)
        axes.set_xlabel("N", fontsize=8)
        axes.set_ylabel("µs per operation", fontsize=8)
        axes.tick_params(labelsize=7)
        axes.grid(True, which="both", alpha=0.3)
    _memory_panel(panels[len(metrics)], document)
    for axes in panels[len(metrics) + 1 :]:
        axes.axis("off")
    handles, labels = panels[0].get_legend_handles_labels()
    figure.suptitle(f"Per-operation cost against N (log-log) — {document['started_at']}", y=0.995, fontsize=12)
    figure.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.975), ncol=3, fontsize=10)
    figure.tight_layout(rect=(0, 0, 1, 0.94))
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m bench.plot RESULTS.json OUT.png", file=sys.stderr)
        return 2
    with open(args[0], encoding="utf-8") as source:
        draw(json.load(source), args[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
