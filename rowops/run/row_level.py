"""Running a row-level operation end to end: plan, execute with Spark, commit, report.

spec ─► plan (pre-scan, pruning, cost-based choice) ─► exec (scan/join/write) ─► commit ─► result
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from pyiceberg.manifest import DataFileContent
from pyiceberg.table.snapshots import Operation

from rowops.catalog.tables import LoadedTable
from rowops.commit.read_set import ReadSet
from rowops.commit.row_delta import RowDelta
from rowops.commit.summary import merge_into_summary
from rowops.errors import CardinalityViolationError
from rowops.exec.changes.rows import (
    RowChanges,
    delete_changes,
    merge_changes,
    merge_changes_sliced,
    update_changes,
)
from rowops.exec.changes.summary import summarize
from rowops.exec.checks.operation import check_keys
from rowops.exec.reading.file_reads import POS_COL, file_uris, read_data_files
from rowops.exec.reading.scan import scan
from rowops.exec.reading.slicing import join_slices
from rowops.exec.reading.source import release
from rowops.exec.rewriting.keyed_rewrite import keyed_copy_on_write
from rowops.exec.spark.job_errors import spark_errors
from rowops.exec.spark.jobs import job_step, operation_jobs
from rowops.exec.spark.session import operation_conf
from rowops.exec.spark.stats import physical_plan
from rowops.exec.writing import equality_writes, strategies
from rowops.exec.writing.context import WriteContext, Written, removed_by_path
from rowops.exec.writing.keyed_deletes import keyed_position_delete
from rowops.exec.writing.write import Staging, staging
from rowops.meta.delete_index import dangling_equality_deletes
from rowops.meta.files import TableFiles, data_files_from_parquet
from rowops.plan.explain import FileGroup, format_report
from rowops.plan.metadata_delete import METADATA_ONLY
from rowops.plan.strategy import (
    COPY_ON_WRITE,
    EQUALITY_DELETE,
    HYBRID,
    POSITION_DELETE,
    equality_delete_specs,
    table_facts,
)
from rowops.request.operations import MergeSpec, OperationSpec, UpdateSpec, describe, verb
from rowops.request.properties import isolation_level
from rowops.request.results import OperationResult
from rowops.run.lineage import lineage_run, table_dataset
from rowops.run.planning import Planned, plan
from rowops.run.reporting import log_operation
from rowops.run.row_counts import BLIND_DELETE_COUNTS, BLIND_UPSERT_COUNTS, rows_summary, rows_written

if TYPE_CHECKING:
    from rowops.exec.spark.frames import DataFrame, SparkSession
    from rowops.run.target import TableTarget


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
            check_keys(source, spec.on_columns, duplicates_allowed=not upsert)
        rows = planned.source_keys.rows if planned.source_keys else None
        specs, _ = equality_delete_specs(table_facts(planned.loaded.metadata, planned.files))
        job_step("3/4: write equality deletes", EQUALITY_DELETE)
        written = equality_writes.equality_delete(ctx, source, spec.on_columns, upsert, specs, rows)
        return written, BLIND_UPSERT_COUNTS if upsert else BLIND_DELETE_COUNTS
    keyed = _rewrite_by_key(planned, ctx)
    if keyed is not None:
        return keyed
    columns = [f.name for f in planned.loaded.metadata.schema().fields]
    changes = row_changes(planned, ctx.spark, columns)
    try:
        distinct = isinstance(spec, MergeSpec) and not spec.checks_cardinality
        summary = summarize(changes, distinct_removed=distinct)
        _check_cardinality(planned, changes, summary.repeated)
        counts = changes.counts(summary.actions) | changes.counts_by_source(summary.actions)
        if distinct and summary.repeated:  # a target row deleted once, however many source rows matched
            changes = replace(changes, removed=changes.removed.dropDuplicates())
            counts["delete"] = sum(summary.removed.values()) - counts["update"]
        new = counts["insert"] + counts["update"]
        job_step(f"3/4: write {len(summary.removed)} changed files' rows")
        removed = removed_by_path(ctx, summary.removed)
        if planned.decision.strategy == COPY_ON_WRITE:
            clear = planned.rewritten_if_indebted
            written = strategies.copy_on_write(ctx, changes, removed, new, planned.read_weight, clear)
        elif planned.decision.strategy == HYBRID:
            written = strategies.hybrid(ctx, changes, removed, new, planned.read_weight)
        else:
            written = strategies.position_delete(ctx, changes, removed, new)
        return written, dict(counts)
    finally:
        changes.release()


def _rewrite_by_key(planned: Planned, ctx: WriteContext) -> tuple[Written, dict[str, int | None]] | None:
    """The operation run by key, without a join (``Decision.by_key``), and its row counts: a
    copy-on-write rewrites the candidate files by key (``exec/rewriting/keyed_rewrite.py``), position
    deletes are found by key (``exec/writing/keyed_deletes.py``). Every live target row of a source
    key is replaced (updated), the other source rows are inserted (the keys are the table's identifier
    and unique in the source). None: not chosen, or some file needs the join (nothing written).
    """
    if planned.key_codec is None or planned.source is None or planned.source_keys is None:
        return None
    rows, keys = planned.source_keys.rows, planned.source_keys.codes
    job_step(f"3/4: find and write the rows of the source's keys in {len(planned.candidates)} files")
    if planned.decision.strategy == POSITION_DELETE:
        written = keyed_position_delete(
            ctx, planned.source, rows, planned.key_codec, planned.candidates, keys
        )
    else:
        candidates = planned.candidates + planned.paydown
        written = keyed_copy_on_write(
            ctx, planned.source, rows, planned.key_codec, candidates, planned.read_weight, keys
        )
    if written is None:
        return None
    assert rows is not None, "a run by key knows the source's row count (its keys were collected)"
    updated = sum(written.changed_rows.values())
    return written, {"insert": rows - updated, "update": updated, "delete": 0}


def _groups(written: Written, files: TableFiles) -> tuple[FileGroup, ...]:
    """The touched files by encoding."""
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
    """The encoding that ran, the one value of the result's ``strategy`` and the snapshot summary's
    ``rowops.strategy``: a hybrid decision that only rewrote files is ``copy-on-write``, one that only
    wrote position deletes ``position-delete``; ``hybrid`` when it did both."""
    decision = planned.decision
    if planned.whole_files is not None:
        return METADATA_ONLY
    if decision.strategy != HYBRID:
        return decision.strategy
    names = {g.encoding for g in groups}
    return names.pop() if len(names) == 1 else HYBRID if names else "position-delete"


def _scan_step(planned: Planned) -> str:
    """The second step's description: what is read of the target."""
    if planned.whole_files is not None:
        return f"2/4: drop {len(planned.whole_files.data)} whole files"
    if planned.decision.strategy == EQUALITY_DELETE:
        return "2/4: check the source's keys"
    return f"2/4: scan {planned.report.files_scanned} of {planned.report.files_total} files"


