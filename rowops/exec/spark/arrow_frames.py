"""Columns of longs built on the driver (delete positions, block masks) as DataFrames, without a Python
object per value and without a local relation.

Classic PySpark 3.5 and 4.x turn an Arrow (or pandas) table into a local relation below
``spark.sql.execution.arrow.localRelationThreshold`` (48 MB): the rows sit in the plan, and a plan
holding 214,000 rows of two longs took 1.0-1.4 s to count, 3 million 14 s (the optimizer copies and
hashes them). Above the threshold the Arrow batches are parallelized and decoded by the JVM in the
job that reads them: 0.2 s and 0.5 s, with batches as large as the rows per core (at the default
10,000 rows a batch, 3 million rows made 300 tasks and took 3.1 s). A Connect client always sends a
local relation; its server decides.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import LongType, StructField, StructType

from rowops.exec.spark.compat import default_parallelism, is_connect
from rowops.exec.spark.session import session_conf


def frame_of_longs(spark: SparkSession, columns: Mapping[str, np.ndarray]) -> DataFrame:
    """A DataFrame of non-null long ``columns`` (name -> values, all of one length): Spark 4 takes an
    Arrow table, Spark 3.5 a pandas frame (classic: through its Arrow path, whatever
    ``spark.sql.execution.arrow.pyspark.enabled`` says)."""
    schema = StructType([StructField(name, LongType(), nullable=False) for name in columns])
    table = pa.table({n: pa.array(v.astype(np.int64, copy=False), pa.int64()) for n, v in columns.items()})
    if is_connect(spark):
        return spark.createDataFrame(
            table if not spark.version.startswith("3.") else table.to_pandas(), schema
        )
    per_task = max(1, -(-table.num_rows // default_parallelism(spark)))
    settings = {
        "spark.sql.execution.arrow.localRelationThreshold": "0",
        "spark.sql.execution.arrow.maxRecordsPerBatch": str(per_task),
    }
    with session_conf(spark, settings):
        if not spark.version.startswith("3."):
            return spark.createDataFrame(table, schema=schema)
        time_zone = str(spark.conf.get("spark.sql.session.timeZone"))
        return spark._create_from_pandas_with_arrow(table.to_pandas(), schema, time_zone)
