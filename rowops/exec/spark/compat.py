"""The one module that tells classic PySpark (3.5, 4.x) from a Spark Connect client.

Everything else in rowops uses only public DataFrame / SparkSession APIs that exist in classic
PySpark 3.5 and 4.x and in ``pyspark.sql.connect``. Five things have no such API; they are
chosen here, by the session's type, and nowhere else:

* shipping rowops' zip to the Python workers: ``addArtifacts(pyfile=True)`` (Connect, classic 4.x),
  ``addPyFile`` of the SparkContext on classic 3.5, where ``addArtifacts`` raises;
* freeing a local checkpoint's blocks: classic has no public handle on the checkpoint's RDD;
  on Connect the server frees it when the client drops the DataFrame;
* the driver's log level of a session rowops creates (Connect: the server's own business);
* running Spark jobs from another driver thread with the caller's job properties (job group and
  description, tags; Connect: the session and its thread-local state): ``inheritable_thread_target``
  takes the function on 3.5 and the session on 4.x;
* naming an operation's jobs (``exec/spark/jobs.py``): the SparkContext's job group, description and
  job tags on classic Spark, the session's tags on Connect (which has no job description).

Plan text comes from the public ``DataFrame.explain``, which prints: :func:`explain_text` captures
what the calling thread prints, leaving other threads' output alone.

One more is a cost, not a capability: classic PySpark hands a list to the JVM one element per Py4J
round trip (``ListConverter``), and ``df.select("a", "b")`` makes three per column (two reflective
lookups of ``functions`` and the call of ``col``). :func:`select_columns`, :func:`select_exprs` and
:func:`parquet_files` send a whole list as one string instead (:func:`_string_seq`); Connect builds its
plans on the client and takes the public calls.
"""

from __future__ import annotations

import io
import json
import re
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, TextIO, TypeVar, cast

import pyarrow as pa
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.util import inheritable_thread_target

from rowops.exec.spark.literal_frames import sql_identifier

try:  # classic PySpark talks to its JVM through Py4J; the Connect client (pyspark-client) has no Py4J
    from py4j.protocol import Py4JJavaError

    JOB_ERRORS: tuple[type[Exception], ...] = (Py4JJavaError, PySparkException)
except ImportError:  # pragma: no cover - pyspark-client installations only
    JOB_ERRORS = (PySparkException,)

_CONNECT = "pyspark.sql.connect."
T = TypeVar("T")


def is_connect(spark: SparkSession | DataFrame) -> bool:
    """Whether ``spark`` is a Spark Connect client session (or one of its DataFrames).

    Told by the class's module: importing ``pyspark.sql.connect`` needs grpc, which a classic
    installation (and its Python workers, which import rowops) may lack.
    """
    return type(spark).__module__.startswith(_CONNECT)


def collect_arrow(df: DataFrame) -> pa.Table:
    """The rows of ``df`` on the driver as one Arrow table, without a Python object per value:
    ``toArrow`` (Spark 4), else the collection ``toPandas`` makes (Spark 3.5)."""
    to_arrow = getattr(df, "toArrow", None)  # Spark 4's, both classic and Connect
    if callable(to_arrow):
        return cast(pa.Table, to_arrow())
    batches = df._collect_as_arrow()
    return pa.Table.from_batches(batches) if batches else to_arrow_schema(df.schema).empty_table()


def frame_of_arrow(spark: SparkSession, table: pa.Table) -> DataFrame:
    """A DataFrame of a small Arrow table built on the driver (metadata, never table data).

    Spark 4 (classic and Connect) takes the Arrow table as it is; Spark 3.5 takes Python rows, with
    maps as dicts (its pandas path fails on map columns).
    """
    schema = from_arrow_schema(table.schema)
    if not spark.version.startswith("3."):
        return spark.createDataFrame(table, schema=schema)
    rows = [_python_value(row, table.schema) for row in table.to_pylist()]
    return spark.createDataFrame(rows, schema=schema)


