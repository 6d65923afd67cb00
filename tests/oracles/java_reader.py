"""Oracle 1: Iceberg's own Java reader (Spark 3.5 + iceberg-spark-runtime) in a long-lived worker.

The test process owns a plain SparkSession without the Iceberg jars, and one process cannot host
two SparkContexts, so the Java reader runs in a separate Python process started from this file
(``python java_reader.py --reply-fd N JAR...``).  It builds a small local SparkSession with the
Iceberg runtime on ``spark.jars`` and serves one JSON request per line on stdin::

    {"metadata_location": "/abs/t/metadata/v3.metadata.json", "out": "/tmp/x.parquet", "snapshot_id": 12}
    {"cmd": "shutdown"}

Replies (``{"ok": true, "rows": n}`` / ``{"ok": false, "error": "..."}``) travel on a dedicated pipe
(``--reply-fd``), never on stdout, so Spark/log4j noise cannot corrupt the protocol; the worker's
stdout and stderr go to a log file whose tail is attached to every error.  Rows are collected as
Arrow (``DataFrame._collect_as_arrow``, pyspark 3.5) and written to ``out`` as one Parquet file.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn

import pyarrow as pa
import pyarrow.parquet as pq
import pyspark

_TOOLS_JARS = Path(__file__).resolve().parents[2] / "tools" / "iceberg_jars.py"
_LOG4J2 = "rootLogger.level = error\nrootLogger.appenderRef.stderr.ref = console\n" + (
    "appender.console.type = Console\nappender.console.name = console\nappender.console.target = SYSTEM_ERR\n"
    "appender.console.layout.type = PatternLayout\nappender.console.layout.pattern = %d %p %c: %m%n\n"
)


def java_oracle_available() -> bool:
    """The Iceberg runtime jar here is built for Spark 3.5 (Scala 2.12): no Java oracle under pyspark 4.x."""
    return pyspark.__version__.startswith("3.")


class JavaReaderError(RuntimeError):
    """The Java worker could not start, died, or did not answer in time."""


class JavaReadError(JavaReaderError):
    """The Java reader rejected one read (the worker stays usable); ``str()`` holds the Java error."""


def default_jars() -> list[str]:
    """``[iceberg-spark-runtime, shaded-jackson]`` from ``tools/iceberg_jars.py``, building if needed."""
    spec = importlib.util.spec_from_file_location("rowops_tools_iceberg_jars", _TOOLS_JARS)
    if spec is None or spec.loader is None:
        raise JavaReaderError(f"cannot load {_TOOLS_JARS}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    jars: list[str] = module.iceberg_jars()
    return jars + (_s3_jars() or [])


def _s3_jars() -> list[str] | None:
    """Hadoop's S3A connector jars (``tools/s3_jars.py``) if extracted, so that S3 tables can be read."""
    spec = importlib.util.spec_from_file_location("rowops_tools_s3_jars", _TOOLS_JARS.with_name("s3_jars.py"))
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found: list[str] | None = module.available()
    return found


def hadoop_s3_conf(options: dict[str, str]) -> dict[str, str]:
    """Hadoop settings for Iceberg's HadoopFileIO on ``s3://`` paths, from pyiceberg FileIO options."""
    endpoint = options["s3.endpoint"]
    conf = {
        "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "fs.s3a.endpoint": endpoint,
        "fs.s3a.access.key": options["s3.access-key-id"],
        "fs.s3a.secret.key": options["s3.secret-access-key"],
        "fs.s3a.path.style.access": options.get("s3.path-style-access", "true"),
        "fs.s3a.connection.ssl.enabled": str(endpoint.startswith("https://")).lower(),
    }
    return conf


def _spawn(argv: list[str], env: dict[str, str], work: Path, reply_fd: int) -> subprocess.Popen[bytes]:
    """Start the worker in its own process group (worker + JVM), logging to ``work/worker.log``.

    ``reply_fd`` (the pipe's write end) is handed to the worker and always closed here, so the
    client sees EOF as soon as the worker dies.
    """
    try:
        with open(work / "worker.log", "wb") as log:
            return subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=work,
                env=env,
                pass_fds=(reply_fd,),
                start_new_session=True,
            )
    finally:
        os.close(reply_fd)


