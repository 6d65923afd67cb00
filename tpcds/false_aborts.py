"""False aborts of row-level vs file-level conflict detection, measured on one racing workload.

Workload: a table of ``--rows`` rows in ``--files`` data files (few, so most pairs touch the same
file), one table per encoding (position-delete, equality-delete, copy-on-write), snapshot isolation
(write-write conflicts: what the detection granularity decides; the serializable verdicts are
reported too). ``--ops`` MERGE upserts of ``--changed`` random existing keys each are planned,
executed and committed by rowops on Spark, every one on the table's initial state (the table is
rolled back to it before each; their files stay). Any two of them, first and second, are a race the
second lost: it was planned on the state before the first committed. For each pair the second's
recorded ``RowDelta`` is checked on the driver with ``find_conflict`` against the table state the
first produced, under ``row`` and ``file`` detection: 11 operations give 55 pairs. A pair is a *true*
conflict iff the two key sets intersect (both changed a common row); a *false abort* is an abort of
a pair that is not a true conflict.

End to end: ``--races`` more races per encoding are committed for real (a handle pinned to the state
before the first; the table property ``rowops.conflict-detection`` alternating ``row`` / ``file``) and
their outcome is compared with the driver-side verdict (``mismatches`` must be 0).

Output: ``false-aborts.json`` and ``false-aborts.png`` in ``--out``.

Usage: ``python -m tpcds.false_aborts --ops 11 --out tpcds/results`` (``make bench-conflicts``).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.table.metadata import TableMetadata
from pyspark.sql import SparkSession
from pyspark.sql import types as T

import rowops
from rowops.catalog.tables import LoadedTable
from rowops.commit.rebase import find_conflict
from rowops.commit.row_delta import RowDelta
from rowops.errors import CommitConflictError
from rowops.meta.files import TableFiles, live_files
from rowops.table import Table

ENCODINGS = ("position-delete", "equality-delete", "copy-on-write")
DETECTIONS = ("row", "file")
ISOLATIONS = ("snapshot", "serializable")
SCHEMA = T.StructType([T.StructField("k", T.LongType()), T.StructField("v", T.LongType())])


class Pinned(Table):
    """A handle that keeps reading the state it was created with: its operation loses the race."""

    def __init__(self, table: Table) -> None:
        super().__init__(table.lake, table.identifier)
        self._loaded = table.load()

    def load(self) -> LoadedTable:
        return self._loaded


@dataclass
class Tally:
    """Outcomes of one configuration over all pairs."""

    pairs: int = 0
    aborts: int = 0
    true_conflicts: int = 0
    false_aborts: int = 0
    missed: int = 0  # true conflicts that committed (expected for blind equality-delete upserts only)
    kinds: dict[str, int] = field(default_factory=dict)

    def add(self, aborted: str | None, true_conflict: bool) -> None:
        self.pairs += 1
        self.true_conflicts += true_conflict
        if aborted is not None:
            self.aborts += 1
            self.false_aborts += not true_conflict
            self.kinds[aborted] = self.kinds.get(aborted, 0) + 1
        else:
            self.missed += true_conflict

    def report(self) -> dict[str, Any]:
        free = self.pairs - self.true_conflicts
        return {
            **self.__dict__,
            "abort_rate": round(self.aborts / self.pairs, 4) if self.pairs else None,
            "false_abort_rate": round(self.false_aborts / free, 4) if free else None,
        }


def _session() -> SparkSession:
    session = (
        SparkSession.builder.master("local[2]")
        .appName("rowops-false-aborts")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def _table(lake: rowops.Lakehouse, encoding: str, rows: int, files: int) -> Table:
    """``rows`` keys 0.. in ``files`` data files (one append per file), snapshot isolation."""
    spark, per_file = lake.spark, -(-rows // files)
    name = "db.t_" + encoding.replace("-", "_")
    first = spark.createDataFrame([(k, 0) for k in range(min(per_file, rows))], SCHEMA).coalesce(1)
    table = lake.create_table(
        name, first, identifier=["k"], properties={"rowops.isolation-level": "snapshot"}
    )
    for start in range(per_file, rows, per_file):
        batch = [(k, 0) for k in range(start, min(start + per_file, rows))]
        table.append(spark.createDataFrame(batch, SCHEMA).coalesce(1))
    assert len(live_files(table.metadata, PyArrowFileIO()).data) == files
    return table


Verdicts = dict[tuple[str, str], str | None]


@dataclass
class _Commits:
    """Every commit of the lake, seen before it runs: (base files, delta) and, when a ``current`` state
    is set, the verdicts of the delta on it (computed while the delta's files still exist: an aborted
    operation removes them). The catalog's own commit then runs unchanged."""

    seen: list[tuple[TableFiles, RowDelta]] = field(default_factory=list)
    verdicts: list[Verdicts] = field(default_factory=list)
    current: TableMetadata | None = None

    def install(self, lake: rowops.Lakehouse) -> None:
        commit: Callable[..., Any] = lake.catalog.commit_delta

        def judged(base: LoadedTable, base_files: TableFiles, delta: RowDelta, **kwargs: Any) -> Any:
            self.seen.append((base_files, delta))
            if self.current is not None:
                files = live_files(self.current, PyArrowFileIO())
                self.verdicts.append(_verdicts(delta, base_files, files, self.current))
            return commit(base, base_files, delta, **kwargs)

        lake.catalog.commit_delta = judged  # type: ignore[method-assign,assignment]


