"""Rows typed as the table stores them: Spark's ANSI store assignment, NOT NULL checks, field ids.

Every writer stores a column the same way: cast to its Spark type (a value that does not fit raises,
whatever ``spark.sql.ansi.enabled``), a NULL in a required column (or a required field inside it)
raises with the row's key, and the column carries its Iceberg field id (Parquet field ids).

Tables of primitive columns are typed by SQL text, handed to the JVM in one piece
(``compat.select_exprs``): built from ``Column`` calls, typing cost about 15 Py4J round trips per
column (``Column.cast`` looks the session up, and so does every ``F`` function), some 700 of the
~1,900 of an equality-delete MERGE of a 23-column table. The field ids are set by
``compat.with_metadata`` (four round trips per column instead of twelve). Nested columns are typed by
``Column`` expressions (``exec/checks/nested.py``).
"""

from __future__ import annotations

from pyiceberg.schema import Schema
from pyiceberg.types import NestedField
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from rowops.exec.checks.nested import NESTED, conform, null_violations
from rowops.exec.checks.validation import widens
from rowops.exec.spark.compat import select_exprs, with_metadata
from rowops.exec.spark.literal_frames import sql_identifier, sql_string
from rowops.exec.spark.types import FIELD_ID_KEY, to_spark_type, writable

NULL_MARKER = "ROWOPS_NULL_IN_REQUIRED_COLUMN"
OUT_OF_RANGE_MARKER = "ROWOPS_VALUE_OUT_OF_RANGE"


def typed_rows(df: DataFrame, schema: Schema) -> DataFrame:
    """``df``'s columns of ``schema``, in its order, as every writer stores them (see the module)."""
    stored = stored_sql(df, schema)
    if stored is None:
        return df.select(*stored_columns(df, schema))
    typed = select_exprs(
        df, [f"{e} AS {sql_identifier(f.name)}" for e, f in zip(stored, schema.fields, strict=True)]
    )
    return with_metadata(typed, [(f.name, {FIELD_ID_KEY: f.field_id}) for f in schema.fields])


def stored_sql(df: DataFrame, schema: Schema) -> list[str] | None:
    """SQL text of ``df``'s columns of ``schema`` as every writer stores them, field ids aside (those
    are column metadata, :func:`typed_rows`); None when a column is nested (``Column`` expressions
    type those, :func:`stored_columns`)."""
    targets = [to_spark_type(f.field_type) for f in schema.fields]
    if any(isinstance(t, NESTED) for t in targets):
        return None
    types = _types_by_name(df.schema)
    identifier, hint = set(schema.identifier_field_ids), _row_hint(schema)
    return [
        _typed_sql(f, types.get(f.name, types.get(f.name.lower())), t, f.field_id in identifier, hint)
        for f, t in zip(schema.fields, targets, strict=True)
    ]


def stored_columns(df: DataFrame, schema: Schema) -> list[Column]:
    """``df``'s columns of ``schema`` as every writer stores them: cast by store assignment, NOT NULL
    and range checked, with field ids (for rows written by other means than ``write.write_rows``)."""
    types = _types_by_name(df.schema)
    identifier = set(schema.identifier_field_ids)
    columns = []
    for f in schema.fields:
        col = _stored(f.name, types.get(f.name, types.get(f.name.lower())), to_spark_type(f.field_type))
        checks = [(f.name, col.isNull())] if f.required else []
        checks += null_violations(col, f.field_type, f.name)  # required fields inside it: s.c1, a.element
        for path, violated in reversed(checks):
            kind = " (an identifier field)" if f.field_id in identifier else ""
            prefix = F.lit(f"{NULL_MARKER}: column {path} is declared NOT NULL{kind}; offending row: ")
            col = F.when(violated, F.raise_error(F.concat(prefix, F.expr(_row_hint(schema))))).otherwise(col)
        columns.append(col.alias(f.name, metadata={FIELD_ID_KEY: f.field_id}))
    return columns


def _stored(name: str, source: T.DataType | None, target: T.DataType) -> Column:
    """Column ``name`` cast to ``target`` by Spark's ANSI store assignment: a value that does not fit
    (numeric overflow, NaN into a decimal) raises instead of becoming NULL, whatever the session's
    ``spark.sql.ansi.enabled`` (``try_cast`` gives NULL for exactly those values)."""
    if isinstance(target, NESTED):  # struct fields matched by name; nested NULLs checked by the caller
        return conform(F.col(sql_identifier(name)), source, target).cast(writable(target))
    return F.expr(_stored_sql(name, source, target))


def _stored_sql(name: str, source: T.DataType | None, target: T.DataType) -> str:
    """:func:`_stored` of a primitive column as SQL text.

    >>> print(_stored_sql("a`b", T.IntegerType(), T.LongType()))
    CAST(`a``b` AS bigint)
    """
    col, to = sql_identifier(name), target.simpleString()
    if source is None or widens(source, target):
        return f"CAST({col} AS {to})"
    stored = f"try_cast({col} AS {to})"
    prefix = sql_string(f"{OUT_OF_RANGE_MARKER}: column {name} ({source.simpleString()} -> {to}): ")
    fail = f"raise_error(concat({prefix}, CAST({col} AS string)))"
    return f"CASE WHEN {col} IS NOT NULL AND {stored} IS NULL THEN {fail} ELSE {stored} END"


def _typed_sql(
    field: NestedField, source: T.DataType | None, target: T.DataType, is_identifier: bool, hint: str
) -> str:
    """A primitive column as stored, as SQL text: cast, and NULL-checked when the field is required
    (the error names the row by ``hint``, :func:`_row_hint`)."""
    stored = _stored_sql(field.name, source, target)
    if not field.required:
        return stored
    kind = " (an identifier field)" if is_identifier else ""
    prefix = sql_string(f"{NULL_MARKER}: column {field.name} is declared NOT NULL{kind}; offending row: ")
    fail = f"raise_error(concat({prefix}, {hint}))"
    return f"CASE WHEN ({stored}) IS NULL THEN {fail} ELSE ({stored}) END"


def _types_by_name(source: T.StructType | None) -> dict[str, T.DataType]:
    """Source column types by name, also under the lower-cased name when that is unambiguous: Spark
    resolves ``col("ID")`` to a column ``id`` unless ``spark.sql.caseSensitive`` is on (and then the
    select fails before any type matters)."""
    if source is None:
        return {}
    exact = {f.name: f.dataType for f in source.fields}
    lowered: dict[str, list[T.DataType]] = {}
    for f in source.fields:
        lowered.setdefault(f.name.lower(), []).append(f.dataType)
    return {**{k: v[0] for k, v in lowered.items() if len(v) == 1}, **exact}


def _row_hint(schema: Schema) -> str:
    """``k=5, g=2``: the row's key (identifier columns; without a key, its first three columns), for
    the error that names a NULL written to a required column; SQL text.

    >>> from pyiceberg.types import NestedField, LongType
    >>> print(_row_hint(Schema(NestedField(1, "k", LongType(), required=True), identifier_field_ids=[1])))
    concat_ws(', ', concat('k=', coalesce(CAST(`k` AS string), 'NULL')))
    """
    names = [schema.find_column_name(i) or "" for i in schema.identifier_field_ids] or [
        f.name for f in schema.fields[:3]
    ]
    parts = [
        f"concat({sql_string(n + '=')}, coalesce(CAST({sql_identifier(n)} AS string), 'NULL'))" for n in names
    ]
    return f"concat_ws(', ', {', '.join(parts)})"
