"""Lake-log scale benchmark: commit and open latency at 1 / 1,000 / 10,000 tables, 1,000 / 100,000 versions.

``make bench-log`` runs ``python -m tpcds.log_scale --out tpcds/results``; ``--smoke`` is a tiny variant
(used by the test suite, no timing claims). For each point it builds a lake log, then times on real,
durable local storage (fsync on):

* **commit**: a fresh ``LakeLog`` with cleared node caches, ``latest()``, then ``commit`` of one table's
  new entry (what a writer process waits for, minus writing Iceberg metadata);
* **open**: a fresh ``LakeLog`` with cleared node caches, ``latest()`` and ``get`` of one random table.

Designs: ``trie`` is rowops' lake log (format 2: version file + content-addressed trie nodes). Its logs
are built through the same ``LakeLog.commit`` code on ``LocalStorage(durable=False)`` (version 1 creates
every table, each further version changes one random table). ``full-map`` is the previous format 1 (the
whole table map in every version file): its newest version is a real file written by the format-1
commit, its older version names are hard links to one format-1 file (so the log directory is as large
as a real log's, at no disk cost; the timed operations read only the hint, the newest version and the
probe of the next one). Writes ``<out>/log-scale.json`` and ``<out>/log-scale.png``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

from rowops.catalog import trie
from rowops.catalog.log import EMPTY, HINT_KEY, LakeLog, TableEntry, version_key
from rowops.catalog.storage import LocalStorage

matplotlib.use("Agg")

import matplotlib.pyplot as plt

FULL_SCALE: dict[str, Any] = {"tables": (1, 1_000, 10_000), "versions": (1_000, 100_000), "reps": 25}
SMOKE: dict[str, Any] = {"tables": (1, 80), "versions": (5, 20), "reps": 2}
DESIGNS = ("trie", "full-map")


def table_name(i: int) -> str:
    return f"db_{i % 97}.table_{i:05d}"


def table_entry(i: int, n: int) -> TableEntry:
    name = table_name(i)
    return TableEntry(
        f"file:///lakes/bench/{name.replace('.', '/')}/metadata/{n:05d}-3f1c2a9e-8d7b-4c6a-9e1f-{i:012d}.metadata.json",
        f"6b1f9c3e-2a4d-4e8b-9c7a-{i:012d}",
    )


def transaction(n: int, i: int) -> dict[str, Any]:
    return {"id": f"txn-{n}-{i}", "commits": [{"table": table_name(i), "operation": "append"}]}


# -- builds ----------------------------------------------------------------------------------------
def build_trie(root: Path, tables: int, versions: int) -> None:
    """Version 1 creates every table; versions 2.. each change one random table (fsync off)."""
    log = LakeLog(root, LocalStorage(root, durable=False))
    rng = random.Random(tables * 7 + versions)
    current = log.commit(EMPTY, {table_name(i): table_entry(i, 0) for i in range(tables)}, transaction(1, -1))
    for n in range(2, versions + 1):
        i = rng.randrange(tables)
        current = log.commit(current, {table_name(i): table_entry(i, n)}, transaction(n, i))


def full_map_bytes(version: int, tables: dict[str, TableEntry], txn: dict[str, Any]) -> bytes:
    """A format-1 version file, exactly as the previous release wrote it."""
    body = {
        "format": "rowops-lake/1",
        "version": version,
        "parent-version": version - 1 if version > 0 else None,
        "timestamp-ms": int(time.time() * 1000),
        "tables": {name: entry.to_json() for name, entry in sorted(tables.items())},
        "transaction": txn,
    }
    return json.dumps(body, indent=1).encode()


def build_full_map(root: Path, tables: int, versions: int) -> None:
    """Version ``versions`` written for real; versions 1.. hard links to one format-1 file."""
    storage = LocalStorage(root, durable=False)
    entries = {table_name(i): table_entry(i, 0) for i in range(tables)}
    template = root / "_rowops" / "template.json"
    template.parent.mkdir(parents=True)
    template.write_bytes(full_map_bytes(1, entries, transaction(1, -1)))
    log_dir = root / "_rowops" / "log"
    log_dir.mkdir()
    for n in range(1, versions):
        os.link(template, log_dir / f"{n:020d}.json")
    storage.put_if_absent(version_key(versions), full_map_bytes(versions, entries, transaction(versions, 0)))
    storage.put(HINT_KEY, str(versions).encode())


def commit_full_map(log: LakeLog, i: int) -> None:
    """The previous release's commit: the whole map of the newest version, plus one change."""
    base = log.latest()
    tables = dict(base.items())
    tables[table_name(i)] = table_entry(i, base.version + 1)
    log.storage.put_if_absent(version_key(base.version + 1), full_map_bytes(base.version + 1, tables, {}))
    log.storage.put(HINT_KEY, str(base.version + 1).encode())


def commit_trie(log: LakeLog, i: int) -> None:
    base = log.latest()
    log.commit(base, {table_name(i): table_entry(i, base.version + 1)}, transaction(base.version + 1, i))


# -- measurements ----------------------------------------------------------------------------------
def timed(reps: int, operation: Callable[[LakeLog, int], Any], root: Path, tables: int) -> list[float]:
    """Milliseconds of ``reps`` operations, each on a fresh LakeLog (durable) with cold node caches."""
    rng, times = random.Random(reps * 31 + tables), []
    for _ in range(reps):
        trie.clear_cache()
        i = rng.randrange(tables)
        start = time.perf_counter()
        operation(LakeLog(root), i)
        times.append((time.perf_counter() - start) * 1000)
    return times


