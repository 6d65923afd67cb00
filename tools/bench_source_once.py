"""What evaluating an operation's source once costs: local checkpoint vs persist vs Parquet staging.

Usage::

    python tools/bench_source_once.py [ROWS]     # best of 3 per variant, seconds

Each variant computes a generated source and reads it twice (an aggregate like the key pre-scan and a
filtered count), as an operation reads its source several times (see ``rowops/exec/reading/source.py``).
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F


def main(rows: int) -> None:
    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")

    def source() -> DataFrame:
        ids = spark.range(0, rows, 1, 4)
        return ids.select(F.col("id").alias("k"), (F.col("id") * 3).alias("v"), F.col("id").cast("string"))

    def reads(df: DataFrame) -> None:
        df.agg(F.min("k"), F.max("k"), F.count("*")).collect()
        df.filter("k % 7 = 0").count()

    def checkpoint() -> None:
        df = source().localCheckpoint(eager=True)
        reads(df)
        df._jdf.queryExecution().analyzed().rdd().unpersist(False)

    def persist() -> None:
        df = source().persist(StorageLevel.MEMORY_AND_DISK)
        df.count()
        reads(df)
        df.unpersist()

    def parquet() -> None:
        path = tempfile.mkdtemp() + "/source"
        source().write.parquet(path)
        reads(spark.read.parquet(path))

    variants: dict[str, Callable[[], None]] = {
        "lazy (every read recomputes the source)": lambda: reads(source()),
        "localCheckpoint(eager=True)": checkpoint,
        "persist + count": persist,
        "staged as Parquet": parquet,
    }
    for label, run in variants.items():
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - started)
        print(f"{label}: {best:.2f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000)
