"""A pipeline batch in Spark: the source read, columns mapped, a change feed reduced to one change per key.

The batch is evaluated once (a local checkpoint, as every operation source is), so a file that cannot
be parsed or an unknown operation code fails the run before any table is written. The reduction of a
change feed keeps, per key, the change with the greatest ordering value (ties: delete, then update,
then insert, so exact duplicates collapse to one); the pipeline's MERGE then applies it only when it
is not older than the row the target holds (late events), and a delete of a missing key does nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from rowops.errors import PipelineSourceError
from rowops.exec.checks.expressions import check_one_expression
from rowops.exec.reading.source import evaluate_once
from rowops.meta.paths import is_remote, scheme, spark_uri

OP_COLUMN = "_rowops_op"
_PRIORITY = {"delete": 3, "update": 2, "insert": 1}
_MAX_FILES_PROBED = 64


def _uri(path: str) -> str:
    return spark_uri(path if scheme(path) else str(Path(path).absolute()))


def read_files(spark: SparkSession, fmt: str, path: str, options: Mapping[str, str]) -> DataFrame:
    """A Parquet/CSV/JSON directory as a DataFrame (CSV and JSON fail on malformed records)."""
    settings = {"mode": "FAILFAST", **options} if fmt in ("csv", "json") else dict(options)
    try:
        return spark.read.format(fmt).options(**settings).load(_uri(path))
    except AnalysisException as exc:
        first = str(exc).strip().splitlines()[0][:300]
        raise PipelineSourceError(f"source {path} ({fmt}) cannot be read: {first}") from exc
    except Exception as exc:  # e.g. a Parquet footer that does not parse (schema inference reads them)
        raise _unreadable(spark, exc, source_files(path), fmt) from exc


def require_columns(df: DataFrame, columns: Sequence[str], what: str) -> None:
    """Fail naming the first of ``columns`` the DataFrame lacks."""
    have = set(df.columns)
    for column in columns:
        if column not in have:
            raise PipelineSourceError(
                f"the source has no column {column!r} ({what}); its columns are: {', '.join(df.columns)}"
            )


def map_columns(df: DataFrame, columns: Mapping[str, str]) -> DataFrame:
    """``df`` with each target column of ``columns`` computed from its Spark SQL expression."""
    if not columns:
        return df
    try:
        mapped = df.withColumns({target: F.expr(sql) for target, sql in columns.items()})
        _ = mapped.schema  # analyze now: a wrong expression names its column here
    except Exception as exc:
        raise PipelineSourceError(f"a [[targets]].columns expression does not resolve: {exc}") from exc
    for target, sql in columns.items():
        check_one_expression(df, sql, f"[[targets]].columns.{target}")
    return mapped


def spark_types(df: DataFrame) -> dict[str, str]:
    """Each column's Spark SQL type (``bigint``, ``decimal(12,2)``, ...)."""
    return {f.name: f.dataType.simpleString() for f in df.schema.fields}


def filter_rows(df: DataFrame, where: str, field: str = "[[targets]].where") -> DataFrame:
    """The rows matching a ``where`` of the config (Spark SQL over the source's columns)."""
    try:
        filtered = df.where(F.expr(where))
        _ = filtered.schema
    except Exception as exc:
        first = str(exc).strip().splitlines()[0][:300]
        raise PipelineSourceError(f"{field} {where!r} does not resolve: {first}") from exc
    check_one_expression(df, where, field)
    return filtered


def select(df: DataFrame, columns: Sequence[str], op_column: str | None) -> DataFrame:
    """The table's columns (in its order) and the operation column, if any."""
    return df.select(*[F.col(f"`{c}`") for c in columns], *([F.col(op_column)] if op_column else []))


