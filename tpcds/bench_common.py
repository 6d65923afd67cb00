"""Shared pieces of the TPC-DS benchmark (``tpcds.bench``): constants, the phase config and recorder,
logging, JSON writing, the Spark settings and session both engines share, the read query, statistics and
the measuring of one timed write.

Imported by the phase modules (``bench_rowops``, ``bench_profile``, ``iceberg_peer``), the report
(``bench_report``) and the orchestrator (``bench``); it imports none of them.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

REPO = Path(__file__).resolve().parents[1]
TABLE = "db.store_sales"
MAIN_SEED = 7  # the batch of the write runs (tpcds.batches' default seed)
FIXED_STRATEGIES = ("copy-on-write", "position-delete", "equality-delete")
ROWOPS_STRATEGIES = (*FIXED_STRATEGIES, "auto")
READ_WEIGHT_PROPERTY = "rowops.read-weight"
ICEBERG_MODES = ("copy-on-write", "merge-on-read", "deletion-vectors")
ICEBERG_DEGRADATION_MODES = ("merge-on-read", "deletion-vectors")
COLOCATED_PROPERTY = "rowops.colocated-join.enabled"
BROADCAST_LIMIT_PROPERTY = "rowops.colocated-join.max-bytes"
# "sliced-N": a broadcast limit below the batch's size (~10 MiB at SF 1), so the co-located join runs as
# the large-source path does: the batch re-partitioned by bucket, N broadcast slices (6 MiB: 2 slices of
# 8 buckets; 1 MiB: one slice per bucket, the per-slice overhead at its worst).
JOIN_MODES: dict[str, dict[str, str]] = {
    "on": {COLOCATED_PROPERTY: "true", BROADCAST_LIMIT_PROPERTY: str(256 * 2**20)},
    "off": {COLOCATED_PROPERTY: "false", BROADCAST_LIMIT_PROPERTY: str(256 * 2**20)},
    "sliced-2": {COLOCATED_PROPERTY: "true", BROADCAST_LIMIT_PROPERTY: str(6 * 2**20)},
    "sliced-16": {COLOCATED_PROPERTY: "true", BROADCAST_LIMIT_PROPERTY: str(2**20)},
}
SLICED_STRATEGIES = ("copy-on-write", "position-delete")  # the strategies that join
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
READS_PER_POINT = 3  # the read query "before" (table at its base snapshot) is the median of this many

# ------------------------------------------------------------------------------------------ shared


LOG_FILES: list[Any] = []  # the orchestrator's bench.log (phase subprocesses only print)


def log(tag: str, message: str) -> None:
    """One progress line on stdout (the orchestrator forwards phase output and keeps it in bench.log)."""
    line = f"{time.strftime('%H:%M:%S')} [{tag}] {message}"
    print(line, flush=True)
    for f in LOG_FILES:
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
    def load(cls, path: Path) -> Self:
        return cls(**json.loads(path.read_text()))


def json_default(value: object) -> object:
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)  # Decimal, datetime, Path


def write_json(path: Path, data: object) -> None:
    """Write JSON atomically (temp file + rename), so a killed phase never leaves half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=json_default))
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
    from rowops.exec.spark.session import read_conf

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


def scan_aggregate(open_table: Callable[[], DataFrame]) -> tuple[float, list[str]]:
    """The read query: the same scan-sensitive aggregate as ``spark_jobs.upsert_demo.read_query``.

    The timer covers everything the user waits for, on both engines alike: from the call that opens
    the table (rowops: lake log, metadata, manifests, file listing; Iceberg: catalog lookup and
    planning) to the result.

    Returns (seconds, result as strings so both engines' answers compare exactly).
    """
    from pyspark.sql import functions as F

    from tpcds.batches import TICKET

    started = time.perf_counter()
    df = open_table()
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


# ------------------------------------------------------------------------------- phase subprocesses


T = TypeVar("T")


def timed_write(
    spark: SparkSession,
    cfg: BenchConfig,
    tag: str,
    engine: str,
    what: str,
    write: Callable[[], T],
    record: dict[str, Any],
) -> T | None:
    """The measuring both engines share for one timed write: a JVM GC, then ``write()`` under the
    ``--op-timeout`` watchdog, then ``write_s`` and ``spark_jobs`` added to ``record``.

    Returns what ``write()`` returned; None when it failed (``record`` then holds ``ok=False``, the error
    and ``write_s``, and the failure is logged as ``FAILED <what>``).
    """
    jvm_gc(spark)
    jobs_before = job_count(spark)
    started = time.perf_counter()
    try:
        with op_watchdog(spark, cfg.op_timeout, f"{engine} {what}", tag):
            result = write()
    except Exception as exc:
        record.update(ok=False, error=short_error(exc), write_s=time.perf_counter() - started)
        log(tag, f"FAILED {what}: {record['error'][:300]}")
        return None
    record["write_s"] = time.perf_counter() - started
    record["spark_jobs"] = job_count(spark) - jobs_before
    return result


def timed_reads(read: Callable[[], tuple[float, list[str]]], count: int) -> tuple[list[float], list[str]]:
    """``count`` read queries (after one untimed warm-up read); returns the times and the answer."""
    read()
    times: list[float] = []
    answer: list[str] = []
    for _ in range(count):
        seconds, answer = read()
        times.append(seconds)
    return times, answer


C = TypeVar("C", bound=BenchConfig)


def run_worker(
    phase: str,
    config_path: Path,
    run: Callable[[C, Recorder], None],
    config_type: type[C],
) -> int:
    """Body of a phase subprocess: run it, record status; 0 on success.

    ``config_type``: the phase's config class (``BenchConfig``, the cases benchmark's ``CasesConfig``).
    """
    cfg = config_type.load(config_path)
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
