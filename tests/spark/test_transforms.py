"""Partition transforms computed in Spark equal pyiceberg-core's reference implementation."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from pyiceberg.partitioning import PartitionField
from pyiceberg.schema import Schema
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
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
    TimestamptzType,
)
from pyspark.sql import types as T

from rowops.exec.transforms import parse_value, partition_value
from rowops.exec.types import to_spark_schema

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
