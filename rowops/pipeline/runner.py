"""Running one batch of a pipeline: exactly once, all targets in one lake transaction, measured.

::

    check: was (pipeline id, batch id) committed? (catalog/batches.py index) ── yes ─► skipped
    read:  source → columns mapped → change feed reduced (one change per key) → evaluated once
    merge: each target MERGEd inside one transaction (late changes never overwrite newer rows)
    commit: one lake version with every target and the batch record ── same batch won meanwhile ─► skipped
    maintenance: each target's health vs the thresholds → run or advise

Any failure before the commit rolls the transaction back: no table changes, nothing is recorded, and
the same batch can simply run again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING

from rowops.catalog.batches import BatchIndex, source_position
from rowops.errors import (
    BatchAlreadyCommittedError,
    PipelineConfigError,
    PipelineSourceError,
)
from rowops.exec.reading import pipeline_source
from rowops.exec.reading.source import release
from rowops.exec.spark.jobs import operation_jobs
from rowops.exec.spark.literal_frames import sql_identifier
from rowops.lakehouse import Lakehouse
from rowops.pipeline.config import FEED_CDC_COLUMNS, TABLE_CHANGES, PipelineConfig, TargetConfig
from rowops.pipeline.lake import batch_of, target_tables
from rowops.pipeline.maintenance import apply_policy
from rowops.pipeline.metrics import RunMetrics, TargetMetrics, debt_summary
from rowops.run.lineage import Dataset, lineage_run, path_dataset, table_dataset
from rowops.table import MergeBuilder, Table
from rowops.transaction import Transaction

if TYPE_CHECKING:
    from rowops.exec.spark.frames import DataFrame

log = logging.getLogger("rowops.pipeline")
Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    """The default progress callback: say nothing."""


# -- the source ---------------------------------------------------------------------------------------
def feed_range(lake: Lakehouse, config: PipelineConfig, upto: int) -> tuple[int, int] | None:
    """A chained pipeline's source range in lake versions: from where its newest batch in the lake
    state ``upto`` read its source's change feed (exclusive), to ``upto`` (inclusive)."""
    source = config.source
    if source.format != TABLE_CHANGES or source.table is None:
        return None
    log = lake.catalog.log
    return source_position(log, config.id, source.table, log.read(upto)), upto


def read_source(
    lake: Lakehouse, config: PipelineConfig, batch_id: str, changes: tuple[int, int] | None = None
) -> tuple[DataFrame, list[str]]:
    """The batch's raw rows and (for a local directory) its files, to name an unreadable one;
    ``changes``: the range of a chained pipeline's change feed (:func:`feed_range`)."""
    source = config.source
    if changes is not None and source.table is not None:
        feed = lake.table(source.table).changes(start=changes[0], end=changes[1], net=True)
        return feed.where(f"{FEED_CDC_COLUMNS[0]} <> 'update_preimage'"), []
    if source.format == "table":
        assert source.table is not None
        return lake.table(source.table).to_df(), []
    path = source.path_for(batch_id)
    assert path is not None
    return pipeline_source.read_files(
        lake.spark, source.format, path, source.options
    ), pipeline_source.source_files(path)


def _target_columns(table: Table) -> list[str]:
    return [f.name for f in table.schema.fields]


def check_target(table: Table, target: TargetConfig, columns: Sequence[str]) -> None:
    """Keys and every column of the target are available in the (mapped) source."""
    names = _target_columns(table)
    for key in target.keys:
        if key not in names:
            raise PipelineConfigError(
                f"[[targets]] {target.table}: key {key!r} is not a column of the table ({', '.join(names)})"
            )
    for name in names:
        if name not in columns:
            raise PipelineSourceError(
                f"the source has no column {name!r} for table {target.table} (source columns: "
                f"{', '.join(columns)})",
                help=f'Add it to the source or map it: columns = {{ {name} = "<Spark SQL expression>" }} '
                "in the target's [[targets]] entry; nothing was written.",
            )


def new_columns(df: DataFrame, table: Table, target: TargetConfig, config: PipelineConfig) -> dict[str, str]:
    """Source columns (after mapping) the target lacks, with their Spark types: what
    ``schema_evolution = "add-columns"`` adds (never the change feed's operation and ordering columns)."""
    if target.schema_evolution != "add-columns":
        return {}
    have = {name.lower() for name in _target_columns(table)}
    cdc = config.source.cdc
    feed = {pipeline_source.OP_COLUMN, *((cdc.op_column, cdc.order_by) if cdc else ())}
    mapped = pipeline_source.spark_types(pipeline_source.map_columns(df, target.columns))
    return {name: kind for name, kind in mapped.items() if name.lower() not in have and name not in feed}


