"""What creating and planning a DataFrame over N explicitly named Parquet files costs (issue 12).

For N tiny Parquet files (one directory, plus orphans that must not be read), locally and on an S3
lake (moto on loopback, S3A test jars), it times four ways of reading exactly the named files:

* ``explicit``: ``spark.read.parquet(*paths)`` with the listing on the driver
  (``parallelPartitionDiscovery.threshold=100000``, rowops' setting);
* ``explicit-job``: the same with Spark's parallel listing job (threshold 32, Spark's default);
* ``directory-isin``: the files' directory read once, files kept by
  ``_metadata.file_path.isin(names)``, which Spark's file index evaluates per listed file before
  planning any read (``PartitioningAwareFileIndex.listFiles`` applies filters on constant metadata
  columns), so no file is stat-ed on its own; ``isin`` costs a Py4J call per name;
* ``rowops``: :func:`rowops.exec.reading.file_reads.read_parquet` listing directories (``exec/spark/listing.py``, here
  with ``rowops.scan.directory-listing-min-files=1``): the same filter as one SQL string.

Each figure is the wall time of creating the DataFrame plus planning it (``explain``: the physical
plan lists the files), best of ``--repeat`` runs; with ``--count`` the rows are counted once as a
check that exactly the named files are read (orphans have rows too).

Usage::

    python tools/bench_listing.py --files 1000 10000 [--s3] [--out tpcds/results/listing-local.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pyspark
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rowops.exec.reading.file_reads import read_parquet
from rowops.exec.spark.compat import explain_text
from rowops.exec.spark.listing import MIN_FILES_CONF
from rowops.meta.fileio import s3a_conf
from rowops.meta.paths import spark_uri
from tools import s3_jars

SCHEMA = "k long, v string"
ORPHANS = 10  # files in the directory that are not named (and must not be read)


def tiny_table(rows: int, start: int) -> pa.Table:
    return pa.table({"k": pa.array(range(start, start + rows), pa.int64()), "v": ["x"] * rows})


def write_files(put: Callable[[str, bytes], None], root: str, count: int) -> list[str]:
    """``count`` named files plus :data:`ORPHANS` orphans in ``root``; the named ones' paths."""
    names = [f"{root}/data/{i:07d}-f.parquet" for i in range(count + ORPHANS)]

    def write(i: int) -> None:
        sink = pa.BufferOutputStream()
        pq.write_table(tiny_table(2, 2 * i), sink)
        put(names[i], sink.getvalue().to_pybytes())

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, range(len(names))))
    return names[:count]


def explicit(spark: SparkSession, keys: list[str]) -> DataFrame:
    return spark.read.schema(SCHEMA).option("recursiveFileLookup", "true").parquet(*map(spark_uri, keys))


def directory(spark: SparkSession, keys: list[str]) -> DataFrame:
    parent = spark_uri(keys[0].rsplit("/", 1)[0])
    df = spark.read.schema(SCHEMA).option("recursiveFileLookup", "true").parquet(parent)
    return df.filter(F.col("_metadata.file_path").isin([spark_uri(k) for k in keys]))


def timed(make: Callable[[], DataFrame], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        began = time.perf_counter()
        explain_text(make(), "simple")
        best = min(best, time.perf_counter() - began)
    return round(best, 3)


def measure(
    spark: SparkSession, keys: list[str], repeat: int, count: bool, skip: list[str]
) -> dict[str, object]:
    """Seconds per approach (create + plan), and row counts as a check with ``count``."""
    out: dict[str, object] = {}
    struct = T.StructType([T.StructField("k", T.LongType()), T.StructField("v", T.StringType())])
    approaches: dict[str, tuple[str, Callable[[], DataFrame]]] = {
        "explicit": ("100000", lambda: explicit(spark, keys)),
        "explicit-job": ("32", lambda: explicit(spark, keys)),
        "directory-isin": ("100000", lambda: directory(spark, keys)),
        "rowops": ("100000", lambda: read_parquet(spark, struct, keys)),
    }
    for name, (threshold, make) in approaches.items():
        if name in skip:
            continue
        spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.threshold", threshold)
        out[name] = timed(make, repeat)
        if count:
            out[f"{name}-rows"] = make().count()
        print(f"  {name}: {out[name]} s", flush=True)
    spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.threshold", "100000")
    return out


Storage = tuple[Callable[[str, bytes], None], str, Callable[[str], str]]  # put, root, path -> key


@contextmanager
def local_root() -> Iterator[Storage]:
    def put(path: str, data: bytes) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(data)

    with tempfile.TemporaryDirectory(prefix="bench-listing-") as tmp:
        yield put, tmp, lambda path: path


@contextmanager
def s3_root(spark: SparkSession) -> Iterator[Storage]:
    """A bucket on a moto server; objects put with boto3 (pyarrow's S3 file system checks parent
    "directories" on every write, quadratic in the files of a prefix on moto)."""
    from tests.oracles.s3_server import s3_server

    with s3_server() as server:
        for key, value in s3a_conf(server.options).items():
            spark.conf.set(key.removeprefix("spark.hadoop."), value)
        bucket = server.new_bucket()
        client = server.client()

        def put(path: str, data: bytes) -> None:
            client.put_object(Bucket=bucket, Key=path.split("/", 1)[1], Body=data)

        yield put, bucket + "/lake", lambda path: "s3://" + path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--s3", action="store_true", help="on a moto S3 server instead of local files")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--count", action="store_true", help="also count rows (a check, slow)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--skip", nargs="*", default=[], help="approaches not measured (e.g. explicit-job)")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
    builder = builder.config("spark.ui.showConsoleProgress", "false")
    for key, value in s3_jars.session_conf(pyspark.__version__).items():
        builder = builder.config(key, value)
    spark = builder.config("spark.driver.memory", "2g").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set(MIN_FILES_CONF, "1")  # "rowops" lists directories on local files too
    results = []
    try:
        with s3_root(spark) if args.s3 else local_root() as (put, root, to_key):
            for n in args.files:
                sub = f"{root}/n{n}"
                print(f"{'s3' if args.s3 else 'local'} N={n}: writing", flush=True)
                keys = [to_key(p) for p in write_files(put, sub, n)]
                results.append({"files": n, **measure(spark, keys, args.repeat, args.count, args.skip)})
                write_report(args, results)
    finally:
        spark.stop()


def write_report(args: argparse.Namespace, results: list[dict[str, object]]) -> None:
    """Print the figures so far and write them to ``--out`` (after every N: a long run keeps its part)."""
    report = {
        "storage": "s3 (moto on loopback)" if args.s3 else "local",
        "spark": pyspark.__version__,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared)",
        "unit": f"seconds to create and plan one DataFrame (best of {args.repeat})",
        "orphans": ORPHANS,
        "results": results,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
