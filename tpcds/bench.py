"""TPC-DS ``store_sales`` upsert benchmark: rowops' strategies against Iceberg's own Spark runtime.

``make bench`` runs ``python -m tpcds.bench --sf 1 --out tpcds/results``; ``--quick`` (SF 0.1, one run,
three degradation iterations) is for development. See ``tpcds/README.md`` for what is measured.

The process started from the command line is only the orchestrator: it generates the data (DuckDB,
cached under ``data/tpcds``) and runs every phase in its own subprocess, one after the other, with a
timeout per phase (the process group is killed on expiry). Each phase has its own JVM:

==================== =================================================================================
prepare              the upsert batches (seed 7 for the write runs, seeds 1..N for degradation), cached
rowops-writes        rowops: each strategy x co-located join on/off, median of ``--runs``; read after
iceberg-writes       Iceberg 1.10.2: MERGE INTO in copy-on-write, merge-on-read (v2), DVs (v3)
baseline             pyarrow alone reading + rewriting every data file of the table
rowops-degradation   rowops: N consecutive upserts per strategy, read query after each
iceberg-degradation  Iceberg: N consecutive MERGEs (merge-on-read v2, DVs v3), read query after each
cardinality          rowops' bitmap cardinality check vs the group-by check, on this upsert's matches
profile              where rowops spends its time (phase timings + Spark jobs/stages) per strategy
==================== =================================================================================

Every phase writes its raw measurements to ``<out>/work/sf<SF>/phase-<name>.json`` after each step (a
phase that fails or times out keeps what it measured). The orchestrator then writes
``<out>/bench-sf<SF>.json`` (raw runs, medians, ratios, consistency checks) and the PNG plots.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from rowops.lakehouse import Lakehouse
    from rowops.table import Table

REPO = Path(__file__).resolve().parents[1]
TABLE = "db.store_sales"
MAIN_SEED = 7  # the batch of the write runs (tpcds.batches' default seed)
FIXED_STRATEGIES = ("copy-on-write", "position-delete", "equality-delete")
ROWOPS_STRATEGIES = (*FIXED_STRATEGIES, "auto")
READ_WEIGHT_PROPERTY = "rowops.read-weight"
ICEBERG_MODES = ("copy-on-write", "merge-on-read", "deletion-vectors")
ICEBERG_DEGRADATION_MODES = ("merge-on-read", "deletion-vectors")
COLOCATED_PROPERTY = "rowops.colocated-join.enabled"
PHASES = (
    "prepare",
    "rowops-writes",
    "iceberg-writes",
    "baseline",
    "rowops-degradation",
    "iceberg-degradation",
    "cardinality",
    "profile",
)
# Phase time limits in seconds for SF 1 on 2 busy cores (generous: about 3x the expected duration).
DEFAULT_PHASE_TIMEOUTS = {
    "prepare": 1800.0,
    "rowops-writes": 5 * 3600.0,
    "iceberg-writes": 3 * 3600.0,
    "baseline": 1800.0,
    "rowops-degradation": 5 * 3600.0,
    "iceberg-degradation": 3 * 3600.0,
    "cardinality": 3600.0,
    "profile": 3600.0,
}
SCHEMA_VERSION = 1


# ------------------------------------------------------------------------------------------ shared


_LOG_FILES: list[Any] = []  # the orchestrator's bench.log (phase subprocesses only print)


def log(tag: str, message: str) -> None:
    """One progress line on stdout (the orchestrator forwards phase output and keeps it in bench.log)."""
    line = f"{time.strftime('%H:%M:%S')} [{tag}] {message}"
    print(line, flush=True)
    for f in _LOG_FILES:
        f.write(line + "\n")
        f.flush()


@dataclass
class BenchConfig:
    """Everything a phase subprocess needs; written as ``config.json`` by the orchestrator."""

    sf: float
    quick: bool
    runs: int
    warmup: int
    iterations: int
    degradation_strategies: list[str]
    cores: int
    driver_memory: str
    op_timeout: float
    source_dir: str
    batch_root: str
    work_dir: str
    update_fraction: float = 0.01
    insert_fraction: float = 0.01
    jars: list[str] = field(default_factory=list)

    @property
    def tag(self) -> str:
        return f"sf{self.sf:g}"

    @property
    def lake_dir(self) -> Path:
        return Path(self.work_dir) / "lake"

    @property
    def warehouse_dir(self) -> Path:
        return Path(self.work_dir) / "iceberg-warehouse"

    @property
    def degradation_seeds(self) -> list[int]:
        return list(range(1, self.iterations + 1))

    @property
    def seeds(self) -> list[int]:
        return [MAIN_SEED, *[s for s in self.degradation_seeds if s != MAIN_SEED]]

    def batch_dir(self, seed: int) -> Path:
        return Path(self.batch_root) / f"seed-{seed}"

    def phase_result(self, phase: str) -> Path:
        return Path(self.work_dir) / f"phase-{phase}.json"

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path: Path) -> BenchConfig:
        return cls(**json.loads(path.read_text()))


def _json_default(value: object) -> object:
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)  # Decimal, datetime, Path


def write_json(path: Path, data: object) -> None:
    """Write JSON atomically (temp file + rename), so a killed phase never leaves half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=_json_default))
    tmp.replace(path)


class Recorder:
    """A phase's measurements; rewritten to disk after every change, so nothing measured is lost."""

    def __init__(self, path: Path, phase: str) -> None:
        self.path = path
        self.data: dict[str, Any] = {"phase": phase, "status": "running", "started": time.time()}
        self.flush()

    def set(self, key: str, value: object) -> None:
        self.data[key] = value
        self.flush()

    def append(self, key: str, item: object) -> None:
        self.data.setdefault(key, []).append(item)
        self.flush()

    def finish(self, status: str) -> None:
        self.data["status"] = status
        self.data["finished"] = time.time()
        self.flush()

    def flush(self) -> None:
        write_json(self.path, self.data)


