"""Values of struct, array and map columns: conformed by field name, nested fields assigned.

Spark casts structs by position, so a source whose struct fields come in another order (or a value
built by ``withField``) is first rebuilt field by field by name; :func:`conform` then leaves a plain
cast to the table's type (``exec/write.py``). ``SET s.c1 = ...`` replaces one field of a struct with
``Column.withField`` (a NULL struct stays NULL, as in Spark SQL).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

NESTED = (T.StructType, T.ArrayType, T.MapType)


def _field(struct: T.StructType, name: str) -> T.StructField | None:
    exact = [f for f in struct.fields if f.name == name]
    if exact:
        return exact[0]
    lowered = [f for f in struct.fields if f.name.lower() == name.lower()]
    return lowered[0] if len(lowered) == 1 else None


def _same_shape(source: T.DataType, target: T.DataType) -> bool:
    """Whether a positional cast of ``source`` to ``target`` matches struct fields by name."""
    if isinstance(source, T.StructType) and isinstance(target, T.StructType):
        return [f.name for f in source.fields] == [f.name for f in target.fields] and all(
            _same_shape(s.dataType, t.dataType) for s, t in zip(source.fields, target.fields, strict=True)
        )
    if isinstance(source, T.ArrayType) and isinstance(target, T.ArrayType):
        return _same_shape(source.elementType, target.elementType)
    if isinstance(source, T.MapType) and isinstance(target, T.MapType):
        return _same_shape(source.keyType, target.keyType) and _same_shape(source.valueType, target.valueType)
    return True


def conform(col: Column, source: T.DataType | None, target: T.DataType) -> Column:
    """``col`` (of type ``source``) with its struct fields in ``target``'s order, matched by name at
    every level (a field the source lacks is NULL); ready for a cast to ``target``."""
    if source is None or _same_shape(source, target):
        return col
    if isinstance(source, T.StructType) and isinstance(target, T.StructType):
        parts = []
        for t in target.fields:
            s = _field(source, t.name)
            value = F.lit(None) if s is None else conform(col.getField(s.name), s.dataType, t.dataType)
            parts.append(value.alias(t.name))
        return F.when(col.isNull(), F.lit(None)).otherwise(F.struct(*parts))
    if isinstance(source, T.ArrayType) and isinstance(target, T.ArrayType):
        element, wanted = source.elementType, target.elementType
        return F.transform(col, lambda e: conform(e, element, wanted))
    if isinstance(source, T.MapType) and isinstance(target, T.MapType):
        stored, wanted = source.valueType, target.valueType
        return F.transform_values(col, lambda _, v: conform(v, stored, wanted))
    return col


def nested_assignments(column: str, assignments: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The ``(field path, expression)`` pairs of ``assignments`` that set a field inside ``column``
    (``s.c1`` → ``("c1", ...)``), in the given order.

    >>> nested_assignments("s", [("s.c1", "1"), ("k", "2"), ("s.t.x", "3")])
    [('c1', '1'), ('t.x', '3')]
    """
    prefix = column + "."
    return [(c[len(prefix) :], e) for c, e in assignments if c.startswith(prefix)]


def with_fields(base: Column, fields: Sequence[tuple[str, str]]) -> Column:
    """``base`` (a struct) with each ``(field path, Spark SQL expression)`` replaced (``withField``)."""
    for path, expression in fields:
        base = base.withField(path, F.expr(expression))
    return base
