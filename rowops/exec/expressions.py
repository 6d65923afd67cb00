"""The user's SQL resolved against what each part of an operation may see, as Spark's MERGE does.

Nothing runs: each expression is analyzed by Spark over empty DataFrames holding only the columns
it may read, so an unknown or out-of-scope column fails with Spark's own ``UNRESOLVED_COLUMN``.

* MERGE ON and WHEN MATCHED: target ``t`` and source ``s`` (an unqualified name present on both
  sides is ambiguous);
* WHEN NOT MATCHED: the source only; WHEN NOT MATCHED BY SOURCE: the target only;
* UPDATE and DELETE: the table's columns by their plain names.

Conditions must be deterministic (Spark and Iceberg reject ``rand()`` there at analysis): a condition
is analyzed as a join condition, where Spark's analyzer refuses non-deterministic expressions.
Values may be non-deterministic (``SET x = rand()`` is valid SQL); they are analyzed in a projection.
"""

from __future__ import annotations

from pyiceberg.schema import Schema
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from rowops.errors import InvalidExpressionError
from rowops.exec.types import to_spark_schema
from rowops.exec.validation import empty_frame
from rowops.spec.operations import DeleteSpec, MergeClause, MergeSpec, OperationSpec, UpdateSpec

_PROBE = "_rowops_probe"
_NON_DETERMINISTIC = "INVALID_NON_DETERMINISTIC_EXPRESSIONS"


def case_sensitive(spark: SparkSession) -> bool:
    """Whether the session resolves column names case-sensitively (``spark.sql.caseSensitive``)."""
    return str(spark.conf.get("spark.sql.caseSensitive", "false")).lower() == "true"


def _fail(exc: AnalysisException, context: str, expression: str) -> InvalidExpressionError:
    if exc.getErrorClass() == _NON_DETERMINISTIC:
        return InvalidExpressionError(
            f"Non-deterministic condition {expression!r} in {context}: a condition must give the same "
            "answer every time a row is looked at",
            help="Remove rand(), uuid() and the like from the condition (values may use them).",
        )
    lines = [line.strip() for line in str(exc).splitlines() if line.strip() and not line.startswith("==")]
    return InvalidExpressionError(f"Invalid SQL {expression!r} in {context}: {' '.join(lines[:2])[:400]}")


def check_condition(frame: DataFrame, condition: str, context: str) -> None:
    """``condition`` must resolve over ``frame``'s columns, be boolean and deterministic."""
    probe = frame.sparkSession.range(0).select(F.lit(True).alias(_PROBE))
    try:
        frame.join(probe, F.expr(condition), "inner")
    except AnalysisException as exc:
        raise _fail(exc, context, condition) from exc


def check_value(frame: DataFrame, value: str, context: str) -> None:
    """``value`` must resolve over ``frame``'s columns."""
    try:
        frame.select(F.expr(value))
    except AnalysisException as exc:
        raise _fail(exc, context, value) from exc


def _empty(spark: SparkSession, schema: T.StructType, alias: str | None) -> DataFrame:
    df = empty_frame(spark, schema)
    return df.alias(alias) if alias else df


def _merge_frames(spark: SparkSession, table: Schema, source: T.StructType) -> dict[str, DataFrame]:
    t, s = _empty(spark, to_spark_schema(table), "t"), _empty(spark, source, "s")
    return {"matched": t.crossJoin(s), "not_matched": s, "not_matched_by_source": t, "on": t.crossJoin(s)}


def _check_clause(frame: DataFrame, clause: MergeClause) -> None:
    context = clause.describe()
    if clause.condition:
        check_condition(frame, clause.condition, context)
    for _, value in clause.assignments or ():
        check_value(frame, value, context)


def check_expressions(
    spark: SparkSession, spec: OperationSpec, table: Schema, source: T.StructType | None
) -> None:
    """Resolve every condition and value of ``spec`` against the columns its clause may see.

    Raises:
        InvalidExpressionError: naming the clause and the expression.
    """
    if isinstance(spec, MergeSpec):
        assert source is not None
        frames = _merge_frames(spark, table, source)
        check_condition(frames["on"], spec.on, f"MERGE ON {spec.on}")
        for clause in spec.clauses:
            _check_clause(frames[clause.match], clause)
        return
    frame = _empty(spark, to_spark_schema(table), None)
    if spec.where:
        check_condition(frame, spec.where, "WHERE")
    if isinstance(spec, UpdateSpec):
        for column, value in spec.assignments:
            check_value(frame, value, f"SET {column}")
    assert isinstance(spec, UpdateSpec | DeleteSpec)
