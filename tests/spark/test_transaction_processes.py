"""Transactions across OS processes: concurrent transfers and writers killed with SIGKILL.

Writer processes (``tests/spark/transfer_worker.py``, each its own local SparkSession and JVM, in its
own session/process group) run transfer transactions on one lake: ``db.accounts`` and ``db.savings``
(8 accounts each, 1000 per account) and ``db.ledger`` (one row per committed transfer, ``tx`` = the
transaction id). After the writers stop, every lake version is read back and must satisfy:

* the total balance over both tables is the initial total;
* every account's balance is its initial balance plus the ledger's amounts in minus out (each
  committed transfer applied exactly once), and ledger ``tx`` ids are unique;
* the ledger's transaction ids are exactly the transactions recorded by the lake versions after the
  set-up, and every transfer a writer saw commit is among them (no committed row is lost).

The crash suite kills writers at random moments and inside ``commit()`` (aimed at the phases the
worker reports), restarts them, and afterwards runs ``lake.cleanup(older_than=0)``: no file below a
table's ``data/`` or ``metadata/`` may stay that the lake versions do not reference (computed here
from the metadata with pyiceberg), and no referenced file may go.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.table import StaticTable

import rowops
from rowops.catalog import storage
from tests.oracles.duckdb_reader import read_duckdb
from tests.oracles.java_reader import JavaIcebergReader
from tests.spark.transfer_worker import ACCOUNTS, LEDGER, TABLE_IDS, initial_balances, transfer

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "tpcds" / "results"
TABLES = ("db.accounts", "db.savings", "db.ledger")
READY_TIMEOUT_S = 300.0
EXIT_TIMEOUT_S = 900.0
JVM_EXIT_TIMEOUT_S = 30.0
COMMIT_PHASES = ("commit", "put", "put-ok", "put-lost")

# ----------------------------------------------------------------------------------------------
# Writer processes
# ----------------------------------------------------------------------------------------------


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group ``pgid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


@dataclass
class Writer:
    """One writer process (a new session, so it and its JVM form one process group)."""

    name: str
    config: dict[str, Any]
    workdir: Path
    incarnation: int = 0
    proc: subprocess.Popen[bytes] | None = None
    module: str = "tests.spark.transfer_worker"  # the worker's module (run with ``python -m``)
    events_path: Path = field(init=False)

    def start(self) -> None:
        self.incarnation += 1
        self.events_path = self.workdir / f"{self.name}-{self.incarnation}.events"
        config = {**self.config, "name": self.name, "events": str(self.events_path)}
        config["seed"] = config.get("seed", random.randrange(2**32)) + self.incarnation  # new choices
        log = open(self.workdir / f"{self.name}-{self.incarnation}.log", "wb")  # noqa: SIM115
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        with log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", self.module, json.dumps(config)],
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def events(self) -> list[dict[str, Any]]:
        if not self.events_path.exists():
            return []
        lines = self.events_path.read_text().splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]

    def last(self) -> str | None:
        found = self.events()
        return found[-1]["e"] if found else None

    def wait_for(self, predicate: Any, timeout: float, poll: float = 0.005) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert self.proc is not None
            if self.proc.poll() is not None:
                pytest.fail(f"writer {self.name} exited with {self.proc.returncode}:\n{self.output()}")
            if time.monotonic() > deadline:
                pytest.fail(f"writer {self.name} timed out after {timeout} s:\n{self.output()}")
            time.sleep(poll)

    def wait_ready(self) -> None:
        self.wait_for(lambda: self.last() is not None, READY_TIMEOUT_S, poll=0.1)

    def output(self) -> str:
        return (self.workdir / f"{self.name}-{self.incarnation}.log").read_text()[-4000:]

    def kill(self) -> dict[str, Any]:
        """SIGKILL the writer (not its group), reap it, then make sure its JVM exits too."""
        assert self.proc is not None
        pid = self.proc.pid
        os.kill(pid, signal.SIGKILL)
        self.proc.wait()
        events = self.events()  # the dead writer cannot add any: its last event is its last phase
        began = time.monotonic()
        while group_members(pid) and time.monotonic() - began < JVM_EXIT_TIMEOUT_S:
            time.sleep(0.1)
        left = group_members(pid)
        if left:
            os.killpg(pid, signal.SIGKILL)
            time.sleep(0.5)
        assert not group_members(pid), f"processes of writer {self.name} survive SIGKILL of the group"
        return {
            "writer": self.name,
            "incarnation": self.incarnation,
            "phase": events[-1]["e"] if events else "starting",
            "tx": events[-1].get("tx") if events else None,
            "jvm_exited_alone": not left,
            "jvm_exit_s": round(time.monotonic() - began, 2),
        }

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.fixture()
def writers(tmp_path: Path) -> Iterator[list[Writer]]:
    started: list[Writer] = []
    yield started
    for writer in started:
        writer.stop()


def all_events(workdir: Path) -> list[dict[str, Any]]:
    events = []
    for path in sorted(workdir.glob("*.events")):
        events += [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]
    return events


# ----------------------------------------------------------------------------------------------
# The bank and its invariants
# ----------------------------------------------------------------------------------------------


def create_bank(lake: rowops.Lakehouse) -> int:
    """The three tables, created in one transaction; returns its lake version."""
    spark = lake.spark
    start = initial_balances()
    with lake.transaction() as tx:
        for name, ids in TABLE_IDS.items():
            tx.create_table(
                name, spark.createDataFrame([(i, start[i]) for i in ids], ACCOUNTS), identifier=["id"]
            )
        tx.create_table("db.ledger", LEDGER)
    assert tx.version is not None
    return tx.version


Rows = list[tuple[Any, ...]]


class VersionReader:
    """Reads every table of a lake version through one reader, cached by metadata location."""

    def __init__(self, lake: rowops.Lakehouse, java: JavaIcebergReader | None = None) -> None:
        self.lake, self.java = lake, java
        self.cache: dict[str, Rows] = {}

    def rows(self, table: rowops.Table) -> Rows:
        location = table.metadata_location
        if location not in self.cache:
            if self.java is not None:
                columns = [f.name for f in table.schema.fields]
                read = self.java.read(location).select(columns)
                self.cache[location] = [tuple(r.values()) for r in read.to_pylist()]
            else:
                self.cache[location] = [tuple(r) for r in table.to_df().collect()]
        return self.cache[location]

    def version(self, version: int) -> dict[str, Rows]:
        at = self.lake.at(version=version)
        return {name: self.rows(at.table(name)) for name in TABLES}


def check_invariants(tables: dict[str, Rows], where: str) -> set[str]:
    """Assert the bank's invariants on one lake version's rows; returns its ledger's transaction ids."""
    ledger = tables["db.ledger"]
    ids = Counter(r[0] for r in ledger)
    twice = [tx for tx, n in ids.items() if n > 1]
    assert not twice, f"{where}: ledger rows of transactions {twice} applied more than once"
    expected = initial_balances()
    for _, src, dst, amount in ledger:
        expected[src] -= amount
        expected[dst] += amount
    found: dict[int, int] = {}
    for name in TABLE_IDS:
        keys = [r[0] for r in tables[name]]
        assert len(keys) == len(set(keys)), f"{where}: {name} holds an account twice: {sorted(keys)}"
        found |= {r[0]: r[1] for r in tables[name]}
    assert sum(found.values()) == sum(initial_balances().values()), f"{where}: total changed: {found}"
    assert found == expected, f"{where}: balances differ from initial + ledger: {found} != {expected}"
    return set(ids)