def _python_value(value: Any, kind: pa.Schema | pa.DataType) -> Any:
    """``value`` (from ``to_pylist``) with every Arrow map (a list of pairs) as a dict."""
    if value is None:
        return None
    if isinstance(kind, pa.Schema) or pa.types.is_struct(kind):
        fields = (
            list(kind) if isinstance(kind, pa.Schema) else [kind.field(i) for i in range(kind.num_fields)]
        )
        return {f.name: _python_value(value[f.name], f.type) for f in fields}
    if pa.types.is_map(kind):
        return {_python_value(k, kind.key_type): _python_value(v, kind.item_type) for k, v in value}
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return [_python_value(v, kind.value_type) for v in value]
    return value


_JOB_PROPERTIES = ("spark.job.description", "spark.jobGroup.id", "spark.job.interruptOnCancel")


def enter_job_scope(
    spark: SparkSession, group: str | None, description: str, tags: Sequence[str]
) -> dict[str, str | None]:
    """Set the calling thread's job group (unless None), description and extra tags; returns what to
    give :func:`leave_job_scope`. Connect sets the tags only (a client has no job description)."""
    if is_connect(spark):
        added = [t for t in tags if t not in spark.getTags()]
        for tag in added:
            spark.addTag(tag)
        return {"tags": ",".join(added)}
    sc = spark.sparkContext
    saved: dict[str, str | None] = {key: sc.getLocalProperty(key) for key in _JOB_PROPERTIES}
    had = set(sc.getJobTags())
    saved["tags"] = ",".join(t for t in tags if t not in had)
    if group is not None:
        sc.setJobGroup(group, description, interruptOnCancel=False)
    sc.setLocalProperty("spark.job.description", description)
    for tag in tags:
        sc.addJobTag(tag)
    return saved


def leave_job_scope(spark: SparkSession, saved: dict[str, str | None], restore_group: bool) -> None:
    """Undo :func:`enter_job_scope`: remove the tags it added, put the description (and the group)
    back."""
    added = [t for t in (saved.get("tags") or "").split(",") if t]
    if is_connect(spark):
        for tag in added:
            spark.removeTag(tag)
        return
    sc = spark.sparkContext
    for tag in added:
        sc.removeJobTag(tag)
    for key in _JOB_PROPERTIES if restore_group else _JOB_PROPERTIES[:1]:
        sc.setLocalProperty(key, saved[key])  # type: ignore[arg-type]  # None removes it


def set_job_description(spark: SparkSession, description: str) -> None:
    """The calling thread's next jobs' description (classic Spark; a Connect client cannot set one)."""
    if not is_connect(spark):
        spark.sparkContext.setLocalProperty("spark.job.description", description)


def session_key(spark: SparkSession) -> str:
    """What Python files shipped to the workers are scoped to: the Connect session (artifacts are
    per session) or the classic application."""
    if is_connect(spark):
        return f"connect:{spark.session_id}"  # type: ignore[attr-defined]
    return f"app:{spark.conf.get('spark.app.id')}"


def add_py_file(spark: SparkSession, path: str) -> None:
    """Put a ``.zip``/``.py`` file on the Python path of the session's workers."""
    if is_connect(spark) or not _classic_35(spark):
        spark.addArtifacts(path, pyfile=True)
    else:  # classic 3.5: addArtifacts raises outside Connect
        spark.sparkContext.addPyFile(path)


def set_log_level(spark: SparkSession, level: str) -> None:
    """The driver's log level of a classic session (a Connect server's logs are the server's)."""
    if not is_connect(spark):
        spark.sparkContext.setLogLevel(level)