def _upsert(table: Table, keys: list[int], value: int, encoding: str) -> None:
    source = table.lake.spark.createDataFrame([(k, value) for k in keys], SCHEMA)
    rowops.merge(source, table, on=["k"], strategy=encoding)


def _verdicts(delta: RowDelta, base: TableFiles, files: TableFiles, current: TableMetadata) -> Verdicts:
    """The conflict kind (None: rebase) of ``delta`` on the table state ``files``, per configuration."""
    verdicts = {}
    for isolation in ISOLATIONS:
        checked = replace(delta, serializable=isolation == "serializable")
        for detection in DETECTIONS:
            conflict = find_conflict(
                checked, base, files, current, row_level=detection == "row", io=PyArrowFileIO()
            )
            verdicts[(detection, isolation)] = conflict.kind.value if conflict else None
    return verdicts


@dataclass(frozen=True)
class _Op:
    keys: frozenset[int]
    snapshot_id: int
    base: TableFiles
    delta: RowDelta


def _operations(table: Table, commits: _Commits, encoding: str, args: argparse.Namespace) -> list[_Op]:
    """``args.ops`` upserts of random keys, each planned, executed and committed on the initial state
    (rolled back to it before each): any two of them are a first and a second planned on the same state."""
    rng, initial = random.Random(args.seed), table.current_snapshot_id
    assert initial is not None
    ops = []
    for n in range(args.ops):
        if n:
            table.rollback_to(initial)
        keys = rng.sample(range(args.rows), args.changed)
        _upsert(table, keys, n + 1, encoding)
        base, delta = commits.seen[-1]
        assert table.current_snapshot_id is not None
        ops.append(_Op(frozenset(keys), table.current_snapshot_id, base, delta))
        print(f"{encoding}: operation {n + 1}/{args.ops} committed", flush=True)
    table.rollback_to(initial)
    return ops


def _real_races(table: Table, commits: _Commits, encoding: str, args: argparse.Namespace) -> list[Any]:
    """Races committed for real, the table property alternating row / file: outcome vs. prediction."""
    rng, initial, races = random.Random(args.seed + 1), table.current_snapshot_id, []
    assert initial is not None
    for n in range(args.races):
        detection = DETECTIONS[n % 2]
        table.rollback_to(initial)
        table.set_properties(**{"rowops.conflict-detection": detection})
        first, second = (rng.sample(range(args.rows), args.changed) for _ in range(2))
        stale = Pinned(table)
        _upsert(table, first, 1000 + 2 * n, encoding)
        commits.current, commits.verdicts = table.load().metadata, []
        try:
            _upsert(stale, second, 1001 + 2 * n, encoding)
            real = None
        except CommitConflictError as e:
            real = e.kind.value
        commits.current = None
        (predicted,) = commits.verdicts
        races.append({
            "detection": detection,
            "true_conflict": bool(set(first) & set(second)),
            "outcome": real,
            "predicted": predicted[(detection, "snapshot")],
        })  # fmt: skip
        print(f"{encoding}: real race {n + 1}/{args.races}: {races[-1]}", flush=True)
    return races


