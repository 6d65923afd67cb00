"""Spark's ANSI store-assignment rules, table-driven from what Spark 3.5's own INSERT accepts."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from rowops.exec.checks.validation import can_store_assign, widens

TYPES = {
    "boolean": T.BooleanType(),
    "int": T.IntegerType(),
    "bigint": T.LongType(),
    "float": T.FloatType(),
    "double": T.DoubleType(),
    "decimal(7,2)": T.DecimalType(7, 2),
    "string": T.StringType(),
    "binary": T.BinaryType(),
    "date": T.DateType(),
    "timestamp": T.TimestampType(),
    "timestamp_ntz": T.TimestampNTZType(),
}
NUMBERS = ["int", "bigint", "float", "double", "decimal(7,2)"]
DATETIMES = ["date", "timestamp", "timestamp_ntz"]
# source type -> the column types `INSERT INTO t SELECT <value of source type>` accepts in Spark 3.5.9
# (spark.sql.storeAssignmentPolicy=ANSI). One deviation: Spark also accepted an int *literal* into a
# boolean column; Cast.canANSIStoreAssign (numeric -> boolean: no) is what rowops follows.
ACCEPTED = {
    "boolean": ["boolean", "string"],
    **{n: [*NUMBERS, "string"] for n in NUMBERS},
    "string": ["string"],
    "binary": ["string", "binary"],
    **{d: ["string", *DATETIMES] for d in DATETIMES},
}


@pytest.mark.parametrize("source", list(TYPES))
@pytest.mark.parametrize("target", list(TYPES))
def test_ansi_store_assignment(source: str, target: str) -> None:
    assert can_store_assign(TYPES[source], TYPES[target]) == (target in ACCEPTED[source])


def test_null_is_assignable_everywhere() -> None:
    assert all(can_store_assign(T.NullType(), t) for t in TYPES.values())


@pytest.mark.parametrize(
    ("source", "target", "exact"),
    [
        (T.IntegerType(), T.LongType(), True),
        (T.LongType(), T.IntegerType(), False),
        (T.DecimalType(7, 2), T.DecimalType(8, 2), True),
        (T.DecimalType(8, 2), T.DecimalType(7, 2), False),
        (T.DecimalType(7, 2), T.DecimalType(9, 4), True),
        (T.DecimalType(7, 2), T.DecimalType(8, 4), False),
        (T.DecimalType(7, 3), T.DecimalType(7, 2), False),
        (T.DoubleType(), T.DecimalType(38, 10), False),
        (T.FloatType(), T.DoubleType(), True),
    ],
)
def test_casts_without_run_time_check(source: T.DataType, target: T.DataType, exact: bool) -> None:
    """Only exact widenings skip the run-time overflow check."""
    assert widens(source, target) == exact


def test_nested_types_are_assigned_field_by_field_by_name() -> None:
    def struct(**fields: T.DataType) -> T.StructType:
        return T.StructType([T.StructField(n, t) for n, t in fields.items()])

    assert can_store_assign(
        struct(a=T.IntegerType(), b=T.StringType()), struct(b=T.StringType(), a=T.LongType())
    )
    assert not can_store_assign(struct(a=T.StringType()), struct(a=T.IntegerType()))
    assert not can_store_assign(struct(a=T.IntegerType()), struct(a=T.IntegerType(), b=T.IntegerType()))
    assert can_store_assign(T.ArrayType(T.IntegerType()), T.ArrayType(T.StringType()))
    assert not can_store_assign(
        T.MapType(T.StringType(), T.IntegerType()), T.MapType(T.StringType(), T.BinaryType())
    )
    assert not can_store_assign(struct(a=T.IntegerType()), T.IntegerType())
    assert not can_store_assign(T.ArrayType(T.IntegerType()), T.MapType(T.IntegerType(), T.IntegerType()))
    assert can_store_assign(T.NullType(), struct(a=T.IntegerType()))
