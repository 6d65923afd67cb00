"""The rowops phases of the cases benchmark: ``cases-prepare`` (the batches of every case and the tiny
table, materialized once as Parquet), ``rowops-case<N>`` (the consecutive MERGEs of one case per rowops
configuration) and ``rowops-tiny`` (the 10-row upsert into a 10,000-row table).

Runtime file filtering off (Case 4) sets the table property ``rowops.runtime-filter.enabled=false``
(every file is then scanned) for the duration of the series.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tpcds.bench_common import READS_PER_POINT, Recorder, jvm_gc, log, scan_aggregate, timed_reads
from tpcds.bench_rowops import (
    describe_run,
    ensure_rowops_table,
    rowops_session,
    timed_rowops_merge,
)
from tpcds.cases import NUM_BUCKETS, Series, case_batch, choose_file_buckets, tiny_batch, tiny_table
from tpcds.cases_common import (
    TINY_SEED,
    TINY_TABLE,
    CasesConfig,
    new_series_run,
    read_marker,
    store_run,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from rowops.table import Table

# The tiny phase's warm-up; a case warms up in its first series' mode, as the Iceberg phase does
# (``cases_iceberg.py``): the first timed MERGE then runs warm code in both engines alike.
WARMUP_STRATEGY = "position-delete"


def _materialize(
    spark: SparkSession, batch: DataFrame, target: Path, meta: dict[str, Any], cores: int
) -> dict[str, Any]:
    """Write ``batch`` to ``target`` (temp dir + rename) with a ``_BATCH.json`` marker; reuse a match.

    The rows are dealt round-robin into ``cores`` files of about equal size, so that reading the batch
    uses every core. (Coalescing the batch's partitions instead wrote Case 3's batch at SF 10 as one
    97 MB file with a single row group next to a 0.3 MB one: a single task read it, in rowops'
    pre-scan and in its write, while Iceberg's MERGE reads its own staged copy of the batch, a table
    of 16 bucket partitions.)
    """
    meta = {**meta, "layout": f"round-robin {cores}"}
    old = read_marker(target / "_BATCH.json")
    if old is not None and all(old.get(k) == v for k, v in meta.items()):
        return old
    started = time.perf_counter()
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    batch.repartition(cores).write.parquet(str(tmp))
    rows = spark.read.parquet(str(tmp)).count()
    done = {**meta, "rows": rows, "seconds": time.perf_counter() - started}
    (tmp / "_BATCH.json").write_text(json.dumps(done))
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp.replace(target)
    return done


def files_per_bucket(table: Table) -> dict[int, int]:
    """Data files of the table's current snapshot per ``bucket(16, ss_ticket_number)`` value."""
    counts: dict[int, int] = dict.fromkeys(range(NUM_BUCKETS), 0)
    for f in table.files().data:
        bucket = int(str(f.partition[0]))
        counts[bucket] = counts.get(bucket, 0) + 1
    return counts


def worker_prepare_cases(cfg: CasesConfig, rec: Recorder) -> None:
    """The rowops table (created here when missing), every case's batches and the tiny table."""
    import rowops

    tag = "cases-prepare"
    spark = rowops_session(cfg, "cases-prepare")
    source = spark.read.parquet(cfg.source_dir)
    table, _base = ensure_rowops_table(rowops.Lakehouse(cfg.lake_dir, spark=spark), cfg, rec, tag)
    rows = source.count()
    per_bucket = files_per_bucket(table)
    case4 = choose_file_buckets(per_bucket)
    rec.set("table", {"rows": rows, "files_per_bucket": per_bucket, "case4_buckets": case4})
    log(tag, f"{rows} rows; files per bucket {per_bucket}; Case 4 buckets {case4}")
    batches: dict[str, Any] = {}
    for case in cfg.cases:
        for seed in cfg.iteration_seeds:
            meta = {"sf": cfg.sf, "case": case, "seed": seed, "case4_buckets": case4 if case == 4 else None}
            batch = case_batch(case, source, seed, rows, case4)
            done = _materialize(spark, batch, cfg.case_batch_dir(case, seed), meta, cfg.cores)
            batches[f"case{case} seed{seed}"] = done
            rec.set("batches", batches)
            log(tag, f"case {case} seed {seed}: {done['rows']} rows")
    if cfg.tiny_runs:
        tiny = _materialize(spark, tiny_table(source), cfg.tiny_dir, {"sf": cfg.sf, "tiny": True}, 1)
        batch = tiny_batch(spark.read.parquet(str(cfg.tiny_dir)), seed=TINY_SEED)
        small = _materialize(spark, batch, cfg.tiny_batch_dir, {"sf": cfg.sf, "seed": TINY_SEED}, 1)
        rec.set("tiny", {"table": tiny, "batch": small})


@contextlib.contextmanager
def runtime_filter(table: Table, enabled: bool) -> Iterator[None]:
    """rowops' runtime file pruning on (``enabled``) or off (table property
    ``rowops.runtime-filter.enabled=false``) for the duration."""
    if enabled:
        yield
        return
    table.set_properties(**{"rowops.runtime-filter.enabled": "false"})
    try:
        yield
    finally:
        table.set_properties(**{"rowops.runtime-filter.enabled": "true"})


def live_paths(table: Table) -> set[str]:
    files = table.files()
    return {f.path for f in (*files.data, *files.deletes)}


