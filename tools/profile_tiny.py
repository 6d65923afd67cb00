"""Profile the fixed costs of one tiny MERGE per strategy: Spark jobs, Py4J round trips, time per phase.

The benchmark's tiny-table point (``tpcds/bench_cases.py`` phase ``rowops-tiny``): a 10-row upsert
into a 10,000-row table partitioned by ``bucket(16, ss_ticket_number)``, where fixed per-operation
costs decide. Jobs are counted by Spark job id before and after (``statusTracker``, as the benchmark
does), Py4J round trips by wrapping ``GatewayClient.send_command``, and phases by wrapping rowops'
functions for the duration of a call (inclusive times; phases missing from the rowops imported are
skipped, so the same script profiles an older checkout)::

    python -m tools.profile_tiny --data data/tpcds/cases-sf1/tiny --runs 3 --out /tmp/profile-tiny.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from py4j.java_gateway import GatewayClient
from pyspark.sql import SparkSession

import rowops
from rowops.exec.spark.session import read_conf
from tpcds.bench_common import build_session

KEYS = ["ss_ticket_number", "ss_item_sk"]
STRATEGIES = ("auto", "copy-on-write", "position-delete", "equality-delete")
PHASES = (
    ("rowops.run.planning", "checked_spec"),
    ("rowops.run.planning", "is_small"),
    ("rowops.run.planning", "evaluate_once"),
    ("rowops.run.planning", "live_files"),
    ("rowops.run.planning", "scan_source_keys"),
    ("rowops.run.planning", "measured_bytes"),
    ("rowops.run.row_level", "row_changes"),
    ("rowops.run.row_level", "summarize"),
    ("rowops.run.row_level", "_delta"),
    ("rowops.run.row_level", "commit_changes"),
    ("rowops.exec.checks.operation", "check_keys"),
    ("rowops.exec.writing.strategies", "rewrite_files"),
    ("rowops.exec.writing.strategies", "delete_positions"),
    ("rowops.exec.writing.strategies", "write_new_rows"),
    ("rowops.exec.writing.strategies", "write_equality_deletes"),
)


class Counters:
    """Spark jobs and Py4J round trips so far; time, jobs and round trips per wrapped phase."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.py4j = 0
        self.paused = False  # the profiler's own round trips are not counted
        self.phases: dict[str, dict[str, float]] = {}

    def jobs(self) -> int:
        self.paused = True
        try:
            ids = self.spark.sparkContext.statusTracker().getJobIdsForGroup(None)
        finally:
            self.paused = False
        return max(ids) + 1 if ids else 0

    def snapshot(self) -> tuple[float, int, int]:
        return time.perf_counter(), self.jobs(), self.py4j

    def add(self, name: str, start: tuple[float, int, int]) -> None:
        end = self.snapshot()
        entry = self.phases.setdefault(name, {"seconds": 0.0, "jobs": 0, "py4j": 0, "calls": 0})
        entry["seconds"] += end[0] - start[0]
        entry["jobs"] += end[1] - start[1]
        entry["py4j"] += end[2] - start[2]
        entry["calls"] += 1


@contextmanager
def instrumented(counters: Counters) -> Iterator[None]:
    """Count Py4J round trips and time the phases while the block runs."""
    saved: list[tuple[object, str, object]] = []
    original_send = GatewayClient.send_command

    def send(client: GatewayClient, command: str, *args: Any, **kwargs: Any) -> Any:
        counters.py4j += 0 if counters.paused else 1
        return original_send(client, command, *args, **kwargs)

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = counters.snapshot()
            try:
                return fn(*args, **kwargs)
            finally:
                counters.add(name, start)

        return timed

    GatewayClient.send_command = send  # type: ignore[method-assign]
    for module_name, attr in PHASES:
        module = importlib.import_module(module_name)
        if hasattr(module, attr):
            saved.append((module, attr, getattr(module, attr)))
            setattr(module, attr, wrap(attr, getattr(module, attr)))
    try:
        yield
    finally:
        GatewayClient.send_command = original_send  # type: ignore[method-assign]
        for owner, attr, fn in reversed(saved):
            setattr(owner, attr, fn)


def session(cores: int) -> SparkSession:
    conf = read_conf(Path("conf/spark-defaults.conf"))
    conf.update({"spark.master": f"local[{cores}]", "spark.ui.enabled": "false"})
    return build_session(conf)


def profile(spark: SparkSession, data: Path, runs: int) -> dict[str, Any]:
    """``runs`` profiled MERGEs per strategy (after one warm-up each), each from the base snapshot."""
    root = Path(tempfile.mkdtemp(prefix="rowops-profile-tiny-"))
    try:
        lake = rowops.Lakehouse(str(root / "lake"), spark=spark)
        table = lake.create_table(
            "db.tiny",
            spark.read.parquet(str(data / "table")),
            partition_by=["bucket(16, ss_ticket_number)"],
            identifier=KEYS,
        )
        base = table.current_snapshot_id
        assert base is not None
        batch = spark.read.parquet(str(data / "batch-seed-7"))
        report: dict[str, Any] = {}
        for strategy in STRATEGIES:
            measured = []
            for run in range(runs + 1):
                table.rollback_to(base)
                counters = Counters(spark)
                start = counters.snapshot()
                with instrumented(counters):
                    result = rowops.merge(batch, table, on=KEYS, strategy=strategy)
                end = counters.snapshot()
                if run == 0:
                    continue  # warm-up
                measured.append(
                    {
                        "seconds": end[0] - start[0],
                        "jobs": end[1] - start[1],
                        "py4j": end[2] - start[2],
                        "strategy": result.strategy,
                        "phases": counters.phases,
                    }
                )
            report[strategy] = {
                "median_s": statistics.median(m["seconds"] for m in measured),
                "jobs": [m["jobs"] for m in measured],
                "py4j": [m["py4j"] for m in measured],
                "chose": measured[-1]["strategy"],
                "phases_last_run": measured[-1]["phases"],
            }
        table.rollback_to(base)
        return report
    finally:
        shutil.rmtree(root, ignore_errors=True)


def print_report(report: dict[str, Any]) -> None:
    for strategy, r in report.items():
        print(
            f"{strategy:16s} median {r['median_s']:.2f}s  jobs {r['jobs']}  py4j {r['py4j']}  chose {r['chose']}"
        )
        for name, p in r["phases_last_run"].items():
            print(
                f"    {name:24s} {p['seconds']:6.3f}s  jobs {p['jobs']:3d}  py4j {p['py4j']:4d}  x{p['calls']}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", default="data/tpcds/cases-sf1/tiny", help="the tiny table and its batch")
    parser.add_argument("--runs", type=int, default=3, help="profiled MERGEs per strategy")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--out", default=None, help="write the report as JSON here")
    args = parser.parse_args()
    spark = session(args.cores)
    try:
        report = profile(spark, Path(args.data), args.runs)
    finally:
        spark.stop()
    print_report(report)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
