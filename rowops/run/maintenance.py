"""Running table maintenance: plan (``rowops/maintenance``), write (``exec/rewriting/maintenance.py``), commit.

Each rewrite is one ``replace`` snapshot through the table's usual commit path
(``TableScope.commit_delta``) with Iceberg's RewriteFiles validations (``commit.rebase.find_conflict``
on a non-blind, snapshot-isolated delta): data files it rewrites or gives new position deletes must
still be live, and no concurrent delete may have reached them (the concurrent writer wins: a
``CommitConflictError``, retry-safe); concurrent appends and deletes elsewhere rebase. A rewrite never
changes the rows any reader sees. An operation with nothing to do commits nothing.

Rewrites are prepared (files written in a staging area) and committed in two steps
(:class:`PreparedRewrite`), so a caller (or a test) can tell exactly when the commit happens.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pyiceberg.manifest import DataFile, DataFileContent
from pyiceberg.table.snapshots import Operation

from rowops.catalog.branches import BranchScope
from rowops.catalog.tables import LoadedTable
from rowops.catalog.views import PinnedView
from rowops.commit.manifests import MergePolicy, mergeable
from rowops.commit.row_delta import RowDelta
from rowops.errors import InvalidInputError, ReadOnlyError, is_cleanable
from rowops.exec.checks.expressions import case_sensitive
from rowops.exec.rewriting.maintenance import (
    deleted_positions,
    merged_positions,
    rewrite_data,
    write_positions,
)
from rowops.exec.spark.job_errors import spark_errors
from rowops.exec.spark.jobs import job_step, operation_jobs
from rowops.exec.spark.session import operation_conf
from rowops.exec.writing.write import Staging
from rowops.maintenance.compaction import check_positive, partition_filter, plan_compaction, target_file_size
from rowops.maintenance.health import health_report
from rowops.maintenance.index import covered_targets, dangling_deletes
from rowops.meta.delete_index import DeleteIndex
from rowops.meta.files import LiveFile, TableFiles, data_files_from_parquet, live_files
from rowops.request.inputs import optional_sql
from rowops.request.results import HealthReport, MaintenanceResult
from rowops.run.lineage import lineage_run, table_dataset
from rowops.run.reporting import log_maintenance

if TYPE_CHECKING:
    from rowops.run.target import TableTarget

COMPACT_POSITION_DELETES = "compact_position_deletes"
CONVERT_EQUALITY_DELETES = "convert_equality_deletes"
COMPACT = "compact"
REWRITE_MANIFESTS = "rewrite_manifests"


@dataclass
class PreparedRewrite:
    """A rewrite whose files are written and whose delta is built, not yet committed."""

    table: TableTarget
    operation: str
    loaded: LoadedTable
    files: TableFiles
    delta: RowDelta
    stage: Staging
    read: tuple[LiveFile, ...]
    started: float
    rewritten: int = 0

    def commit(self) -> MaintenanceResult:
        """Commit the rewrite (rebasing or raising ``CommitConflictError``); staged files are removed on
        any failure before a lake version that references them is attempted."""
        try:
            committed = self.table.scope.commit_delta(
                self.loaded, self.files, self.delta, listener=self.stage
            )
        except BaseException as exc:
            if is_cleanable(exc):
                self.stage.discard()
            raise
        return self._result(committed.metadata.current_snapshot_id)

    def abort(self) -> None:
        """Remove the staged files (nothing was committed)."""
        self.stage.discard()

    def _result(self, snapshot_id: int | None) -> MaintenanceResult:
        added = (*self.delta.added_data, *self.delta.added_deletes)
        removed_paths = self.delta.removed_data | self.delta.removed_deletes
        removed = [f for f in (*self.files.data, *self.files.deletes) if f.path in removed_paths]
        return MaintenanceResult(
            operation=self.operation,
            snapshot_id=snapshot_id,
            files_read=len(self.read),
            bytes_read=sum(f.size for f in self.read),
            files_written=len(added),
            bytes_written=sum(int(f.file_size_in_bytes) for f in added),
            files_removed=len(removed),
            bytes_removed=sum(f.size for f in removed),
            duration_s=time.perf_counter() - self.started,
            data_files_rewritten=self.rewritten,
            delete_files_removed=len(self.delta.removed_deletes),
        )


def logged(table: TableTarget, result: MaintenanceResult) -> MaintenanceResult:
    log_maintenance(table.name, result)
    return result


def nothing(table: TableTarget, operation: str, started: float) -> MaintenanceResult:
    return logged(table, MaintenanceResult(operation, None, duration_s=time.perf_counter() - started))


def require_live(table: TableTarget, operation: str) -> None:
    """Maintenance runs alone on the newest table state: not in a transaction, not on a past version."""
    if isinstance(table.scope, PinnedView):
        raise ReadOnlyError(f"{operation}: table {table.name} is read as of a past lake version")
    if isinstance(table.scope, BranchScope):
        raise InvalidInputError(
            f"{operation} runs on the table, not on a branch handle (table {table.name})",
            help="Call it on lake.table(name); it covers every branch and tag. Nothing was changed.",
        )
    if table.scope is not table.lake.catalog:
        raise InvalidInputError(
            f"{operation} runs alone, not inside a transaction (table {table.name})",
            help="Call it on lake.table(name) outside `with lake.transaction()`. Nothing was changed.",
        )


def _delta(operation: str, **files: object) -> RowDelta:
    return RowDelta(
        Operation.REPLACE,
        serializable=False,  # a rewrite does not depend on what else is in the table: appends rebase
        extra_summary={"rowops.operation": operation.replace("_", "-"), "rowops.strategy": "maintenance"},
        **files,  # type: ignore[arg-type]
    )


def _prepare(table: TableTarget, operation: str, loaded: LoadedTable, write: _Writer) -> PreparedRewrite:
    """Run ``write`` in a fresh staging area, removed again if writing fails."""
    stage = Staging(loaded.metadata.location, table.lake.catalog.io)
    try:
        spark = table.lake.spark
        with operation_conf(spark), operation_jobs(spark, operation, table.name), spark_errors(operation):
            job_step("rewrite")
            return write(stage)
    except BaseException as exc:
        if is_cleanable(exc):
            stage.discard()
        raise


class _Writer:
    """Protocol-like base: a callable that writes a rewrite's files into a staging area."""

    def __call__(self, stage: Staging) -> PreparedRewrite:
        raise NotImplementedError


