"""The Iceberg side of the benchmark: Iceberg's own Spark runtime (1.10.2 on Spark 3.5) in its own JVM.

rowops' process owns a plain SparkSession without jars and one process cannot host two SparkContexts,
so this module runs as a separate phase subprocess of ``tpcds.bench``::

    python -m tpcds.iceberg_peer --phase writes|degradation --config <work>/config.json

It starts pyspark with ``spark.jars = iceberg_jars()``, Iceberg's SQL extensions and a Hadoop catalog
``bench`` over ``<work>/iceberg-warehouse``, with the same ``local[N]``, driver memory and Spark SQL
settings as rowops' session plus storage-partitioned-join settings. Tables (same schema, identifier,
``bucket(16, ss_ticket_number)`` partitioning, loaded from the same Parquet files as rowops):

* ``bench.db.store_sales_v2``: format v2; ``write.merge.mode`` is switched between copy-on-write and
  merge-on-read (position deletes, one delete file per data file: Iceberg 1.10's default granularity);
* ``bench.db.store_sales_v3``: format v3, merge-on-read, i.e. deletion vectors;
* ``bench.db.batch_seed<N>``: each upsert batch, partitioned like the target so that the MERGE join is a
  storage-partitioned join (no shuffle of the target), staged before any timing.

Each measured MERGE is::

    MERGE INTO t USING s ON t.ss_ticket_number = s.ss_ticket_number AND t.ss_item_sk = s.ss_item_sk
    WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *

and the table is restored between runs with ``CALL bench.system.set_current_snapshot`` (the base
snapshot is always an ancestor, so this is ``rollback_to_snapshot`` that also accepts the current one).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tpcds.batches import ITEM, KEY_COLUMNS, TICKET
from tpcds.bench_common import (
    ICEBERG_DEGRADATION_MODES,
    ICEBERG_MODES,
    MAIN_SEED,
    READS_PER_POINT,
    BenchConfig,
    Recorder,
    build_session,
    jvm_gc,
    log,
    run_worker,
    scan_aggregate,
    spark_conf,
    timed_reads,
    timed_write,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CATALOG = "bench"
TABLES = {"v2": f"{CATALOG}.db.store_sales_v2", "v3": f"{CATALOG}.db.store_sales_v3"}
WARMUP_MODE = "merge-on-read"
MODE_TABLE = {"copy-on-write": "v2", "merge-on-read": "v2", "deletion-vectors": "v3"}
MODE_PROPERTY = {
    "copy-on-write": "copy-on-write",
    "merge-on-read": "merge-on-read",
    "deletion-vectors": "merge-on-read",
}
# Storage-partitioned join: both sides report their bucket grouping and Spark joins bucket by bucket.
SPJ_CONF = {
    "spark.sql.sources.v2.bucketing.enabled": "true",
    "spark.sql.sources.v2.bucketing.pushPartValues.enabled": "true",
    "spark.sql.requireAllClusterKeysForCoPartition": "false",
    "spark.sql.iceberg.planning.preserve-data-grouping": "true",
    "spark.sql.sources.v2.bucketing.partiallyClusteredDistribution.enabled": "true",
}


def iceberg_conf(cfg: BenchConfig, app: str) -> dict[str, str]:
    """rowops' shared settings plus the Iceberg runtime, its extensions, the catalog and SPJ."""
    return {
        **spark_conf(cfg, app),
        "spark.jars": ",".join(cfg.jars),
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        f"spark.sql.catalog.{CATALOG}": "org.apache.iceberg.spark.SparkCatalog",
        f"spark.sql.catalog.{CATALOG}.type": "hadoop",
        f"spark.sql.catalog.{CATALOG}.warehouse": str(cfg.warehouse_dir),
        # every statement reads the newest metadata, as rowops does (no stale table after a rollback)
        f"spark.sql.catalog.{CATALOG}.cache-enabled": "false",
        **SPJ_CONF,
    }


def merge_sql(table: str, source: str) -> str:
    return (
        f"MERGE INTO {table} t USING {source} s "
        f"ON t.{TICKET} = s.{TICKET} AND t.{ITEM} = s.{ITEM} "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )


