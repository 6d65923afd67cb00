"""What the phases of the cases benchmark (``tpcds.bench_cases``) share: the config, the phase names,
the worker entry and the per-iteration record helpers. Imports no Spark.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tpcds.bench_common import BenchConfig, Recorder
from tpcds.cases import Series

TINY_TABLE = "db.store_sales_tiny"
TINY_SEED = 7


@dataclass
class CasesConfig(BenchConfig):
    """``BenchConfig`` plus the cases, their engine configurations and the tiny-table point."""

    cases: list[int] = field(default_factory=lambda: [1, 2, 3, 4])
    series: dict[str, list[str]] = field(default_factory=dict)  # case number -> Series names
    subset: bool = False
    tiny_runs: int = 10

    def series_of(self, case: int, engine: str) -> list[Series]:
        return [s for s in map(Series.parse, self.series.get(str(case), [])) if s.engine == engine]

    @property
    def iteration_seeds(self) -> list[int]:
        return list(range(1, self.iterations + 1))

    def case_batch_dir(self, case: int, seed: int) -> Path:
        return Path(self.batch_root) / f"case{case}" / f"seed-{seed}"

    @property
    def tiny_dir(self) -> Path:
        return Path(self.batch_root) / "tiny" / "table"

    @property
    def tiny_batch_dir(self) -> Path:
        return Path(self.batch_root) / "tiny" / f"batch-seed-{TINY_SEED}"


def case_phases(cases: list[int], tiny: bool, baseline: bool) -> list[str]:
    """The phases in run order: prepare, per case rowops then Iceberg, baseline, the tiny table.

    >>> case_phases([1, 4], tiny=True, baseline=False)
    ['cases-prepare', 'rowops-case1', 'iceberg-case1', 'rowops-case4', 'iceberg-case4', 'rowops-tiny', 'iceberg-tiny']
    """
    phases = ["cases-prepare"]
    for case in cases:
        phases += [f"rowops-case{case}", f"iceberg-case{case}"]
    if baseline:
        phases.append("baseline")
    if tiny:
        phases += ["rowops-tiny", "iceberg-tiny"]
    return phases


def read_marker(path: Path) -> dict[str, Any] | None:
    """The ``_BATCH.json`` of a materialized batch, or None."""
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        return data
    except (OSError, ValueError):
        return None


def new_series_run(read_before: list[float], answer: list[str]) -> dict[str, Any]:
    """The record of one run of a series: the reads before the first write, then one entry per write."""
    before = sorted(read_before)[len(read_before) // 2]
    return {
        "read_before_s": before,
        "read_before_runs": read_before,
        "answer_before": answer,
        "iterations": [],
    }


def store_run(rec: Recorder, series: Series, run: dict[str, Any], index: int) -> None:
    """Put run ``index`` of ``series`` into the phase record (rewritten on disk)."""
    runs = rec.data.setdefault("series", {}).setdefault(series.name, [])
    if len(runs) <= index:
        runs.append(run)
    else:
        runs[index] = run
    rec.flush()
