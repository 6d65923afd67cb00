"""Running a row-level operation end to end: plan, execute with Spark, commit, report.

spec ─► plan (pre-scan, pruning, cost-based choice) ─► exec (scan/join/write) ─► commit ─► result
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pyiceberg.manifest import DataFileContent
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Operation

from rowops.catalog.tables import LoadedTable
from rowops.commit.read_set import ReadSet
from rowops.commit.row_delta import RowDelta
from rowops.errors import (
    CardinalityViolationError,
)
from rowops.exec import strategies
from rowops.exec.arrow_rewrite import arrow_eligible
from rowops.exec.changes import (
    RowChanges,
    delete_changes,
    merge_changes,
    merge_changes_sliced,
    update_changes,
)
from rowops.exec.checks import checked_spec, with_write_defaults
from rowops.exec.expressions import case_sensitive
from rowops.exec.job_errors import spark_errors
from rowops.exec.prescan import SourceKeys, file_keys, scan_source_keys
from rowops.exec.scan import POS_COL, file_uris, read_data_files, scan
from rowops.exec.session import operation_conf
from rowops.exec.slicing import join_slices
from rowops.exec.source import evaluate_once, release
from rowops.exec.stats import broadcast_cap, is_small, measured_bytes, physical_plan
from rowops.exec.strategies import WriteContext, Written
from rowops.exec.summary import summarize
from rowops.exec.validation import check_source
from rowops.exec.write import Staging, staging, write_data
from rowops.meta.delete_index import dangling_equality_deletes, delete_index
from rowops.meta.files import LiveFile, TableFiles, data_files_from_parquet, live_files
from rowops.plan.colocation import DISABLED as COLOCATION_DISABLED
from rowops.plan.colocation import JoinLayout, plan_join
from rowops.plan.cost import Estimate
from rowops.plan.debt import read_debt
from rowops.plan.explain import FileGroup, PlanReport, format_report
from rowops.plan.metadata_delete import METADATA_ONLY, WholeFileDelete, whole_file_delete, whole_reason
from rowops.plan.predicates import candidates as predicate_candidates
from rowops.plan.pruning import prune_files
from rowops.plan.strategy import (
    COPY_ON_WRITE,
    EQUALITY_DELETE,
    HYBRID,
    Decision,
    choose_strategy,
    equality_delete_specs,
    table_facts,
)
from rowops.spec.operations import DeleteSpec, MergeSpec, OperationSpec, UpdateSpec, describe
from rowops.spec.properties import isolation_level, row_level_conflicts
from rowops.spec.results import OperationResult

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from rowops.table import Table

DEFAULT_COLOCATED_MAX_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Planned:
    """An operation planned against one table state, ready to execute."""

    table: Table
    spec: OperationSpec
    source: DataFrame | None
    loaded: LoadedTable
    files: TableFiles
    decision: Decision
    candidates: tuple[LiveFile, ...]
    layout: JoinLayout
    read_weight: float
    report: PlanReport
    source_keys: SourceKeys | None = None
    whole_files: WholeFileDelete | None = None  # a DELETE committed by metadata alone


def _property(loaded: LoadedTable, key: str, default: str) -> str:
    return loaded.metadata.properties.get(key, default)


def _estimate(
    planned_files: TableFiles,
    candidates: list[LiveFile],
    rows: int,
    keys: list[str],
    loaded: LoadedTable,
    touched_partitions: set[tuple[object, ...]],
    read_weight: float,
) -> Estimate:
    schema = loaded.metadata.schema()
    key_ids = {schema.find_field(k).field_id for k in keys}
    total = sum(sum((f.data_file.column_sizes or {}).values()) for f in candidates) or 1
    key_bytes = sum(
        v for f in candidates for k, v in (f.data_file.column_sizes or {}).items() if k in key_ids
    )
    all_rows = sum(f.record_count for f in planned_files.data) or 1
    per_row = sum(f.size for f in planned_files.data) / all_rows
    debt = read_debt(planned_files, candidates, read_weight)
    in_arrow = arrow_eligible(loaded.metadata, delete_index(planned_files), candidates)
    return Estimate(
        source_rows=rows,
        source_bytes=int(rows * per_row),
        candidate_bytes=sum(f.size for f in candidates),
        candidate_rows=sum(f.record_count for f in candidates),
        candidate_files=len(candidates),
        key_fraction=min(key_bytes / total, 1.0),
        partition_bytes=sum(f.size for f in planned_files.data if f.partition in touched_partitions),
        debt_bytes=debt.bytes,
        pos_deleted_bytes=debt.pos_deleted_bytes,
        eq_deleted_bytes=debt.eq_deleted_bytes,
        debt_generations=debt.generations,
        spark_rewrite_bytes=sum(f.size for f in candidates) - sum(f.size for f in in_arrow),
        deleted_bytes=debt.deleted_bytes,
    )


def plan(table: Table, spec: OperationSpec, source: DataFrame | None, strategy: str) -> Planned:
    """Check the operation, evaluate the source once (``exec/source.py``) and plan on it.

    The caller releases ``Planned.source`` (:func:`release`) once the operation is done.
    """
    loaded = table.load()
    isolation_level(loaded.metadata.properties)  # unknown values fail before any work
    row_level_conflicts(loaded.metadata.properties)
    if source is not None:  # a column the source lacks: its write-default (format v3), if any
        source = with_write_defaults(source, loaded.metadata.schema())
    spec = checked_spec(spec, source, loaded.metadata, table.lake.spark)
    small = source is not None and is_small(source)  # Spark's estimate: pre-scanned in one task
    source = evaluate_once(source) if source is not None else None
    try:
        return _plan(table, spec, source, strategy, loaded, small)
    except BaseException:
        release(source)
        raise


def _runtime_filter(loaded: LoadedTable) -> bool:
    """Whether a MERGE prunes target files by the source's key ranges (``plan/pruning.py``); the table
    property ``rowops.runtime-filter.enabled=false`` turns it off (the paper's Case 4 compares both)."""
    return _property(loaded, "rowops.runtime-filter.enabled", "true").lower() == "true"


def _plan(
    table: Table,
    spec: OperationSpec,
    source: DataFrame | None,
    strategy: str,
    loaded: LoadedTable,
    small: bool = False,
) -> Planned:
    """Pre-scan the source keys, prune target files, choose the encoding and the join.

    A forced equality-delete write skips the pre-scan, unless the source is ``small``: then its one
    single-task job also checks the keys (``keys_unique``) and counts the rows written.
    """
    files = live_files(loaded.metadata, table.lake.catalog.io)
    facts = table_facts(loaded.metadata, files)
    read_weight = float(_property(loaded, "rowops.read-weight", "1"))
    pinned = loaded.metadata.properties.get("rowops.strategy")
    candidates, estimate, keyed, whole = list(files.data), None, None, None
    keys = list(spec.on_columns or ()) if isinstance(spec, MergeSpec) else []
    if isinstance(spec, (UpdateSpec, DeleteSpec)):  # prune by the predicate (``plan/predicates.py``)
        sensitive = case_sensitive(table.lake.spark)
        candidates, all_rows = predicate_candidates(spec.where, files.data, loaded.metadata, sensitive)
        whole = whole_file_delete(files, candidates, all_rows) if isinstance(spec, DeleteSpec) else None
    if source is not None and keys and (strategy != EQUALITY_DELETE or small):
        with spark_errors(describe(spec)):
            partitions = sorted({f.partition for f in files.data}, key=repr)
            check = strategy in ("auto", EQUALITY_DELETE)  # keys_unique: no separate key check
            keyed = scan_source_keys(source, keys, loaded.metadata, partitions, check, small, measure=small)
        assert isinstance(spec, MergeSpec)
        if not spec.of("not_matched_by_source") and _runtime_filter(loaded):
            kept = {
                k.path
                for k in prune_files(file_keys(files.data, keys, loaded.metadata.schema()), keyed.ranges).kept
            }
            candidates = [f for f in files.data if f.path in kept]
        estimate = _estimate(
            files, candidates, keyed.rows, keys, loaded, set(keyed.ranges.by_partition), read_weight
        )
    unique = keyed.keys_unique if keyed else None
    decision = choose_strategy(strategy, spec, facts, estimate, read_weight, pinned, unique)
    layout = _join_layout(spec, source, keyed, decision, loaded, candidates)
    scanned = len(candidates) if decision.scans_target and whole is None else 0
    report = PlanReport(
        operation=describe(spec),
        requested=strategy,
        strategy=decision.strategy if whole is None else METADATA_ONLY,
        reason=decision.reason if whole is None else whole_reason(whole),
        costs=decision.costs if whole is None else {},
        files_total=len(files.data),
        files_scanned=scanned,
        files_pruned=len(files.data) - scanned if decision.scans_target else 0,
        colocated=layout.colocated if isinstance(spec, MergeSpec) else None,
        colocated_reason=layout.reason,
    )
    return Planned(
        table,
        spec,
        source,
        loaded,
        files,
        decision,
        tuple(candidates),
        layout,
        read_weight,
        report,
        keyed,
        whole,
    )


def _join_layout(
    spec: OperationSpec,
    source: DataFrame | None,
    keyed: SourceKeys | None,
    decision: Decision,
    loaded: LoadedTable,
    candidates: list[LiveFile],
) -> JoinLayout:
    """How the MERGE join co-locates source and target rows (``plan/colocation.py``)."""
    if not isinstance(spec, MergeSpec) or source is None:
        return JoinLayout("shuffle", "no join")
    if not decision.scans_target:
        return JoinLayout("shuffle", "equality deletes do not read the target")
    if _property(loaded, "rowops.colocated-join.enabled", "true").lower() != "true":
        return JoinLayout("shuffle", COLOCATION_DISABLED)
    limit = int(_property(loaded, "rowops.colocated-join.max-bytes", str(DEFAULT_COLOCATED_MAX_BYTES)))
    limit = min(limit, broadcast_cap(source.sparkSession))  # measured bytes, hard cap: exec/stats.py
    size = measured_bytes(source, keyed.rows if keyed else None, measured=keyed.bytes if keyed else None)
    by_partition = None
    if keyed and keyed.rows_by_partition is not None and loaded.metadata.spec().fields:
        by_partition = {p: int(n * size.per_row) for p, n in keyed.rows_by_partition.items()}
    other = sum(1 for f in candidates if f.spec_id != loaded.metadata.default_spec_id)  # partition evolution
    partitions = {f.partition for f in candidates}
    return plan_join(size.bytes, by_partition, partitions, limit, basis=size.basis, other_spec_files=other)


def row_changes(planned: Planned, spark: SparkSession, columns: list[str]) -> RowChanges:
    """The row changes of the operation: the target's candidate files scanned and joined."""
    spec, metadata = planned.spec, planned.loaded.metadata
    if isinstance(spec, MergeSpec) and planned.layout.kind == "partitioned":
        assert planned.source is not None and planned.source_keys and planned.source_keys.texts is not None
        slices, source, persisted = join_slices(
            spark, planned.files, planned.candidates, planned.layout, planned.source,
            planned.source_keys.texts, metadata,
        )  # fmt: skip
        changes = merge_changes_sliced(slices, source, spec, columns)
        changes.cached.append(persisted)
        return changes
    target = scan(spark, metadata.schema(), planned.files, data_files=planned.candidates, row_ids=True)
    if isinstance(spec, MergeSpec):
        assert planned.source is not None
        return merge_changes(target, planned.source, spec, columns, colocated=planned.layout.colocated)
    if isinstance(spec, UpdateSpec):
        return update_changes(target, spec, columns)
    return delete_changes(target, spec, columns)


def _check_cardinality(planned: Planned, changes: RowChanges, repeated: list[tuple[str, int]]) -> None:
    """SQL's MERGE cardinality rule: a target row may match at most one source row.

    ``repeated`` are target row ids ``(Spark's file name, position)`` found matched more than once; the
    error names their keys, read back from those rows.
    """
    spec = planned.spec
    if not repeated or not isinstance(spec, MergeSpec) or not spec.checks_cardinality:
        return
    schema = planned.loaded.metadata.schema()
    ids = [schema.find_column_name(i) for i in schema.identifier_field_ids]
    key_names = [k for k in (spec.on_columns or ids) if k] or [f.name for f in schema.fields[:3]]
    examples: list[tuple[object, ...]] = []
    spark = changes.joined.sparkSession
    uris = file_uris(spark, planned.files.data)
    for uri, pos in repeated:
        rows = read_data_files(spark, schema, [f for f in planned.files.data if uris[f.path] == uri])
        examples += [tuple(r) for r in rows.filter(rows[POS_COL] == pos).select(*key_names).collect()]
    raise CardinalityViolationError(
        f"MERGE matched a single target row with more than one source row; offending target keys "
        f"{key_names}: {examples}",
        example_keys=examples,
    )


def _encode(planned: Planned, ctx: WriteContext) -> tuple[Written, dict[str, int | None]]:
    """Run the chosen encoding; returns what was written and the row counts."""
    spec, source = planned.spec, planned.source
    if planned.whole_files is not None:
        whole = planned.whole_files
        gone = {f.path for f in whole.data}
        deleted: dict[str, int | None] = {"insert": 0, "update": 0, "delete": whole.rows}
        return Written(removed_data=gone, removed_deletes=set(whole.deletes)), deleted
    if planned.decision.strategy == EQUALITY_DELETE:
        assert isinstance(spec, MergeSpec) and source is not None and spec.on_columns is not None
        upsert = spec.key_upsert_or_delete == "upsert"
        if not (planned.source_keys and planned.source_keys.keys_unique):  # unknown, or an error to explain
            strategies.check_keys(source, spec.on_columns, duplicates_allowed=not upsert)
        rows = planned.source_keys.rows if planned.source_keys else None
        specs, _ = equality_delete_specs(table_facts(planned.loaded.metadata, planned.files))
        return strategies.equality_delete(ctx, source, spec.on_columns, upsert, specs, rows), {}
    columns = [f.name for f in planned.loaded.metadata.schema().fields]
    changes = row_changes(planned, ctx.spark, columns)
    try:
        distinct = isinstance(spec, MergeSpec) and not spec.checks_cardinality
        summary = summarize(changes, distinct_removed=distinct)
        _check_cardinality(planned, changes, summary.repeated)
        counts = changes.counts(summary.actions)
        if distinct and summary.repeated:  # a target row deleted once, however many source rows matched
            changes = replace(changes, removed=changes.removed.dropDuplicates())
            counts["delete"] = sum(summary.removed.values()) - counts["update"]
        new = counts["insert"] + counts["update"]
        removed = strategies.removed_by_path(ctx, summary.removed)
        if planned.decision.strategy == COPY_ON_WRITE:
            clear = planned.candidates if planned.decision.clears_debt else ()
            written = strategies.copy_on_write(ctx, changes, removed, new, planned.read_weight, clear)
        elif planned.decision.strategy == HYBRID:
            written = strategies.hybrid(ctx, changes, removed, new, planned.read_weight)
        else:
            written = strategies.position_delete(ctx, changes, removed, new)
        return written, dict(counts)
    finally:
        changes.release()


def _groups(written: Written, files: TableFiles) -> tuple[FileGroup, ...]:
    rows = {f.path: f.record_count for f in files.data}
    groups = []
    for name, paths in (
        ("copy-on-write", written.rewritten),
        ("position-delete", set(written.changed_rows) - written.rewritten),
    ):
        if paths:
            groups.append(
                FileGroup(
                    name,
                    len(paths),
                    sum(written.changed_rows.get(p, 0) for p in paths),
                    sum(rows.get(p, 0) for p in paths),
                )
            )
    return tuple(groups)


def _final_strategy(planned: Planned, groups: tuple[FileGroup, ...]) -> str:
    decision = planned.decision
    if planned.whole_files is not None:
        return METADATA_ONLY
    if decision.strategy != HYBRID:
        return decision.strategy
    names = {g.encoding for g in groups}
    return names.pop() if len(names) == 1 else HYBRID if names else "position-delete"


def execute(planned: Planned) -> OperationResult:
    """Execute a planned operation and commit it."""
    started = time.perf_counter()
    metadata = planned.loaded.metadata
    with (
        staging(metadata.location, planned.table.lake.catalog.io) as stage,
        spark_errors(describe(planned.spec)),
    ):
        ctx = WriteContext(planned.table.lake.spark, planned.files, metadata, stage)
        written, counts = _encode(planned, ctx)
        delta = _delta(written, planned, counts)
        committed = _commit(planned.table, planned.loaded, planned.files, delta, stage)
        if committed is None:
            stage.discard()
    groups = _groups(written, planned.files)
    strategy = _final_strategy(planned, groups)
    report = replace(planned.report, groups=groups, strategy=strategy)
    return OperationResult(
        strategy=strategy,
        snapshot_id=committed.metadata.current_snapshot_id if committed else metadata.current_snapshot_id,
        rows_inserted=counts.get("insert"),
        rows_updated=counts.get("update"),
        rows_deleted=counts.get("delete"),
        data_files_added=len(delta.added_data),
        data_files_removed=len(delta.removed_data),
        delete_files_added=len(delta.added_deletes),
        duration_s=time.perf_counter() - started,
        delete_files_removed=len(delta.removed_deletes),
        files_scanned=report.files_scanned,
        files_pruned=report.files_pruned,
        files_rewritten=len(written.rewritten),
        explain=format_report(report),
    )


def run(table: Table, spec: OperationSpec, source: DataFrame | None, strategy: str) -> OperationResult:
    """Plan, execute and commit one operation on ``table``."""
    started = time.perf_counter()
    with operation_conf(table.lake.spark):
        planned = plan(table, spec, source, strategy)
        try:
            result = execute(planned)
        finally:
            release(planned.source)
    return replace(result, duration_s=time.perf_counter() - started)


def explain(table: Table, spec: OperationSpec, source: DataFrame | None, strategy: str) -> str:
    """The plan of an operation, with Spark's physical plan of its join; nothing is written."""
    with operation_conf(table.lake.spark):
        planned = plan(table, spec, source, strategy)
        try:
            scans = planned.decision.scans_target and planned.whole_files is None
            spark_plan = _spark_plan(planned) if scans else ""
        finally:
            release(planned.source)
    return format_report(replace(planned.report, spark_plan=spark_plan), with_spark_plan=True)


def _spark_plan(planned: Planned) -> str:
    """Spark's physical plan of the operation's join."""
    with spark_errors(describe(planned.spec)):
        spark = planned.table.lake.spark
        changes = row_changes(planned, spark, [f.name for f in planned.loaded.metadata.schema().fields])
        try:
            return physical_plan(changes.joined)
        finally:
            changes.release()


def _delta(written: Written, planned: Planned, counts: dict[str, int | None]) -> RowDelta:
    metadata, spec = planned.loaded.metadata, planned.spec
    schema = metadata.schema()
    eq_ids = (
        [schema.find_field(n).field_id for n in (spec.on_columns or ())]
        if isinstance(spec, MergeSpec)
        else []
    )
    io = planned.table.lake.catalog.io
    added_data = data_files_from_parquet(written.data, metadata, io)
    added_deletes = data_files_from_parquet(
        written.position_deletes, metadata, io, DataFileContent.POSITION_DELETES
    )
    if written.equality_deletes:
        added_deletes += data_files_from_parquet(
            written.equality_deletes, metadata, io, DataFileContent.EQUALITY_DELETES, eq_ids
        )
    if written.removed_data or added_deletes:
        operation = Operation.OVERWRITE if added_data else Operation.DELETE
    else:
        operation = Operation.APPEND
    return RowDelta(
        operation=operation,
        added_data=tuple(added_data),
        added_deletes=tuple(added_deletes),
        removed_data=frozenset(written.removed_data),
        removed_deletes=frozenset(
            written.removed_deletes | dangling_equality_deletes(planned.files, written.removed_data)
        ),
        referenced_data=frozenset(written.referenced_data),
        read_set=_read_set(planned),
        serializable=isolation_level(metadata.properties) == "serializable",
        blind=planned.decision.strategy == EQUALITY_DELETE,
        schema_id=metadata.current_schema_id,
        spec_id=metadata.default_spec_id,
        extra_summary={
            "rowops.strategy": planned.report.strategy,  # the decision's, or metadata-only
            "rowops.operation": type(spec).__name__.removesuffix("Spec").lower(),
            **{
                f"rowops.rows-{kind.removesuffix('e')}ed": str(n)
                for kind, n in counts.items()
                if n is not None
            },
        },
    )


def _read_set(planned: Planned) -> ReadSet:
    """What the operation's outcome depended on (serializable validation; ``commit/read_set.py``).

    A MERGE on keys read the rows whose keys fall in the source's key ranges, in the partitions its
    keys fall into (pruned files and partitions without files included); anything else read the table.
    """
    spec, keyed = planned.spec, planned.source_keys
    if not isinstance(spec, MergeSpec) or keyed is None or spec.on_columns is None:
        return ReadSet.everything()
    if spec.of("not_matched_by_source"):
        return ReadSet.everything()
    spec_id = planned.loaded.metadata.spec().spec_id
    follows_key = keyed.rows_by_partition is not None
    return ReadSet.of_keys(tuple(spec.on_columns), keyed.ranges.by_partition, spec_id, follows_key)


def _commit(
    table: Table, loaded: LoadedTable, files: TableFiles, delta: RowDelta, stage: Staging
) -> LoadedTable | None:
    """Commit unless the delta changes nothing (then no snapshot is made).

    An operation that changed nothing still read its table (unless blind): a serializable
    transaction must validate that read, e.g. a DELETE whose predicate matched no row yet.
    """
    if not (delta.added_data or delta.added_deletes or delta.removed_data or delta.removed_deletes):
        if not delta.blind:
            table.scope.note_read(table.identifier)
        return None
    return table.scope.commit_delta(loaded, files, delta, listener=stage)


def append_delta(df: DataFrame, metadata: TableMetadata, stage: Staging) -> RowDelta:
    """Write ``df``'s rows (checked against the table schema; columns it lacks that have a
    write-default get it) and describe them as an append."""
    df = with_write_defaults(df, metadata.schema())
    check_source(df.schema, metadata.schema(), case_sensitive=case_sensitive(df.sparkSession))
    written = write_data(df, metadata, stage.next_dir("data"))
    added = tuple(data_files_from_parquet(written, metadata, stage.io))
    return RowDelta(
        Operation.APPEND,
        added_data=added,
        blind=True,
        schema_id=metadata.current_schema_id,
        spec_id=metadata.default_spec_id,
        extra_summary={
            "rowops.strategy": "append",
            "rowops.operation": "append",
            "rowops.rows-inserted": str(sum(f.record_count for f in added)),
        },
    )


def append(table: Table, df: DataFrame) -> OperationResult:
    """Append the rows of ``df`` (columns matched by name) in one snapshot."""
    started = time.perf_counter()
    loaded = table.load()
    files = live_files(loaded.metadata, table.lake.catalog.io)
    with staging(loaded.metadata.location, table.lake.catalog.io) as stage, spark_errors("append"):
        delta = append_delta(df, loaded.metadata, stage)
        committed = _commit(table, loaded, files, delta, stage)
    snapshot = committed.metadata.current_snapshot_id if committed else loaded.metadata.current_snapshot_id
    rows = sum(f.record_count for f in delta.added_data)
    added = len(delta.added_data)
    return OperationResult("append", snapshot, rows, 0, 0, added, 0, 0, time.perf_counter() - started)
