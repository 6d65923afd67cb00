"""The Iceberg phases of the cases benchmark (Iceberg 1.10.2's own Spark runtime, separate JVM):
``iceberg-case<N>`` (the consecutive MERGEs of one case per Iceberg mode) and ``iceberg-tiny``.

Tables, catalog, MERGE statement, storage-partitioned-join settings and the restore between runs are
those of ``tpcds.iceberg_peer``: ``bench.db.store_sales_v2`` (copy-on-write or merge-on-read, position
deletes) and ``bench.db.store_sales_v3`` (format v3 + merge-on-read: deletion vectors), each created
from the source Parquet when missing. Every batch is staged as an Iceberg table partitioned like the
target (untimed) so that the join can be storage-partitioned. Runtime filtering off (Case 4) is Spark's
``spark.sql.optimizer.runtime.rowLevelOperationGroupFilter.enabled=false`` for the series.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tpcds.bench_common import READS_PER_POINT, Recorder, build_session, jvm_gc, log, timed_reads
from tpcds.cases import Series
from tpcds.cases_common import TINY_SEED, CasesConfig, new_series_run, store_run
from tpcds.iceberg_peer import (
    CATALOG,
    MODE_TABLE,
    TABLES,
    base_snapshot,
    create_table,
    describe,
    file_counts,
    iceberg_conf,
    plan_of,
    restore,
    set_mode,
    table_reader,
    timed_merge,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

GROUP_FILTER = "spark.sql.optimizer.runtime.rowLevelOperationGroupFilter.enabled"
TINY_ICEBERG = f"{CATALOG}.db.store_sales_tiny_v2"


def _ensure_table(
    spark: SparkSession, table: str, parquet_dir: str, version: str, rec: Recorder, tag: str
) -> int:
    """Create ``table`` from ``parquet_dir`` when missing; restore and return its base snapshot."""
    if not spark.catalog.tableExists(table):
        props = {"format-version": version, "write.merge.mode": "merge-on-read"}
        seconds = create_table(spark, table, parquet_dir, props)
        created = {"seconds": seconds, **file_counts(spark, table)}
        rec.append("create", {"table": table, **created})
        log(tag, f"created {table} in {seconds:.1f}s: {created}")
    base = base_snapshot(spark, table)
    restore(spark, table, base)
    return base


def _stage(spark: SparkSession, name: str, parquet_dir: str) -> str:
    if not spark.catalog.tableExists(name):
        create_table(spark, name, parquet_dir, {"format-version": "2"})
    return name


def run_series(
    spark: SparkSession,
    table: str,
    base: int,
    sources: dict[int, str],
    series: Series,
    cfg: CasesConfig,
    tag: str,
) -> dict[str, Any]:
    """One run of a series: restore the base, read, then the consecutive MERGEs with a read after each."""
    set_mode(spark, table, series.mode)
    restore(spark, table, base)
    jvm_gc(spark)
    reads, answer = timed_reads(table_reader(spark, table), READS_PER_POINT)
    run = new_series_run(reads, answer)
    spark.conf.set(GROUP_FILTER, str(series.runtime_filter).lower())
    try:
        for i, seed in enumerate(cfg.iteration_seeds, 1):
            record = timed_merge(spark, table, sources[seed], cfg, tag, f"{series.name} #{i}")
            record.update(iteration=i, seed=seed)
            if record.get("ok"):
                record["bytes_written"] = int(record["snapshot_summary"].get("added-files-size", 0))
            run["iterations"].append(record)
            log(tag, f"{series.name} #{i}: {describe(record)}")
            if not record.get("ok"):
                break
    finally:
        spark.conf.set(GROUP_FILTER, "true")
    return run


def worker_iceberg_case(case: int) -> Any:
    """The phase function of ``iceberg-case<case>``."""

    def worker(cfg: CasesConfig, rec: Recorder) -> None:
        tag = f"iceberg-case{case}"
        series_list = cfg.series_of(case, "iceberg")
        spark = build_session(iceberg_conf(cfg, tag))
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.db")
        rec.set("iceberg_runtime", [j.rsplit("/", 1)[-1] for j in cfg.jars])
        versions = sorted({MODE_TABLE[s.mode] for s in series_list})
        bases = {v: _ensure_table(spark, TABLES[v], cfg.source_dir, v[1:], rec, tag) for v in versions}
        sources = {
            s: _stage(spark, f"{CATALOG}.db.case{case}_seed{s}", str(cfg.case_batch_dir(case, s)))
            for s in cfg.iteration_seeds
        }
        first = sources[cfg.iteration_seeds[0]]
        plans = {}
        for series in series_list:
            table = TABLES[MODE_TABLE[series.mode]]
            set_mode(spark, table, series.mode)
            plans[series.name] = {k: v for k, v in plan_of(spark, table, first).items() if k != "plan"}
        rec.set("plans", plans)
        if series_list:  # warm-up: one untimed MERGE in the first mode
            table = TABLES[MODE_TABLE[series_list[0].mode]]
            for _ in range(cfg.warmup):
                set_mode(spark, table, series_list[0].mode)
                log(tag, f"warm-up: {describe(timed_merge(spark, table, first, cfg, tag, 'warm-up'))}")
                restore(spark, table, bases[MODE_TABLE[series_list[0].mode]])
        for index in range(cfg.runs):
            for series in series_list:
                version = MODE_TABLE[series.mode]
                run = run_series(spark, TABLES[version], bases[version], sources, series, cfg, tag)
                store_run(rec, series, run, index)
        for version, table in TABLES.items():
            if version in bases:
                restore(spark, table, bases[version])

    return worker


def worker_iceberg_tiny(cfg: CasesConfig, rec: Recorder) -> None:
    """The 10-row upsert into the 10,000-row table: ``tiny_runs`` MERGEs per mode from the base."""
    tag = "iceberg-tiny"
    spark = build_session(iceberg_conf(cfg, tag))
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.db")
    base = _ensure_table(spark, TINY_ICEBERG, str(cfg.tiny_dir), "2", rec, tag)
    source = _stage(spark, f"{CATALOG}.db.tiny_seed{TINY_SEED}", str(cfg.tiny_batch_dir))
    for _ in range(cfg.warmup):
        log(tag, f"warm-up: {describe(timed_merge(spark, TINY_ICEBERG, source, cfg, tag, 'warm-up'))}")
        restore(spark, TINY_ICEBERG, base)
    results: dict[str, Any] = {}
    for rep in range(cfg.tiny_runs):
        for mode in ("copy-on-write", "merge-on-read"):
            set_mode(spark, TINY_ICEBERG, mode)
            restore(spark, TINY_ICEBERG, base)
            record = timed_merge(spark, TINY_ICEBERG, source, cfg, tag, mode)
            record.update(rep=rep)
            results.setdefault(f"iceberg {mode}", []).append(record)
            rec.set("runs", results)
            log(tag, f"{mode} #{rep + 1}: {describe(record)}")
    restore(spark, TINY_ICEBERG, base)