def run_encoding(lake: rowops.Lakehouse, encoding: str, args: argparse.Namespace) -> dict[str, Any]:
    """Every pair of operations of one table of ``encoding``; the tallies per (detection, isolation)."""
    started = time.perf_counter()
    table = _table(lake, encoding, args.rows, args.files)
    commits = _Commits()
    commits.install(lake)
    ops = _operations(table, commits, encoding, args)
    metadata = table.load().metadata
    io = PyArrowFileIO()
    after = {op.snapshot_id: live_files(metadata, io, op.snapshot_id) for op in ops}
    tallies = {(d, i): Tally() for d in DETECTIONS for i in ISOLATIONS}
    for i, first in enumerate(ops):
        for second in ops[i + 1 :]:
            verdicts = _verdicts(second.delta, second.base, after[first.snapshot_id], metadata)
            for config, verdict in verdicts.items():
                tallies[config].add(verdict, bool(first.keys & second.keys))
    races = _real_races(table, commits, encoding, args)
    return {
        "seconds": round(time.perf_counter() - started, 1),
        "by_config": {f"{d}/{i}": t.report() for (d, i), t in tallies.items()},
        "real_races": races,
        "mismatches": sum((r["outcome"] is None) != (r["predicted"] is None) for r in races),
    }


def plot(report: dict[str, Any], path: Path) -> None:
    """Aborts per encoding under row / file detection (snapshot isolation), true conflicts marked."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.38
    for n, encoding in enumerate(ENCODINGS):
        configs = report["encodings"][encoding]["by_config"]
        for offset, detection, color in ((-width / 2, "row", "#1f77b4"), (width / 2, "file", "#ff7f0e")):
            tally = configs[f"{detection}/snapshot"]
            true_part = tally["aborts"] - tally["false_aborts"]
            label = "" if n else f"{detection}-level: aborts of true conflicts"
            ax.bar(n + offset, true_part, width, color=color, label=label)
            label = "" if n else f"{detection}-level: false aborts"
            ax.bar(n + offset, tally["false_aborts"], width, bottom=true_part, color=color, alpha=0.4,
                   hatch="//", label=label)  # fmt: skip
        ax.hlines(configs["row/snapshot"]["true_conflicts"], n - width, n + width, colors="black")
    ax.plot([], [], color="black", label="true conflicts (row sets intersect)")
    ax.set_xticks(range(len(ENCODINGS)), ENCODINGS)
    cfg = report["config"]
    ax.set_ylabel(f"aborted pairs (of {cfg['pairs']})")
    ax.set_title(
        f"Lost races: {cfg['changed']} random rows each, {cfg['rows']} rows in {cfg['files']} files "
        "(snapshot isolation)",
        fontsize=10,
    )
    ax.set_ylim(0, cfg["pairs"] * 1.45)
    ax.annotate("blind upserts:\nnever abort", (1, 1), ha="center", fontsize=8)
    ax.legend(fontsize=8, loc="upper center", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--ops", type=int, default=11, help="operations; every two of them race (55 pairs)")
    parser.add_argument("--races", type=int, default=2, help="races committed for real, per encoding")
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--files", type=int, default=2)
    parser.add_argument("--changed", type=int, default=8, help="rows each update changes")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--encodings", nargs="*", default=list(ENCODINGS))
    parser.add_argument("--out", type=Path, default=Path("tpcds/results"))
    parser.add_argument("--replot", action="store_true", help="only re-draw the PNG from the saved JSON")
    args = parser.parse_args(argv)
    if args.replot:
        plot(json.loads((args.out / "false-aborts.json").read_text()), args.out / "false-aborts.png")
        return 0
    spark = _session()
    config = {k: v for k, v in vars(args).items() if k not in ("out", "encodings", "replot")}
    pairs = args.ops * (args.ops - 1) // 2
    report: dict[str, Any] = {"config": {**config, "pairs": pairs, "isolation": "snapshot"}, "encodings": {}}
    with TemporaryDirectory(prefix="rowops-false-aborts-") as root:
        lake = rowops.Lakehouse(Path(root) / "lake", spark=spark)
        for encoding in args.encodings:
            report["encodings"][encoding] = run_encoding(lake, encoding, args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "false-aborts.json").write_text(json.dumps(report, indent=2) + "\n")
    if set(report["encodings"]) == set(ENCODINGS):
        plot(report, args.out / "false-aborts.png")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
