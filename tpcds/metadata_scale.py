"""Metadata-scale benchmark (``make bench-metadata``): planning and commit time vs the number of files.

For each size N (``--files 1000,10000``; 100000 is optional) one synthetic table is built without Spark:

* N tiny data files (10 rows each: ``k`` long = the file's key range, ``p`` int = file index mod 100,
  ``v`` string) and N position-delete files (one per data file, deleting its first row), written with
  pyarrow in threads;
* a history of ``--commits`` (default 1,000) cheap commits, each adding N/commits data files and their
  delete files in one data and one delete manifest (rowops' own manifest writers,
  ``rowops/commit/manifests.py``): the current snapshot has 2 x commits manifests, as a table fed by
  that many streaming upserts without manifest merging has;
* ``metadata/v1.metadata.json`` + ``version-hint.text``: a Hadoop-catalog table Iceberg's Spark runtime
  opens as ``bench.db.t``, registered in a rowops lake as ``db.t`` (same files, same state).

Then each engine runs in its own subprocess (one JVM each, ``local[2]``), ``--runs`` times per step
after one warm-up, each timer covering everything the user waits for:

===============  =========================================  ==============================================
step             rowops                                     Iceberg 1.10.2 (Spark runtime)
===============  =========================================  ==============================================
merge-plan       ``rowops.explain`` of a MERGE of 10 keys   ``EXPLAIN MERGE INTO`` of the same 10 rows
                 in 10 different files (pre-scan, pruning,
                 cost model, Spark's physical plan)
read-plan        ``to_df().inputFiles()`` (rowops resolves  ``spark.table(t).rdd.getNumPartitions()``
                 every file when the DataFrame is created)  (Iceberg's ``planFiles``: V2 scans have no
                                                            ``inputFiles``)
update-plan      ``rowops.explain`` of ``UPDATE .. WHERE    ``EXPLAIN UPDATE .. WHERE p = 3``
                 p = 3``
commit           ``t.delete(where="p = 3")`` (a whole       ``DELETE FROM t WHERE p = 3`` (a metadata-only
                 partition: metadata-only, no Spark job)    delete in Iceberg too); rolled back after each
===============  =========================================  ==============================================

The plan steps compare what each user waits for before the job starts, not the same work: Iceberg's
``EXPLAIN`` analyses and optimizes the statement and plans the scan's files only when it runs (the
statistics of a partitioned table come from the snapshot summary), while rowops' explain also
pre-scans the source keys (a Spark job), prunes files and runs the cost model.

``merge-plan-cold`` is the first MERGE plan of each process (rowops parses every manifest then; later
plans find the entries in its manifest cache, ``meta/manifests.py``; Iceberg re-reads manifests on every
plan). Results: ``tpcds/results/metadata-scale.json`` and ``metadata-scale.png`` (median seconds vs files).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.conversions import to_bytes
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestContent, ManifestFile
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.serializers import ToOutputFile
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.refs import SnapshotRef, SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot, SnapshotLogEntry, Summary
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import IntegerType, LongType, NestedField, StringType

from rowops.commit.manifests import write_added, write_list
from rowops.meta.files import FILE_PATH_ID, POS_ID

REPO = Path(__file__).resolve().parent.parent
PARTITIONS = 100
ROWS_PER_FILE = 10
SCHEMA = Schema(
    NestedField(1, "k", LongType(), required=True),
    NestedField(2, "p", IntegerType(), required=False),
    NestedField(3, "v", StringType(), required=False),
    identifier_field_ids=[1],
)
SPEC = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "p"), spec_id=0)
_ARROW = pa.schema(
    [
        pa.field("k", pa.int64(), nullable=False, metadata={"PARQUET:field_id": "1"}),
        pa.field("p", pa.int32(), metadata={"PARQUET:field_id": "2"}),
        pa.field("v", pa.string(), metadata={"PARQUET:field_id": "3"}),
    ]
)
_DELETES = pa.schema(
    [
        pa.field("file_path", pa.string(), nullable=False, metadata={"PARQUET:field_id": str(FILE_PATH_ID)}),
        pa.field("pos", pa.int64(), nullable=False, metadata={"PARQUET:field_id": str(POS_ID)}),
    ]
)
TOUCHED = 10  # files a MERGE touches
STEPS = ("merge-plan", "read-plan", "update-plan", "commit")


def log(message: str) -> None:
    print(f"[metadata-scale {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- building the table (no Spark)


def _write_pair(location: Path, j: int) -> tuple[DataFile, DataFile]:
    """Data file ``j`` (keys 10j .. 10j+9, partition j mod 100) and its position delete file."""
    p = j % PARTITIONS
    data_path = location / "data" / f"p={p}" / f"d-{j:07d}.parquet"
    keys = list(range(j * ROWS_PER_FILE, (j + 1) * ROWS_PER_FILE))
    rows = pa.table({"k": keys, "p": [p] * len(keys), "v": ["x"] * len(keys)}, schema=_ARROW)
    pq.write_table(rows, data_path)
    uri = f"file:{data_path}"
    delete_path = location / "data" / f"p={p}" / f"pd-{j:07d}.parquet"
    pq.write_table(pa.table({"file_path": [uri], "pos": [0]}, schema=_DELETES), delete_path)
    data = DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=uri,
        file_format=FileFormat.PARQUET,
        partition=Record(p),
        record_count=len(keys),
        file_size_in_bytes=data_path.stat().st_size,
        value_counts={1: len(keys), 2: len(keys), 3: len(keys)},
        null_value_counts={1: 0, 2: 0, 3: 0},
        lower_bounds={1: to_bytes(LongType(), keys[0]), 2: to_bytes(IntegerType(), p), 3: b"x"},
        upper_bounds={1: to_bytes(LongType(), keys[-1]), 2: to_bytes(IntegerType(), p), 3: b"x"},
        spec_id=0,
    )
    delete = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=f"file:{delete_path}",
        file_format=FileFormat.PARQUET,
        partition=Record(p),
        record_count=1,
        file_size_in_bytes=delete_path.stat().st_size,
        value_counts={FILE_PATH_ID: 1, POS_ID: 1},
        null_value_counts={FILE_PATH_ID: 0, POS_ID: 0},
        lower_bounds={FILE_PATH_ID: uri.encode(), POS_ID: to_bytes(LongType(), 0)},
        upper_bounds={FILE_PATH_ID: uri.encode(), POS_ID: to_bytes(LongType(), 0)},
        spec_id=0,
    )
    return data, delete


def build_table(location: Path, files: int, commits: int) -> str:
    """Write the table; returns the path of its ``v1.metadata.json``."""
    started = time.perf_counter()
    for p in range(PARTITIONS):
        (location / "data" / f"p={p}").mkdir(parents=True, exist_ok=True)
    (location / "metadata").mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=8) as pool:
        pairs = list(pool.map(lambda j: _write_pair(location, j), range(files)))
    log(f"{files} data + {files} delete files written in {time.perf_counter() - started:.1f}s")
    io, meta_dir = PyArrowFileIO(), f"file:{location}/metadata"
    base = new_table_metadata(SCHEMA, SPEC, UNSORTED_SORT_ORDER, f"file:{location}", {"format-version": "2"})
    schema, spec = base.schema(), base.spec()
    manifests: list[ManifestFile] = []
    snapshots: list[Snapshot] = []
    per = max(1, files // commits)
    now = int(time.time() * 1000) - commits * 1000
    for i in range(commits):
        chunk = pairs[i * per : (i + 1) * per] if i < commits - 1 else pairs[i * per :]
        snapshot_id, seq = 1_000_000 + i, i + 1
        new = [
            write_added([d for d, _ in chunk], ManifestContent.DATA, spec, schema, io,
                        f"{meta_dir}/m-{i:05d}-data.avro", snapshot_id),
            write_added([x for _, x in chunk], ManifestContent.DELETES, spec, schema, io,
                        f"{meta_dir}/m-{i:05d}-deletes.avro", snapshot_id),
        ] if chunk else []  # fmt: skip
        manifest_list = f"{meta_dir}/snap-{snapshot_id}.avro"
        parent = snapshots[-1].snapshot_id if snapshots else None
        write_list(io, manifest_list, snapshot_id, parent, seq, new + manifests)
        for m in new:  # the list assigned them this commit's sequence number
            m.sequence_number = m.min_sequence_number = seq
        manifests = new + manifests
        summary = Summary(
            Operation.APPEND, **{"added-data-files": str(len(chunk)), "added-delete-files": str(len(chunk))}
        )
        snapshots.append(
            Snapshot(snapshot_id=snapshot_id, parent_snapshot_id=parent, sequence_number=seq,
                     timestamp_ms=now + i * 1000, manifest_list=manifest_list, summary=summary, schema_id=0)
        )  # fmt: skip
    last = snapshots[-1]
    metadata = base.model_copy(
        update={
            "snapshots": snapshots,
            "current_snapshot_id": last.snapshot_id,
            "last_sequence_number": last.sequence_number,
            "snapshot_log": [
                SnapshotLogEntry(snapshot_id=s.snapshot_id, timestamp_ms=s.timestamp_ms) for s in snapshots
            ],
            "refs": {
                "main": SnapshotRef(snapshot_id=last.snapshot_id, snapshot_ref_type=SnapshotRefType.BRANCH)
            },
            "last_updated_ms": last.timestamp_ms,
        }
    )
    path = location / "metadata" / "v1.metadata.json"
    ToOutputFile.table_metadata(metadata, io.new_output(str(path)))
    (location / "metadata" / "version-hint.text").write_text("1")
    log(
        f"table of {files} files, {commits} commits, {len(manifests)} manifests in {time.perf_counter() - started:.1f}s"
    )
    return str(path)


# ---------------------------------------------------------------- timing (one engine per process)


def timed(step: Callable[[], object], runs: int, reset: Callable[[], object] | None = None) -> list[float]:
    """One warm-up, then ``runs`` timed calls (``reset`` runs untimed after each call)."""
    out = []
    for i in range(runs + 1):
        started = time.perf_counter()
        step()
        seconds = time.perf_counter() - started
        if reset is not None:
            reset()
        if i:
            out.append(seconds)
    return out


def merge_keys(files: int) -> list[int]:
    """One key in each of ``TOUCHED`` consecutive files in the middle of the table (a live row: not the
    deleted first). rowops prunes by the source's key range, so these are the only files it scans."""
    return [(files // 2 + j) * ROWS_PER_FILE + 5 for j in range(TOUCHED)]


def _session(conf: dict[str, str]):  # type: ignore[no-untyped-def]
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").config("spark.driver.memory", "4g")
    builder = builder.config("spark.ui.enabled", "false")
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run_rowops(work: Path, metadata: str, files: int, runs: int) -> dict[str, list[float]]:
    import rowops

    spark = _session({})
    shutil.rmtree(work / "lake", ignore_errors=True)  # a fresh lake per run (--reuse keeps the table)
    lake = rowops.Lakehouse(str(work / "lake"), spark=spark)
    table = lake.register_table("db.t", metadata)
    base = table.current_snapshot_id
    assert base is not None
    source = spark.createDataFrame(
        [(k, k // ROWS_PER_FILE % PARTITIONS, "y") for k in merge_keys(files)], "k long, p int, v string"
    )
    started = time.perf_counter()  # the first plan of the process: manifests read cold
    plan = rowops.explain(source, table, on=["k"])
    cold = time.perf_counter() - started
    assert f"{TOUCHED} scanned" in plan, plan[:600]
    results = {
        "merge-plan-cold": [cold],
        "merge-plan": timed(lambda: rowops.explain(source, table, on=["k"]), runs),
        "read-plan": timed(lambda: table.to_df().inputFiles(), runs),
        "update-plan": timed(
            lambda: rowops.explain(None, table, update_set={"v": "'y'"}, where="p = 3"), runs
        ),
        "commit": timed(lambda: table.delete(where="p = 3"), runs, lambda: table.rollback_to(base)),
    }
    spark.stop()
    return results


def run_iceberg(work: Path, files: int, runs: int) -> dict[str, list[float]]:
    from tpcds.bench import iceberg_jars

    spark = _session(
        {
            "spark.jars": ",".join(iceberg_jars()),
            "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
            "spark.sql.catalog.bench": "org.apache.iceberg.spark.SparkCatalog",
            "spark.sql.catalog.bench.type": "hadoop",
            "spark.sql.catalog.bench.warehouse": f"file:{work / 'warehouse'}",
            "spark.sql.catalog.bench.cache-enabled": "false",
        }
    )
    t = "bench.db.t"
    # the current snapshot (with --reuse, rolled-back deletes of earlier runs are newer snapshots)
    base = spark.sql(f"SELECT snapshot_id FROM {t}.refs WHERE name = 'main'").collect()[0][0]
    rows = [(k, k // ROWS_PER_FILE % PARTITIONS, "y") for k in merge_keys(files)]
    spark.createDataFrame(rows, "k long, p int, v string").createOrReplaceTempView("src")
    merge = f"EXPLAIN MERGE INTO {t} t USING src s ON t.k = s.k WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    started = time.perf_counter()  # the first plan of the process (the JVM is warm from the query above)
    spark.sql(merge).collect()
    results = {
        "merge-plan-cold": [time.perf_counter() - started],
        "merge-plan": timed(lambda: spark.sql(merge).collect(), runs),
        # a DataSource V2 scan has no inputFiles (an empty list, nothing planned): its scan tasks are
        # planned when its RDD is built (Iceberg's planFiles: manifests, delete index, splits)
        "read-plan": timed(lambda: spark.table(t).rdd.getNumPartitions(), runs),
        "update-plan": timed(
            lambda: spark.sql(f"EXPLAIN UPDATE {t} SET v = 'y' WHERE p = 3").collect(), runs
        ),
        "commit": timed(
            lambda: spark.sql(f"DELETE FROM {t} WHERE p = 3"),
            runs,
            lambda: spark.sql(f"CALL bench.system.rollback_to_snapshot('db.t', {base})").collect(),
        ),
    }
    spark.stop()
    return results


# ---------------------------------------------------------------- orchestration, report, plot


def _phase(engine: str, work: Path, metadata: str, files: int, runs: int, timeout: float) -> dict[str, Any]:
    out = work / f"{engine}.json"
    cmd = [sys.executable, "-m", "tpcds.metadata_scale", "--worker", engine, "--work", str(work),
           "--metadata", metadata, "--files", str(files), "--runs", str(runs)]  # fmt: skip
    env = {**os.environ, "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
    started = time.perf_counter()
    try:
        subprocess.run(cmd, check=True, timeout=timeout, env=env, cwd=REPO)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        log(f"{engine} at {files} files failed: {exc}")
        return {"error": str(exc)}
    log(f"{engine} at {files} files: {time.perf_counter() - started:.0f}s")
    return dict(json.loads(out.read_text()))


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(STEPS), figsize=(4.2 * len(STEPS), 3.8))
    for ax, step in zip(axes, STEPS, strict=True):
        for engine, style in (("rowops", "o-"), ("iceberg", "s--")):
            points = [
                (r["files"], r[engine]["median"][step])
                for r in report["sizes"]
                if "median" in r.get(engine, {}) and step in r[engine]["median"]
            ]
            if points:
                ax.plot(*zip(*points, strict=True), style, label=engine)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(step)
        ax.set_xlabel("data files (+ as many delete files)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("seconds (median)")
    axes[0].legend()
    fig.suptitle(f"Metadata scale: {report['commits']} commits of history, {report['cores']} cores")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def orchestrate(args: argparse.Namespace) -> None:
    out, work_root = Path(args.out), Path(args.work)
    report: dict[str, Any] = {"commits": args.commits, "runs": args.runs, "cores": 2, "sizes": []}
    for files in [int(f) for f in args.files.split(",")]:
        work = work_root / f"files-{files}"
        metadata = str(work / "warehouse" / "db" / "t" / "metadata" / "v1.metadata.json")
        entry: dict[str, Any] = {"files": files}
        if not (args.reuse and Path(metadata).exists()):
            subprocess.run(["rm", "-rf", str(work)], check=True)
            started = time.perf_counter()
            metadata = build_table(work / "warehouse" / "db" / "t", files, args.commits)
            entry["build_s"] = round(time.perf_counter() - started, 1)
        engines = ["rowops"] + ([] if args.no_iceberg else ["iceberg"])
        for engine in engines if not args.only else [args.only]:
            done = work / f"{engine}.json"
            if args.reuse and done.exists():  # measured by an earlier run (--keep-work)
                result = dict(json.loads(done.read_text()))
            else:
                result = _phase(engine, work, metadata, files, args.runs, args.timeout)
            if "error" not in result:
                result = {"runs": result, "median": {k: statistics.median(v) for k, v in result.items()}}
            entry[engine] = result
        report["sizes"].append(entry)
        log(json.dumps(entry))
        if not args.keep_work:
            subprocess.run(["rm", "-rf", str(work)], check=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metadata-scale.json").write_text(json.dumps(report, indent=2) + "\n")
    plot(report, out / "metadata-scale.png")
    log(f"wrote {out / 'metadata-scale.json'} and metadata-scale.png")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--files", default="1000,10000", help="data file counts (e.g. 1000,10000,100000)")
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", default=str(REPO / "tpcds" / "results"))
    parser.add_argument("--work", default=str(REPO / "tpcds" / "results" / "work" / "metadata-scale"))
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per engine and size")
    parser.add_argument("--no-iceberg", action="store_true")
    parser.add_argument("--only", choices=["rowops", "iceberg"], help="run one engine only")
    parser.add_argument("--keep-work", action="store_true")
    parser.add_argument("--reuse", action="store_true", help="reuse tables and results kept by --keep-work")
    parser.add_argument("--worker", choices=["rowops", "iceberg"], help=argparse.SUPPRESS)
    parser.add_argument("--metadata", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        work, files = Path(args.work), int(args.files)
        if args.worker == "rowops":
            result = run_rowops(work, args.metadata, files, args.runs)
        else:
            result = run_iceberg(work, files, args.runs)
        (work / f"{args.worker}.json").write_text(json.dumps(result))
        return
    orchestrate(args)


if __name__ == "__main__":
    main()
