"""Concurrent writers: real processes, real Spark sessions, real files, one lake.

Two long-lived worker processes (``spawn``; each with its own local SparkSession and JVM) run
operations on the same lakehouse directory the test process created. Nothing is mocked: the workers
run the public rowops API end to end. To make the races deterministic, a worker may *pause* at its
first call of the lake-log commit (the put-if-absent of the next lake version) until a file signal
appears; the commit itself then runs unchanged. Two pause modes are used:

* rendezvous: both workers pause at their first lake commit until both have arrived, then both try
  to take the same lake version at once. Both built their commit on the same base, so exactly one
  wins and the other has to retry (rebase or conflict) -- every time, whichever wins.
* one after the other: the first worker pauses at its commit until the second worker has run a
  whole operation, which read the same base (nothing was committed yet) and committed first.

A third mode starts both operations at the same moment and does not pause at all (a free race whose
outcome depends on timing; only serializability is asserted).

After every scenario the test process checks the rows through independent readers, the snapshot
history, the lake log, and that no file below the table is left that no lake version references.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing as mp
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyspark
import pytest

import rowops
from rowops.catalog.log import LakeLog, VersionTaken, version_key
from rowops.errors import ConflictKind
from rowops.meta.fileio import list_files, s3a_conf
from rowops.meta.paths import is_remote, normalize_path, relative
from rowops.request.identifiers import TableIdentifier
from tests import jvm_options
from tests.conftest import make_lake
from tests.readers import assert_readers_agree
from tests.spark.tables import COLUMNS, Layout, Oracle, frame, make_row
from tools import s3_jars

N = 40
KEYED = Layout("unpartitioned", (), ("k",))
SIGNAL_TIMEOUT_S = 120.0
RESULT_TIMEOUT_S = 300.0
WORKER_START_TIMEOUT_S = 240.0
# why an operation that read the table conflicts with a concurrent one, by the winner's strategy
KINDS = {
    "copy-on-write": ConflictKind.DELETE_DELETE.value,
    "position-delete": ConflictKind.CONCURRENT_DELETE_READ.value,
}

# ----------------------------------------------------------------------------------------------
# Worker side (runs in the spawned processes)
# ----------------------------------------------------------------------------------------------


def _touch(signals: str, name: str) -> None:
    Path(signals, name).touch()


def _wait_for(signals: str, name: str, timeout: float = SIGNAL_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    path = Path(signals, name)
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"signal {name} did not appear within {timeout} s")
        time.sleep(0.005)


class _CommitGate:
    """Wraps one Lakehouse's ``catalog.log.commit``: pauses before chosen calls, counts lost races.

    ``pauses`` maps a call number (1 = first attempt to take a lake version) to (touch, wait for)
    signal names. The real ``LakeLog.commit`` runs after the pause, unchanged.
    """

    def __init__(self, log: LakeLog, signals: str, pauses: dict[int, tuple[str | None, str | None]]) -> None:
        self.commit = log.commit
        self.signals = signals
        self.pauses = pauses
        self.calls = 0
        self.versions_taken = 0
        log.commit = self  # type: ignore[method-assign]  # instance attribute of this process only

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        touch, wait = self.pauses.get(self.calls, (None, None))
        if touch:
            _touch(self.signals, touch)
        if wait:
            _wait_for(self.signals, wait)
        try:
            return self.commit(*args, **kwargs)
        except VersionTaken:
            self.versions_taken += 1
            raise


def _operation(lake: rowops.Lakehouse, op: dict[str, Any]) -> rowops.OperationResult:
    table = lake.table(op["table"])
    source = frame(lake.spark, op["rows"])
    if op["kind"] == "append":
        return table.append(source)
    if op["kind"] == "merge":
        return rowops.merge(source, table, on=["k"], strategy=op["strategy"])
    raise ValueError(op["kind"])


def job(
    spark: Any,
    lake_path: str,
    op: dict[str, Any],
    signals: str,
    before: tuple[str | None, str | None] = (None, None),
    pauses: dict[int, tuple[str | None, str | None]] | None = None,
    done: str | None = None,
    storage_options: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Open the lake, optionally rendezvous, run ``op``; signal ``done`` afterwards (even on error)."""
    for key, value in s3a_conf(storage_options or {}).items():  # this worker's session reaches the S3 lake
        spark.conf.set(key.removeprefix("spark.hadoop."), value)
    lake = rowops.Lakehouse(lake_path, spark=spark, storage_options=storage_options)
    gate = _CommitGate(lake.catalog.log, signals, pauses or {})
    try:
        touch, wait = before
        if touch:
            _touch(signals, touch)
        if wait:
            _wait_for(signals, wait)
        outcome: dict[str, Any] = {"pid": os.getpid()}
        try:
            result = _operation(lake, op)
            outcome.update(status="ok", result=dataclasses.asdict(result))
        except rowops.CommitConflictError as exc:
            outcome.update(
                status="conflict",
                kind=exc.kind.value,
                message=str(exc),
                retry_safe=exc.retry_safe,
                conflicting_snapshot_id=exc.conflicting_snapshot_id,
                conflicting_files=list(exc.conflicting_files),
            )
        outcome.update(log_commit_calls=gate.calls, versions_taken=gate.versions_taken)
        return outcome
    finally:
        if done:
            _touch(signals, done)


