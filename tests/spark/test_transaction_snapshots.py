"""What a multi-statement transaction publishes per table, as other Iceberg readers see it (issue 42).

Every statement's snapshot is published, in order, in the transaction's one lake version: Iceberg
Java's incremental append scan (``start-snapshot-id`` / ``end-snapshot-id``, what streaming and CDC
consumers read) returns the rows of every appending statement; every manifest and entry names a
snapshot that exists; every file the table references exists. Checks read cold: the process-wide
manifest cache is cleared and a fresh ``Lakehouse`` handle reads (the cache once hid a head whose
manifests were gone).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.manifest import ManifestEntryStatus
from pyiceberg.table import StaticTable
from pyspark.sql import SparkSession
from pyspark.sql import types as T

import rowops
from rowops.errors import CommitConflictError
from rowops.meta.manifests import CACHE
from tests.oracles.compare import assert_same_rows
from tests.readers import assert_readers_agree

SCHEMA = T.StructType([T.StructField("k", T.LongType()), T.StructField("v", T.LongType())])
COLUMNS = ["k", "v"]
Rows = dict[int, int]


def frame(spark: SparkSession, rows: Rows) -> Any:
    return spark.createDataFrame(sorted(rows.items()), SCHEMA)


def cold(lake: rowops.Lakehouse) -> rowops.Lakehouse:
    """A fresh handle with no cached manifest: what another process would see."""
    CACHE.clear()
    return rowops.Lakehouse(lake.root, spark=lake.spark)


def snapshot_ids(location: str) -> set[int]:
    return {s.snapshot_id for s in StaticTable.from_metadata(location).metadata.snapshots}


def assert_attributed(location: str) -> None:
    """PyIceberg: every manifest's ``added_snapshot_id`` and every entry's ``snapshot_id`` exists."""
    table = StaticTable.from_metadata(location)
    ids = snapshot_ids(location)
    for snapshot in table.metadata.snapshots:
        for manifest in snapshot.manifests(table.io):
            assert manifest.added_snapshot_id in ids, (snapshot.snapshot_id, manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                assert entry.snapshot_id in ids, (manifest.manifest_path, entry.data_file.file_path)
                if entry.status == ManifestEntryStatus.ADDED:
                    assert entry.snapshot_id == manifest.added_snapshot_id


def assert_files_exist(location: str) -> None:
    """Every manifest list, manifest and live data or delete file of every snapshot exists."""
    table = StaticTable.from_metadata(location)

    def exists(path: str) -> bool:
        return table.io.new_input(path).exists()

    for snapshot in table.metadata.snapshots:
        assert exists(snapshot.manifest_list), snapshot.manifest_list
        for manifest in snapshot.manifests(table.io):
            assert exists(manifest.manifest_path), manifest.manifest_path
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                assert exists(entry.data_file.file_path), entry.data_file.file_path


def assert_cold(lake: rowops.Lakehouse, name: str, expected: Rows, java: Any) -> rowops.Table:
    table = cold(lake).table(name)
    location = table.metadata_location
    assert_files_exist(location)
    assert_attributed(location)
    assert_readers_agree(table, sorted(expected.items()), COLUMNS, java)
    return table


def assert_incremental(java: Any, table: rowops.Table, start: int | None, expected: Rows) -> None:
    """Iceberg Java's incremental append scan from ``start`` (exclusive) to the head returns ``expected``."""
    if java is None:
        return
    options = {"end-snapshot-id": str(table.current_snapshot_id)}
    if start is not None:
        options["start-snapshot-id"] = str(start)
    rows = java.read(table.metadata_location, read_options=options)
    assert_same_rows(sorted(expected.items()), rows, COLUMNS, "iceberg-java incremental")


@pytest.fixture()
def table(lake: rowops.Lakehouse) -> rowops.Table:
    """``db.t`` with k = 1..4 (v = 0), identifier ``k``."""
    return lake.create_table("db.t", frame(lake.spark, {k: 0 for k in range(1, 5)}), identifier=["k"])


def test_incremental_read_returns_every_statement_of_a_transaction(
    lake: rowops.Lakehouse, table: rowops.Table, java: Any
) -> None:
    start = table.current_snapshot_id
    with lake.transaction() as tx:
        tx.append("db.t", frame(lake.spark, {10: 1}))
        tx.append("db.t", frame(lake.spark, {11: 2}))
    assert_incremental(java, cold(lake).table("db.t"), start, {10: 1, 11: 2})  # squashed: only 11
    head = assert_cold(lake, "db.t", {1: 0, 2: 0, 3: 0, 4: 0, 10: 1, 11: 2}, java)
    summaries = [s["summary"] for s in head.snapshots()]
    assert [s["total-records"] for s in summaries] == ["4", "5", "6"]
    assert [s["added-records"] for s in summaries[1:]] == ["1", "1"]


