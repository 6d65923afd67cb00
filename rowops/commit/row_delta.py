"""RowDelta: one snapshot that adds data and delete files and removes data and delete files.

This is the commit of every rowops operation (copy-on-write, position deletes, equality deletes and
appends alike). ``apply`` turns a ``RowDelta`` and a base table state into new table metadata;
``commit/rebase.py`` decides whether a delta built on one base may be re-applied on a newer one.

Lifecycle of a commit (see rowops/catalog/tables.py for the loop)::

    build RowDelta ──► apply(base) ──► put-if-absent lake version ──► committed
                          ▲                      │ version taken
                          └── find_conflict ◄────┘ (CommitConflictError if unsafe)
"""

from __future__ import annotations

import contextlib
import time
import uuid
from dataclasses import dataclass, field

from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    DataFile,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import AddSnapshotUpdate, SetSnapshotRefUpdate, update_table_metadata

from rowops import faults
from rowops.commit import manifests as mf
from rowops.commit import refs
from rowops.commit.read_set import ReadSet
from rowops.commit.summary import manifests_summary, snapshot_summary
from rowops.meta.files import TableFiles
from rowops.meta.manifests import read_all, read_entries
from rowops.meta.v3 import V3, entry_id, next_row_id

__all__ = ["RowDelta", "apply", "main_branch_update", "snapshot_summary"]


@dataclass(frozen=True)
class RowDelta:
    """The file-level change of one operation, independent of the base it is applied to.

    Attributes:
        operation: Iceberg snapshot operation (append, overwrite, delete).
        added_data / added_deletes: new files written by this operation.
        removed_data / removed_deletes: live files this operation replaces (by path).
        referenced_data: data files this operation's position deletes point at; they must stay live.
        read_set: the rows this operation's outcome depended on (partitions and key ranges).
        serializable: reject concurrent data files that may hold rows of ``read_set`` (Iceberg's
            serializable level; under snapshot isolation only write-write conflicts are checked).
        blind: the operation read nothing (equality deletes, appends): it never conflicts.
        extra_summary: additional snapshot summary properties.
        schema_id: the table schema the operation was planned on and wrote its files with (None:
            unknown); committing on a table whose current schema is another one is a conflict.
        spec_id: the default partition spec the operation wrote its data and equality-delete files with
            (None: unknown); committing on a table whose default spec is another one is a conflict
            (``spec-changed``).
        rewrite_manifests: merge every pair of manifests that fits the target size, whatever
            ``commit.manifest.min-count-to-merge`` says (``Table.rewrite_manifests``).
        branch: the branch this commit builds on and moves (``main``: the table's current snapshot);
            its base files are those of the branch's head, and conflicts are checked against it.
    """

    operation: Operation
    added_data: tuple[DataFile, ...] = ()
    added_deletes: tuple[DataFile, ...] = ()
    removed_data: frozenset[str] = frozenset()
    removed_deletes: frozenset[str] = frozenset()
    referenced_data: frozenset[str] = frozenset()
    read_set: ReadSet = field(default_factory=ReadSet.everything)
    serializable: bool = True
    blind: bool = False
    extra_summary: dict[str, str] = field(default_factory=dict)
    schema_id: int | None = None
    rewrite_manifests: bool = False
    spec_id: int | None = None
    branch: str = MAIN_BRANCH

    @property
    def touched_data(self) -> frozenset[str]:
        return self.removed_data | self.referenced_data


def apply(
    delta: RowDelta,
    base: TableMetadata,
    base_files: TableFiles,
    io: FileIO,
    snapshot_id: int,
    base_location: str | None = None,
) -> tuple[TableMetadata, list[str]]:
    """Write manifests and manifest list for ``delta`` on top of ``base``.

    The base's manifests are read in parallel through the manifest cache (``meta/manifests.py``); the
    ones holding a removed file are rewritten; then small manifests are merged per
    ``commit.manifest-merge.enabled`` / ``commit.manifest.min-count-to-merge`` /
    ``commit.manifest.target-size-bytes`` (``commit/manifests.py``). If anything fails here, the files
    written so far are removed (nothing references them yet).

    Returns:
        The new table metadata and the metadata files written (to remove if the commit fails).
    """
    assert base_files.partition_filter is None, "a commit needs every live file of its base"
    written: list[str] = []
    try:
        manifests = _manifests(delta, base, base_files, io, snapshot_id, written)
        parent, seq = refs.head(base, delta.branch), base.next_sequence_number()
        list_path = f"{base.location}/metadata/snap-{snapshot_id}-{seq}-{_suffix()}.avro"
        written.append(list_path)
        first_row_id = (next_row_id(base) or 0) if base.format_version >= V3 else None
        added_rows = mf.write_list(io, list_path, snapshot_id, parent, seq, manifests, first_row_id)
    except BaseException:
        for path in written:
            _remove(io, path)
        raise
    snapshot = Snapshot(
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent,
        sequence_number=seq,
        timestamp_ms=int(time.time() * 1000),
        manifest_list=list_path,
        summary=_summary(delta, base_files, base.specs(), manifests, snapshot_id),
        schema_id=base.current_schema_id,
        first_row_id=first_row_id,
        added_rows=added_rows if first_row_id is not None else None,
    )
    updates = (AddSnapshotUpdate(snapshot=snapshot), refs.move(base, delta.branch, snapshot_id))
    return update_table_metadata(base, updates, metadata_location=base_location), written


