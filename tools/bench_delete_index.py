"""Driver-side delete lookups on synthetic snapshots: the delete index against the nested loops it
replaced (no Spark: the metadata paths only).

A snapshot of N data files in 100 partitions, N file-scoped position-delete files (one per data file,
as rowops writes them) and N/10 equality-delete files (newer than half of the data), built in memory
as manifest entries. Timed in CPU seconds of this process (best of ``--repeat``; the paths are
single-threaded Python, so on an idle machine that is their wall time; CPU time keeps the figures
honest on a shared, loaded machine):

* ``index``: building the delete index of the snapshot (``DeleteIndex.of``);
* ``read_debt all`` / ``read_debt 10``: ``plan/debt.py`` over every data file / 10 candidates;
* ``outside paydown``: ``plan/debt.py``'s partitions outside 10 candidates whose debt is paid off;
* ``scan deletes``: the delete files a scan of every data file reads (``exec/reading/scan.py``);
* ``file_changes``: the run-time facts of 10 touched files (``exec/writing/strategies.py``);
* ``dangling eq``: equality deletes left dangling by removing 10 files.

The nested loops (``old``) run only up to ``--old-max`` files (they grow with N^2)::

    python tools/bench_delete_index.py                 # 2,000 / 20,000 / 100,000 files
    python tools/bench_delete_index.py --sizes 2000 --old-max 2000
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestEntry, ManifestEntryStatus
from pyiceberg.typedef import Record

from rowops.exec.writing.context import file_changes
from rowops.meta import delete_index as di
from rowops.meta.delete_index import DeleteIndex, dangling_equality_deletes
from rowops.meta.files import FILE_PATH_ID, LiveFile, TableFiles
from rowops.plan.debt import outside_paydown, read_debt

PARTITIONS = 100


def _live(path: str, content: DataFileContent, seq: int, part: int, **stats: object) -> LiveFile:
    data_file = DataFile.from_args(
        content=content,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(part),
        record_count=1000,
        file_size_in_bytes=64 << 10,
        spec_id=0,
        equality_ids=[1] if content == DataFileContent.EQUALITY_DELETES else None,
        **stats,
    )
    entry = ManifestEntry.from_args(
        status=ManifestEntryStatus.ADDED, snapshot_id=seq, sequence_number=seq, data_file=data_file
    )
    return LiveFile(entry, path, content, seq, 0, (part,), (1,))


def snapshot(n: int) -> TableFiles:
    """N data files, N one-file position deletes, N/10 equality deletes, over 100 partitions."""
    data = [
        _live(
            f"/lake/t/data/p={i % PARTITIONS}/f{i:07d}.parquet",
            DataFileContent.DATA,
            1 + i % 20,
            i % PARTITIONS,
        )
        for i in range(n)
    ]
    pos = [
        _live(
            f"/lake/t/data/p={f.partition[0]}/d{i:07d}.parquet",
            DataFileContent.POSITION_DELETES,
            f.seq + 1,
            i % PARTITIONS,
            lower_bounds={FILE_PATH_ID: f.path.encode()},
            upper_bounds={FILE_PATH_ID: f.path.encode()},
        )
        for i, f in enumerate(data)
    ]
    eq = [
        _live(
            f"/lake/t/data/p={i % PARTITIONS}/e{i:07d}.parquet",
            DataFileContent.EQUALITY_DELETES,
            11,
            i % PARTITIONS,
        )
        for i in range(n // 10)
    ]
    return TableFiles(1, 21, (), tuple(data), tuple(pos), tuple(eq))


def _old_read_debt_lookups(files: TableFiles, candidates: list[LiveFile]) -> int:
    """The lookups of ``read_debt`` before the index (its arithmetic left out)."""
    pos = [any(d.may_apply_to(f) for d in files.position_deletes) for f in candidates]
    eq = [any(d.may_apply_to(f) for d in files.equality_deletes) for f in candidates]
    live = [d for d in files.deletes if any(d.may_apply_to(f) for f in candidates)]
    return sum(pos) + sum(eq) + len(live)


def _old_scan_deletes(files: TableFiles) -> int:
    wanted = {f.path for f in files.data}
    return len([f for f in files.position_deletes if any(f.may_reference(p) for p in wanted)])


def _old_file_changes_eq(files: TableFiles) -> int:
    return sum(1 for f in files.data if any(d.may_apply_to(f) for d in files.equality_deletes))


def _old_dangling(files: TableFiles, removed: set[str]) -> int:
    kept = [f for f in files.data if f.path not in removed]
    return len({d.path for d in files.equality_deletes if not any(d.may_apply_to(f) for f in kept)})


def _fresh() -> None:
    """Forget the cached indexes: every timed call builds its own, as a new operation does."""
    with di._RECENT_LOCK:
        di._RECENT.clear()


def _scan_deletes(files: TableFiles) -> int:
    index = di.delete_index(files)
    older = [f for f in files.data if index.equality_deletes_on(f)]
    return len(index.position_deletes_applying(files.data)) + len(index.equality_deletes_applying(older))


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        _fresh()
        started = time.process_time()
        fn()
        times.append(time.process_time() - started)
    return min(times)


def run(n: int, repeat: int, old: bool) -> dict[str, tuple[float, float | None]]:
    files = snapshot(n)
    ten = list(files.data[:: max(1, n // 10)][:10])
    removed = {f.path: 10 for f in ten}
    cases: dict[str, tuple[Callable[[], object], Callable[[], object] | None]] = {
        "index": (lambda: DeleteIndex.of(files), None),
        "read_debt all": (lambda: read_debt(files, files.data, 1.0), lambda: _old_read_debt_lookups(files, list(files.data))),
        "read_debt 10": (lambda: read_debt(files, ten, 1.0), lambda: _old_read_debt_lookups(files, ten)),
        "outside paydown": (lambda: outside_paydown(files, ten, lambda group: True, 1.0), None),
        "scan deletes": (lambda: _scan_deletes(files), lambda: _old_scan_deletes(files)),
        "file_changes": (lambda: file_changes(removed, files), lambda: _old_file_changes_eq(files)),
        "dangling eq": (lambda: dangling_equality_deletes(files, set(removed)), lambda: _old_dangling(files, set(removed))),
    }  # fmt: skip
    return {
        name: (best(new, repeat), best(before, 1) if old and before is not None else None)
        for name, (new, before) in cases.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000, 100000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--old-max", type=int, default=2000, help="run the nested loops up to this size")
    args = parser.parse_args(argv)
    print(f"{'files':>8} {'path':<16} {'index (s)':>10} {'nested loops (s)':>17}")
    for n in args.sizes:
        for name, (new, before) in run(n, args.repeat, n <= args.old_max).items():
            shown = f"{before:17.3f}" if before is not None else f"{'-':>17}"
            print(f"{n:>8} {name:<16} {new:10.3f} {shown}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
