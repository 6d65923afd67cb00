"""PNG plots of a benchmark report (``tpcds.bench``'s ``bench-sf<SF>.json``), matplotlib Agg backend.

* ``write-times-sf<SF>.png``: median upsert time per rowops strategy (co-located join on / off) and per
  Iceberg mode (whiskers: min..max of the runs; dashed line: pyarrow reading + rewriting every data
  file), next to the read query time after that upsert;
* ``read-degradation-sf<SF>.png``: read query time before and after each of the consecutive upserts,
  and the time of each upsert;
* ``profile-sf<SF>.png``: where one rowops upsert spends its time, per profiled strategy.

Usage: ``python -m tpcds.plots tpcds/results/bench-sf1.json`` (re-draws from a saved report).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

ROWOPS_COLORS = {"on": "#1f77b4", "off": "#9ecae1", "sliced-2": "#2ca02c", "sliced-16": "#98df8a"}
ICEBERG_COLOR = "#ff7f0e"


def _bar_data(report: dict[str, Any], key: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(label, color, stats) per bar: rowops strategies (on/off), then Iceberg modes."""
    bars = []
    for strategy, by_coloc in report.get("rowops", {}).get("summary", {}).items():
        for on in ROWOPS_COLORS:
            if on in by_coloc and by_coloc[on][key]["median"] is not None:
                chosen = by_coloc[on].get("chosen") or []
                suffix = f"\n({chosen[0]})" if strategy == "auto" and len(chosen) == 1 else ""
                label = f"rowops {strategy}{suffix}\n" + (
                    on if on.startswith("sliced") else f"colocated {on}"
                )
                bars.append((label, ROWOPS_COLORS[on], by_coloc[on][key]))
    for mode, summary in report.get("iceberg", {}).get("summary", {}).items():
        if summary[key]["median"] is not None:
            bars.append((f"Iceberg\n{mode}", ICEBERG_COLOR, summary[key]))
    return bars


def _bars(ax: Any, bars: Sequence[tuple[str, str, dict[str, Any]]], title: str) -> None:
    xs = list(range(len(bars)))
    medians = [b[2]["median"] for b in bars]
    low = [b[2]["median"] - b[2]["min"] for b in bars]
    high = [b[2]["max"] - b[2]["median"] for b in bars]
    ax.bar(xs, medians, color=[b[1] for b in bars], yerr=[low, high], capsize=3)
    for x, m in zip(xs, medians, strict=True):
        ax.annotate(
            f"{m:.1f}",
            (x, m),
            ha="center",
            va="bottom",
            fontsize=7,
            xytext=(0, 2),
            textcoords="offset points",
        )
    ax.set_xticks(xs)
    ax.set_xticklabels([b[0] for b in bars], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("seconds")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)


