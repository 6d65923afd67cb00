"""Test tables: rows of every supported type, three layouts, and a plain-Python oracle."""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

import rowops
from rowops.meta.fileio import list_files
from rowops.meta.paths import relative, to_uri

Row = tuple[Any, ...]
COLUMNS = ["k", "g", "s", "amt", "d", "ts", "x", "flag", "n"]
SCHEMA = T.StructType(
    [
        T.StructField("k", T.LongType()),
        T.StructField("g", T.IntegerType()),
        T.StructField("s", T.StringType()),
        T.StructField("amt", T.DecimalType(10, 2)),
        T.StructField("d", T.DateType()),
        T.StructField("ts", T.TimestampType()),
        T.StructField("x", T.DoubleType()),
        T.StructField("flag", T.BooleanType()),
        T.StructField("n", T.IntegerType()),
    ]
)
_EPOCH = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)


def make_row(k: int, version: int = 0) -> Row:
    """A deterministic row for key ``k``; ``version`` changes every non-key column but ``g``."""
    return (
        k,
        k % 3,
        None if k % 11 == 0 else f"s{k}-v{version}",
        Decimal(f"{k}.{version % 100:02d}"),
        dt.date(2024, 1, 1) + dt.timedelta(days=(k + version) % 40),
        _EPOCH + dt.timedelta(hours=k, minutes=version),
        None if k % 13 == 0 else k * 0.5 + version,
        (k + version) % 2 == 0,
        version,
    )


@dataclass(frozen=True)
class Layout:
    """How the test table is partitioned and keyed."""

    name: str
    partition_by: tuple[str, ...]
    keys: tuple[str, ...]

    def key(self, row: Row) -> Row:
        return tuple(row[COLUMNS.index(c)] for c in self.keys)


LAYOUTS = [
    Layout("unpartitioned", (), ("k",)),
    Layout("identity", ("g",), ("g", "k")),
    Layout("bucket", ("bucket(4, k)",), ("k",)),
]


def frame(spark: SparkSession, rows: Iterable[Row], schema: T.StructType = SCHEMA) -> DataFrame:
    """A DataFrame of test rows (tests build small inputs on the driver; the engine never does)."""
    return spark.createDataFrame(list(rows), schema)


def stalled(rows: DataFrame) -> DataFrame:
    """``rows`` through a Python function that sleeps 600 s on its first batch: a source only a
    cancellation ends in time.

    The rows are checkpointed first, so a cancelled task runs no other Python worker. Otherwise Spark
    3.5 returns the finished worker of ``createDataFrame``'s Python step to its pool and then kills it
    with the task (its monitor kills every worker of a task still running 2 s after the kill), and a
    later task gets it: "java.net.SocketException: Socket is closed" (not so on Spark 4.2)."""

    def stall(batches: Any) -> Any:
        for batch in batches:
            time.sleep(600)
            yield batch

    return rows.localCheckpoint().mapInArrow(stall, rows.schema)


class Oracle:
    """The expected table state, maintained by plain Python."""

    def __init__(self, layout: Layout, rows: Iterable[Row]) -> None:
        self.layout = layout
        self.rows = {layout.key(r): r for r in rows}

    def upsert(self, rows: Iterable[Row]) -> None:
        for r in rows:
            self.rows[self.layout.key(r)] = r

    def delete_keys(self, rows: Iterable[Row]) -> None:
        for r in rows:
            self.rows.pop(self.layout.key(r), None)

    def values(self) -> list[Row]:
        return list(self.rows.values())


def fingerprint(lake_root: Any) -> dict[str, str]:
    """Every file below the lake with a hash of its content: proves 'nothing changed'.

    ``lake_root``: a local directory, or a ``Lakehouse`` (local or on object storage).
    """
    if hasattr(lake_root, "location"):
        lake = lake_root
        io = lake.catalog.io

        def digest(key: str) -> str:
            with io.new_input(to_uri(key)).open() as stream:
                return hashlib.sha1(stream.read()).hexdigest()

        return {relative(f.key, lake.location): digest(f.key) for f in list_files(io, lake.location)}
    return {
        str(p.relative_to(lake_root)): hashlib.sha1(p.read_bytes()).hexdigest()
        for p in sorted(lake_root.rglob("*"))
        if p.is_file()
    }


BIG_ROWS = 60_000


def wide_rows(spark: SparkSession, rows: int = BIG_ROWS) -> DataFrame:
    """Rows ``k, g, payload, payload2`` with wide hashes, so target bytes dwarf a narrow source's."""
    return spark.range(rows).select(
        F.col("id").alias("k"),
        (F.col("id") % 100).alias("g"),
        F.sha2(F.col("id").cast("string"), 256).alias("payload"),
        F.sha2((F.col("id") + 1).cast("string"), 512).alias("payload2"),
    )


def wide_source(spark: SparkSession, step: int) -> DataFrame:
    """Every ``step``-th key of the big table (and a few new ones above it) with narrow values."""
    return spark.range(0, BIG_ROWS + 200, step).select(
        F.col("id").alias("k"),
        F.lit(1).cast("long").alias("g"),
        F.lit("u").alias("payload"),
        F.lit("v").alias("payload2"),
    )


def written_in_every_encoding(lake: Any) -> Any:
    """``db.t`` (k 0..11, bucketed by k) after a MERGE with position deletes and one with equality
    deletes: the metadata-table and snapshot-summary tests' common start."""
    spark = lake.spark
    rows = spark.range(12).selectExpr("id AS k", "CAST(id AS STRING) AS s")
    table = lake.create_table("db.t", rows, identifier=["k"], partition_by=["bucket(2, k)"])
    for keys, value, strategy in (
        (range(5, 15), "x", "position-delete"),
        (range(12, 18), "y", "equality-delete"),
    ):
        source = spark.range(keys.start, keys.stop).selectExpr("id AS k", f"'{value}' AS s")
        rowops.merge(source, table, on=["k"], strategy=strategy)
    return table