def release_checkpoint(evaluated: DataFrame) -> None:
    """Free the stored rows of ``DataFrame.localCheckpoint`` now.

    Classic PySpark has no public handle on a checkpoint's RDD (``unpersist`` does not reach it), so
    this reaches for it; Connect frees it when the client's DataFrame is dropped.
    """
    if is_connect(evaluated):
        return
    plan = evaluated._jdf.queryExecution().analyzed()
    if plan.getClass().getSimpleName() == "LogicalRDD":
        plan.rdd().unpersist(False)


def thread_target(spark: SparkSession, fn: Callable[[], T]) -> Callable[[], T]:
    """``fn``, to run in another driver thread as if in this one: with the calling thread's job
    group, description and tags (a job group's cancellation reaches its jobs), and on Connect the
    session as the thread's active one. Captured now, when wrapped."""
    wrap: Any = inheritable_thread_target  # 3.5's stubs know the function form only
    if not is_connect(spark) and _classic_35(spark):
        return wrap(fn)
    return wrap(spark)(fn)


def _classic_35(spark: SparkSession) -> bool:
    return spark.version.startswith("3.")


class _ThreadCapture(io.TextIOBase):
    """``sys.stdout`` while one thread captures: that thread's writes go to a buffer, others' pass."""

    def __init__(self, passthrough: TextIO) -> None:
        self.passthrough = passthrough
        self.buffers: dict[int, io.StringIO] = {}

    def write(self, text: str) -> int:
        target = self.buffers.get(threading.get_ident())
        return target.write(text) if target is not None else self.passthrough.write(text)

    def flush(self) -> None:
        self.passthrough.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.passthrough, name)


_capture_lock = threading.Lock()
_capture: _ThreadCapture | None = None
_capturing = 0


def explain_text(df: DataFrame, mode: str) -> str:
    """What ``df.explain(mode=mode)`` prints (classic and Connect both print it on the client)."""
    global _capture, _capturing
    buffer = io.StringIO()
    me = threading.get_ident()
    with _capture_lock:
        if _capture is None or sys.stdout is not _capture:
            _capture = _ThreadCapture(sys.stdout)
            sys.stdout = _capture
        capture = _capture
        capture.buffers[me] = buffer
        _capturing += 1
    try:
        df.explain(mode=mode)
    finally:
        with _capture_lock:
            del capture.buffers[me]
            _capturing -= 1
            if _capturing == 0 and sys.stdout is capture:
                sys.stdout = capture.passthrough
                _capture = None
    return buffer.getvalue()


_SPLITS = re.compile(r"\bRange \(.*splits=(?:Some\()?(\d+)")


def active_session() -> SparkSession | None:
    """The calling thread's active session (another driver thread has none of its own)."""
    return SparkSession.getActiveSession()


def running_tasks(spark: SparkSession | None) -> tuple[int, int, int] | None:
    """(active stages, tasks done, tasks in them) of ``spark``'s running jobs, from Spark's status
    tracker; None without a classic session (a Connect client has no status tracker)."""
    if spark is None or is_connect(spark):
        return None
    tracker = spark.sparkContext.statusTracker()
    stages = [info for i in tracker.getActiveStageIds() if (info := tracker.getStageInfo(i)) is not None]
    return len(stages), sum(s.numCompletedTasks for s in stages), sum(s.numTasks for s in stages)


def default_parallelism(spark: SparkSession) -> int:
    """Spark's default number of partitions of a leaf (``spark.range``), i.e. the cores Spark counts on
    (``spark.sql.leafNodeDefaultParallelism``, else the scheduler's default parallelism: the cores of
    local mode, the executors' total cores on a cluster); read from the plan, no job runs."""
    match = _SPLITS.search(explain_text(spark.range(1), "simple"))
    return max(1, int(match.group(1))) if match else 1


# -- lists handed to the JVM in one piece (classic PySpark) ---------------------------------------------
_SEP = "\x00"  # in no path, column name or SQL expression rowops hands over (checked, else per element)
_helpers_lock = threading.Lock()
_helpers: dict[int, tuple[Any, ...]] = {}  # id(JVM view) -> (view, pattern, collector, utils, Metadata)


