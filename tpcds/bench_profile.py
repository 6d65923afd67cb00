"""The ``profile`` phase of the TPC-DS benchmark: where rowops spends its time in one upsert.

``PhaseProfiler`` wraps rowops' functions (``PROFILE_TARGETS``) for the duration of a call to time its
phases and labels every Spark job with the phase that started it; ``worker_profile`` runs one instrumented
upsert per (strategy, co-located join) pair of ``PROFILE_RUNS``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from tpcds.bench_common import (
    COLOCATED_PROPERTY,
    BenchConfig,
    Recorder,
    job_count,
    jvm_gc,
    log,
    op_watchdog,
)
from tpcds.bench_rowops import open_bench_table, result_fields, rowops_warmup

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


# rowops functions timed by the profiler: (module, attribute); "Class.method" patches a method.
PROFILE_TARGETS: tuple[tuple[str, str], ...] = (
    ("rowops.run.row_level", "plan"),
    ("rowops.run.row_level", "execute"),
    ("rowops.run.planning", "live_files"),
    ("rowops.run.planning", "scan_source_keys"),
    ("rowops.run.planning", "prune_files"),
    ("rowops.run.planning", "measured_bytes"),
    ("rowops.run.row_level", "_check_cardinality"),
    ("rowops.run.row_level", "_delta"),
    ("rowops.run.row_level", "data_files_from_parquet"),
    ("rowops.run.row_level", "commit_changes"),
    ("rowops.run.row_level", "summarize"),
    ("rowops.exec.writing.strategies", "copy_on_write"),
    ("rowops.exec.writing.strategies", "position_delete"),
    ("rowops.exec.writing.strategies", "hybrid"),
    ("rowops.exec.writing.equality_writes", "equality_delete"),
    ("rowops.exec.reading.key_codes", "collect_codes"),
    ("rowops.run.row_level", "check_keys"),
    ("rowops.run.row_level", "row_changes"),
    ("rowops.exec.writing.strategies", "rewrite_files"),
    ("rowops.exec.writing.strategies", "rewrite_positions"),
    ("rowops.exec.writing.strategies", "equality_deleted_positions"),
    ("rowops.exec.writing.strategies", "position_deletes"),
    ("rowops.exec.writing.strategies", "delete_positions"),
    ("rowops.exec.writing.strategies", "write_new_rows"),
    ("rowops.exec.writing.strategies", "write_data"),
    ("rowops.exec.writing.strategies", "write_position_deletes"),
    ("rowops.exec.writing.equality_writes", "write_rows_and_keys"),
    ("rowops.exec.writing.equality_writes", "write_equality_deletes"),
)


# rowops.exec.spark.parallel.CONCURRENT_CONF (rowops is imported inside the phases, not by this module)
CONCURRENT_CONF = "rowops.write.concurrent"


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
        self._concurrent: str | None = None

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
        operations = importlib.import_module("rowops.run.row_level")
        summarize = operations.summarize

        def split_summary(changes: Any, *args: Any, **kwargs: Any) -> Any:
            with self.phase("materialize MERGE join (persist)"):
                changes.joined.count()
            return summarize(changes, *args, **kwargs)

        self._patch(operations, "summarize", split_summary)
        # phases are timed on one stack: an operation's writes run one after the other while profiled
        self._concurrent = self.spark.conf.get(CONCURRENT_CONF, None)
        self.spark.conf.set(CONCURRENT_CONF, "false")
        self._first_job = job_count(self.spark)
        return self

    def _patch(self, owner: object, name: str, replacement: object) -> None:
        self._saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, replacement)

    def __exit__(self, *exc: object) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()
        if self._concurrent is None:
            self.spark.conf.unset(CONCURRENT_CONF)
        else:
            self.spark.conf.set(CONCURRENT_CONF, self._concurrent)
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
    spark, table, base, batch = open_bench_table(cfg, rec, tag, "bench-profile")
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
