"""Iceberg v3 column defaults: ``initial-default`` (what rows of files written before a column
existed read) and ``write-default`` (what a writer stores when it is given no value).

Values are kept as pyiceberg reads them from ``metadata.json`` (``from_json``: ``date``,
``datetime``, ``Decimal``, ``bytes``, ``int``, ``float``, ``str``, ``bool``), so a default set by
rowops and one read back compare equal. The spec allows defaults on format v3 tables only.
:func:`sql_literal` spells a default as a Spark SQL expression of the column's type that does not
depend on the session (time zone, ANSI mode): writers use it for missing source columns,
``SET c = DEFAULT`` and omitted ``INSERT`` columns; readers for the initial default.

>>> from pyiceberg.types import DecimalType, LongType, StringType
>>> normalize("n", LongType(), 7), normalize("d", DecimalType(5, 2), "1.5")
(7, Decimal('1.50'))
>>> sql_literal(StringType(), "it's"), sql_literal(DecimalType(5, 2), normalize("d", DecimalType(5, 2), 3))
("CAST(X'69742773' AS STRING)", "CAST('3.00' AS DECIMAL(5,2))")
"""

from __future__ import annotations

import datetime
import decimal
import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
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

from rowops.errors import InvalidInputError, InvalidSchemaChangeError, NoDefaultError
from rowops.request.operations import MergeSpec, OperationSpec, UpdateSpec, is_default

DEFAULTS_VERSION = 3
_EPOCH = datetime.datetime(1970, 1, 1)
_EPOCH_TZ = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_INT_RANGE = {IntegerType: 31, LongType: 63}
_FLOAT_SQL = {FloatType: "FLOAT", DoubleType: "DOUBLE"}


def check_version(format_version: int, what: str) -> None:
    """Defaults exist in format v3 only: a clear error (nothing changed) on v1/v2 tables."""
    if format_version < DEFAULTS_VERSION:
        raise InvalidSchemaChangeError(
            f"Cannot {what}: column defaults (initial-default / write-default) need an Iceberg format v3 "
            f"table, this one is format v{format_version}",
            help="Create the table with format_version=3 to use column defaults; on this table add the "
            "column without a default and fill it with an UPDATE. Nothing was changed.",
        )


def _bad(name: str, t: IcebergType, value: object, why: str = "") -> InvalidInputError:
    return InvalidInputError(
        f"Invalid default {value!r} for column {name!r} of type {t}{': ' + why if why else ''}",
        help="Give a Python value of the column's type: int, float, Decimal (or its string), str, bytes, "
        "bool, datetime.date, datetime.datetime (naive for timestamp_ntz, aware for timestamp). "
        "Nothing was changed.",
    )


def normalize(name: str, t: IcebergType, value: object) -> Any:
    """``value`` as the default of a column of type ``t`` (the form pyiceberg reads back), or
    :class:`InvalidInputError`. Defaults of struct, list and map columns are not supported."""
    if value is None:
        raise _bad(name, t, value, "a default cannot be NULL (leave the column without one)")
    if isinstance(t, BooleanType) and isinstance(value, bool):
        return value
    if isinstance(t, IntegerType | LongType) and isinstance(value, int) and not isinstance(value, bool):
        bits = _INT_RANGE[type(t)]
        if not -(2**bits) <= value < 2**bits:
            raise _bad(name, t, value, "out of range")
        return value
    if (
        isinstance(t, FloatType | DoubleType)
        and isinstance(value, int | float)
        and not isinstance(value, bool)
    ):
        return float(value)
    if (
        isinstance(t, DecimalType)
        and isinstance(value, int | str | decimal.Decimal)
        and not isinstance(value, bool)
    ):
        return _decimal(name, t, value)
    if isinstance(t, StringType) and isinstance(value, str):
        return value
    if isinstance(t, BinaryType) and isinstance(value, bytes):
        return value
    if (
        isinstance(t, DateType)
        and isinstance(value, datetime.date)
        and not isinstance(value, datetime.datetime)
    ):
        return value
    if isinstance(t, TimestampType) and isinstance(value, datetime.datetime) and value.tzinfo is None:
        return value
    if isinstance(t, TimestamptzType) and isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.astimezone(datetime.UTC)
    raise _bad(name, t, value)


