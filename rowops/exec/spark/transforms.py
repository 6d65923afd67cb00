"""Iceberg partition transforms as Spark columns, and parsing of the partition directories Spark writes.

Each partition field becomes a hidden string column holding the partition value in Iceberg's internal
representation (ints for bucket/year/month/day/hour, days for dates, micros for timestamps), prefixed
with ``v`` so that empty strings and NULLs stay distinct in directory names. Spark's writer
``partitionBy`` puts each file under ``<hidden>=<value>`` directories; :func:`parse_partition_dirs`
reads the values back. Bucket and decimal truncate use pyiceberg-core (Iceberg's reference
implementation in Rust) inside a vectorized pandas UDF; all other transforms are plain Spark SQL.
"""

from __future__ import annotations

import re
from decimal import Decimal
from urllib.parse import unquote

import pandas as pd
import pyarrow as pa
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    IcebergType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
)
from pyiceberg_core import transform as iceberg_transforms
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from rowops.errors import CorruptLakeError
from rowops.exec.spark.literal_frames import sql_identifier
from rowops.meta.tables import struct_path

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
# Spark's hash(a, b) is murmur3_32 of b seeded with murmur3_32(a, seed=42). This int hashes to 0, so
# hash(ZERO_SEED_INT, v) is murmur3_32(v, seed=0) on the JVM, exactly Iceberg's bucket hash for a long.
ZERO_SEED_INT = -1693959553
_INT_MAX = 0x7FFFFFFF
_LONG_HASHED = (IntegerType, LongType, DateType, TimestampType, TimestamptzType)
_MICROS_PER_HOUR = 3_600_000_000
_MICROS_PER_DAY = 86_400_000_000


def epoch_value(col: Column, source: IcebergType) -> Column:
    """Dates as days and timestamps as micros since the epoch (Iceberg's internal form).

    Independent of the session time zone: a ``timestamptz`` (Spark ``timestamp``) is an instant; a
    ``timestamp`` (Spark ``timestamp_ntz``) is a wall clock, whose micros count as if it were UTC. (A
    cast to Spark's ``timestamp`` would read it in the session time zone, and Spark's
    ``timestampdiff`` of wall clocks shifts those in a daylight-saving gap.)
    """
    if isinstance(source, DateType):
        return F.unix_date(col)
    if isinstance(source, TimestamptzType):
        return F.unix_micros(col)
    if isinstance(source, TimestampType):  # whole days, plus the time of day as an exact interval
        date = col.cast("date")
        time_of_day = col - date.cast("timestamp_ntz")  # wall-clock arithmetic, zone-free
        # scaled by 10^6, the interval's whole seconds are its micros (< 10^17: no overflow)
        return F.unix_date(date) * F.lit(_MICROS_PER_DAY) + (time_of_day * F.lit(1_000_000)).cast("long")
    return col


def floor_div(value: Column, divisor: int) -> Column:
    """``Math.floorDiv(value, divisor)`` of a long column for ``divisor > 0``, in integer arithmetic.

    Spark's ``div`` truncates toward zero; one less when a negative value leaves a remainder. (A
    double division loses the low digits of micros far from the epoch.)
    """
    quotient = F.call_function("div", value, F.lit(divisor))
    return quotient - F.when(value % F.lit(divisor) < 0, F.lit(1)).otherwise(F.lit(0))


def wrapping_truncate(value: Column, width: int, bits: int) -> Column:
    """Iceberg's ``v - (((v % W) + W) % W)`` of an int (``bits=32``) or long (64) column, wrapping around
    at the type's minimum as Iceberg Java does, whatever ``spark.sql.ansi.enabled`` says (Spark 4 turns
    ANSI on, which raises on overflow): computed exactly as ``decimal(38,0)``, wrapped, cast back."""
    exact = value.cast("decimal(38,0)") - F.pmod(value, F.lit(width)).cast("decimal(38,0)")
    span = F.lit(str(1 << bits)).cast("decimal(38,0)")
    wrapped = F.when(exact < F.lit(-(1 << (bits - 1))), exact + span).otherwise(exact)
    return wrapped.cast("long" if bits == 64 else "int")


def _arrow_input(values: pd.Series, source: IcebergType) -> pa.Array:
    """A batch of the UDF's input as Arrow (only strings, binary and decimals reach the UDF)."""
    if isinstance(source, DecimalType):
        return pa.array(values, pa.decimal128(source.precision, source.scale))
    if isinstance(source, StringType | BinaryType):
        return pa.Array.from_pandas(values)
    raise ValueError(f"pyiceberg-core transforms run on the JVM for {source}")


def apply_rust_transform(name: str, param: int, source: IcebergType, values: pd.Series) -> pd.Series:
    """Run pyiceberg-core's transform ``name`` on a batch; string results (runs in Python workers)."""
    result = getattr(iceberg_transforms, name)(_arrow_input(values, source), param)
    return result.cast(pa.string()).to_pandas()


def _rust_transform(name: str, param: int, source: IcebergType) -> Column:
    """A vectorized pandas UDF around :func:`apply_rust_transform`."""

    @F.pandas_udf(T.StringType())  # type: ignore[call-overload]
    def apply(values: pd.Series) -> pd.Series:
        return apply_rust_transform(name, param, source, values)

    return apply


