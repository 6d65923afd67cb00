"""Checks of an operation against its table before anything runs: columns, types, expressions."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.types import StructType
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from rowops.errors import DuplicateKeyError, InvalidInputError, NoSuchColumnError, NullKeyError
from rowops.exec.checks.expressions import case_sensitive, check_expressions
from rowops.exec.checks.validation import check_assignments, check_source, table_frame
from rowops.exec.spark.job_errors import spark_errors
from rowops.meta.defaults import resolve_defaults, sql_literal
from rowops.meta.tables import check_key_type
from rowops.request.names import resolve, resolve_spec
from rowops.request.operations import MergeSpec, OperationSpec, UpdateSpec, describe

_ROWS, _NULL = "_rowops_rows", "_rowops_null_key"  # columns of the key check's aggregation


def checked_spec(
    spec: OperationSpec, source: DataFrame | None, metadata: TableMetadata, spark: SparkSession
) -> OperationSpec:
    """``spec`` with column names spelled as the table spells them, every expression checked."""
    schema = metadata.schema()
    spec = resolve_spec(spec, schema.column_names, case_sensitive(spark))  # nested names too (s.c1)
    _check_assigned_columns(spec, metadata)
    spec = resolve_defaults(spec, schema)  # SET c = DEFAULT, INSERT without c: write-defaults
    _validate(spec, source, metadata, spark)
    return check_expressions(spark, spec, schema, source.schema if source is not None else None)


def with_write_defaults(source: DataFrame, schema: Schema) -> DataFrame:
    """``source`` with a column for every table column it lacks that has a write-default (format
    v3), holding that default: what ``INSERT *`` / ``UPDATE SET *`` / appends store for it."""
    known = source.columns
    sensitive = case_sensitive(source.sparkSession)
    missing = [
        f
        for f in schema.fields
        if f.write_default is not None and resolve(f.name, known, sensitive) not in known
    ]
    if not missing:
        return source
    return source.withColumns({f.name: F.expr(sql_literal(f.field_type, f.write_default)) for f in missing})


def _check_assigned_columns(spec: OperationSpec, metadata: TableMetadata) -> None:
    """The assigned columns name the table's columns (before their ``DEFAULT`` values resolve)."""
    if isinstance(spec, UpdateSpec):
        _check_columns([c for c, _ in spec.assignments], metadata, "set=", fields="update")
    elif isinstance(spec, MergeSpec):
        for clause in spec.clauses:
            names = [c for c, _ in clause.assignments or ()]
            _check_columns(names, metadata, clause.describe(), fields=clause.action)


def _check_columns(names: list[str], metadata: TableMetadata, context: str, fields: str = "") -> None:
    """Every name a column of the table; with ``fields`` (``update`` or ``insert``) a name may also
    be the dotted path of a field of a struct column (``s.c1``), which only an update may set."""
    schema = metadata.schema()
    known = [f.name for f in schema.fields]
    unknown = []
    for name in names:
        if name in known:
            continue
        if fields and "." in name and name.split(".", 1)[0] in known:
            _check_field_path(schema, name, context, fields)
        else:
            unknown.append(name)
    if unknown:
        raise NoSuchColumnError(f"Unknown column(s) {unknown} in {context}; table columns are {known}")


def _check_field_path(schema: Schema, path: str, context: str, action: str) -> None:
    """``path`` names a field reached through struct columns and fields only."""
    head, *rest = path.split(".")
    if action != "update":
        raise InvalidInputError(
            f"Cannot assign the nested field {path} in {context}",
            help=f"Assign the whole column when inserting, e.g. {head} = named_struct(...).",
        )
    walked, field_type = head, schema.find_field(head).field_type
    for part in rest:
        if not isinstance(field_type, StructType):
            raise InvalidInputError(
                f"Cannot assign {path} in {context}: {walked} is a {field_type}, not a struct",
                help="Only fields of structs can be assigned; assign the whole list or map column instead.",
            )
        found = [f for f in field_type.fields if f.name == part]
        if not found:
            names = [f.name for f in field_type.fields]
            raise NoSuchColumnError(
                f"Unknown field {path!r} in {context}; the fields of {walked} are {names}"
            )
        walked, field_type = f"{walked}.{part}", found[0].field_type