def _decimal(name: str, t: DecimalType, value: int | str | decimal.Decimal) -> decimal.Decimal:
    try:
        exact = decimal.Decimal(value)
        scaled = exact.quantize(decimal.Decimal(1).scaleb(-t.scale))
    except (decimal.InvalidOperation, ValueError):
        raise _bad(name, t, value) from None
    if scaled != exact or len(scaled.as_tuple().digits) > t.precision:
        raise _bad(name, t, value, f"it does not fit decimal({t.precision},{t.scale}) exactly")
    return scaled


def with_defaults(field: NestedField, value: object, initial: bool = True, write: bool = True) -> NestedField:
    """``field`` with ``value`` (normalized) as its initial and/or write default."""
    normalized = normalize(field.name, field.field_type, value)
    return NestedField(
        field.field_id,
        field.name,
        field.field_type,
        required=field.required,
        doc=field.doc,
        initial_default=normalized if initial else field.initial_default,
        write_default=normalized if write else field.write_default,
    )


def check_columns(schema: Schema, defaults: Mapping[str, object], what: str) -> None:
    """Every key of ``defaults`` a primitive top-level column of ``schema``."""
    names = [f.name for f in schema.fields]
    for name in defaults:
        if name not in names:
            raise InvalidInputError(
                f"Cannot {what}: a default for {name!r}, which is no top-level column ({', '.join(names)})",
                help="Name top-level columns exactly as the table spells them. Nothing was changed.",
            )
        if not schema.find_field(name).field_type.is_primitive:
            raise InvalidInputError(
                f"Cannot {what}: defaults of struct, list and map columns ({name!r}) are not supported",
                help="Give defaults to primitive columns only. Nothing was changed.",
            )


def with_write_defaults(metadata: TableMetadata, defaults: Mapping[str, object]) -> TableMetadata:
    """New table metadata (no snapshot yet) whose columns in ``defaults`` have that write-default
    (a new table has no older files, so no initial-default is needed)."""
    if not defaults:
        return metadata
    check_version(metadata.format_version, "create the table with column defaults")
    schema = metadata.schema()
    check_columns(schema, defaults, "create the table")
    fields = [
        with_defaults(f, defaults[f.name], initial=False) if f.name in defaults else f for f in schema.fields
    ]
    new = Schema(*fields, schema_id=schema.schema_id, identifier_field_ids=schema.identifier_field_ids)
    return metadata.model_copy(update={"schemas": [new]})


def initial_defaults(schema: Schema) -> dict[int, Any]:
    """``{field id: initial-default}`` of the top-level columns that have one."""
    return {f.field_id: f.initial_default for f in schema.fields if f.initial_default is not None}


def write_default_sql(schema: Schema, column: str) -> str | None:
    """The Spark SQL literal of ``column``'s write-default, None when it has none."""
    field = schema.find_field(column)
    return None if field.write_default is None else sql_literal(field.field_type, field.write_default)


