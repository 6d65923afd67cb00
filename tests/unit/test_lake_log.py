"""The lake log and put-if-absent: exactly one writer wins each version, across processes; the table
map is a trie whose commits write only the nodes on the changed paths."""

from __future__ import annotations

import json
import multiprocessing as mp
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rowops.catalog import trie
from rowops.catalog.log import LakeLog, LakeVersion, TableEntry, VersionTaken
from rowops.catalog.storage import AlreadyExists, LocalStorage, put_if_absent
from rowops.errors import CorruptLakeError


def test_put_if_absent(tmp_path: Path) -> None:
    target = tmp_path / "a" / "v1.json"
    put_if_absent(target, b"first")
    with pytest.raises(AlreadyExists):
        put_if_absent(target, b"second")
    assert target.read_bytes() == b"first"
    assert [p.name for p in target.parent.iterdir()] == ["v1.json"]  # no temp files left


def test_versions_and_conflict(tmp_path: Path) -> None:
    log = LakeLog(tmp_path)
    base = log.latest()
    assert base.version == 0
    v1 = log.commit(base, {"db.t": TableEntry("/m1.json", "u")}, {"id": "a"})
    with pytest.raises(VersionTaken):
        log.commit(base, {"db.t": TableEntry("/m2.json", "u")}, {"id": "b"})
    assert log.latest() == v1
    assert log.read(1).get("db.t").metadata_location == "/m1.json"


def test_stale_hint_is_corrected(tmp_path: Path) -> None:
    log = LakeLog(tmp_path)
    v = log.latest()
    for i in range(3):
        v = log.commit(v, {"db.t": TableEntry(f"/m{i}.json", "u")}, {})
    (log.dir / "_latest").write_text("1")
    assert log.latest().version == 3


def test_corrupt_version_is_reported(tmp_path: Path) -> None:
    log = LakeLog(tmp_path)
    (log.dir / f"{1:020d}.json").write_text("{not json")
    with pytest.raises(CorruptLakeError):
        log.latest()


def _race(root: str, start: mp.synchronize.Event, results: mp.Queue) -> None:  # type: ignore[name-defined]
    log = LakeLog(Path(root))
    start.wait()
    wins = 0
    for _ in range(20):
        while True:
            latest = log.latest()
            try:
                log.commit(latest, {"db.t": TableEntry(f"/{mp.current_process().name}", "u")}, {})
                wins += 1
                break
            except VersionTaken:
                continue
    results.put(wins)


def test_concurrent_processes_never_lose_a_version(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    start, results = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(str(tmp_path), start, results)) for _ in range(3)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(60)
    assert sorted(results.get() for _ in procs) == [20, 20, 20]
    assert LakeLog(tmp_path).versions() == list(range(1, 61))


