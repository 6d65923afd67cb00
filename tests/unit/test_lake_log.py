"""The lake log and put-if-absent: exactly one writer wins each version, across processes."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest

from rowops.catalog.log import LakeLog, TableEntry, VersionTaken
from rowops.catalog.storage import AlreadyExists, put_if_absent
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