def sql_literal(t: IcebergType, value: Any) -> str:
    """A Spark SQL expression of Spark type ``t`` for ``value`` (as :func:`normalize` or pyiceberg's
    ``from_json`` gives it; pyiceberg's own ``UpdateSchema`` keeps days and micros as ``int``)."""
    if isinstance(t, BooleanType):
        return "TRUE" if value else "FALSE"
    if isinstance(t, IntegerType):
        return f"CAST({int(value)} AS INT)"
    if isinstance(t, LongType):
        return f"CAST({int(value)} AS BIGINT)"
    if isinstance(t, FloatType | DoubleType):
        number = float(value)
        text = (
            repr(number)
            if math.isfinite(number)
            else {"inf": "Infinity", "-inf": "-Infinity"}.get(str(number), "NaN")
        )
        return f"CAST('{text}' AS {_FLOAT_SQL[type(t)]})"
    if isinstance(t, DecimalType):
        return f"CAST('{decimal.Decimal(value)}' AS DECIMAL({t.precision},{t.scale}))"
    if isinstance(t, StringType):
        return f"CAST(X'{str(value).encode().hex().upper()}' AS STRING)"
    if isinstance(t, BinaryType):
        return f"X'{bytes(value).hex().upper()}'"
    if isinstance(t, DateType):
        days = value if isinstance(value, int) else (value - _EPOCH.date()).days
        return f"DATE_ADD(DATE '1970-01-01', {days})"
    if isinstance(t, TimestamptzType):
        return f"TIMESTAMP_MICROS({_micros(value, _EPOCH_TZ)})"
    if isinstance(t, TimestampType):
        micros = _micros(value, _EPOCH)
        return f"TIMESTAMPADD(MICROSECOND, {micros}, TIMESTAMP_NTZ '1970-01-01 00:00:00')"
    raise InvalidInputError(f"Defaults of type {t} are not supported by rowops")


def _micros(value: Any, epoch: datetime.datetime) -> int:
    if isinstance(value, int):
        return value
    delta = value - epoch
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _assigned(
    schema: Schema, assignments: tuple[tuple[str, str], ...], what: str
) -> tuple[tuple[str, str], ...]:
    """``assignments`` with every ``DEFAULT`` replaced by its column's write-default literal."""
    out = []
    for column, expression in assignments:
        if is_default(expression):
            field = schema.find_field(column)  # a checked column, or a field of a struct column (s.c1)
            if field.write_default is None:
                raise NoDefaultError(
                    f"Cannot assign DEFAULT to {column} in {what}: the column has no write-default"
                )
            expression = sql_literal(field.field_type, field.write_default)
        out.append((column, expression))
    return tuple(out)


def _omitted(schema: Schema, assignments: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The write-defaults of the columns an explicit ``INSERT (...) VALUES (...)`` does not give."""
    given = {c for c, _ in assignments}
    return tuple(
        (f.name, sql_literal(f.field_type, f.write_default))
        for f in schema.fields
        if f.name not in given and f.write_default is not None
    )


def resolve_defaults(spec: OperationSpec, schema: Schema) -> OperationSpec:
    """``spec`` (column names as the table spells them) with ``DEFAULT`` values replaced by the
    columns' write-defaults (:class:`NoDefaultError` for a column without one) and the write-defaults
    of columns an explicit ``INSERT`` omits added (NULL without one, as before).

    >>> from pyiceberg.types import LongType
    >>> from rowops.request.operations import MergeClause
    >>> schema = Schema(NestedField(1, "k", LongType()), NestedField(2, "n", LongType(), write_default=5))
    >>> resolve_defaults(UpdateSpec((("n", "DEFAULT"),)), schema).assignments
    (('n', 'CAST(5 AS BIGINT)'),)
    >>> [c.assignments for c in resolve_defaults(MergeSpec("t.k = s.k", (MergeClause("not_matched", "insert", None, (("k", "s.k"),)),)), schema).clauses]
    [(('k', 's.k'), ('n', 'CAST(5 AS BIGINT)'))]
    """
    if isinstance(spec, UpdateSpec):
        return replace(spec, assignments=_assigned(schema, spec.assignments, "UPDATE SET"))
    if not isinstance(spec, MergeSpec):
        return spec
    clauses = []
    for clause in spec.clauses:
        if clause.assignments is not None:
            values = _assigned(schema, clause.assignments, clause.describe())
            if clause.action == "insert":
                values += _omitted(schema, values)
            clause = replace(clause, assignments=values)
        clauses.append(clause)
    return replace(spec, clauses=tuple(clauses))
