"""How Spark is told which Parquet files to read: named one by one, or their directories listed.

Spark's file source stats every file it is given by name, one by one on the driver
(``DataSource.checkAndGlobPathIfNecessary`` checks each path, then ``InMemoryFileIndex`` lists each
one; a Spark job does it when there are more than ``parallelPartitionDiscovery.threshold`` paths,
which costs a job per DataFrame). On object storage that is a few requests per file. From
:data:`MIN_FILES` files on object storage (local files: only when :data:`MIN_FILES_CONF` is set), rowops gives Spark the files' *directories* instead (one listing per
directory: a LIST request per 1,000 entries on S3) and keeps exactly the named files with a filter on
``_metadata.file_path``: Spark's file index evaluates filters on constant metadata columns per listed
file, before any read is planned (``PartitioningAwareFileIndex.listFiles``, Spark 3.4+, 4.x), so
other files of those directories (orphans, files of uncommitted attempts, files of older snapshots)
are never opened. Measured by ``tools/bench_listing.py`` (tpcds/results/HISTORY.md, "Metadata paths").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pyspark.sql import DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F

from rowops.exec.spark.compat import parquet_files
from rowops.exec.spark.literal_frames import sql_string
from rowops.exec.spark.session import int_conf, session_conf
from rowops.meta.hadoop_uri import qualified_uri
from rowops.meta.paths import is_remote, normalize_path, parent, spark_uri

# keys Spark names by their plain URI (spark_uri: "file:" + path, s3:// as s3a://), nothing escaped
_PLAIN = re.compile(r"^(/|s3://)[A-Za-z0-9/_.=\-]*$")
MIN_FILES_CONF = "rowops.scan.directory-listing-min-files"
MIN_FILES = 64  # below this, naming the files costs about as little as listing their directories


DISCOVERY_CONF = "spark.sql.sources.parallelPartitionDiscovery.threshold"
# while Spark resolves a read's files: stat or list them on the driver, never in a Spark job
DRIVER_LISTING = {DISCOVERY_CONF: "100000"}


def min_files(spark: SparkSession, remote: bool) -> int:
    """The session's :data:`MIN_FILES_CONF` (Spark conf; 0: never list); unset, :data:`MIN_FILES` on
    object storage and 0 for local files (a local stat is a cheap system call: naming 10,000 local
    files cost the same as listing, 100,000 cost less, ``tools/bench_listing.py``)."""
    return int_conf(spark, MIN_FILES_CONF, MIN_FILES if remote else 0)


def directories(keys: Sequence[str]) -> list[str] | None:
    """The fewest directories whose listing finds every key (a directory below another is dropped),
    or None when listing could miss a key. (A listing is one request per 1,000 entries, a named file a
    few requests of its own: never more requests, unless a directory holds many more files than named.)

    Spark's listing skips names starting with ``_`` or ``.`` (and ``*._COPYING_``) below the directory
    it is given, so a key with such a name on its way down is never read by listing.

    >>> directories(["/t/data/a/1.parquet", "/t/data/a/2.parquet", "/t/data/a/p=1/3.parquet", "/t/data/b/4.parquet"])
    ['/t/data/a', '/t/data/b']
    >>> directories(["s3://b/t/data/a/1.parquet", "s3://b/t/data/a/2.parquet"])
    ['s3://b/t/data/a']
    >>> directories(["/t/a/_x.parquet", "/t/a/y.parquet"]) is None
    True
    >>> directories(["/t/a/1.parquet", "/t/b/2.parquet"])
    ['/t/a', '/t/b']
    >>> directories(["/t/a/1.parquet", "/t/a-b/2.parquet", "/t/a/p=1/3.parquet"])  # '-' sorts before '/'
    ['/t/a', '/t/a-b']
    """
    normalized = [normalize_path(k) for k in keys]
    parents = {parent(k) for k in normalized}
    root_of = {d: _outermost(d, parents) for d in parents}  # O(depth) per directory
    for key in normalized:
        names = key[len(root_of[parent(key)]) + 1 :].split("/")
        if any(n.startswith(("_", ".")) or n.endswith("._COPYING_") for n in names):
            return None
    return sorted(set(root_of.values()))


def _outermost(directory: str, directories: set[str]) -> str:
    """The outermost of ``directories`` that is ``directory`` or holds it."""
    found, current = directory, directory
    while "/" in current.rstrip("/"):
        current = parent(current)
        if current in directories:
            found = current
    return found


def spark_name(key: str) -> str:
    """Spark's ``_metadata.file_path`` of the file at ``key`` (a manifest path).

    Plain local paths only gain the ``file:`` scheme; anything else is qualified as Hadoop does it for
    Spark's file index (``Path.toUri``, which URL-encodes), computed in Python (no JVM: Spark Connect).
    """
    return spark_uri(key) if _PLAIN.match(key) else qualified_uri(key)


def read_files(spark: SparkSession, reader: DataFrameReader, keys: Sequence[str]) -> DataFrame:
    """``reader`` (Parquet, schema set) over exactly the files at ``keys``: named, or their
    directories listed and the files kept by name (see the module docstring)."""
    threshold = min_files(spark, any(is_remote(k) for k in keys[:1]))
    roots = directories(keys) if threshold and len(keys) >= threshold else None
    # Spark resolves the files when the DataFrame is created (classic sessions): above its parallel
    # discovery threshold (32 paths by default, or 32 directories below a listed one) it would start a
    # listing job of up to 10,000 tasks per DataFrame (4.6 s for 1,000 local files, 31 s for 10,000)
    with session_conf(spark, DRIVER_LISTING):
        if roots is None:
            return parquet_files(spark, reader, [spark_uri(k) for k in keys])
        names = sorted({spark_name(k) for k in keys})
        listed = parquet_files(spark, reader, [spark_uri(r) for r in roots])
        return listed.filter(F.expr(named_files(names)))


def named_files(names: Sequence[str]) -> str:
    """A SQL condition that keeps the rows of the files Spark names ``names``: one SQL string, parsed
    by Spark at once (``Column.isin`` would make one Py4J call per name on classic PySpark).

    >>> print(named_files(["file:/t/a.parquet", "s3a://b/it's.parquet"]))
    _metadata.file_path IN ('file:/t/a.parquet', 's3a://b/it\\'s.parquet')
    """
    return f"_metadata.file_path IN ({', '.join(sql_string(n) for n in names)})"