def plot_write_times(report: dict[str, Any], path: Path) -> Path | None:
    writes, reads = _bar_data(report, "write_s"), _bar_data(report, "read_s")
    if not writes:
        return None
    fig, (ax_w, ax_r) = plt.subplots(1, 2, figsize=(15, 6))
    sf = report["meta"]["sf"]
    runs = report["meta"].get("config", {}).get("runs")
    _bars(ax_w, writes, f"Upsert (MERGE) time, SF {sf:g}, median of {runs} (whiskers min..max)")
    baseline = (report.get("baseline") or {}).get("total_s") or {}
    if baseline.get("median"):
        ax_w.axhline(baseline["median"], color="gray", linestyle="--", linewidth=1)
        ax_w.annotate(
            f"pyarrow read+rewrite all files {baseline['median']:.1f}s",
            (0, baseline["median"]),
            fontsize=7,
            color="gray",
            xytext=(0, 3),
            textcoords="offset points",
        )
    base_read = (report.get("rowops", {}).get("base_read_s") or {}).get("median")
    _bars(ax_r, reads, "Read query after the upsert")
    if base_read:
        ax_r.axhline(base_read, color="gray", linestyle="--", linewidth=1)
        ax_r.annotate(
            f"before the upsert (rowops) {base_read:.1f}s",
            (0, base_read),
            fontsize=7,
            color="gray",
            xytext=(0, 3),
            textcoords="offset points",
        )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_degradation(report: dict[str, Any], path: Path) -> Path | None:
    series = report.get("degradation") or {}
    if not series:
        return None
    fig, (ax_r, ax_w) = plt.subplots(1, 2, figsize=(14, 5))
    for name, s in series.items():
        style = "-" if name.startswith("rowops") else "--"
        ax_r.plot(range(len(s["read_s"])), s["read_s"], style, marker="o", markersize=3, label=name)
        ax_w.plot(range(1, len(s["write_s"]) + 1), s["write_s"], style, marker="o", markersize=3, label=name)
    sf = report["meta"]["sf"]
    ax_r.set_title(f"Read query after each consecutive upsert, SF {sf:g} (0 = before)", fontsize=10)
    ax_r.set_xlabel("upserts applied")
    ax_w.set_title("Time of each upsert", fontsize=10)
    ax_w.set_xlabel("upsert")
    for ax in (ax_r, ax_w):
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_ylabel("seconds")
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _profile_segments(phases: dict[str, float]) -> dict[str, float]:
    """Top-level split of one upsert: ``plan``, each direct child of ``execute``, and the rest."""
    segments = {"plan": phases.get("plan", 0.0)}
    children = {
        p.split("/", 1)[1]: s for p, s in phases.items() if p.startswith("execute/") and p.count("/") == 1
    }
    segments.update(children)
    segments["execute (driver, other)"] = max(phases.get("execute", 0.0) - sum(children.values()), 0.0)
    return segments


def plot_profile(report: dict[str, Any], path: Path) -> Path | None:
    profiles = report.get("profile") or {}
    if not profiles:
        return None
    segments = {name: _profile_segments(p["phases"]) for name, p in profiles.items()}
    labels = list(dict.fromkeys(label for seg in segments.values() for label in seg))  # execution order
    colors = {label: plt.get_cmap("tab20")(i % 20) for i, label in enumerate(labels)}
    fig, ax = plt.subplots(figsize=(12, 1.0 + 0.7 * len(profiles)))
    names = list(profiles)
    for y, name in enumerate(names):
        left = 0.0
        for label in labels:
            width = segments[name].get(label, 0.0)
            if width <= 0:
                continue
            ax.barh(y, width, left=left, color=colors[label], label=label if y == 0 else None)
            left += width
        jobs = profiles[name]["spark_jobs"]
        ax.annotate(
            f"{profiles[name]['wall_s']:.1f}s, {jobs} jobs",
            (left, y),
            xytext=(3, -3),
            textcoords="offset points",
            fontsize=7,
        )
    ax.set_xlim(0, 1.15 * max(p["wall_s"] for p in profiles.values()))
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[label]) for label in labels]
    ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels([f"rowops {n}" for n in names], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds")
    ax.set_title(f"Where one rowops upsert spends its time, SF {report['meta']['sf']:g}", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_report(report: dict[str, Any], out: Path, tag: str) -> list[Path]:
    """Draw every plot the report has data for; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    drawn = [
        plot_write_times(report, out / f"write-times-{tag}.png"),
        plot_degradation(report, out / f"read-degradation-{tag}.png"),
        plot_profile(report, out / f"profile-{tag}.png"),
    ]
    return [p for p in drawn if p is not None]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m tpcds.plots <bench-sf<SF>.json>", file=sys.stderr)
        return 2
    path = Path(args[0])
    report = json.loads(path.read_text())
    for drawn in plot_report(report, path.parent, f"sf{report['meta']['sf']:g}"):
        print(drawn)
    return 0


if __name__ == "__main__":
    sys.exit(main())
