"""Manifest paths vs number of commits: commit time and ``live_files`` time, with and without merging.

``python -m tpcds.manifest_bench --out tpcds/results`` (``make bench-manifests``). For each design it
commits ``--commits`` small appends (one row, one tiny Parquet file per commit, written by pyarrow:
``tools/direct_appends.py``, no Spark) to a fresh table and, at each checkpoint, records:

* ``commit_s``: median time of ``commit_delta`` (manifests, manifest list, metadata, lake version) over
  the last ``--window`` commits;
* ``manifests``: manifests of the current snapshot;
* ``live_files_cold_s``: ``live_files`` with an empty manifest cache (a new process);
* ``live_files_warm_s``: ``live_files`` again (same process, manifests cached).

Designs: ``merge`` (Iceberg's defaults: ``commit.manifest-merge.enabled`` with 100 manifests minimum)
and ``no-merge`` (``commit.manifest-merge.enabled=false``: one more manifest per commit, as rowops
committed before manifest merging). Run with an older rowops on ``PYTHONPATH`` (no ``meta/manifests``)
it measures that version (no cache: cold and warm are the same path). Writes
``<out>/manifests-commits-<label>.json``; numbers depend on the machine (2 shared cores here), not asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from pyiceberg.table.snapshots import Operation
from pyspark.sql import types as T

import rowops
from rowops.commit.row_delta import RowDelta
from rowops.meta.files import WrittenFile, data_files_from_parquet, live_files
from tools.direct_appends import write_file

try:  # absent in rowops versions before the manifest cache
    from rowops.meta.manifests import CACHE
except ImportError:  # pragma: no cover - measuring an older rowops
    CACHE = None  # type: ignore[assignment]

SCHEMA = T.StructType([T.StructField("k", T.LongType()), T.StructField("v", T.StringType())])
DESIGNS = {"merge": {}, "no-merge": {"commit.manifest-merge.enabled": "false"}}


def _timed(fn: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - started


def _clear_cache() -> None:
    if CACHE is not None:
        CACHE.clear()


def run_design(
    root: Path, design: str, commits: int, checkpoints: set[int], window: int
) -> list[dict[str, Any]]:
    lake = rowops.Lakehouse(root / design)
    table = lake.create_table("db.t", SCHEMA, properties=DESIGNS[design])
    io = table.lake.catalog.io
    points, times = [], []
    for n in range(1, commits + 1):
        loaded = table.load()
        metadata = loaded.metadata
        local = write_file(metadata, [{"k": n, "v": "x"}])
        added = data_files_from_parquet([WrittenFile(local, ())], metadata, io)
        base = live_files(metadata, io)
        delta = RowDelta(
            Operation.APPEND, added_data=tuple(added), blind=True, schema_id=metadata.current_schema_id
        )
        _, elapsed = _timed(lambda: table.scope.commit_delta(loaded, base, delta))  # noqa: B023
        times.append(elapsed)
        if n in checkpoints:
            metadata = table.metadata
            _clear_cache()
            cold, cold_s = _timed(lambda: live_files(metadata, io))  # noqa: B023
            _, warm_s = _timed(lambda: live_files(metadata, io))  # noqa: B023
            point = {
                "design": design,
                "commits": n,
                "manifests": len(cold.manifests),
                "data_files": len(cold.data),
                "commit_s": round(statistics.median(times[-window:]), 4),
                "live_files_cold_s": round(cold_s, 4),
                "live_files_warm_s": round(warm_s, 4),
            }
            print(json.dumps(point), flush=True)
            points.append(point)
    return points


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("tpcds/results"))
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--checkpoints", default="1,10,100,250,500,1000")
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--designs", default=",".join(DESIGNS))
    parser.add_argument("--label", default="rowops", help="name of the rowops version measured")
    args = parser.parse_args(argv)
    checkpoints = {int(c) for c in args.checkpoints.split(",")}
    points = []
    with tempfile.TemporaryDirectory(prefix="rowops-manifest-bench-") as tmp:
        for design in args.designs.split(","):
            points += run_design(Path(tmp), design, args.commits, checkpoints, args.window)
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / f"manifests-commits-{args.label}.json"
    meta = {"machine": platform.platform(), "python": platform.python_version(), "cache": CACHE is not None}
    out.write_text(json.dumps({"meta": meta, "points": points}, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
