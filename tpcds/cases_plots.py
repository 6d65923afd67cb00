"""PNG plots of a cases report (``cases-sf<SF>.json``) in the style of the paper's Figures 9-15.

* ``cases-write-sf<SF>.png``: mean write time per engine configuration, one group per case (whiskers:
  min..max over runs);
* ``cases-case<N>-sf<SF>.png``: (a) write time per iteration, (b) read query time per iteration
  (0 = before the first write), (c) live data + delete files per iteration (Figure 10);
* ``cases-tiny-sf<SF>.png``: the 10-row upsert into a 10,000-row table, median write time per engine.

Usage: ``python -m tpcds.cases_plots tpcds/results/cases-sf1.json`` (re-draws from a saved report).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

COLORS = {
    "rowops copy-on-write": "#08519c",
    "rowops position-delete": "#3182bd",
    "rowops equality-delete": "#6baed6",
    "rowops auto": "#2ca02c",
    "rowops deletion-vectors": "#756bb1",
    "rowops auto-v3": "#74c476",
    "rowops copy-on-write no-runtime-filter": "#9ecae1",
    "iceberg copy-on-write": "#a63603",
    "iceberg merge-on-read": "#e6550d",
    "iceberg deletion-vectors": "#fd8d3c",
    "iceberg copy-on-write no-runtime-filter": "#fdbe85",
}


def _color(name: str) -> str:
    return COLORS.get(name, "#777777")


def _present(values: Sequence[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def plot_writes(report: dict[str, Any], path: Path) -> Path | None:
    cases = report.get("cases", {})
    if not cases:
        return None
    fig, axes = plt.subplots(1, len(cases), figsize=(4.5 * len(cases), 5), squeeze=False)
    for ax, (case, entry) in zip(axes[0], sorted(cases.items()), strict=True):
        names = [n for n, s in entry["series"].items() if _present(s["mean_write_s"])]
        means = [_present(entry["series"][n]["mean_write_s"]) for n in names]
        medians = [statistics.median(m) for m in means]
        err = [
            [md - min(m) for md, m in zip(medians, means, strict=True)],
            [max(m) - md for md, m in zip(medians, means, strict=True)],
        ]
        xs = range(len(names))
        ax.bar(xs, medians, color=[_color(n) for n in names], yerr=err, capsize=3)
        for x, m in zip(xs, medians, strict=True):
            ax.annotate(
                f"{m:.1f}",
                (x, max(means[x])),
                ha="center",
                va="bottom",
                fontsize=7,
                xytext=(0, 2),
                textcoords="offset points",
            )
        ax.set_xticks(list(xs))
        ax.set_xticklabels([n.replace(" ", "\n", 1) for n in names], rotation=60, ha="right", fontsize=7)
        ax.set_title(f"Case {case} ({entry['name']}): mean write", fontsize=10)
        ax.set_ylabel("seconds")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(f"Write time per engine, SF {report['meta']['sf']:g}", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_case(report: dict[str, Any], case: str, path: Path) -> Path | None:
    entry = report["cases"][case]
    if not entry["series"]:
        return None
    fig, (ax_w, ax_r, ax_f) = plt.subplots(1, 3, figsize=(17, 5))
    for name, s in entry["series"].items():
        style = "-" if name.startswith("rowops") else "--"
        kw = {"color": _color(name), "marker": "o", "markersize": 3, "label": name}
        if s["write_s"] and s["write_s"][0]:
            ax_w.plot(range(1, len(s["write_s"][0]) + 1), s["write_s"][0], style, **kw)
        if s["read_s"] and s["read_s"][0]:
            ax_r.plot(range(len(s["read_s"][0])), s["read_s"][0], style, **kw)
        if s["files"]:
            ax_f.plot(
                range(1, len(s["files"]) + 1),
                [f["data_files"] + f["delete_files"] for f in s["files"]],
                style,
                **kw,
            )
    sf = report["meta"]["sf"]
    ax_w.set_title(f"(a) write time, Case {case} ({entry['name']}), SF {sf:g}", fontsize=10)
    ax_r.set_title("(b) read query after each write (0 = before)", fontsize=10)
    ax_f.set_title("(c) live data + delete files", fontsize=10)
    for ax, label in ((ax_w, "seconds"), (ax_r, "seconds"), (ax_f, "files")):
        ax.set_xlabel("iteration")
        ax.set_ylabel(label)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    ax_w.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_tiny(report: dict[str, Any], path: Path) -> Path | None:
    tiny = {n: t for n, t in (report.get("tiny") or {}).items() if t["write_s"]["median"] is not None}
    if not tiny:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    names = list(tiny)
    medians = [tiny[n]["write_s"]["median"] for n in names]
    err = [
        [m - tiny[n]["write_s"]["min"] for n, m in zip(names, medians, strict=True)],
        [tiny[n]["write_s"]["max"] - m for n, m in zip(names, medians, strict=True)],
    ]
    ax.bar(range(len(names)), medians, color=[_color(n) for n in names], yerr=err, capsize=3)
    for x, n in enumerate(names):
        jobs = tiny[n]["spark_jobs"]["median"]
        ax.annotate(
            f"{medians[x]:.2f}s\n{jobs:.0f} jobs" if jobs is not None else f"{medians[x]:.2f}s",
            (x, tiny[n]["write_s"]["max"]),
            ha="center",
            va="bottom",
            fontsize=7,
            xytext=(0, 2),
            textcoords="offset points",
        )
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([n.replace(" ", "\n", 1) for n in names], fontsize=8)
    ax.set_ylabel("seconds (median, whiskers min..max)")
    ax.set_title("10-row upsert into a 10,000-row table", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_cases(report: dict[str, Any], out: Path, tag: str) -> list[Path]:
    """Every plot the report has data for; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    drawn = [
        plot_writes(report, out / f"cases-write-{tag}.png"),
        plot_tiny(report, out / f"cases-tiny-{tag}.png"),
    ]
    drawn += [
        plot_case(report, case, out / f"cases-case{case}-{tag}.png")
        for case in sorted(report.get("cases", {}))
    ]
    return [p for p in drawn if p is not None]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m tpcds.cases_plots <cases-sf<SF>.json>", file=sys.stderr)
        return 2
    path = Path(args[0])
    report = json.loads(path.read_text())
    for drawn in plot_cases(report, path.parent, f"sf{report['meta']['sf']:g}"):
        print(drawn)
    return 0


if __name__ == "__main__":
    sys.exit(main())