def _check_keys(keys: list[str], metadata: TableMetadata) -> None:
    known = [f.name for f in metadata.schema().fields]
    for key in keys:
        if key not in known and "." in key and key.split(".", 1)[0] in known:
            raise InvalidInputError(
                f"Key column {key!r} of on= is a nested field; key columns must be top-level columns",
                help="Use top-level primitive columns as keys, or write the MERGE with "
                f'on="t.{key} = s.{key}" (a condition, no key columns).',
            )
    _check_columns(keys, metadata, "on=")
    for key in keys:
        check_key_type(key, metadata.schema().find_field(key).field_type)


def _validate(
    spec: OperationSpec, source: DataFrame | None, metadata: TableMetadata, spark: SparkSession
) -> None:
    schema = metadata.schema()
    if isinstance(spec, UpdateSpec):
        _check_columns([c for c, _ in spec.assignments], metadata, "set=", fields="update")
        with spark_errors(describe(spec)):
            check_assignments(table_frame(spark, schema), spec.assignments, schema, "UPDATE SET")
    if not isinstance(spec, MergeSpec) or source is None:
        return
    if spec.on_columns is not None:
        _check_keys(list(spec.on_columns), metadata)
        sensitive = case_sensitive(source.sparkSession)
        missing = [c for c in spec.on_columns if resolve(c, source.columns, sensitive) not in source.columns]
        if missing:
            raise NoSuchColumnError(f"Key column(s) {missing} of on= are not in the source")
    for clause in spec.clauses:
        names = [c for c, _ in clause.assignments or ()]
        _check_columns(names, metadata, clause.describe(), fields=clause.action)
    if any(c.assignments is None and c.action != "delete" for c in spec.clauses):
        check_source(source.schema, schema, case_sensitive=case_sensitive(spark))
    explicit = [c for c in spec.clauses if c.assignments]
    if explicit:
        joined = table_frame(spark, schema).alias("t").crossJoin(source.alias("s"))
        for clause in explicit:
            with spark_errors(clause.describe()):
                check_assignments(joined, clause.assignments or (), schema, clause.describe())


def check_keys(
    source: DataFrame, keys: Sequence[str], limit: int = 5, duplicates_allowed: bool = False
) -> None:
    """Reject NULL or duplicate keys in the source (a scan of the source only).

    Both in one aggregation by key whose offending groups (a NULL in a key column, or more than one
    row) come back NULL keys first, at most ``limit`` of them (a top-k over all partitions in one job):
    checked one after the other with ``limit().collect()``, the two took five Spark jobs per MERGE
    (Spark's take scales up partition by partition when nothing is found, the healthy case).

    Args:
        duplicates_allowed: a delete by key may name a key twice (SQL raises no cardinality error).
    """
    key_cols = [F.col(f"`{k}`") for k in keys]
    any_null = functools.reduce(lambda a, b: a | b, [c.isNull() for c in key_cols])
    if duplicates_allowed:
        nulls = source.filter(any_null).select(*key_cols).limit(limit).collect()
        _raise_null_keys(keys, [tuple(r) for r in nulls])
        return
    counted = source.groupBy(*key_cols).agg(F.count(F.lit(1)).alias(_ROWS))
    bad = counted.filter(any_null | (F.col(_ROWS) > 1)).select(any_null.alias(_NULL), *key_cols)
    found = bad.orderBy(F.col(_NULL).desc()).limit(limit).collect()
    _raise_null_keys(keys, [tuple(r)[1:] for r in found if r[0]])
    if found:
        examples = [tuple(r)[1:] for r in found]
        raise DuplicateKeyError(f"The source has duplicate keys {list(keys)}: {examples}")


def _raise_null_keys(keys: Sequence[str], examples: list[tuple[object, ...]]) -> None:
    if examples:
        raise NullKeyError(f"The source has NULL in key columns {list(keys)}, e.g. {examples}")