def _exists(spark: SparkSession, table: str) -> bool:
    return bool(spark.catalog.tableExists(table))


def _ddl_columns(spark: SparkSession, parquet_dir: str) -> str:
    """Column definitions of the source Parquet files, with the key columns NOT NULL (identifier)."""
    schema = spark.read.parquet(parquet_dir).schema
    return ", ".join(
        f"{f.name} {f.dataType.simpleString()}" + (" NOT NULL" if f.name in KEY_COLUMNS else "")
        for f in schema.fields
    )


def create_table(spark: SparkSession, table: str, parquet_dir: str, properties: dict[str, str]) -> float:
    """CREATE the table partitioned by bucket(16, ticket) and INSERT the Parquet rows; returns seconds."""
    props = ", ".join(f"'{k}'='{v}'" for k, v in properties.items())
    started = time.perf_counter()
    spark.sql(
        f"CREATE TABLE {table} ({_ddl_columns(spark, parquet_dir)}) USING iceberg "
        f"PARTITIONED BY (bucket(16, {TICKET}))" + (f" TBLPROPERTIES ({props})" if props else "")
    )
    spark.sql(f"INSERT INTO {table} SELECT * FROM parquet.`{parquet_dir}`")
    seconds = time.perf_counter() - started
    spark.sql(f"ALTER TABLE {table} SET IDENTIFIER FIELDS {', '.join(KEY_COLUMNS)}")
    return seconds


def base_snapshot(spark: SparkSession, table: str) -> int:
    row = spark.sql(f"SELECT snapshot_id FROM {table}.snapshots ORDER BY committed_at LIMIT 1").collect()
    return int(row[0][0])


def current_snapshot(spark: SparkSession, table: str) -> int | None:
    rows = spark.sql(f"SELECT snapshot_id FROM {table}.refs WHERE name = 'main'").collect()
    return int(rows[0][0]) if rows else None


def restore(spark: SparkSession, table: str, snapshot_id: int) -> None:
    name = table.removeprefix(f"{CATALOG}.")
    spark.sql(f"CALL {CATALOG}.system.set_current_snapshot(table => '{name}', snapshot_id => {snapshot_id})")


def set_mode(spark: SparkSession, table: str, mode: str) -> None:
    value = MODE_PROPERTY[mode]
    spark.sql(
        f"ALTER TABLE {table} SET TBLPROPERTIES ('write.merge.mode'='{value}', "
        f"'write.update.mode'='{value}', 'write.delete.mode'='{value}')"
    )


def file_counts(spark: SparkSession, table: str) -> dict[str, Any]:
    """Live data / delete files of the current snapshot (content 0 data, 1 position deletes or DVs)."""
    counts: dict[str, Any] = {}
    for row in spark.sql(
        f"SELECT content, file_format, count(*) AS n, sum(file_size_in_bytes) AS bytes FROM {table}.files "
        "GROUP BY content, file_format"
    ).collect():
        kind = {0: "data", 1: "position_delete", 2: "equality_delete"}.get(int(row["content"]), "other")
        fmt = str(row["file_format"]).lower()
        counts[f"{kind}_files_{fmt}"] = int(row["n"])
        counts[f"{kind}_bytes_{fmt}"] = int(row["bytes"] or 0)
    return counts


def snapshot_summary(spark: SparkSession, table: str) -> dict[str, str]:
    snap = current_snapshot(spark, table)
    rows = spark.sql(f"SELECT summary FROM {table}.snapshots WHERE snapshot_id = {snap}").collect()
    summary = dict(rows[0][0]) if rows else {}
    keep = ("added", "deleted", "removed", "changed-partition-count", "total-")
    return {k: v for k, v in summary.items() if k.startswith(keep)}


def table_reader(spark: SparkSession, table: str) -> Callable[[], tuple[float, list[str]]]:
    """The read query on ``table`` as a function (for ``timed_reads``)."""
    return lambda: scan_aggregate(lambda: spark.table(table))


def _depth(line: str) -> int:
    """Tree depth of a line of Spark's plan text (position of its first character after the tree art)."""
    return len(line) - len(line.lstrip(" :|+-"))


