"""The rows that changed between two states of a table, as a Spark DataFrame (nothing collected).

Given the files that differ (``plan/feed.py``), the change of one commit is read from those files
only:
  * deleted: the live rows ``before`` of data files gone ``after`` (copy-on-write);
  * re-deleted data files, live in both states with other deletes: the rows at the positions deleted
    in one state and not the other, read by position (``exec/changes/redeleted.py``): position
    deletes and deletion vectors delete positions, equality deletes the older rows of their keys; a
    rollback brings rows back;
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

from pyiceberg.io import FileIO
from pyiceberg.schema import Schema
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from rowops.exec.changes.arrow_diff import arrow_diff_groups, rewritten_changes
from rowops.exec.changes.redeleted import SIGN as _SIGN
from rowops.exec.changes.redeleted import redeleted_changes
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


def state_changes(
    spark: SparkSession,
    schema: Schema,
    before: TableFiles,
    after: TableFiles,
    diff: FileDiff,
    keys: Sequence[str],
    io: FileIO,
) -> DataFrame:
    """The rows deleted and inserted from ``before`` to ``after`` with ``_change_type``; carry-overs
    removed, updates paired by ``keys`` (table columns, or ``_row_id``; none: no pairing)."""
    columns = [f.name for f in schema.fields]
    lineage = ROW_ID in keys
    carried = [*columns, *([ROW_ID] if lineage else [])]
    parts = []
    groups = None if lineage else arrow_diff_groups(schema, before, after, diff.removed, diff.added, keys)
    if groups is not None:  # copy-on-write: each partition's files diffed by key in Arrow
        parts.append(rewritten_changes(spark, schema, io, diff.removed, diff.added, groups, keys, _SIGN))
    elif diff.removed:
        removed = scan(spark, schema, before, diff.removed, row_ids=lineage)
        parts.append(_sign(removed, carried, -1))
    redeleted = redeleted_changes(spark, schema, before, after, diff.redeleted, row_ids=lineage)
    if redeleted is not None:
        parts.append(select_columns(redeleted, [*carried, _SIGN]))
    if diff.added and groups is None:
        inserted = scan(spark, schema, after, diff.added, row_ids=lineage)
        parts.append(_sign(inserted, carried, 1))
    if not parts:
        return _empty_changes(spark, schema)
    signed = functools.reduce(DataFrame.unionByName, parts)
    rows = _without_carryovers(signed, columns) if lineage else _net_rows(signed, columns)
    return _labelled(rows, keys).select(*columns, CHANGE_TYPE)


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


def _net_rows(rows: DataFrame, columns: Sequence[str]) -> DataFrame:
    """The rows that remain of ``rows`` once equal deleted and inserted rows cancel (the rows a rewrite
    copied), as :func:`_without_carryovers` without the lineage columns: one aggregation by all
    columns (a hash aggregate, partial per task, instead of sorting the rows by every column); a row
    value deleted ``d`` and inserted ``i`` times comes out ``|d - i|`` times, signed."""
    n = "_feed_n"
    net = rows.groupBy(*columns).agg(F.sum(_SIGN).alias(n)).where(F.col(n) != 0)
    copies = F.array_repeat(F.signum(F.col(n)).cast("int"), F.abs(F.col(n)).cast("int"))
    return net.select(*columns, F.explode(copies).alias(_SIGN))


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
