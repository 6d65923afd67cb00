"""Table maintenance: compaction (minor, major, equality-delete conversion), snapshot expiry, orphans.

Every rewrite must leave the rows every reader sees unchanged (rowops, DuckDB, PyIceberg, Iceberg
Java), shrink what it claims to shrink, commit nothing when there is nothing to do, and lose no row of
a writer that commits while it runs. Expiry and orphan removal must never delete a file a live
snapshot references: every live snapshot is read back through the readers afterwards.
"""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.table.update import SetSnapshotRefUpdate, update_table_metadata

import rowops
from rowops.errors import (
    CatalogFeatureError,
    CommitConflictError,
    InvalidExpressionError,
    InvalidInputError,
    NoSuchColumnError,
    SnapshotExpiredError,
)
from rowops.exec.reading.source import release
from rowops.meta.paths import local_path
from rowops.run import maintenance as maintenance_ops
from rowops.run import row_level as operations
from tests.readers import assert_readers_agree
from tests.spark.tables import COLUMNS, Layout, Oracle, fingerprint, frame, make_row
from tests.spark.test_errors import assert_unchanged

N = 60
IDENTITY = Layout("identity", ("g",), ("g", "k"))
BUCKET = Layout("bucket", ("bucket(4, k)",), ("k",))


def create(lake, layout: Layout = IDENTITY):  # type: ignore[no-untyped-def]
    rows = [make_row(k) for k in range(N)]
    table = lake.create_table(
        "db.t", frame(lake.spark, rows), partition_by=list(layout.partition_by), identifier=list(layout.keys)
    )
    return table, Oracle(layout, rows)


def upserts(table, oracle, strategy: str, rounds: int = 3) -> None:  # type: ignore[no-untyped-def]
    """``rounds`` upserts of a few keys each (deletes or rewrites plus new small files)."""
    for r in range(1, rounds + 1):
        changes = [make_row(k, r) for k in range(r, N, 7)] + [make_row(N + 10 * r + i, r) for i in range(2)]
        rowops.merge(frame(table.lake.spark, changes), table, on=list(oracle.layout.keys), strategy=strategy)
        oracle.upsert(changes)


def stacked_position_deletes(table, oracle, step: int = 4) -> None:  # type: ignore[no-untyped-def]
    """Two position-delete upserts planned on the same state, then committed one after the other: the
    second rebases and leaves the data files with two live position-delete files each (with
    ``step=2`` the two together update every row of the original files)."""
    keys = list(oracle.layout.keys)
    table.set_properties(**{"rowops.isolation-level": "snapshot"})  # write-write checks only
    planned = []
    for version, ks in ((5, range(0, N, step)), (6, range(1, N, step))):
        changes = [make_row(k, version) for k in ks]
        source = frame(table.lake.spark, changes)
        spec = table.merge(source, on=keys).when_matched().update_all().spec()
        planned.append((operations.plan(table, spec, source, "position-delete"), changes))
    for p, changes in planned:
        try:
            operations.execute(p)
        finally:
            release(p.source)
        oracle.upsert(changes)


def deletes_per_file(files) -> list[int]:  # type: ignore[no-untyped-def]
    return [sum(d.may_reference(f.path) for d in files.position_deletes) for f in files.data]


def counts(table) -> tuple[int, int, int]:  # type: ignore[no-untyped-def]
    files = table.files()
    return len(files.data), len(files.position_deletes), len(files.equality_deletes)


