"""Commit safety: once a lake version may reference files, nothing deletes them.

Each test provokes a failure at one instant of the commit path (a storage error, an interrupt, a
retried link that reports the writer's own success, a concurrent commit during a rollback) with
real files and real Spark, and checks the lake afterwards: every file the newest version references
exists and the rows read back through the independent readers are the expected ones.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO

import rowops
from rowops import errors
from rowops.catalog import storage
from rowops.catalog.log import LakeLog, TableEntry, VersionTaken
from rowops.faults import InjectedFault
from rowops.meta.paths import normalize_path
from tests.readers import assert_readers_agree
from tests.spark.tables import COLUMNS, LAYOUTS, Oracle, fingerprint, frame, make_row

N = 20
KEYED = LAYOUTS[0]


@pytest.fixture()
def table(lake):  # type: ignore[no-untyped-def]
    rows = [make_row(k) for k in range(N)]
    return lake.create_table("db.t", frame(lake.spark, rows), partition_by=["bucket(4, k)"], identifier=["k"])


def referenced_files(lake: Any, name: str = "db.t") -> list[str]:
    """Every file the newest lake version references for the table: metadata, manifest lists,
    manifests, data and delete files of every snapshot."""
    io = PyArrowFileIO()
    entry = lake.catalog.log.latest().get(name)
    files = [entry.metadata_location]
    metadata = lake.catalog.read_metadata(entry.metadata_location)
    for snapshot in metadata.snapshots:
        files.append(snapshot.manifest_list)
        for manifest in snapshot.manifests(io):
            files.append(manifest.manifest_path)
            files += [e.data_file.file_path for e in manifest.fetch_manifest_entry(io, discard_deleted=False)]
    return [normalize_path(f) for f in files]


def assert_intact(lake: Any, table: Any, oracle: Oracle, java: Any) -> None:
    missing = [f for f in referenced_files(lake) if not Path(f).exists()]
    assert missing == [], f"the committed version references deleted files: {missing}"
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def _upsert(lake: Any) -> tuple[Any, Oracle]:
    """A source updating key 3 and inserting key 500, and the rows expected afterwards."""
    rows = [make_row(3, 1), make_row(500, 1)]
    oracle = Oracle(KEYED, [make_row(k) for k in range(N)])
    oracle.upsert(rows)
    return frame(lake.spark, rows), oracle


@pytest.mark.parametrize("strategy", ["copy-on-write", "position-delete", "equality-delete"])
def test_failure_after_commit_keeps_the_committed_version(lake, table, strategy, monkeypatch, java) -> None:  # type: ignore[no-untyped-def]
    """An exception raised after the lake version exists (here: an injected fault right after the
    put-if-absent) propagates, but deletes nothing: the version is committed and readable."""
    source, oracle = _upsert(lake)
    before = table.current_snapshot_id
    monkeypatch.setenv("ROWOPS_FAULT", "after-commit")
    with pytest.raises(InjectedFault) as caught:
        rowops.merge(source, table, on=["k"], strategy=strategy)
    assert not errors.is_cleanable(caught.value)
    monkeypatch.delenv("ROWOPS_FAULT")
    assert table.current_snapshot_id != before
    assert_intact(lake, table, oracle, java)


def test_cleanup_error_after_the_link_keeps_the_commit(lake, table, monkeypatch, java) -> None:  # type: ignore[no-untyped-def]
    """Removing put-if-absent's temporary file fails after the version was linked (an OSError on a
    flaky disk): the commit stands, the operation succeeds, and nothing is deleted."""
    source, oracle = _upsert(lake)
    real_unlink = Path.unlink

    def failing_unlink(self: Path, missing_ok: bool = False) -> None:
        if self.name.endswith(".tmp") and "_rowops" in str(self):
            raise OSError("injected: cannot remove temporary file")
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", failing_unlink)
    result = rowops.merge(source, table, on=["k"], strategy="position-delete")
    monkeypatch.undo()
    assert table.current_snapshot_id == result.snapshot_id
    assert_intact(lake, table, oracle, java)


def test_commit_state_unknown_leaves_every_file(lake, table, monkeypatch, java) -> None:  # type: ignore[no-untyped-def]
    """The storage fails right after linking the version (directory fsync): the outcome is unknown,
    so the operation raises CommitStateUnknownError with a Help line and leaves every file; here
    the version did land, and it is intact."""
    source, oracle = _upsert(lake)
    monkeypatch.setenv("ROWOPS_FAULT", "commit-unknown")
    with pytest.raises(errors.CommitStateUnknownError) as caught:
        rowops.merge(source, table, on=["k"], strategy="copy-on-write")
    monkeypatch.delenv("ROWOPS_FAULT")
    assert "Help:" in str(caught.value) and not errors.is_cleanable(caught.value)
    assert_intact(lake, table, oracle, java)


def test_interrupt_during_the_put_keeps_files(lake, table, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A KeyboardInterrupt while the version is being linked: the outcome is unknown to the writer,
    so no file the attempt references is removed (here the link did happen)."""
    source, _ = _upsert(lake)
    real_link = os.link

    def link_then_interrupt(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        real_link(src, dst, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(storage.os, "link", link_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        rowops.merge(source, table, on=["k"], strategy="position-delete")
    monkeypatch.undo()
    missing = [f for f in referenced_files(lake) if not Path(f).exists()]
    assert missing == []


def test_retried_link_reporting_own_success_is_not_applied_twice(lake, table, monkeypatch, java) -> None:  # type: ignore[no-untyped-def]
    """On a network file system a retried LINK can report EEXIST for the writer's own success. The
    writer reads that version back, finds its own transaction id and stops: a blind append is
    committed once, not re-applied on the next version."""
    rows = [make_row(k, 2) for k in (600, 601, 602)]
    oracle = Oracle(KEYED, [make_row(k) for k in range(N)])
    oracle.upsert(rows)
    real_link = os.link
    calls = []

    def link_reporting_exists(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        real_link(src, dst, *args, **kwargs)
        calls.append(dst)
        if len(calls) == 1:
            raise FileExistsError(17, "File exists (retried RPC)", str(dst))

    monkeypatch.setattr(storage.os, "link", link_reporting_exists)
    table.append(frame(lake.spark, rows))
    monkeypatch.undo()
    assert len(calls) == 1, "the writer must not commit a second version"
    assert [s["summary"]["operation"] for s in table.snapshots()] == ["append", "append"]
    assert_intact(lake, table, oracle, java)


def test_own_version_is_recognized_by_transaction_id(tmp_path: Path) -> None:
    log = LakeLog(tmp_path)
    base = log.latest()
    mine = log.commit(base, {"db.t": TableEntry("/m1.json", "u")}, {"id": "txn-1"})
    again = log.commit(base, {"db.t": TableEntry("/m1.json", "u")}, {"id": "txn-1"})
    assert again.version == mine.version == 1 and log.versions() == [1]
    with pytest.raises(VersionTaken):
        log.commit(base, {"db.t": TableEntry("/m2.json", "u")}, {"id": "txn-2"})


def test_files_are_synced_before_the_version_references_them(lake, table, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Durability: data, delete, manifest and metadata files are fsync-ed (with their directories)
    before the lake version that references them is linked, and the log directory after it."""
    source, _ = _upsert(lake)
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
    rowops.merge(source, table, on=["k"], strategy="position-delete")
    monkeypatch.undo()
    link_at = max(i for i, (kind, _) in enumerate(events) if kind == "link")
    synced_before = {path for kind, path in events[:link_at] if kind == "fsync"}
    added = files_of_newest_commit(lake)
    assert any(f.endswith(".parquet") for f in added) and any(f.endswith(".avro") for f in added)
    never_synced = sorted(added - synced_before)
    assert never_synced == [], f"referenced before being synced: {never_synced}"
    assert {str(Path(f).parent) for f in added} <= synced_before, "their directories must be synced too"
    assert ("fsync", str(lake.catalog.log.dir)) in events[link_at:], (
        "the log directory is synced after the link"
    )


def files_of_newest_commit(lake: Any) -> set[str]:
    """The files the newest commit added: its metadata.json, manifest list, new manifests and the data
    and delete files they add."""
    io = PyArrowFileIO()
    entry = lake.catalog.log.latest().get("db.t")
    metadata = lake.catalog.read_metadata(entry.metadata_location)
    snapshot = metadata.current_snapshot()
    assert snapshot is not None
    own = {normalize_path(entry.metadata_location), normalize_path(snapshot.manifest_list)}
    for manifest in snapshot.manifests(io):
        if manifest.added_snapshot_id == snapshot.snapshot_id:
            own.add(normalize_path(manifest.manifest_path))
            own |= {
                normalize_path(e.data_file.file_path)
                for e in manifest.fetch_manifest_entry(io, discard_deleted=True)
                if e.snapshot_id == snapshot.snapshot_id
            }
    return own


def test_rollback_fails_when_the_table_moved(lake, table, java) -> None:  # type: ignore[no-untyped-def]
    """rollback_to decided on one table state; if another commit lands before it commits, rolling
    back would silently discard that commit: it is a conflict and changes nothing."""
    first = table.current_snapshot_id
    rowops.merge(frame(lake.spark, [make_row(1, 1)]), table, on=["k"], strategy="position-delete")
    seen = table.load()  # the rollback decides on this state...
    rowops.merge(frame(lake.spark, [make_row(2, 2)]), table, on=["k"], strategy="copy-on-write")
    before = fingerprint(lake.root)
    with pytest.raises(errors.CommitConflictError) as caught:
        lake.catalog.set_current_snapshot(seen, first)  # ...and commits after another commit landed
    assert caught.value.kind == errors.ConflictKind.METADATA_CHANGED and "Help:" in str(caught.value)
    assert fingerprint(lake.root) == before
    oracle = Oracle(KEYED, [make_row(k) for k in range(N)])
    oracle.upsert([make_row(1, 1), make_row(2, 2)])
    assert_readers_agree(table, oracle.values(), COLUMNS, java)
    table.rollback_to(first)  # on an unmoved table the rollback works
    assert_readers_agree(table, [make_row(k) for k in range(N)], COLUMNS, java)


def test_unknown_isolation_level_is_rejected(lake, table) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(errors.InvalidInputError, match="serializable"):
        table.set_properties(**{"rowops.isolation-level": "serialisable"})
    # a table written by another tool with a bad value: the operation fails before writing anything
    lake.catalog.set_properties(table.load(), {"rowops.isolation-level": "repeatable-read"})
    before = fingerprint(lake.root)
    with pytest.raises(errors.InvalidInputError, match="repeatable-read"):
        rowops.merge(frame(lake.spark, [make_row(1, 1)]), table, on=["k"], strategy="position-delete")
    assert fingerprint(lake.root) == before
    with pytest.raises(errors.InvalidInputError):
        lake.create_table(
            "db.u", frame(lake.spark, [make_row(1)]), properties={"rowops.isolation-level": "x"}
        )
