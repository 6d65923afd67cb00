"""The ratio helpers of the cases benchmark's target rows (pure: series summaries in, rows out)."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from tpcds.cases import Series


def pair(num: Sequence[float | None], den: Sequence[float | None]) -> list[float]:
    """Per-run ratios of two series (run i with run i; runs missing on either side are skipped)."""
    return [a / b for a, b in zip(num, den, strict=False) if a is not None and b]


def row(
    target: str, limit: float | None, case: int | None, runs: Sequence[float], detail: str, key: str
) -> dict[str, Any]:
    """A target row: the median of the per-run ratios, their min..max, met (None when not measured)."""
    value = statistics.median(runs) if runs else None
    return {
        "id": key,
        "target": target,
        "case": case,
        "limit": limit,
        "value": value,
        "runs": list(runs),
        "spread": [min(runs), max(runs)] if runs else None,
        "met": None if value is None or limit is None else value <= limit,
        "detail": detail,
    }


def median_of(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def best(series: dict[str, Any], keep: Callable[[Series], bool]) -> str | None:
    """The series (among those ``keep`` accepts) with the lowest median mean write time."""
    scored = {n: median_of(s["mean_write_s"]) for n, s in series.items() if keep(Series.parse(n))}
    present = {n: v for n, v in scored.items() if v is not None}
    return min(present, key=lambda n: present[n]) if present else None


def column(series: dict[str, Any], name: str, index: int) -> list[float | None]:
    """Per run: the read at ``index`` (0 before, 1 after the first write, -1 after the last)."""
    runs = series[name]["read_s"]
    complete = [len(r) == series[name]["planned"] + 1 for r in runs]
    return [r[index] if ok else None for r, ok in zip(runs, complete, strict=True)]
