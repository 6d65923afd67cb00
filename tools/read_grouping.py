"""The cases benchmark's read query on Iceberg's copy of ``store_sales`` with and without its data grouping.

Iceberg's scan reports its ``bucket(16, ss_ticket_number)`` grouping to Spark when
``spark.sql.iceberg.planning.preserve-data-grouping`` is on (the benchmark turns it on for the
storage-partitioned join), and the query's ``count(DISTINCT ss_ticket_number)`` then aggregates bucket
by bucket without an ``Exchange``; rowops' file scan reports no grouping, so Spark shuffles the
tickets. This times the query both ways on a fresh Iceberg table of the TPC-DS data (docs/guide/benchmarks.md,
"Cases 1-4").

Usage::

    python -m tools.read_grouping --sf 10 [--data data/tpcds] [--rounds 4]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tools.iceberg_jars import iceberg_jars
from tpcds.batches import TICKET
from tpcds.bench_common import BenchConfig, build_session
from tpcds.iceberg_peer import create_table, iceberg_conf

GROUPING = "spark.sql.iceberg.planning.preserve-data-grouping"


def read_query(spark: SparkSession, table: str) -> DataFrame:
    """The cases benchmark's read query (``tpcds.bench_common.scan_aggregate``)."""
    rows = spark.table(table)
    return rows.agg(F.count("*"), F.sum("ss_net_paid"), F.sum("ss_quantity"), F.countDistinct(TICKET))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", default="1")
    parser.add_argument("--data", default="data/tpcds")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    source = str(Path(args.data) / f"sf{args.sf}")
    cfg = BenchConfig(
        sf=float(args.sf), quick=False, runs=1, warmup=0, iterations=0, degradation_strategies=[], cores=2,
        driver_memory="8g", op_timeout=600.0, source_dir=source, batch_root="",
        work_dir=tempfile.mkdtemp(prefix="read-grouping-"), jars=iceberg_jars(),
    )  # fmt: skip
    spark = build_session(iceberg_conf(cfg, "read-grouping"))
    table = "bench.db.store_sales"
    seconds = create_table(spark, table, source, {"format-version": "2"})
    print(f"created {table} in {seconds:.1f}s")
    times: dict[str, list[float]] = {"true": [], "false": []}
    for _ in range(args.rounds):  # interleaved; the first round warms up
        for grouping, runs in times.items():
            spark.conf.set(GROUPING, grouping)
            started = time.perf_counter()
            read_query(spark, table).collect()
            runs.append(time.perf_counter() - started)
    for grouping, runs in times.items():
        spark.conf.set(GROUPING, grouping)
        query = read_query(spark, table)
        query.collect()
        shuffled = "Exchange hashpartitioning" in query._jdf.queryExecution().executedPlan().toString()
        median = statistics.median(runs[1:]) if len(runs) > 1 else runs[0]
        print(
            f"{GROUPING}={grouping}: {[round(r, 2) for r in runs]} s, median after the first {median:.2f} s, "
            f"tickets shuffled: {shuffled}"
        )


if __name__ == "__main__":
    main()
