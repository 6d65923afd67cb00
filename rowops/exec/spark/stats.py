"""Size estimates of DataFrames: Spark's own plan statistics (no job runs), and measured sizes.

Spark's estimates assume default widths (a string is 20 bytes), so a source of long strings is
underestimated many times over; a broadcast forced on such an estimate (``F.broadcast`` overrides
Spark's own threshold) can pass gigabytes through the driver. What rowops broadcasts is sized by
:func:`measured_bytes`: the Arrow bytes per row of a small sample, never below Spark's default widths,
with a hard cap (:data:`BROADCAST_CAP_CONF`) above which nothing is broadcast whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from rowops.exec.spark.compat import explain_text
from rowops.exec.spark.literal_frames import sql_identifier
from rowops.exec.spark.session import int_conf

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


SMALL_SOURCE_CONF = (
    "rowops.small-source.max-bytes"  # Spark conf: a source this small is pre-scanned in one task
)
SMALL_SOURCE_BYTES = 1 << 20


def is_small(df: DataFrame) -> bool:
    """Whether Spark's estimate of ``df`` is at most :data:`SMALL_SOURCE_CONF` bytes (default 1 MiB;
    planning only, no job).

    An estimate, so only for choices that cost time when wrong, never results: a source estimated
    small is pre-scanned in one task, without a shuffle (``exec/reading/prescan.py``).
    """
    return plan_bytes(df) <= int_conf(df.sparkSession, SMALL_SOURCE_CONF, SMALL_SOURCE_BYTES)


BROADCAST_CAP_CONF = "rowops.broadcast.max-bytes"  # Spark conf: the most bytes ever broadcast at once
DEFAULT_BROADCAST_CAP = 1 << 30
SAMPLE_ROWS = 10_000  # rows measured (at most) to size a source


def broadcast_cap(spark: SparkSession) -> int:
    """The session's :data:`BROADCAST_CAP_CONF` (bytes), else :data:`DEFAULT_BROADCAST_CAP` (1 GiB)."""
    return int_conf(spark, BROADCAST_CAP_CONF, DEFAULT_BROADCAST_CAP)


@dataclass(frozen=True)
class MeasuredSize:
    """A DataFrame's estimated in-memory bytes and where the figure came from (for ``explain``)."""

    bytes: int
    per_row: float
    basis: str


def size_from_sample(rows: int, sampled_rows: int, sampled_bytes: int, default_row: int) -> MeasuredSize:
    """``rows`` times the sample's bytes per row, never below Spark's default row width.

    >>> size_from_sample(1_000, 100, 205_000, 36)  # 2 KB strings: measured, not 36 B a row
    MeasuredSize(bytes=2050000, per_row=2050.0, basis='measured: 2,050 B/row over 100 sampled rows')
    >>> size_from_sample(1_000, 100, 1_500, 36).bytes  # narrow rows: Spark's default widths
    36000
    >>> size_from_sample(0, 0, 0, 36)
    MeasuredSize(bytes=0, per_row=36.0, basis="Spark's default widths: 36 B/row (no rows sampled)")
    """
    measured = sampled_bytes / sampled_rows if sampled_rows else 0.0
    if measured <= default_row:
        detail = f"{sampled_rows:,} sampled rows" if sampled_rows else "no rows sampled"
        basis = f"Spark's default widths: {default_row:,} B/row ({detail})"
        return MeasuredSize(rows * default_row, float(default_row), basis)
    basis = f"measured: {measured:,.0f} B/row over {sampled_rows:,} sampled rows"
    return MeasuredSize(int(rows * measured), measured, basis)


def arrow_sizes(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: one row (rows, Arrow bytes) per task, nothing else leaves the task."""
    rows = size = 0
    for batch in batches:
        rows += batch.num_rows
        size += batch.nbytes
    yield pa.RecordBatch.from_pydict({"rows": [rows], "bytes": [size]}, _SIZES)


_SIZES = pa.schema([("rows", pa.int64()), ("bytes", pa.int64())])


def measured_bytes(
    df: DataFrame, rows: int | None, sample_rows: int = SAMPLE_ROWS, measured: int | None = None
) -> MeasuredSize:
    """In-memory size of ``df`` (``rows`` rows; counted when None) measured on a sample of about
    ``sample_rows`` rows: the Arrow size of their columns, in the tasks (only two numbers per task
    reach the driver).

    Args:
        measured: the Arrow bytes of all ``rows`` rows when the caller measured them already
            (:func:`arrow_row_bytes`, in the pre-scan of a small source): no job runs.
    """
    if measured is not None and rows is not None:
        return size_from_sample(rows, rows, measured, row_bytes(df.schema))
    total = df.count() if rows is None else rows
    fraction = min(1.0, sample_rows / max(total, 1))
    # Up to ``sample_rows`` rows are measured whole, in one task; the per-task rows are summed on the
    # driver (an aggregate in Spark would add a shuffle stage: a second job).
    sample = df.coalesce(1) if fraction >= 1.0 else df.sample(fraction=fraction, seed=12)
    found = sample.mapInArrow(arrow_sizes, "rows long, bytes long").collect()
    sampled, size = sum(int(r["rows"]) for r in found), sum(int(r["bytes"]) for r in found)
    return size_from_sample(total, sampled, size, row_bytes(df.schema))


_ARROW_WIDTHS: list[tuple[type[T.DataType], int]] = [
    (T.BooleanType, 1),
    (T.ByteType, 1),
    (T.ShortType, 2),
    (T.IntegerType, 4),
    (T.DateType, 4),
    (T.FloatType, 4),
    (T.LongType, 8),
    (T.DoubleType, 8),
    (T.TimestampType, 8),
    (T.TimestampNTZType, 8),
    (T.DecimalType, 16),
]


def arrow_row_bytes(schema: T.StructType) -> str | None:
    """A SQL expression of a row's bytes in Arrow batches, as :func:`arrow_sizes` measures them:
    fixed widths, strings and binary by their length plus a 4-byte offset (validity bits left out).
    None when a column has another type (nested types: measure a sample instead).

    >>> arrow_row_bytes(T.StructType([T.StructField("k", T.LongType()), T.StructField("s", T.StringType())]))
    '8 + (coalesce(octet_length(`s`), 0) + 4)'
    """
    terms = []
    for f in schema.fields:
        name = sql_identifier(f.name)
        if isinstance(f.dataType, (T.StringType, T.BinaryType)):
            terms.append(f"(coalesce(octet_length({name}), 0) + 4)")
            continue
        width = next((w for cls, w in _ARROW_WIDTHS if isinstance(f.dataType, cls)), None)
        if width is None:
            return None
        terms.append(str(width))
    return " + ".join(terms) if terms else None


def physical_plan(df: DataFrame) -> str:
    """Spark's physical plan of ``df`` as ``df.explain()`` prints it, without its header line."""
    text = explain_text(df, "simple").strip()
    return text.removeprefix("== Physical Plan ==").strip()