def test_compact_rewrites_with_deletes_applied_and_keeps_rows(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    table, oracle = create(lake)
    upserts(table, oracle, strategy)
    appended = [make_row(N + 100 + i) for i in range(6)]  # small files in every partition
    table.append(frame(lake.spark, appended))
    oracle.upsert(appended)
    before = counts(table)
    assert before[0] > 3  # more than one file per partition: small files to merge
    result = table.compact()
    assert result.committed and result.snapshot_id == table.current_snapshot_id
    assert table.snapshots()[-1]["summary"]["operation"] == "replace"
    data, pos, eq = counts(table)
    assert (data, pos, eq) == (3, 0, 0)  # one file per partition (g = 0, 1, 2), no deletes left
    assert result.data_files_rewritten == before[0]
    assert result.files_removed == before[0] + before[1] + before[2]
    assert result.files_written == 3 and result.bytes_written > 0
    assert_readers_agree(table, oracle.values(), COLUMNS, java)
    json.dumps(result.to_dict())
    version = lake.version
    again = table.compact()  # nothing left to do: nothing committed
    assert (again.snapshot_id, again.committed, lake.version) == (None, False, version)


def test_compact_respects_sort_order_and_target_size(lake, java) -> None:  # type: ignore[no-untyped-def]
    rows = [make_row(k) for k in range(400)]
    table = lake.create_table("db.s", frame(lake.spark, rows), identifier=["k"], sort_by=["k"])
    oracle = Oracle(Layout("unpartitioned", (), ("k",)), rows)
    for r in range(1, 4):
        extra = [make_row(1000 * r + i, r) for i in range(100)]
        table.append(frame(lake.spark, extra))
        oracle.upsert(extra)
    size = sum(f.size for f in table.files().data)
    result = table.compact(target_file_size=size // 3)
    files = table.files().data
    assert result.committed and 2 <= len(files) <= 5
    for f in files:
        assert f.data_file.sort_order_id == table.metadata.default_sort_order_id
        keys = [r[0] for r in lake.spark.read.parquet("file:" + f.path).select("k").collect()]
        assert keys == sorted(keys)
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_compact_position_deletes_merges_per_data_file(lake, java) -> None:  # type: ignore[no-untyped-def]
    table, oracle = create(lake, BUCKET)
    stacked_position_deletes(table, oracle)
    files = table.files()
    data_before = {f.path for f in files.data}
    assert max(deletes_per_file(files)) == 2  # stacked: two delete files on the original data files
    assert "compact_position_deletes()" in " ".join(table.health().advice)
    result = table.compact_position_deletes()
    after = table.files()
    assert result.committed and result.data_files_rewritten == 0
    assert {f.path for f in after.data} == data_before  # no data rewritten
    assert max(deletes_per_file(after)) == 1 and len(after.position_deletes) < len(files.position_deletes)
    assert result.files_read == len(files.position_deletes)  # only delete files were read
    assert_readers_agree(table, oracle.values(), COLUMNS, java)
    assert table.compact_position_deletes().snapshot_id is None


def test_position_delete_merge_drops_files_whose_rows_are_all_deleted(lake, java) -> None:  # type: ignore[no-untyped-def]
    table, oracle = create(lake, BUCKET)
    originals = {f.path for f in table.files().data}
    stacked_position_deletes(table, oracle, step=2)
    result = table.compact_position_deletes()
    files = table.files()
    assert result.committed and not originals & {f.path for f in files.data}  # every original dropped
    assert not files.position_deletes  # and their delete files with them
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_position_delete_merge_rebases_over_a_concurrent_delete(lake, java) -> None:  # type: ignore[no-untyped-def]
    table, oracle = create(lake, BUCKET)
    stacked_position_deletes(table, oracle)
    prepared = maintenance_ops.prepare_compact_position_deletes(table)
    assert prepared is not None
    table.delete(where="k % 4 = 2", strategy="position-delete")  # more rows of the same data files
    oracle.delete_keys([make_row(k) for k in range(2, N, 4)])
    writer_snapshot = table.current_snapshot_id
    result = prepared.commit()  # rebased: the merged files hold only positions deleted before
    assert result.committed and table.snapshots()[-1]["parent_id"] == writer_snapshot
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_convert_equality_deletes_to_position_deletes(lake, java) -> None:  # type: ignore[no-untyped-def]
    table, oracle = create(lake, BUCKET)
    upserts(table, oracle, "equality-delete")
    table.delete(where="k < 3", strategy="position-delete")  # live position deletes too
    oracle.delete_keys([make_row(k) for k in range(3)])
    data_before = {f.path for f in table.files().data}
    assert counts(table)[2] > 0
    assert "convert_equality_deletes()" in " ".join(table.health().advice)
    result = table.convert_equality_deletes()
    _, pos, eq = counts(table)
    assert result.committed and eq == 0 and pos > 0
    assert {f.path for f in table.files().data} <= data_before  # no data file written
    assert_readers_agree(table, oracle.values(), COLUMNS, java)  # PyIceberg now reads it too
    assert table.convert_equality_deletes().snapshot_id is None


def test_compact_where_and_budget(lake, java) -> None:  # type: ignore[no-untyped-def]
    table, oracle = create(lake)
    upserts(table, oracle, "position-delete")
    by_partition = lambda: {  # noqa: E731
        g: sorted(f.path for f in table.files().data if f.partition == (g,)) for g in (0, 1, 2)
    }
    before = by_partition()
    result = table.compact(where="g = 1")
    after = by_partition()
    assert result.committed and len(after[1]) == 1 and after[1] != before[1]
    assert (after[0], after[2]) == (before[0], before[2])  # other partitions untouched
    assert_readers_agree(table, oracle.values(), COLUMNS, java)
    sizes = {f.path: f.size for f in table.files().data}
    budget = sum(sorted(sizes.values())[:2])
    limited = table.compact(max_bytes=budget)
    rewritten = set(sizes) - {f.path for f in table.files().data}
    assert limited.committed and limited.data_files_rewritten == len(rewritten) >= 1
    assert sum(sizes[p] for p in rewritten) <= budget  # the budget holds
    assert_readers_agree(table, oracle.values(), COLUMNS, java)
    rest = table.compact()  # the next run does the rest: one file per partition
    assert rest.committed and len(table.files().data) == 3
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


# position deletes (the rebase case) run in `make test`; the other writers in `make test-slow`
@pytest.mark.parametrize(
    "writer",
    [pytest.param(w, marks=pytest.mark.slow) for w in ("append", "copy-on-write")]
    + ["position-delete", pytest.param("equality-delete", marks=pytest.mark.slow)],
)
def test_concurrent_writer_during_compaction_wins_or_rebases(lake, writer, java) -> None:  # type: ignore[no-untyped-def]
    """Plan and write the compaction, commit a writer, then commit the compaction."""
    table, oracle = create(lake, BUCKET)
    upserts(table, oracle, "position-delete")
    prepared = maintenance_ops.prepare_compact(table)
    assert prepared is not None
    changes = [make_row(k, 9) for k in range(0, N, 5)] + [make_row(500 + i, 9) for i in range(3)]
    if writer == "append":
        new = [make_row(500 + i, 9) for i in range(3)]
        table.append(frame(lake.spark, new))
        oracle.upsert(new)
    else:
        rowops.merge(frame(lake.spark, changes), table, on=["k"], strategy=writer)
        oracle.upsert(changes)
    writer_snapshot = table.current_snapshot_id
    if writer == "append":
        result = prepared.commit()  # an append rebases
        assert result.committed and table.snapshots()[-1]["parent_id"] == writer_snapshot
    else:
        stage = prepared.stage.root
        with pytest.raises(CommitConflictError) as caught:  # it deleted rows of files being rewritten
            prepared.commit()
        assert caught.value.retry_safe and table.current_snapshot_id == writer_snapshot
        assert not os.path.exists(local_path(stage))  # the compaction's files are gone
        assert table.compact().committed  # a new run succeeds
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def _tag(lake, table, name: str, snapshot_id: int) -> None:  # type: ignore[no-untyped-def]
    """Tag a snapshot (a metadata commit through the lake's own commit loop)."""
    ref = SetSnapshotRefUpdate(ref_name=name, type=SnapshotRefType.TAG, snapshot_id=snapshot_id)  # type: ignore[call-arg]

    def produce(cur):  # type: ignore[no-untyped-def]
        return update_table_metadata(cur.metadata, (ref,), metadata_location=cur.metadata_location), []

    lake.catalog._swap(table.load(), produce, {"operation": "tag"})


def test_expire_and_remove_orphans_never_delete_referenced_files(lake, java) -> None:  # type: ignore[no-untyped-def]
    table, oracle = create(lake, BUCKET)
    expected = {table.current_snapshot_id: oracle.values()}
    for r in range(1, 4):
        upserts(table, oracle, "position-delete", rounds=1) if r != 2 else upserts(
            table, oracle, "equality-delete", 1
        )
        expected[table.current_snapshot_id] = oracle.values()
    tagged = table.snapshots()[1]["snapshot_id"]
    _tag(lake, table, "audit", tagged)
    old_version = lake.version - 2  # a lake version whose snapshot will expire
    table.compact()
    expected[table.current_snapshot_id] = oracle.values()
    snapshots_before = {s["snapshot_id"] for s in table.snapshots()}

    result = table.expire_snapshots(older_than=timedelta(0), retain_last=2)
    live = {s["snapshot_id"] for s in table.snapshots()}
    assert result.committed and result.snapshots_expired == len(snapshots_before) - 3
    assert tagged in live and table.current_snapshot_id in live and len(live) == 3
    assert result.files_removed > 0 and result.bytes_removed > 0
    for snapshot_id in live:  # every live snapshot still reads, through every reader
        assert_readers_agree(table, expected[snapshot_id], COLUMNS, java, snapshot_id=snapshot_id)
    with pytest.raises(SnapshotExpiredError):
        lake.at(version=old_version).table("db.t").to_df()
    assert_unchanged(lake, lambda: lake.rollback_to(old_version), SnapshotExpiredError, "expired")

    data_dir = f"{local_path(table.metadata.location)}/data"
    old, young = f"{data_dir}/orphan-old.parquet", f"{data_dir}/orphan-young.parquet"
    for path in (old, young):
        with open(path, "wb") as out:
            out.write(b"not referenced")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    version = lake.version
    removed = table.remove_orphans(older_than=timedelta(hours=1))
    assert removed.files_removed == 1 and not os.path.exists(old) and os.path.exists(young)
    assert removed.snapshot_id is None and lake.version == version
    lake.cleanup(older_than=timedelta(0))  # the lake-wide cleanup copes with expired snapshots
    for snapshot_id in live:
        assert_readers_agree(table, expected[snapshot_id], COLUMNS, java, snapshot_id=snapshot_id)
    assert (
        table.expire_snapshots(older_than=timedelta(0), retain_last=2).snapshot_id is None
    )  # nothing left to expire


def test_rewrites_through_a_pyiceberg_catalog(spark, tmp_path, java) -> None:  # type: ignore[no-untyped-def]
    catalog = SqlCatalog("maint", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("db")
    lake = rowops.Lakehouse.from_catalog(catalog, spark=spark)
    rows = [make_row(k) for k in range(N)]
    table = lake.create_table("db.t", frame(spark, rows), partition_by=["bucket(4, k)"], identifier=["k"])
    oracle = Oracle(BUCKET, rows)
    upserts(table, oracle, "position-delete")
    result = table.compact()  # one commit_table of the catalog
    assert result.committed and catalog.load_table("db.t").metadata.current_snapshot_id == result.snapshot_id
    assert counts(table)[1:] == (0, 0)
    assert_readers_agree(table, oracle.values(), COLUMNS, java)
    for needs_the_log in (table.expire_snapshots, table.remove_orphans):
        with pytest.raises(CatalogFeatureError):
            needs_the_log()


def test_expire_keeps_the_files_of_a_table_registered_twice(lake, java) -> None:  # type: ignore[no-untyped-def]
    table, oracle = create(lake, BUCKET)
    twin = lake.register_table("db.twin", table.metadata_location)  # the same files under another name
    expected = oracle.values()
    upserts(table, oracle, "copy-on-write", rounds=1)
    assert (
        table.expire_snapshots(older_than=timedelta(0)).snapshots_expired == 1
    )  # the twin's current snapshot
    assert_readers_agree(twin, expected, COLUMNS, java)
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_expire_older_than_keeps_young_snapshots(lake) -> None:  # type: ignore[no-untyped-def]
    table, oracle = create(lake, BUCKET)
    upserts(table, oracle, "copy-on-write", rounds=2)
    count = len(table.snapshots())
    assert table.expire_snapshots(older_than=timedelta(hours=1)).snapshot_id is None
    assert len(table.snapshots()) == count


def test_nothing_to_do_commits_nothing(lake) -> None:  # type: ignore[no-untyped-def]
    table, _ = create(lake, Layout("unpartitioned", (), ("k",)))
    assert (
        table.compact().committed and table.expire_snapshots(older_than=timedelta(0)).snapshots_expired == 1
    )
    before, version = fingerprint(lake), lake.version
    for run in (
        table.compact,
        table.compact_position_deletes,
        table.convert_equality_deletes,
        table.expire_snapshots,
        table.remove_orphans,
    ):
        assert run().snapshot_id is None
    assert fingerprint(lake) == before and lake.version == version


def test_bad_input_is_a_clear_error_and_changes_nothing(lake) -> None:  # type: ignore[no-untyped-def]
    table, oracle = create(lake)
    upserts(table, oracle, "position-delete", rounds=1)
    assert_unchanged(lake, lambda: table.compact(where="nope = 1"), NoSuchColumnError, "nope", "Help:")
    assert_unchanged(lake, lambda: table.compact(where="s = 'x'"), InvalidExpressionError, "partition")
    assert_unchanged(lake, lambda: table.compact(where="g = = 1"), InvalidExpressionError, "g = = 1")
    assert_unchanged(lake, lambda: table.compact(max_bytes=-1), InvalidInputError, "max_bytes")
    assert_unchanged(lake, lambda: table.compact(target_file_size=0), InvalidInputError, "target_file_size")
    assert_unchanged(lake, lambda: table.expire_snapshots(retain_last=0), InvalidInputError, "retain_last")
    assert_unchanged(
        lake, lambda: table.expire_snapshots(older_than=timedelta(-1)), InvalidInputError, "older_than"
    )
    assert_unchanged(
        lake, lambda: table.remove_orphans(older_than=timedelta(-1)), InvalidInputError, "older_than"
    )
    assert_unchanged(lake, lambda: table.compact(budget=5), InvalidInputError, "max_bytes")

    def in_transaction() -> None:
        with lake.transaction() as tx:
            tx.table("db.t").compact()

    assert_unchanged(lake, in_transaction, InvalidInputError, "transaction")


def test_health_reports_debt_and_advice(lake) -> None:  # type: ignore[no-untyped-def]
    table, oracle = create(lake, BUCKET)
    clean = table.health()
    assert clean.advice == [] and clean.read_overhead_bytes == 0 and clean.equality_delete_files == 0
    upserts(table, oracle, "equality-delete")
    report = table.health()
    assert report.equality_delete_files > 0 and report.equality_delete_generations == 3
    assert report.delete_files_per_data_file > 0 and report.deleted_rows_share > 0
    assert report.read_overhead_bytes > 0 and report.small_files > 0
    advice = " ".join(report.advice)
    assert "compact()" in advice and "convert_equality_deletes()" in advice
    json.dumps(report.to_dict())
    table.compact()
    after = table.health()
    assert after.equality_delete_files == 0 and after.read_overhead_bytes < report.read_overhead_bytes
    assert after.advice == []
