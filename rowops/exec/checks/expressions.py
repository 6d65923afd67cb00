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

Each text must be exactly one expression. Spark's expression parser (``F.expr``) reads ``expr word``
as ``expr AS word``, so ``"id = 6 bogus"`` or ``"id = 5 or"`` would silently be ``id = 6`` / ``id = 5``:
every text that parses alone is parsed again in parentheses (:func:`enclosed`), where Spark's grammar
takes one expression and no alias; one that does not parse there ends in an alias and is refused.
A condition of type NULL (``NULL``) is cast to BOOLEAN: it never holds, as in Spark's and Iceberg's
MERGE and DELETE (the MERGE ON condition must still be a BOOLEAN).
"""

from __future__ import annotations

from dataclasses import replace

from pyiceberg.schema import Schema
from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from rowops.errors import InvalidExpressionError
from rowops.exec.checks.validation import empty_frame
from rowops.exec.spark.compat import is_connect
from rowops.exec.spark.types import to_spark_schema
from rowops.request.operations import DeleteSpec, MergeClause, MergeSpec, OperationSpec, UpdateSpec

_PROBE = "_rowops_probe"
_NON_DETERMINISTIC = "INVALID_NON_DETERMINISTIC_EXPRESSIONS"
_NOT_BOOLEAN = "JOIN_CONDITION_IS_NOT_BOOLEAN_TYPE"
_ONE_EXPRESSION = (
    "Write exactly one Spark SQL expression, without an alias: look for a missing operator or operand, "
    'a stray word or an unquoted string (e.g. where="id = 5", not "id = 5 or"; s = \'a b\', not s = a b).'
)


def case_sensitive(spark: SparkSession) -> bool:
    """Whether the session resolves column names case-sensitively (``spark.sql.caseSensitive``)."""
    return str(spark.conf.get("spark.sql.caseSensitive", "false")).lower() == "true"


def enclosed(text: str) -> str:
    """``text`` in parentheses, where Spark's grammar takes exactly one expression and no alias (a
    newline first ends a trailing ``--`` comment)."""
    return f"({text}\n)" if "--" in text else f"({text})"


def _fail(exc: AnalysisException, context: str, expression: str) -> InvalidExpressionError:
    if exc.getErrorClass() == _NON_DETERMINISTIC:
        return InvalidExpressionError(
            f"Non-deterministic condition {expression!r} in {context}: a condition must give the same "
            "answer every time a row is looked at",
            help="Remove rand(), uuid() and the like from the condition (values may use them).",
        )
    lines = [line.strip() for line in str(exc).splitlines() if line.strip() and not line.startswith("==")]
    return InvalidExpressionError(f"Invalid SQL {expression!r} in {context}: {' '.join(lines[:2])[:400]}")


def check_one_expression(frame: DataFrame, text: str, context: str) -> None:
    """``text``, which Spark parsed alone (the caller analyzed it), must parse in parentheses too:
    else it ends in a word (or an ``AS word``) that Spark's parser took as a column alias."""
    try:
        column = F.expr(enclosed(text))  # classic PySpark parses it here
        if is_connect(frame):  # Spark Connect, when it analyzes
            _ = frame.select(column).schema
    except ParseException as exc:
        raise InvalidExpressionError(
            f"Invalid SQL {text!r} in {context}: not one expression; Spark would read its trailing word "
            "as a column alias (expr AS word) and drop it",
            help=_ONE_EXPRESSION,
        ) from exc


def _analyzed(df: DataFrame) -> None:
    """Classic PySpark analyzes a DataFrame as it is built; a Spark Connect client when asked."""
    if is_connect(df):
        _ = df.schema


def _join_on(frame: DataFrame, condition: str) -> None:
    probe = frame.sparkSession.range(0).select(F.lit(True).alias(_PROBE))
    _analyzed(frame.join(probe, F.expr(condition), "inner"))


def _null_typed(frame: DataFrame, condition: str) -> bool:
    return isinstance(frame.select(F.expr(condition)).schema[0].dataType, T.NullType)


def check_condition(frame: DataFrame, condition: str, context: str, null_never_holds: bool = True) -> str:
    """``condition`` must be one expression over ``frame``'s columns, boolean and deterministic.

    Returns the condition to evaluate: ``condition``, or (``null_never_holds``) one of type NULL
    cast to BOOLEAN, a condition that is never true.
    """
    try:
        _join_on(frame, condition)
        void = False
    except AnalysisException as exc:
        void = null_never_holds and exc.getErrorClass() == _NOT_BOOLEAN and _null_typed(frame, condition)
        if not void:
            raise _fail(exc, context, condition) from exc
    check_one_expression(frame, condition, context)
    return f"CAST({enclosed(condition)} AS BOOLEAN)" if void else condition


def check_value(frame: DataFrame, value: str, context: str) -> None:
    """``value`` must be one expression that resolves over ``frame``'s columns."""
    try:
        _analyzed(frame.select(F.expr(value)))
    except AnalysisException as exc:
        raise _fail(exc, context, value) from exc
    check_one_expression(frame, value, context)


def _empty(spark: SparkSession, schema: T.StructType, alias: str | None) -> DataFrame:
    df = empty_frame(spark, schema)
    return df.alias(alias) if alias else df


def _merge_frames(spark: SparkSession, table: Schema, source: T.StructType) -> dict[str, DataFrame]:
    t, s = _empty(spark, to_spark_schema(table), "t"), _empty(spark, source, "s")
    return {"matched": t.crossJoin(s), "not_matched": s, "not_matched_by_source": t, "on": t.crossJoin(s)}


def _check_clause(frame: DataFrame, clause: MergeClause) -> MergeClause:
    context = clause.describe()
    for _, value in clause.assignments or ():
        check_value(frame, value, context)
    if not clause.condition:
        return clause
    return replace(clause, condition=check_condition(frame, clause.condition, context))


def check_expressions(
    spark: SparkSession, spec: OperationSpec, table: Schema, source: T.StructType | None
) -> OperationSpec:
    """Resolve every condition and value of ``spec`` against the columns its clause may see.

    Returns ``spec`` with its conditions as they are evaluated (:func:`check_condition`).

    Raises:
        InvalidExpressionError: naming the clause and the expression.
    """
    if isinstance(spec, MergeSpec):
        assert source is not None
        frames = _merge_frames(spark, table, source)
        check_condition(frames["on"], spec.on, f"MERGE ON {spec.on}", null_never_holds=False)
        return replace(spec, clauses=tuple(_check_clause(frames[c.match], c) for c in spec.clauses))
    frame = _empty(spark, to_spark_schema(table), None)
    where = check_condition(frame, spec.where, "WHERE") if spec.where else spec.where
    if isinstance(spec, UpdateSpec):
        for column, value in spec.assignments:
            check_value(frame, value, f"SET {column}")
    assert isinstance(spec, UpdateSpec | DeleteSpec)
    return replace(spec, where=where)
