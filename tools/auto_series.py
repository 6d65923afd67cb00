"""Per-MERGE series of rowops strategies on the paper's Cases 1-3 (rowops only, no Iceberg).

What the cases benchmark (``tpcds.bench_cases``) reports as means, this prints per MERGE: write
seconds, the encoding ``auto`` chose (and its cost numbers), the live data / delete files, and the
read query's time after each MERGE. It is the harness behind the cost model's decisions
(docs/ARCHITECTURE.md, "Planning: cost-based `auto`"; tpcds/results/HISTORY.md); run from the repository root:

    python -m tools.auto_series --source data/tpcds/sf1 --work /tmp/auto-run \\
        --cases 1,2 --strategies auto,equality-delete --out /tmp/auto-run/series.json

Each (case, strategy) series starts from the table's first snapshot (``rollback_to``). The batches
are ``tpcds.cases.case_batch`` of seeds 1..N, materialized once under ``<work>/batches``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

import rowops
from rowops.table import Table
from tpcds.batches import KEY_COLUMNS, TICKET
from tpcds.bench_common import build_session, jvm_gc, scan_aggregate, spark_conf
from tpcds.cases import case_batch
from tpcds.cases_common import CasesConfig

TABLE = "db.store_sales"


def _config(args: argparse.Namespace) -> CasesConfig:
    return CasesConfig(
        sf=1, quick=False, runs=1, warmup=1, iterations=args.iterations, degradation_strategies=[],
        cores=args.cores, driver_memory="4g", op_timeout=1800.0, source_dir=args.source,
        batch_root=str(Path(args.work) / "batches"), work_dir=args.work,
    )  # fmt: skip


def _batches(spark: SparkSession, cfg: CasesConfig, case: int, rows: int) -> list[Any]:
    """The case's batches of seeds 1..iterations, written once as Parquet and read back."""
    out = []
    for seed in cfg.iteration_seeds:
        path = cfg.case_batch_dir(case, seed)
        if not (path / "_SUCCESS").exists():
            source = spark.read.parquet(cfg.source_dir)
            case_batch(case, source, seed, rows).coalesce(cfg.cores).write.mode("overwrite").parquet(
                str(path)
            )
        out.append(spark.read.parquet(str(path)))
    return out


def _table(lake: rowops.Lakehouse, cfg: CasesConfig) -> tuple[Table, int]:
    if TABLE in lake.catalog.log.latest():
        table = lake.table(TABLE)
        return table, int(table.snapshots()[0]["snapshot_id"])
    source = lake.spark.read.parquet(cfg.source_dir)
    table = lake.create_table(
        TABLE, source, partition_by=[f"bucket(16, {TICKET})"], identifier=list(KEY_COLUMNS)
    )
    assert table.current_snapshot_id is not None
    return table, table.current_snapshot_id


def _costs(explain: str) -> dict[str, int]:
    """The cost lines of a plan report (``plan/explain.py``), in MiB-equivalents."""
    found = re.findall(r"^  (copy-on-write|position-delete|equality-delete) +([\d,]+)( \*)?$", explain, re.M)
    return {name: int(value.replace(",", "")) >> 20 for name, value, _ in found}


def _read(table: Table, times: int = 3) -> float:
    scan_aggregate(table.to_df)
    return statistics.median(scan_aggregate(table.to_df)[0] for _ in range(times))


def run_series(
    spark: SparkSession, table: Table, base: int, batches: list[Any], strategy: str
) -> dict[str, Any]:
    """One series from the base snapshot: each MERGE, then the read query."""
    table.rollback_to(base)
    series: dict[str, Any] = {"read_before_s": _read(table), "merges": []}
    for i, batch in enumerate(batches, 1):
        jvm_gc(spark)
        started = time.perf_counter()
        result = rowops.merge(batch, table, on=list(KEY_COLUMNS), strategy=strategy)
        write_s = time.perf_counter() - started
        files = table.files()
        entry = {
            "i": i,
            "write_s": round(write_s, 2),
            "strategy": result.strategy,
            "read_s": round(_read(table), 2),
            "data_files": len(files.data),
            "delete_files": len(files.deletes),
            "costs_mib": _costs(result.explain),
        }
        series["merges"].append(entry)
        print(f"  #{i} {strategy}: {entry}", flush=True)
    table.rollback_to(base)
    return series


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", required=True, help="store_sales Parquet (tpcds.datagen output)")
    parser.add_argument("--work", required=True, help="lake and batches go here")
    parser.add_argument("--cases", default="1,2")
    parser.add_argument("--strategies", default="auto,equality-delete")
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    cfg = _config(args)
    spark = build_session(spark_conf(cfg, "auto-series"))
    lake = rowops.Lakehouse(str(Path(args.work) / "lake"), spark=spark)
    table, base = _table(lake, cfg)
    rows = sum(f.record_count for f in table.files().data)
    report: dict[str, Any] = {}
    for case in [int(c) for c in args.cases.split(",")]:
        batches = _batches(spark, cfg, case, rows)
        for strategy in args.strategies.split(","):
            print(f"case {case} {strategy}", flush=True)
            report[f"case{case} {strategy}"] = run_series(spark, table, base, batches, strategy)
            Path(args.out).write_text(json.dumps(report, indent=1))
    spark.stop()


if __name__ == "__main__":
    main()
