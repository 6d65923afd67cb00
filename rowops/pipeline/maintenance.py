"""The maintenance policy of a pipeline: each target's health report against thresholds, then run or advise.

``[maintenance.thresholds]`` names numeric fields of ``Table.health().to_dict()`` (nested fields with
dots); a threshold is crossed when the field's value exceeds it. ``mode = "advise"`` reports the
crossed thresholds and the report's advice; ``mode = "run"`` also runs ``actions`` in order (each a
normal commit of the table's maintenance API). Threshold names are checked before the batch runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, Protocol, cast

from rowops.errors import PipelineConfigError
from rowops.pipeline.config import MaintenanceConfig


class _Report(Protocol):
    advice: list[str]

    def to_dict(self) -> dict[str, Any]: ...


class _Maintainable(Protocol):
    """The maintenance API of ``rowops.Table`` (table maintenance, issue 11)."""

    def health(self) -> _Report: ...
    def compact_position_deletes(self) -> _Report: ...
    def convert_equality_deletes(self) -> _Report: ...
    def compact(self) -> _Report: ...
    def expire_snapshots(self, older_than: timedelta | None = None, retain_last: int = 1) -> _Report: ...
    def remove_orphans(self) -> _Report: ...


def numeric_fields(report: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The numeric fields of a health report, nested ones as ``outer.inner``.

    >>> numeric_fields({"files": {"data": 3, "small": 1}, "ratio": 0.5, "advice": ["compact"], "ok": True})
    {'files.data': 3.0, 'files.small': 1.0, 'ratio': 0.5}
    """
    out: dict[str, float] = {}
    for key, value in report.items():
        if isinstance(value, Mapping):
            out.update(numeric_fields(value, f"{prefix}{key}."))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            out[f"{prefix}{key}"] = float(value)
    return out


def exceeded(report: Mapping[str, Any], thresholds: Mapping[str, float], table: str) -> dict[str, float]:
    """The thresholds the report crosses (field → value); an unknown field is a config error.

    >>> exceeded({"delete_files": 9, "small_files": 1}, {"delete_files": 4, "small_files": 4}, "db.t")
    {'delete_files': 9.0}
    """
    fields = numeric_fields(report)
    for name in thresholds:
        if name not in fields:
            raise PipelineConfigError(
                f"[maintenance.thresholds].{name} is not a numeric field of {table}'s health report; "
                f"fields: {', '.join(sorted(fields))}"
            )
    return {name: fields[name] for name, limit in thresholds.items() if fields[name] > limit}


def check_thresholds(tables: Mapping[str, object], policy: MaintenanceConfig) -> None:
    """Fail before the batch runs when a threshold names no field of the health report."""
    if policy.mode == "off" or not policy.thresholds:
        return
    for name, table in tables.items():
        exceeded(cast(_Maintainable, table).health().to_dict(), policy.thresholds, name)


def _run(table: _Maintainable, action: str, policy: MaintenanceConfig) -> _Report:
    if action == "expire_snapshots":
        hours = policy.expire_older_than_hours
        older = None if hours is None else timedelta(hours=hours)
        return table.expire_snapshots(older_than=older, retain_last=policy.retain_last)
    method: Callable[[], _Report] = getattr(table, action)
    return method()


def apply_policy(
    tables: Mapping[str, object], policy: MaintenanceConfig, progress: Callable[[str], None]
) -> list[dict[str, Any]]:
    """Compare each table's health with the thresholds; run (or only advise) the configured actions."""
    if policy.mode == "off" or not policy.thresholds:
        return []
    steps: list[dict[str, Any]] = []
    for name, handle in tables.items():
        table = cast(_Maintainable, handle)
        report = table.health()
        crossed = exceeded(report.to_dict(), policy.thresholds, name)
        if not crossed:
            continue
        if policy.mode == "advise":
            advice = list(report.advice)
            steps.append(
                {
                    "table": name,
                    "mode": "advise",
                    "action": ", ".join(policy.actions),
                    "exceeded": crossed,
                    "advice": advice,
                }
            )
            continue
        for action in policy.actions:
            progress(f"maintenance of {name}: {action}")
            result = _run(table, action, policy)
            steps.append(
                {
                    "table": name,
                    "mode": "run",
                    "action": action,
                    "exceeded": crossed,
                    "result": result.to_dict(),
                }
            )
    return steps