@dataclass
class _PositionRewrite(_Writer):
    """New position-delete files for ``targets`` replacing ``replaced`` (and, when converting,
    every equality delete)."""

    table: TableTarget
    operation: str
    loaded: LoadedTable
    files: TableFiles
    targets: list[LiveFile]
    replaced: set[str]
    convert: bool
    started: float

    def __call__(self, stage: Staging) -> PreparedRewrite:
        spark, metadata = self.table.lake.spark, self.loaded.metadata
        replaced = [d for d in self.files.deletes if d.path in self.replaced]
        if self.convert:
            positions = deleted_positions(spark, metadata, self.files, self.targets)
            read = (*self.targets, *replaced)
        else:
            positions = merged_positions(spark, replaced, self.targets)
            read = tuple(replaced)
        written, emptied = write_positions(spark, metadata, positions, self.targets, stage)
        added = data_files_from_parquet(
            written, metadata, self.table.lake.catalog.io, DataFileContent.POSITION_DELETES
        )
        removed_deletes = self.replaced | dangling_deletes(self.files, emptied)
        delta = _delta(
            self.operation,
            added_deletes=tuple(added),
            removed_data=frozenset(emptied),
            removed_deletes=frozenset(removed_deletes),
            referenced_data=frozenset(f.path for f in self.targets) - emptied,
        )
        return PreparedRewrite(
            self.table, self.operation, self.loaded, self.files, delta, stage, read, self.started
        )


def prepare_compact_position_deletes(table: TableTarget) -> PreparedRewrite | None:
    """Plan and write the merge of the position-delete files of each data file (no data is read)."""
    started = time.perf_counter()
    require_live(table, COMPACT_POSITION_DELETES)
    loaded = table.load()
    files = live_files(loaded.metadata, table.lake.catalog.io)
    index = DeleteIndex.of(files)
    stacked = {f.path for f in files.data if len(index.position_deletes_of(f)) > 1}
    if not stacked:
        return None
    paths, replaced = covered_targets(index, stacked)
    targets = [f for f in files.data if f.path in paths]
    write = _PositionRewrite(
        table, COMPACT_POSITION_DELETES, loaded, files, targets, replaced, False, started
    )
    return _prepare(table, COMPACT_POSITION_DELETES, loaded, write)


def prepare_convert_equality_deletes(table: TableTarget) -> PreparedRewrite | None:
    """Plan and write position deletes for every row an equality delete removes (reads those files)."""
    started = time.perf_counter()
    require_live(table, CONVERT_EQUALITY_DELETES)
    loaded = table.load()
    files = live_files(loaded.metadata, table.lake.catalog.io)
    if not files.equality_deletes:
        return None
    index = DeleteIndex.of(files)
    paths, replaced = covered_targets(index, {f.path for f in files.data if index.equality_deletes_on(f)})
    replaced |= {d.path for d in files.equality_deletes}
    targets = [f for f in files.data if f.path in paths]
    write = _PositionRewrite(table, CONVERT_EQUALITY_DELETES, loaded, files, targets, replaced, True, started)
    return _prepare(table, CONVERT_EQUALITY_DELETES, loaded, write)


