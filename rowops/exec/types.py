"""Iceberg schema <-> Spark schema, with Iceberg field ids carried as Parquet field ids."""

from __future__ import annotations

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
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
)
from pyspark.sql import types as T

from rowops.errors import SchemaMismatchError

FIELD_ID_KEY = "parquet.field.id"

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


def to_spark_type(t: IcebergType) -> T.DataType:
    if isinstance(t, DecimalType):
        return T.DecimalType(t.precision, t.scale)
    for iceberg_cls, spark_type in _TO_SPARK:
        if isinstance(t, iceberg_cls):
            return spark_type
    raise SchemaMismatchError(f"Iceberg type {t} is not supported by rowops yet")


def to_iceberg_type(t: T.DataType, column: str) -> IcebergType:
    if isinstance(t, T.DecimalType):
        return DecimalType(t.precision, t.scale)
    if isinstance(t, T.ByteType | T.ShortType):
        return IntegerType()
    for iceberg_cls, spark_type in _TO_SPARK:
        if type(t) is type(spark_type):
            return iceberg_cls()
    raise SchemaMismatchError(
        f"Column {column!r} has Spark type {t.simpleString()}, which rowops cannot store yet "
        "(supported: boolean, int, long, float, double, decimal, string, binary, date, timestamp)",
        incompatible=[column],
    )


def to_iceberg_schema(struct: T.StructType) -> Schema:
    """A fresh Iceberg schema (ids 1..n) for a Spark schema; a NOT NULL field (``nullable=False``)
    becomes a required Iceberg field, as in Spark's ``CREATE TABLE (c INT NOT NULL)``."""
    fields = [
        NestedField(i + 1, f.name, to_iceberg_type(f.dataType, f.name), required=not f.nullable)
        for i, f in enumerate(struct.fields)
    ]
    return Schema(*fields)


def to_spark_schema(schema: Schema) -> T.StructType:
    """The Spark schema of an Iceberg schema, field ids attached for Parquet reads and writes."""
    return T.StructType(
        [
            T.StructField(f.name, to_spark_type(f.field_type), not f.required, {FIELD_ID_KEY: f.field_id})
            for f in schema.fields
        ]
    )
