"""Read cost under deletes, split into driver planning and Spark execution, per delete generation.

``build`` creates one SF N ``store_sales`` table per delete kind in a lake of its own (partitioned by
``bucket(16, ss_ticket_number)``, as the cases benchmark), then merges the Case 2 batches of seeds
1..N with a fixed strategy into each and records the snapshot id of every generation. ``time`` reads
those snapshots with the benchmark's read query (``tpcds.bench_common.scan_aggregate``'s aggregate)
and splits each read into the listing of live files (manifests), the building of the DataFrame (delete
index, Spark's file index of every group of files) and the Spark execution, with the Spark job count::

    python -m tools.bench_reads build --data /work/main/data/tpcds --sf 1 --work /tmp/reads-work
    python -m tools.bench_reads time --work /tmp/reads-work --generations 0 1 10 --reps 3 --out r.json

Speed is measured here, never by timed tests; run it on a quiet machine and compare runs of the same
run only (``time`` reads every table in turn, so code versions can be compared in one run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import rowops
from rowops.exec.reading.scan import scan
from rowops.exec.spark.session import read_conf
from rowops.meta.evolution import schema_of
from rowops.meta.files import live_files
from tpcds.batches import KEY_COLUMNS, TICKET
from tpcds.bench_common import REPO, build_session, job_count
from tpcds.cases import case_batch

KINDS = {"pos": "position-delete", "eq": "equality-delete"}
STATES = "states.json"


def session(cores: int, memory: str) -> SparkSession:
    conf = read_conf(REPO / "conf" / "spark-defaults.conf")
    conf.update({"spark.master": f"local[{cores}]", "spark.driver.memory": memory, "spark.app.name": "reads"})
    return build_session(conf)


def build(args: argparse.Namespace) -> None:
    """Tables ``db.ss_<kind>`` at generations 0..N of Case 2 batches; ``states.json`` maps them."""
    work = Path(args.work)
    spark = session(args.cores, args.driver_memory)
    source = spark.read.parquet(str(Path(args.data) / f"sf{args.sf:g}"))
    rows = source.count()
    batches = {}
    for seed in range(1, args.iterations + 1):
        target = work / "batches" / f"seed-{seed}"
        if not (target / "_SUCCESS").exists():
            case_batch(2, source, seed, rows).coalesce(args.cores).write.mode("overwrite").parquet(
                str(target)
            )
        batches[seed] = spark.read.parquet(str(target))
    states: dict[str, Any] = {"sf": args.sf, "tables": {}}
    for kind in args.kinds:
        lake = rowops.Lakehouse(work / f"lake-{kind}", spark=spark)
        name = f"db.ss_{kind}"
        version = {"format_version": 3} if kind == "dv" else {}
        table = lake.create_table(
            name, source, partition_by=[f"bucket(16, {TICKET})"], identifier=list(KEY_COLUMNS), **version
        )
        snapshots = [table.current_snapshot_id]
        for seed in range(1, args.iterations + 1):
            strategy = args.mix[seed % len(args.mix)] if kind == "mix" else KINDS.get(kind, "position-delete")
            started = time.perf_counter()
            rowops.merge(batches[seed], table, on=list(KEY_COLUMNS), strategy=strategy)
            snapshots.append(table.current_snapshot_id)
            print(f"{name} generation {seed} ({strategy}): {time.perf_counter() - started:.1f}s", flush=True)
        states["tables"][kind] = {"lake": str(work / f"lake-{kind}"), "table": name, "snapshots": snapshots}
        (work / STATES).write_text(json.dumps(states, indent=1))


def aggregate(df: DataFrame) -> list[str]:
    row = df.agg(F.count("*"), F.sum("ss_net_paid"), F.sum("ss_quantity"), F.countDistinct(TICKET)).collect()[
        0
    ]
    return [str(v) for v in row]


def timed_read(spark: SparkSession, table: Any, snapshot: int) -> dict[str, Any]:
    """One read of ``snapshot``: listing, DataFrame building, execution (seconds) and Spark jobs."""
    jobs = job_count(spark)
    t0 = time.perf_counter()
    metadata = table.metadata
    files = live_files(metadata, table.lake.catalog.io, snapshot)
    t1 = time.perf_counter()
    df = scan(spark, schema_of(metadata, snapshot), files)
    t2 = time.perf_counter()
    answer = aggregate(df)
    t3 = time.perf_counter()
    return {
        "list_s": t1 - t0,
        "build_s": t2 - t1,
        "exec_s": t3 - t2,
        "total_s": t3 - t0,
        "jobs": job_count(spark) - jobs,
        "data_files": len(files.data),
        "delete_files": len(files.deletes),
        "answer": answer,
    }


def time_reads(args: argparse.Namespace) -> None:
    work = Path(args.work)
    states = json.loads((work / STATES).read_text())
    spark = session(args.cores, args.driver_memory)
    results: list[dict[str, Any]] = []
    for kind, state in states["tables"].items():
        if args.kinds and kind not in args.kinds:
            continue
        table = rowops.Lakehouse(state["lake"], spark=spark).table(state["table"])
        for generation in args.generations:
            snapshot = state["snapshots"][generation]
            timed_read(spark, table, snapshot)  # warm-up: manifests cached, JIT
            reads = [timed_read(spark, table, snapshot) for _ in range(args.reps)]
            point = {"kind": kind, "generation": generation, "reads": reads}
            point.update(
                {
                    k: statistics.median(r[k] for r in reads)
                    for k in ("list_s", "build_s", "exec_s", "total_s")
                }
            )
            point.update({k: reads[0][k] for k in ("jobs", "data_files", "delete_files", "answer")})
            results.append(point)
            print(
                f"{kind:4} gen {generation:2}: total {point['total_s']:.2f}s = list {point['list_s']:.2f}"
                f" + build {point['build_s']:.2f} + exec {point['exec_s']:.2f}; {point['jobs']} jobs;"
                f" files {point['data_files']}/{point['delete_files']}; {point['answer']}",
                flush=True,
            )
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("build", "time"):
        p = sub.add_parser(name)
        p.add_argument("--work", required=True, help="directory of the lakes, batches and states.json")
        p.add_argument("--cores", type=int, default=2)
        p.add_argument("--driver-memory", default="4g")
        p.add_argument("--kinds", nargs="*", default=[], help="pos, eq, dv (v3), mix")
    build_p, time_p = sub.choices["build"], sub.choices["time"]
    build_p.add_argument("--data", required=True, help="TPC-DS root holding sf<N>/")
    build_p.add_argument("--sf", type=float, default=1)
    build_p.add_argument("--iterations", type=int, default=10)
    build_p.add_argument("--mix", nargs="*", default=["position-delete", "equality-delete"])
    time_p.add_argument("--generations", type=int, nargs="*", default=[0, 1, 10])
    time_p.add_argument("--reps", type=int, default=3)
    time_p.add_argument("--out", default="")
    args = parser.parse_args()
    if args.command == "build":
        args.kinds = args.kinds or ["pos", "eq"]
        build(args)
    else:
        time_reads(args)


if __name__ == "__main__":
    main()