def prepare(
    lake: Lakehouse,
    config: PipelineConfig,
    batch_id: str,
    metrics: RunMetrics,
    changes: tuple[int, int] | None = None,
) -> DataFrame:
    """The batch evaluated once: mapped, checked, reduced to one change per key when it is a change feed."""
    raw, files = read_source(lake, config, batch_id, changes)
    where = config.source.where_for(batch_id)
    if where:
        raw = pipeline_source.filter_rows(raw, where, "[source].where")
    cdc = config.source.cdc
    if cdc is not None:
        pipeline_source.require_columns(raw, [cdc.op_column, cdc.order_by], "[source.cdc]")
        codes = cdc.code_map()
        _, metrics.rows_read, per_code = pipeline_source.evaluate(
            raw, cdc.op_column, codes, files, config.source.format
        )
        for code, count in per_code.items():
            metrics.changes[codes[code]] = metrics.changes.get(codes[code], 0) + count
    evaluated, count = pipeline_source.materialize(raw, files, config.source.format)
    if cdc is None:
        metrics.rows_read = count
    return evaluated


def target_rows(df: DataFrame, table: Table, target: TargetConfig, config: PipelineConfig) -> DataFrame:
    """One target's rows: mapped, filtered, checked, reduced to the newest change per key."""
    mapped = pipeline_source.map_columns(df, target.columns)
    if target.where:
        mapped = pipeline_source.filter_rows(mapped, target.where)
    check_target(table, target, mapped.columns)
    cdc = config.source.cdc
    if cdc is None:
        return pipeline_source.select(mapped, _target_columns(table), None)
    reduced = pipeline_source.reduce_changes(mapped, target.keys, cdc.op_column, cdc.order_by, cdc.code_map())
    return pipeline_source.select(reduced, _target_columns(table), pipeline_source.OP_COLUMN)


def merge_builder(
    table: Table, rows: DataFrame, target: TargetConfig, config: PipelineConfig
) -> MergeBuilder:
    """One target's MERGE: an upsert; with a change feed also deletes, and late changes skipped.

    A change applies to a matched row only when its ordering value is not older than the row's (when
    the table stores the ordering column); a delete of a key the table does not hold does nothing.
    """
    builder = table.merge(rows, on=list(target.keys))
    cdc = config.source.cdc
    if cdc is None:  # the rows are exactly the table's columns: a blind upsert (any encoding)
        return builder.when_matched().update_all().when_not_matched().insert_all()
    values = {c: f"s.{sql_identifier(c)}" for c in _target_columns(table)}
    op = f"s.{pipeline_source.OP_COLUMN}"
    newer = (
        f" AND s.{sql_identifier(cdc.order_by)} >= t.{sql_identifier(cdc.order_by)}"
        if cdc.order_by in values
        else ""
    )
    return (
        builder.when_matched(f"{op} = 'delete'{newer}")
        .delete()
        .when_matched(f"{op} <> 'delete'{newer}")
        .update(values)
        .when_not_matched(f"{op} <> 'delete'")
        .insert(values)
    )


def _debt(table: Table) -> dict[str, float]:
    read_weight = float(table.metadata.properties.get("rowops.read-weight", "1"))
    return debt_summary(table.files(), read_weight)


@contextmanager
def _transaction(lake: Lakehouse) -> Iterator[Transaction]:
    tx = lake.transaction()
    try:
        yield tx
    except BaseException:
        tx.rollback()
        raise


def steps(config: PipelineConfig) -> int:
    """How many steps a run reports to its progress callback (check, read, targets, commit, maintenance)."""
    return (
        3
        + len(config.targets)
        + (len(config.targets) * len(config.maintenance.actions) if config.maintenance.mode == "run" else 0)
    )


# -- a run ------------------------------------------------------------------------------------------
def run(
    lake: Lakehouse,
    config: PipelineConfig,
    batch_id: str | None = None,
    progress: Progress = _quiet,
) -> RunMetrics:
    """Run one batch; re-running a committed batch does nothing and says so (``status == "skipped"``).

    Its Spark jobs are one job group (``rowops PIPELINE <id> batch <batch>``, ``exec/spark/jobs.py``).
    """
    batch = batch_of(config, batch_id)
    with ExitStack() as scope:  # the jobs' group only once there is work: a skip starts no Spark
        return _run(lake, config, batch, progress, scope)