def murmur3_bucket(value: Column, num_buckets: int) -> Column:
    """Iceberg's ``bucket(N)`` of a long-valued column, computed by the JVM (no Python worker).

    Iceberg hashes int, long, date (days) and timestamp (micros) values as 8-byte longs with
    murmur3_32 (seed 0) and takes ``(hash & Integer.MAX_VALUE) % N``; NULL stays NULL.
    """
    hashed = F.hash(F.lit(ZERO_SEED_INT).cast("int"), value.cast("long"))
    return F.when(value.isNotNull(), hashed.bitwiseAND(F.lit(_INT_MAX)) % F.lit(num_buckets))


def _time_value(name: str, col: Column, source: IcebergType) -> Column:
    epoch = epoch_value(col, source)
    if name == "hour":
        return floor_div(epoch, _MICROS_PER_HOUR)
    days = epoch if isinstance(source, DateType) else floor_div(epoch, _MICROS_PER_DAY)
    if name == "day":
        return days
    date = F.date_from_unix_date(days.cast("int"))
    years = F.year(date) - F.lit(1970)
    return years if name == "year" else years * F.lit(12) + F.month(date) - F.lit(1)


def _identity_value(col: Column, source: IcebergType) -> Column:
    if isinstance(source, BinaryType):
        return F.hex(col)
    return epoch_value(col, source)


def source_column(schema: Schema, source_id: int) -> Column:
    """The Spark column of a partition or sort source: a column, or a field of a struct (``s``.``c1``,
    NULL when the struct is NULL)."""
    path = struct_path(schema, source_id)
    if path is None:
        raise ValueError(f"field {source_id} is not a column or a field of a struct")
    return F.col(".".join(sql_identifier(part) for part in path))


def partition_value(field: PartitionField, schema: Schema) -> Column:
    """Spark column with the ``v``-prefixed internal partition value of ``field`` (NULL stays NULL)."""
    source = schema.find_field(field.source_id)
    col = source_column(schema, field.source_id)
    name = str(field.transform).split("[")[0]
    param = getattr(field.transform, "num_buckets", None) or getattr(field.transform, "width", None)
    if name == "void":  # always NULL (a field dropped from a v1 spec, or added as void)
        return F.lit(None).cast("string")
    if name == "identity":
        value = _identity_value(col, source.field_type)
    elif name == "bucket" and isinstance(source.field_type, _LONG_HASHED):
        value = murmur3_bucket(epoch_value(col, source.field_type), int(param or 0))
    elif name == "bucket" or (name == "truncate" and isinstance(source.field_type, DecimalType | BinaryType)):
        udf = _rust_transform(name, int(param or 0), source.field_type)
        value = udf(col)  # type: ignore[operator]
    elif name == "truncate" and isinstance(source.field_type, StringType):
        value = F.substring(col, 1, int(param or 0))
    elif name == "truncate":
        value = wrapping_truncate(col, int(param or 0), 64 if isinstance(source.field_type, LongType) else 32)
    else:
        value = _time_value(name, col, source.field_type)
    return F.concat(F.lit("v"), value.cast("string"))


def hidden_names(spec: PartitionSpec, schema: Schema) -> list[str]:
    """Names of the hidden partition columns (unique, never equal to a table column)."""
    taken = {name.lower() for name in schema.column_names}
    names = []
    for field in spec.fields:
        name = re.sub(r"[^A-Za-z0-9_]", "_", field.name) + "_part"  # a name Spark never reads as a path
        while name.lower() in taken:
            name += "_"
        taken.add(name.lower())
        names.append(name)
    return names


def parse_value(value: str, result_type: IcebergType) -> object:
    """The internal partition value of a ``v``-prefixed string from :func:`partition_value`.

    >>> from pyiceberg.types import IntegerType
    >>> parse_value("v%41", StringType()), parse_value("v7", IntegerType())
    ('%41', 7)
    """
    raw = value[1:]  # drop the 'v' prefix
    if isinstance(result_type, StringType):
        return raw
    if isinstance(result_type, BooleanType):
        return raw == "true"
    if isinstance(result_type, DecimalType):
        return Decimal(raw)
    if isinstance(result_type, BinaryType):
        return bytes.fromhex(raw)
    return int(raw)


def parse_partition_dirs(relative_dir: str, spec: PartitionSpec, schema: Schema) -> tuple[object, ...]:
    """Partition tuple from a relative directory such as ``k_bucket_part=v3/g_part=vx``."""
    values = [part.split("=", 1)[1] for part in relative_dir.split("/") if "=" in part]
    types = [f.transform.result_type(schema.find_field(f.source_id).field_type) for f in spec.fields]
    try:
        if len(values) != len(spec.fields):
            raise ValueError("wrong number of partition directories")
        return tuple(parse_dir_value(v, t) for v, t in zip(values, types, strict=True))
    except ValueError as exc:
        raise CorruptLakeError(
            f"Unexpected partition directory {relative_dir!r} for spec {spec} in a staging directory: {exc}",
            help="Nothing was committed; another process may have written into the table's data/ folder. Retry.",
        ) from exc


def parse_dir_value(text: str, result_type: IcebergType) -> object:
    """A partition value from a directory name Spark wrote (escaped with %XX; NULL is a marker).

    >>> parse_dir_value("v%2541", StringType()), parse_dir_value(NULL_PARTITION, StringType())
    ('%41', None)
    """
    return None if text == NULL_PARTITION else parse_value(unquote(text), result_type)
