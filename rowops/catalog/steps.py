"""The table changes a transaction records, and how each one is replayed on a newer table state.

A transaction applies its changes to a private working copy of each table at once (so its own later
reads see them), and keeps the list of steps. When another transaction committed to the same table
first, the steps are replayed, in order, on the newer state: each one validates against what landed
in between and re-applies its metadata. Data and delete files are never rewritten by a replay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from pyiceberg.io import FileIO
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import RemoveSnapshotsUpdate, SetPropertiesUpdate, update_table_metadata

from rowops.commit.rebase import find_conflict
from rowops.commit.refs import RefChange, files_at_head, head
from rowops.commit.row_conflicts import Conflict
from rowops.commit.row_delta import RowDelta, apply, main_branch_update
from rowops.commit.write_set import find_write_conflict
from rowops.errors import ConflictKind
from rowops.meta.evolution import SchemaChange
from rowops.meta.files import TableFiles, live_files


class StepConflict(Exception):
    """A step cannot be replayed on the newer table state."""

    def __init__(self, conflict: Conflict) -> None:
        super().__init__(conflict.reason)
        self.conflict = conflict


@dataclass(frozen=True)
class Replay:
    """Where a step is replayed: the table state and the rules of the transaction."""

    io: FileIO
    serializable: bool
    row_level: bool = True


class Step(Protocol):
    """One change of one table inside a transaction."""

    @property
    def operation(self) -> str: ...

    def replay(
        self, metadata: TableMetadata, location: str | None, how: Replay
    ) -> tuple[TableMetadata, list[str]]:
        """Re-apply on ``metadata`` (published at ``location``, None for the transaction's own state).

        Returns the new metadata and the metadata files written. Raises :class:`StepConflict`.
        """
        ...


@dataclass(frozen=True)
class DeltaStep:
    """A row-level operation or append: a :class:`RowDelta` planned on ``base_files``."""

    delta: RowDelta
    base_files: TableFiles
    snapshot_id: int
    operation: str = "row-delta"

    def replay(
        self, metadata: TableMetadata, location: str | None, how: Replay
    ) -> tuple[TableMetadata, list[str]]:
        if location is None:  # after an earlier step of this replay: its snapshot has that step's
            # original id, so comparing ids cannot tell the replayed state from the one planned on
            current = live_files(metadata, how.io, head(metadata, self.delta.branch))
        else:
            current = files_at_head(metadata, how.io, self.delta.branch, self.base_files)
        delta = replace(self.delta, serializable=how.serializable)
        conflict = find_conflict(delta, self.base_files, current, metadata, io=how.io)
        if conflict is None:
            conflict = find_write_conflict(delta, self.base_files, current, metadata.schema())
        if conflict is not None:
            raise StepConflict(conflict)
        return apply(delta, metadata, current, how.io, self.snapshot_id, location)


@dataclass(frozen=True)
class PropertiesStep:
    """Table properties set (rebases over anything)."""

    properties: dict[str, str]
    operation: str = "set-properties"

    def replay(
        self, metadata: TableMetadata, location: str | None, how: Replay
    ) -> tuple[TableMetadata, list[str]]:
        update = SetPropertiesUpdate(updates=self.properties)
        return update_table_metadata(metadata, (update,), metadata_location=location), []


@dataclass(frozen=True)
class SnapshotStep:
    """The main branch pointed at an existing snapshot, chosen looking at the snapshot ``seen``."""

    snapshot_id: int
    seen: int | None
    operation: str = "set-current-snapshot"

    def replay(
        self, metadata: TableMetadata, location: str | None, how: Replay
    ) -> tuple[TableMetadata, list[str]]:
        if metadata.current_snapshot_id != self.seen:
            reason = (
                "the table moved while rolling it back; the rollback would discard the commits in between"
            )
            raise StepConflict(
                Conflict(ConflictKind.METADATA_CHANGED, reason, metadata.current_snapshot_id, ())
            )
        update = main_branch_update(self.snapshot_id)
        return update_table_metadata(metadata, (update,), metadata_location=location), []


@dataclass(frozen=True)
class RefStep:
    """Branches or tags created, dropped or moved; ``change`` checks itself on the state it replays on."""

    change: RefChange
    operation: str = "update-refs"

    def replay(
        self, metadata: TableMetadata, location: str | None, how: Replay
    ) -> tuple[TableMetadata, list[str]]:
        return update_table_metadata(metadata, self.change(metadata), metadata_location=location), []


@dataclass(frozen=True)
class SchemaStep:
    """A schema change, computed on the schema ``change.base_schema_id``: it rebases over data commits,
    not over a concurrent schema change."""

    change: SchemaChange

    @property
    def operation(self) -> str:
        return self.change.operation

    def replay(
        self, metadata: TableMetadata, location: str | None, how: Replay
    ) -> tuple[TableMetadata, list[str]]:
        reason = self.change.conflict(metadata)
        if reason is not None:
            raise StepConflict(
                Conflict(self.change.conflict_kind(metadata), reason, metadata.current_snapshot_id, ())
            )
        return self.change.apply(metadata, location), []


def replay_all(
    steps: Sequence[Step], metadata: TableMetadata, location: str, how: Replay, written: list[str]
) -> TableMetadata:
    """Replay ``steps`` on the published state ``metadata`` at ``location``.

    The metadata files written are appended to ``written`` as they are made, so that a conflict
    half-way still lets the caller remove them.
    """
    at: str | None = location
    for step in steps:
        metadata, files = step.replay(metadata, at, how)
        written += files
        at = None
    return metadata


def publishable(
    metadata: TableMetadata, ours: set[int], io: FileIO, log_start: int
) -> tuple[TableMetadata, list[str]]:
    """The working state of a table as the transaction publishes it: every statement's snapshot, in order.

    Each statement that wrote added a snapshot, a child of the one before, with its own sequence number
    (an equality delete of statement 2 applies to rows statement 1 wrote: strictly lower sequence
    number). They are all published, in the transaction's one lake version, as Iceberg's own
    multi-statement transactions do: every manifest and entry names a snapshot that exists, incremental
    readers (``start-snapshot-id``/``end-snapshot-id``) see every statement, and each summary is that
    statement's. The snapshot log, which time travel by timestamp reads, keeps of the entries this
    transaction added (those from ``log_start`` on) only the last: no state between two statements was
    ever a table's current state. Snapshots of ``ours`` no ref reaches any more (a statement the
    transaction itself rolled back) are dropped.

    Returns:
        The metadata to publish and the metadata files only the dropped snapshots referenced (their
        manifest lists and manifests no kept snapshot lists), to remove once the commit landed.
    """
    log = list(metadata.snapshot_log)
    if len(log) - log_start > 1:
        log = log[:log_start] + log[-1:]
        metadata = metadata.model_copy(update={"snapshot_log": log})
    by_id = {s.snapshot_id: s for s in metadata.snapshots}
    reached: set[int] = set()
    tips = [ref.snapshot_id for ref in metadata.refs.values()]
    if metadata.current_snapshot_id is not None:
        tips.append(metadata.current_snapshot_id)
    for tip in tips:
        at: int | None = tip
        while at is not None and at in by_id and at not in reached:
            reached.add(at)
            at = by_id[at].parent_snapshot_id
    dropped = [s for s in metadata.snapshots if s.snapshot_id in ours and s.snapshot_id not in reached]
    if not dropped:
        return metadata, []
    kept = [s for s in metadata.snapshots if s.snapshot_id in ours and s.snapshot_id in reached]
    listed = {m.manifest_path for s in kept for m in s.manifests(io)}
    garbage = [s.manifest_list for s in dropped]
    for snapshot in dropped:
        garbage += [
            m.manifest_path
            for m in snapshot.manifests(io)
            if m.added_snapshot_id in ours
            and m.manifest_path not in listed
            and m.manifest_path not in garbage
        ]
    ids = [s.snapshot_id for s in dropped]
    return update_table_metadata(metadata, (RemoveSnapshotsUpdate(snapshot_ids=ids),)), garbage


def referenced(metadata: TableMetadata, ours: set[int], io: FileIO) -> set[str]:
    """The manifest lists and manifests the snapshots ``ours`` in ``metadata`` list."""
    found: set[str] = set()
    for snapshot in metadata.snapshots:
        if snapshot.snapshot_id in ours:
            found.add(snapshot.manifest_list)
            found.update(m.manifest_path for m in snapshot.manifests(io))
    return found