def check_every_version(
    lake: rowops.Lakehouse, first: int, readers: Iterable[VersionReader]
) -> dict[int, set[str]]:
    """Check the invariants at every lake version from ``first`` through each reader."""
    ledgers: dict[int, set[str]] = {}
    for reader in readers:
        label = "iceberg-java" if reader.java else "rowops"
        for version in range(first, lake.version + 1):
            ledgers[version] = check_invariants(reader.version(version), f"{label} at lake version {version}")
    return ledgers


def check_history(lake: rowops.Lakehouse, first: int, ledgers: dict[int, set[str]]) -> list[str]:
    """Each version after ``first`` is one transfer: the ledger grows by exactly its transaction."""
    versions = lake.catalog.log.versions()
    assert versions == list(range(1, len(versions) + 1)), f"lake log has gaps: {versions}"
    committed = []
    for entry in lake.history(since=first + 1):
        tx = entry.transaction_id
        assert tx is not None
        assert ledgers[entry.version] == ledgers[entry.version - 1] | {tx}, entry
        assert tx not in ledgers[entry.version - 1], f"transaction {tx} committed twice"
        committed.append(tx)
    return committed


def latest_rows_agree(lake: rowops.Lakehouse, java: JavaIcebergReader | None) -> dict[str, str]:
    """The latest tables read by rowops, DuckDB and (if running) Iceberg's Java reader are equal."""
    checked = {}
    for name in TABLES:
        table = lake.table(name)
        ours = sorted(tuple(r) for r in table.to_df().collect())
        columns = [f.name for f in table.schema.fields]
        duck = sorted(tuple(r[c] for c in columns) for r in read_duckdb(table.metadata_location).to_pylist())
        assert duck == ours, f"duckdb differs on {name}"
        if java is not None:
            jrows = sorted(
                tuple(r[c] for c in columns) for r in java.read(table.metadata_location).to_pylist()
            )
            assert jrows == ours, f"iceberg-java differs on {name}"
        checked[name] = "rowops, duckdb" + (", iceberg-java" if java else "")
    return checked