def _worker_main(inbox: Any, outbox: Any) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from rowops.exec.spark.session import configure

    builder = SparkSession.builder
    for key, value in {**s3_jars.session_conf(pyspark.__version__), **jvm_options.spark_conf()}.items():
        builder = builder.config(key, value)
    spark = (
        builder.master("local[1]")
        .appName(f"rowops-concurrency-{os.getpid()}")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    configure(spark)
    outbox.put((0, "ready", os.getpid()))
    try:
        while (task := inbox.get()) is not None:
            task_id, fn, kwargs = task
            try:
                outbox.put((task_id, "ok", fn(spark, **kwargs)))
            except BaseException:
                outbox.put((task_id, "error", traceback.format_exc()))
    finally:
        spark.stop()


# ----------------------------------------------------------------------------------------------
# Test side
# ----------------------------------------------------------------------------------------------


class Worker:
    """A spawned process with its own SparkSession that runs one job at a time."""

    def __init__(self, ctx: Any, name: str) -> None:
        self.name = name
        self.inbox, self.outbox = ctx.Queue(), ctx.Queue()
        self.process = ctx.Process(
            target=_worker_main, args=(self.inbox, self.outbox), name=name, daemon=True
        )
        self.process.start()
        self.pid: int | None = None
        self.submitted: list[int] = []
        self.next_id = 1

    def wait_ready(self) -> None:
        _, kind, pid = self.outbox.get(timeout=WORKER_START_TIMEOUT_S)
        assert kind == "ready", pid
        self.pid = pid

    def submit(self, fn: Callable[..., dict[str, Any]], **kwargs: Any) -> None:
        """Queue a job; results come back in submission order through :meth:`result`."""
        self.submitted.append(self.next_id)
        self.inbox.put((self.next_id, fn, kwargs))
        self.next_id += 1

    def result(self) -> dict[str, Any]:
        """The result of the oldest job not yet collected (results of abandoned jobs are skipped)."""
        wanted = self.submitted.pop(0)
        while True:
            task_id, kind, value = self.outbox.get(timeout=RESULT_TIMEOUT_S)
            if task_id == wanted:
                break
        if kind != "ok":
            pytest.fail(f"worker {self.name} failed:\n{value}")
        return value  # type: ignore[no-any-return]

    def forget_pending(self) -> None:
        """Drop jobs whose results a failed test never collected."""
        self.submitted.clear()

    def stop(self) -> None:
        self.inbox.put(None)
        self.process.join(timeout=60)
        if self.process.is_alive():
            self.process.terminate()  # our own child only; its JVM exits with it
            self.process.join(timeout=10)


def _storage(lake: Any) -> dict[str, Any]:
    return {"storage_options": dict(lake.storage_options)}


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def lake(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """Every scenario runs on a local lake and on a lake on the S3 server (the workers reach both)."""
    return make_lake(request.param, request)


@pytest.fixture(scope="module")
def workers() -> Iterator[tuple[Worker, Worker]]:
    ctx = mp.get_context("spawn")
    started = [Worker(ctx, "worker-a"), Worker(ctx, "worker-b")]
    try:
        for w in started:
            w.wait_ready()
        yield started[0], started[1]
    finally:
        for w in started:
            w.stop()


@dataclasses.dataclass
class Race:
    """Signals and helpers of one scenario."""

    lake: Any
    signals: str

    def run_both(
        self, a: Worker, b: Worker, op_a: dict[str, Any], op_b: dict[str, Any], mode: str, tag: str = ""
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Run ``op_a`` on ``a`` and ``op_b`` on ``b`` concurrently.

        mode ``rendezvous``: both pause at their first lake commit until both are there.
        mode ``b-first``: ``a`` pauses at its first lake commit until ``b`` finished its operation
        (``b`` starts once ``a`` is at its commit, so both read the same base).
        mode ``start``: both start their operation at the same moment; no pause at the commit.
        """
        common = {"lake_path": self.lake.location, "signals": self.signals, **_storage(self.lake)}
        a_at, b_at, a_go, b_go, b_done = (f"{tag}{n}" for n in ("a-at", "b-at", "a-go", "b-go", "b-done"))
        if mode == "rendezvous":
            a.submit(job, op=op_a, pauses={1: (a_at, b_at)}, **common)
            b.submit(job, op=op_b, pauses={1: (b_at, a_at)}, **common)
        elif mode == "b-first":
            a.submit(job, op=op_a, pauses={1: (a_at, b_done)}, **common)
            b.submit(job, op=op_b, before=(None, a_at), done=b_done, **common)
        elif mode == "start":
            a.submit(job, op=op_a, before=(a_go, b_go), **common)
            b.submit(job, op=op_b, before=(b_go, a_go), **common)
        else:
            raise ValueError(mode)
        return a.result(), b.result()


@pytest.fixture()
def race(lake: Any, tmp_path: Path, workers: tuple[Worker, Worker]) -> Iterator[Race]:
    signals = tmp_path / "signals"
    signals.mkdir()
    yield Race(lake, str(signals))
    for w in workers:  # a failed test may leave results behind; the next test must not read them
        w.forget_pending()


def create(
    lake: Any,
    name: str = "db.t",
    rows: Sequence[tuple[Any, ...]] | None = None,
    partition_by: Sequence[str] = (),
    properties: dict[str, str] | None = None,
) -> tuple[Any, Oracle]:
    rows = list(rows) if rows is not None else [make_row(k) for k in range(N)]
    table = lake.create_table(
        name, frame(lake.spark, rows), identifier=["k"], partition_by=partition_by, properties=properties
    )
    return table, Oracle(KEYED, rows)


def merge_op(keys: Sequence[int], version: int, strategy: str, table: str = "db.t") -> dict[str, Any]:
    rows = [make_row(k, version) for k in keys]
    return {"kind": "merge", "table": table, "rows": rows, "strategy": strategy}


def append_op(keys: Sequence[int], version: int, table: str = "db.t") -> dict[str, Any]:
    return {"kind": "append", "table": table, "rows": [make_row(k, version) for k in keys]}


def lake_commits(lake: Any) -> list[dict[str, Any]]:
    """Every table commit recorded in the lake log, in version order, with its lake version."""
    log = lake.catalog.log
    versions = log.versions()
    assert versions == list(range(1, len(versions) + 1)), f"lake log has gaps: {versions}"
    commits = []
    for v in versions:
        body = json.loads(log.storage.read(version_key(v)))
        assert body["parent-version"] == (v - 1 if v > 1 else None) or v == 1
        commits += [{**c, "version": v} for c in body["transaction"]["commits"]]
    return commits


def snapshot_order(table: Any) -> list[int]:
    """Snapshot ids of the table's main-branch history, oldest first; asserts it is linear."""
    by_id = {s["snapshot_id"]: s for s in table.snapshots()}
    chain, current = [], table.current_snapshot_id
    while current is not None:
        chain.append(current)
        current = by_id[current]["parent_id"]
    chain.reverse()
    seqs = [by_id[s]["sequence_number"] for s in chain]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), seqs
    assert sorted(chain) == sorted(by_id), "every snapshot must be on the main branch"
    return chain


def unreferenced_files(lake: Any, table_name: str) -> list[str]:
    """Files below the table's directory that no lake version references, directly or indirectly.

    Referenced: each lake version's ``metadata.json`` of the table, every snapshot's manifest list,
    manifests and data/delete files (including entries marked deleted). Hidden files and ``_SUCCESS``
    markers that Spark writes next to data files are ignored, but a staging directory under
    ``data/`` that holds no referenced file at all is reported.
    """
    io = lake.catalog.io
    log = lake.catalog.log
    referenced: set[str] = set()
    for v in log.versions():
        entry = log.read(v).get(table_name)
        if entry is None:
            continue
        referenced.add(normalize_path(entry.metadata_location))
        metadata = lake.catalog.read_metadata(entry.metadata_location)
        for snapshot in metadata.snapshots:
            referenced.add(normalize_path(snapshot.manifest_list))
            for manifest in snapshot.manifests(io):
                referenced.add(normalize_path(manifest.manifest_path))
                for e in manifest.fetch_manifest_entry(io, discard_deleted=False):
                    referenced.add(normalize_path(e.data_file.file_path))
    location = normalize_path(lake.catalog.location(TableIdentifier.parse(table_name)))
    files = [f.key for f in list_files(io, location)]
    staging_dirs = {
        relative(k, location).split("/")[1] for k in files if relative(k, location).startswith("data/")
    }
    if not is_remote(location) and Path(location, "data").is_dir():  # empty local directories too
        staging_dirs |= {p.name for p in Path(location, "data").iterdir() if p.is_dir()}
    committed_staging = {
        parts[1]
        for k in referenced
        if k.startswith(location + "/")
        for parts in [relative(k, location).split("/")]
        if parts[0] == "data" and len(parts) > 2
    }
    orphans = []
    for key in sorted(files):
        name = key.rsplit("/", 1)[-1]
        if name.startswith((".", "_")) or key in referenced:
            continue
        orphans.append(relative(key, location))
    for staging in sorted(staging_dirs - committed_staging):
        orphans.append(f"data/{staging}/ (no referenced file)")
    return sorted(set(orphans))


def assert_committed(outcome: dict[str, Any]) -> int:
    assert outcome["status"] == "ok", outcome
    return int(outcome["result"]["snapshot_id"])


# ----------------------------------------------------------------------------------------------
# Scenarios
# ----------------------------------------------------------------------------------------------


def test_concurrent_appends_both_land(lake, race, workers, java) -> None:  # type: ignore[no-untyped-def]
    """(a) Two appends of disjoint rows taking the same lake version: one rebases, none is lost."""
    a, b = workers
    table, oracle = create(lake)
    base_snapshot = table.current_snapshot_id
    rows_a, rows_b = range(100, 110), range(200, 215)
    out_a, out_b = race.run_both(a, b, append_op(rows_a, 1), append_op(rows_b, 2), "rendezvous")
    snap_a, snap_b = assert_committed(out_a), assert_committed(out_b)
    assert (out_a["result"]["rows_inserted"], out_b["result"]["rows_inserted"]) == (10, 15)
    # both built on the same base, so exactly one lost the race for the lake version and retried
    assert sorted([out_a["versions_taken"], out_b["versions_taken"]]) == [0, 1], (out_a, out_b)
    history = snapshot_order(table)
    assert history[0] == base_snapshot and sorted(history[1:]) == sorted([snap_a, snap_b])
    commits = lake_commits(lake)
    assert [c["operation"] for c in commits] == ["create", "append", "append"]
    assert [c["version"] for c in commits] == [1, 2, 3]
    assert [c["snapshot-id"] for c in commits[1:]] == history[1:]
    # the retried commit is based on the winner's metadata, not on the stale base
    assert commits[2]["base-metadata"] == commits[1]["metadata"]
    assert table.metadata_location == commits[2]["metadata"]
    oracle.upsert([make_row(k, 1) for k in rows_a] + [make_row(k, 2) for k in rows_b])
    assert_readers_agree(table, oracle.values(), COLUMNS, java)
    assert unreferenced_files(lake, "db.t") == []


def test_concurrent_equality_delete_upserts_apply_in_commit_order(lake, race, workers, java) -> None:  # type: ignore[no-untyped-def]
    """(b) Two blind upserts with one overlapping key: both land; the later commit wins the key."""
    a, b = workers
    table, oracle = create(lake)
    keys_a = [1, 2, 3, 20, 100, 101]  # 20 is in both; 100.. are new keys
    keys_b = [5, 6, 20, 30, 102]
    op_a = merge_op(keys_a, 1, "equality-delete")
    op_b = merge_op(keys_b, 2, "equality-delete")
    out_a, out_b = race.run_both(a, b, op_a, op_b, "rendezvous")
    snap_a, snap_b = assert_committed(out_a), assert_committed(out_b)
    assert sorted([out_a["versions_taken"], out_b["versions_taken"]]) == [0, 1], (out_a, out_b)
    history = snapshot_order(table)
    assert sorted(history[1:]) == sorted([snap_a, snap_b]) and len(history) == 3
    first, second = (op_a, op_b) if history[1] == snap_a else (op_b, op_a)
    oracle.upsert(first["rows"])
    oracle.upsert(second["rows"])
    assert_readers_agree(table, oracle.values(), COLUMNS, java)
    commits = lake_commits(lake)
    assert commits[2]["base-metadata"] == commits[1]["metadata"]
    assert unreferenced_files(lake, "db.t") == []


@pytest.mark.parametrize(
    ("strategy_a", "strategy_b"),
    [
        ("copy-on-write", "copy-on-write"),
        pytest.param("position-delete", "position-delete", marks=pytest.mark.slow),
        pytest.param("copy-on-write", "position-delete", marks=pytest.mark.slow),
    ],
)
def test_conflicting_merges_one_wins(lake, race, workers, java, strategy_a, strategy_b) -> None:  # type: ignore[no-untyped-def]
    """(c) Two merges updating the same rows race for the same lake version: exactly one lands."""
    a, b = workers
    table, oracle = create(lake)
    base_snapshot = table.current_snapshot_id
    keys = range(5, 15)
    op_a, op_b = merge_op(keys, 1, strategy_a), merge_op(keys, 2, strategy_b)
    out_a, out_b = race.run_both(a, b, op_a, op_b, "rendezvous")
    statuses = sorted([out_a["status"], out_b["status"]])
    assert statuses == ["conflict", "ok"], (out_a, out_b)
    (winner, win_op), (loser, lose_op) = sorted(
        [(out_a, op_a), (out_b, op_b)], key=lambda o: o[0]["status"] != "ok"
    )
    win_snapshot = assert_committed(winner)
    assert winner["result"]["rows_updated"] == len(keys)
    # the loser: retry-safe, naming the winner's snapshot and the colliding files
    assert loser["retry_safe"] is True
    assert loser["conflicting_snapshot_id"] == win_snapshot
    assert str(win_snapshot) in loser["message"]
    assert loser["conflicting_files"], loser
    assert all(f in loser["message"] for f in loser["conflicting_files"][:5])
    assert loser["versions_taken"] == 1 and loser["log_commit_calls"] == 1
    assert loser["kind"] == KINDS[win_op["strategy"]]
    # the table shows exactly the winner's effect
    assert snapshot_order(table) == [base_snapshot, win_snapshot]
    assert [c["operation"] for c in lake_commits(lake)] == ["create", "merge"]
    oracle.upsert(win_op["rows"])
    assert_readers_agree(table, oracle.values(), COLUMNS, java)
    # nothing the loser wrote (data, delete, manifest or metadata files) is left behind
    assert unreferenced_files(lake, "db.t") == []
    # retry_safe means it: running the loser's operation again applies it on top of the winner
    loser_worker = a if loser is out_a else b
    loser_worker.submit(job, lake_path=lake.location, op=lose_op, signals=race.signals, **_storage(lake))
    retried = assert_committed(loser_worker.result())
    assert snapshot_order(table) == [base_snapshot, win_snapshot, retried]
    oracle.upsert(lose_op["rows"])
    assert_readers_agree(table, oracle.values(), COLUMNS, java)
    assert unreferenced_files(lake, "db.t") == []


def test_merge_paused_before_commit_loses_to_later_merge(lake, race, workers, java) -> None:  # type: ignore[no-untyped-def]
    """(c') A merge that read the table before another merge committed on the same rows conflicts.

    ``a`` stops right before its lake commit; ``b`` runs a whole merge meanwhile (same base), then
    ``a`` commits: it must detect ``b``'s snapshot and fail, though its own lake commit came last.
    """
    a, b = workers
    table, oracle = create(lake)
    keys = [0, 7, 8, 9, 39]
    op_a = merge_op(keys, 1, "copy-on-write")
    op_b = merge_op([*keys, 40], 2, "position-delete")
    out_a, out_b = race.run_both(a, b, op_a, op_b, "b-first")
    snap_b = assert_committed(out_b)
    assert out_a["status"] == "conflict", out_a
    assert out_a["retry_safe"] is True and out_a["conflicting_snapshot_id"] == snap_b
    assert f"concurrent snapshot {snap_b}" in out_a["message"]
    assert out_a["kind"] == KINDS["position-delete"]
    oracle.upsert(op_b["rows"])
    assert_readers_agree(table, oracle.values(), COLUMNS, java)
    assert unreferenced_files(lake, "db.t") == []


def free_race_round(
    race: Race,
    workers: tuple[Worker, Worker],
    table: Any,
    oracle: Oracle,
    op_a: dict[str, Any],
    op_b: dict[str, Any],
    tag: str,
) -> bool:
    """Start both operations at once, without pausing; check the outcome is serial. True on a conflict."""
    a, b = workers
    before = snapshot_order(table)
    out_a, out_b = race.run_both(a, b, op_a, op_b, "start", tag)
    landed = {
        o["result"]["snapshot_id"]: op for o, op in ((out_a, op_a), (out_b, op_b)) if o["status"] == "ok"
    }
    assert landed, (out_a, out_b)
    history = snapshot_order(table)
    assert history[: len(before)] == before and sorted(history[len(before) :]) == sorted(landed)
    for snapshot in history[len(before) :]:  # commit order
        oracle.upsert(landed[snapshot]["rows"])
    conflicts = [o for o in (out_a, out_b) if o["status"] == "conflict"]
    for o in conflicts:
        assert o["retry_safe"] is True and o["conflicting_snapshot_id"] in landed, o
    return bool(conflicts)


def test_free_race_is_serializable(lake, race, workers, java) -> None:  # type: ignore[no-untyped-def]
    """(c'') No pause at all: both merges start together. Whatever the timing, the result is serial.

    Either one conflicted (the other's effect alone), or the second read after the first committed
    (both effects, in commit order). The rendezvous tests are the ones that guarantee a conflict.
    """
    table, oracle = create(lake)
    op_a = merge_op(range(0, 20), 1, "copy-on-write")
    op_b = merge_op(range(10, 30), 2, "copy-on-write")
    free_race_round(race, workers, table, oracle, op_a, op_b, "r0-")
    assert_readers_agree(table, oracle.values(), COLUMNS, java)
    assert unreferenced_files(lake, "db.t") == []


@pytest.mark.slow
def test_free_race_stress(lake, race, workers, java) -> None:  # type: ignore[no-untyped-def]
    """Many unpaused rounds over every pair of strategies on one table; serial after every round."""
    table, oracle = create(lake)
    pairs = [
        ("copy-on-write", "copy-on-write"),
        ("position-delete", "position-delete"),
        ("copy-on-write", "position-delete"),
        ("equality-delete", "position-delete"),
        ("position-delete", "equality-delete"),
        ("equality-delete", "equality-delete"),
        ("equality-delete", "copy-on-write"),
        ("position-delete", "copy-on-write"),
    ]
    conflicts = 0
    for i, (strategy_a, strategy_b) in enumerate(pairs):
        op_a = merge_op(range(3 * i, 3 * i + 15), 2 * i + 1, strategy_a)
        op_b = merge_op([*range(3 * i + 8, 3 * i + 22), 100 + i], 2 * i + 2, strategy_b)
        conflicts += free_race_round(race, workers, table, oracle, op_a, op_b, f"r{i}-")
        assert_readers_agree(table, oracle.values(), COLUMNS, java=None)
    assert_readers_agree(table, oracle.values(), COLUMNS, java)
    assert unreferenced_files(lake, "db.t") == []
    print(f"free-race stress: {conflicts} of {len(pairs)} rounds had a conflict")


def test_merge_and_append_on_different_tables(lake, race, workers, java) -> None:  # type: ignore[no-untyped-def]
    """(d) Commits to two tables racing for the same lake version: the loser retries, both land."""
    a, b = workers
    t1, oracle1 = create(lake, "db.t1")
    t2, oracle2 = create(lake, "db.t2", [make_row(k) for k in range(500, 520)])
    location_before = {"db.t1": t1.metadata_location, "db.t2": t2.metadata_location}
    op_a = merge_op(range(0, 40, 3), 1, "position-delete", table="db.t1")
    op_b = append_op(range(600, 610), 2, table="db.t2")
    out_a, out_b = race.run_both(a, b, op_a, op_b, "rendezvous")
    snap_a, snap_b = assert_committed(out_a), assert_committed(out_b)
    assert sorted([out_a["versions_taken"], out_b["versions_taken"]]) == [0, 1], (out_a, out_b)
    commits = lake_commits(lake)
    assert [c["version"] for c in commits] == [1, 2, 3, 4]
    ours = {c["table"]: c for c in commits[2:]}
    assert ours["db.t1"]["snapshot-id"] == snap_a and ours["db.t2"]["snapshot-id"] == snap_b
    assert ours["db.t1"]["version"] != ours["db.t2"]["version"]
    # the other table's commit did not change the base of this one (plain retry, no rebase)
    for name, commit in ours.items():
        assert commit["base-metadata"] == location_before[name]
    latest = lake.catalog.log.latest()
    assert latest.get("db.t1").metadata_location == ours["db.t1"]["metadata"]
    assert latest.get("db.t2").metadata_location == ours["db.t2"]["metadata"]
    oracle1.upsert(op_a["rows"])
    oracle2.upsert(op_b["rows"])
    assert_readers_agree(t1, oracle1.values(), COLUMNS, java)
    assert_readers_agree(t2, oracle2.values(), COLUMNS, java)
    assert unreferenced_files(lake, "db.t1") == []
    assert unreferenced_files(lake, "db.t2") == []


def test_rebase_then_conflict_cleans_up_every_attempt(lake, race, workers, java) -> None:  # type: ignore[no-untyped-def]
    """A commit that rebases over one concurrent commit and then conflicts with a second one.

    Snapshot isolation, so ``a``'s position-delete merge may rebase over ``b``'s append; then ``b``
    rewrites the rows ``a`` deletes from. ``a`` must fail retry-safe, naming ``b``'s second snapshot,
    and remove the files of both of its attempts.
    """
    a, b = workers
    rows = [make_row(k) for k in range(N)]
    table = lake.create_table(
        "db.t", frame(lake.spark, rows), identifier=["k"], properties={"rowops.isolation-level": "snapshot"}
    )
    oracle = Oracle(KEYED, rows)
    keys = range(5, 15)
    op_a = merge_op(keys, 1, "position-delete")
    op_b1, op_b2 = append_op(range(100, 105), 2), merge_op(keys, 3, "copy-on-write")
    common = {"lake_path": lake.location, "signals": race.signals, **_storage(lake)}
    a.submit(
        job, op=op_a, pauses={1: ("a-at-commit-1", "b1-done"), 2: ("a-at-commit-2", "b2-done")}, **common
    )
    b.submit(job, op=op_b1, before=(None, "a-at-commit-1"), done="b1-done", **common)
    b.submit(job, op=op_b2, before=(None, "a-at-commit-2"), done="b2-done", **common)
    out_b1, out_b2, out_a = b.result(), b.result(), a.result()
    snap_b1, snap_b2 = assert_committed(out_b1), assert_committed(out_b2)
    assert out_a["status"] == "conflict", out_a
    assert (out_a["log_commit_calls"], out_a["versions_taken"]) == (2, 2)
    assert out_a["retry_safe"] is True and out_a["conflicting_snapshot_id"] == snap_b2
    assert out_a["kind"] == KINDS["copy-on-write"]
    assert snapshot_order(table)[1:] == [snap_b1, snap_b2]
    oracle.upsert(op_b1["rows"])
    oracle.upsert(op_b2["rows"])
    assert_readers_agree(table, oracle.values(), COLUMNS, java)
    assert unreferenced_files(lake, "db.t") == []


NEW_KEY_LAYOUTS = {"unpartitioned": (), "identity": ("k",), "bucket": ("bucket(4, k)",)}


@pytest.mark.parametrize(
    ("layout", "strategy"),
    [
        ("unpartitioned", "copy-on-write"),
        ("identity", "position-delete"),
        ("bucket", "position-delete"),
        pytest.param("unpartitioned", "position-delete", marks=pytest.mark.slow),
        pytest.param("identity", "copy-on-write", marks=pytest.mark.slow),
        pytest.param("bucket", "copy-on-write", marks=pytest.mark.slow),
    ],
)
def test_upserts_of_the_same_new_key_serializable(lake, race, workers, java, layout, strategy) -> None:  # type: ignore[no-untyped-def]
    """Two upserts that both insert a key above the current maximum (a new, file-less partition under
    identity partitioning): the outcome depended on that key being absent, so under serializable
    isolation exactly one commits; the table never holds the key twice."""
    a, b = workers
    table, oracle = create(lake, partition_by=NEW_KEY_LAYOUTS[layout])
    op_a, op_b = merge_op([3, 1000], 1, strategy), merge_op([1000], 2, strategy)
    out_a, out_b = race.run_both(a, b, op_a, op_b, "rendezvous")
    assert sorted([out_a["status"], out_b["status"]]) == ["conflict", "ok"], (out_a, out_b)
    (winner, win_op), (loser, _) = sorted(
        [(out_a, op_a), (out_b, op_b)], key=lambda o: o[0]["status"] != "ok"
    )
    assert loser["kind"] == ConflictKind.CONCURRENT_APPEND.value and loser["retry_safe"] is True
    assert loser["conflicting_snapshot_id"] == assert_committed(winner)
    oracle.upsert(win_op["rows"])
    assert_readers_agree(table, oracle.values(), COLUMNS, java)
    assert unreferenced_files(lake, "db.t") == []


def test_upserts_of_disjoint_new_keys_both_commit(lake, race, workers, java) -> None:  # type: ignore[no-untyped-def]
    """The read set is key ranges, not whole partitions: new keys 1000 and 2000 (the same bucket) do not
    conflict, so the second commit rebases."""
    a, b = workers
    table, oracle = create(lake, partition_by=("bucket(2, k)",))
    op_a, op_b = merge_op([1000], 1, "position-delete"), merge_op([2000], 2, "position-delete")
    out_a, out_b = race.run_both(a, b, op_a, op_b, "rendezvous")
    assert_committed(out_a), assert_committed(out_b)
    oracle.upsert(op_a["rows"])
    oracle.upsert(op_b["rows"])
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_upserts_of_the_same_new_key_snapshot_isolation(lake, race, workers) -> None:  # type: ignore[no-untyped-def]
    """Documented behaviour: snapshot isolation checks write-write conflicts only. Two upserts that
    both insert the same new key both commit, and the table holds that key twice (use serializable,
    the default, or equality deletes, whose upserts replace the key, when keys must stay unique)."""
    a, b = workers
    table, _ = create(lake, properties={"rowops.isolation-level": "snapshot"})
    out_a, out_b = race.run_both(
        a, b, merge_op([1000], 1, "position-delete"), merge_op([1000], 2, "position-delete"), "rendezvous"
    )
    assert_committed(out_a), assert_committed(out_b)
    assert table.to_df().filter("k = 1000").count() == 2
