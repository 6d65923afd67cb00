"""Checks of incoming data against the target table, before any job runs.

The type rules are Spark's ANSI store assignment (``spark.sql.storeAssignmentPolicy=ANSI``, Spark's
default; ``Cast.canANSIStoreAssign``): a value may be written to a column when the cast is
reasonable — numeric to numeric (overflow is checked at run time, see ``exec/writing/write.py``), anything
atomic to string, between date and the timestamps — and never from a string to a number, a date
or a boolean. The same rules apply to MERGE ``UPDATE SET *``/``INSERT *`` (source columns by name),
explicit assignments of MERGE and UPDATE (the analyzed type of each expression) and appends.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

from pyiceberg.schema import Schema
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from rowops.errors import InvalidArgumentError, SchemaMismatchError
from rowops.exec.checks.nested import NESTED
from rowops.exec.spark.types import to_spark_schema, to_spark_type

_WIDENING: dict[type[T.DataType], tuple[type[T.DataType], ...]] = {
    T.ByteType: (T.ShortType, T.IntegerType, T.LongType),
    T.ShortType: (T.IntegerType, T.LongType),
    T.IntegerType: (T.LongType,),
    T.FloatType: (T.DoubleType,),
}
_DATETIME = (T.DateType, T.TimestampType, T.TimestampNTZType)
_ATOMIC = (T.NumericType, T.StringType, T.BinaryType, T.BooleanType, *_DATETIME)

STORE_HELP = (
    "Spark's ANSI store assignment allows numeric <-> numeric, any value -> string and date <-> timestamp; "
    "convert other values explicitly, e.g. CAST(s.amount AS BIGINT)."
)


def widens(source: T.DataType, target: T.DataType) -> bool:
    """Whether every value of ``source`` type fits ``target`` exactly (no run-time check needed).

    >>> widens(T.IntegerType(), T.LongType()), widens(T.DecimalType(8, 2), T.DecimalType(7, 2))
    (True, False)
    """
    if isinstance(source, T.NullType) or source == target:
        return True
    if isinstance(source, T.DecimalType) and isinstance(target, T.DecimalType):
        return (
            source.scale <= target.scale
            and source.precision - source.scale <= target.precision - target.scale
        )
    return any(isinstance(target, cls) for cls in _WIDENING.get(type(source), ()))


def can_store_assign(source: T.DataType, target: T.DataType) -> bool:
    """Spark's ANSI store-assignment rule for rowops' types (``Cast.canANSIStoreAssign``); structs
    field by field by name, arrays by element, maps by key and value (:func:`nested_problems`).

    >>> can_store_assign(T.StringType(), T.LongType()), can_store_assign(T.LongType(), T.StringType())
    (False, True)
    >>> can_store_assign(T.DecimalType(8, 2), T.DecimalType(7, 2))  # overflow is checked at run time
    True
    """
    if isinstance(target, NESTED) or isinstance(source, NESTED):
        return not any(nested_problems("", source, target, True).values())
    if source == target or isinstance(source, T.NullType):
        return True
    if isinstance(source, T.NumericType) and isinstance(target, T.NumericType):
        return True
    if isinstance(target, T.StringType):
        return isinstance(source, _ATOMIC)
    return isinstance(source, _DATETIME) and isinstance(target, _DATETIME)


def nested_problems(
    path: str, source: T.DataType, target: T.DataType, case_sensitive: bool
) -> dict[str, list[str]]:
    """Missing, extra and incompatible nested fields of ``source`` stored as ``target``, named by
    their path (``s.c1``, ``a.element.x``, ``m.value``).

    >>> src = T.StructType([T.StructField("c1", T.StringType()), T.StructField("x", T.IntegerType())])
    >>> dst = T.StructType([T.StructField("c1", T.IntegerType()), T.StructField("c2", T.IntegerType())])
    >>> nested_problems("s", src, dst, True)
    {'missing': ['s.c2'], 'extra': ['s.x'], 'incompatible': ['s.c1 (string -> int)']}
    """
    out: dict[str, list[str]] = {"missing": [], "extra": [], "incompatible": []}
    name = path or "value"

    def add(sub: dict[str, list[str]]) -> None:
        for kind, items in sub.items():
            out[kind].extend(items)

    if isinstance(source, T.NullType):
        return out
    if isinstance(source, T.StructType) and isinstance(target, T.StructType):

        def key(n: str) -> str:
            return n if case_sensitive else n.lower()

        given = {key(f.name): f for f in source.fields}
        known = {key(f.name) for f in target.fields}
        out["missing"] = [f"{name}.{f.name}" for f in target.fields if key(f.name) not in given]
        out["extra"] = [f"{name}.{f.name}" for f in source.fields if key(f.name) not in known]
        for f in target.fields:
            if key(f.name) in given:
                add(
                    nested_problems(
                        f"{name}.{f.name}", given[key(f.name)].dataType, f.dataType, case_sensitive
                    )
                )
    elif isinstance(source, T.ArrayType) and isinstance(target, T.ArrayType):
        add(nested_problems(f"{name}.element", source.elementType, target.elementType, case_sensitive))
    elif isinstance(source, T.MapType) and isinstance(target, T.MapType):
        add(nested_problems(f"{name}.key", source.keyType, target.keyType, case_sensitive))
        add(nested_problems(f"{name}.value", source.valueType, target.valueType, case_sensitive))
    elif isinstance(source, NESTED) or isinstance(target, NESTED) or not can_store_assign(source, target):
        out["incompatible"].append(_incompatible(name, source, target))
    return out


def _incompatible(name: str, source: T.DataType, target: T.DataType) -> str:
    return f"{name} ({source.simpleString()} -> {target.simpleString()})"


def check_source(
    source: T.StructType, schema: Schema, what: str = "source", case_sensitive: bool = True
) -> None:
    """Raise :class:`SchemaMismatchError` naming missing, extra and incompatible columns.

    Every table column must come from a source column of the same name whose type can be stored in it
    (:func:`can_store_assign`); a source column the table does not have is an error too (rowops does
    not evolve schemas; select the table's columns first). Nullability is checked at run time.

    Args:
        source: schema of the incoming DataFrame.
        schema: the table schema.
        what: how to call the incoming data in messages.
        case_sensitive: match names exactly (``spark.sql.caseSensitive``); otherwise ``ID`` is ``id``.
    """

    def key(name: str) -> str:
        return name if case_sensitive else name.lower()

    fields = {key(f.name): f.dataType for f in source.fields}
    columns = [f.name for f in schema.fields]
    table_names = {key(n) for n in columns}
    missing = [n for n in columns if key(n) not in fields]
    extra = [f.name for f in source.fields if key(f.name) not in table_names]
    incompatible: list[str] = []
    nested_found = False
    for column in schema.fields:
        target_type = to_spark_type(column.field_type)
        given = fields.get(key(column.name))
        if given is not None:
            problems = nested_problems(column.name, given, target_type, case_sensitive)
            nested_found |= isinstance(target_type, NESTED) and any(problems.values())
            missing += problems["missing"]
            extra += problems["extra"]
            incompatible += problems["incompatible"]
    parts = []
    if missing:
        parts.append(f"missing columns {missing}")
    if extra:
        parts.append(f"extra columns {extra} (not in the table)")
    if incompatible:
        parts.append(f"incompatible types {incompatible}")
    if parts:
        helps = ["Select, rename or cast the source columns so that they match the table schema"]
        top_extra = [e for e in extra if e in {f.name for f in source.fields}]
        if top_extra:
            helps.append(f"drop the extra columns (e.g. df.drop({', '.join(map(repr, top_extra))}))")
        if nested_found:
            helps.append("rebuild struct columns with the table's fields (F.struct(...), Column.withField)")
        raise SchemaMismatchError(
            f"The {what} does not match the table schema: {'; '.join(parts)}",
            missing=missing,
            extra=extra,
            incompatible=incompatible,
            help="; ".join(helps) + (f". {STORE_HELP}" if incompatible else "."),
        )


_EMPTY_FRAMES: weakref.WeakKeyDictionary[SparkSession, dict[str, DataFrame]] = weakref.WeakKeyDictionary()
_MAX_EMPTY_FRAMES = 64  # per session


def empty_frame(spark: SparkSession, schema: T.StructType) -> DataFrame:
    """An empty DataFrame with ``schema``, to analyze expressions against (no job runs).

    Cached per session and schema: creating one costs ~50 ms of Py4J round trips (PySpark ships even
    an empty list to the JVM as an RDD), and every operation analyzes its expressions over one for
    the table and one for the source, mostly the same schemas again.
    """
    frames = _EMPTY_FRAMES.setdefault(spark, {})
    key = schema.json()
    frame = frames.get(key)
    if frame is None:
        if len(frames) >= _MAX_EMPTY_FRAMES:
            frames.clear()
        frame = frames[key] = spark.createDataFrame([], schema)
    return frame


def table_frame(spark: SparkSession, schema: Schema) -> DataFrame:
    """An empty DataFrame with the table's columns, to analyze expressions against (no job runs)."""
    return empty_frame(spark, to_spark_schema(schema))


def check_assignments(
    frame: DataFrame, assignments: Sequence[tuple[str, str]], schema: Schema, what: str
) -> None:
    """Raise :class:`SchemaMismatchError` when an assigned expression's type cannot be stored in its column.

    Args:
        frame: the rows the expressions are evaluated on (only analyzed, never run).
        assignments: ``(column, Spark SQL expression)`` pairs.
        what: the clause, for messages (e.g. ``UPDATE SET``).
    """
    if not assignments:
        return
    analyzed = frame.select(*[F.expr(e).alias(f"_{i}") for i, (_, e) in enumerate(assignments)]).schema
    incompatible = []
    for (column, expression), field in zip(assignments, analyzed.fields, strict=True):
        target = to_spark_type(schema.find_field(column).field_type)
        if not can_store_assign(field.dataType, target):
            incompatible.append(
                f"{column} = {expression} ({field.dataType.simpleString()} -> {target.simpleString()})"
            )
    if incompatible:
        raise SchemaMismatchError(
            f"{what}: cannot store {'; '.join(incompatible)}",
            incompatible=[i.split(" = ", 1)[0] for i in incompatible],
            help=STORE_HELP,
        )


def require_dataframe(value: object, what: str) -> DataFrame:
    """``value`` if it is a Spark DataFrame, else :class:`InvalidArgumentError` saying how to make one."""
    if isinstance(value, DataFrame):
        return value
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    hint = "spark.createDataFrame(pandas_df)" if "pandas" in kind else "spark.createDataFrame(rows, schema)"
    raise InvalidArgumentError(
        f"{what} must be a pyspark.sql.DataFrame, not {kind}",
        help=f"Pass a Spark DataFrame, e.g. {hint} (rowops never collects rows to the driver).",
    )
