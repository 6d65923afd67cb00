"""The SparkSession rowops runs on: created from ``conf/spark-defaults.conf`` or given by the caller.

rowops runs Python on the executors (partition transforms, the cardinality check), so every session it
uses gets rowops shipped to its executors (a zip of this package, ``exec/compat.add_py_file``:
``addArtifacts`` on Spark Connect) and one tiny job checks, once per application (Connect: per
session), that they can import it and its runtime dependencies.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import importlib
import os
import shutil
import stat
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
from pyspark.sql import SparkSession

from rowops.errors import ExecutorEnvironmentError, InvalidInputError
from rowops.exec.spark.compat import JOB_ERRORS, add_py_file, default_parallelism, session_key, set_log_level

# Settings rowops relies on; set on every session it uses (all are runtime SQL settings).
REQUIRED_CONF = {
    "spark.sql.parquet.fieldId.write.enabled": "true",  # Iceberg field ids in data files
    "spark.sql.parquet.fieldId.read.enabled": "true",  # read columns by Iceberg field id
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",  # Iceberg timestamps are micros
    "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
    "spark.sql.parquet.int96RebaseModeInWrite": "CORRECTED",
}
# Settings in force while an operation runs (restored afterwards). AQE's skew-join handling splits a
# skewed shuffle partition of one side and replicates the matching partition of the other side to
# every piece: a target row matched by source rows of different pieces would then meet them in
# different tasks, and the per-task cardinality check (``exec/checks/cardinality.py``) could miss it.
# rowops' co-located join already keeps target skew out of the shuffle.
OPERATION_CONF = {"spark.sql.adaptive.skewJoin.enabled": "false"}
DEFAULT_CONF = {
    "spark.master": "local[*]",
    "spark.app.name": "rowops",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "16",
    "spark.sql.adaptive.enabled": "true",
    # rowops names the exact files to read (on object storage from 64 files on it lists their
    # directories, exec/spark/listing.py); listing more than 32 paths in a Spark job cost ~0.8 s per DataFrame (vs 0.06 s
    # on the driver) after ten upserts of TPC-DS SF 1
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "100000",
}


def int_conf(spark: SparkSession, key: str, default: int) -> int:
    """A rowops Spark conf that holds a count of bytes or files (``default`` when unset).

    Raises:
        InvalidInputError: the value is not a whole number >= 0.
    """
    value = spark.conf.get(key, None)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise InvalidInputError(
            f"Spark conf {key}={value!r} is not a whole number >= 0",
            help=f"Set {key} to a whole number (default {default}), or unset it.",
        )
    return number


def conf_file() -> Path | None:
    """``$ROWOPS_CONF`` or ``./conf/spark-defaults.conf`` if present."""
    candidates = [os.environ.get("ROWOPS_CONF"), "conf/spark-defaults.conf"]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def read_conf(path: Path | None) -> dict[str, str]:
    """Parse a spark-defaults style file: ``key value`` per line, ``#`` comments."""
    conf = dict(DEFAULT_CONF)
    if path is None:
        return conf
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            key, _, value = line.partition(" ")
            conf[key] = value.strip()
    return conf


# What executors import: dependencies first, so a missing one is named rather than hidden behind rowops
EXECUTOR_MODULES = ("pyarrow", "pandas", "pyroaring", "pyiceberg_core", "pyiceberg", "sqlglot", "rowops")
_PACKAGE = Path(__file__).resolve().parents[2]
_shipped: set[str] = set()  # application ids that got the zip
_checked: set[str] = set()  # application ids whose executors import everything


def configure(spark: SparkSession) -> SparkSession:
    """Apply the settings rowops requires to an existing session and prepare its executors."""
    for key, value in REQUIRED_CONF.items():
        spark.conf.set(key, value)
    prepare_executors(spark)
    return spark


@functools.lru_cache(maxsize=1)
def package_zip() -> str:
    """A zip of this rowops package (its ``.py`` files), built once per content of the package.

    It lives in ``<temp dir>/rowops-py-<uid>-<hash of the sources>/rowops.zip``: every process of the
    same user and rowops code reuses it (no folder per process; a process killed while building
    leaves at most a temp file there, never a half-written zip). A folder that is not this user's
    alone (another owner, writable by others) is never used: then a private folder is built and
    removed at exit.
    """
    sources = sorted(_PACKAGE.rglob("*.py"))
    digest = hashlib.sha256()
    for source in sources:
        digest.update(str(source.relative_to(_PACKAGE)).encode() + b"\0" + source.read_bytes() + b"\0")
    folder = Path(tempfile.gettempdir()) / f"rowops-py-{os.getuid()}-{digest.hexdigest()[:16]}"
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    if not _private(folder):
        folder = Path(tempfile.mkdtemp(prefix="rowops-py-"))
        atexit.register(shutil.rmtree, folder, True)
    target = folder / "rowops.zip"
    if not target.exists():
        partial = folder / f".rowops-{os.getpid()}-{threading.get_ident()}.zip.tmp"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for source in sources:
                archive.write(source, Path("rowops") / source.relative_to(_PACKAGE))
        os.replace(partial, target)  # atomic: a concurrent process sees no zip or a whole one
    return str(target)