@dataclass
class _DataRewrite(_Writer):
    table: TableTarget
    loaded: LoadedTable
    files: TableFiles
    targets: list[LiveFile]
    removed_deletes: frozenset[str]
    target: int
    started: float

    def __call__(self, stage: Staging) -> PreparedRewrite:
        spark, metadata, io = self.table.lake.spark, self.loaded.metadata, self.table.lake.catalog.io
        added: list[DataFile] = []
        if self.targets:
            written = rewrite_data(spark, metadata, self.files, self.targets, self.target, stage)
            added = data_files_from_parquet(written, metadata, io)
        delta = _delta(
            COMPACT,
            added_data=tuple(added),
            removed_data=frozenset(f.path for f in self.targets),
            removed_deletes=self.removed_deletes,
        )
        paths = {f.path for f in self.targets}
        read_deletes = [d for d in self.files.deletes if d.path in self.removed_deletes or _names(d, paths)]
        read = (*self.targets, *read_deletes)
        prepared = PreparedRewrite(
            self.table, COMPACT, self.loaded, self.files, delta, stage, read, self.started
        )
        return replace(prepared, rewritten=len(self.targets))


def _names(delete: LiveFile, paths: set[str]) -> bool:
    bounds = delete.referenced_paths
    return bounds is not None and bounds[0] == bounds[1] and bounds[0] in paths


def prepare_compact(
    table: TableTarget,
    where: str | None = None,
    max_bytes: int | None = None,
    target_file_size_: int | None = None,
) -> PreparedRewrite | None:
    """Plan and write a major compaction (see ``Table.compact``)."""
    started = time.perf_counter()
    check_positive("max_bytes", max_bytes)
    check_positive("target_file_size", target_file_size_)
    where = optional_sql(where, "where=")
    require_live(table, COMPACT)
    loaded = table.load()
    metadata = loaded.metadata
    selected = partition_filter(where, metadata, case_sensitive(table.lake.spark)) if where else None
    files = live_files(metadata, table.lake.catalog.io)
    plan = plan_compaction(files, target_file_size(metadata, target_file_size_), selected, max_bytes)
    if plan.empty:
        return None
    targets = [f for g in plan.groups for f in g.files]
    write = _DataRewrite(table, loaded, files, targets, plan.removed_deletes, plan.target_file_size, started)
    return _prepare(table, COMPACT, loaded, write)


def with_lineage(
    table: TableTarget, operation: str, work: Callable[[], MaintenanceResult]
) -> MaintenanceResult:
    """Run one maintenance operation as an OpenLineage run (``run/lineage.py``: nothing unless
    configured), job ``rowops.<operation>.<table>``, the table its input and output."""
    dataset = table_dataset(table.lake.location, table.name)
    with lineage_run(f"rowops.{operation}.{table.name}", [dataset], [dataset]) as outcome:
        outcome.read_snapshot_id = table.load().metadata.current_snapshot_id
        result = work()
        outcome.snapshot_id, outcome.files = result.snapshot_id, result.files_written
    return result


def rewrite(
    table: TableTarget, operation: str, prepare: Callable[[], PreparedRewrite | None]
) -> MaintenanceResult:
    """Prepare and commit one rewrite (compaction, delete conversion) as one lineage run."""
    started = time.perf_counter()
    return with_lineage(table, operation, lambda: run(table, prepare(), operation, started))


def run(
    table: TableTarget, prepared: PreparedRewrite | None, operation: str, started: float
) -> MaintenanceResult:
    """Commit a prepared rewrite, or report that there was nothing to do."""
    if prepared is None:
        return nothing(table, operation, started)
    result = replace(prepared.commit(), duration_s=time.perf_counter() - started)
    return logged(prepared.table, result)


def rewrite_manifests(table: TableTarget) -> MaintenanceResult:
    """Merge the current snapshot's small manifests into target-size ones (see ``Table.rewrite_manifests``)."""
    started = time.perf_counter()
    require_live(table, REWRITE_MANIFESTS)
    loaded = table.load()
    files = live_files(loaded.metadata, table.lake.catalog.io)
    if not mergeable(files.manifests, MergePolicy.of(loaded.metadata.properties)):
        return nothing(table, REWRITE_MANIFESTS, started)
    delta = RowDelta(
        Operation.REPLACE,
        blind=True,
        rewrite_manifests=True,
        schema_id=loaded.metadata.current_schema_id,
        extra_summary={"rowops.operation": REWRITE_MANIFESTS},
    )
    committed = table.scope.commit_delta(loaded, files, delta)
    snapshot = committed.metadata.current_snapshot()
    after = snapshot.manifests(table.lake.catalog.io) if snapshot is not None else []
    return logged(
        table,
        MaintenanceResult(
            REWRITE_MANIFESTS,
            committed.metadata.current_snapshot_id,
            files_read=len(files.manifests),
            bytes_read=sum(int(m.manifest_length) for m in files.manifests),
            files_written=sum(
                1 for m in after if m.added_snapshot_id == committed.metadata.current_snapshot_id
            ),
            files_removed=len(files.manifests) - len(after),
            duration_s=time.perf_counter() - started,
        ),
    )


def health(table: TableTarget) -> HealthReport:
    """The table's debt report (metadata only)."""
    loaded = table.load()
    files = live_files(loaded.metadata, table.lake.catalog.io)
    weight = float(loaded.metadata.properties.get("rowops.read-weight", "1"))
    return health_report(table.name, loaded.metadata, files, weight)