def _summary(
    delta: RowDelta,
    base_files: TableFiles,
    specs: dict[int, PartitionSpec],
    manifests: list[ManifestFile],
    snapshot_id: int,
) -> Summary:
    summary = snapshot_summary(delta, base_files, specs)
    if not delta.rewrite_manifests:
        return summary
    counts = manifests_summary(base_files.manifests, manifests, snapshot_id)
    return Summary(summary.operation, **summary.additional_properties, **counts)


def _by_spec(files: tuple[DataFile, ...], default: int) -> dict[int, tuple[DataFile, ...]]:
    """Added files per partition spec id (position deletes take the spec of their data file, which may
    be older than the table's default one); a file built without one has the ``default`` spec."""
    groups: dict[int, list[DataFile]] = {}
    for f in files:
        try:
            spec_id = int(f.spec_id)
        except AttributeError:  # pyiceberg keeps the spec id outside the record: unset unless assigned
            spec_id = default
        groups.setdefault(spec_id, []).append(f)
    return {spec_id: tuple(group) for spec_id, group in sorted(groups.items())}


def _manifests(
    delta: RowDelta,
    base: TableMetadata,
    base_files: TableFiles,
    io: FileIO,
    snapshot_id: int,
    written: list[str],
) -> list[ManifestFile]:
    """The manifests of the new snapshot: new ones, the base's (rewritten without removed files),
    merged per the table's policy. Every file written is appended to ``written`` as soon as it exists."""
    metadata_dir = f"{base.location}/metadata"
    schema, version = base.schema(), base.format_version
    pending: dict[str, list[ManifestEntry]] = {}  # entries of manifests written by this commit
    new: dict[ManifestContent, list[ManifestFile]] = {ManifestContent.DATA: [], ManifestContent.DELETES: []}
    for content, added in (
        (ManifestContent.DATA, delta.added_data),
        (ManifestContent.DELETES, delta.added_deletes),
    ):
        for spec_id, files in _by_spec(
            added, base.default_spec_id
        ).items():  # one manifest per partition spec
            spec = base.specs()[spec_id]
            path = mf.manifest_path(metadata_dir, snapshot_id, len(written))
            written.append(path)
            new[content].append(mf.write_added(files, content, spec, schema, io, path, snapshot_id, version))
            pending[path] = [
                ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, data_file=f) for f in files
            ]
    removed = {entry_id(f.data_file) for f in base_files.data if f.path in delta.removed_data}
    removed |= {entry_id(f.data_file) for f in base_files.deletes if f.path in delta.removed_deletes}
    kept: dict[ManifestContent, list[ManifestFile]] = {ManifestContent.DATA: [], ManifestContent.DELETES: []}
    for manifest, entries in zip(base_files.manifests, read_all(base_files.manifests, io), strict=True):
        if not entries:
            continue
        if not any(entry_id(e.data_file) in removed for e in entries):
            kept[manifest.content].append(manifest)
            continue
        path = mf.manifest_path(metadata_dir, snapshot_id, len(written))
        written.append(path)
        manifest_spec = base.specs()[manifest.partition_spec_id]
        rewritten = mf.rewrite_without(
            manifest, entries, removed, manifest_spec, schema, io, path, snapshot_id, version
        )
        kept[manifest.content].append(rewritten)
        pending[path] = [_rewritten(e, removed, snapshot_id) for e in entries]
    target = mf.MergeTarget(base.specs(), schema, io, metadata_dir, snapshot_id, version)
    policy = mf.MergePolicy.of(base.properties)
    if delta.rewrite_manifests:  # maintenance: every bin of two or more manifests is merged
        policy = mf.MergePolicy(enabled=True, min_count=2, target_bytes=policy.target_bytes)

    def entries_of(m: ManifestFile) -> list[ManifestEntry]:
        return (
            pending[m.manifest_path] if m.manifest_path in pending else read_entries(m, io, live_only=False)
        )

    out: list[ManifestFile] = []
    for content in (ManifestContent.DATA, ManifestContent.DELETES):
        merged = mf.merge_manifests(new[content] + kept[content], policy, target, entries_of)
        written.extend(
            m.manifest_path
            for m in merged
            if m.manifest_path not in written and m.added_snapshot_id == snapshot_id
        )
        out.extend(merged)
    faults.check("manifests-merged")
    listed = {m.manifest_path for m in out}
    for path in [p for p in written if p not in listed]:  # this commit's manifests merged away
        _remove(io, path)
        written.remove(path)
    return out


def _rewritten(entry: ManifestEntry, removed: set[str], snapshot_id: int) -> ManifestEntry:
    """An entry as ``rewrite_without`` wrote it (DELETED by this snapshot, or EXISTING as it was)."""
    if entry_id(entry.data_file) in removed:
        return ManifestEntry.from_args(
            status=ManifestEntryStatus.DELETED,
            snapshot_id=snapshot_id,
            sequence_number=entry.sequence_number,
            file_sequence_number=entry.file_sequence_number,
            data_file=entry.data_file,
        )
    return entry  # EXISTING/ADDED of an earlier snapshot: merged as EXISTING


def _remove(io: FileIO, path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        io.delete(path)


def main_branch_update(snapshot_id: int) -> SetSnapshotRefUpdate:
    """The metadata update that points the main branch at ``snapshot_id``."""
    return SetSnapshotRefUpdate(  # type: ignore[call-arg]  # optional retention fields
        ref_name=MAIN_BRANCH, type=SnapshotRefType.BRANCH, snapshot_id=snapshot_id
    )


def _suffix() -> str:
    return uuid.uuid4().hex[:12]