def spark_conf(cfg: BenchConfig, app: str) -> dict[str, str]:
    """The settings both engines share: rowops' ``conf/spark-defaults.conf`` with ``local[cores]`` and
    the same driver memory (shuffle partitions, AQE, split size are the same for both)."""
    from rowops.exec.session import read_conf

    conf = read_conf(REPO / "conf" / "spark-defaults.conf")
    conf.update(
        {
            "spark.master": f"local[{cfg.cores}]",
            "spark.driver.memory": cfg.driver_memory,
            "spark.app.name": app,
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
        }
    )
    return conf


def build_session(conf: dict[str, str]) -> SparkSession:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def job_count(spark: SparkSession) -> int:
    """Number of Spark jobs started so far (job ids are consecutive)."""
    ids = spark.sparkContext.statusTracker().getJobIdsForGroup(None)
    return max(ids) + 1 if ids else 0


def jvm_gc(spark: SparkSession) -> None:
    """A full GC before a timed step, so garbage of the previous run is not charged to it."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    jvm.System.gc()


@contextlib.contextmanager
def op_watchdog(spark: SparkSession, seconds: float, what: str, tag: str) -> Iterator[None]:
    """Cancel all Spark jobs when ``what`` runs longer than ``seconds`` (the step then fails)."""

    def expire() -> None:
        log(tag, f"TIMEOUT after {seconds:.0f}s in {what}: cancelling Spark jobs")
        spark.sparkContext.cancelAllJobs()

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def scan_aggregate(df: DataFrame) -> tuple[float, list[str]]:
    """The read query: the same scan-sensitive aggregate as ``spark_jobs.upsert_demo.read_query``.

    Returns (seconds, result as strings so both engines' answers compare exactly).
    """
    from pyspark.sql import functions as F

    from tpcds.batches import TICKET

    started = time.perf_counter()
    row = df.agg(F.count("*"), F.sum("ss_net_paid"), F.sum("ss_quantity"), F.countDistinct(TICKET)).collect()[
        0
    ]
    return time.perf_counter() - started, [str(v) for v in row]


def stats(values: Sequence[float]) -> dict[str, Any]:
    """Raw values with median / min / max (None when empty)."""
    vals = [float(v) for v in values]
    if not vals:
        return {"runs": [], "median": None, "min": None, "max": None}
    return {"runs": vals, "median": statistics.median(vals), "min": min(vals), "max": max(vals)}


def short_error(exc: BaseException, limit: int = 1500) -> str:
    """Exception text without JVM stack frames."""
    lines = [ln for ln in str(exc).splitlines() if ln.strip() and not ln.lstrip().startswith(("at ", "..."))]
    return f"{type(exc).__name__}: " + "\n".join(lines)[:limit]


# ------------------------------------------------------------------------------------- rowops side


def rowops_session(cfg: BenchConfig, app: str) -> SparkSession:
    return build_session(spark_conf(cfg, app))


def ensure_rowops_table(lake: Lakehouse, cfg: BenchConfig, rec: Recorder, tag: str) -> tuple[Table, int]:
    """Open ``db.store_sales`` (rolled back to its first snapshot) or create it from the source Parquet.

    Returns the table and its base snapshot id; records the creation time when it was created here.
    """
    from tpcds.batches import KEY_COLUMNS, TICKET

    if TABLE in lake.catalog.log.latest().tables:
        table = lake.table(TABLE)
        base = int(table.snapshots()[0]["snapshot_id"])  # type: ignore[call-overload]
        table.set_properties(**{COLOCATED_PROPERTY: "true"})
        table.rollback_to(base)
        log(tag, f"opened {TABLE} at base snapshot {base}")
        return table, base
    source = lake.spark.read.parquet(cfg.source_dir)
    started = time.perf_counter()
    table = lake.create_table(
        TABLE, source, partition_by=[f"bucket(16, {TICKET})"], identifier=list(KEY_COLUMNS)
    )
    seconds = time.perf_counter() - started
    base = table.current_snapshot_id
    assert base is not None
    files = table.files()
    rec.set(
        "create",
        {
            "seconds": seconds,
            "data_files": len(files.data),
            "rows": sum(f.record_count for f in files.data),
            "bytes": sum(f.size for f in files.data),
        },
    )
    log(tag, f"created {TABLE} in {seconds:.1f}s: {len(files.data)} data files")
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
    jvm_gc(spark)
    jobs_before = job_count(spark)
    record: dict[str, Any] = {"requested": strategy}
    started = time.perf_counter()
    try:
        with op_watchdog(spark, cfg.op_timeout, f"rowops {strategy}", tag):
            result = rowops.merge(batch, table, on=list(KEY_COLUMNS), strategy=strategy)
    except Exception as exc:
        record.update(ok=False, error=short_error(exc), write_s=time.perf_counter() - started)
        log(tag, f"FAILED {strategy}: {record['error'][:300]}")
        return record
    record["write_s"] = time.perf_counter() - started
    record["spark_jobs"] = job_count(spark) - jobs_before
    record["op_s"] = result.duration_s
    record["result"] = result_fields(result)
    if keep_explain:
        record["explain"] = result.explain
    record["read_s"], record["answer"] = scan_aggregate(table.to_df())
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
READS_PER_POINT = 3  # the read query "before" (table at its base snapshot) is the median of this many


def timed_reads(read: Callable[[], tuple[float, list[str]]], count: int) -> tuple[list[float], list[str]]:
    """``count`` read queries (after one untimed warm-up read); returns the times and the answer."""
    read()
    times: list[float] = []
    answer: list[str] = []
    for _ in range(count):
        seconds, answer = read()
        times.append(seconds)
    return times, answer


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
    """Every rowops strategy x co-located join on/off, ``runs`` times round-robin, read after each."""
    import rowops

    tag = "rowops"
    spark = rowops_session(cfg, "bench-rowops")
    lake = rowops.Lakehouse(cfg.lake_dir, spark=spark)
    table, base = ensure_rowops_table(lake, cfg, rec, tag)
    batch = spark.read.parquet(str(cfg.batch_dir(MAIN_SEED)))
    rec.set("batch_rows", batch.count())
    rec.set("base_snapshot", base)
    rec.set("spark_conf", spark_conf(cfg, "bench-rowops"))
    rowops_warmup(spark, table, base, batch, cfg, rec, tag)
    base_reads, answer = timed_reads(lambda: scan_aggregate(table.to_df()), max(cfg.runs, READS_PER_POINT))
    rec.set("base_read_s", base_reads)
    rec.set("base_answer", answer)
    log(tag, f"base read query: {statistics.median(base_reads):.2f}s (median of {len(base_reads)})")
    for rep in range(cfg.runs):
        for colocated in (True, False):
            table.set_properties(**{COLOCATED_PROPERTY: str(colocated).lower()})
            for strategy in ROWOPS_STRATEGIES:
                table.rollback_to(base)
                record = timed_rowops_merge(spark, table, batch, strategy, cfg, tag, keep_explain=rep == 0)
                record.update(rep=rep, colocated=colocated)
                rec.append("runs", record)
                on = "on" if colocated else "off"
                log(tag, f"run {rep + 1}/{cfg.runs} {strategy:<15} colocated={on:<3}: {describe_run(record)}")
    table.set_properties(**{COLOCATED_PROPERTY: "true"})
    table.rollback_to(base)


def worker_rowops_degradation(cfg: BenchConfig, rec: Recorder) -> None:
    """Consecutive upserts (batch seeds 1..N) per strategy; the read query before and after each."""
    import rowops

    tag = "rowops-degr"
    spark = rowops_session(cfg, "bench-rowops-degradation")
    lake = rowops.Lakehouse(cfg.lake_dir, spark=spark)
    table, base = ensure_rowops_table(lake, cfg, rec, tag)
    batches = {seed: spark.read.parquet(str(cfg.batch_dir(seed))) for seed in cfg.degradation_seeds}
    rowops_warmup(spark, table, base, spark.read.parquet(str(cfg.batch_dir(MAIN_SEED))), cfg, rec, tag)
    series: dict[str, Any] = {}
    for series_name in cfg.degradation_strategies:
        strategy, read_weight = parse_series(series_name)
        table.rollback_to(base)
        table.set_properties(**{READ_WEIGHT_PROPERTY: read_weight})
        jvm_gc(spark)
        reads, answer = timed_reads(lambda: scan_aggregate(table.to_df()), READS_PER_POINT)
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
    from rowops.exec.cardinality import find_repeated_positions
    from rowops.exec.scan import FILE_COL, POS_COL

    pairs = matched.select(FILE_COL, POS_COL).mapInArrow(
        find_repeated_positions, f"{FILE_COL} string, {POS_COL} long"
    )
    return [(r[FILE_COL], int(r[POS_COL])) for r in pairs.collect()][:5]


def worker_cardinality(cfg: BenchConfig, rec: Recorder) -> None:
    """The bitmap cardinality check vs the group-by check on the matched rows of the main upsert."""
    import rowops
    from rowops.exec.cardinality import repeated_matches_bitmap, repeated_matches_groupby
    from rowops.exec.changes import matched_rows, merge_changes
    from rowops.exec.scan import scan
    from rowops.spec.operations import simple_merge_spec
    from tpcds.batches import KEY_COLUMNS

    tag = "cardinality"
    spark = rowops_session(cfg, "bench-cardinality")
    lake = rowops.Lakehouse(cfg.lake_dir, spark=spark)
    table, _base = ensure_rowops_table(lake, cfg, rec, tag)
    batch = spark.read.parquet(str(cfg.batch_dir(MAIN_SEED)))
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
    if TABLE not in lake.catalog.log.latest().tables:
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


# ---------------------------------------------------------------------------------------- profiling

# rowops functions timed by the profiler: (module, attribute); "Class.method" patches a method.
PROFILE_TARGETS: tuple[tuple[str, str], ...] = (
    ("rowops.operations", "plan"),
    ("rowops.operations", "execute"),
    ("rowops.operations", "live_files"),
    ("rowops.operations", "scan_source_keys"),
    ("rowops.operations", "prune_files"),
    ("rowops.operations", "in_memory_bytes"),
    ("rowops.operations", "_check_cardinality"),
    ("rowops.operations", "_delta"),
    ("rowops.operations", "data_files_from_parquet"),
    ("rowops.operations", "_commit"),
    ("rowops.operations", "summarize"),
    ("rowops.exec.strategies", "copy_on_write"),
    ("rowops.exec.strategies", "position_delete"),
    ("rowops.exec.strategies", "hybrid"),
    ("rowops.exec.strategies", "equality_delete"),
    ("rowops.exec.strategies", "check_keys"),
    ("rowops.exec.strategies", "rewrite_files"),
    ("rowops.exec.strategies", "delete_positions"),
    ("rowops.exec.strategies", "write_new_rows"),
    ("rowops.exec.strategies", "write_data"),
    ("rowops.exec.strategies", "write_position_deletes"),
    ("rowops.exec.strategies", "write_equality_deletes"),
)


class PhaseProfiler:
    """Wraps rowops functions to time them (nested) and labels the Spark jobs each one starts.

    Nothing in rowops is edited: module attributes are replaced for the duration of a ``with`` block
    (calls inside rowops go through module globals, so they hit the wrappers) and restored after. Each
    wrapper sets the Spark job description to its call path, so every job is attributed to a phase.
    """

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.stack: list[str] = []
        self.timings: dict[str, dict[str, float]] = {}
        self._saved: list[tuple[object, str, object]] = []
        self._first_job = 0

    def __enter__(self) -> PhaseProfiler:
        import importlib

        for module_name, attr in PROFILE_TARGETS:
            owner: object = importlib.import_module(module_name)
            name = attr
            if "." in attr:
                cls_name, name = attr.split(".")
                owner = getattr(owner, cls_name)
            self._patch(owner, name, self._wrap(attr, getattr(owner, name)))
        # The MERGE join is persisted and its first action is the one-pass summary (counts, removed
        # rows per file, cardinality), which would then be charged for the join: materialize the join
        # first, as a phase of its own (the count runs on the just-cached rows, a small extra cost that
        # only the profile pays).
        operations = importlib.import_module("rowops.operations")
        summarize = operations.summarize

        def split_summary(changes: Any, *args: Any, **kwargs: Any) -> Any:
            with self.phase("materialize MERGE join (persist)"):
                changes.joined.count()
            return summarize(changes, *args, **kwargs)

        self._patch(operations, "summarize", split_summary)
        self._first_job = job_count(self.spark)
        return self

    def _patch(self, owner: object, name: str, replacement: object) -> None:
        self._saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, replacement)

    def __exit__(self, *exc: object) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()
        self.spark.sparkContext.setJobDescription(None)  # type: ignore[arg-type]

    @contextlib.contextmanager
    def phase(self, label: str) -> Iterator[None]:
        """Time a nested phase and label the Spark jobs started inside it with its path."""
        self.stack.append(label)
        path = "/".join(self.stack)
        self.spark.sparkContext.setJobDescription(path)
        entry = self.timings.setdefault(path, {"seconds": 0.0, "calls": 0})  # keys in start order
        started = time.perf_counter()
        try:
            yield
        finally:
            entry["seconds"] += time.perf_counter() - started
            entry["calls"] += 1
            self.stack.pop()
            self.spark.sparkContext.setJobDescription("/".join(self.stack) or None)  # type: ignore[arg-type]

    def _wrap(self, label: str, fn: Any) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.phase(label):
                return fn(*args, **kwargs)

        return timed

    def jobs(self) -> list[dict[str, Any]]:
        """Spark jobs started inside the block: callsite, phase, duration and their stages."""
        store = self.spark.sparkContext._jsc.sc().statusStore()
        found = []
        jobs = store.jobsList(None)
        for i in range(jobs.size()):
            job = jobs.apply(i)
            if job.jobId() < self._first_job:
                continue
            stages = []
            stage_ids = job.stageIds()
            for k in range(stage_ids.size()):
                with contextlib.suppress(Exception):
                    stage = store.lastStageAttempt(stage_ids.apply(k))
                    if stage.status().toString() == "SKIPPED":
                        continue
                    stages.append(
                        {
                            "id": stage.stageId(),
                            "tasks": stage.numTasks(),
                            "seconds": _span(stage.submissionTime(), stage.completionTime()),
                            "executor_run_s": stage.executorRunTime() / 1000.0,
                            "input_bytes": stage.inputBytes(),
                            "output_bytes": stage.outputBytes(),
                            "shuffle_read_bytes": stage.shuffleReadBytes(),
                            "shuffle_write_bytes": stage.shuffleWriteBytes(),
                            "spilled_bytes": stage.diskBytesSpilled(),
                        }
                    )
            description = job.description()
            found.append(
                {
                    "id": job.jobId(),
                    "callsite": job.name(),
                    "phase": description.get() if description.isDefined() else "",
                    "seconds": _span(job.submissionTime(), job.completionTime()),
                    "stages": sorted(stages, key=lambda s: s["id"]),
                }
            )
        return sorted(found, key=lambda j: j["id"])

    def report(self) -> dict[str, Any]:
        jobs = self.jobs()
        phases = []
        for path, entry in self.timings.items():
            own_jobs = [j for j in jobs if j["phase"] == path]
            phases.append(
                {
                    "phase": path,
                    "seconds": entry["seconds"],
                    "calls": int(entry["calls"]),
                    "spark_jobs": len(own_jobs),
                    "spark_job_s": sum(j["seconds"] or 0.0 for j in own_jobs),
                }
            )
        return {"phases": phases, "jobs": jobs}


def _span(start: Any, end: Any) -> float | None:
    """Seconds between two ``Option[Date]`` values of Spark's status store."""
    if not (start.isDefined() and end.isDefined()):
        return None
    return float(end.get().getTime() - start.get().getTime()) / 1000.0


PROFILE_RUNS = (
    ("copy-on-write", True),
    ("position-delete", True),
    ("auto", True),
    ("copy-on-write", False),
    ("position-delete", False),
)


def log_profile(tag: str, name: str, wall: float, report: dict[str, Any]) -> None:
    log(tag, f"{name}: {wall:.2f}s, {len(report['jobs'])} Spark jobs")
    for phase in report["phases"]:  # in start order
        depth = phase["phase"].count("/")
        label = phase["phase"].rsplit("/", 1)[-1]
        log(
            tag,
            f"  {'  ' * depth}{label:<{44 - 2 * depth}} {phase['seconds']:7.2f}s "
            f"({phase['calls']} calls, {phase['spark_jobs']} jobs {phase['spark_job_s']:.2f}s)",
        )
    slowest = sorted(report["jobs"], key=lambda j: -(j["seconds"] or 0.0))[:5]
    for job in slowest:
        tasks = "+".join(str(st["tasks"]) for st in job["stages"])
        log(
            tag,
            f"  slow job {job['id']}: {job['seconds']:.2f}s {tasks} tasks, {job['phase']} ({job['callsite']})",
        )


def worker_profile(cfg: BenchConfig, rec: Recorder) -> None:
    """Where rowops spends its time: one instrumented upsert per (strategy, co-located join) pair."""
    import rowops
    from tpcds.batches import KEY_COLUMNS

    tag = "profile"
    spark = rowops_session(cfg, "bench-profile")
    lake = rowops.Lakehouse(cfg.lake_dir, spark=spark)
    table, base = ensure_rowops_table(lake, cfg, rec, tag)
    batch = spark.read.parquet(str(cfg.batch_dir(MAIN_SEED)))
    rowops_warmup(spark, table, base, batch, cfg, rec, tag)
    profiles = {}
    for strategy, colocated in PROFILE_RUNS:
        name = f"{strategy} (colocated {'on' if colocated else 'off'})"
        table.set_properties(**{COLOCATED_PROPERTY: str(colocated).lower()})
        table.rollback_to(base)
        spark.catalog.clearCache()
        jvm_gc(spark)
        with PhaseProfiler(spark) as profiler:
            started = time.perf_counter()
            with op_watchdog(spark, cfg.op_timeout, f"profile {name}", tag):
                result = rowops.merge(batch, table, on=list(KEY_COLUMNS), strategy=strategy)
            wall = time.perf_counter() - started
        report = profiler.report()
        profiles[name] = {"wall_s": wall, "result": result_fields(result), **report}
        rec.set("profiles", profiles)
        log_profile(tag, name, wall, report)
    table.set_properties(**{COLOCATED_PROPERTY: "true"})
    table.rollback_to(base)


ROWOPS_WORKERS: dict[str, Callable[[BenchConfig, Recorder], None]] = {
    "prepare": worker_prepare,
    "rowops-writes": worker_rowops_writes,
    "rowops-degradation": worker_rowops_degradation,
    "cardinality": worker_cardinality,
    "baseline": worker_baseline,
    "profile": worker_profile,
}


def run_worker(phase: str, config_path: Path, run: Callable[[BenchConfig, Recorder], None]) -> int:
    """Body of a phase subprocess: run it, record status; 0 on success."""
    cfg = BenchConfig.load(config_path)
    rec = Recorder(cfg.phase_result(phase), phase)
    try:
        run(cfg, rec)
    except BaseException as exc:
        rec.data["error"] = short_error(exc)
        rec.finish("failed")
        log(phase, f"FAILED: {rec.data['error']}")
        raise
    rec.finish("ok")
    return 0


# ------------------------------------------------------------------------------------ orchestrator


def phase_command(phase: str, config_path: Path) -> list[str]:
    if phase.startswith("iceberg-"):
        mode = phase.removeprefix("iceberg-")
        return [sys.executable, "-m", "tpcds.iceberg_peer", "--phase", mode, "--config", str(config_path)]
    return [sys.executable, "-m", "tpcds.bench", "--worker", phase, "--config", str(config_path)]


def _forward(stream: Any, log_file: Any) -> None:
    for line in stream:
        sys.stdout.write(line)
        sys.stdout.flush()
        log_file.write(line)
        log_file.flush()


def run_phase(
    phase: str, cfg: BenchConfig, config_path: Path, timeout: float, bench_log: Any
) -> dict[str, Any]:
    """Run one phase subprocess (own process group) to completion or until ``timeout``."""
    logs = Path(cfg.work_dir) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    cfg.phase_result(phase).unlink(missing_ok=True)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    stderr_path = logs / f"{phase}.stderr.log"
    log("bench", f"phase {phase} (timeout {timeout:.0f}s, JVM log {stderr_path})")
    started = time.perf_counter()
    with open(stderr_path, "w") as stderr:
        proc = subprocess.Popen(
            phase_command(phase, config_path),
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=REPO,
            env=env,
            text=True,
            start_new_session=True,
        )
        reader = threading.Thread(target=_forward, args=(proc.stdout, bench_log), daemon=True)
        reader.start()
        status = "ok"
        try:
            code = proc.wait(timeout)
            if code != 0:
                status = f"failed (exit code {code})"
        except subprocess.TimeoutExpired:
            status = f"timeout after {timeout:.0f}s"
            log("bench", f"phase {phase}: {status}; killing process group {proc.pid}")
            _kill_group(proc)
        except BaseException:
            _kill_group(proc)
            raise
        finally:
            reader.join(10)
    seconds = time.perf_counter() - started
    log("bench", f"phase {phase}: {status} in {seconds:.0f}s")
    return {"status": status, "seconds": seconds, "stderr_log": str(stderr_path)}


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGTERM the phase's process group (python + its JVM), SIGKILL if it does not exit."""
    for sig, grace in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 20.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _read_phase(cfg: BenchConfig, phase: str) -> dict[str, Any]:
    path = cfg.phase_result(phase)
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        return data
    except (OSError, ValueError):
        return {}


def _ok_runs(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r.get("ok")]


def summarize_rowops(phase: dict[str, Any]) -> dict[str, Any]:
    """Medians per strategy and co-located setting."""
    summary: dict[str, Any] = {}
    runs = phase.get("runs", [])
    for strategy in ROWOPS_STRATEGIES:
        for colocated in (True, False):
            mine = [r for r in runs if r["requested"] == strategy and r.get("colocated") == colocated]
            ok = _ok_runs(mine)
            if not mine:
                continue
            first = ok[0] if ok else {}
            summary.setdefault(strategy, {})["on" if colocated else "off"] = {
                "write_s": stats([r["write_s"] for r in ok]),
                "op_s": stats([r["op_s"] for r in ok]),
                "read_s": stats([r["read_s"] for r in ok]),
                "spark_jobs": stats([r["spark_jobs"] for r in ok]),
                "chosen": sorted({r["result"]["strategy"] for r in ok}),
                "failed_runs": len(mine) - len(ok),
                "result": first.get("result"),
                "files_after": first.get("files_after"),
            }
    return summary


def summarize_iceberg(phase: dict[str, Any]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    runs = phase.get("runs", [])
    for mode in ICEBERG_MODES:
        mine = [r for r in runs if r["mode"] == mode]
        ok = _ok_runs(mine)
        if not mine:
            continue
        first = ok[0] if ok else {}
        summary[mode] = {
            "write_s": stats([r["write_s"] for r in ok]),
            "read_s": stats([r["read_s"] for r in ok]),
            "spark_jobs": stats([r["spark_jobs"] for r in ok]),
            "failed_runs": len(mine) - len(ok),
            "snapshot_summary": first.get("snapshot_summary"),
            "files_after": first.get("files_after"),
            "storage_partitioned_join": phase.get("plans", {}).get(mode, {}).get("storage_partitioned_join"),
        }
    return summary


def _median(summary: dict[str, Any] | None, key: str = "write_s") -> float | None:
    if not summary:
        return None
    value = summary.get(key, {}).get("median")
    return float(value) if value is not None else None


def _present(values: dict[str, float | None]) -> dict[str, float]:
    return {k: v for k, v in values.items() if v is not None}


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def degradation_series(rowops_phase: dict[str, Any], iceberg_phase: dict[str, Any]) -> dict[str, Any]:
    """Read and write time per iteration for every series (read index 0 = before the first upsert)."""
    series: dict[str, Any] = {}
    for engine, phase in (("rowops", rowops_phase), ("iceberg", iceberg_phase)):
        for name, entry in phase.get("series", {}).items():
            iterations = entry.get("iterations", [])
            ok = _ok_runs(iterations)
            reads = [entry["read_before_s"], *[r["read_s"] for r in ok]]
            series[f"{engine} {name}"] = {
                "read_s": reads,
                "write_s": [r["write_s"] for r in ok],
                "answers": [entry.get("answer_before"), *[r.get("answer") for r in ok]],
                "files_after": [r.get("files_after") for r in ok],
                "completed": len(ok),
                "planned": len(iterations) if len(ok) < len(iterations) else None,
                "read_slowdown": _ratio(reads[-1], reads[0]) if len(reads) > 1 else None,
            }
    return series


def assemble(cfg: BenchConfig, phases_run: dict[str, dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    """The final report: raw phase data, medians, ratios and consistency checks."""
    raw = {phase: _read_phase(cfg, phase) for phase in PHASES}
    rowops_summary = summarize_rowops(raw["rowops-writes"])
    iceberg_summary = summarize_iceberg(raw["iceberg-writes"])
    degradation = degradation_series(raw["rowops-degradation"], raw["iceberg-degradation"])
    baseline = raw["baseline"]

    def rowops_write(strategy: str, on: str = "on") -> float | None:
        return _median(rowops_summary.get(strategy, {}).get(on))

    iceberg_writes = _present({m: _median(s) for m, s in iceberg_summary.items()})
    best_iceberg = min(iceberg_writes, key=lambda m: iceberg_writes[m]) if iceberg_writes else None
    fixed = _present({s: rowops_write(s) for s in FIXED_STRATEGIES})
    best_fixed = min(fixed, key=lambda s: fixed[s]) if fixed else None
    auto = rowops_write("auto")
    base_read = (
        statistics.median(raw["rowops-writes"]["base_read_s"])
        if raw["rowops-writes"].get("base_read_s")
        else None
    )
    ratios: dict[str, Any] = {
        "auto_over_best_iceberg": {
            "value": _ratio(auto, iceberg_writes.get(best_iceberg) if best_iceberg else None),
            "auto_s": auto,
            "best_iceberg_mode": best_iceberg,
            "best_iceberg_s": iceberg_writes.get(best_iceberg) if best_iceberg else None,
        },
        "auto_over_best_fixed_rowops": {
            "value": _ratio(auto, fixed.get(best_fixed) if best_fixed else None),
            "auto_s": auto,
            "best_fixed_strategy": best_fixed,
            "best_fixed_s": fixed.get(best_fixed) if best_fixed else None,
        },
        "colocated_on_over_off": {
            s: _ratio(rowops_write(s, "on"), rowops_write(s, "off")) for s in ROWOPS_STRATEGIES
        },
        "cow_over_pyarrow_baseline": {
            "value": _ratio(rowops_write("copy-on-write"), _median(baseline, "total_s")),
            "cow_s": rowops_write("copy-on-write"),
            "pyarrow_read_rewrite_s": _median(baseline, "total_s"),
        },
        "read_slowdown_after_upserts": {name: s["read_slowdown"] for name, s in degradation.items()},
        "read_after_one_upsert_over_base": {
            **{
                f"rowops {s}": _ratio(_median(rowops_summary.get(s, {}).get("on"), "read_s"), base_read)
                for s in ROWOPS_STRATEGIES
            },
            **{
                f"iceberg {m}": _ratio(
                    _median(iceberg_summary.get(m), "read_s"),
                    statistics.median(raw["iceberg-writes"]["base_read_s"].get(m, [0]) or [0])
                    if raw["iceberg-writes"].get("base_read_s")
                    else None,
                )
                for m in ICEBERG_MODES
            },
        },
        "rowops_over_iceberg_same_encoding": {
            "copy-on-write": _ratio(rowops_write("copy-on-write"), iceberg_writes.get("copy-on-write")),
            "position-delete / merge-on-read": _ratio(
                rowops_write("position-delete"), iceberg_writes.get("merge-on-read")
            ),
        },
    }
    return {
        "schema_version": SCHEMA_VERSION,
        "meta": meta,
        "phases": phases_run,
        "failed_runs": failed_runs(raw),
        "rowops": {
            "summary": rowops_summary,
            "base_read_s": stats(raw["rowops-writes"].get("base_read_s", [])),
        },
        "iceberg": {"summary": iceberg_summary},
        "degradation": degradation,
        "baseline": {k: baseline.get(k) for k in ("files", "read_s", "write_s", "total_s")},
        "cardinality": raw["cardinality"].get("results"),
        "ratios": ratios,
        "consistency": consistency(raw, degradation),
        "profile": _profile_summary(raw["profile"]),
        "raw": raw,
    }


def failed_runs(raw: dict[str, dict[str, Any]]) -> dict[str, int]:
    """Timed upserts that failed (error or ``--op-timeout``), per phase; the phase itself went on."""
    counts = {}
    for phase in ("rowops-writes", "iceberg-writes", "rowops-degradation", "iceberg-degradation"):
        records = list(raw[phase].get("runs", []))
        for entry in raw[phase].get("series", {}).values():
            records += entry.get("iterations", [])
        failed = sum(1 for r in records if not r.get("ok"))
        if failed:
            counts[phase] = failed
    return counts


def consistency(raw: dict[str, dict[str, Any]], degradation: dict[str, Any]) -> dict[str, Any]:
    """Do all strategies and both engines produce the same table (same read-query answer)?"""
    after: dict[str, set[str]] = {}
    for r in _ok_runs(raw["rowops-writes"].get("runs", [])):
        after.setdefault(json.dumps(r["answer"]), set()).add(f"rowops {r['requested']}")
    for r in _ok_runs(raw["iceberg-writes"].get("runs", [])):
        after.setdefault(json.dumps(r["answer"]), set()).add(f"iceberg {r['mode']}")
    base = {json.dumps(a) for a in (raw["rowops-writes"].get("base_answer"),) if a}
    base |= {json.dumps(a) for a in raw["iceberg-writes"].get("base_answer", {}).values()}
    per_iteration = []
    length = max((len(s["answers"]) for s in degradation.values()), default=0)
    for i in range(length):
        answers = {json.dumps(s["answers"][i]) for s in degradation.values() if i < len(s["answers"])}
        per_iteration.append(len(answers) == 1)
    return {
        "base_answers_agree": len(base) <= 1,
        "upsert_answers_agree": len(after) <= 1,
        "upsert_answers": {k: sorted(v) for k, v in after.items()},
        "degradation_answers_agree": per_iteration,
    }


def _profile_summary(phase: dict[str, Any]) -> dict[str, Any]:
    """Per profiled strategy: wall time, top-level phase split, and the five slowest Spark jobs."""
    out = {}
    for strategy, profile in phase.get("profiles", {}).items():
        jobs = sorted(profile.get("jobs", []), key=lambda j: -(j["seconds"] or 0.0))
        out[strategy] = {
            "wall_s": profile["wall_s"],
            "phases": {p["phase"]: round(p["seconds"], 3) for p in profile.get("phases", [])},
            "spark_jobs": len(profile.get("jobs", [])),
            "spark_job_s": sum(j["seconds"] or 0.0 for j in profile.get("jobs", [])),
            "slowest_jobs": [
                {"phase": j["phase"], "callsite": j["callsite"], "seconds": j["seconds"]} for j in jobs[:5]
            ],
        }
    return out


def print_summary(report: dict[str, Any]) -> None:
    """A human-readable digest of the report on stdout."""
    lines = ["", f"== TPC-DS store_sales upsert benchmark, SF {report['meta']['sf']:g} =="]
    lines.append(f"{'engine / strategy':<36} {'write s (median)':>17} {'read s':>8}  chosen / files")
    for strategy, by_coloc in report["rowops"]["summary"].items():
        for on, s in by_coloc.items():
            w, r = _median(s), _median(s, "read_s")
            res = s.get("result") or {}
            files = (
                f"+{res.get('data_files_added')}d -{res.get('data_files_removed')}d "
                f"+{res.get('delete_files_added')}del"
            )
            lines.append(
                f"{'rowops ' + strategy + ' (colocated ' + on + ')':<36} {_fmt(w):>17} {_fmt(r):>8}  "
                f"{','.join(s['chosen'])} {files}"
            )
    for mode, s in report["iceberg"]["summary"].items():
        summ = s.get("snapshot_summary") or {}
        files = (
            f"+{summ.get('added-data-files', 0)}d -{summ.get('deleted-data-files', 0)}d "
            f"+{summ.get('added-delete-files', 0)}del spj={s.get('storage_partitioned_join')}"
        )
        lines.append(
            f"{'iceberg ' + mode:<36} {_fmt(_median(s)):>17} {_fmt(_median(s, 'read_s')):>8}  {files}"
        )
    base = report["baseline"].get("total_s") or {}
    lines.append(f"{'pyarrow read+rewrite all files':<36} {_fmt(base.get('median')):>17}")
    lines.append("")
    lines.append("read query over consecutive upserts (s): before, after 1..N")
    for name, s in report["degradation"].items():
        lines.append(f"  {name:<30} " + " ".join(_fmt(v) for v in s["read_s"]))
    for name, c in (report.get("cardinality") or {}).items():
        lines.append(
            f"cardinality check ({name}, {c['matched_rows']} matched rows): bitmap "
            f"{_fmt(c['bitmap_s']['median'])}s, group-by {_fmt(c['groupby_s']['median'])}s, "
            f"bitmap without limit {_fmt(c.get('bitmap_no_limit_s', {}).get('median'))}s"
        )
    for name, prof in (report.get("profile") or {}).items():
        top = {k: v for k, v in prof["phases"].items() if k.count("/") <= 1 and k != "execute"}
        split = ", ".join(f"{k.removeprefix('execute/')} {v:.1f}" for k, v in top.items() if v >= 0.05)
        lines.append(f"profile {name}: {prof['wall_s']:.1f}s, {prof['spark_jobs']} jobs: {split}")
    lines.append("")
    lines.append("ratios: " + json.dumps(report["ratios"], indent=1, default=_json_default))
    lines.append("consistency: " + json.dumps(report["consistency"], default=_json_default))
    print("\n".join(lines), flush=True)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
    }
    with contextlib.suppress(OSError):
        info["load_average"] = os.getloadavg()
    with contextlib.suppress(OSError, ValueError, IndexError):
        mem = Path("/proc/meminfo").read_text().splitlines()[0].split()
        info["memory_gb"] = round(int(mem[1]) / 2**20, 1)
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        info["rowops_commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    with contextlib.suppress(ImportError):
        import pyarrow
        import pyspark

        info["pyspark"] = pyspark.__version__
        info["pyarrow"] = pyarrow.__version__
    return info


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tpcds.bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--sf", type=float, default=None, help="TPC-DS scale factor (default 1; 0.1 with --quick)"
    )
    parser.add_argument(
        "--out", default="tpcds/results", help="directory for bench-sf<SF>.json and the plots"
    )
    parser.add_argument("--quick", action="store_true", help="development run: SF 0.1, 1 run, 3 iterations")
    parser.add_argument("--runs", type=int, default=None, help="timed runs per configuration (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed warm-up upserts per engine")
    parser.add_argument("--iterations", type=int, default=None, help="consecutive upserts (default 10)")
    parser.add_argument(
        "--degradation-strategies",
        default="auto,auto@rw10,position-delete,equality-delete",
        help="rowops strategies of the degradation phase (comma separated; auto@rw10 = auto with "
        "table property rowops.read-weight=10)",
    )
    parser.add_argument("--phases", default=",".join(PHASES), help=f"phases to run, of {','.join(PHASES)}")
    parser.add_argument("--cores", type=int, default=2, help="local[N] for both engines")
    parser.add_argument("--driver-memory", default="4g", help="spark.driver.memory for both engines")
    parser.add_argument(
        "--op-timeout", type=float, default=None, help="seconds per MERGE before it is cancelled"
    )
    parser.add_argument("--timeout-factor", type=float, default=1.0, help="multiplies every phase time limit")
    parser.add_argument("--data", default="data/tpcds", help="cache of generated data and batches")
    parser.add_argument("--keep-work", action="store_true", help="keep the lake and warehouse after the run")
    parser.add_argument(
        "--reuse-tables", action="store_true", help="do not drop the tables of an earlier run"
    )
    parser.add_argument("--worker", choices=sorted(ROWOPS_WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.sf = args.sf if args.sf is not None else (0.1 if args.quick else 1.0)
    args.runs = args.runs if args.runs is not None else (1 if args.quick else 3)
    args.iterations = args.iterations if args.iterations is not None else (3 if args.quick else 10)
    unknown = set(args.phases.split(",")) - set(PHASES)
    if unknown:
        parser.error(f"unknown phases {sorted(unknown)}; expected some of {','.join(PHASES)}")
    if args.runs < 1 or args.iterations < 1 or args.sf <= 0:
        parser.error("--runs and --iterations must be >= 1 and --sf > 0")
    return args


def iceberg_jars() -> list[str]:
    """``[iceberg-spark-runtime-3.5_2.12-1.10.2.jar, shaded jackson jar]`` from ``tools/iceberg_jars.py``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_iceberg_jars", REPO / "tools" / "iceberg_jars.py")
    if spec is None or spec.loader is None:
        raise RuntimeError("cannot load tools/iceberg_jars.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    jars: list[str] = module.iceberg_jars()
    return jars


def make_config(args: argparse.Namespace, work: Path) -> BenchConfig:
    from tpcds.datagen import generate_store_sales

    data = Path(args.data) if Path(args.data).is_absolute() else REPO / args.data
    log("bench", f"TPC-DS store_sales SF {args.sf:g} under {data} (generated once, then reused)")
    started = time.perf_counter()
    source = generate_store_sales(args.sf, data / f"sf{args.sf:g}")
    log("bench", f"source ready in {time.perf_counter() - started:.1f}s: {source}")
    strategies = [s for s in args.degradation_strategies.split(",") if s]
    bad = [s for s in strategies if parse_series(s)[0] not in ROWOPS_STRATEGIES]
    if bad:
        raise SystemExit(f"unknown degradation strategies {bad}; expected some of {ROWOPS_STRATEGIES}")
    return BenchConfig(
        sf=args.sf,
        quick=args.quick,
        runs=args.runs,
        warmup=args.warmup,
        iterations=args.iterations,
        degradation_strategies=strategies,
        cores=args.cores,
        driver_memory=args.driver_memory,
        op_timeout=args.op_timeout if args.op_timeout is not None else max(300.0, 1800.0 * args.sf),
        source_dir=str(source),
        batch_root=str(data / f"batches-sf{args.sf:g}"),
        work_dir=str(work),
        jars=iceberg_jars(),
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return run_worker(args.worker, Path(args.config), ROWOPS_WORKERS[args.worker])
    out = Path(args.out) if Path(args.out).is_absolute() else REPO / args.out
    work = out / "work" / f"sf{args.sf:g}"
    work.mkdir(parents=True, exist_ok=True)
    (out / ".gitignore").write_text("work/\n")
    started = time.time()
    meta: dict[str, Any] = {
        "sf": args.sf,
        "quick": args.quick,
        "command": " ".join([Path(sys.executable).name, "-m", "tpcds.bench", *(argv or sys.argv[1:])]),
        "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
        "machine": machine_info(),
    }
    (work / "logs").mkdir(exist_ok=True)
    with open(work / "logs" / "bench.log", "a") as bench_log:
        _LOG_FILES.append(bench_log)
        if not args.reuse_tables:
            for old in ("lake", "iceberg-warehouse"):
                shutil.rmtree(work / old, ignore_errors=True)
        cfg = make_config(args, work)
        config_path = work / "config.json"
        cfg.save(config_path)
        meta["config"] = asdict(cfg)
        selected = [p for p in PHASES if p in args.phases.split(",")]
        phases_run: dict[str, dict[str, Any]] = {}
        for phase in selected:
            timeout = DEFAULT_PHASE_TIMEOUTS[phase] * args.timeout_factor * (0.5 if args.quick else 1.0)
            phases_run[phase] = run_phase(phase, cfg, config_path, timeout, bench_log)
        _LOG_FILES.remove(bench_log)
    meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    meta["total_s"] = time.time() - started
    meta["load_average_after"] = machine_info().get("load_average")
    report = assemble(cfg, phases_run, meta)
    result_path = out / f"bench-{cfg.tag}.json"
    write_json(result_path, report)
    log("bench", f"wrote {result_path}")
    from tpcds.plots import plot_report

    for path in plot_report(report, out, cfg.tag):
        log("bench", f"wrote {path}")
    print_summary(report)
    if not args.keep_work:
        for old in ("lake", "iceberg-warehouse"):
            shutil.rmtree(work / old, ignore_errors=True)
    failed = [p for p, r in phases_run.items() if r["status"] != "ok"]
    if failed:
        log("bench", f"phases not ok: {failed}")
    if report["failed_runs"]:
        log("bench", f"failed timed upserts per phase: {report['failed_runs']}")
    return 1 if failed or report["failed_runs"] else 0


if __name__ == "__main__":
    sys.exit(main())
