"""Partition transforms computed in Spark equal pyiceberg's reference implementation.

The time-transform matrix runs every transform of both timestamp types (and dates) in sessions whose
time zone is UTC or not, on values from year 1 to 9999 around the 1969/1970 boundaries; expected
values are computed by pyiceberg from the Iceberg-internal long, never by Python datetime arithmetic.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.partitioning import PartitionField
from pyiceberg.schema import Schema
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
    YearTransform,
)
from pyiceberg.types import (
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
)
from pyiceberg.utils.datetime import date_str_to_days, timestamp_to_micros
from pyspark.sql import SparkSession
from pyspark.sql import types as T

import rowops
from rowops.exec.reading.prescan import scan_source_keys
from rowops.exec.spark.transforms import apply_rust_transform, parse_value, partition_value
from rowops.exec.spark.types import to_spark_schema
from rowops.meta.paths import normalize_path
from tests.readers import assert_readers_agree

UTC = dt.timezone.utc
VALUES = {
    "l": [0, 1, -1, 34, 2**31, -(2**63), 2**63 - 1, 123456789012, None],
    "i": [0, 1, -1, 34, 2**31 - 1, -(2**31), None, 7, 1000],
    "s": ["", "a", "iceberg", "ünïcödé", "x" * 40, None, "bucket", "0", "-"],
    "dec": [
        Decimal("0.00"),
        Decimal("-1.50"),
        Decimal("14.20"),
        None,
        Decimal("99999999.99"),
        Decimal("0.01"),
        Decimal("-0.01"),
        Decimal("12345.67"),
        Decimal("1.00"),
    ],
    "d": [
        dt.date(1970, 1, 1),
        dt.date(1969, 12, 31),
        dt.date(2024, 2, 29),
        None,
        dt.date(1, 1, 1),
        dt.date(9999, 12, 31),
        dt.date(2017, 11, 16),
        dt.date(2000, 1, 1),
        dt.date(1900, 3, 1),
    ],
    "ts": [
        dt.datetime(1970, 1, 1, tzinfo=UTC),
        dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        dt.datetime(2024, 2, 29, 13, 5, tzinfo=UTC),
        None,
        dt.datetime(2017, 11, 16, 22, 31, 8, tzinfo=UTC),
        dt.datetime(1900, 1, 1, tzinfo=UTC),
        dt.datetime(2100, 6, 1, 1, 2, 3, 4, tzinfo=UTC),
        dt.datetime(2000, 1, 1, tzinfo=UTC),
        dt.datetime(1999, 12, 31, 23, tzinfo=UTC),
    ],
}
SCHEMA = Schema(
    NestedField(1, "l", LongType()),
    NestedField(2, "i", IntegerType()),
    NestedField(3, "s", StringType()),
    NestedField(4, "dec", DecimalType(10, 2)),
    NestedField(5, "d", DateType()),
    NestedField(6, "ts", TimestamptzType()),
)
CASES = [
    ("l", BucketTransform(16)),
    ("i", BucketTransform(7)),
    ("s", BucketTransform(32)),
    ("dec", BucketTransform(5)),
    ("d", BucketTransform(10)),
    ("ts", BucketTransform(100)),
    ("l", TruncateTransform(10)),
    ("i", TruncateTransform(3)),
    ("s", TruncateTransform(2)),
    ("dec", TruncateTransform(50)),
    ("d", YearTransform()),
    ("d", MonthTransform()),
    ("d", DayTransform()),
    ("ts", YearTransform()),
    ("ts", MonthTransform()),
    ("ts", DayTransform()),
    ("ts", HourTransform()),
]


@pytest.mark.parametrize(("column", "transform"), CASES, ids=[f"{t}({c})" for c, t in CASES])
def test_transform_matches_reference(spark, column, transform) -> None:  # type: ignore[no-untyped-def]
    rows = list(zip(*VALUES.values(), strict=True))
    struct = T.StructType([T.StructField(f.name, f.dataType) for f in to_spark_schema(SCHEMA).fields])
    df = spark.createDataFrame(rows, struct)
    source = SCHEMA.find_field(column)
    field = PartitionField(source_id=source.field_id, field_id=1000, transform=transform, name="p")
    got = [r[0] for r in df.select(partition_value(field, SCHEMA)).collect()]
    result_type = transform.result_type(source.field_type)
    parsed = [None if g is None else parse_value("v" + g[1:] if g else g, result_type) for g in got]
    reference = transform.transform(source.field_type)
    expected = [reference(_internal(v, source.field_type)) for v in VALUES[column]]
    if isinstance(transform, TruncateTransform) and isinstance(source.field_type, IntegerType | LongType):
        bits = 32 if isinstance(source.field_type, IntegerType) else 64
        expected = [None if e is None else _wrap(e, bits) for e in expected]
    assert parsed == expected


def _wrap(value: int, bits: int) -> int:
    """Two's-complement overflow, as Iceberg's Java truncate computes at the int/long extremes
    (pyiceberg uses unbounded Python ints there)."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def _internal(value, iceberg_type):  # type: ignore[no-untyped-def]
    """Iceberg's internal representation (what pyiceberg's transform functions take)."""
    if value is None:
        return None
    if isinstance(iceberg_type, DateType):
        return (value - dt.date(1970, 1, 1)).days
    if isinstance(iceberg_type, TimestamptzType):
        return pa.scalar(value, pa.timestamp("us", tz="UTC")).cast(pa.int64()).as_py()
    return value