# ----------------------------------------------------------------------------------------------
# Files: what the lake versions reference (computed here with pyiceberg) and what is on disk
# ----------------------------------------------------------------------------------------------


def _local(path: str) -> str:
    for prefix in ("file://", "file:"):
        if path.startswith(prefix):
            return path[len(prefix) :]
    return path


def referenced_by_versions(lake: rowops.Lakehouse, versions: Iterable[int] | None = None) -> set[str]:
    """Every file the lake versions reference: their tables' metadata.json and their snapshots' files."""
    io = PyArrowFileIO()
    locations = set()
    for number in lake.catalog.log.versions() if versions is None else versions:
        body = json.loads(lake.catalog.log.dir.joinpath(f"{number:020d}.json").read_text())
        locations |= {t["metadata-location"] for t in body["tables"].values()}
    found = {_local(loc) for loc in locations}
    manifest_lists = {}
    for location in locations:
        metadata = StaticTable.from_metadata(location).metadata
        manifest_lists |= {s.manifest_list: s for s in metadata.snapshots}
    found |= {_local(p) for p in manifest_lists}
    for snapshot in manifest_lists.values():
        for manifest in snapshot.manifests(io):
            found.add(_local(manifest.manifest_path))
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                found.add(_local(entry.data_file.file_path))
    return found


def table_files(lake: rowops.Lakehouse) -> set[str]:
    """Every file below the ``data/`` and ``metadata/`` directories of the lake's table directories."""
    found = set()
    for table_dir in (lake.root / "db").iterdir():
        for sub in ("data", "metadata"):
            found |= {str(p) for p in (table_dir / sub).rglob("*") if p.is_file()}
    return found


def abort_rates(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Attempts, commits and aborts (by kind) per isolation level, from the writers' events."""
    isolation_of = {e["tx"]: e["isolation"] for e in events if e["e"] == "begin"}
    rates: dict[str, dict[str, Any]] = {}
    for level in sorted(set(isolation_of.values())):
        mine = [e for e in events if isolation_of.get(e.get("tx", "")) == level]
        attempts = sum(e["e"] == "begin" for e in mine)
        aborts = Counter(e["kind"] for e in mine if e["e"] == "abort")
        rates[level] = {
            "attempts": attempts,
            "commits": sum(e["e"] == "committed" for e in mine),
            "aborts": sum(aborts.values()),
            "aborts_by_kind": dict(sorted(aborts.items())),
            "abort_rate": round(sum(aborts.values()) / attempts, 3) if attempts else None,
        }
    return rates


def write_results(name: str, results: dict[str, Any]) -> None:
    print(json.dumps(results, indent=1))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / name).write_text(json.dumps(results, indent=1) + "\n")


# ----------------------------------------------------------------------------------------------
# Suites
# ----------------------------------------------------------------------------------------------


def run_transfers(
    lake: rowops.Lakehouse, tmp_path: Path, writers: list[Writer], isolations: list[str], count: int
) -> tuple[list[dict[str, Any]], float]:
    """Start one writer per isolation level, release them together, wait until all finished."""
    go = tmp_path / "go"
    for i, isolation in enumerate(isolations):
        config = {
            "lake": str(lake.root),
            "isolation": isolation,
            "strategy": "position-delete",
            "count": count,
            "go": str(go),
        }
        writers.append(Writer(f"w{i}-{isolation}", config, tmp_path))
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.wait_ready()
    began = time.monotonic()
    go.touch()
    for writer in writers:
        assert writer.proc is not None
        writer.proc.wait(timeout=EXIT_TIMEOUT_S)
        assert writer.proc.returncode == 0, writer.output()
        assert writer.last() == "done", writer.events()[-3:]
    return all_events(tmp_path), time.monotonic() - began


