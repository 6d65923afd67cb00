"""The Spark side of table maintenance: rewriting data files, merging and converting deletes.

Nothing is committed here; every function writes into the caller's staging area and returns the files.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pyiceberg.table.metadata import TableMetadata
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from rowops.exec.reading.file_reads import FILE_COL, POS_COL, file_uris, read_data_files
from rowops.exec.reading.lineage import carries_lineage
from rowops.exec.reading.scan import position_deletes, scan
from rowops.exec.reading.source import evaluate_once, release
from rowops.exec.writing.position_deletes import write_position_deletes
from rowops.exec.writing.write import Staging, distribution_mode, write_data
from rowops.meta.files import LiveFile, TableFiles, WrittenFile
from rowops.meta.v3 import V3


def rewrite_data(
    spark: SparkSession,
    metadata: TableMetadata,
    files: TableFiles,
    targets: Sequence[LiveFile],
    target_size: int,
    stage: Staging,
) -> list[WrittenFile]:
    """The live rows of ``targets`` (deletes applied) written as files of about ``target_size`` bytes.

    Rows are clustered by partition (one task per partition) and sorted by the table's sort order; a
    partition's rows are cut into files of ``target_size`` / bytes-per-row rows (bin packing by rows).
    """
    props = {**metadata.properties, "write.target-file-size-bytes": str(target_size)}
    if distribution_mode(metadata) == "none":
        props["write.distribution-mode"] = "hash"
    writing = metadata.model_copy(update={"properties": props})
    rows = sum(f.record_count for f in targets) or 1
    size = sum(f.size for f in targets)
    max_rows = max(int(target_size / max(size / rows, 1.0)), 1)
    live = _live_rows(spark, metadata, files, targets)
    count = None if metadata.spec().fields else max(1, math.ceil(size / target_size))
    return write_data(live, writing, stage.next_dir("compact"), cluster=True, files=count, max_rows=max_rows)


def _live_rows(
    spark: SparkSession, metadata: TableMetadata, files: TableFiles, targets: Sequence[LiveFile]
) -> DataFrame:
    """The live rows of ``targets``; on a format v3 table with their row lineage, which the rewritten
    rows keep (``exec/lineage.py``), as Iceberg's own compaction does."""
    if metadata.format_version < V3 or not carries_lineage(targets):
        return scan(spark, metadata.schema(), files, data_files=targets)
    rows = scan(spark, metadata.schema(), files, data_files=targets, row_ids=True)
    return rows.drop(FILE_COL, POS_COL)


def merged_positions(
    spark: SparkSession, deletes: Sequence[LiveFile], targets: Sequence[LiveFile]
) -> DataFrame:
    """The ``(_file, _pos)`` rows of position-delete files, de-duplicated (no data file is read)."""
    rows = position_deletes(spark, deletes, targets)
    assert rows is not None
    return rows.distinct()


def deleted_positions(
    spark: SparkSession, metadata: TableMetadata, files: TableFiles, targets: Sequence[LiveFile]
) -> DataFrame:
    """The ``(_file, _pos)`` of every row of ``targets`` that some live delete (position or equality)
    removes: the file's rows minus its live rows."""
    schema = metadata.schema()
    every = read_data_files(spark, schema, targets).select(FILE_COL, POS_COL)
    live = scan(spark, schema, files, data_files=targets, row_ids=True).select(FILE_COL, POS_COL)
    return every.join(live, [FILE_COL, POS_COL], "left_anti")


def write_positions(
    spark: SparkSession,
    metadata: TableMetadata,
    positions: DataFrame,
    targets: Sequence[LiveFile],
    stage: Staging,
) -> tuple[list[WrittenFile], set[str]]:
    """One position-delete file per data file of ``targets`` holding its ``positions``.

    ``positions`` is computed once (``exec/source.evaluate_once``). A data file all of whose rows are deleted gets
    no delete file: it is returned in the second set, to be removed from the table instead.
    """
    positions = evaluate_once(positions)
    try:
        per_file = positions.groupBy(FILE_COL).agg(F.count("*").alias("n")).collect()
        counts = {r[FILE_COL]: int(r["n"]) for r in per_file}
        uris = file_uris(spark, targets)
        emptied = {f.path for f in targets if counts.get(uris[f.path], 0) >= f.record_count}
        kept = [f for f in targets if f.path not in emptied and counts.get(uris[f.path], 0) > 0]
        if not kept:
            return [], emptied
        written = write_position_deletes(spark, positions, kept, metadata, stage.next_dir("deletes"))
        return [w for w, _ in written], emptied
    finally:
        release(positions)
