"""What each lake version did, and the changes that bring the lake back to an earlier version."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.table.metadata import TableMetadata

from rowops.catalog.batches import committed_batch
from rowops.catalog.log import LakeVersion, TableEntry

# Iceberg's own snapshot summary counts a lake version records per table commit (the spec's metrics)
ICEBERG_COUNTS = ("added-records", "deleted-records", "added-position-deletes", "added-equality-deletes")
ROW_KINDS = ("inserted", "updated", "deleted")
# rowops' snapshot summary key: the row kinds an operation's encoding could not count (equality deletes)
UNKNOWN_ROWS = "rowops.rows-unknown"


def commit_counts(summary: Mapping[str, str]) -> dict[str, int | None]:
    """What a lake version records of one table commit, from the commit's snapshot summary: Iceberg's
    record and delete counts, and rowops' rows inserted / updated / deleted (None: unknown).

    >>> commit_counts({"added-records": "3", "added-equality-deletes": "3", "rowops.rows-deleted": "0",
    ...                "rowops.rows-unknown": "inserted,updated"})  # doctest: +NORMALIZE_WHITESPACE
    {'added-records': 3, 'deleted-records': 0, 'added-position-deletes': 0, 'added-equality-deletes': 3,
     'rows-inserted': None, 'rows-updated': None, 'rows-deleted': 0}
    """
    counts: dict[str, int | None] = {key: int(summary.get(key) or 0) for key in ICEBERG_COUNTS}
    unknown = set((summary.get(UNKNOWN_ROWS) or "").split(","))
    for kind in ROW_KINDS:
        counts[f"rows-{kind}"] = None if kind in unknown else int(summary.get(f"rowops.rows-{kind}") or 0)
    return counts


def created_counts(metadata: TableMetadata) -> dict[str, int | None]:
    """The counts of a new table's first snapshot (its rows, when created from a DataFrame)."""
    snapshot = metadata.current_snapshot()
    return commit_counts(snapshot.summary) if snapshot is not None and snapshot.summary else {}


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
        rows_inserted / rows_updated / rows_deleted: rows changed, summed over the tables; None where an
            encoding could not count them (a blind upsert by equality deletes cannot tell inserts from
            updates, a blind delete by key does not know which keys existed).
        records_added / records_removed / position_deletes_added / equality_deletes_added: Iceberg's
            snapshot summary counts (``added-records``, ``deleted-records``: the records of data files
            added and removed, rewritten rows included; ``added-position-deletes``,
            ``added-equality-deletes``), summed over the tables.
    """

    version: int
    timestamp_ms: int
    transaction_id: str | None
    isolation: str
    tables: dict[str, list[str]] = field(default_factory=dict)
    rows_inserted: int | None = 0
    rows_updated: int | None = 0
    rows_deleted: int | None = 0
    batch: str | None = None
    records_added: int = 0
    records_removed: int = 0
    position_deletes_added: int = 0
    equality_deletes_added: int = 0


def describe(version: LakeVersion) -> LakeCommit:
    """The history entry of one version, from its transaction record."""
    record: dict[str, Any] = version.transaction or {}
    tables: dict[str, list[str]] = {}
    rows: dict[str, int | None] = dict.fromkeys(ROW_KINDS, 0)
    records = dict.fromkeys(ICEBERG_COUNTS, 0)
    for commit in record.get("commits", []):
        operations = commit.get("operations") or [commit.get("operation", "unknown")]
        tables.setdefault(commit.get("table", "?"), []).extend(str(o) for o in operations)
        for kind, total in rows.items():
            n = commit.get(f"rows-{kind}", 0)  # null: unknown; absent: none (older records too)
            rows[kind] = None if n is None or total is None else total + int(n)
        for key in records:
            records[key] += int(commit.get(key) or 0)
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
        records_added=records["added-records"],
        records_removed=records["deleted-records"],
        position_deletes_added=records["added-position-deletes"],
        equality_deletes_added=records["added-equality-deletes"],
    )


def changes_back_to(latest: LakeVersion, target: LakeVersion) -> dict[str, TableEntry | None]:
    """The table entries that make ``latest`` equal to ``target`` (None drops a table)."""
    changes: dict[str, TableEntry | None] = {}
    for name in sorted(set(latest.names()) | set(target.names())):
        wanted = target.get(name)
        if latest.get(name) != wanted:
            changes[name] = wanted
    return changes
