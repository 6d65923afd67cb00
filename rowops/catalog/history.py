"""What each lake version did, and the changes that bring the lake back to an earlier version."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rowops.catalog.batches import committed_batch
from rowops.catalog.log import LakeVersion, TableEntry


@dataclass(frozen=True)
class LakeCommit:
    """One version of the lake history.

    Attributes:
        version: the lake version.
        timestamp_ms: when it was committed (milliseconds since the epoch).
        transaction_id: the transaction that produced it.
        isolation: the isolation level of that transaction (``single-statement`` outside transactions).
        tables: table → operations applied to it in this version.
        batch: ``pipeline/batch`` when a pipeline run committed this version (``rowops.pipeline``).
        rows_inserted / rows_updated / rows_deleted: rows changed, summed over the tables.
    """

    version: int
    timestamp_ms: int
    transaction_id: str | None
    isolation: str
    tables: dict[str, list[str]] = field(default_factory=dict)
    rows_inserted: int = 0
    rows_updated: int = 0
    rows_deleted: int = 0
    batch: str | None = None


def describe(version: LakeVersion) -> LakeCommit:
    """The history entry of one version, from its transaction record."""
    record: dict[str, Any] = version.transaction or {}
    tables: dict[str, list[str]] = {}
    rows = {"inserted": 0, "updated": 0, "deleted": 0}
    for commit in record.get("commits", []):
        operations = commit.get("operations") or [commit.get("operation", "unknown")]
        tables.setdefault(commit.get("table", "?"), []).extend(str(o) for o in operations)
        for kind in rows:
            rows[kind] += int(commit.get(f"rows-{kind}", 0) or 0)
    return LakeCommit(
        version=version.version,
        timestamp_ms=version.timestamp_ms,
        transaction_id=record.get("id"),
        isolation=record.get("isolation", "single-statement"),
        tables=tables,
        rows_inserted=rows["inserted"],
        rows_updated=rows["updated"],
        rows_deleted=rows["deleted"],
        batch=f"{batch['app']}/{batch['id']}" if (batch := committed_batch(version)) else None,
    )


def changes_back_to(latest: LakeVersion, target: LakeVersion) -> dict[str, TableEntry | None]:
    """The table entries that make ``latest`` equal to ``target`` (None drops a table)."""
    changes: dict[str, TableEntry | None] = {}
    for name in sorted(set(latest.names()) | set(target.names())):
        wanted = target.get(name)
        if latest.get(name) != wanted:
            changes[name] = wanted
    return changes
