"""What one pipeline run did: rows, files, strategy and why, time per phase, debt before and after.

Pure (no Spark): the runner fills a :class:`RunMetrics`; ``to_dict`` is the ``--json`` output and
``log_lines`` the plain log.

>>> m = RunMetrics("orders", "2024-01-01")
>>> with m.phase("read"):
...     m.rows_read = 3
>>> m.status = "committed"
>>> sorted(m.to_dict())[:4]
['batch_id', 'changes', 'columns_added', 'committed_version']
>>> m.log_lines()[0]
'pipeline orders batch 2024-01-01: committed (lake version None), 3 rows read'
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from rowops.meta.files import TableFiles
from rowops.plan.cost import overhead_ratio, worth_merging
from rowops.plan.debt import read_debt
from rowops.request.results import OperationResult

DEBT_FIELDS = (
    "data_files",
    "delete_files",
    "position_delete_files",
    "equality_delete_files",
    "deleted_rows",
    "small_files",
    "delete_generations",
    "read_overhead_bytes",
    "read_overhead_ratio",
    "extra_file_opens",
)
_STRATEGY_LINE = re.compile(r"^strategy: (\S+) \(requested (\S+): (.*)\)$", re.MULTILINE)


@dataclass
class TargetMetrics:
    """One target table's part of a run."""

    table: str
    strategy: str = ""
    strategy_requested: str = ""
    strategy_reason: str = ""
    rows_inserted: int | None = 0
    rows_updated: int | None = 0
    rows_deleted: int | None = 0
    data_files_added: int = 0
    data_files_removed: int = 0
    delete_files_added: int = 0
    delete_files_removed: int = 0
    files_scanned: int = 0
    files_pruned: int = 0
    duration_s: float = 0.0

    @classmethod
    def from_result(cls, table: str, result: OperationResult) -> TargetMetrics:
        """The metrics of a MERGE result; the strategy's reason comes from the plan report."""
        match = _STRATEGY_LINE.search(result.explain)
        requested, reason = (match.group(2), match.group(3)) if match else ("", "")
        return cls(
            table=table,
            strategy=result.strategy,
            strategy_requested=requested,
            strategy_reason=reason,
            rows_inserted=result.rows_inserted,
            rows_updated=result.rows_updated,
            rows_deleted=result.rows_deleted,
            data_files_added=result.data_files_added,
            data_files_removed=result.data_files_removed,
            delete_files_added=result.delete_files_added,
            delete_files_removed=result.delete_files_removed,
            files_scanned=result.files_scanned,
            files_pruned=result.files_pruned,
            duration_s=round(result.duration_s, 3),
        )


