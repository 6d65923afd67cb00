"""Appending rows to a table: written with Spark, checked against its schema, one ``append`` snapshot."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Operation

from rowops.commit.row_delta import RowDelta
from rowops.exec.checks.expressions import case_sensitive
from rowops.exec.checks.operation import with_write_defaults
from rowops.exec.checks.validation import check_source
from rowops.exec.spark.job_errors import spark_errors
from rowops.exec.spark.jobs import operation_jobs
from rowops.exec.writing.write import Staging, staging, write_data
from rowops.meta.files import data_files_from_parquet, live_files
from rowops.request.results import OperationResult
from rowops.run.lineage import lineage_run, table_dataset
from rowops.run.reporting import log_operation
from rowops.run.row_level import commit_changes

if TYPE_CHECKING:
    from rowops.exec.spark.frames import DataFrame
    from rowops.run.target import TableTarget


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


def append_table(table: TableTarget, df: DataFrame) -> OperationResult:
    """Append the rows of ``df`` (columns matched by name) in one snapshot."""
    started = time.perf_counter()
    loaded = table.load()
    files = live_files(loaded.metadata, table.lake.catalog.io)
    dataset = table_dataset(table.lake.location, table.name)
    with (
        lineage_run(f"rowops.append.{table.name}", [], [dataset]) as lineage,
        operation_jobs(table.lake.spark, "APPEND", table.name),
        staging(loaded.metadata.location, table.lake.catalog.io) as stage,
        spark_errors("append"),
    ):
        delta = append_delta(df, loaded.metadata, stage)
        committed = commit_changes(table, loaded, files, delta, stage)
        snapshot = (
            committed.metadata.current_snapshot_id if committed else loaded.metadata.current_snapshot_id
        )
        rows = sum(f.record_count for f in delta.added_data)
        added = len(delta.added_data)
        lineage.snapshot_id, lineage.rows, lineage.files = snapshot, rows, added
    duration = time.perf_counter() - started
    result = OperationResult("append", snapshot, rows, 0, 0, added, 0, 0, duration, rows_written=rows)
    log_operation("APPEND", table.name, result)
    return result