def execute(planned: Planned) -> OperationResult:
    """Execute a planned operation and commit it."""
    started = time.perf_counter()
    metadata = planned.loaded.metadata
    with (
        staging(metadata.location, planned.table.lake.catalog.io) as stage,
        spark_errors(describe(planned.spec)),
    ):
        ctx = WriteContext(planned.table.lake.spark, planned.files, metadata, stage)
        job_step(_scan_step(planned), planned.decision.strategy)
        written, counts = _encode(planned, ctx)
        groups = _groups(written, planned.files)
        strategy = _final_strategy(planned, groups)  # the result's and the snapshot summary's
        delta = _delta(written, planned, counts, strategy)
        job_step("4/4: commit", strategy)
        committed = commit_changes(planned.table, planned.loaded, planned.files, delta, stage)
        if committed is None:
            stage.discard()
    report = replace(planned.report, groups=groups, strategy=strategy)
    return OperationResult(
        strategy=strategy,
        snapshot_id=committed.metadata.current_snapshot_id if committed else metadata.current_snapshot_id,
        rows_inserted=counts.get("insert"),
        rows_updated=counts.get("update"),
        rows_deleted=counts.get("delete"),
        rows_written=rows_written(counts, delta.added_data),
        keys_deleted=sum(
            f.record_count for f in delta.added_deletes if f.content == DataFileContent.EQUALITY_DELETES
        ),
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


def run(table: TableTarget, spec: OperationSpec, source: DataFrame | None, strategy: str) -> OperationResult:
    """Plan, execute and commit one operation on ``table``."""
    started = time.perf_counter()
    spark = table.lake.spark
    dataset = table_dataset(table.lake.location, table.name)
    with (
        lineage_run(f"rowops.{verb(spec).lower()}.{table.name}", [dataset], [dataset]) as lineage,
        operation_conf(spark),
        operation_jobs(spark, verb(spec), table.name),
    ):
        job_step("1/4: plan")
        planned = plan(table, spec, source, strategy)
        lineage.read_snapshot_id = planned.loaded.metadata.current_snapshot_id
        try:
            result = execute(planned)
        finally:
            release(planned.source)
        lineage.snapshot_id, lineage.rows = result.snapshot_id, result.rows_written
        lineage.files = result.data_files_added
    result = replace(result, duration_s=time.perf_counter() - started)
    log_operation(verb(spec), table.name, result, planned.decision.reason)
    return result


def explain(table: TableTarget, spec: OperationSpec, source: DataFrame | None, strategy: str) -> str:
    """The plan of an operation, with Spark's physical plan of its join; nothing is written."""
    spark = table.lake.spark
    with operation_conf(spark), operation_jobs(spark, f"EXPLAIN {verb(spec)}", table.name):
        planned = plan(table, spec, source, strategy)
        try:
            joins = planned.whole_files is None and planned.key_codec is None  # by key: no join
            scans = planned.decision.scans_target and joins
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


def _delta(written: Written, planned: Planned, counts: dict[str, int | None], strategy: str) -> RowDelta:
    """The commit of the written files; ``strategy`` is the encoding that ran (``_final_strategy``)."""
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
            "rowops.strategy": strategy,
            "rowops.operation": type(spec).__name__.removesuffix("Spec").lower(),
            **rows_summary(counts),
            **(
                merge_into_summary(counts, sum(f.record_count for f in added_data))
                if isinstance(spec, MergeSpec)
                else {}
            ),
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


def commit_changes(
    table: TableTarget, loaded: LoadedTable, files: TableFiles, delta: RowDelta, stage: Staging
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