def _delete_keys(tx: Any, lake: rowops.Lakehouse, keys: list[int], strategy: str) -> None:
    """A MERGE in ``tx`` deleting the rows of ``keys`` from ``db.t`` with ``strategy``."""
    source = frame(lake.spark, dict.fromkeys(keys, 0))
    tx.merge(source, "db.t", on=["k"], when_matched="delete", when_not_matched=None, strategy=strategy)


def test_equality_delete_of_a_key_inserted_earlier_in_the_transaction(
    lake: rowops.Lakehouse, table: rowops.Table, java: Any
) -> None:
    """Statement 2's equality delete must still apply to statement 1's row (a lower sequence number)."""
    start = table.current_snapshot_id
    with lake.transaction() as tx:
        tx.append("db.t", frame(lake.spark, {10: 1, 12: 3}))
        _delete_keys(tx, lake, [10, 2], "equality-delete")
        tx.append("db.t", frame(lake.spark, {11: 2}))
    head = assert_cold(lake, "db.t", {1: 0, 3: 0, 4: 0, 11: 2, 12: 3}, java)
    # an incremental append scan reads the appending snapshots' new files (deletes are not applied)
    assert_incremental(java, head, start, {10: 1, 11: 2, 12: 3})


def test_every_statement_of_a_transaction_in_each_encoding(
    lake: rowops.Lakehouse, table: rowops.Table, strategy: str, java: Any
) -> None:
    start = table.current_snapshot_id
    with lake.transaction() as tx:
        tx.append("db.t", frame(lake.spark, {10: 1}))
        tx.merge(frame(lake.spark, {1: 5, 10: 6}), "db.t", on=["k"], strategy=strategy)  # both exist
        _delete_keys(tx, lake, [2, 10], strategy)
        tx.append("db.t", frame(lake.spark, {11: 2}))
    head = assert_cold(lake, "db.t", {1: 5, 3: 0, 4: 0, 11: 2}, java)
    assert_incremental(java, head, start, {10: 1, 11: 2})
    assert head.snapshots()[-1]["summary"]["total-records"] == str(
        sum(int(f.record_count) for f in head.files().data)
    )


@pytest.mark.parametrize("between", ["rollback", "append"])
def test_two_statement_transaction_rebasing_keeps_its_files(
    lake: rowops.Lakehouse, table: rowops.Table, between: str, java: Any
) -> None:
    """The rebase replays both statements; the second must build on the replayed first, and nothing
    the committed head references may be removed (issue 42 item 9)."""
    first = table.current_snapshot_id
    assert first is not None
    table.append(frame(lake.spark, {5: 0}))
    tx = lake.begin()
    tx.append("db.t", frame(lake.spark, {10: 1}))
    tx.append("db.t", frame(lake.spark, {11: 2}))
    other = cold(lake).table("db.t")
    if between == "rollback":
        other.rollback_to(first)  # the table loses k=5
        landed = {1: 0, 2: 0, 3: 0, 4: 0}
    else:
        other.append(frame(lake.spark, {6: 0}))
        landed = {1: 0, 2: 0, 3: 0, 4: 0, 5: 0, 6: 0}
    try:
        tx.commit()
        expected = {**landed, 10: 1, 11: 2}
    except CommitConflictError as exc:  # refusing to rebase over a rollback is fine too
        assert between == "rollback" and exc.retry_safe
        expected = landed
    assert_cold(lake, "db.t", expected, java)
    lake.cleanup(older_than=timedelta(0))
    assert_cold(lake, "db.t", expected, java)


def table_files(lake: rowops.Lakehouse) -> set[Path]:
    return {
        p for p in (Path(lake.root) / "db" / "t").rglob("*") if p.is_file() and not p.name.startswith(".")
    }


@pytest.mark.parametrize("create", [False, True])
def test_dropping_a_table_the_transaction_wrote_removes_its_staged_files(
    lake: rowops.Lakehouse, create: bool
) -> None:
    """Issue 42 item 12: the drop keeps the committed files (lake time travel) and nothing staged."""
    if not create:
        lake.create_table("db.t", frame(lake.spark, {1: 0}), identifier=["k"])
    created = lake.version
    before = table_files(lake)
    with lake.transaction() as tx:
        if create:
            tx.create_table("db.t", frame(lake.spark, {1: 0}), identifier=["k"])
        tx.append("db.t", frame(lake.spark, {10: 1}))
        tx.merge(frame(lake.spark, {1: 5}), "db.t", on=["k"], strategy="position-delete")
        tx.drop_table("db.t")
    assert table_files(lake) == before
    if not create:  # the committed table still reads at the version before the drop
        assert cold(lake).at(version=created).table("db.t").to_df().collect() == [(1, 0)]
