"""The markdown summary of a cases report: the target table (met / missed, spread), per case the
series' write and read times and files, and the tiny-table latency point."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tpcds.cases_ratios import median_of


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _verdict(row: dict[str, Any]) -> str:
    if row["met"] is not None:
        return "met" if row["met"] else "**missed**"
    return "not measured" if row["value"] is None else "info"


def cases_markdown(report: dict[str, Any], rows: Sequence[dict[str, Any]]) -> str:
    """The summary: the target table, then per case the series' write and read times, then the tiny
    table's latency point."""
    meta = report["meta"]
    cfg = meta.get("config", {})
    lines = [
        f"# Cases 1-4, SF {meta['sf']:g}",
        "",
        f"`{meta.get('command', '')}` — {cfg.get('iterations')} iterations, {cfg.get('runs')} run(s), "
        f"{meta.get('started', '')}, load average before {meta.get('machine', {}).get('load_average')} "
        f"after {meta.get('load_average_after')}.",
        "",
        "Ratios are medians of per-run ratios (write: the mean over the iterations of a run); spread is "
        "min..max over runs.",
        "",
        "| target | limit | measured | spread | verdict | detail |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        spread = (
            "-" if not r["spread"] or len(r["runs"]) < 2 else f"{r['spread'][0]:.2f}..{r['spread'][1]:.2f}"
        )
        limit = "-" if r["limit"] is None else f"≤ {r['limit']:g}"
        lines.append(
            f"| {r['target']} | {limit} | {_fmt(r['value'])} | {spread} | {_verdict(r)} | {r['detail']} |"
        )
    for case, entry in sorted(report.get("cases", {}).items()):
        lines += ["", f"## Case {case}: {entry['name']}", ""]
        lines.append(
            "| series | mean write s | read before | after first | after last | files after last (data/delete) | chosen |"
        )
        lines.append("|---|---|---|---|---|---|---|")
        for name, s in entry["series"].items():
            reads = s["read_s"][0] if s["read_s"] else []
            files = s["files"][-1] if s["files"] else {}
            chosen = ",".join(sorted(set(s["chosen"]))) or "-"
            lines.append(
                f"| {name} | {_fmt(median_of(s['mean_write_s']))} | {_fmt(reads[0] if reads else None)} | "
                f"{_fmt(reads[1] if len(reads) > 1 else None)} | {_fmt(reads[-1] if len(reads) > 1 else None)} | "
                f"{files.get('data_files', '-')}/{files.get('delete_files', '-')} | {chosen} |"
            )
        lines.append(f"\nAll answers agree: {entry['consistency']['all_agree']}.")
    if report.get("tiny"):
        lines += ["", "## Tiny table: a 10-row upsert into a 10,000-row table", ""]
        lines += ["| engine | median write s | min..max | Spark jobs | chosen |", "|---|---|---|---|---|"]
        for name, t in report["tiny"].items():
            w = t["write_s"]
            lines.append(
                f"| {name} | {_fmt(w['median'], 3)} | {_fmt(w['min'], 3)}..{_fmt(w['max'], 3)} | "
                f"{_fmt(t['spark_jobs']['median'], 0)} | {','.join(t['chosen']) or '-'} |"
            )
    return "\n".join(lines) + "\n"
