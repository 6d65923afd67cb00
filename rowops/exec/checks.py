"""Checks of an operation against its table before anything runs: columns, types, expressions."""

from __future__ import annotations

from pyiceberg.table.metadata import TableMetadata
from pyspark.sql import DataFrame, SparkSession

from rowops.errors import NoSuchColumnError
from rowops.exec.expressions import case_sensitive, check_expressions
from rowops.exec.job_errors import spark_errors
from rowops.exec.validation import check_assignments, check_source, table_frame
from rowops.spec.names import resolve, resolve_spec
from rowops.spec.operations import MergeSpec, OperationSpec, UpdateSpec, describe


def checked_spec(
    spec: OperationSpec, source: DataFrame | None, metadata: TableMetadata, spark: SparkSession
) -> OperationSpec:
    """``spec`` with column names spelled as the table spells them, every expression checked."""
    schema = metadata.schema()
    spec = resolve_spec(spec, schema.column_names, case_sensitive(spark))
    _validate(spec, source, metadata, spark)
    check_expressions(spark, spec, schema, source.schema if source is not None else None)
    return spec


def _check_columns(names: list[str], metadata: TableMetadata, context: str) -> None:
    known = metadata.schema().column_names
    unknown = [n for n in names if n not in known]
    if unknown:
        raise NoSuchColumnError(f"Unknown column(s) {unknown} in {context}; table columns are {known}")


def _validate(
    spec: OperationSpec, source: DataFrame | None, metadata: TableMetadata, spark: SparkSession
) -> None:
    schema = metadata.schema()
    if isinstance(spec, UpdateSpec):
        _check_columns([c for c, _ in spec.assignments], metadata, "set=")
        with spark_errors(describe(spec)):
            check_assignments(table_frame(spark, schema), spec.assignments, schema, "UPDATE SET")
    if not isinstance(spec, MergeSpec) or source is None:
        return
    if spec.on_columns is not None:
        _check_columns(list(spec.on_columns), metadata, "on=")
        sensitive = case_sensitive(source.sparkSession)
        missing = [c for c in spec.on_columns if resolve(c, source.columns, sensitive) not in source.columns]
        if missing:
            raise NoSuchColumnError(f"Key column(s) {missing} of on= are not in the source")
    for clause in spec.clauses:
        _check_columns([c for c, _ in clause.assignments or ()], metadata, clause.describe())
    if any(c.assignments is None and c.action != "delete" for c in spec.clauses):
        check_source(source.schema, schema, case_sensitive=case_sensitive(spark))
    explicit = [c for c in spec.clauses if c.assignments]
    if explicit:
        joined = table_frame(spark, schema).alias("t").crossJoin(source.alias("s"))
        for clause in explicit:
            with spark_errors(clause.describe()):
                check_assignments(joined, clause.assignments or (), schema, clause.describe())
