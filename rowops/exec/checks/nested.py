"""Values of struct, array and map columns: conformed by field name, nested fields assigned.

Spark casts structs by position, so a source whose struct fields come in another order (or a value
built by ``withField``) is first rebuilt field by field by name; :func:`conform` then leaves a plain
cast to the table's type (``exec/writing/write.py``). ``SET s.c1 = ...`` replaces one field of a struct with
``Column.withField`` (a NULL struct stays NULL, as in Spark SQL). :func:`null_violations` finds NULLs
in required nested fields, list elements and map values (Spark's cast into the table's type makes every
nested field nullable, so the writer checks them itself).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyiceberg.types import IcebergType, ListType, MapType, StructType
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


def null_violations(value: Column, t: IcebergType, path: str) -> list[tuple[str, Column]]:
    """Per required field, list element or map value inside ``value`` (of Iceberg type ``t``): its
    path (``s.c1``, ``a.element``, ``m.value.v``) and a condition true when a row holds a NULL there
    under a non-NULL parent (a NULL struct, list or map holds no required value)."""
    out: list[tuple[str, Column]] = []
    if isinstance(t, StructType):
        for f in t.fields:
            child, where = value.getField(f.name), f"{path}.{f.name}"
            if f.required:
                out.append((where, value.isNotNull() & child.isNull()))
            out += [(p, value.isNotNull() & c) for p, c in null_violations(child, f.field_type, where)]
    elif isinstance(t, ListType):
        out += _in_elements(value, t.element_type, t.element_required, f"{path}.element")
    elif isinstance(t, MapType):
        out += _in_elements(F.map_values(value), t.value_type, t.value_required, f"{path}.value")
    return out


def _in_elements(array: Column, t: IcebergType, required: bool, path: str) -> list[tuple[str, Column]]:
    """:func:`null_violations` of the elements of ``array``: some element violates."""
    out = [(path, F.exists(array, lambda e: e.isNull()))] if required else []
    paths = [p for p, _ in null_violations(F.lit(None), t, path)]
    return out + [(p, F.exists(array, _violation_of(t, path, i))) for i, p in enumerate(paths)]


def _violation_of(t: IcebergType, path: str, index: int) -> Callable[[Column], Column]:
    """The ``index``-th violation condition of an element of type ``t`` (a lambda for ``F.exists``)."""
    return lambda e: null_violations(e, t, path)[index][1]