def open_one(log: LakeLog, i: int) -> None:
    entry = log.latest().get(table_name(i))
    if entry is None:
        raise AssertionError(f"{table_name(i)} missing from the benchmark lake")


def stats(times: Sequence[float]) -> dict[str, float]:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"median": round(statistics.median(ordered), 3), "p95": round(p95, 3), "n": len(ordered)}


def measure_point(work: Path, design: str, tables: int, versions: int, reps: int) -> dict[str, Any]:
    root = work / f"{design}-{tables}t-{versions}v"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    start = time.perf_counter()
    (build_trie if design == "trie" else build_full_map)(root, tables, versions)
    build_s = time.perf_counter() - start
    open_ms = timed(reps, open_one, root, tables)
    commit_ms = timed(reps, commit_trie if design == "trie" else commit_full_map, root, tables)
    newest = LakeLog(root).latest()
    start = time.perf_counter()
    listed = len(LakeLog(root).versions())
    point = {
        "design": design,
        "tables": tables,
        "versions": versions,
        "build_s": round(build_s, 2),
        "commit_ms": stats(commit_ms),
        "open_ms": stats(open_ms),
        "list_versions_ms": round((time.perf_counter() - start) * 1000, 1),
        "newest_version_file_bytes": len(LakeLog(root).storage.read(version_key(newest.version))),
        "node_files": len(LakeLog(root).storage.list("_rowops/nodes/")),
    }
    assert listed == versions + reps and newest.table_count == tables
    shutil.rmtree(root, ignore_errors=True)
    return point


# -- report ----------------------------------------------------------------------------------------
def plot(report: dict[str, Any], path: Path) -> Path:
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    styles = {"trie": "-o", "full-map": "--s"}
    for ax, key, title in zip(
        axes,
        ("commit_ms", "open_ms"),
        ("commit one table change", "open latest + get one table"),
        strict=True,
    ):
        series = sorted({(p["design"], p["versions"], p.get("storage", "")) for p in report["points"]})
        for design, versions, storage in series:
            pts = [
                p
                for p in report["points"]
                if (p["design"], p["versions"], p.get("storage", "")) == (design, versions, storage)
            ]
            if pts:
                xs = [p["tables"] for p in pts]
                med = [p[key]["median"] for p in pts]
                err = [[0 for _ in pts], [p[key]["p95"] - p[key]["median"] for p in pts]]
                label = f"{design}, {versions:,} versions, {storage.split(':')[0]}"
                ax.errorbar(xs, med, yerr=err, fmt=styles[design], capsize=3, label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("tables in the lake")
        ax.set_ylabel("ms (median; whisker: p95)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("rowops lake log: durable local storage, fresh LakeLog with cold node cache per operation")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def print_table(report: dict[str, Any]) -> None:
    print(
        f"{'design':9} {'tables':>7} {'versions':>9} {'build s':>8} {'commit ms med/p95':>18} {'open ms med/p95':>16}  storage"
    )
    for p in report["points"]:
        c, o = p["commit_ms"], p["open_ms"]
        print(
            f"{p['design']:9} {p['tables']:>7,} {p['versions']:>9,} {p['build_s']:>8.1f} "
            f"{c['median']:>8.2f}/{c['p95']:<9.2f} {o['median']:>7.2f}/{o['p95']:<8.2f} {p.get('storage', '')}"
        )


def fs_type(path: Path) -> str:
    """The file system type of ``path`` (from /proc/mounts; "unknown" elsewhere)."""
    path.mkdir(parents=True, exist_ok=True)
    best, kind = "", "unknown"
    with contextlib.suppress(OSError), open("/proc/mounts") as mounts:
        for line in mounts:
            _, mount, fstype, *_ = line.split()
            if str(path.resolve()).startswith(mount) and len(mount) > len(best):
                best, kind = mount, fstype
    return kind


def run(out: Path, works: dict[int, Path], scale: dict[str, Any], tag: str) -> dict[str, Any]:
    """Every point; ``works`` maps a version count to the directory its logs are built in."""
    points = []
    plan = [(v, works.get(v, works[0])) for v in scale["versions"]]
    if len(works) > 1:  # the smaller logs on the big logs' storage too, to compare like with like
        big = works[max(works)]
        plan += [(v, big) for v, w in plan if w != big]
    for versions, work in plan:
        for tables in scale["tables"]:
            for design in DESIGNS:
                point = measure_point(work, design, tables, versions, scale["reps"])
                point["storage"] = f"{fs_type(work)}:{work}"
                print(json.dumps(point), flush=True)
                points.append(point)
    report = {
        "benchmark": "lake log scale",
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "system": platform.platform(),
        },
        "timed": "LocalStorage(durable=True): fsync of every file and directory (a no-op on tmpfs)",
        "reps": scale["reps"],
        "points": points,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{tag}.json").write_text(json.dumps(report, indent=1))
    plot(report, out / f"{tag}.png")
    print_table(report)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tpcds.log_scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="tpcds/results", help="directory for log-scale.json and .png")
    parser.add_argument("--work", default="tpcds/results/work/log-scale", help="where the logs are built")
    parser.add_argument(
        "--big-work",
        help="where the 100,000-version logs are built and timed (default: --work); when given, the "
        "1,000-version logs are measured there too",
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, 2 repetitions (tests)")
    args = parser.parse_args(argv)
    scale, tag = (SMOKE, "log-scale-smoke") if args.smoke else (FULL_SCALE, "log-scale")
    works = {0: Path(args.work)}
    if args.big_work:
        works[max(scale["versions"])] = Path(args.big_work)
    run(Path(args.out), works, scale, tag)
    return 0


if __name__ == "__main__":
    sys.exit(main())
