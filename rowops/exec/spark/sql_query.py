"""Running a query whose lake tables are given as DataFrames (``lake.sql``), and TIMESTAMP AS OF values.

``spark.sql(text, **frames)`` is PySpark's own substitution of DataFrames into SQL: classic PySpark
registers one temporary view per DataFrame, analyzes the query and drops the views before it returns
(the returned DataFrame holds the analyzed plan, so it keeps working: ``tests/spark/test_sql.py``);
Spark Connect sends the DataFrames' plans with the query. Either way no view outlives the call and
the query reads the files of the snapshots the DataFrames were made of.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession

from rowops.errors import InvalidInputError, NoSuchTableError
from rowops.exec.spark.job_errors import spark_errors


def run_query(spark: SparkSession, text: str, frames: Mapping[str, DataFrame], context: str) -> DataFrame:
    """``text`` analyzed by Spark with ``{field}`` placeholders bound to ``frames``."""
    with spark_errors(context):
        return spark.sql(text, None, **frames) if frames else spark.sql(text)


def check_spark_table(spark: SparkSession, name: str) -> None:
    """A dotted name that is not a lake table must be one of Spark's, else ``NoSuchTableError``."""
    with spark_errors(f"the lookup of {name}"):
        known = spark.catalog.tableExists(name)
    if not known:
        raise NoSuchTableError(f"Table {name} is neither a table of the lake nor a table or view of Spark")


def timestamp_millis(spark: SparkSession, expression: str) -> int:
    """Milliseconds since the epoch of a ``TIMESTAMP AS OF`` expression, in the session's time zone."""
    context = f"TIMESTAMP AS OF {expression}"
    with spark_errors(context):
        row = spark.sql(f"SELECT unix_millis(CAST(({expression}) AS TIMESTAMP)) AS ms").first()
    if row is None or row[0] is None:
        raise InvalidInputError(
            f"{context} is not a timestamp", help="Write e.g. TIMESTAMP AS OF '2024-06-01 12:00:00'."
        )
    return int(row[0])
