"""The rows that changed between two states of a table, as a Spark DataFrame (nothing collected).

Given the files that differ (``plan/feed.py``), the change of one commit is read from those files
only:
  * deleted: rows live ``before`` in removed or re-deleted data files that are not live ``after``
    (a re-deleted file's rows are matched by ``(_file, _pos)``: the file is the same, only deletes
    changed; every encoding reduces to this: copy-on-write removes files, position deletes and
    deletion vectors delete positions, equality deletes delete the older rows of their keys);
  * inserted: the live rows of data files added ``after``.

A copy-on-write rewrite deletes and re-inserts the rows it did not change ("carry-overs"); a delete and
an insert of the same values in one commit cancel out, as Iceberg's changelog view removes them. A
delete and an insert of the same key (identifier columns, else v3 ``_row_id``) become an update's
pre- and post-image.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime, timezone

from pyiceberg.schema import Schema
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from rowops.exec.reading.file_reads import FILE_COL, POS_COL
from rowops.exec.reading.scan import scan
from rowops.exec.spark.compat import select_columns
from rowops.meta.files import LiveFile, TableFiles
from rowops.meta.lineage import ROW_ID
from rowops.plan.feed import FileDiff

CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_SNAPSHOT_ID = "_commit_snapshot_id"
COMMIT_TIMESTAMP = "_commit_timestamp"
CHANGE_ORDINAL = "_change_ordinal"
FEED_COLUMNS = (CHANGE_TYPE, COMMIT_VERSION, COMMIT_SNAPSHOT_ID, COMMIT_TIMESTAMP, CHANGE_ORDINAL)
INSERT, DELETE = "insert", "delete"
PREIMAGE, POSTIMAGE = "update_preimage", "update_postimage"

_SIGN = "_feed_sign"


def state_changes(
    spark: SparkSession,
    schema: Schema,
    before: TableFiles,
    after: TableFiles,
    diff: FileDiff,
    keys: Sequence[str],
) -> DataFrame:
    """The rows deleted and inserted from ``before`` to ``after`` with ``_change_type``; carry-overs
    removed, updates paired by ``keys`` (table columns, or ``_row_id``; none: no pairing)."""
    columns = [f.name for f in schema.fields]
    lineage = ROW_ID in keys
    carried = [*columns, *([ROW_ID] if lineage else [])]
    parts = []
    if diff.read_before:
        parts.append(_sign(_deleted(spark, schema, before, after, diff), carried, -1))
    if diff.added:
        inserted = scan(spark, schema, after, diff.added, row_ids=lineage)
        parts.append(_sign(inserted, carried, 1))
    if not parts:
        return _empty_changes(spark, schema)
    rows = _without_carryovers(functools.reduce(DataFrame.unionByName, parts), columns)
    return _labelled(rows, keys).select(*columns, CHANGE_TYPE)


def _deleted(
    spark: SparkSession, schema: Schema, before: TableFiles, after: TableFiles, diff: FileDiff
) -> DataFrame:
    """Rows live ``before`` in the removed and re-deleted files, less those still live ``after``."""
    rows = scan(spark, schema, before, diff.read_before, row_ids=True)
    if not diff.redeleted:
        return rows
    live_after = {f.path: f for f in after.data}
    still = [live_after[f.path] for f in diff.redeleted]
    kept = scan(spark, schema, after, still, row_ids=True).select(FILE_COL, POS_COL)
    return rows.join(kept, [FILE_COL, POS_COL], "left_anti")


def _sign(rows: DataFrame, columns: Sequence[str], sign: int) -> DataFrame:
    return select_columns(rows, list(columns)).withColumn(_SIGN, F.lit(sign))


def _without_carryovers(rows: DataFrame, columns: Sequence[str]) -> DataFrame:
    """Drop deleted/inserted pairs of equal rows (all table columns equal, NULLs included): the
    rows a rewrite copied. Of ``d`` deletes and ``i`` inserts of equal values, ``|d - i|`` remain."""
    same = Window.partitionBy(*columns)
    nth = Window.partitionBy(*columns, _SIGN).orderBy(F.lit(1))
    deletes = F.sum(F.when(F.col(_SIGN) < 0, 1).otherwise(0)).over(same)
    inserts = F.sum(F.when(F.col(_SIGN) > 0, 1).otherwise(0)).over(same)
    matched = F.when(F.col(_SIGN) < 0, inserts).otherwise(deletes)
    counted = rows.withColumn("_feed_n", F.row_number().over(nth)).withColumn("_feed_matched", matched)
    return counted.where(F.col("_feed_n") > F.col("_feed_matched")).drop("_feed_n", "_feed_matched")


def _labelled(rows: DataFrame, keys: Sequence[str]) -> DataFrame:
    """``_change_type``: a key with exactly one delete and one insert is an update; else as signed."""
    plain = F.when(F.col(_SIGN) < 0, F.lit(DELETE)).otherwise(F.lit(INSERT))
    if not keys:
        return rows.withColumn(CHANGE_TYPE, plain)
    key = Window.partitionBy(*keys)
    deletes = F.sum(F.when(F.col(_SIGN) < 0, 1).otherwise(0)).over(key)
    inserts = F.sum(F.when(F.col(_SIGN) > 0, 1).otherwise(0)).over(key)
    update = (deletes == 1) & (inserts == 1) & _all_not_null(keys)
    image = F.when(F.col(_SIGN) < 0, F.lit(PREIMAGE)).otherwise(F.lit(POSTIMAGE))
    return rows.withColumn(CHANGE_TYPE, F.when(update, image).otherwise(plain))


def _all_not_null(keys: Sequence[str]) -> Column:
    return functools.reduce(lambda a, b: a & b, [F.col(k).isNotNull() for k in keys])


def with_commit(
    rows: DataFrame, version: int | None, snapshot_id: int | None, timestamp_ms: int, ordinal: int
) -> DataFrame:
    """``rows`` with the commit columns of the feed (version NULL outside a rowops lake)."""
    when = datetime.fromtimestamp(timestamp_ms / 1000, tz=timezone.utc)
    return rows.select(
        "*",
        F.lit(version).cast("long").alias(COMMIT_VERSION),
        F.lit(snapshot_id).cast("long").alias(COMMIT_SNAPSHOT_ID),
        F.lit(when).cast("timestamp").alias(COMMIT_TIMESTAMP),
        F.lit(ordinal).cast("int").alias(CHANGE_ORDINAL),
    )


def union_commits(spark: SparkSession, schema: Schema, commits: Sequence[DataFrame]) -> DataFrame:
    """The feed of several commits (one empty feed when there is none)."""
    if commits:
        return functools.reduce(DataFrame.unionByName, commits)
    return with_commit(_empty_changes(spark, schema), None, None, 0, 0)


def _empty_changes(spark: SparkSession, schema: Schema) -> DataFrame:
    nothing = scan(spark, schema, TableFiles(None, 0, (), (), (), ()), [])
    columns = [f.name for f in schema.fields]
    return select_columns(nothing, columns).withColumn(CHANGE_TYPE, F.lit(INSERT)).limit(0)


def appended_rows_of(
    spark: SparkSession, schema: Schema, added: Sequence[tuple[TableFiles, Sequence[LiveFile]]]
) -> DataFrame:
    """The live rows of each commit's added data files, as of that commit (table columns only)."""
    columns = [f.name for f in schema.fields]
    parts = [select_columns(scan(spark, schema, files, data), columns) for files, data in added]
    if parts:
        return functools.reduce(DataFrame.unionByName, parts)
    return select_columns(scan(spark, schema, TableFiles(None, 0, (), (), (), ()), []), columns)
