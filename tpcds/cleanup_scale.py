"""Cleanup reference-scan benchmark: ``lake.cleanup()``'s scan at 100 / 1,000 / 10,000 lake versions.

``python -m tpcds.cleanup_scale --out tpcds/results`` (``--smoke``: tiny, used by the test suite, no
timing claims). Each lake is built without Spark, through the catalog layer: ``LakeLog.commit`` on
``LocalStorage(durable=False)`` and, per version, one real manifest (one data file entry, written by
rowops' manifest writer), one real manifest list and one table metadata JSON with the table's snapshots
and metadata log so far. Versions are spread over tables of ``--per-table`` versions each (default 100:
a table whose snapshots are expired down to about a hundred), so every metadata file has a bounded
size and the files to read grow linearly with the versions; a lake of one never-expired table has
metadata files that grow with its history (Iceberg's format: each lists every snapshot), which no
scan can read in less than their total size.

Timed, for each size (the cleanup's dry run: nothing is deleted):

* **cold**: a fresh process state (an empty ``ReferenceScanner``): every metadata file, manifest list
  and manifest parsed once;
* **warm**: after 1% more versions, the same process again: only the new versions and their files are
  read (the state kept between runs), plus the listing of the tables' folders.

Writes ``<out>/cleanup-scale.json`` and ``<out>/cleanup-scale.md``.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestContent
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField

from rowops.catalog import cleanup
from rowops.catalog.log import EMPTY, LakeLog, LakeVersion, TableEntry
from rowops.catalog.storage import LocalStorage
from rowops.commit.manifests import manifest_path, write_added, write_list
from rowops.meta.fileio import make_io

FULL_SCALE = (100, 1_000, 10_000)
SMOKE = (10, 30)
SCHEMA = Schema(NestedField(1, "k", LongType(), required=False))


class LakeBuilder:
    """Builds lake versions cheaply: version n appends one data file to table ``(n-1) // per_table``."""

    def __init__(self, root: Path, per_table: int) -> None:
        self.root = root
        self.per_table = per_table
        self.io = make_io()
        self.log = LakeLog(root, LocalStorage(root, durable=False))
        self.current: LakeVersion = EMPTY
        self.tables: dict[str, dict[str, Any]] = {}

    def add_versions(self, count: int) -> None:
        for _ in range(count):
            self._add_version(self.current.version + 1)

    def _add_version(self, n: int) -> None:
        name = f"db.t{(n - 1) // self.per_table:05d}"
        location = f"{self.root}/db/{name.split('.')[1]}"
        state = self.tables.setdefault(name, {"snapshots": [], "log": [], "created": False})
        snapshot_id = n
        data = DataFile.from_args(
            content=DataFileContent.DATA,
            file_path=f"file:{location}/data/{n:06d}.parquet",
            file_format=FileFormat.PARQUET,
            partition=Record(),
            record_count=1,
            file_size_in_bytes=100,
        )
        manifest = write_added(
            [data],
            ManifestContent.DATA,
            UNPARTITIONED_PARTITION_SPEC,
            SCHEMA,
            self.io,
            manifest_path(f"file:{location}/metadata", snapshot_id, 0),
            snapshot_id,
        )
        manifest_list = f"file:{location}/metadata/snap-{snapshot_id}-1-{n}.avro"
        parent = state["snapshots"][-1]["snapshot-id"] if state["snapshots"] else None
        write_list(self.io, manifest_list, snapshot_id, parent, len(state["snapshots"]) + 1, [manifest])
        state["snapshots"].append(
            {"snapshot-id": snapshot_id, "timestamp-ms": n, "manifest-list": manifest_list, "summary": {}}
        )
        metadata_location = f"file:{location}/metadata/{len(state['log']):05d}-{n:012d}.metadata.json"
        body = {
            "format-version": 2,
            "location": f"file:{location}",
            "current-snapshot-id": snapshot_id,
            "snapshots": state["snapshots"],
            "metadata-log": state["log"],
        }
        path = Path(metadata_location.removeprefix("file:"))
        path.write_text(json.dumps(body))
        operation = "append" if state["created"] else "create"
        state["created"] = True
        state["log"] = [*state["log"], {"metadata-file": metadata_location, "timestamp-ms": n}]
        txn = {"id": f"txn-{n}", "commits": [{"table": name, "operation": operation}]}
        self.current = self.log.commit(self.current, {name: TableEntry(metadata_location, name)}, txn)