def added_bytes(table: Table, before: set[str]) -> int:
    """Bytes of the data and delete files the last commit added: the live files not live ``before``.

    rowops' snapshot summaries have no ``added-files-size`` (Iceberg's do), so this reads the sizes from
    the live file list instead.
    """
    files = table.files()
    return sum(f.size for f in (*files.data, *files.deletes) if f.path not in before)


def _warmup(
    spark: SparkSession,
    table: Table,
    base: int,
    batch: DataFrame,
    cfg: CasesConfig,
    tag: str,
    strategy: str = WARMUP_STRATEGY,
) -> None:
    for _ in range(cfg.warmup):
        table.rollback_to(base)
        record = timed_rowops_merge(spark, table, batch, strategy, cfg, tag)
        log(tag, f"warm-up ({strategy}): {describe_run(record)}")
    table.rollback_to(base)


def run_series(
    spark: SparkSession,
    table: Table,
    base: int,
    batches: dict[int, DataFrame],
    series: Series,
    cfg: CasesConfig,
    tag: str,
) -> dict[str, Any]:
    """One run of a series: restore the base, read, then the consecutive MERGEs with a read after each."""
    table.rollback_to(base)
    jvm_gc(spark)
    reads, answer = timed_reads(lambda: scan_aggregate(table.to_df), READS_PER_POINT)
    run = new_series_run(reads, answer)
    with runtime_filter(table, series.runtime_filter):
        for i, seed in enumerate(cfg.iteration_seeds, 1):
            before = live_paths(table)
            record = timed_rowops_merge(spark, table, batches[seed], series.strategy, cfg, tag)
            record.update(iteration=i, seed=seed)
            if record.get("ok"):
                record["bytes_written"] = added_bytes(table, before)
            run["iterations"].append(record)
            log(tag, f"{series.name} #{i}: {describe_run(record)}")
            if not record.get("ok"):
                break
    return run


def worker_rowops_case(case: int) -> Any:
    """The phase function of ``rowops-case<case>``."""

    def worker(cfg: CasesConfig, rec: Recorder) -> None:
        import rowops

        tag = f"rowops-case{case}"
        spark = rowops_session(cfg, tag)
        lake = rowops.Lakehouse(cfg.lake_dir, spark=spark)
        series_list = cfg.series_of(case, "rowops")
        versions = sorted({s.format_version for s in series_list}) or [2]
        tables = {v: ensure_rowops_table(lake, cfg, rec, tag, v) for v in versions}
        batches = {s: spark.read.parquet(str(cfg.case_batch_dir(case, s))) for s in cfg.iteration_seeds}
        rec.set("batch_rows", {s: b.count() for s, b in batches.items()})
        for version, (table, base) in tables.items():  # warm-up: per table, in its first series' mode
            first = next((s.strategy for s in series_list if s.format_version == version), WARMUP_STRATEGY)
            _warmup(spark, table, base, batches[cfg.iteration_seeds[0]], cfg, tag, first)
        for index in range(cfg.runs):
            for series in series_list:
                table, base = tables[series.format_version]
                run = run_series(spark, table, base, batches, series, cfg, tag)
                store_run(rec, series, run, index)
        for table, base in tables.values():
            table.rollback_to(base)

    return worker


def worker_rowops_tiny(cfg: CasesConfig, rec: Recorder) -> None:
    """The 10-row upsert into the 10,000-row table: ``tiny_runs`` MERGEs per strategy from the base."""
    import rowops

    tag = "rowops-tiny"
    spark = rowops_session(cfg, tag)
    lake = rowops.Lakehouse(cfg.lake_dir, spark=spark)
    tiny_cfg = CasesConfig(**{**cfg.__dict__, "source_dir": str(cfg.tiny_dir)})
    table, base = _tiny_table(lake, tiny_cfg, rec, tag)
    batch = spark.read.parquet(str(cfg.tiny_batch_dir))
    _warmup(spark, table, base, batch, cfg, tag)
    results: dict[str, Any] = {}
    for rep in range(cfg.tiny_runs):
        for strategy in ("auto", "copy-on-write", "position-delete", "equality-delete"):
            table.rollback_to(base)
            record = timed_rowops_merge(spark, table, batch, strategy, cfg, tag)
            record.update(rep=rep)
            results.setdefault(f"rowops {strategy}", []).append(record)
            rec.set("runs", results)
            log(tag, f"{strategy} #{rep + 1}: {describe_run(record)}")
    table.rollback_to(base)


def _tiny_table(lake: Any, cfg: CasesConfig, rec: Recorder, tag: str) -> tuple[Table, int]:
    """The tiny table (``TINY_TABLE``), created from the tiny Parquet when missing, at its base."""
    from tpcds.batches import KEY_COLUMNS, TICKET

    if TINY_TABLE in lake.catalog.log.latest():
        table = lake.table(TINY_TABLE)
        base = int(table.snapshots()[0]["snapshot_id"])
        table.rollback_to(base)
        return table, base
    table = lake.create_table(
        TINY_TABLE,
        lake.spark.read.parquet(cfg.source_dir),
        partition_by=[f"bucket(16, {TICKET})"],
        identifier=list(KEY_COLUMNS),
    )
    rec.set("create", {"data_files": len(table.files().data)})
    base = table.current_snapshot_id
    assert base is not None
    return table, base