class JavaIcebergReader:
    """Client of the Java worker: start once, ``read()`` many tables, ``close()`` (or use ``with``)."""

    def __init__(
        self,
        jars: Sequence[str] | None = None,
        *,
        startup_timeout: float = 180.0,
        read_timeout: float = 120.0,
        driver_memory: str = "1g",
        hadoop_conf: dict[str, str] | None = None,
        spark_conf: dict[str, str] | None = None,
    ) -> None:
        """``hadoop_conf``: Hadoop settings of the worker's session from its start (S3 endpoint and keys:
        Iceberg's path-based tables keep the Hadoop configuration of their first load); ``spark_conf``:
        more Spark settings of it (the tests' JVM options, ``tests/jvm_options.py``)."""
        self._jars = list(jars) if jars is not None else None
        self._hadoop_conf = dict(hadoop_conf or {})
        self._spark_conf = dict(spark_conf or {})
        self._startup_timeout = startup_timeout
        self._read_timeout = read_timeout
        self._driver_memory = driver_memory
        self._proc: subprocess.Popen[bytes] | None = None
        self._reply_fd = -1
        self._buffer = b""
        self._workdir: tempfile.TemporaryDirectory[str] | None = None
        self._lock = threading.Lock()
        self.last_required: list[str] = []
        self._reads = 0
        self.startup_seconds: float | None = None

    def __enter__(self) -> JavaIcebergReader:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def running(self) -> bool:
        """Whether the worker process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> JavaIcebergReader:
        """Launch the worker and wait until its SparkSession is up; a no-op when already running."""
        if self.running:
            return self
        self._kill()  # leftovers of a worker that died
        began = time.monotonic()
        jars = self._jars or default_jars()
        self._workdir = tempfile.TemporaryDirectory(prefix="rowops-java-oracle-")
        work = Path(self._workdir.name)
        (work / "conf").mkdir()
        (work / "conf" / "log4j2.properties").write_text(_LOG4J2)
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        env.update(SPARK_CONF_DIR=str(work / "conf"), PYTHONUNBUFFERED="1")
        env["ROWOPS_JAVA_HADOOP_CONF"] = json.dumps(self._hadoop_conf)
        env["ROWOPS_JAVA_SPARK_CONF"] = json.dumps(self._spark_conf)
        env.pop("PYSPARK_SUBMIT_ARGS", None)
        self._reply_fd, write_fd = os.pipe()
        self._buffer = b""
        argv = [sys.executable, str(Path(__file__).resolve()), "--reply-fd", str(write_fd)]
        argv += ["--driver-memory", self._driver_memory, *jars]
        try:
            self._proc = _spawn(argv, env, work, write_fd)
            self._receive(self._startup_timeout)
        except BaseException:
            self._kill()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def read(
        self,
        metadata_location: str,
        snapshot_id: int | None = None,
        options: dict[str, str] | None = None,
        ref: tuple[str, str] | None = None,
        columns: Sequence[str] | None = None,
        read_options: dict[str, str] | None = None,
    ) -> pa.Table:
        """Read a table (optionally at ``snapshot_id``) through ``spark.read.format("iceberg")``.

        ``options``: pyiceberg FileIO properties of an S3 lake (endpoint, credentials).
        ``ref``: ``("branch", name)`` or ``("tag", name)``, Iceberg's read options for snapshot refs.
        ``columns``: the columns to select, metadata columns included (v3 row lineage: ``_row_id``,
        ``_last_updated_sequence_number``); default: the table's columns.
        ``read_options``: more Iceberg read options, e.g. ``start-snapshot-id`` / ``end-snapshot-id``
        (an incremental append scan, what streaming and CDC consumers read).
        The names of the columns Iceberg reports NOT NULL (required) are kept in ``last_required``.
        """
        with self._lock:
            if not self.running or self._workdir is None:
                raise JavaReaderError("the Java worker is not running; call start() or use `with`")
            self._reads += 1
            out = Path(self._workdir.name) / f"read-{self._reads}.parquet"
            request: dict[str, Any] = {"metadata_location": str(metadata_location), "out": str(out)}
            if snapshot_id is not None:
                request["snapshot_id"] = int(snapshot_id)
            if ref is not None:
                request["ref"] = list(ref)
            if columns is not None:
                request["columns"] = list(columns)
            if read_options:
                request["read_options"] = {k: str(v) for k, v in read_options.items()}
            if options and "s3.endpoint" in options:
                request["hadoop"] = hadoop_s3_conf(options)
            reply = self._request(request, self._read_timeout)
            if not reply.get("ok"):
                raise JavaReadError(f"Java reader failed on {metadata_location}: {reply.get('error')}")
            self.last_required = list(reply.get("required", []))
            try:
                return pq.read_table(out)
            finally:
                out.unlink(missing_ok=True)

    def close(self, timeout: float = 30.0) -> None:
        """Ask the worker to stop Spark and exit; kill its process group if it does not."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(JavaReaderError, subprocess.TimeoutExpired):
                self._request({"cmd": "shutdown"}, timeout)
                proc.wait(timeout)
        self._kill()

    def _request(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps(request).encode() + b"\n")
            self._proc.stdin.flush()
        except OSError as exc:
            self._fail(f"cannot send request to the Java worker ({exc})")
        return self._receive(timeout)

    def _receive(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._fail(f"no reply from the Java worker within {timeout:g}s")
            ready, _, _ = select.select([self._reply_fd], [], [], min(remaining, 1.0))
            if ready:
                chunk = os.read(self._reply_fd, 65536)
                if not chunk:
                    self._fail("the Java worker exited")
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        reply: dict[str, Any] = json.loads(line)
        return reply

    def _fail(self, message: str) -> NoReturn:
        log_tail = self._log_tail()
        self._kill()
        raise JavaReaderError(f"{message}; worker log tail:\n{log_tail}")

    def _log_tail(self, limit: int = 4000) -> str:
        if self._workdir is None:
            return ""
        log = Path(self._workdir.name) / "worker.log"
        return log.read_bytes()[-limit:].decode(errors="replace") if log.exists() else ""

    def _kill(self) -> None:
        if self._proc is not None:
            # Also after a clean exit: the JVM child may outlive the worker for a moment.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
            if self._proc.stdin is not None:
                with contextlib.suppress(OSError):
                    self._proc.stdin.close()
            self._proc = None
        if self._reply_fd >= 0:
            os.close(self._reply_fd)
            self._reply_fd = -1
        if self._workdir is not None:
            self._workdir.cleanup()
            self._workdir = None


# ---------------------------------------------------------------- worker side (runs in the subprocess)


def _short_error(exc: BaseException, limit: int = 3000) -> str:
    """Exception text without Java stack frames (py4j errors are otherwise thousands of lines)."""
    frames = ("at ", "... ")
    lines = [ln for ln in str(exc).splitlines() if ln.strip() and not ln.lstrip().startswith(frames)]
    return f"{type(exc).__name__}: " + "\n".join(lines)[:limit]


def _serve(reply_fd: int, jars: list[str], driver_memory: str) -> None:
    # pyspark is imported here so that importing this module (client side, doctest collection)
    # stays cheap; only the worker process needs it.
    from pyspark.sql import SparkSession

    reply = os.fdopen(reply_fd, "w", buffering=1)
    conf = {
        "spark.master": "local[2]",
        "spark.app.name": "rowops-java-oracle",
        "spark.jars": ",".join(jars),
        "spark.driver.memory": driver_memory,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.warehouse.dir": os.path.abspath("spark-warehouse"),
    }
    hadoop = json.loads(os.environ.get("ROWOPS_JAVA_HADOOP_CONF") or "{}")
    conf.update({f"spark.hadoop.{key}": value for key, value in hadoop.items()})
    conf.update(json.loads(os.environ.get("ROWOPS_JAVA_SPARK_CONF") or "{}"))
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    reply.write(json.dumps({"ok": True, "spark": spark.version}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("cmd") == "shutdown":
            break
        try:
            hadoop = spark.sparkContext._jsc.hadoopConfiguration()
            for key, value in request.get("hadoop", {}).items():
                hadoop.set(key, value)
            reader = spark.read.format("iceberg")
            if request.get("snapshot_id") is not None:
                reader = reader.option("snapshot-id", str(request["snapshot_id"]))
            if request.get("ref") is not None:
                reader = reader.option(request["ref"][0], request["ref"][1])
            for key, value in request.get("read_options", {}).items():
                reader = reader.option(key, value)
            df = reader.load(request["metadata_location"])
            if request.get("columns") is not None:
                df = df.select(*request["columns"])
            batches = df._collect_as_arrow()
            table = pa.Table.from_batches(batches) if batches else _empty_table(df.schema)
            table = table.cast(_nullable_schema(table.schema))  # a NULL struct's required field holds NULLs
            pq.write_table(table, request["out"])
            required = [f.name for f in df.schema.fields if not f.nullable]
            answer: dict[str, Any] = {"ok": True, "rows": table.num_rows, "required": required}
        except Exception as exc:
            answer = {"ok": False, "error": _short_error(exc)}
        reply.write(json.dumps(answer) + "\n")
    spark.stop()
    with contextlib.suppress(BrokenPipeError):  # the client may be gone already (stdin EOF)
        reply.write(json.dumps({"ok": True, "bye": True}) + "\n")
        reply.close()


def _nullable(t: pa.DataType) -> pa.DataType:
    if isinstance(t, pa.StructType):
        return pa.struct([_nullable_field(t.field(i)) for i in range(t.num_fields)])
    if isinstance(t, pa.MapType):
        return pa.map_(t.key_field, _nullable_field(t.item_field))
    if isinstance(t, pa.ListType):
        return pa.list_(_nullable_field(t.value_field))
    return t


def _nullable_field(f: pa.Field) -> pa.Field:
    return pa.field(f.name, _nullable(f.type), True)


def _nullable_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with nested fields nullable: Arrow rejects a non-nullable child with NULLs, which a
    NULL struct's required field holds (the required columns are reported apart, ``required``)."""
    return pa.schema([pa.field(f.name, _nullable(f.type), f.nullable) for f in schema])


def _empty_table(schema: Any) -> pa.Table:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema).empty_table()


def _worker_main(argv: list[str]) -> None:
    if len(argv) < 5 or argv[0] != "--reply-fd" or argv[2] != "--driver-memory":
        sys.exit("usage: java_reader.py --reply-fd N --driver-memory M JAR...")
    _serve(int(argv[1]), argv[4:], argv[3])


if __name__ == "__main__":
    _worker_main(sys.argv[1:])