def scan(builder: LakeBuilder) -> tuple[float, dict[str, int], int]:
    """Seconds of one cleanup dry run on the built lake, the files it parsed, the files it saw referenced."""
    before = dict(cleanup.SCANNER.reads)
    started = time.perf_counter()
    referenced, owned = cleanup.lake_references(builder.io, builder.log)
    result = cleanup.remove_orphans(
        builder.io, str(builder.root), owned, referenced, cleanup.DEFAULT_AGE, True
    )
    elapsed = time.perf_counter() - started
    assert result.orphans_removed == 0, result.removed[:5]  # everything built is referenced or young
    parsed = {k: v - before.get(k, 0) for k, v in cleanup.SCANNER.reads.items()}
    return elapsed, parsed, len(referenced)


def measure(work: Path, versions: int, per_table: int) -> dict[str, Any]:
    root = work / f"lake-{versions}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    builder = LakeBuilder(root, per_table)
    started = time.perf_counter()
    builder.add_versions(versions)
    build_s = time.perf_counter() - started
    cleanup.SCANNER = cleanup.ReferenceScanner()  # a fresh process
    cold_s, cold_parsed, referenced = scan(builder)
    more = max(1, versions // 100)
    builder.add_versions(more)
    warm_s, warm_parsed, _ = scan(builder)
    shutil.rmtree(root, ignore_errors=True)
    return {
        "versions": versions,
        "tables": len(builder.tables),
        "build_s": round(build_s, 2),
        "referenced_files": referenced,
        "cold_s": round(cold_s, 3),
        "cold_parsed": cold_parsed,
        "cold_ms_per_version": round(1000 * cold_s / versions, 3),
        "warm_added_versions": more,
        "warm_s": round(warm_s, 3),
        "warm_parsed": warm_parsed,
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Cleanup reference scan at scale",
        "",
        f"{report['command']} on {report['machine']} (Python {report['python']}); "
        f"{report['per_table']} versions per table. Cold: a fresh process; warm: the same process after "
        "1% more versions (only their files are parsed).",
        "",
        "| versions | tables | referenced files | cold scan s | ms / version | warm scan s | parsed warm |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    for p in report["points"]:
        parsed = ", ".join(f"{k} {v}" for k, v in sorted(p["warm_parsed"].items()))
        lines.append(
            f"| {p['versions']:,} | {p['tables']} | {p['referenced_files']:,} | {p['cold_s']} | "
            f"{p['cold_ms_per_version']} | {p['warm_s']} | {parsed} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tpcds.cleanup_scale", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--out", default="tpcds/results", help="directory for cleanup-scale.json and .md")
    parser.add_argument("--work", default="tpcds/results/work/cleanup-scale", help="where lakes are built")
    parser.add_argument("--per-table", type=int, default=100, help="versions per table")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (tests; no timing claims)")
    args = parser.parse_args(argv)
    sizes = SMOKE if args.smoke else FULL_SCALE
    per_table = 10 if args.smoke else args.per_table
    points = []
    for versions in sizes:
        point = measure(Path(args.work).absolute(), versions, per_table)
        print(json.dumps(point), flush=True)
        points.append(point)
    report = {
        "command": "python -m tpcds.cleanup_scale" + (" --smoke" if args.smoke else ""),
        "machine": f"{platform.machine()} {platform.system()}",
        "python": sys.version.split()[0],
        "per_table": per_table,
        "points": points,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tag = "cleanup-scale-smoke" if args.smoke else "cleanup-scale"
    (out / f"{tag}.json").write_text(json.dumps(report, indent=1))
    (out / f"{tag}.md").write_text(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
