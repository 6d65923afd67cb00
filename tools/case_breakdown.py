"""Where one MERGE of a case and the read right after it spend their time, rowops or Iceberg.

Runs the cases benchmark's ten consecutive MERGEs of one case on a fresh table (rowops: position deletes
on v2, deletion vectors or ``auto`` on v3; Iceberg 1.10.2: merge-on-read on v2 or deletion vectors on v3)
and, for the chosen iterations, prints the write and the read query as a timeline of Spark jobs (start,
duration, tasks, executor time, rowops' job description) with the driver time before, between and after
them. Each engine runs in its own process, as in the benchmark; the breakdowns of issue 47's missed
targets in docs/guide/benchmarks.md ("Why each missed one misses") come from this.

Usage::

    python -m tools.case_breakdown rowops position-delete --case 2 --at 1,10
    python -m tools.case_breakdown iceberg merge-on-read --case 2 --at 1,10 [--sf 1] [--data data/tpcds]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

import rowops
from tools.iceberg_jars import iceberg_jars
from tpcds.batches import KEY_COLUMNS, TICKET
from tpcds.bench_common import BenchConfig, build_session, scan_aggregate, spark_conf
from tpcds.iceberg_peer import base_snapshot, create_table, iceberg_conf, merge_sql, restore, set_mode

MODES = {
    "rowops": {"position-delete": 2, "deletion-vectors": 3, "auto-v3": 3},
    "iceberg": {"merge-on-read": 2, "deletion-vectors": 3},
}


@dataclass
class Job:
    start: float
    end: float
    tasks: int
    executor_s: float
    label: str


def _seconds(option: Any) -> float | None:
    return option.get().getTime() / 1000.0 if option.isDefined() else None


def _executor_seconds(store: Any, job: Any) -> float:
    total = 0.0
    ids = job.stageIds()
    for k in range(ids.size()):
        try:
            stage = store.lastStageAttempt(ids.apply(k))
        except Exception:  # a stage the store no longer holds
            continue
        if stage.status().toString() != "SKIPPED":
            total += stage.executorRunTime() / 1000.0
    return total


def jobs_since(spark: SparkSession, known: set[int]) -> list[Job]:
    """The Spark jobs not in ``known``, from the status store (works with the UI off)."""
    store = spark.sparkContext._jsc.sc().statusStore()  # type: ignore[union-attr]
    jobs = store.jobsList(None)
    found = []
    for i in range(jobs.size()):
        job = jobs.apply(i)
        start = _seconds(job.submissionTime())
        if job.jobId() in known or start is None:
            continue
        description = job.description()
        label = description.get() if description.isDefined() else job.name()
        end = _seconds(job.completionTime()) or start
        found.append(Job(start, end, job.numTasks(), _executor_seconds(store, job), label))
    return sorted(found, key=lambda j: j.start)


def job_ids(spark: SparkSession) -> set[int]:
    store = spark.sparkContext._jsc.sc().statusStore()  # type: ignore[union-attr]
    jobs = store.jobsList(None)
    return {jobs.apply(i).jobId() for i in range(jobs.size())}


def timeline(spark: SparkSession, label: str, action: Callable[[], Any]) -> None:
    """Run ``action`` and print its jobs with the driver-only time around them."""
    known = job_ids(spark)
    started = time.time()
    action()
    ended = time.time()
    time.sleep(0.3)  # the listener bus catches up
    jobs = jobs_since(spark, known)
    covered, last = 0.0, started
    for job in jobs:
        begin = max(job.start, last)
        if job.end > begin:
            covered, last = covered + job.end - begin, job.end
    wall = ended - started
    print(
        f"  {label}: {wall:.2f}s, {len(jobs)} jobs covering {covered:.2f}s, driver only {wall - covered:.2f}s"
    )
    previous = started
    for job in jobs:
        print(
            f"    +{job.start - started:6.2f} after {job.start - previous:5.2f}: {job.end - job.start:5.2f}s, "
            f"{job.tasks:4d} tasks, executors {job.executor_s:6.2f}s  {job.label[:100]}"
        )
        previous = max(previous, job.end)
    print(f"    then {ended - previous:.2f}s on the driver")


def rowops_steps(spark: SparkSession, mode: str, lake_dir: str, source: str, batches: list[str]) -> Any:
    """(write of batch i, read, restore) for a fresh rowops table."""
    lake = rowops.Lakehouse(lake_dir, spark=spark)
    rows = spark.read.parquet(source)
    table = lake.create_table(
        "db.store_sales", rows, partition_by=[f"bucket(16, {TICKET})"], identifier=list(KEY_COLUMNS),
        format_version=MODES["rowops"][mode],
    )  # fmt: skip
    base = int(table.snapshots()[0]["snapshot_id"])  # type: ignore[call-overload]
    strategy = "auto" if mode == "auto-v3" else "position-delete"  # deletion vectors: position deletes on v3
    frames = [spark.read.parquet(b) for b in batches]

    def write(i: int) -> None:
        spark.catalog.clearCache()
        rowops.merge(frames[i], table, on=list(KEY_COLUMNS), strategy=strategy)

    return write, lambda: scan_aggregate(table.to_df), lambda: table.rollback_to(base)


def iceberg_steps(spark: SparkSession, mode: str, source: str, batches: list[str]) -> Any:
    """(write of batch i, read, restore) for a fresh Iceberg table, batches staged as tables."""
    table = "bench.db.store_sales"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS bench.db")
    version = str(MODES["iceberg"][mode])
    create_table(spark, table, source, {"format-version": version, "write.merge.mode": "merge-on-read"})
    set_mode(spark, table, mode)
    staged = []
    for i, batch in enumerate(batches):
        name = f"bench.db.batch{i}"
        create_table(spark, name, batch, {"format-version": "2"})
        staged.append(name)
    base = base_snapshot(spark, table)

    def write(i: int) -> None:
        spark.sql(merge_sql(table, staged[i]))

    return write, lambda: scan_aggregate(lambda: spark.table(table)), lambda: restore(spark, table, base)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("engine", choices=sorted(MODES))
    parser.add_argument("mode")
    parser.add_argument("--case", type=int, default=2, choices=(1, 2, 3))
    parser.add_argument("--at", default="1,10", help="iterations to break down (all ten run)")
    parser.add_argument("--sf", default="1")
    parser.add_argument("--data", default="data/tpcds")
    args = parser.parse_args()
    if args.mode not in MODES[args.engine]:
        parser.error(f"{args.engine} modes: {', '.join(MODES[args.engine])}")
    at = {int(x) for x in args.at.split(",")}
    data = Path(args.data)
    source = str(data / f"sf{args.sf}")
    batches = [str(data / f"cases-sf{args.sf}" / f"case{args.case}" / f"seed-{s}") for s in range(1, 11)]
    work = tempfile.mkdtemp(prefix="case-breakdown-")
    cfg = BenchConfig(
        sf=float(args.sf), quick=False, runs=1, warmup=1, iterations=10, degradation_strategies=[], cores=2,
        driver_memory="8g" if float(args.sf) > 1 else "4g", op_timeout=1800.0, source_dir=source,
        batch_root="", work_dir=work, jars=iceberg_jars() if args.engine == "iceberg" else [],
    )  # fmt: skip
    try:
        if args.engine == "rowops":
            spark = build_session(spark_conf(cfg, "case-breakdown"))
            write, read, restore_base = rowops_steps(
                spark, args.mode, str(Path(work) / "lake"), source, batches
            )
        else:
            spark = build_session(iceberg_conf(cfg, "case-breakdown"))
            write, read, restore_base = iceberg_steps(spark, args.mode, source, batches)
        write(0)  # warm-up as in the benchmark: one MERGE, back to the base, three reads
        restore_base()
        for _ in range(3):
            read()
        for i in range(10):
            if i + 1 not in at:
                started = time.perf_counter()
                write(i)
                read()
                print(f"  #{i + 1}: write and read {time.perf_counter() - started:.2f}s")
                continue
            print(f"== {args.engine} {args.mode}, Case {args.case}, SF {args.sf}: MERGE #{i + 1}")
            timeline(spark, "write", lambda i=i: write(i))
            timeline(spark, "read after it", read)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
