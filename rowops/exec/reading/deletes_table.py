"""Rows of Iceberg's ``position_deletes`` metadata table, read from the delete files on executors.

Columns as Iceberg Java's: ``file_path`` (the data file, as the delete file names it), ``pos``, ``row``
(NULL: rowops never stores deleted rows), ``partition`` and ``spec_id`` (of the delete file; a
deletion vector's are its data file's), ``delete_file_path``. Position delete files are read as Parquet,
deletion vectors (v3) from their Puffin files (``exec/writing/deletion_vectors.py``). From format v3 on,
``content_offset`` and ``content_size_in_bytes`` locate a vector's blob (NULL for Parquet files).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from pyiceberg.table.metadata import TableMetadata
from pyspark.sql import functions as F

from rowops.exec.reading.file_reads import read_parquet
from rowops.exec.spark.compat import frame_of_arrow
from rowops.exec.spark.frames import DataFrame, SparkSession
from rowops.exec.spark.listing import spark_name
from rowops.exec.spark.literal_frames import literal_frame
from rowops.exec.spark.types import to_spark_schema
from rowops.exec.writing.deletion_vectors import deletion_vector_positions
from rowops.meta.files import POSITION_DELETE_SCHEMA, LiveFile
from rowops.meta.v3 import content_range, is_deletion_vector

_RANGE = ("content_offset", "content_size_in_bytes")


def position_delete_rows(
    spark: SparkSession,
    metadata: TableMetadata,
    deletes: Sequence[LiveFile],
    data_files: Sequence[LiveFile],
    partitions: pa.Table,
) -> DataFrame:
    """The ``position_deletes`` rows of ``deletes``; ``partitions``: ``(file_path, partition, spec_id)``
    of the table's live files (pyiceberg's ``files`` table), by the path the manifests store."""
    row_type = to_spark_schema(metadata.schema())
    where = frame_of_arrow(spark, partitions)
    located = [c for c in ("partition", "spec_id") if c in where.columns]  # no partition: unpartitioned
    parts: list[DataFrame] = []
    files = [d for d in deletes if not is_deletion_vector(d.data_file)]
    if files:
        stored = {spark_name(d.path): d.data_file.file_path for d in files}
        names = literal_frame(
            spark, list(stored.items()), [("_uri", "string"), ("delete_file_path", "string")]
        )
        rows = read_parquet(spark, to_spark_schema(POSITION_DELETE_SCHEMA), [d.path for d in files])
        rows = rows.select("file_path", "pos", F.col("_metadata.file_path").alias("_uri"))
        rows = rows.join(F.broadcast(names), "_uri").drop("_uri")
        joined = rows.join(F.broadcast(where), where["file_path"] == rows["delete_file_path"])
        parts.append(
            joined.select(rows["file_path"], "pos", *(where[c] for c in located), "delete_file_path")
        )
    vectors = [d for d in deletes if is_deletion_vector(d.data_file)]
    if vectors:
        by_data = {d.referenced_file: d for d in vectors}
        data = [f for f in data_files if f.path in by_data]
        names = literal_frame(
            spark,
            [(spark_name(f.path), f.data_file.file_path, *_vector(by_data[f.path])) for f in data],
            [
                ("_name", "string"),
                ("file_path", "string"),
                ("delete_file_path", "string"),
                ("content_offset", "bigint"),
                ("content_size_in_bytes", "bigint"),
            ],
        )
        positions = deletion_vector_positions(spark, vectors, data, "_name", "pos")
        if positions is not None:
            rows = positions.join(F.broadcast(names), "_name").drop("_name")
            joined = rows.join(F.broadcast(where), "file_path")
            parts.append(joined.select("file_path", "pos", *located, "delete_file_path", *_RANGE))
    if not parts:
        empty = where.select(
            F.lit(None).cast("string").alias("file_path"), F.lit(None).cast("long").alias("pos"), *located
        ).limit(0)
        empty = empty.withColumn("delete_file_path", F.lit(None).cast("string"))
        parts.append(empty.select("*", *(F.lit(None).cast("long").alias(c) for c in _RANGE)))
    result = parts[0]
    for part in parts[1:]:
        result = result.unionByName(part)
    row = F.lit(None).cast(row_type).alias("row")
    v3 = metadata.format_version >= 3  # Iceberg Java adds a deletion vector's blob range from v3 on
    return result.select("file_path", "pos", row, *located, "delete_file_path", *(_RANGE if v3 else ()))


def _vector(dv: LiveFile) -> tuple[str, int | None, int | None]:
    """A deletion vector's Puffin file and its blob's offset and length."""
    where = content_range(dv.data_file)
    return dv.data_file.file_path, where[0] if where else None, where[1] if where else None