# ---- time transforms: both timestamp types and dates, in UTC and non-UTC sessions --------------------

ZONES = ["UTC", "America/Los_Angeles", "Asia/Kolkata"]  # Kolkata: a half-hour offset
WALL_CLOCKS: list[str | None] = [
    "0001-01-01T00:00:00",
    "0001-01-01T00:00:00.000001",
    "0001-12-31T23:59:59.999999",
    "1582-10-10T12:00:00",
    "1900-01-01T00:00:00",
    "1968-12-31T23:59:59.999999",
    "1969-01-01T00:00:00",
    "1969-12-31T00:00:00",
    "1969-12-31T22:59:59.999999",
    "1969-12-31T23:00:00",
    "1969-12-31T23:59:59",
    "1969-12-31T23:59:59.999999",
    "1970-01-01T00:00:00",
    "1970-01-01T00:00:00.000001",
    "1970-01-01T00:59:59.999999",
    "1970-01-01T01:00:00",
    "2024-02-29T23:59:59.999999",
    "2024-03-10T02:30:00",  # does not exist in Los Angeles (spring forward)
    "2024-11-03T01:30:00",  # exists twice in Los Angeles (fall back)
    "2099-12-31T23:59:59.999999",
    "2100-01-01T00:00:00",
    "2100-02-28T23:59:59.999999",
    "2100-03-01T00:00:00",
    "9999-12-31T00:00:00",
    "9999-12-31T23:59:59.999999",  # the usual "valid until" sentinel
    None,
]
TIME_SCHEMA = Schema(
    NestedField(1, "tz", TimestamptzType()),
    NestedField(2, "ntz", TimestampType()),
    NestedField(3, "d", DateType()),
)
TIME_TRANSFORMS = [
    IdentityTransform(),
    BucketTransform(16),
    BucketTransform(1000),
    YearTransform(),
    MonthTransform(),
    DayTransform(),
    HourTransform(),
]


def micros(wall_clock: str) -> int:
    """Iceberg's internal long of a wall-clock time (for ``timestamptz``: that time in UTC)."""
    return timestamp_to_micros(wall_clock)


def time_internal(wall_clock: str | None, column: str) -> int | None:
    """The Iceberg-internal value of ``wall_clock`` in column ``column`` (micros, or days for dates)."""
    if wall_clock is None:
        return None
    return date_str_to_days(wall_clock[:10]) if column == "d" else micros(wall_clock)


def time_row(wall_clock: str | None) -> tuple[object, ...]:
    """(tz, ntz, d) Python values, built from the internal long by exact integer arithmetic."""
    if wall_clock is None:
        return (None, None, None)
    naive = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros(wall_clock))
    return (naive.replace(tzinfo=UTC), naive, naive.date())


@contextmanager
def zone_of(spark: SparkSession, zone: str) -> Iterator[str]:
    """The shared session's ``spark.sql.session.timeZone`` set to ``zone``, restored afterwards."""
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        yield zone
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


@pytest.fixture(params=ZONES)
def session_zone(spark, request):  # type: ignore[no-untyped-def]
    with zone_of(spark, request.param) as zone:
        yield zone


