"""A table of the lakehouse and the MERGE builder."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata

from rowops.catalog.branches import BranchScope
from rowops.catalog.tables import LoadedTable, TableScope
from rowops.commit import refs as snapshot_refs
from rowops.errors import InvalidInputError
from rowops.exec.checks.validation import require_dataframe
from rowops.merge_builder import MergeBuilder
from rowops.meta.files import TableFiles, live_files
from rowops.metadata_tables import TableInspector
from rowops.request.identifiers import TableIdentifier
from rowops.request.inputs import assignment_map, check_properties, checked_call, optional_sql
from rowops.request.operations import (
    DeleteSpec,
    UpdateSpec,
    normalize_assignments,
)
from rowops.request.results import HealthReport, MaintenanceResult, OperationResult
from rowops.run import maintenance, retention, row_level
from rowops.run.append import append_table
from rowops.run.feed import appended_rows, table_changes
from rowops.run.read import read_table
from rowops.run.table_history import table_history
from rowops.run.target import TableLake
from rowops.table_evolution import TableEvolution

if TYPE_CHECKING:
    from rowops.exec.spark.frames import DataFrame


class Table(TableEvolution):
    """A handle on a table; every call reads the newest state its scope shows.

    The scope is the live lake (the newest committed version), a transaction (its pinned version
    plus its own writes) or a read-only lake version (``lake.at(...)``).
    """

    def __init__(self, lake: TableLake, identifier: TableIdentifier, scope: TableScope | None = None) -> None:
        self.lake = lake
        self.identifier = identifier
        self.scope: TableScope = scope if scope is not None else lake.catalog

    def __repr__(self) -> str:
        return f"Table({str(self.identifier)!r}, lake={self.lake.location!r})"

    @property
    def name(self) -> str:
        return str(self.identifier)

    def load(self) -> LoadedTable:
        """The table as its scope sees it (the newest lake version outside transactions)."""
        return self.scope.load(self.identifier)

    @property
    def metadata(self) -> TableMetadata:
        return self.load().metadata

    @property
    def metadata_location(self) -> str:
        """Path of the current Iceberg ``metadata.json``; any Iceberg reader can load it."""
        return self.load().metadata_location

    @property
    def schema(self) -> Schema:
        return self.metadata.schema()

    @property
    def current_snapshot_id(self) -> int | None:
        return self.metadata.current_snapshot_id

    @property
    def inspect(self) -> TableInspector:
        """Iceberg's metadata tables as DataFrames: ``t.inspect.snapshots()``, ``files()``, ... (the names
        and columns of ``db.t.snapshots`` etc. in Iceberg's Spark SQL)."""
        return TableInspector(self)

    def history(self) -> DataFrame:
        """The table's commits as Delta's ``DESCRIBE HISTORY`` shows them, newest first: ``version``,
        ``timestamp``, ``operation``, ``operationParameters``, ``operationMetrics`` (Delta's names for
        the snapshot summary's counts), ... (``run/table_history.py``)."""
        return table_history(self)

    def snapshots(self) -> list[dict[str, object]]:
        """Snapshot id, parent, sequence number, time and summary of every snapshot, oldest first."""
        return [
            {
                "snapshot_id": s.snapshot_id,
                "parent_id": s.parent_snapshot_id,
                "sequence_number": s.sequence_number,
                "timestamp_ms": s.timestamp_ms,
                "summary": {"operation": s.summary.operation.value, **s.summary.additional_properties}
                if s.summary
                else {},
            }
            for s in self.metadata.snapshots
        ]

    def files(self, snapshot_id: int | None = None) -> TableFiles:
        """Live data and delete files of a snapshot (metadata only)."""
        return live_files(self.metadata, self.lake.catalog.io, snapshot_id)

    @checked_call
    def to_df(
        self,
        snapshot_id: int | None = None,
        where: str | None = None,
        ref: str | None = None,
        *,
        start: int | datetime | None = None,
        end: int | datetime | None = None,
        start_snapshot_id: int | None = None,
        end_snapshot_id: int | None = None,
    ) -> DataFrame:
        """A Spark DataFrame of the snapshot's rows with all position and equality deletes applied.

        Args:
            snapshot_id: a past snapshot to read (time travel); None: the current one.
            where: a Spark SQL filter: the same rows as ``to_df().where(where)``, but manifests and data
                files whose partition values or column bounds cannot match are never read
                (``rowops/run/read.py``).
            ref: a branch or tag to read (its snapshot), instead of ``snapshot_id``.
            start, end / start_snapshot_id, end_snapshot_id: an incremental read instead: the rows
                appended by the commits of this range (as :meth:`changes`: start exclusive, end
                inclusive); a range with a commit that deletes or rewrites rows is refused.
        """
        if (start, end, start_snapshot_id, end_snapshot_id) != (None, None, None, None):
            if (snapshot_id, ref) != (None, None):
                raise InvalidInputError(
                    "to_df takes a snapshot (snapshot_id=, ref=) or a range (start=, end=, ...), not both",
                    help="Read one snapshot, or the rows appended in a range; nothing was read.",
                )
            text = optional_sql(where, "where=")
            return appended_rows(self, start, end, start_snapshot_id, end_snapshot_id, text)
        metadata = self.metadata
        if ref is not None:
            if snapshot_id is not None:
                raise InvalidInputError("to_df takes snapshot_id or ref, not both")
            snapshot_id = snapshot_refs.lookup(metadata, snapshot_refs.check_name(ref)).snapshot_id
        if snapshot_id is not None and metadata.snapshot_by_id(snapshot_id) is None:
            raise InvalidInputError(
                f"Table {self.name} has no snapshot {snapshot_id}",
                help="List snapshots with table.snapshots().",
            )
        df = read_table(self, metadata, snapshot_id, optional_sql(where, "where="))
        self.scope.note_read(self.identifier)
        return df

    @checked_call
    def changes(
        self,
        start: int | datetime | None = None,
        end: int | datetime | None = None,
        *,
        start_snapshot_id: int | None = None,
        end_snapshot_id: int | None = None,
        net: bool = False,
    ) -> DataFrame:
        """The change feed: every row inserted, deleted or updated by the commits in a range.

        Columns: the table's, then ``_change_type`` (``insert``, ``delete``, ``update_preimage``,
        ``update_postimage``), ``_commit_version`` (lake version), ``_commit_snapshot_id``,
        ``_commit_timestamp`` and ``_change_ordinal`` (the commit's position among the range's commits
        of this table, from 0; maintenance rewrites are not counted, as in Iceberg's changelog).

        Args:
            start: lake version (exclusive) or time after which commits count; None: the beginning.
            end: lake version (inclusive) or time up to which commits count; None: this handle's.
            start_snapshot_id / end_snapshot_id: the range in snapshot ids instead (start exclusive,
                an ancestor of end); each snapshot is a commit.
            net: one net change per row over the whole range instead of one per commit.
        """
        return table_changes(self, start, end, start_snapshot_id, end_snapshot_id, net)

    # -- branches and tags (Iceberg snapshot refs; rowops/commit/refs.py, catalog/branches.py) -----
    def refs(self) -> dict[str, dict[str, object]]:
        """Every branch and tag: ``{"main": {"type": "branch", "snapshot_id": ..., retention...}, ...}``."""
        return snapshot_refs.describe(self.metadata)

    @checked_call
    def create_branch(
        self,
        name: str,
        snapshot_id: int | None = None,
        *,
        max_ref_age: timedelta | None = None,
        min_snapshots_to_keep: int | None = None,
        max_snapshot_age: timedelta | None = None,
    ) -> Table:
        """Create branch ``name`` at ``snapshot_id`` (None: this handle's current snapshot) and return its
        handle (``branch(name)``).

        Args:
            max_ref_age: ``expire_snapshots`` drops the branch once its head is older than this.
            min_snapshots_to_keep: the newest snapshots of the branch that expiry always keeps.
            max_snapshot_age: expiry keeps the branch's snapshots younger than this.
        """
        change = snapshot_refs.create(
            snapshot_refs.check_name(name),
            snapshot_refs.BRANCH,
            snapshot_id if snapshot_id is not None else self.current_snapshot_id,
            snapshot_refs.millis(max_ref_age, "max_ref_age"),
            snapshot_refs.count(min_snapshots_to_keep, "min_snapshots_to_keep"),
            snapshot_refs.millis(max_snapshot_age, "max_snapshot_age"),
        )
        self.scope.update_refs(self.load(), change)
        return self.branch(name)

    @checked_call
    def create_tag(
        self, name: str, snapshot_id: int | None = None, *, max_ref_age: timedelta | None = None
    ) -> None:
        """Tag ``snapshot_id`` (None: this handle's current snapshot) as ``name``; expiry keeps it (and
        drops the tag once older than ``max_ref_age``, when given)."""
        target = snapshot_id if snapshot_id is not None else self.current_snapshot_id
        age = snapshot_refs.millis(max_ref_age, "max_ref_age")
        self.scope.update_refs(
            self.load(), snapshot_refs.create(snapshot_refs.check_name(name), snapshot_refs.TAG, target, age)
        )

    @checked_call
    def drop_branch(self, name: str) -> None:
        """Remove branch ``name`` (never ``main``); its snapshots stay until ``expire_snapshots``."""
        self.scope.update_refs(
            self.load(), snapshot_refs.drop(snapshot_refs.check_name(name), snapshot_refs.BRANCH)
        )

    @checked_call
    def drop_tag(self, name: str) -> None:
        """Remove tag ``name``; its snapshot stays until ``expire_snapshots``."""
        self.scope.update_refs(
            self.load(), snapshot_refs.drop(snapshot_refs.check_name(name), snapshot_refs.TAG)
        )

    @checked_call
    def branch(self, name: str) -> Table:
        """A handle whose reads and writes (``merge``/``update``/``delete``/``append``) use branch ``name``:
        commits build on the branch's head and move only it; ``main`` stays where it is."""
        snapshot_refs.writable(self.metadata, snapshot_refs.check_name(name))
        inner = self.scope.inner if isinstance(self.scope, BranchScope) else self.scope
        return Table(self.lake, self.identifier, BranchScope(inner, name))

    @checked_call
    def fast_forward(self, to: str, source: str) -> None:
        """Move branch ``to`` (e.g. ``main``) to the snapshot of ``source`` (write-audit-publish).

        Raises:
            NotFastForwardError: ``to`` is not an ancestor of ``source`` (nothing is changed).
        """
        self.scope.update_refs(
            self.load(),
            snapshot_refs.fast_forward(snapshot_refs.check_name(to), snapshot_refs.check_name(source)),
        )

    @checked_call
    def append(self, df: DataFrame) -> OperationResult:
        """Append rows (columns by name; types must fit the table)."""
        return append_table(self, require_dataframe(df, "append's df"))

    @checked_call
    def merge(self, source: DataFrame, on: str | list[str]) -> MergeBuilder:
        """Start a MERGE of ``source`` (alias ``s``) into this table (alias ``t``).

        Args:
            source: the change rows.
            on: a Spark SQL join condition using ``t.`` and ``s.``, or a list of key columns.
        """
        return MergeBuilder(self, require_dataframe(source, "the MERGE source"), on)

    @checked_call
    def update(
        self, set: Mapping[str, str], where: str | None = None, strategy: str = "auto"
    ) -> OperationResult:
        """UPDATE the rows matching ``where`` with ``set`` (column -> Spark SQL expression)."""
        spec = UpdateSpec(normalize_assignments(assignment_map(set, "set=")), optional_sql(where, "where="))
        return row_level.run(self, spec, None, strategy)

    @checked_call
    def delete(self, where: str | None = None, strategy: str = "auto") -> OperationResult:
        """DELETE the rows matching ``where`` (all rows when None)."""
        return row_level.run(self, DeleteSpec(optional_sql(where, "where=")), None, strategy)

    # -- maintenance (rowops/run/maintenance.py; each a normal commit that never changes the rows) ------
    @checked_call
    def compact_position_deletes(self) -> MaintenanceResult:
        """Minor compaction: merge the position-delete files of each data file into one (no data rewrite)."""
        prepare = maintenance.prepare_compact_position_deletes
        return maintenance.rewrite(self, "compact_position_deletes", lambda: prepare(self))

    @checked_call
    def convert_equality_deletes(self) -> MaintenanceResult:
        """Replace every equality-delete file by position deletes of the rows it removes."""
        prepare = maintenance.prepare_convert_equality_deletes
        return maintenance.rewrite(self, "convert_equality_deletes", lambda: prepare(self))

    @checked_call
    def compact(
        self, where: str | None = None, max_bytes: int | None = None, target_file_size: int | None = None
    ) -> MaintenanceResult:
        """Major compaction: rewrite data files with their deletes applied, bin-packed to the target file
        size and in the table's sort order; delete files that no longer apply are dropped.

        Args:
            where: a partition filter over partition source columns (``"region = 'eu'"``).
            max_bytes: the bytes of data files one run may rewrite (most indebted partitions first).
            target_file_size: bytes per written file (default: ``write.target-file-size-bytes``, 128 MiB).
        """
        prepare = maintenance.prepare_compact
        return maintenance.rewrite(self, "compact", lambda: prepare(self, where, max_bytes, target_file_size))

    @checked_call
    def rewrite_manifests(self) -> MaintenanceResult:
        """Merge the current snapshot's manifests into as few as fit ``commit.manifest.target-size-bytes``
        (8 MB), per content and partition spec: one metadata-only ``replace`` commit (no data file is
        read or written); commits then merge again per ``commit.manifest.min-count-to-merge``."""
        return maintenance.with_lineage(
            self, "rewrite_manifests", lambda: maintenance.rewrite_manifests(self)
        )

    @checked_call
    def expire_snapshots(
        self, older_than: datetime | timedelta | None = None, retain_last: int | None = None
    ) -> MaintenanceResult:
        """Remove old snapshots and delete the files only they referenced.

        Never the current snapshot, a ref's (tag or branch) or the newest ``retain_last`` of main, and
        never a file that a snapshot of any lake version still offered references (lines of history a
        ``lake.rollback_to`` left included). Lake versions whose state of this table is an expired
        snapshot can no longer read it (``SnapshotExpiredError`` naming this expiry). Refused
        (``GcDisabledError``) when the table's ``gc.enabled`` is false.

        Args:
            older_than: only snapshots committed before this time (a datetime) or age (a timedelta);
                None: the table's ``history.expire.max-snapshot-age-ms`` (Iceberg's default: 5 days).
                ``timedelta(0)``: any age.
            retain_last: the newest snapshots of the main branch always kept (>= 1); None: the table's
                ``history.expire.min-snapshots-to-keep`` (default 1).
        """
        return maintenance.with_lineage(
            self, "expire_snapshots", lambda: retention.expire_snapshots(self, older_than, retain_last)
        )

    @checked_call
    def remove_orphans(
        self, older_than: timedelta = timedelta(days=3), dry_run: bool = False
    ) -> MaintenanceResult:
        """Delete files under the table's ``data/`` and ``metadata/`` that no lake version references and
        that are older than ``older_than`` (younger ones may belong to a commit in flight). Refused
        (``GcDisabledError``) when the table's ``gc.enabled`` is false.

        ``dry_run``: delete nothing, list them in ``result.paths``. Another catalog's pointer files
        (``version-hint.text``) are never removed; a table registered from another catalog raises
        ``ForeignFilesError`` (its location is that catalog's: rowops cannot prove a file there unused).
        """
        return maintenance.with_lineage(
            self, "remove_orphans", lambda: retention.remove_orphans(self, older_than, dry_run)
        )

    def health(self) -> HealthReport:
        """The table's maintenance debt (delete files, deleted rows, small files, read overhead) and advice."""
        return maintenance.health(self)

    def set_properties(self, **properties: str) -> None:
        """Set Iceberg table properties, e.g. ``rowops.read-weight``, ``rowops.strategy``,
        ``rowops.colocated-join.enabled``, ``write.target-file-size-bytes`` (a metadata-only commit).

        Pass keys with dots as ``set_properties(**{"rowops.read-weight": "3"})``.
        """
        values = {k: str(v) for k, v in properties.items()}
        check_properties(values)
        self.scope.set_properties(self.load(), values)

    @checked_call
    def rollback_to(self, snapshot_id: int) -> None:
        """Make ``snapshot_id`` the current snapshot again (a new lake version; history is kept).

        Raises:
            CommitConflictError: the table changed while rolling back (nothing is changed then).
        """
        loaded = self.load()
        if loaded.metadata.snapshot_by_id(snapshot_id) is None:
            raise InvalidInputError(f"Table {self.name} has no snapshot {snapshot_id}")
        self.scope.set_current_snapshot(loaded, snapshot_id)