def _bulk(spark: SparkSession, values: Sequence[str]) -> bool:
    """Whether ``values`` go to the JVM as one string: classic PySpark, two or more non-empty values
    without the separator."""
    return len(values) > 1 and not is_connect(spark) and all(v and _SEP not in v for v in values)


def _jvm_helpers(spark: SparkSession) -> tuple[Any, ...]:
    """(the JVM view, a NUL pattern, ``Collectors.toList()``, ``PythonUtils``, ``Metadata``): lookups
    are reflective round trips (one per package level), made once per JVM."""
    jvm: Any = spark._jvm
    with _helpers_lock:
        cached = _helpers.get(id(jvm))
        if cached is None or cached[0] is not jvm:
            cached = (
                jvm,
                jvm.java.util.regex.Pattern.compile(_SEP),
                jvm.java.util.stream.Collectors.toList(),
                jvm.org.apache.spark.api.python.PythonUtils,
                jvm.org.apache.spark.sql.types.Metadata,
            )
            _helpers[id(jvm)] = cached
    return cached


def _string_seq(spark: SparkSession, values: Sequence[str]) -> Any:
    """A JVM ``Seq[String]`` of ``values`` in three Py4J round trips, whatever their number: one
    string, split on the JVM (``Pattern.splitAsStream``, Java 8+) into a list Spark's ``toSeq`` takes.

    Measured on a read after one Case 2 micro-batch of equality deletes at SF 1: the DataFrame's 363
    round trips became 130, its building 0.24-0.29 s -> 0.14-0.18 s.
    """
    _, pattern, collector, utils, _ = _jvm_helpers(spark)
    return utils.toSeq(pattern.splitAsStream(_SEP.join(values)).collect(collector))


def select_exprs(df: DataFrame, exprs: Sequence[str]) -> DataFrame:
    """``df.selectExpr(*exprs)``, the expressions handed over in one piece on classic PySpark."""
    if not _bulk(df.sparkSession, exprs):
        return df.selectExpr(*exprs)
    return type(df)(df._jdf.selectExpr(_string_seq(df.sparkSession, exprs)), df.sparkSession)


def select_columns(df: DataFrame, names: Sequence[str]) -> DataFrame:
    """``df.select(*names)`` of top-level columns named exactly ``names`` (a dot is part of a name)."""
    return select_exprs(df, [sql_identifier(n) for n in names])


def parquet_files(spark: SparkSession, reader: DataFrameReader, uris: Sequence[str]) -> DataFrame:
    """``reader.parquet(*uris)``, the URIs handed over in one piece on classic PySpark."""
    if not _bulk(spark, uris):
        return reader.parquet(*uris)
    return reader._df(reader._jreader.parquet(_string_seq(spark, uris)))


def with_metadata(df: DataFrame, columns: Sequence[tuple[str, dict[str, Any]]]) -> DataFrame:
    """``df.select(*[col(name).alias(name, metadata=m) for name, m in columns])`` (top-level names).

    On classic PySpark, ``alias(metadata=)`` walks the JVM package path to ``Metadata`` on every call
    (~8 round trips per column); here ``Metadata`` is looked up once per JVM and a column costs four.
    (``DataFrame.to(schema)`` would be one call, but Spark 3.5 collapses its projection into the one
    below and the written Parquet files lose the field ids.)
    """
    quoted = [(sql_identifier(n), n, m) for n, m in columns]
    if is_connect(df):
        return df.select(*[F.col(q).alias(n, metadata=m) for q, n, m in quoted])
    _, _, _, utils, metadata = _jvm_helpers(df.sparkSession)
    jdf = df._jdf
    jcols = [getattr(jdf.col(q), "as")(n, metadata.fromJson(json.dumps(m))) for q, n, m in quoted]
    return type(df)(jdf.select(utils.toSeq(jcols)), df.sparkSession)
