"""Table-level catalog operations on top of the lake log: create, load, drop and commit.

A table commit writes a new Iceberg ``metadata.json`` (never visible to anyone until a lake version
points at it), then commits the next lake version with put-if-absent. When another writer took that
version first, the commit is retried on the newer version: unchanged table → just retry; changed
table → validate with Iceberg's rules and re-apply the delta, or raise ``CommitConflictError``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.serializers import FromInputFile, ToOutputFile
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import SetPropertiesUpdate, update_table_metadata

from rowops import faults
from rowops.catalog.log import LakeLog, LakeVersion, TableEntry, VersionTaken
from rowops.commit.row_delta import RowDelta, apply, find_conflict, main_branch_update
from rowops.errors import CommitConflictError, NoSuchNamespaceError, NoSuchTableError, TableAlreadyExistsError
from rowops.meta.files import TableFiles, live_files
from rowops.spec.identifiers import TableIdentifier

MAX_COMMIT_ATTEMPTS = 100
Producer = Callable[["LoadedTable"], tuple[TableMetadata, list[str]]]


@dataclass(frozen=True)
class LoadedTable:
    """A table as of one lake version: where its metadata is and what it says."""

    identifier: TableIdentifier
    lake_version: int
    metadata_location: str
    metadata: TableMetadata


class TableCatalog:
    """Create, load, drop and commit tables of one lakehouse directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log = LakeLog(root)
        self.io: FileIO = PyArrowFileIO()

    # -- reading -----------------------------------------------------------------------------
    def location(self, ident: TableIdentifier) -> str:
        return str(self.root.joinpath(*ident.path_parts))

    def load(self, ident: TableIdentifier, version: LakeVersion | None = None) -> LoadedTable:
        version = version or self.log.latest()
        entry = version.tables.get(str(ident))
        if entry is None:
            raise NoSuchTableError(f"Table {ident} does not exist in lakehouse {self.root}")
        return LoadedTable(
            ident, version.version, entry.metadata_location, self.read_metadata(entry.metadata_location)
        )

    def read_metadata(self, location: str) -> TableMetadata:
        return FromInputFile.table_metadata(self.io.new_input(location))

    def list_tables(self, namespace: tuple[str, ...]) -> list[str]:
        names = self.log.latest().tables
        found = sorted(n for n in names if TableIdentifier.parse(n).namespace == namespace)
        if not found and not any(
            TableIdentifier.parse(n).namespace[: len(namespace)] == namespace for n in names
        ):
            raise NoSuchNamespaceError(
                f"Namespace {'.'.join(namespace)} does not exist in lakehouse {self.root}"
            )
        return found

    # -- writing -----------------------------------------------------------------------------
    def write_metadata(self, metadata: TableMetadata) -> str:
        number = len(metadata.metadata_log) + 1
        path = f"{metadata.location}/metadata/{number:05d}-{uuid.uuid4()}.metadata.json"
        ToOutputFile.table_metadata(metadata, self.io.new_output(path))
        return path

    def create(self, ident: TableIdentifier, metadata: TableMetadata) -> LoadedTable:
        location = self.write_metadata(metadata)
        entry = TableEntry(location, str(metadata.table_uuid))
        txn = {"id": str(uuid.uuid4()), "commits": [{"table": str(ident), "operation": "create"}]}
        while True:
            latest = self.log.latest()
            if str(ident) in latest.tables:
                raise TableAlreadyExistsError(f"Table {ident} already exists in lakehouse {self.root}")
            try:
                version = self.log.commit(latest, {**latest.tables, str(ident): entry}, txn)
                return LoadedTable(ident, version.version, location, metadata)
            except VersionTaken:
                continue

    def drop(self, ident: TableIdentifier) -> None:
        txn = {"id": str(uuid.uuid4()), "commits": [{"table": str(ident), "operation": "drop"}]}
        while True:
            latest = self.log.latest()
            if str(ident) not in latest.tables:
                raise NoSuchTableError(f"Table {ident} does not exist in lakehouse {self.root}")
            tables = {k: v for k, v in latest.tables.items() if k != str(ident)}
            try:
                self.log.commit(latest, tables, txn)
                return
            except VersionTaken:
                continue

    def commit_delta(
        self, base: LoadedTable, base_files: TableFiles, delta: RowDelta, snapshot_id: int | None = None
    ) -> LoadedTable:
        """Commit ``delta`` read at ``base``; rebase on concurrent commits when Iceberg's rules allow."""
        snapshot_id = snapshot_id or new_snapshot_id()

        def produce(cur: LoadedTable) -> tuple[TableMetadata, list[str]]:
            cur_files = base_files
            if cur.metadata_location != base.metadata_location:
                cur_files = live_files(cur.metadata, self.io)
                _raise_on_conflict(delta, base_files, cur_files, cur)
            return apply(delta, cur.metadata, cur_files, self.io, snapshot_id, cur.metadata_location)

        info = {"operation": delta.operation.value, "snapshot-id": snapshot_id}
        return self._swap(base, produce, info)

    def set_current_snapshot(self, base: LoadedTable, snapshot_id: int) -> LoadedTable:
        """Point the table's main branch at an existing snapshot (rollback / restore)."""
        update = main_branch_update(snapshot_id)

        def produce(cur: LoadedTable) -> tuple[TableMetadata, list[str]]:
            return update_table_metadata(cur.metadata, (update,), metadata_location=cur.metadata_location), []

        return self._swap(base, produce, {"operation": "set-current-snapshot", "snapshot-id": snapshot_id})

    def set_properties(self, base: LoadedTable, properties: dict[str, str]) -> LoadedTable:
        """Set table properties (a metadata-only commit that rebases trivially)."""
        update = SetPropertiesUpdate(updates=properties)

        def produce(cur: LoadedTable) -> tuple[TableMetadata, list[str]]:
            return update_table_metadata(cur.metadata, (update,), metadata_location=cur.metadata_location), []

        return self._swap(base, produce, {"operation": "set-properties"})

    # -- internals ---------------------------------------------------------------------------
    def _swap(self, base: LoadedTable, produce: Producer, info: Mapping[str, object]) -> LoadedTable:
        """Commit metadata produced on the newest table state; the optimistic retry loop."""
        key = str(base.identifier)
        current, latest = base, self.log.read(base.lake_version)
        written: list[str] = []
        try:
            metadata, files = produce(current)
            written += files
            location = self.write_metadata(metadata)
            written.append(location)
            for _ in range(MAX_COMMIT_ATTEMPTS):
                entry = latest.tables.get(key)
                if entry is None:
                    raise CommitConflictError(
                        f"Table {key} was dropped concurrently",
                        retry_safe=False,
                        help="Recreate the table before writing to it.",
                    )
                if entry.metadata_location != current.metadata_location:
                    current = LoadedTable(
                        base.identifier,
                        latest.version,
                        entry.metadata_location,
                        self.read_metadata(entry.metadata_location),
                    )
                    metadata, files = produce(current)
                    written += files
                    location = self.write_metadata(metadata)
                    written.append(location)
                commit = {
                    "table": key,
                    **info,
                    "base-metadata": entry.metadata_location,
                    "metadata": location,
                }
                faults.check("before-commit")
                try:
                    version = self.log.commit(
                        latest,
                        {**latest.tables, key: TableEntry(location, entry.table_uuid)},
                        {"id": str(uuid.uuid4()), "commits": [commit]},
                    )
                except VersionTaken:
                    latest = self.log.latest()
                    continue
                for stale in written:
                    if stale not in files and stale != location:
                        self.io.delete(stale)
                return LoadedTable(base.identifier, version.version, location, metadata)
            raise CommitConflictError(f"Gave up committing to {key} after {MAX_COMMIT_ATTEMPTS} attempts")
        except BaseException:
            for path in written:
                self.io.delete(path)
            raise


def _raise_on_conflict(
    delta: RowDelta, base_files: TableFiles, cur_files: TableFiles, cur: LoadedTable
) -> None:
    conflict = find_conflict(delta, base_files, cur_files, cur.metadata)
    if conflict is not None:
        raise CommitConflictError(
            f"Commit to {cur.identifier} conflicts with concurrent snapshot {conflict.snapshot_id}: "
            f"{conflict.reason}: {', '.join(conflict.files[:5])}",
            conflicting_snapshot_id=conflict.snapshot_id,
            conflicting_files=conflict.files,
            retry_safe=True,
        )


def new_snapshot_id() -> int:
    """A positive 63-bit random snapshot id, as Iceberg's Java library generates them."""
    return uuid.uuid4().int & ((1 << 63) - 1)
