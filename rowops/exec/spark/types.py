"""Iceberg schema <-> Spark schema, with Iceberg field ids carried as Parquet field ids.

Nested types map one to one: Iceberg ``struct`` / ``list`` / ``map`` are Spark ``StructType`` /
``ArrayType`` / ``MapType``, required fields (and list elements, map values) are Spark's non-nullable
ones. Every ``StructField`` of the Spark schema, top-level or nested, carries its Iceberg field id as
``parquet.field.id`` metadata, which Spark's Parquet writer writes and its reader matches by. List
elements and map keys and values are not ``StructField``s: Spark writes no id for them, and readers
resolve them with the table's name mapping (``meta/tables.py``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)
from pyspark.sql import types as T

from rowops.errors import SchemaMismatchError

FIELD_ID_KEY = "parquet.field.id"
SUPPORTED = (
    "boolean, int, long, float, double, decimal, string, binary, date, timestamp, "
    "and struct, array and map of those"
)

_TO_SPARK: list[tuple[type[IcebergType], T.DataType]] = [
    (BooleanType, T.BooleanType()),
    (IntegerType, T.IntegerType()),
    (LongType, T.LongType()),
    (FloatType, T.FloatType()),
    (DoubleType, T.DoubleType()),
    (StringType, T.StringType()),
    (BinaryType, T.BinaryType()),
    (DateType, T.DateType()),
    (TimestamptzType, T.TimestampType()),
    (TimestampType, T.TimestampNTZType()),
]


def _spark_field(f: NestedField) -> T.StructField:
    return T.StructField(f.name, to_spark_type(f.field_type), not f.required, {FIELD_ID_KEY: f.field_id})


def to_spark_type(t: IcebergType) -> T.DataType:
    """The Spark type of an Iceberg type; nested struct fields carry their field ids."""
    if isinstance(t, DecimalType):
        return T.DecimalType(t.precision, t.scale)
    if isinstance(t, StructType):
        return T.StructType([_spark_field(f) for f in t.fields])
    if isinstance(t, ListType):
        return T.ArrayType(to_spark_type(t.element_type), not t.element_required)
    if isinstance(t, MapType):
        return T.MapType(to_spark_type(t.key_type), to_spark_type(t.value_type), not t.value_required)
    for iceberg_cls, spark_type in _TO_SPARK:
        if isinstance(t, iceberg_cls):
            return spark_type
    raise SchemaMismatchError(f"Iceberg type {t} is not supported by rowops yet")


def writable(t: T.DataType) -> T.DataType:
    """``t`` with every nested field, element and map value nullable (field ids kept).

    Spark's ``cast`` refuses a nullable nested field into a non-nullable one, so nested values are
    cast to this type; required nested fields stay required in the table schema.
    """
    if isinstance(t, T.StructType):
        return T.StructType([T.StructField(f.name, writable(f.dataType), True, f.metadata) for f in t.fields])
    if isinstance(t, T.ArrayType):
        return T.ArrayType(writable(t.elementType), True)
    if isinstance(t, T.MapType):
        return T.MapType(writable(t.keyType), writable(t.valueType), True)
    return t


def to_iceberg_type(t: T.DataType, column: str, ids: Iterator[int] | None = None) -> IcebergType:
    """The Iceberg type of a Spark type; nested fields get ids from ``ids`` (fresh ids are assigned
    again, as Iceberg does, when the table metadata is created)."""
    ids = ids if ids is not None else itertools.count(1_000_000)
    if isinstance(t, T.DecimalType):
        return DecimalType(t.precision, t.scale)
    if isinstance(t, T.ByteType | T.ShortType):
        return IntegerType()
    if isinstance(t, T.StructType):
        return StructType(
            *[
                NestedField(
                    next(ids),
                    f.name,
                    to_iceberg_type(f.dataType, f"{column}.{f.name}", ids),
                    required=not f.nullable,
                )
                for f in t.fields
            ]
        )
    if isinstance(t, T.ArrayType):
        element_id = next(ids)
        element = to_iceberg_type(t.elementType, f"{column}.element", ids)
        return ListType(element_id, element, element_required=not t.containsNull)
    if isinstance(t, T.MapType):
        key_id, value_id = next(ids), next(ids)
        key = to_iceberg_type(t.keyType, f"{column}.key", ids)
        value = to_iceberg_type(t.valueType, f"{column}.value", ids)
        return MapType(key_id, key, value_id, value, value_required=not t.valueContainsNull)
    for iceberg_cls, spark_type in _TO_SPARK:
        if type(t) is type(spark_type):
            return iceberg_cls()
    raise SchemaMismatchError(
        f"Column {column!r} has Spark type {t.simpleString()}, which rowops cannot store yet (supported: {SUPPORTED})",
        incompatible=[column],
    )


def to_iceberg_schema(struct: T.StructType) -> Schema:
    """An Iceberg schema for a Spark schema: top-level ids 1..n, nested ids after them; a NOT NULL
    field (``nullable=False``) becomes a required Iceberg field, as in Spark's ``CREATE TABLE (c INT
    NOT NULL)``, at every nesting level. ``new_table_metadata`` re-assigns ids the way Iceberg does."""
    ids = itertools.count(len(struct.fields) + 1)
    fields = [
        NestedField(i + 1, f.name, to_iceberg_type(f.dataType, f.name, ids), required=not f.nullable)
        for i, f in enumerate(struct.fields)
    ]
    return Schema(*fields)


def to_spark_schema(schema: Schema) -> T.StructType:
    """The Spark schema of an Iceberg schema, field ids attached for Parquet reads and writes."""
    return T.StructType([_spark_field(f) for f in schema.fields])


def has_nested(schema: Schema) -> bool:
    """Whether any column of ``schema`` is a struct, list or map."""
    return any(not f.field_type.is_primitive for f in schema.fields)
