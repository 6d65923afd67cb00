"""Table-level catalog operations on top of the lake log: create, load, drop and commit.

A table commit writes a new Iceberg ``metadata.json`` (never visible to anyone until a lake version
points at it), then commits the next lake version with put-if-absent. When another writer took that
version first, the commit is retried on the newer version: unchanged table → just retry; changed
table → validate with Iceberg's rules and re-apply the delta, or raise ``CommitConflictError``.

The states of a commit decide what a failure may clean up (``Attempts``)::

    staged ──► attempted ──► committed        remove only files of lost attempts
                   │   └──► unknown           remove nothing of this attempt (CommitStateUnknownError)
                   └──► lost ──► (rebase) staged ...   that attempt's metadata files are garbage
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pyiceberg.io import FileIO
from pyiceberg.serializers import FromInputFile
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import (
    RemoveSnapshotRefUpdate,
    RemoveSnapshotsUpdate,
    SetPropertiesUpdate,
    TableUpdate,
    update_table_metadata,
)

from rowops import faults
from rowops.catalog.attempts import Attempts, CommitListener
from rowops.catalog.expired import EXPIRED_KEY, UUID_KEY
from rowops.catalog.history import commit_counts, created_counts
from rowops.catalog.log import LakeLog, LakeVersion, TableEntry, VersionTaken
from rowops.catalog.storage import Storage, sync_files
from rowops.commit import refs
from rowops.commit.rebase import find_conflict
from rowops.commit.row_delta import RowDelta, apply, main_branch_update
from rowops.commit.summary import snapshot_summary
from rowops.errors import (
    CommitConflictError,
    ConflictKind,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from rowops.meta.evolution import SchemaChange
from rowops.meta.fileio import make_io
from rowops.meta.files import TableFiles
from rowops.meta.metadata_cache import MetadataCache
from rowops.meta.paths import join, to_uri
from rowops.meta.v3 import metadata_json
from rowops.request.identifiers import TableIdentifier

MAX_COMMIT_ATTEMPTS = 100
Producer = Callable[["LoadedTable"], tuple[TableMetadata, list[str]]]


class TableScope(Protocol):
    """Where a table handle reads and commits: the live lake, a transaction, or a pinned version."""

    def load(self, ident: TableIdentifier) -> LoadedTable: ...

    def note_read(self, ident: TableIdentifier) -> None: ...

    def commit_delta(
        self,
        base: LoadedTable,
        base_files: TableFiles,
        delta: RowDelta,
        snapshot_id: int | None = None,
        listener: CommitListener | None = None,
    ) -> LoadedTable: ...

    def set_properties(self, base: LoadedTable, properties: dict[str, str]) -> LoadedTable: ...

    def evolve_schema(self, base: LoadedTable, change: SchemaChange) -> LoadedTable: ...

    def set_current_snapshot(self, base: LoadedTable, snapshot_id: int) -> LoadedTable: ...

    def update_refs(self, base: LoadedTable, change: refs.RefChange) -> LoadedTable: ...


@dataclass(frozen=True)
class LoadedTable:
    """A table as of one lake version: where its metadata is and what it says."""

    identifier: TableIdentifier
    lake_version: int
    metadata_location: str
    metadata: TableMetadata


class TableCatalog:
    """Create, load, drop and commit tables of one lakehouse directory."""

    def __init__(self, root: str, io: FileIO | None = None, storage: Storage | None = None) -> None:
        """Args:
        root: the lake's location (key form: a local path or ``s3://bucket/prefix``).
        io: FileIO for table files (default: local files).
        storage: where the lake log lives (default: the local directory ``root``).
        """
        self.root = root
        self.io: FileIO = io or make_io()
        self.log = LakeLog(root if storage is not None else Path(root), storage)
        self.on_commit: Callable[[int], None] = _ignore  # told every version this catalog commits
        self.metadata_cache = MetadataCache()

    # -- reading -----------------------------------------------------------------------------
    def location(self, ident: TableIdentifier) -> str:
        """The location of a new table: a full URI (``file:/lake/db/t``, ``s3://bucket/lake/db/t``)."""
        return to_uri(join(self.root, *ident.path_parts))

    def load(self, ident: TableIdentifier, version: LakeVersion | None = None) -> LoadedTable:
        version = version or self.log.latest()
        entry = version.get(str(ident))
        if entry is None:
            raise NoSuchTableError(f"Table {ident} does not exist in lakehouse {self.root}")
        return LoadedTable(
            ident, version.version, entry.metadata_location, self.read_metadata(entry.metadata_location)
        )

    def note_read(self, ident: TableIdentifier) -> None:
        """Single statements validate their own reads; nothing to record."""

    def read_metadata(self, location: str) -> TableMetadata:
        """The metadata file at ``location``, parsed once (``meta/metadata_cache.py``)."""
        return self.metadata_cache.get(
            location, lambda: FromInputFile.table_metadata(self.io.new_input(location))
        )

    def list_tables(self, namespace: tuple[str, ...]) -> list[str]:
        names = self.log.latest().names()
        found = sorted(n for n in names if TableIdentifier.parse(n).namespace == namespace)
        if not found and not any(
            TableIdentifier.parse(n).namespace[: len(namespace)] == namespace for n in names
        ):
            raise NoSuchNamespaceError(
                f"Namespace {'.'.join(namespace)} does not exist in lakehouse {self.root}"
            )
        return found

    # -- writing -----------------------------------------------------------------------------
    def metadata_path(self, metadata: TableMetadata) -> str:
        number = len(metadata.metadata_log) + 1
        return f"{metadata.location}/metadata/{number:05d}-{uuid.uuid4()}.metadata.json"

    def write_metadata(self, metadata: TableMetadata, path: str | None = None) -> str:
        path = path or self.metadata_path(metadata)
        text = metadata_json(metadata)
        with self.io.new_output(path).create(overwrite=False) as out:
            out.write(text.encode())
        self.metadata_cache.keep_written(path, metadata, text)
        return path

    def create(
        self, ident: TableIdentifier, metadata: TableMetadata, listener: CommitListener | None = None
    ) -> LoadedTable:
        """Commit a new table; its metadata file is removed again unless a version may reference it."""
        entry_uuid = str(metadata.table_uuid)
        commit = {"table": str(ident), "operation": "create", **created_counts(metadata)}
        txn = {"id": str(uuid.uuid4()), "commits": [commit]}
        attempts = Attempts(self.io, listener)
        try:
            location = attempts.stage(self.metadata_path(metadata))
            self.write_metadata(metadata, location)
            sync_files([location])
            while True:
                latest = self.log.latest()
                if str(ident) in latest:
                    raise TableAlreadyExistsError(f"Table {ident} already exists in lakehouse {self.root}")
                tables = {str(ident): TableEntry(location, entry_uuid)}
                version = attempts.commit(self.log, latest, tables, txn)
                if version is not None:
                    self.on_commit(version.version)
                    return LoadedTable(ident, version.version, location, metadata)
        except BaseException as exc:
            attempts.fail(exc)
            raise

    def drop(self, ident: TableIdentifier) -> None:
        txn = {"id": str(uuid.uuid4()), "commits": [{"table": str(ident), "operation": "drop"}]}
        while True:
            latest = self.log.latest()
            if str(ident) not in latest:
                raise NoSuchTableError(f"Table {ident} does not exist in lakehouse {self.root}")
            try:
                version = self.log.commit(latest, {str(ident): None}, txn)
                self.on_commit(version.version)
                return
            except VersionTaken:
                continue

    def commit_delta(
        self,
        base: LoadedTable,
        base_files: TableFiles,
        delta: RowDelta,
        snapshot_id: int | None = None,
        listener: CommitListener | None = None,
    ) -> LoadedTable:
        """Commit ``delta`` read at ``base``; rebase on concurrent commits when Iceberg's rules allow.

        Args:
            listener: told when an attempt starts referencing the delta's files (see
                :class:`CommitListener`).
        """
        snapshot_id = snapshot_id or new_snapshot_id()
        sync_files(f.file_path for f in (*delta.added_data, *delta.added_deletes))

        def produce(cur: LoadedTable) -> tuple[TableMetadata, list[str]]:
            cur_files = base_files
            if cur.metadata_location != base.metadata_location:
                cur_files = refs.files_at_head(cur.metadata, self.io, delta.branch, base_files)
                raise_on_conflict(delta, base_files, cur_files, cur, self.io)
            return apply(delta, cur.metadata, cur_files, self.io, snapshot_id, cur.metadata_location)

        info: dict[str, object] = {
            "operation": delta.extra_summary.get("rowops.operation", delta.operation.value),
            "snapshot-id": snapshot_id,
            **commit_counts(snapshot_summary(delta, base_files)),  # a rebase changes totals only
        }
        return self._swap(base, produce, info, listener)

    def set_current_snapshot(self, base: LoadedTable, snapshot_id: int) -> LoadedTable:
        """Point the table's main branch at an existing snapshot (rollback / restore).

        The choice was made looking at ``base``: if the table changed since, committing would silently
        discard what landed in between, so that is a conflict.
        """
        update = main_branch_update(snapshot_id)

        def produce(cur: LoadedTable) -> tuple[TableMetadata, list[str]]:
            if cur.metadata_location != base.metadata_location:
                raise CommitConflictError(
                    f"Table {base.identifier} changed while rolling back to snapshot {snapshot_id}; "
                    "the rollback would discard the commits that landed in between",
                    kind=ConflictKind.METADATA_CHANGED,
                    conflicting_snapshot_id=cur.metadata.current_snapshot_id,
                    help="Nothing was changed. Check table.snapshots() and call rollback_to again if the "
                    "rollback is still wanted.",
                )
            return update_table_metadata(cur.metadata, (update,), metadata_location=cur.metadata_location), []

        return self._swap(base, produce, {"operation": "set-current-snapshot", "snapshot-id": snapshot_id})

    def update_refs(self, base: LoadedTable, change: refs.RefChange) -> LoadedTable:
        """Create, drop or move branches and tags; ``change`` checks and builds on the newest table state."""

        def produce(cur: LoadedTable) -> tuple[TableMetadata, list[str]]:
            updates = change(cur.metadata)
            return update_table_metadata(cur.metadata, updates, metadata_location=cur.metadata_location), []

        return self._swap(base, produce, {"operation": "update-refs"})

    def evolve_schema(self, base: LoadedTable, change: SchemaChange) -> LoadedTable:
        """Commit a schema change; it rebases over data commits, not over another schema change."""
        name = str(base.identifier)

        def produce(cur: LoadedTable) -> tuple[TableMetadata, list[str]]:
            return change.apply(cur.metadata, cur.metadata_location, name), []

        return self._swap(
            base, produce, {"operation": change.operation, "schema-id": change.schema.schema_id}
        )

    def set_properties(self, base: LoadedTable, properties: dict[str, str]) -> LoadedTable:
        """Set table properties (a metadata-only commit that rebases trivially)."""
        update = SetPropertiesUpdate(updates=properties)

        def produce(cur: LoadedTable) -> tuple[TableMetadata, list[str]]:
            return update_table_metadata(cur.metadata, (update,), metadata_location=cur.metadata_location), []

        return self._swap(base, produce, {"operation": "set-properties"})

    def remove_snapshots(
        self, base: LoadedTable, choose: Callable[[TableMetadata], tuple[Sequence[str], Sequence[int]]]
    ) -> tuple[LoadedTable, list[int]]:
        """Remove the refs and snapshots ``choose`` picks on the newest table state (expiry); a
        metadata-only commit that rebases by choosing again. Returns the committed table and the ids removed."""
        removed: list[int] = []
        info: dict[str, object] = {"operation": "expire-snapshots"}

        def produce(cur: LoadedTable) -> tuple[TableMetadata, list[str]]:
            names, ids = choose(cur.metadata)
            removed[:] = ids
            info.update({EXPIRED_KEY: list(ids), UUID_KEY: str(cur.metadata.table_uuid)})  # the record
            updates: list[TableUpdate] = [RemoveSnapshotRefUpdate(ref_name=n) for n in names]
            updates.append(RemoveSnapshotsUpdate(snapshot_ids=list(removed)))
            return update_table_metadata(
                cur.metadata, tuple(updates), metadata_location=cur.metadata_location
            ), []

        committed = self._swap(base, produce, info)
        return committed, removed

    # -- internals ---------------------------------------------------------------------------
    def _swap(
        self,
        base: LoadedTable,
        produce: Producer,
        info: Mapping[str, object],
        listener: CommitListener | None = None,
    ) -> LoadedTable:
        """Commit metadata produced on the newest table state; the optimistic retry loop."""
        key = str(base.identifier)
        txn_id = str(uuid.uuid4())
        latest, prepared_on = self.log.read(base.lake_version), None
        metadata, location = base.metadata, base.metadata_location
        attempts = Attempts(self.io, listener)
        try:
            for _ in range(MAX_COMMIT_ATTEMPTS):
                entry = _entry_of(latest, base)
                if entry.metadata_location != prepared_on:  # (re)build on the table state of `latest`
                    current = self._loaded_at(base, latest, entry)
                    metadata, files = produce(current)
                    attempts.restage(files)
                    location = attempts.stage(self.metadata_path(metadata))
                    self.write_metadata(metadata, location)
                    sync_files(attempts.current)
                    prepared_on = entry.metadata_location
                commit = {
                    "table": key,
                    **info,
                    "base-metadata": entry.metadata_location,
                    "metadata": location,
                }
                tables = {key: TableEntry(location, entry.table_uuid)}
                faults.check("before-commit")
                version = attempts.commit(self.log, latest, tables, {"id": txn_id, "commits": [commit]})
                if version is None:
                    latest = self.log.latest()
                    continue
                faults.check("after-commit")
                attempts.remove_garbage()
                self.on_commit(version.version)
                return LoadedTable(base.identifier, version.version, location, metadata)
            raise CommitConflictError(
                f"Gave up committing to {key} after {MAX_COMMIT_ATTEMPTS} lost races for the next lake version",
                kind=ConflictKind.TOO_MANY_ATTEMPTS,
            )
        except BaseException as exc:
            attempts.fail(exc)
            raise

    def _loaded_at(self, base: LoadedTable, latest: LakeVersion, entry: TableEntry) -> LoadedTable:
        if entry.metadata_location == base.metadata_location:
            return base
        return LoadedTable(
            base.identifier,
            latest.version,
            entry.metadata_location,
            self.read_metadata(entry.metadata_location),
        )


def _entry_of(latest: LakeVersion, base: LoadedTable) -> TableEntry:
    """The table's entry in ``latest``; a conflict if it was dropped (or dropped and recreated)."""
    entry = latest.get(str(base.identifier))
    if entry is None or entry.table_uuid != str(base.metadata.table_uuid):
        raise CommitConflictError(
            f"Table {base.identifier} was dropped concurrently",
            kind=ConflictKind.TABLE_DROPPED,
            retry_safe=False,
            help="Nothing was committed. Recreate the table (or open the new one) before writing to it.",
        )
    return entry


def raise_on_conflict(
    delta: RowDelta, base_files: TableFiles, cur_files: TableFiles, cur: LoadedTable, io: FileIO
) -> None:
    """Raise ``CommitConflictError`` if ``delta`` (read at ``base_files``) conflicts with ``cur``."""
    conflict = find_conflict(delta, base_files, cur_files, cur.metadata, io=io)
    if conflict is not None:
        raise CommitConflictError(
            f"Commit to {cur.identifier} conflicts with concurrent snapshot {conflict.snapshot_id}: "
            f"{conflict.reason}" + (f": {', '.join(conflict.files[:5])}" if conflict.files else ""),
            kind=conflict.kind,
            conflicting_snapshot_id=conflict.snapshot_id,
            conflicting_files=conflict.files,
            retry_safe=True,
            table=str(cur.identifier),
        )


def _ignore(version: int) -> None:
    pass


def new_snapshot_id() -> int:
    """A positive 63-bit random snapshot id, as Iceberg's Java library generates them."""
    return uuid.uuid4().int & ((1 << 63) - 1)
