"""Reading Iceberg data files with Spark: by field id, in their stored types, with row identity.

Rows carry their identity as two hidden columns: ``_file`` (the data file as Spark names it, its
``_metadata.file_path``, e.g. ``file:/lake/t/a%20b.parquet``) and ``_pos`` (row position in that file,
``_metadata.row_index``). ``_file`` is Spark's string as is: turning it into the manifest's path on
every row cost more than the rest of a scan (measured 3.5 s vs 0.8 s on 2.9M rows), so the small sides
are translated instead: :func:`file_uris` maps manifest paths to Spark's names on the driver, and delete
rows get Spark's names by an expression (plain paths) or a join with that map (escaped paths).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from pyiceberg.schema import Schema
from pyiceberg.types import PrimitiveType
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from rowops.exec.spark.listing import read_files, spark_name
from rowops.exec.spark.stats import broadcast_cap
from rowops.exec.spark.types import FIELD_ID_KEY, to_spark_schema, to_spark_type
from rowops.meta.defaults import initial_defaults, sql_literal
from rowops.meta.files import LiveFile

FILE_COL, POS_COL = "_file", "_pos"


def file_uri(spark: SparkSession, path: str) -> str:
    """Spark's ``_metadata.file_path`` for the file at ``path`` (a manifest path): ``listing.spark_name``."""
    return spark_name(path)


def file_uris(spark: SparkSession, files: Iterable[LiveFile]) -> dict[str, str]:
    """``{LiveFile.path: Spark's name of the file}`` for ``files``."""
    return {f.path: file_uri(spark, f.path) for f in files}


def read_parquet(spark: SparkSession, schema: T.StructType, paths: Sequence[str]) -> DataFrame:
    """Read exactly the Parquet files at ``paths`` (keys) by Iceberg field id (no partition inference);
    Spark is given ``file:``/``s3a:`` URIs, whatever the session's default file system: the files by
    name, or from :data:`listing.MIN_FILES` files on their directories, files kept by name (``exec/spark/listing.py``)."""
    reader = spark.read.schema(schema).option("recursiveFileLookup", "true")
    return read_files(spark, reader, paths)


def _empty(spark: SparkSession, schema: T.StructType) -> DataFrame:
    return spark.createDataFrame([], schema)


def read_as_stored(
    spark: SparkSession, schema: Schema, files: Sequence[LiveFile], extra: Sequence[Column] = ()
) -> DataFrame:
    """The columns of ``schema`` (then ``extra``) of ``files``, by field id.

    A widened column is read with the type each file stores it in (Spark's Parquet reader does not
    promote int to long, float to double or decimals across physical types) and cast: files are read
    in one group per stored type (and set of absent defaulted columns), the groups united. Columns a
    file lacks read as NULL, or as their ``initial-default`` (format v3; ``LiveFile.absent``, from the
    files' footers); renamed columns are found by their field id.
    """
    struct = to_spark_schema(schema)
    defaults = initial_defaults(schema)
    groups: dict[str, list[LiveFile]] = defaultdict(list)
    for f in files:
        groups[repr((_narrower(schema, f), sorted(f.absent & defaults.keys())))].append(f)
    parts = []
    for _, group in sorted(groups.items()):
        stored = dict(_narrower(schema, group[0]))
        absent = group[0].absent & defaults.keys()
        fields = [
            T.StructField(s.name, to_spark_type(stored[i]), s.nullable, s.metadata) if i in stored else s
            for s, i in ((s, s.metadata[FIELD_ID_KEY]) for s in struct.fields)
        ]
        df = read_parquet(spark, T.StructType(fields), [f.path for f in group])
        if stored or absent:
            columns = [_column(s, schema, stored, absent, defaults) for s in struct.fields]
            df = df.select(*columns, *extra)
        elif extra:  # "*": one column, not a JVM round trip or three per column of a wide table
            df = df.select("*", *extra)
        parts.append(df)
    return functools.reduce(DataFrame.unionByName, parts)


def _column(
    s: T.StructField,
    schema: Schema,
    stored: dict[int, PrimitiveType],
    absent: frozenset[int],
    defaults: dict[int, Any],
) -> Column:
    """A column as read: cast from its stored type, or the initial-default of a column the files
    lack (format v3; NULL without one), else as is."""
    field_id = s.metadata[FIELD_ID_KEY]
    if field_id in absent:
        field = schema.find_field(field_id)
        return F.expr(sql_literal(field.field_type, defaults[field_id])).alias(s.name)
    if field_id in stored:
        return F.col(f"`{s.name}`").cast(s.dataType).alias(s.name)
    return F.col(f"`{s.name}`")


def _narrower(schema: Schema, f: LiveFile) -> list[tuple[int, PrimitiveType]]:
    """(field id, stored type) of the columns ``f`` stores in another type than ``schema`` reads."""
    wanted = {field.field_id: field.field_type for field in schema.fields}
    return [(i, t) for i, t in f.stored if i in wanted and wanted[i] != t]


def read_data_files(spark: SparkSession, schema: Schema, files: Sequence[LiveFile]) -> DataFrame:
    """Rows of the given data files with ``_file`` and ``_pos``; no deletes applied."""
    struct = to_spark_schema(schema)
    ids = T.StructType(
        [T.StructField(FILE_COL, T.StringType(), False), T.StructField(POS_COL, T.LongType(), False)]
    )
    if not files:
        return _empty(spark, T.StructType(struct.fields + ids.fields))
    extra = [F.col("_metadata.file_path").alias(FILE_COL), F.col("_metadata.row_index").alias(POS_COL)]
    return read_as_stored(spark, schema, files, extra)


def broadcast_if_fits(spark: SparkSession, rows: DataFrame, size: int) -> DataFrame:
    """Delete rows, hinted for broadcast when their estimated in-memory ``size`` allows it.

    Delete sets are counted exactly by their manifests, while Spark sizes a join side by its files'
    compressed bytes and shuffles both sides above 10 MB: at SF 10, four micro-batches of keys
    (~10 MB of Parquet) turned every later read into a sort-merge join that shuffles the whole table
    (measured 1.5-1.7x slower than the broadcast already at SF 1). Above ``rowops.broadcast.max-bytes``
    (``exec/spark/stats.py``) Spark decides.
    """
    return F.broadcast(rows) if fits_broadcast(spark, size) else rows


def fits_broadcast(spark: SparkSession, size: int) -> bool:
    """Whether rows of an estimated in-memory ``size`` are hinted for broadcast
    (:func:`broadcast_if_fits`)."""
    return size <= broadcast_cap(spark)