def _run(
    lake: Lakehouse, config: PipelineConfig, batch: str, progress: Progress, scope: ExitStack
) -> RunMetrics:
    metrics = RunMetrics(config.id, batch)
    index = BatchIndex(lake.catalog.log)
    with _transaction(lake) as tx:
        with metrics.phase("check"):
            progress("checking the batch record")
            done = index.find(config.id, batch, lake.catalog.log.read(tx.begin_version))
        if done is not None:
            tx.rollback()
            return _skipped(metrics, done, "committed before")
        lineage = scope.enter_context(lineage_run(*_lineage_of(lake, config, batch)))
        scope.enter_context(operation_jobs(lake.spark, "PIPELINE", f"{config.id} batch {batch}"))
        tables = target_tables(lake, config)
        metrics.debt_before = {name: _debt(t) for name, t in tables.items()}
        with metrics.phase("read"):
            progress("reading the batch")
            read_range = feed_range(lake, config, tx.begin_version)
            rows = prepare(lake, config, batch, metrics, read_range)
        try:
            for target in config.targets:
                with metrics.phase("merge"):
                    progress(f"merging into {target.table}")
                    table = tx.table(target.table)
                    if added := new_columns(rows, table, target, config):
                        progress(f"adding columns to {target.table}: {', '.join(added)}")
                        table.add_columns(added)  # in the batch's transaction: committed with it
                        metrics.columns_added[target.table] = added
                    changes = target_rows(rows, table, target, config)
                    result = merge_builder(table, changes, target, config).execute(target.strategy)
                metrics.targets.append(TargetMetrics.from_result(target.table, result))
                lineage.rows = (lineage.rows or 0) + (result.rows_written or 0)
        finally:
            release(rows)
        with metrics.phase("commit"):
            progress("committing")
            source = None if read_range is None else {"table": config.source.table, "version": read_range[1]}
            tx.mark_batch(config.id, batch, source)
            try:
                version = tx.commit()
            except BatchAlreadyCommittedError as exc:
                return _skipped(metrics, exc.version, "committed by a concurrent run")
    if version is None:
        metrics.status = "empty"
        return metrics
    metrics.status, metrics.committed_version = "committed", version
    index.record(config.id, batch, version)
    metrics.debt_after = {name: _debt(t) for name, t in tables.items()}
    with metrics.phase("maintenance"):
        metrics.maintenance = apply_policy(tables, metrics.debt_after, config.maintenance, progress)
    if any(step.get("mode") == "run" for step in metrics.maintenance):
        metrics.debt_after_maintenance = {name: _debt(t) for name, t in tables.items()}
    for line in metrics.log_lines():
        log.info(line)
    return metrics


def _lineage_of(
    lake: Lakehouse, config: PipelineConfig, batch: str
) -> tuple[str, list[Dataset], list[Dataset]]:
    """A batch's OpenLineage job, inputs (its source) and outputs (its targets)."""
    source, path = config.source, config.source.path_for(batch)
    inputs = [table_dataset(lake.location, source.table)] if source.table else []
    inputs += [path_dataset(path)] if path else []
    outputs = [table_dataset(lake.location, t.table) for t in config.targets]
    return f"rowops.pipeline.{config.id}", inputs, outputs


def _skipped(metrics: RunMetrics, version: int, how: str) -> RunMetrics:
    metrics.status, metrics.committed_version = "skipped", version
    metrics.message = f"batch {metrics.batch_id} was {how} (lake version {version}): nothing to do"
    log.info("pipeline %s: %s", metrics.pipeline, metrics.message)
    return metrics


def validate(lake: Lakehouse, config: PipelineConfig, batch_id: str | None = None) -> RunMetrics:
    """Check the config, the source (schema, operation codes) and every target without writing anything."""
    batch = batch_of(config, batch_id)
    metrics = RunMetrics(config.id, batch, status="validated")
    tables = target_tables(lake, config)
    with metrics.phase("read"):
        rows = prepare(lake, config, batch, metrics, feed_range(lake, config, lake.version))
    try:
        for target in config.targets:
            table = tables[target.table]
            if added := new_columns(rows, table, target, config):  # a run would add them
                metrics.columns_added[target.table] = added
            target_rows(rows, table, target, config)
            metrics.debt_before[target.table] = _debt(table)
    finally:
        release(rows)
    done = BatchIndex(lake.catalog.log).find(config.id, batch, lake.catalog.log.latest())
    if done is not None:
        metrics.message = f"batch {batch} was committed before (lake version {done}): a run would skip it"
    return metrics


def explain(lake: Lakehouse, config: PipelineConfig, batch_id: str | None = None) -> dict[str, str]:
    """The plan of each target's MERGE for this batch (nothing is written)."""
    batch = batch_of(config, batch_id)
    metrics = RunMetrics(config.id, batch)
    tables = target_tables(lake, config)
    rows = prepare(lake, config, batch, metrics, feed_range(lake, config, lake.version))
    plans = {}
    try:
        for target in config.targets:
            table = tables[target.table]
            builder = merge_builder(table, target_rows(rows, table, target, config), target, config)
            plans[target.table] = builder.explain(target.strategy)
    finally:
        release(rows)
    return plans
