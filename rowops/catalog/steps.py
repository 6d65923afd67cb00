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

from rowops.commit.refs import RefChange, files_at_head
from rowops.commit.row_delta import Conflict, RowDelta, apply, find_conflict, main_branch_update
from rowops.commit.write_set import find_write_conflict
from rowops.errors import ConflictKind
from rowops.meta.evolution import SchemaChange
from rowops.meta.files import TableFiles


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
        current = files_at_head(metadata, how.io, self.delta.branch, self.base_files)
        delta = replace(self.delta, serializable=how.serializable)
        conflict = find_conflict(delta, self.base_files, current, metadata)
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


def squash(metadata: TableMetadata, ours: set[int], io: FileIO) -> tuple[TableMetadata, list[str]]:
    """Keep only the last of the snapshots ``ours`` a transaction made on each branch, before publishing.

    Every step adds a snapshot to the working copy; published as is, a stock Iceberg reader could
    time-travel to a state between two steps (an intermediate read, Hermitage G1b). The head of each
    branch the transaction wrote keeps its sequence number and manifests (files keep theirs; nothing is
    rewritten) and becomes a child of the snapshot that branch had when the transaction started.

    Returns:
        The metadata to publish and the metadata files only the dropped snapshots referenced (their
        manifest lists and the manifests they added that no kept snapshot lists). Data and delete files a
        later step of the same transaction replaced stay for ``lake.cleanup()``.
    """
    heads = {ref.snapshot_id for ref in metadata.refs.values() if ref.snapshot_id in ours}
    if metadata.current_snapshot_id in ours:
        heads.add(metadata.current_snapshot_id)
    dropped = [s for s in metadata.snapshots if s.snapshot_id in ours and s.snapshot_id not in heads]
    if not dropped:
        return metadata, []
    by_id = {s.snapshot_id: s for s in metadata.snapshots}
    parents = {}
    for kept in heads:
        parent = by_id[kept].parent_snapshot_id if kept in by_id else None
        while parent in ours and parent in by_id:
            parent = by_id[parent].parent_snapshot_id
        parents[kept] = parent
    ids = [s.snapshot_id for s in dropped]
    metadata = update_table_metadata(metadata, (RemoveSnapshotsUpdate(snapshot_ids=ids),))
    snapshots = [
        s.model_copy(update={"parent_snapshot_id": parents[s.snapshot_id]}) if s.snapshot_id in parents else s
        for s in metadata.snapshots
    ]
    listed = {m.manifest_path for h in heads if h in by_id for m in by_id[h].manifests(io)}
    garbage = [s.manifest_list for s in dropped]
    for snapshot in dropped:
        garbage += [
            m.manifest_path
            for m in snapshot.manifests(io)
            if m.added_snapshot_id in ours
            and m.manifest_path not in listed
            and m.manifest_path not in garbage
        ]
    return metadata.model_copy(update={"snapshots": snapshots}), garbage