@dataclass
class RunMetrics:
    """Everything one run reports (JSON via ``to_dict``, text via ``log_lines``).

    ``status``: ``committed``, ``skipped`` (the batch was committed before: nothing done),
    ``empty`` (nothing to change), ``validated`` (``pipeline validate``) or ``failed``.
    """

    pipeline: str
    batch_id: str
    status: str = "running"
    committed_version: int | None = None
    rows_read: int = 0
    changes: dict[str, int] = field(default_factory=dict)
    targets: list[TargetMetrics] = field(default_factory=list)
    phases_s: dict[str, float] = field(default_factory=dict)
    debt_before: dict[str, dict[str, float]] = field(default_factory=dict)
    debt_after: dict[str, dict[str, float]] = field(default_factory=dict)
    debt_after_maintenance: dict[str, dict[str, float]] = field(default_factory=dict)
    columns_added: dict[str, dict[str, str]] = field(default_factory=dict)
    maintenance: list[dict[str, Any]] = field(default_factory=list)
    message: str = ""

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time a phase (added up when a phase runs more than once)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            spent = time.perf_counter() - started
            self.phases_s[name] = round(self.phases_s.get(name, 0.0) + spent, 3)

    def totals(self) -> dict[str, int | None]:
        """Sums over the targets; a row count is None when an encoding could not know it."""
        keys = ["rows_inserted", "rows_updated", "rows_deleted", "data_files_added", "data_files_removed"]
        keys += ["delete_files_added", "delete_files_removed"]
        values = {k: [getattr(t, k) for t in self.targets] for k in keys}
        return {k: None if None in v else sum(v) for k, v in values.items()}

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["totals"] = self.totals()
        return dict(sorted(out.items()))

    def log_lines(self) -> list[str]:
        """The run as plain log lines (one per target, phase summary, debt, maintenance)."""
        head = f"pipeline {self.pipeline} batch {self.batch_id}: {self.status}"
        lines = [f"{head} (lake version {self.committed_version}), {self.rows_read} rows read"]
        if self.message:
            lines.append(f"  {self.message}")
        for name, added in self.columns_added.items():
            lines.append(f"  {name}: columns added: " + ", ".join(f"{c} {t}" for c, t in added.items()))
        for t in self.targets:
            lines.append(
                f"  {t.table}: {t.strategy} ({t.strategy_reason or 'requested'}); "
                f"+{t.rows_inserted} ~{t.rows_updated} -{t.rows_deleted} rows; files +{t.data_files_added} "
                f"-{t.data_files_removed} data, +{t.delete_files_added} -{t.delete_files_removed} delete"
            )
        for name, before in self.debt_before.items():
            after = self.debt_after.get(name, {})
            text = f"  debt {name}: {_debt_text(before)} -> {_debt_text(after) if after else '?'}"
            if name in self.debt_after_maintenance:
                text += f" -> after maintenance {_debt_text(self.debt_after_maintenance[name])}"
            lines.append(text)
        for step in self.maintenance:
            done = _maintenance_text(step.get("result"))
            lines.append(
                f"  maintenance {step.get('table')}: {step.get('action')} ({step.get('mode')}){done}"
            )
        phases = ", ".join(f"{k} {v:.2f}s" for k, v in self.phases_s.items())
        lines.append(f"  phases: {phases}")
        return lines


def _debt_text(debt: dict[str, float]) -> str:
    return (
        f"{int(debt.get('data_files', 0))} data / {int(debt.get('delete_files', 0))} delete files, "
        f"read overhead {debt.get('read_overhead_bytes', 0):,.0f} B"
    )


def debt_summary(files: TableFiles, read_weight: float = 1.0) -> dict[str, float]:
    """A table snapshot's read debt from its metadata (the planner's own model, ``plan/debt.py``)."""
    debt = read_debt(files, files.data, read_weight)
    data_bytes = sum(f.size for f in files.data)
    return {
        "data_files": len(files.data),
        "delete_files": len(files.deletes),
        "position_delete_files": len(files.position_deletes),
        "equality_delete_files": len(files.equality_deletes),
        "deleted_rows": sum(f.record_count for f in files.position_deletes),
        "small_files": sum(1 for f in files.data if worth_merging(f.size, read_weight)),
        "delete_generations": debt.generations,
        "read_overhead_bytes": round(debt.bytes),
        "read_overhead_ratio": round(overhead_ratio(debt.bytes, data_bytes), 4),  # as health() states it
        "extra_file_opens": debt.file_opens,
    }


def _maintenance_text(result: Mapping[str, Any] | None) -> str:
    """What a maintenance step did, for the log line ("" when it was only advised).

    >>> _maintenance_text({"snapshot_id": None})
    ': nothing to do'
    >>> _maintenance_text({"snapshot_id": 7, "files_read": 32, "files_written": 16, "files_removed": 32})
    ': 32 files read, 16 written, 32 removed (snapshot 7)'
    """
    if result is None:
        return ""
    if result.get("snapshot_id") is None and not result.get("files_removed"):
        return ": nothing to do"
    counts = f"{result.get('files_read', 0)} files read, {result.get('files_written', 0)} written"
    snapshot = f" (snapshot {result['snapshot_id']})" if result.get("snapshot_id") is not None else ""
    return f": {counts}, {result.get('files_removed', 0)} removed{snapshot}"
