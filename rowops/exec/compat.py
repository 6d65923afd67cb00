"""The one module that tells classic PySpark (3.5, 4.x) from a Spark Connect client.

Everything else in rowops uses only public DataFrame / SparkSession APIs that exist in classic
PySpark 3.5 and 4.x and in ``pyspark.sql.connect``. Four things have no such API; they are
chosen here, by the session's type, and nowhere else:

* shipping rowops' zip to the Python workers: ``addArtifacts(pyfile=True)`` (Connect, classic 4.x),
  ``addPyFile`` of the SparkContext on classic 3.5, where ``addArtifacts`` raises;
* freeing a local checkpoint's blocks: classic has no public handle on the checkpoint's RDD;
  on Connect the server frees it when the client drops the DataFrame;
* the driver's log level of a session rowops creates (Connect: the server's own business);
* running Spark jobs from another driver thread with the caller's job properties (job group and
  description, tags; Connect: the session and its thread-local state): ``inheritable_thread_target``
  takes the function on 3.5 and the session on 4.x.

Plan text comes from the public ``DataFrame.explain``, which prints: :func:`explain_text` captures
what the calling thread prints, leaving other threads' output alone.
"""

from __future__ import annotations

import io
import re
import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO, TypeVar

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.util import inheritable_thread_target

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


def default_parallelism(spark: SparkSession) -> int:
    """Spark's default number of partitions of a leaf (``spark.range``), i.e. the cores Spark counts on
    (``spark.sql.leafNodeDefaultParallelism``, else the scheduler's default parallelism: the cores of
    local mode, the executors' total cores on a cluster); read from the plan, no job runs."""
    match = _SPLITS.search(explain_text(spark.range(1), "simple"))
    return max(1, int(match.group(1))) if match else 1
