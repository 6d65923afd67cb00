"""Size estimates of DataFrames, from Spark's own plan statistics (no job runs)."""

from __future__ import annotations

import re

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from rowops.exec.compat import explain_text

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


_UNITS = {"B": 0, "KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40, "PiB": 50, "EiB": 60}
_STATS = re.compile(r"Statistics\(sizeInBytes=([0-9.]+(?:E[+-]?[0-9]+)?) (B|KiB|MiB|GiB|TiB|PiB|EiB)\b")


def plan_bytes(df: DataFrame) -> int:
    """Spark's optimizer estimate of the DataFrame's size in bytes (``UNKNOWN_SIZE`` if none).

    Read from the public cost explain (``df.explain(mode="cost")``, classic and Connect alike): its
    root line of the optimized plan shows ``Statistics(sizeInBytes=5.8 KiB)``, rounded to one decimal of its unit.
    """
    return parse_plan_bytes(explain_text(df, "cost"))


def parse_plan_bytes(text: str) -> int:
    """The root size of the optimized plan in a cost explain (bytes; ``UNKNOWN_SIZE`` for none).

    >>> parse_plan_bytes("== Optimized Logical Plan ==\\nFilter (x), Statistics(sizeInBytes=5.8 KiB)\\n")
    5939
    >>> parse_plan_bytes("== Optimized Logical Plan ==\\nLogicalRDD [a#9], false, Statistics(sizeInBytes=8.0 EiB)")
    9223372036854775807
    >>> parse_plan_bytes("== Physical Plan ==\\n*(1) Scan ExistingRDD[a#9]")
    9223372036854775807
    """
    _, _, optimized = text.partition("== Optimized Logical Plan ==\n")
    root = optimized.split("\n", 1)[0]
    matches = _STATS.findall(root)
    if not matches:
        return UNKNOWN_SIZE
    value, unit = matches[-1]
    size = int(float(value) * (1 << _UNITS[unit]))
    return UNKNOWN_SIZE if size >= 1 << 62 else size  # Spark's unknown: Long.MaxValue (8.0 EiB)


def in_memory_bytes(df: DataFrame, rows: int | None) -> int:
    """Bytes the rows take in memory: ``rows`` times the row size, else Spark's plan estimate, else a
    count of the rows (a job over ``df`` only, when Spark has no estimate)."""
    if rows is None and (estimate := plan_bytes(df)) < UNKNOWN_SIZE:
        return estimate
    return (rows if rows is not None else df.count()) * row_bytes(df.schema)


def physical_plan(df: DataFrame) -> str:
    """Spark's physical plan of ``df`` as ``df.explain()`` prints it, without its header line."""
    text = explain_text(df, "simple").strip()
    return text.removeprefix("== Physical Plan ==").strip()