def reduce_changes(
    df: DataFrame, keys: Sequence[str], op_column: str, order_by: str, codes: Mapping[str, str]
) -> DataFrame:
    """The newest change per key, with its operation (``insert``/``update``/``delete``) in ``OP_COLUMN``.

    Codes not in ``codes`` become NULL operations (``check_codes`` rejects them before anything runs).
    """
    op = F.col(op_column).cast("string")
    kind = F.lit(None).cast("string")
    for code, name in codes.items():
        kind = F.when(op == F.lit(code), F.lit(name)).otherwise(kind)
    priority = F.lit(0)
    for name, rank in _PRIORITY.items():
        priority = F.when(F.col(OP_COLUMN) == F.lit(name), F.lit(rank)).otherwise(priority)
    order = Window.partitionBy(*[F.col(k) for k in keys]).orderBy(
        F.col(order_by).desc_nulls_last(), priority.desc()
    )
    return (
        df.withColumn(OP_COLUMN, kind)
        .withColumn("_rowops_rank", F.row_number().over(order))
        .where(F.col("_rowops_rank") == 1)
        .drop("_rowops_rank")
    )


def evaluate(
    df: DataFrame, op_column: str | None, codes: Mapping[str, str], files: Sequence[str] = (), fmt: str = ""
) -> tuple[DataFrame, int, dict[str, int]]:
    """Evaluate the batch once; returns (rows, rows read, rows per operation code).

    Raises:
        PipelineSourceError: a file cannot be parsed (named, when the source is a directory), or the
            change feed holds an operation code that is not configured.
    """
    try:
        per_code = _code_counts(df, op_column) if op_column else {}
    except PipelineSourceError:
        raise
    except Exception as exc:
        raise _unreadable(df.sparkSession, exc, files, fmt) from exc
    unknown = sorted((str(c) for c in per_code if c is None or str(c) not in codes), key=str)
    if op_column and unknown:
        shown = ", ".join("NULL" if c == "None" else repr(c) for c in unknown[:5])
        raise PipelineSourceError(
            f"the change feed has operation code(s) {shown} in column {op_column!r}; configured codes: "
            + ", ".join(f"{k!r} ({v})" for k, v in codes.items()),
            help="Map every code in [source.cdc] (insert = [...], update = [...], delete = [...]); nothing was written.",
        )
    return df, sum(per_code.values()), {str(k): v for k, v in per_code.items()}


def _code_counts(df: DataFrame, op_column: str | None) -> dict[str | None, int]:
    assert op_column is not None
    rows = df.groupBy(F.col(op_column).cast("string").alias("code")).count().collect()
    return {row["code"]: int(row["count"]) for row in rows}


def materialize(df: DataFrame, files: Sequence[str] = (), fmt: str = "") -> tuple[DataFrame, int]:
    """The rows of ``df`` evaluated once (local checkpoint) and their count; unreadable files named."""
    try:
        evaluated = evaluate_once(df)
        return evaluated, evaluated.count()
    except Exception as exc:
        raise _unreadable(df.sparkSession, exc, files, fmt) from exc


def _unreadable(spark: SparkSession, exc: Exception, files: Sequence[str], fmt: str) -> PipelineSourceError:
    """The error of a source that failed to evaluate, naming the first file that fails alone."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    causes = [line.removeprefix("Caused by: ") for line in lines if line.startswith("Caused by: ")]
    summary = (causes[-1] if causes else lines[0] if lines else type(exc).__name__)[:300]
    for file in files[:_MAX_FILES_PROBED]:
        try:
            spark.read.format(fmt).option("mode", "FAILFAST").load(_uri(file)).count()
        except Exception:
            return PipelineSourceError(f"source file {file} cannot be read as {fmt}: {summary}")
    return PipelineSourceError(f"the source cannot be read: {summary}")


def source_files(path: str) -> list[str]:
    """The data files of a local source directory (for naming a bad one), sorted; [] when remote."""
    if is_remote(path) or not Path(path).is_dir():
        return []
    return sorted(
        str(p)
        for p in Path(path).rglob("*")
        if p.is_file() and not p.name.startswith(("_", ".")) and not p.name.endswith(".crc")
    )