def check_transfers(
    lake: rowops.Lakehouse, first: int, events: list[dict[str, Any]], java: JavaIcebergReader | None
) -> dict[int, set[str]]:
    readers = [VersionReader(lake)] + ([VersionReader(lake, java)] if java else [])
    ledgers = check_every_version(lake, first, readers)
    committed = check_history(lake, first, ledgers)
    seen = [e["tx"] for e in events if e["e"] == "committed"]
    assert sorted(seen) == sorted(committed), "the writers' commits are not exactly the lake's versions"
    return ledgers


@pytest.mark.slow
@pytest.mark.crash
def test_two_processes_transfer_smoke(lake: rowops.Lakehouse, tmp_path: Path, writers: list[Writer]) -> None:
    """Two writer processes, two transfers each, one serializable and one snapshot: invariants hold."""
    first = create_bank(lake)
    events, _ = run_transfers(lake, tmp_path, writers, ["serializable", "snapshot"], count=2)
    check_transfers(lake, first, events, None)
    assert lake.version == first + 4


@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.timeout(2400)
def test_concurrent_transfers_keep_invariants_at_every_version(
    lake: rowops.Lakehouse, tmp_path: Path, writers: list[Writer], java: JavaIcebergReader | None
) -> None:
    """Three writer processes (serializable, snapshot, serializable), eight transfers each."""
    first = create_bank(lake)
    began = time.monotonic()
    isolations = ["serializable", "snapshot", "serializable"]
    events, run_s = run_transfers(lake, tmp_path, writers, isolations, count=8)
    check_transfers(lake, first, events, java)
    readers = latest_rows_agree(lake, java)
    assert lake.version == first + 8 * len(isolations)
    rates = abort_rates(events)
    write_results(
        "transactions-concurrency.json",
        {
            "suite": "tests/spark/test_transaction_processes.py::test_concurrent_transfers_keep_invariants_at_every_version",
            "workers": [{"isolation": i, "transfers": 8, "strategy": "position-delete"} for i in isolations],
            "spark": "local[1] per worker, 2 shuffle partitions",
            "lake_versions": lake.version,
            "transfers_run_seconds": round(run_s, 1),
            "total_seconds": round(time.monotonic() - began, 1),
            "per_isolation": rates,
            "readers_at_every_version": ["rowops"] + (["iceberg-java"] if java else []),
            "readers_latest": readers,
        },
    )


KILLS = int(os.environ.get("ROWOPS_CRASH_KILLS", "14"))


