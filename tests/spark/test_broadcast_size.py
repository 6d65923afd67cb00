"""The forced broadcast is sized from measured bytes, under a hard cap (``exec/spark/stats.py``).

A source of 2 KB strings is ~36 bytes a row by Spark's default widths (a string is 20 bytes) but
~2 KB a row measured: under ``rowops.broadcast.max-bytes`` by the first, far above it by the second.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import rowops
from rowops import errors
from rowops.exec.reading.source import release
from rowops.exec.spark.session import session_conf
from rowops.exec.spark.stats import BROADCAST_CAP_CONF, measured_bytes, physical_plan, row_bytes
from rowops.request.operations import simple_merge_spec
from rowops.run import row_level as operations
from tests.readers import assert_readers_agree
from tests.spark.tables import fingerprint

ROWS, LONG, CAP = 800, 2048, 1 << 20


@pytest.fixture()
def cap(spark: SparkSession) -> Iterator[None]:
    """``rowops.broadcast.max-bytes`` at 1 MiB for the test, restored afterwards."""
    with session_conf(spark, {BROADCAST_CAP_CONF: str(CAP)}):
        yield


def long_source(spark: SparkSession) -> DataFrame:
    """Every other key of the table and some new ones, each with a 2 KB string."""
    return spark.range(0, 2 * ROWS, 2).select(
        F.col("id").alias("k"),
        F.lit(1).cast("long").alias("n"),
        F.concat(F.col("id").cast("string"), F.repeat(F.lit("x"), LONG)).alias("s"),
    )


def expected() -> list[tuple[object, ...]]:
    rows = {k: (k, 0, "v") for k in range(ROWS)}
    rows.update({k: (k, 1, f"{k}{'x' * LONG}") for k in range(0, 2 * ROWS, 2)})
    return list(rows.values())


def _join_plan(table, source, strategy: str) -> str | None:  # type: ignore[no-untyped-def]
    """The physical plan of the MERGE's join (None when the encoding reads no target)."""
    planned = operations.plan(table, simple_merge_spec(["k"]), source, strategy)
    try:
        if not planned.decision.scans_target:
            return None
        changes = operations.row_changes(planned, table.lake.spark, table.schema.column_names)
        try:
            return physical_plan(changes.joined)
        finally:
            changes.release()
    finally:
        release(planned.source)


def test_source_measured_above_the_cap_is_not_broadcast(lake, cap, strategy, java) -> None:  # type: ignore[no-untyped-def]
    spark = lake.spark
    target = spark.range(ROWS).select("id", F.lit(0).cast("long"), F.lit("v")).toDF("k", "n", "s")
    table = lake.create_table("db.t", target, identifier=["k"])
    source = long_source(spark).cache()
    assert source.count() * row_bytes(source.schema) < CAP  # Spark's default widths: would broadcast
    plan = _join_plan(table, source, strategy)
    if plan is not None:
        assert "BroadcastHashJoin" not in plan and "BroadcastExchange" not in plan, plan
        assert "ShuffledHashJoin" in plan or "SortMergeJoin" in plan, plan
    result = rowops.merge(source, table, on=["k"], strategy=strategy)
    if plan is not None:
        assert "co-located join: no (source ~1.6 MiB (measured: 2," in result.explain, result.explain
        assert "> 1 MiB" in result.explain
        assert (result.rows_updated, result.rows_inserted) == (ROWS // 2, ROWS // 2)
    assert_readers_agree(table, expected(), ["k", "n", "s"], java)


def test_source_under_the_cap_is_broadcast_with_its_measured_size(lake) -> None:  # type: ignore[no-untyped-def]
    """The control: the same source under the default cap (1 GiB) is broadcast, sized as measured."""
    spark = lake.spark
    target = spark.range(ROWS).select("id", F.lit(0).cast("long"), F.lit("v")).toDF("k", "n", "s")
    table = lake.create_table("db.t", target, identifier=["k"])
    source = long_source(spark).cache()
    plan = _join_plan(table, source, "position-delete")
    assert plan is not None and "BroadcastHashJoin" in plan
    result = rowops.merge(source, table, on=["k"], strategy="position-delete")
    assert "co-located join: yes (source ~1.6 MiB (measured: 2," in result.explain, result.explain


def test_measured_size_of_short_rows_keeps_spark_default_widths(spark: SparkSession) -> None:
    narrow = spark.range(5000).select(F.col("id").alias("k"), F.lit("u").alias("s"))
    size = measured_bytes(narrow, None, sample_rows=500)
    assert size.bytes == 5000 * row_bytes(narrow.schema) and "default widths" in size.basis
    wide = spark.range(5000).select(F.col("id").alias("k"), F.repeat(F.lit("y"), 1000).alias("s"))
    size = measured_bytes(wide, 5000, sample_rows=500)
    assert 1000 < size.per_row < 1100 and size.bytes == int(5000 * size.per_row)
    assert "sampled rows" in size.basis


def test_a_cap_that_is_not_a_number_is_refused_and_nothing_changes(lake, spark) -> None:  # type: ignore[no-untyped-def]
    table = lake.create_table("db.t", spark.range(10).toDF("k"), identifier=["k"])
    before = fingerprint(lake.root)
    with (
        session_conf(spark, {BROADCAST_CAP_CONF: "1GB"}),
        pytest.raises(errors.InvalidInputError, match=r"rowops\.broadcast\.max-bytes") as caught,
    ):
        rowops.merge(spark.range(5).toDF("k"), table, on=["k"], strategy="position-delete")
    assert "Help: Set rowops.broadcast.max-bytes" in str(caught.value)
    assert fingerprint(lake.root) == before