def plan_of(spark: SparkSession, table: str, source: str) -> dict[str, Any]:
    """The physical plan of the MERGE and whether its join is storage-partitioned: no Exchange between
    the join and the two scans (runtime-filter subqueries, which have their own shuffles, are skipped)."""
    text = "\n".join(r[0] for r in spark.sql("EXPLAIN " + merge_sql(table, source)).collect())
    lines = text.splitlines()
    join_at = next((i for i, ln in enumerate(lines) if "Join" in ln and "Subquery" not in ln), None)
    shuffles = []
    skip_below: int | None = None
    for line in lines[join_at + 1 :] if join_at is not None else []:
        depth = _depth(line)
        if skip_below is not None and depth > skip_below:
            continue
        skip_below = None
        if "Subquery" in line:
            skip_below = depth
        elif "Exchange" in line and "BroadcastExchange" not in line:
            shuffles.append(line.strip()[:160])
    return {
        "join": lines[join_at].strip()[:200] if join_at is not None else None,
        "shuffles_below_join": shuffles,
        "storage_partitioned_join": join_at is not None and not shuffles,
        "plan": text[:8000],
    }


def timed_merge(
    spark: SparkSession, table: str, source: str, cfg: BenchConfig, tag: str, what: str
) -> dict[str, Any]:
    """One MERGE (the caller restores the table first) followed by the read query."""
    record: dict[str, Any] = {}
    merged = timed_write(
        spark, cfg, tag, "iceberg", what, lambda: spark.sql(merge_sql(table, source)), record
    )
    if merged is None:
        return record
    record["read_s"], record["answer"] = scan_aggregate(lambda: spark.table(table))
    record["snapshot_summary"] = snapshot_summary(spark, table)
    record["files_after"] = file_counts(spark, table)
    record["ok"] = True
    return record


def describe(record: dict[str, Any]) -> str:
    if not record.get("ok"):
        return f"FAILED after {record.get('write_s', 0):.1f}s"
    s = record["snapshot_summary"]
    return (
        f"write {record['write_s']:.2f}s ({record['spark_jobs']} jobs), read {record['read_s']:.2f}s -> "
        f"+{s.get('added-data-files', 0)} data -{s.get('deleted-data-files', 0)} data "
        f"+{s.get('added-delete-files', 0)} deletes (dvs {s.get('added-dvs', 0)}, "
        f"pos {s.get('added-position-deletes', 0)})"
    )


class Peer:
    """The Iceberg session with its tables and staged batches."""

    def __init__(self, cfg: BenchConfig, rec: Recorder, tag: str, seeds: Sequence[int]) -> None:
        self.cfg, self.rec, self.tag = cfg, rec, tag
        self.spark = build_session(iceberg_conf(cfg, f"bench-iceberg-{tag}"))
        self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.db")
        rec.set("iceberg_runtime", [Path(j).name for j in cfg.jars])
        rec.set("spark_conf", iceberg_conf(cfg, f"bench-iceberg-{tag}"))
        created: dict[str, Any] = {}
        for version, table in TABLES.items():
            if _exists(self.spark, table):
                continue
            props = {"format-version": version.removeprefix("v"), "write.merge.mode": "merge-on-read"}
            seconds = create_table(self.spark, table, cfg.source_dir, props)
            created[version] = {"seconds": seconds, **file_counts(self.spark, table)}
            log(tag, f"created {table} in {seconds:.1f}s: {created[version]}")
        if created:
            rec.set("create", created)
        self.base = {v: base_snapshot(self.spark, t) for v, t in TABLES.items()}
        for v, t in TABLES.items():
            restore(self.spark, t, self.base[v])
        for seed in seeds:
            if not _exists(self.spark, self.batch(seed)):
                create_table(self.spark, self.batch(seed), str(cfg.batch_dir(seed)), {"format-version": "2"})
        log(tag, f"batch tables staged for seeds {list(seeds)}")

    def warmup(self, source: str) -> None:
        """Untimed MERGEs so that JIT and file caches are warm before anything is timed."""
        for i in range(self.cfg.warmup):
            table = self.prepare_mode(WARMUP_MODE)
            record = timed_merge(self.spark, table, source, self.cfg, self.tag, "warm-up")
            self.rec.append("warmup", record)
            log(self.tag, f"warm-up {i + 1}/{self.cfg.warmup} ({WARMUP_MODE}): {describe(record)}")
        self.prepare_mode(WARMUP_MODE)

    @staticmethod
    def batch(seed: int) -> str:
        return f"{CATALOG}.db.batch_seed{seed}"

    def prepare_mode(self, mode: str) -> str:
        """Restore the mode's table to its base snapshot and set its write mode; returns the table."""
        version = MODE_TABLE[mode]
        table = TABLES[version]
        set_mode(self.spark, table, mode)
        restore(self.spark, table, self.base[version])
        return table


