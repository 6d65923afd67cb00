"""Reading an Iceberg snapshot with Spark: data files by field id, deletes applied.

Rows carry their identity as two hidden columns: ``_file`` (data file path, normalized to the form
recorded in manifests) and ``_pos`` (row position in that file, Spark's ``_metadata.row_index``).

Deletes follow Iceberg's sequence-number rules:
  * a position delete applies to rows of the file it names (it is always written after that file,
    so its data sequence number is >= the file's);
  * an equality delete applies to rows of data files with a strictly smaller data sequence number,
    matched null-safely on its equality columns. rowops writes equality deletes only where the key
    determines the partition, so a key match implies a partition match.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

from pyiceberg.schema import Schema
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from rowops.exec.types import to_spark_schema
from rowops.meta.files import POSITION_DELETE_SCHEMA, LiveFile, TableFiles

FILE_COL, POS_COL, SEQ_COL = "_file", "_pos", "_seq"
_DEL_SEQ = "_delete_seq"


_PLAIN = re.compile(r"^/[A-Za-z0-9/_.=\-]*$")  # local paths Spark reports as "file:" + path, unescaped


def spark_path(col: Column, plain: bool = False) -> Column:
    """Spark's ``file:/a%20b`` form of a local path, back to the plain ``/a b`` form.

    Args:
        plain: all paths are known to need no unescaping (checked on the driver from the file list):
            strip the ``file:`` prefix only, which is far cheaper per row than decoding.
    """
    if plain:
        return F.when(col.startswith("file:"), F.substring(col, 6, 1 << 30)).otherwise(col)
    stripped = F.regexp_replace(col, r"^file:(//)?(?=/)", "")
    return F.url_decode(F.regexp_replace(stripped, r"\+", "%2B"))


def read_parquet(spark: SparkSession, schema: T.StructType, paths: Sequence[str]) -> DataFrame:
    """Read Parquet files by Iceberg field id (files given explicitly; no partition inference)."""
    return spark.read.schema(schema).option("recursiveFileLookup", "true").parquet(*paths)


def _empty(spark: SparkSession, schema: T.StructType) -> DataFrame:
    return spark.createDataFrame([], schema)


def read_data_files(spark: SparkSession, schema: Schema, files: Sequence[LiveFile]) -> DataFrame:
    """Rows of the given data files with ``_file`` and ``_pos``; no deletes applied."""
    struct = to_spark_schema(schema)
    ids = T.StructType(
        [T.StructField(FILE_COL, T.StringType(), False), T.StructField(POS_COL, T.LongType(), False)]
    )
    if not files:
        return _empty(spark, T.StructType(struct.fields + ids.fields))
    df = read_parquet(spark, struct, [f.path for f in files])
    return df.select(
        *[F.col(f"`{name}`") for name in struct.fieldNames()],
        spark_path(F.col("_metadata.file_path"), plain=all(_PLAIN.match(f.path) for f in files)).alias(
            FILE_COL
        ),
        F.col("_metadata.row_index").alias(POS_COL),
    )


def position_deletes(spark: SparkSession, files: Sequence[LiveFile]) -> DataFrame | None:
    """All ``(_file, _pos)`` pairs of the given position delete files."""
    if not files:
        return None
    struct = to_spark_schema(POSITION_DELETE_SCHEMA)
    df = read_parquet(spark, struct, [f.path for f in files])
    return df.select(
        F.regexp_replace("file_path", r"^file:(//)?(?=/)", "").alias(FILE_COL), F.col("pos").alias(POS_COL)
    )


def _with_seq(spark: SparkSession, df: DataFrame, files: Sequence[LiveFile]) -> DataFrame:
    seqs = spark.createDataFrame([(f.path, f.seq) for f in files], f"{FILE_COL} string, {SEQ_COL} long")
    return df.join(F.broadcast(seqs), FILE_COL, "inner")


def _apply_equality_deletes(
    spark: SparkSession, rows: DataFrame, schema: Schema, deletes: Sequence[LiveFile]
) -> DataFrame:
    by_ids: dict[tuple[int, ...], list[LiveFile]] = defaultdict(list)
    for f in deletes:
        by_ids[f.equality_ids].append(f)
    for ids, group in by_ids.items():
        names = [schema.find_column_name(i) or "" for i in ids]
        struct = to_spark_schema(schema.select(*names))
        parts = []
        for seq in sorted({f.seq for f in group}):
            paths = [f.path for f in group if f.seq == seq]
            parts.append(read_parquet(spark, struct, paths).withColumn(_DEL_SEQ, F.lit(seq)))
        keys = parts[0]
        for part in parts[1:]:
            keys = keys.unionByName(part)
        keys = keys.select(*[F.col(f"`{n}`").alias(f"_eq_{i}") for i, n in enumerate(names)], _DEL_SEQ)
        cond = [rows[f"`{n}`"].eqNullSafe(keys[f"_eq_{i}"]) for i, n in enumerate(names)]
        cond.append(rows[SEQ_COL] < keys[_DEL_SEQ])
        rows = rows.join(keys, cond, "left_anti")
    return rows


def scan(
    spark: SparkSession,
    schema: Schema,
    files: TableFiles,
    data_files: Sequence[LiveFile] | None = None,
    row_ids: bool = False,
) -> DataFrame:
    """The live rows of a snapshot (or of a subset of its data files), deletes applied.

    Args:
        spark: the session.
        schema: the table schema to read with.
        files: the live files of the snapshot.
        data_files: restrict the scan to these data files (default: all).
        row_ids: keep the ``_file`` and ``_pos`` columns.
    """
    targets = files.data if data_files is None else data_files
    rows = read_data_files(spark, schema, targets)
    wanted = {f.path for f in targets}
    pos = position_deletes(
        spark, [f for f in files.position_deletes if any(f.may_reference(p) for p in wanted)]
    )
    if pos is not None:
        rows = rows.join(pos, [FILE_COL, POS_COL], "left_anti")
    if files.equality_deletes and targets:
        rows = _apply_equality_deletes(spark, _with_seq(spark, rows, targets), schema, files.equality_deletes)
        rows = rows.drop(SEQ_COL)
    columns = [f"`{n}`" for n in schema.column_names]
    return rows.select(*columns, FILE_COL, POS_COL) if row_ids else rows.select(*columns)