def run_kills(writers: list[Writer], rng: random.Random, lake: rowops.Lakehouse) -> list[dict[str, Any]]:
    """Kill the writers in turn, half of the kills aimed at ``commit()``, restarting each one."""
    kills = []
    for k in range(KILLS):
        writer = writers[k % len(writers)]
        aim = "commit" if (k // len(writers)) % 2 == 0 else "random"
        writer.wait_ready()
        if aim == "commit":  # inside tx.commit(): writing metadata, or around the put-if-absent
            phase, delay = rng.choice([("commit", 0.1), ("put", 0.25)])
            writer.wait_for(lambda w=writer, p=phase: w.last() == p, timeout=EXIT_TIMEOUT_S)
            time.sleep(rng.uniform(0, delay))
        else:  # anywhere: starting up, reading, writing data files, committing
            time.sleep(rng.uniform(1, 90))
        kill = {**writer.kill(), "aim": aim}
        kills.append(kill)
        print(f"kill {k + 1}: {kill}")
        lake.catalog.log.latest()  # the lake opens right after every kill
        writer.start()
    return kills


@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.timeout(3600)
def test_sigkilled_writers_leave_a_consistent_lake_and_cleanup_removes_their_files(
    lake: rowops.Lakehouse, tmp_path: Path, writers: list[Writer], java: JavaIcebergReader | None
) -> None:
    """Two looping writers (serializable and snapshot, all three encodings) killed 14 times."""
    first = create_bank(lake)
    began = time.monotonic()
    seed = int(os.environ.get("ROWOPS_CRASH_SEED", random.randrange(2**32)))
    print(f"ROWOPS_CRASH_SEED={seed}")
    rng = random.Random(seed)
    for i, isolation in enumerate(["serializable", "snapshot"]):
        config = {"lake": str(lake.root), "isolation": isolation, "strategy": "mix", "count": 0}
        writers.append(
            Writer(f"c{i}-{isolation}", {**config, "stretch": 0.15, "seed": rng.randrange(2**32)}, tmp_path)
        )
        writers[-1].start()
    kills = run_kills(writers, rng, lake)
    final = [{**w.kill(), "aim": "end"} for w in writers]
    kill_s = time.monotonic() - began
    events = all_events(tmp_path)

    # every version, through rowops and Iceberg's Java reader
    readers = [VersionReader(lake)] + ([VersionReader(lake, java)] if java else [])
    ledgers = check_every_version(lake, first, readers)
    committed = check_history(lake, first, ledgers)
    acknowledged = {e["tx"] for e in events if e["e"] == "committed"}
    assert acknowledged <= set(committed), "a transfer a writer saw commit is missing from the lake"
    begun = {e["tx"] for e in events if e["e"] == "begin"}
    assert set(committed) <= begun
    latest_rows_agree(lake, java)

    # cleanup removes exactly the files no version references, and nothing else
    referenced = referenced_by_versions(lake)
    before = table_files(lake)
    assert referenced <= before, f"referenced files are missing: {sorted(referenced - before)[:5]}"
    orphans = before - referenced
    result = lake.cleanup(older_than=timedelta(0))
    after = table_files(lake)
    assert after == referenced, f"unreferenced files left: {sorted(after - referenced)[:5]}"
    assert {str(lake.root / p) for p in result.removed} == orphans
    ledgers_after = check_every_version(lake, first, [VersionReader(lake)])
    assert ledgers_after == ledgers
    latest_rows_agree(lake, java)

    phases = Counter(k["phase"] for k in kills + final)
    in_commit = [k for k in kills + final if k["phase"] in COMMIT_PHASES]
    landed = [k for k in in_commit if k.get("tx") in set(committed)]
    write_results(
        "transactions-crash.json",
        {
            "suite": "tests/spark/test_transaction_processes.py::"
            "test_sigkilled_writers_leave_a_consistent_lake_and_cleanup_removes_their_files",
            "seed": seed,
            "writers": [w.config | {"incarnations": w.incarnation} for w in writers],
            "kills": len(kills) + len(final),
            "kills_aimed_at_commit": sum(k["aim"] == "commit" for k in kills),
            "kills_during_commit": len(in_commit),
            "kills_after_the_put_landed": len(landed),
            "phase_at_kill": dict(sorted(phases.items())),
            "jvm_exited_with_its_python": sum(k["jvm_exited_alone"] for k in kills + final),
            "jvm_needed_group_kill": sum(not k["jvm_exited_alone"] for k in kills + final),
            "lake_versions": lake.version,
            "transfers_committed": len(committed),
            "committed_but_unacknowledged": len(set(committed) - acknowledged),
            "attempts": abort_rates(events),
            "table_files_before_cleanup": len(before),
            "orphans_removed": result.orphans_removed,
            "orphan_bytes_removed": result.bytes_removed,
            "referenced_files": len(referenced),
            "log_temp_files_left": len([p for p in lake.catalog.log.dir.iterdir() if p.name.startswith(".")]),
            "kill_phase_seconds": round(kill_s, 1),
            "total_seconds": round(time.monotonic() - began, 1),
            "readers_at_every_version": ["rowops"] + (["iceberg-java"] if java else []),
        },
    )
    assert len(kills) + len(final) >= min(12, KILLS) and len(in_commit) >= min(3, KILLS // 4)


def test_transaction_files_are_synced_before_the_version_references_them(
    lake: rowops.Lakehouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGKILL keeps the page cache; a power loss does not. Every file a transaction's lake version
    references (data and delete files of every table, a table created with rows, manifests,
    metadata.json) and their directories are fsync-ed before the version is linked."""
    first = create_bank(lake)
    events: list[tuple[str, str]] = []
    real_fsync, real_link = os.fsync, os.link

    def recording_fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def recording_link(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        real_link(src, dst, *args, **kwargs)
        events.append(("link", str(dst)))

    monkeypatch.setattr(os, "fsync", recording_fsync)
    monkeypatch.setattr(storage.os, "link", recording_link)
    with lake.transaction() as tx:
        transfer(tx, random.Random(7), "position-delete")
        tx.create_table("db.audit", lake.spark.createDataFrame([(1, 1)], ACCOUNTS))
    monkeypatch.undo()
    assert tx.version == first + 1
    link_at = max(i for i, (kind, _) in enumerate(events) if kind == "link")
    synced = {path for kind, path in events[:link_at] if kind == "fsync"}
    added = referenced_by_versions(lake, [first + 1]) - referenced_by_versions(lake, [first])
    assert any(f.endswith(".parquet") and "/db/audit/" in f for f in added)
    assert any(f.endswith(".parquet") and "/db/ledger/" in f for f in added)
    never_synced = sorted(added - synced)
    assert never_synced == [], f"referenced before being synced: {never_synced}"
    assert {str(Path(f).parent) for f in added} <= synced, "their directories must be synced too"
