"""The maintenance policy of a pipeline: each target's measured debt against thresholds, then run or advise.

``[maintenance.thresholds]`` names fields of the debt a run measures after its commit
(``metrics.DEBT_FIELDS``: the planner's own debt model, checked when the config is parsed); a
threshold is crossed when the field exceeds it. ``mode = "advise"`` reports the crossed thresholds and
the actions it would run; ``mode = "run"`` runs ``actions`` in order, each a normal commit of the
table's maintenance API, and the run measures the debt again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from rowops.pipeline.config import MaintenanceConfig
from rowops.request.results import MaintenanceResult

if TYPE_CHECKING:
    from rowops.table import Table


def exceeded(debt: Mapping[str, float], thresholds: Mapping[str, float]) -> dict[str, float]:
    """The thresholds a table's measured debt crosses (field → value).

    >>> exceeded({"delete_files": 9, "small_files": 1}, {"delete_files": 4, "small_files": 4})
    {'delete_files': 9}
    """
    return {name: debt[name] for name, limit in thresholds.items() if debt.get(name, 0) > limit}


def _run(table: Table, action: str, policy: MaintenanceConfig) -> MaintenanceResult:
    if action == "expire_snapshots":
        hours = policy.expire_older_than_hours
        older = None if hours is None else timedelta(hours=hours)
        return table.expire_snapshots(older_than=older, retain_last=policy.retain_last)
    method: Callable[[], MaintenanceResult] = getattr(table, action)
    return method()


def apply_policy(
    tables: Mapping[str, Table],
    debt: Mapping[str, Mapping[str, float]],
    policy: MaintenanceConfig,
    progress: Callable[[str], None],
) -> list[dict[str, Any]]:
    """Compare each table's measured debt with the thresholds; run (or only advise) the configured actions."""
    if policy.mode == "off" or not policy.thresholds:
        return []
    steps: list[dict[str, Any]] = []
    for name, handle in tables.items():
        crossed = exceeded(debt.get(name, {}), policy.thresholds)
        if not crossed:
            continue
        if policy.mode == "advise":
            steps.append(
                {"table": name, "mode": "advise", "action": ", ".join(policy.actions), "exceeded": crossed}
            )
            continue
        for action in policy.actions:
            progress(f"maintenance of {name}: {action}")
            result = _run(handle, action, policy)
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