@pytest.mark.parametrize("column", ["tz", "ntz", "d"])
def test_time_transforms_match_reference_in_session_zone(spark, session_zone, column) -> None:  # type: ignore[no-untyped-def]
    df = spark.createDataFrame([time_row(w) for w in WALL_CLOCKS], to_spark_schema(TIME_SCHEMA))
    source = TIME_SCHEMA.find_field(column)
    transforms = [t for t in TIME_TRANSFORMS if t.can_transform(source.field_type)]
    fields = [PartitionField(source.field_id, 1000 + i, t, f"p{i}") for i, t in enumerate(transforms)]
    rows = df.select(*[partition_value(f, TIME_SCHEMA).alias(f.name) for f in fields]).collect()
    for field, transform in zip(fields, transforms, strict=True):
        result_type = transform.result_type(source.field_type)
        got = [None if r[field.name] is None else parse_value(r[field.name], result_type) for r in rows]
        reference = transform.transform(source.field_type)
        expected = [reference(time_internal(w, column)) for w in WALL_CLOCKS]
        mismatches = [(w, g, e) for w, g, e in zip(WALL_CLOCKS, got, expected, strict=True) if g != e]
        assert not mismatches, f"{transform}({column}) in {session_zone}: (value, got, expected) {mismatches}"


def test_time_transforms_run_on_the_jvm(spark) -> None:  # type: ignore[no-untyped-def]
    """No pandas UDF for dates and timestamps: Arrow would hand it timestamps in the session zone, or
    nullable epoch longs as float64 (which rounds micros far from the epoch)."""
    df = spark.createDataFrame([time_row(w) for w in WALL_CLOCKS], to_spark_schema(TIME_SCHEMA))
    fields = [
        PartitionField(source.field_id, 1000, t, "p")
        for source in TIME_SCHEMA.fields
        for t in TIME_TRANSFORMS
        if t.can_transform(source.field_type)
    ]
    plan = df.select(*[partition_value(f, TIME_SCHEMA) for f in fields])._jdf.queryExecution().toString()
    assert "ArrowEvalPython" not in plan
    strings = spark.createDataFrame([("a",)], "s string")
    field = PartitionField(3, 1000, BucketTransform(4), "p")
    assert (
        "ArrowEvalPython" in strings.select(partition_value(field, SCHEMA))._jdf.queryExecution().toString()
    )
    with pytest.raises(ValueError, match="JVM"):
        apply_rust_transform("bucket", 16, TimestampType(), pd.Series([micros("9999-12-31T23:59:59.999999")]))


TRUNCATED_INTS = [0, 1, -1, 2, -2, 9, -9, 10, -10, 11, -11, 99, -99, 100, -100, 101, -101, 12345, -12345]


@pytest.mark.parametrize("width", [1, 2, 3, 10, 7, 1000])
@pytest.mark.parametrize("ansi", ["false", "true"])
def test_truncate_of_negative_ints_and_longs(spark, width, ansi) -> None:  # type: ignore[no-untyped-def]
    """``v - pmod(v, W)`` equals Iceberg's ``v - (((v % W) + W) % W)`` for negative values too, wrapping
    at the extremes also with ANSI mode on (Spark 4's default)."""
    previous = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", ansi)
    try:
        _check_negative_truncates(spark, width)
    finally:
        spark.conf.set("spark.sql.ansi.enabled", previous)


def _check_negative_truncates(spark, width) -> None:  # type: ignore[no-untyped-def]
    longs = [*TRUNCATED_INTS, -(2**40) - 3, 2**40 + 3, -(2**62) + 1]
    ints = [*TRUNCATED_INTS, -(2**31) + 5, 2**31 - 5, -(2**30) - 1]
    df = spark.createDataFrame(
        list(zip(longs, ints, strict=True)), T.StructType(to_spark_schema(SCHEMA).fields[:2])
    )
    for column, values in (("l", longs), ("i", ints)):
        source = SCHEMA.find_field(column)
        field = PartitionField(source.field_id, 1000, TruncateTransform(width), "p")
        got = [int(r[0][1:]) for r in df.select(partition_value(field, SCHEMA)).collect()]
        bits = 64 if column == "l" else 32  # Iceberg Java wraps around at the int/long extremes
        assert got == [_wrap(v - (((v % width) + width) % width), bits) for v in values], column


# ---- the whole path in non-UTC zones: pre-scan bounds, partition values in manifests, rows read back --