def peer_writes(cfg: BenchConfig, rec: Recorder) -> None:
    """MERGE in each mode, ``runs`` times round-robin, with the read query after each."""
    tag = "iceberg"
    peer = Peer(cfg, rec, tag, [MAIN_SEED])
    spark, source = peer.spark, peer.batch(MAIN_SEED)
    rec.set("batch_rows", spark.table(source).count())
    peer.warmup(source)
    base_reads: dict[str, list[float]] = {}
    base_answers: dict[str, list[str]] = {}
    for mode in ICEBERG_MODES:
        table = peer.prepare_mode(mode)
        base_reads[mode], base_answers[mode] = timed_reads(
            table_reader(spark, table), max(cfg.runs, READS_PER_POINT)
        )
    rec.set("base_read_s", base_reads)
    rec.set("base_answer", base_answers)
    log(
        tag,
        "base read query: " + ", ".join(f"{m} {statistics.median(v):.2f}s" for m, v in base_reads.items()),
    )
    plans = {}
    for mode in ICEBERG_MODES:
        plans[mode] = plan_of(spark, peer.prepare_mode(mode), source)
        log(tag, f"{mode}: join {plans[mode]['join']}; SPJ={plans[mode]['storage_partitioned_join']}")
    rec.set("plans", plans)
    for rep in range(cfg.runs):
        for mode in ICEBERG_MODES:
            table = peer.prepare_mode(mode)
            record = timed_merge(spark, table, source, cfg, tag, mode)
            record.update(mode=mode, rep=rep)
            rec.append("runs", record)
            log(tag, f"run {rep + 1}/{cfg.runs} {mode:<16}: {describe(record)}")
    for mode in ICEBERG_MODES:
        peer.prepare_mode(mode)


def peer_degradation(cfg: BenchConfig, rec: Recorder) -> None:
    """Consecutive MERGEs (batch seeds 1..N) per merge-on-read mode; the read query after each."""
    tag = "iceberg-degr"
    peer = Peer(cfg, rec, tag, [MAIN_SEED, *cfg.degradation_seeds])
    spark = peer.spark
    peer.warmup(peer.batch(MAIN_SEED))
    series: dict[str, Any] = {}
    for mode in ICEBERG_DEGRADATION_MODES:
        table = peer.prepare_mode(mode)
        jvm_gc(spark)
        reads, answer = timed_reads(table_reader(spark, table), READS_PER_POINT)
        before = statistics.median(reads)
        entry: dict[str, Any] = {
            "read_before_s": before,
            "read_before_runs": reads,
            "answer_before": answer,
            "iterations": [],
        }
        series[mode] = entry
        log(tag, f"{mode}: read before {before:.2f}s")
        for i, seed in enumerate(cfg.degradation_seeds, 1):
            record = timed_merge(spark, table, peer.batch(seed), cfg, tag, f"{mode} #{i}")
            record.update(iteration=i, seed=seed)
            entry["iterations"].append(record)
            rec.set("series", series)
            log(tag, f"{mode} upsert {i}/{len(cfg.degradation_seeds)}: {describe(record)}")
            if not record.get("ok"):
                break
        peer.prepare_mode(mode)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tpcds.iceberg_peer", description=__doc__)
    parser.add_argument("--phase", choices=("writes", "degradation"), required=True)
    parser.add_argument("--config", required=True, help="config.json written by tpcds.bench")
    args = parser.parse_args(argv)
    run = peer_writes if args.phase == "writes" else peer_degradation
    return run_worker(f"iceberg-{args.phase}", Path(args.config), run, BenchConfig)


if __name__ == "__main__":
    sys.exit(main())
