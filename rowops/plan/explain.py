"""The text of ``explain``: what an operation will do (or did), and why.

>>> report = PlanReport("MERGE ON t.k <=> s.k", "auto", "hybrid", "cheapest", {"copy-on-write": 2e6,
...     "position-delete": 1.5e5, "equality-delete": 9e5}, files_total=16, files_scanned=4, files_pruned=12,
...     colocated=True, colocated_reason="source 1.2 MB <= 256 MB: broadcast to the target's scan tasks",
...     groups=(FileGroup("copy-on-write", 1, 900, 1000), FileGroup("position-delete", 3, 12, 3000)))
>>> print(format_report(report))
== rowops plan ==
operation: MERGE ON t.k <=> s.k
strategy: hybrid (requested auto: cheapest)
costs (bytes, write + read weight x added read):
  copy-on-write      2,000,000
  position-delete      150,000 *
  equality-delete      900,000
files: 16 live, 4 scanned, 12 pruned at run time
co-located join: yes (source 1.2 MB <= 256 MB: broadcast to the target's scan tasks)
file groups:
  copy-on-write    1 files, 900 of 1,000 rows changed
  position-delete  3 files, 12 of 3,000 rows changed
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class FileGroup:
    """Touched files that got one encoding."""

    encoding: str
    files: int
    changed_rows: int
    rows: int

    def describe(self) -> str:
        """One line of ``explain``.

        >>> FileGroup("copy-on-write", 2, 10, 3_000).describe()
        'copy-on-write    2 files, 10 of 3,000 rows changed'
        """
        return f"{self.encoding:<16} {self.files} files, {self.changed_rows:,} of {self.rows:,} rows changed"


@dataclass(frozen=True)
class PlanReport:
    """Everything ``explain`` shows; ``spark_plan`` is the physical plan text (left out of goldens)."""

    operation: str
    requested: str
    strategy: str
    reason: str
    costs: dict[str, float] = field(default_factory=dict)
    files_total: int = 0
    files_scanned: int = 0
    files_pruned: int = 0
    colocated: bool | None = None
    colocated_reason: str = ""
    groups: tuple[FileGroup, ...] = ()
    spark_plan: str = ""


def format_report(report: PlanReport, with_spark_plan: bool = False) -> str:
    """Human-readable, stable text of a plan report."""
    lines = ["== rowops plan ==", f"operation: {report.operation}"]
    lines.append(f"strategy: {report.strategy} (requested {report.requested}: {report.reason})")
    if report.costs:
        best = min(report.costs.values())
        lines.append("costs (bytes, write + read weight x added read):")
        for name, cost in report.costs.items():
            lines.append(f"  {name:<16} {cost:>11,.0f}" + (" *" if cost == best else ""))
    lines.append(
        f"files: {report.files_total} live, {report.files_scanned} scanned, {report.files_pruned} pruned at run time"
    )
    if report.colocated is not None:
        lines.append(f"co-located join: {'yes' if report.colocated else 'no'} ({report.colocated_reason})")
    if report.groups:
        lines.append("file groups:")
        for g in report.groups:
            lines.append(f"  {g.describe()}")
    if with_spark_plan and report.spark_plan:
        lines += ["== Spark physical plan ==", report.spark_plan.rstrip()]
    return "\n".join(lines)
