"""The rowops phases of the TPC-DS benchmark, each run by ``python -m tpcds.bench --worker <phase>``:
``prepare`` (the upsert batches), ``rowops-writes``, ``rowops-degradation``, ``cardinality`` and
``baseline`` (pyarrow alone), with the helpers they share (table setup, one timed upsert, warm-up).

pyspark, pyarrow and rowops are imported inside the phase functions, so importing this module (as the
orchestrator does for its phase table) loads none of them.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tpcds.bench_common import (
    JOIN_MODES,
    MAIN_SEED,
    READ_WEIGHT_PROPERTY,
    READS_PER_POINT,
    ROWOPS_STRATEGIES,
    SLICED_STRATEGIES,
    TABLE,
    BenchConfig,
    Recorder,
    build_session,
    jvm_gc,
    log,
    scan_aggregate,
    spark_conf,
    stats,
    timed_reads,
    timed_write,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from rowops.lakehouse import Lakehouse
    from rowops.table import Table


def rowops_session(cfg: BenchConfig, app: str) -> SparkSession:
    return build_session(spark_conf(cfg, app))


def open_bench_table(
    cfg: BenchConfig, rec: Recorder, tag: str, app: str
) -> tuple[SparkSession, Table, int, DataFrame]:
    """A session named ``app``, the benchmark table at its base snapshot (and its id), the main batch."""
    import rowops

    spark = rowops_session(cfg, app)
    table, base = ensure_rowops_table(rowops.Lakehouse(cfg.lake_dir, spark=spark), cfg, rec, tag)
    return spark, table, base, spark.read.parquet(str(cfg.batch_dir(MAIN_SEED)))


def ensure_rowops_table(
    lake: Lakehouse, cfg: BenchConfig, rec: Recorder, tag: str, format_version: int = 2
) -> tuple[Table, int]:
    """Open ``db.store_sales`` (``db.store_sales_v3`` for format v3), rolled back to its first snapshot,
    or create it from the source Parquet.

    Returns the table and its base snapshot id; records the creation time when it was created here.
    """
    from tpcds.batches import KEY_COLUMNS, TICKET

    name = TABLE if format_version == 2 else f"{TABLE}_v{format_version}"
    if name in lake.catalog.log.latest():
        table = lake.table(name)
        base = int(table.snapshots()[0]["snapshot_id"])  # type: ignore[call-overload]
        table.set_properties(**JOIN_MODES["on"])  # a run stopped mid-way may have left another mode
        table.rollback_to(base)
        log(tag, f"opened {name} at base snapshot {base}")
        return table, base
    source = lake.spark.read.parquet(cfg.source_dir)
    started = time.perf_counter()
    table = lake.create_table(
        name,
        source,
        partition_by=[f"bucket(16, {TICKET})"],
        identifier=list(KEY_COLUMNS),
        format_version=format_version,
    )
    seconds = time.perf_counter() - started
    base = table.current_snapshot_id
    assert base is not None
    files = table.files()
    rec.set(
        "create" if format_version == 2 else f"create_v{format_version}",
        {
            "seconds": seconds,
            "data_files": len(files.data),
            "rows": sum(f.record_count for f in files.data),
            "bytes": sum(f.size for f in files.data),
        },
    )
    log(tag, f"created {name} in {seconds:.1f}s: {len(files.data)} data files")
    return table, base


def live_file_counts(table: Table) -> dict[str, int]:
    files = table.files()
    return {
        "data_files": len(files.data),
        "position_delete_files": len(files.position_deletes),
        "equality_delete_files": len(files.equality_deletes),
        "data_bytes": sum(f.size for f in files.data),
        "delete_bytes": sum(f.size for f in files.deletes),
    }


def result_fields(result: Any) -> dict[str, Any]:
    """The OperationResult fields worth keeping (all but the explain text)."""
    fields = asdict(result)
    fields.pop("explain", None)
    return fields


def timed_rowops_merge(
    spark: SparkSession,
    table: Table,
    batch: DataFrame,
    strategy: str,
    cfg: BenchConfig,
    tag: str,
    keep_explain: bool = False,
) -> dict[str, Any]:
    """One upsert (the caller restores the table first) followed by the read query."""
    import rowops
    from tpcds.batches import KEY_COLUMNS

    spark.catalog.clearCache()
    record: dict[str, Any] = {"requested": strategy}
    result = timed_write(
        spark,
        cfg,
        tag,
        "rowops",
        strategy,
        lambda: rowops.merge(batch, table, on=list(KEY_COLUMNS), strategy=strategy),
        record,
    )
    if result is None:
        return record
    record["op_s"] = result.duration_s
    record["result"] = result_fields(result)
    if keep_explain:
        record["explain"] = result.explain
    record["read_s"], record["answer"] = scan_aggregate(table.to_df)
    record["files_after"] = live_file_counts(table)
    record["ok"] = True
    return record


def describe_run(record: dict[str, Any]) -> str:
    if not record.get("ok"):
        return f"FAILED after {record.get('write_s', 0):.1f}s"
    r = record["result"]
    return (
        f"write {record['write_s']:.2f}s (op {record['op_s']:.2f}s, {record['spark_jobs']} jobs), "
        f"read {record['read_s']:.2f}s -> {r['strategy']}: +{r['data_files_added']} data "
        f"-{r['data_files_removed']} data +{r['delete_files_added']} deletes, "
        f"upd {r['rows_updated']} ins {r['rows_inserted']}"
    )


def worker_prepare(cfg: BenchConfig, rec: Recorder) -> None:
    """Materialize the upsert batches as Parquet (reused when already there)."""
    from tpcds.batches import upsert_batch

    tag = "prepare"
    spark = rowops_session(cfg, "bench-prepare")
    source = spark.read.parquet(cfg.source_dir)
    wanted = {"sf": cfg.sf, "update_fraction": cfg.update_fraction, "insert_fraction": cfg.insert_fraction}
    batches = {}
    for seed in cfg.seeds:
        target = cfg.batch_dir(seed)
        marker = target / "_BATCH.json"
        with contextlib.suppress(OSError, ValueError):
            meta = json.loads(marker.read_text())
            if all(meta.get(k) == v for k, v in {**wanted, "seed": seed}.items()):
                batches[seed] = meta
                continue
        started = time.perf_counter()
        tmp = target.with_name(f".{target.name}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        batch = upsert_batch(source, cfg.update_fraction, cfg.insert_fraction, seed=seed)
        batch.coalesce(cfg.cores).write.parquet(str(tmp))
        rows = spark.read.parquet(str(tmp)).count()
        meta = {**wanted, "seed": seed, "rows": rows, "seconds": time.perf_counter() - started}
        (tmp / "_BATCH.json").write_text(json.dumps(meta))
        shutil.rmtree(target, ignore_errors=True)
        tmp.replace(target)
        batches[seed] = meta
        log(tag, f"batch seed {seed}: {rows} rows in {meta['seconds']:.1f}s")
        rec.set("batches", batches)
    rec.set("batches", batches)


WARMUP_STRATEGY = "position-delete"  # exercises the join, the cardinality check and both writers


def rowops_warmup(
    spark: SparkSession, table: Table, base: int, batch: DataFrame, cfg: BenchConfig, rec: Recorder, tag: str
) -> None:
    """Untimed upserts so that JIT, Python workers and file caches are warm before anything is timed."""
    for i in range(cfg.warmup):
        table.rollback_to(base)
        record = timed_rowops_merge(spark, table, batch, WARMUP_STRATEGY, cfg, tag)
        rec.append("warmup", record)
        log(tag, f"warm-up {i + 1}/{cfg.warmup} ({WARMUP_STRATEGY}): {describe_run(record)}")
    table.rollback_to(base)


def worker_rowops_writes(cfg: BenchConfig, rec: Recorder) -> None:
    """Every rowops strategy x co-located join on/off (and sliced for the joining strategies), ``runs``
    times round-robin, read after each."""

    tag = "rowops"
    spark, table, base, batch = open_bench_table(cfg, rec, tag, "bench-rowops")
    rec.set("batch_rows", batch.count())
    rec.set("base_snapshot", base)
    rec.set("spark_conf", spark_conf(cfg, "bench-rowops"))
    rowops_warmup(spark, table, base, batch, cfg, rec, tag)
    base_reads, answer = timed_reads(lambda: scan_aggregate(table.to_df), max(cfg.runs, READS_PER_POINT))
    rec.set("base_read_s", base_reads)
    rec.set("base_answer", answer)
    log(tag, f"base read query: {statistics.median(base_reads):.2f}s (median of {len(base_reads)})")
    for rep in range(cfg.runs):
        for mode, properties in JOIN_MODES.items():
            table.set_properties(**properties)
            for strategy in SLICED_STRATEGIES if mode.startswith("sliced") else ROWOPS_STRATEGIES:
                table.rollback_to(base)
                record = timed_rowops_merge(spark, table, batch, strategy, cfg, tag, keep_explain=rep == 0)
                record.update(rep=rep, colocated=mode != "off", join=mode)
                rec.append("runs", record)
                log(
                    tag,
                    f"run {rep + 1}/{cfg.runs} {strategy:<15} colocated={mode:<9}: {describe_run(record)}",
                )
    table.set_properties(**JOIN_MODES["on"])
    table.rollback_to(base)


def worker_rowops_degradation(cfg: BenchConfig, rec: Recorder) -> None:
    """Consecutive upserts (batch seeds 1..N) per strategy; the read query before and after each."""

    tag = "rowops-degr"
    spark, table, base, main_batch = open_bench_table(cfg, rec, tag, "bench-rowops-degradation")
    batches = {seed: spark.read.parquet(str(cfg.batch_dir(seed))) for seed in cfg.degradation_seeds}
    rowops_warmup(spark, table, base, main_batch, cfg, rec, tag)
    series: dict[str, Any] = {}
    for series_name in cfg.degradation_strategies:
        strategy, read_weight = parse_series(series_name)
        table.rollback_to(base)
        table.set_properties(**{READ_WEIGHT_PROPERTY: read_weight})
        jvm_gc(spark)
        reads, answer = timed_reads(lambda: scan_aggregate(table.to_df), READS_PER_POINT)
        before = statistics.median(reads)
        entry: dict[str, Any] = {
            "read_before_s": before,
            "read_before_runs": reads,
            "answer_before": answer,
            "iterations": [],
        }
        series[series_name] = entry
        log(tag, f"{series_name}: read before {before:.2f}s")
        for i, seed in enumerate(cfg.degradation_seeds, 1):
            record = timed_rowops_merge(spark, table, batches[seed], strategy, cfg, tag)
            record.update(iteration=i, seed=seed)
            entry["iterations"].append(record)
            rec.set("series", series)
            log(tag, f"{series_name} upsert {i}/{len(cfg.degradation_seeds)}: {describe_run(record)}")
            if not record.get("ok"):
                break
    table.set_properties(**{READ_WEIGHT_PROPERTY: "1"})
    table.rollback_to(base)


def parse_series(name: str) -> tuple[str, str]:
    """``auto@rw10`` -> (``auto``, read weight ``10``); a plain strategy runs at the default weight 1."""
    strategy, _, read_weight = name.partition("@rw")
    return strategy, read_weight or "1"


def bitmap_without_limit(matched: DataFrame) -> list[tuple[str, int]]:
    """What-if: rowops' bitmap check collected without ``.limit()``.

    ``repeated_matches_bitmap`` ends in ``.limit(n).collect()``, which Spark runs as an incremental take
    (1 partition, then 4x more, ...: several jobs, each starting Python tasks again). The per-task output
    is only the duplicates, so collecting it whole is one job.
    """
    from rowops.exec.checks.cardinality import find_repeated_positions
    from rowops.exec.reading.file_reads import FILE_COL, POS_COL

    pairs = matched.select(FILE_COL, POS_COL).mapInArrow(
        find_repeated_positions, f"{FILE_COL} string, {POS_COL} long"
    )
    return [(r[FILE_COL], int(r[POS_COL])) for r in pairs.collect()][:5]


def worker_cardinality(cfg: BenchConfig, rec: Recorder) -> None:
    """The bitmap cardinality check vs the group-by check on the matched rows of the main upsert."""
    from rowops.exec.changes.rows import matched_rows, merge_changes
    from rowops.exec.checks.cardinality import repeated_matches_bitmap, repeated_matches_groupby
    from rowops.exec.reading.scan import scan
    from rowops.request.operations import simple_merge_spec
    from tpcds.batches import KEY_COLUMNS

    tag = "cardinality"
    spark, table, _base, batch = open_bench_table(cfg, rec, tag, "bench-cardinality")
    spec = simple_merge_spec(list(KEY_COLUMNS))
    schema = table.schema
    target = scan(spark, schema, table.files(), row_ids=True)
    checks: dict[str, Callable[[DataFrame], list[tuple[str, int]]]] = {
        "bitmap": repeated_matches_bitmap,
        "groupby": repeated_matches_groupby,
        "bitmap_no_limit": bitmap_without_limit,
    }
    results: dict[str, Any] = {}
    for colocated in (True, False):
        name = "colocated" if colocated else "shuffle-join"
        changes = merge_changes(target, batch, spec, schema.column_names, colocated=colocated)
        try:
            started = time.perf_counter()
            joined = changes.joined.count()  # materializes the persisted join, as rowops does
            join_s = time.perf_counter() - started
            matched = matched_rows(changes)
            matched_count = matched.count()
            entry: dict[str, Any] = {"joined_rows": joined, "matched_rows": matched_count, "join_s": join_s}
            times: dict[str, list[float]] = {k: [] for k in checks}
            for rep in range(max(cfg.runs, 3)):
                order = list(checks) if rep % 2 == 0 else list(reversed(list(checks)))
                for check in order:
                    jvm_gc(spark)
                    started = time.perf_counter()
                    dups = checks[check](matched)
                    times[check].append(time.perf_counter() - started)
                    entry[f"{check}_duplicates"] = len(dups)
            for check, values in times.items():
                entry[f"{check}_s"] = stats(values)
            b, g = entry["bitmap_s"]["median"], entry["groupby_s"]["median"]
            n = entry["bitmap_no_limit_s"]["median"]
            entry["bitmap_over_groupby"] = b / g if g else None
            results[name] = entry
            rec.set("results", results)
            log(
                tag,
                f"{name}: {matched_count} matched rows; bitmap {b:.2f}s, group-by {g:.2f}s, "
                f"bitmap without limit {n:.2f}s (medians of {len(times['bitmap'])})",
            )
        finally:
            changes.release()


def worker_baseline(cfg: BenchConfig, rec: Recorder) -> None:
    """pyarrow alone: read every data file of the base snapshot and write it again (zstd, like rowops)."""
    import pyarrow.parquet as pq

    import rowops

    tag = "baseline"
    lake = rowops.Lakehouse(cfg.lake_dir)  # metadata only: no Spark session is started
    if TABLE not in lake.catalog.log.latest():
        raise RuntimeError(f"{TABLE} does not exist yet: run the rowops-writes phase first")
    table = lake.table(TABLE)
    base = int(table.snapshots()[0]["snapshot_id"])  # type: ignore[call-overload]
    files = table.files(base).data
    out = Path(cfg.work_dir) / "baseline-out"
    rec.set(
        "files",
        {
            "count": len(files),
            "bytes": sum(f.size for f in files),
            "rows": sum(f.record_count for f in files),
        },
    )
    read_s, write_s, total_s = [], [], []
    for rep in range(max(cfg.runs, 3)):
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        reading = writing = 0.0
        for i, f in enumerate(files):
            started = time.perf_counter()
            data = pq.read_table(f.path)
            middle = time.perf_counter()
            pq.write_table(data, out / f"{i:05d}.parquet", compression="zstd")
            reading += middle - started
            writing += time.perf_counter() - middle
        read_s.append(reading)
        write_s.append(writing)
        total_s.append(reading + writing)
        rec.set("read_s", stats(read_s))
        rec.set("write_s", stats(write_s))
        rec.set("total_s", stats(total_s))
        log(tag, f"run {rep + 1}: read {reading:.2f}s + write {writing:.2f}s of {len(files)} files")
    shutil.rmtree(out, ignore_errors=True)
