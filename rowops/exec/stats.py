"""Size estimates of DataFrames, from Spark's own plan statistics (no job runs)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import types as T

_DEFAULT_SIZES: list[tuple[type[T.DataType], int]] = [
    (T.BooleanType, 1),
    (T.ByteType, 1),
    (T.ShortType, 2),
    (T.IntegerType, 4),
    (T.DateType, 4),
    (T.FloatType, 4),
    (T.StringType, 20),
    (T.BinaryType, 100),
]


def row_bytes(schema: T.StructType) -> int:
    """Spark's default in-memory size of one row of ``schema`` (as its optimizer assumes)."""
    total = 0
    for field in schema.fields:
        if isinstance(field.dataType, T.DecimalType):
            total += 8 if field.dataType.precision <= 18 else 16
        else:
            total += next((size for cls, size in _DEFAULT_SIZES if isinstance(field.dataType, cls)), 8)
    return total


UNKNOWN_SIZE = 2**63 - 1  # what Spark reports when it has no estimate


def plan_bytes(df: DataFrame) -> int:
    """Spark's optimizer estimate of the DataFrame's size in bytes (``UNKNOWN_SIZE`` if none)."""
    return int(str(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))


def in_memory_bytes(df: DataFrame, rows: int | None) -> int:
    """Bytes the rows take in memory: ``rows`` times the row size, else Spark's plan estimate, else a
    count of the rows (a job over ``df`` only, when Spark has no estimate)."""
    if rows is None and (estimate := plan_bytes(df)) < UNKNOWN_SIZE:
        return estimate
    return (rows if rows is not None else df.count()) * row_bytes(df.schema)