@pytest.fixture(params=["America/Los_Angeles", "Asia/Kolkata"])
def python_zone(request):  # type: ignore[no-untyped-def]
    """The driver process's local time zone (PySpark collects ``timestamp`` values in it), restored after."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = request.param
    time.tzset()
    try:
        yield request.param
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


def test_prescan_bounds_are_internal_in_any_driver_zone(lake, python_zone) -> None:  # type: ignore[no-untyped-def]
    """Key bounds come out as Iceberg micros/days, whatever zone the driver's Python process is in."""
    keys = [w for w in WALL_CLOCKS if w is not None]
    source = lake.spark.createDataFrame([time_row(w) for w in keys], to_spark_schema(TIME_SCHEMA))
    table = lake.create_table(
        "db.t", source.limit(0), partition_by=["day(ntz)"], identifier=["tz", "ntz", "d"]
    )
    scanned = scan_source_keys(source, ["tz", "ntz", "d"], table.metadata, [])
    day = DayTransform().transform(TimestampType())
    expected: dict[tuple[int], dict[str, tuple[int, int]]] = {}
    for w in keys:  # keys are sorted: the first of a day is its minimum, the last its maximum
        bounds = expected.setdefault((day(micros(w)),), {})
        for column in ("tz", "ntz", "d"):
            value = time_internal(w, column)
            bounds[column] = (bounds.get(column, (value, value))[0], value)
    assert {p: dict(b) for p, b in scanned.ranges.by_partition.items()} == expected


ROUND_TRIP_COLUMNS = ["k", "tz", "ntz", "v"]
ROUND_TRIP_SCHEMA = T.StructType(
    [
        T.StructField("k", T.LongType()),
        T.StructField("tz", T.TimestampType()),
        T.StructField("ntz", T.TimestampNTZType()),
        T.StructField("v", T.IntegerType()),
    ]
)


def round_trip_row(k: int, tz_wall: str, ntz_wall: str, v: int) -> tuple[object, ...]:
    return (k, time_row(tz_wall)[0], time_row(ntz_wall)[1], v)


# Kolkata (+05:30, no DST) runs in `make test`; Los Angeles (DST) in `make test-slow`
@pytest.mark.parametrize(
    "zone", [pytest.param("America/Los_Angeles", marks=pytest.mark.slow), "Asia/Kolkata"]
)
def test_partitioned_merge_round_trip_in_session_zone(lake, strategy, java, zone) -> None:  # type: ignore[no-untyped-def]
    """Create, MERGE and read back a table partitioned by transforms of both timestamp types in a
    non-UTC session: every data file's manifest partition is pyiceberg's transform of its rows, and
    all readers return the rows written."""
    walls = [w for w in WALL_CLOCKS if w is not None]
    # PySpark cannot collect a `timestamp` on 0001-01-01 (datetime.fromtimestamp looks a day back)
    instants = [w for w in walls if not w.startswith("0001-01-01")]
    n, m = len(walls), len(instants)
    rows = {k: round_trip_row(k, instants[(k * 7) % m], walls[k], 0) for k in range(n)}
    changes = [(*rows[k][:3], 1) for k in range(0, n, 3)]
    changes += [round_trip_row(n + j, instants[(j * 11) % m], walls[(j * 5) % n], 2) for j in range(5)]
    with zone_of(lake.spark, zone):
        table = lake.create_table(
            "db.t",
            lake.spark.createDataFrame(list(rows.values()), ROUND_TRIP_SCHEMA),
            partition_by=["day(ntz)", "bucket(4, ntz)", "hour(tz)"],
            identifier=["k", "tz", "ntz"],
        )
        source = lake.spark.createDataFrame(changes, ROUND_TRIP_SCHEMA)
        rowops.merge(source, table, on=["k", "tz", "ntz"], strategy=strategy)
        rows.update({int(r[0]): r for r in changes})  # type: ignore[call-overload]
        assert_readers_agree(table, rows.values(), ROUND_TRIP_COLUMNS, java)
    assert_manifest_partitions(table)


def assert_manifest_partitions(table) -> None:  # type: ignore[no-untyped-def]
    """Each data file's partition tuple equals pyiceberg's transforms of every row in it."""
    metadata = table.metadata
    schema, spec = metadata.schema(), metadata.spec()
    data = table.files().data
    assert data
    for f in data:
        file_rows = pq.read_table(normalize_path(f.path))
        for i in range(file_rows.num_rows):
            expected = []
            for field in spec.fields:
                source = schema.find_field(field.source_id)
                internal = file_rows.column(source.name).cast(pa.int64())[i].as_py()
                expected.append(field.transform.transform(source.field_type)(internal))
            assert f.partition == tuple(expected), f.path