class CountingStorage(LocalStorage):
    """Local storage that records the keys it creates and reads."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.created: list[str] = []
        self.reads: list[str] = []

    def put_if_absent(self, key: str, data: bytes) -> None:
        super().put_if_absent(key, data)
        self.created.append(key)

    def read(self, key: str) -> bytes:
        self.reads.append(key)
        return super().read(key)


def entry(name: str, n: int) -> TableEntry:
    return TableEntry(f"/lake/{name}/metadata/{n:05d}.metadata.json", f"uuid-{name}")


def test_big_lake_commit_writes_only_the_changed_path(tmp_path: Path) -> None:
    storage = CountingStorage(tmp_path)
    log = LakeLog(tmp_path, storage)
    names = [f"db.t{i}" for i in range(2000)]
    v1 = log.commit(log.latest(), {n: entry(n, 1) for n in names}, {"id": "create"})
    depth = _path_length(v1.root, "db.t7", log)
    assert depth >= 2 and v1.table_count == 2000
    storage.created.clear()
    v2 = log.commit(v1, {"db.t7": entry("db.t7", 2)}, {"id": "update"})
    nodes = [k for k in storage.created if k.startswith("_rowops/nodes/")]
    assert storage.created[-1] == "_rowops/log/00000000000000000002.json"  # the version comes last
    assert len(nodes) == depth - 1 and len(storage.created) == depth  # one node per level below the root
    assert len(LakeLog(tmp_path).read(2).to_bytes()) < 8_000  # the version file is small
    trie.clear_cache()
    storage.reads.clear()
    fresh = LakeLog(tmp_path, storage).latest()
    assert fresh == v2 and fresh.get("db.t7") == entry("db.t7", 2)
    node_reads = [k for k in storage.reads if k.startswith("_rowops/nodes/")]
    assert len(node_reads) == depth - 1  # one node per level below the root
    assert len(storage.reads) - len(node_reads) == 3  # hint, the version, the probe of the next one
    storage.reads.clear()
    assert fresh.get("db.t7") == entry("db.t7", 2) and storage.reads == []  # cached: free


def _path_length(node: trie.Node, name: str, log: LakeLog) -> int:
    """The number of nodes from the root to the leaf of ``name``."""
    hashed, length = trie.name_hash(name), 1
    while isinstance(node, trie.Branch):
        node = log._load_node(node.children[trie.digit(hashed, length - 1)].node)
        length += 1
    return length


changes_strategy = st.lists(
    st.dictionaries(
        st.integers(0, 150).map(lambda i: f"db.t{i}"),
        st.one_of(st.none(), st.integers(0, 3)),
        max_size=80,
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=changes_strategy)
def test_random_creates_drops_and_updates_match_a_dict(
    tmp_path_factory: pytest.TempPathFactory, steps: list[dict[str, int | None]]
) -> None:
    root = tmp_path_factory.mktemp("lake")
    log = LakeLog(root)
    oracle: dict[str, TableEntry] = {}
    versions = [dict(oracle)]
    for step in steps:
        changes = {name: None if n is None else entry(name, n) for name, n in step.items()}
        log.commit(log.latest(), changes, {"id": str(len(versions))})
        for name, value in changes.items():
            if value is None:
                oracle.pop(name, None)
            else:
                oracle[name] = value
        versions.append(dict(oracle))
    trie.clear_cache()
    fresh = LakeLog(root)
    for number, expected in enumerate(versions):
        version = fresh.read(number)
        assert version.names() == sorted(expected) and version.table_count == len(expected)
        assert dict(version.items()) == expected
        for i in range(0, 151, 7):
            name = f"db.t{i}"
            assert version.get(name) == expected.get(name) and (name in version) == (name in expected)
        assert version.root == _canonical(expected)  # the shape depends on the map only


def _canonical(entries: dict[str, TableEntry]) -> trie.Node:
    return trie.Builder(lambda node_id: trie.cached(node_id) or trie.EMPTY_LEAF).apply(
        trie.EMPTY_LEAF, entries
    )


def test_history_and_version_at(tmp_path: Path) -> None:
    log = LakeLog(tmp_path)
    v = log.latest()
    for i in range(20):
        v = log.commit(v, {f"db.t{i % 3}": entry("x", i)}, {"id": str(i)})
    history = list(log.history())
    assert [h.version for h in history] == list(range(1, 21))
    stamps = [h.timestamp_ms for h in history]
    assert stamps == sorted(set(stamps))  # strictly increasing
    assert [h.version for h in log.history(5, 8)] == [5, 6, 7]
    for h in history:
        assert log.version_at(h.timestamp_ms) == h
        later = h.timestamp_ms + 1
        assert log.version_at(later).version == max(x.version for x in history if x.timestamp_ms <= later)
    assert log.version_at(stamps[0] - 1).version == 0
    assert log.version_at(stamps[-1] + 10_000).version == 20


def test_version_at_reads_logarithmically_many_versions(tmp_path: Path) -> None:
    storage = CountingStorage(tmp_path)
    log = LakeLog(tmp_path, storage)
    v = log.latest()
    for i in range(256):
        v = log.commit(v, {"db.t": entry("t", i)}, {})
    target = log.read(77)
    storage.reads.clear()
    assert log.version_at(target.timestamp_ms) == target
    assert len(storage.reads) <= 3 + 9  # latest(), then a bisection of 256 versions


def test_timestamps_increase_even_when_the_clock_goes_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = LakeLog(tmp_path)
    v1 = log.commit(log.latest(), {"db.t": entry("t", 1)}, {})
    monkeypatch.setattr(time, "time", lambda: (v1.timestamp_ms - 60_000) / 1000)
    v2 = log.commit(v1, {"db.t": entry("t", 2)}, {})
    assert v2.timestamp_ms == v1.timestamp_ms + 1


def test_referenced_entries_visits_every_entry_ever_held(tmp_path: Path) -> None:
    storage = CountingStorage(tmp_path)
    log = LakeLog(tmp_path, storage)
    v = log.commit(log.latest(), {f"db.t{i}": entry(f"db.t{i}", 0) for i in range(300)}, {})
    expected = {entry(f"db.t{i}", 0) for i in range(300)}
    for n in range(1, 6):
        changes: dict[str, TableEntry | None] = {f"db.t{i}": entry(f"db.t{i}", n) for i in range(n)}
        changes[f"db.t{299 - n}"] = None  # drops stay referenced by older versions
        expected |= {e for e in changes.values() if e is not None}
        v = log.commit(v, changes, {})
    trie.clear_cache()
    storage.reads.clear()
    found = list(LakeLog(tmp_path, storage).referenced_entries())
    assert len(found) == len(set(found)) and set(found) == expected
    node_reads = [k for k in storage.reads if k.startswith("_rowops/nodes/")]
    assert len(node_reads) == len(set(node_reads))  # each immutable node read once
    assert set(node_reads) == set(storage.list("_rowops/nodes/"))


def test_format_1_versions_are_read_and_committed_on(tmp_path: Path) -> None:
    log = LakeLog(tmp_path)
    tables = {f"db.t{i}": {"metadata-location": f"/m{i}.json", "table-uuid": f"u{i}"} for i in range(100)}
    old = {"format": "rowops-lake/1", "version": 1, "parent-version": None, "timestamp-ms": 1000,
           "tables": tables, "transaction": {"id": "old"}}  # fmt: skip
    put_if_absent(log._path(1), json.dumps(old, indent=1).encode())
    v1 = log.latest()
    assert v1.version == 1 and v1.transaction == {"id": "old"} and v1.table_count == 100
    assert v1.get("db.t42") == TableEntry("/m42.json", "u42") and v1.names() == sorted(tables)
    v2 = log.commit(v1, {"db.t42": None, "db.new": TableEntry("/n.json", "un")}, {"id": "new"})
    assert isinstance(v2.root, trie.Branch)  # the 100-table leaf was split
    again = LakeLog(tmp_path).read(2)
    assert again.names() == sorted([*(n for n in tables if n != "db.t42"), "db.new"])
    assert json.loads(log._path(2).read_bytes())["format"] == "rowops-lake/2"


def test_small_lake_keeps_the_map_in_the_version_file(tmp_path: Path) -> None:
    log = LakeLog(tmp_path)
    log.commit(log.latest(), {"db.a": entry("a", 1), "db.b": entry("b", 1)}, {"id": "x"})
    body = json.loads(log._path(1).read_bytes())
    assert body["tables"]["db.a"] == entry("a", 1).to_json() and body["table-count"] == 2
    assert not (tmp_path / "_rowops" / "nodes").exists()


def test_missing_or_altered_node_is_reported(tmp_path: Path) -> None:
    log = LakeLog(tmp_path)
    log.commit(log.latest(), {f"db.t{i}": entry(f"db.t{i}", 0) for i in range(200)}, {})
    node = sorted((tmp_path / "_rowops" / "nodes").rglob("*.json"))[0]
    node.write_bytes(node.read_bytes().replace(b"00000", b"00001"))
    trie.clear_cache()
    version = LakeLog(tmp_path).latest()
    with pytest.raises(CorruptLakeError, match="does not match"):
        version.names()
    node.unlink()
    trie.clear_cache()
    with pytest.raises(CorruptLakeError, match="unreadable"):
        LakeLog(tmp_path).latest().names()


def test_hint_far_behind_is_found_by_galloping(tmp_path: Path) -> None:
    storage = CountingStorage(tmp_path)
    log = LakeLog(tmp_path, storage)
    v = log.latest()
    for i in range(100):
        v = log.commit(v, {"db.t": entry("t", i)}, {})
    storage.put("_rowops/log/_latest", b"3")
    storage.reads.clear()
    assert log.latest().version == 100
    assert len(storage.reads) <= 2 + 2 * 7  # hint, version 3, then doubling and bisecting


def test_version_equality_ignores_how_it_was_obtained(tmp_path: Path) -> None:
    log = LakeLog(tmp_path)
    v1 = log.commit(log.latest(), {f"db.t{i}": entry(f"db.t{i}", 0) for i in range(100)}, {"id": "a"})
    trie.clear_cache()
    assert LakeLog(tmp_path).read(1) == v1 and LakeVersion(1) != v1


def test_dropping_tables_collapses_the_trie_back(tmp_path: Path) -> None:
    """A branch whose tables drop to LEAF_MAX becomes a leaf again: the shape depends on the map only."""
    log = LakeLog(tmp_path)
    v = log.commit(log.latest(), {f"db.t{i}": entry(f"db.t{i}", 0) for i in range(3000)}, {})
    assert isinstance(v.root, trie.Branch)
    v = log.commit(v, {f"db.t{i}": None for i in range(40, 3000)}, {})
    assert v.root == trie.Leaf({f"db.t{i}": entry(f"db.t{i}", 0) for i in range(40)})
    assert json.loads(log._path(2).read_bytes())["table-count"] == 40


def _race_big(root: str, start: Any, me: int) -> None:
    log = LakeLog(Path(root))
    start.wait()
    for n in range(15):
        while True:
            try:
                log.commit(log.latest(), {f"db.t{me * 7 + n % 3}": entry(f"p{me}", n)}, {"id": f"{me}-{n}"})
                break
            except VersionTaken:
                continue


def test_concurrent_processes_on_a_big_lake_keep_every_change(tmp_path: Path) -> None:
    """Writers racing on a 300-table lake (trie nodes written by several processes, some identical):
    every commit lands exactly once and the newest version holds each writer's last changes."""
    log = LakeLog(tmp_path)
    log.commit(log.latest(), {f"db.t{i}": entry(f"db.t{i}", 0) for i in range(300)}, {"id": "create"})
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_race_big, args=(str(tmp_path), start, me)) for me in range(3)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    trie.clear_cache()
    fresh = LakeLog(tmp_path)
    assert fresh.versions() == list(range(1, 47))
    ids = [v.transaction["id"] for v in fresh.history(2)]
    assert sorted(ids) == sorted(f"{me}-{n}" for me in range(3) for n in range(15))
    newest = fresh.latest()
    for me in range(3):
        for k in range(3):
            last = max(n for n in range(15) if n % 3 == k)
            assert newest.get(f"db.t{me * 7 + k}") == entry(f"p{me}", last)
    assert newest.table_count == 300


class DurabilityRecordingStorage(LocalStorage):
    """Local storage that records the existing keys it is asked to make durable."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.made_durable: list[str] = []

    def make_durable(self, key: str) -> None:
        self.made_durable.append(key)
        super().make_durable(key)


def test_nodes_and_versions_found_existing_are_synced_before_a_version_builds_on_them(tmp_path: Path) -> None:
    """A node or version another writer linked (and may have died before its directory sync) is
    synced before this writer's version references it or follows it (issue 42 item 7)."""
    storage = DurabilityRecordingStorage(tmp_path)
    log = LakeLog(tmp_path, storage)
    v1 = log.commit(log.latest(), {f"db.t{i}": entry(f"db.t{i}", 1) for i in range(100)}, {"id": "create"})
    change = {"db.t7": entry("db.t7", 2)}
    log.commit(v1, change, {"id": "first"})
    assert storage.made_durable == []
    with pytest.raises(VersionTaken):
        log.commit(v1, change, {"id": "second"})  # the same nodes: found existing, then the version
    nodes = [k for k in storage.made_durable if k.startswith("_rowops/nodes/")]
    assert nodes and storage.made_durable[-1] == "_rowops/log/00000000000000000002.json"
