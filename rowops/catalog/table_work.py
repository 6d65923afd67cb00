"""What one transaction did to one table (its working state), and the record a transaction writes
into the lake version it commits, and the error naming who changed a table first
(``catalog/transactions.py``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.table.metadata import TableMetadata

from rowops.catalog.attempts import CommitListener
from rowops.catalog.history import commit_counts
from rowops.catalog.log import LakeLog, LakeVersion, TableEntry
from rowops.catalog.steps import DeltaStep, Step
from rowops.commit.summary import snapshot_summary
from rowops.errors import CommitConflictError, ConflictKind


@dataclass
class TableWork:
    """What one transaction did to one table so far.

    Attributes:
        pinned: the table's entry at begin (None when this transaction created it).
        metadata: the working state: pinned state plus this transaction's steps.
        files: metadata files written for the working state (manifests, manifest lists, metadata.json).
        prepared_on: the published metadata the current attempt was built on.
        location: the metadata.json of the current attempt.
        log_start: entries of ``metadata.snapshot_log`` from before this transaction's steps.
        listeners: the staging areas of this table's writes (their data and delete files).
    """

    name: str
    pinned: TableEntry | None
    metadata: TableMetadata
    steps: list[Step] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    created: bool = False
    dropped: bool = False
    prepared_on: str | None = None
    location: str | None = None
    created_counts: dict[str, int | None] = field(default_factory=dict)  # of the create's first snapshot
    log_start: int = 0
    listeners: list[CommitListener] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.created or self.dropped or bool(self.steps)

    def snapshots_made(self) -> set[int]:
        """The snapshots this transaction added to the working copy (all of them for a new table)."""
        if self.created:
            return {s.snapshot_id for s in self.metadata.snapshots}
        return {step.snapshot_id for step in self.steps if isinstance(step, DeltaStep)}


def transaction_record(
    tx_id: str,
    isolation: str,
    begin_version: int,
    reads: Iterable[str],
    batch: Mapping[str, Any] | None,
    changed: list[TableWork],
) -> dict[str, Any]:
    """The transaction's record in the lake version it commits: what it read and did to each table."""
    commits = []
    for work in changed:
        operation = "create" if work.created else "drop" if work.dropped else None
        operations = [operation] if operation else []
        operations += [_operation(step) for step in work.steps]
        commits.append({"table": work.name, "operations": operations, **_counts(work)})
    record: dict[str, Any] = {
        "id": tx_id,
        "isolation": isolation,
        "begin-version": begin_version,
        "reads": sorted(reads),
        "commits": commits,
    }
    if batch is not None:
        record["batch"] = dict(batch)
    return record


def _operation(step: Step) -> str:
    if isinstance(step, DeltaStep):
        return step.delta.extra_summary.get("rowops.operation", step.delta.operation.value)
    return step.operation


def _counts(work: TableWork) -> dict[str, int | None]:
    """The lake history's counts of one table's steps (``commit_counts`` of each step's snapshot
    summary, summed; None stays unknown), its creation's included."""
    parts = [work.created_counts] if work.created_counts else []
    parts += [
        commit_counts(snapshot_summary(step.delta, step.base_files))
        for step in work.steps
        if isinstance(step, DeltaStep)
    ]
    totals: dict[str, int | None] = {}
    for part in parts:
        for key, n in part.items():
            total = totals.get(key, 0)
            totals[key] = None if n is None or total is None else total + n
    return totals


def conflict_error(
    tx_id: str,
    other: LakeVersion | None,
    name: str,
    kind: ConflictKind,
    reason: str,
    retry_safe: bool = True,
    snapshot_id: int | None = None,
    files: tuple[str, ...] = (),
) -> CommitConflictError:
    """The error of a transaction that cannot commit its change of table ``name``; ``other`` is the
    lake version that changed the table first (when known)."""
    by = f" by transaction {other.transaction.get('id')} (lake version {other.version})" if other else ""
    detail = f": {', '.join(files[:5])}" if files else ""
    return CommitConflictError(
        f"Transaction {tx_id} conflicts on table {name}{by}: {reason}{detail}",
        kind=kind,
        conflicting_snapshot_id=snapshot_id,
        conflicting_files=files,
        retry_safe=retry_safe,
        table=name,
        other_transaction=other.transaction.get("id") if other else None,
        other_version=other.version if other else None,
        help="Nothing of this transaction was committed. "
        + (
            "Run the whole transaction again: it will read the new state."
            if retry_safe
            else "Retrying the same transaction cannot succeed; check the table first."
        ),
    )


def who_changed(log: LakeLog, pinned: LakeVersion, name: str, latest: LakeVersion) -> LakeVersion | None:
    """The first version after ``pinned`` that changed table ``name`` (only read on a conflict)."""
    before = pinned.get(name)
    between = log.history(pinned.version + 1, latest.version + 1)
    return next((version for version in between if version.get(name) != before), None)
