"""Checks of a source DataFrame's schema against the target table (before any job runs)."""

from __future__ import annotations

from pyiceberg.schema import Schema
from pyspark.sql import types as T

from rowops.errors import SchemaMismatchError
from rowops.exec.types import to_spark_type

_WIDENING: dict[type[T.DataType], tuple[type[T.DataType], ...]] = {
    T.ByteType: (T.ShortType, T.IntegerType, T.LongType),
    T.ShortType: (T.IntegerType, T.LongType),
    T.IntegerType: (T.LongType,),
    T.FloatType: (T.DoubleType,),
}


def can_write(source: T.DataType, target: T.DataType) -> bool:
    """Whether values of ``source`` type fit ``target`` without loss (safe widening only)."""
    if isinstance(source, T.NullType) or source == target:
        return True
    if isinstance(source, T.DecimalType) and isinstance(target, T.DecimalType):
        return source.scale == target.scale and source.precision <= target.precision
    return any(isinstance(target, cls) for cls in _WIDENING.get(type(source), ()))


def check_source(source: T.StructType, schema: Schema, *, allow_extra: bool, what: str = "source") -> None:
    """Raise :class:`SchemaMismatchError` naming missing, extra and incompatible columns.

    Args:
        source: schema of the incoming DataFrame.
        schema: the table schema.
        allow_extra: accept columns the table does not have (they are ignored).
        what: how to call the incoming data in messages.
    """
    fields = {f.name: f.dataType for f in source.fields}
    missing = [n for n in schema.column_names if n not in fields]
    extra = [] if allow_extra else [n for n in fields if n not in schema.column_names]
    incompatible = []
    for column in schema.fields:
        if column.name in fields:
            target_type = to_spark_type(column.field_type)
            if not can_write(fields[column.name], target_type):
                incompatible.append(
                    f"{column.name} ({fields[column.name].simpleString()} -> {target_type.simpleString()})"
                )
    if missing or extra or incompatible:
        parts = []
        if missing:
            parts.append(f"missing columns {missing}")
        if extra:
            parts.append(f"extra columns {extra}")
        if incompatible:
            parts.append(f"incompatible types {incompatible}")
        raise SchemaMismatchError(
            f"The {what} does not match the table schema: {'; '.join(parts)}",
            missing=missing,
            extra=extra,
            incompatible=incompatible,
        )