def _private(folder: Path) -> bool:
    """Whether ``folder`` is a real directory of this user that no one else can write to."""
    info = folder.lstat()
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o022


def prepare_executors(spark: SparkSession) -> None:
    """Ship rowops to the executors and check, once per application, that they can run it.

    Raises:
        ExecutorEnvironmentError: executors lack modules rowops needs (named), or cannot run Python.
    """
    app = session_key(spark)
    if app in _checked:
        return
    if app not in _shipped:
        add_py_file(spark, package_zip())
        _shipped.add(app)
    tasks = default_parallelism(spark)
    probe = spark.range(tasks, numPartitions=tasks).mapInArrow(_probe(EXECUTOR_MODULES), _PROBE_SCHEMA)
    try:
        found = [row.problems for row in probe.collect()]
    except JOB_ERRORS as exc:
        first = next((line for line in str(exc).splitlines() if line.strip()), "")
        raise ExecutorEnvironmentError(
            f"Spark's executors cannot run rowops' Python code: {first[:300]}"
        ) from exc
    missing = sorted({problem for problems in found for problem in problems})
    if missing:
        raise ExecutorEnvironmentError(
            "Spark's executors cannot import modules rowops needs: " + "; ".join(missing)
        )
    _checked.add(app)


_PROBE_SCHEMA = "problems array<string>"


def _probe(
    modules: Iterable[str],
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` task that lists the ``modules`` it cannot import, one row per task (nested:
    pickled by value, not as rowops'; pyarrow is what ``mapInArrow`` itself needs)."""
    names = list(modules)

    def missing(_: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        problems = []
        for name in names:
            try:
                importlib.import_module(name)
            except Exception as exc:  # any import failure is a broken environment to report
                problems.append(f"{name} ({type(exc).__name__}: {exc})")
        yield pa.RecordBatch.from_pydict(
            {"problems": [problems]}, pa.schema([("problems", pa.list_(pa.string()))])
        )

    return missing


@contextmanager
def operation_conf(spark: SparkSession) -> Iterator[None]:
    """Apply :data:`OPERATION_CONF` for the duration of one operation, then restore the session's values."""
    with session_conf(spark, OPERATION_CONF):
        yield


# Settings in force through session_conf: (session, key) -> the value before the first block and the
# blocks' values, innermost or latest last. Blocks may nest and may overlap in driver threads (an
# operation's writes run together, ``exec/spark/parallel.py``), so a block that ends restores the value of
# the latest block still running, and the session's own value only when none is.
_CONF_LOCK = threading.Lock()
_CONF_LAYERS: dict[tuple[int, str], tuple[str | None, list[tuple[object, str]]]] = {}


@contextmanager
def session_conf(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Apply ``settings`` to the session while the block runs, then restore the session's values.

    Safe across driver threads: overlapping blocks never leave one of their values behind.
    """
    token = object()
    with _CONF_LOCK:
        for key, value in settings.items():
            original, layers = _CONF_LAYERS.setdefault((id(spark), key), (spark.conf.get(key, None), []))
            layers.append((token, value))
            spark.conf.set(key, value)
    try:
        yield
    finally:
        with _CONF_LOCK:
            for key in settings:
                original, layers = _CONF_LAYERS[(id(spark), key)]
                layers[:] = [(t, v) for t, v in layers if t is not token]
                if layers:
                    spark.conf.set(key, layers[-1][1])
                    continue
                del _CONF_LAYERS[(id(spark), key)]
                if original is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, original)


def create_session(
    conf_path: Path | None = None, hadoop_conf: Mapping[str, str] | None = None
) -> SparkSession:
    """Get or create the local SparkSession configured for rowops.

    Args:
        hadoop_conf: extra settings (the lake's ``spark.hadoop.fs.s3a.*``), below ``REQUIRED_CONF``.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder
    settings = {**read_conf(conf_path or conf_file()), **(hadoop_conf or {}), **REQUIRED_CONF}
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    set_log_level(spark, _LOG_LEVEL[0])
    return configure(spark)


_LOG_LEVEL = ["ERROR"]  # Spark's log level in the sessions create_session makes


def use_log_level(level: str) -> None:
    """Spark's (log4j) log level in the sessions ``create_session`` makes from now on: ``ERROR`` by
    default; the command line uses ``FATAL`` so that a failed task's Java stack trace (Spark logs it at
    ERROR) does not precede its own clean message."""
    _LOG_LEVEL[0] = level
