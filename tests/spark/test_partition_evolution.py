"""Partition evolution and sort order changes, then MERGE / UPDATE / DELETE under every strategy.

Files keep the spec they were written with: an evolved table holds data files (and position deletes,
which take their data file's spec) of several specs, and every reader must still see the oracle's rows.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import types as T

import rowops
from rowops.errors import (
    CommitConflictError,
    ConflictKind,
    InvalidPartitionSpecError,
    InvalidSortOrderError,
    NoSuchColumnError,
    UnsupportedSqlError,
    UnsupportedStrategyError,
)
from rowops.plan.predicates import candidates
from tests.oracles.compare import assert_same_rows
from tests.oracles.duckdb_reader import EXTENSIONS, extension_path
from tests.readers import assert_readers_agree, rowops_rows
from tests.spark.test_catalogs import pyiceberg_table
from tests.spark.test_catalogs import row as catalog_row
from tests.spark.test_errors import assert_unchanged

SCHEMA = T.StructType(
    [
        T.StructField("k", T.LongType()),
        T.StructField("g", T.IntegerType()),
        T.StructField("ts", T.TimestampType()),
        T.StructField("s", T.StringType()),
        T.StructField("n", T.IntegerType()),
    ]
)
COLUMNS = SCHEMA.fieldNames()
_EPOCH = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
Row = tuple[Any, ...]


def make_row(k: int, version: int = 0) -> Row:
    return (k, k % 3, _EPOCH + dt.timedelta(hours=7 * (k % 40)), None if k % 11 == 0 else f"s{k}", version)


class Oracle:
    def __init__(self, keys: range) -> None:
        self.rows = {k: make_row(k) for k in keys}

    def values(self) -> list[Row]:
        return list(self.rows.values())


def frame(lake, rows: list[Row]):  # type: ignore[no-untyped-def]
    return lake.spark.createDataFrame(rows, SCHEMA)


def check(table, oracle: Oracle) -> None:  # type: ignore[no-untyped-def]
    assert sorted(rowops_rows(table), key=repr) == sorted(oracle.values(), key=repr)


def specs_of_live_files(table) -> set[int]:  # type: ignore[no-untyped-def]
    return {f.spec_id for f in table.files().data}


def eq_blocked(lake, table, action) -> None:  # type: ignore[no-untyped-def]
    """A spec partitioned by a non-key column and no unpartitioned spec for a global delete: refused."""
    assert_unchanged(
        lake, action, UnsupportedStrategyError, "not key columns", "no unpartitioned spec", "Help:"
    )


def upsert(  # type: ignore[no-untyped-def]
    lake,
    table,
    oracle: Oracle,
    keys: list[int],
    strategy: str,
    version: int,
    blocked: bool,
    fallback: str = "auto",
) -> None:
    rows = [make_row(k, version) for k in keys]
    if strategy == "equality-delete" and blocked:
        eq_blocked(lake, table, lambda: rowops.merge(frame(lake, rows), table, on=["k"], strategy=strategy))
        strategy = fallback  # auto: the planner's own choice is a scanning encoding
    rowops.merge(frame(lake, rows), table, on=["k"], strategy=strategy)
    oracle.rows.update({r[0]: r for r in rows})


def delete_keys(lake, table, oracle: Oracle, keys: list[int], strategy: str, blocked: bool) -> None:  # type: ignore[no-untyped-def]
    if strategy == "equality-delete":
        src = frame(lake, [make_row(k) for k in keys])

        def merge(s: str) -> Any:
            return rowops.merge(
                src, table, on=["k"], when_matched="delete", when_not_matched=None, strategy=s
            )

        if blocked:
            eq_blocked(lake, table, lambda: merge(strategy))
        merge("auto" if blocked else strategy)
    else:
        rowops.delete(table, where=f"k IN ({', '.join(map(str, keys))})", strategy=strategy)
    for k in keys:
        oracle.rows.pop(k, None)


def test_evolve_then_write_and_read_everywhere(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    """unpartitioned -> bucket(4, k) -> + day(ts) -> - bucket -> unpartitioned again, with appends and
    row-level operations in between that touch files of several specs; every reader agrees."""
    oracle = Oracle(range(30))
    table = lake.create_table("db.e", frame(lake, oracle.values()), identifier=["k"])
    table.append(frame(lake, [make_row(k) for k in range(100, 110)]))
    oracle.rows.update({k: make_row(k) for k in range(100, 110)})
    upsert(lake, table, oracle, [1, 2, 40], strategy, 1, blocked=False)

    before = table.current_snapshot_id
    table.add_partition_field("bucket(4, k)")
    assert (table.metadata.default_spec_id, table.current_snapshot_id) == (1, before)
    assert [(f.name, f.field_id) for f in table.metadata.spec().fields] == [("k_bucket_4", 1000)]
    table.append(frame(lake, [make_row(k) for k in range(200, 210)]))
    oracle.rows.update({k: make_row(k) for k in range(200, 210)})
    assert specs_of_live_files(table) == {0, 1}
    # pruning by the new partition column: spec-1 files of other buckets are skipped (their key bounds
    # alone would keep them); spec-0 files are judged by their metrics only, never by a partition
    files, metadata = table.files().data, table.metadata
    kept, _ = candidates("k = 205", files, metadata)
    assert {f.spec_id for f in kept} == {1} and len(kept) == 1
    assert len([f for f in files if f.spec_id == 1]) > 1
    kept, _ = candidates("k = 7", files, metadata)
    assert {f.spec_id for f in kept} == {0}
    upsert(lake, table, oracle, [2, 3, 203, 41], strategy, 2, blocked=False)
    if strategy == "equality-delete":  # spec-0 files are unpartitioned: one global delete covers both
        assert new_eq_deletes(table) == [(0, ())]
    check(table, oracle)

    table.add_partition_field("day(ts)")
    assert [f.name for f in table.metadata.spec().fields] == ["k_bucket_4", "ts_day"]
    table.append(frame(lake, [make_row(k) for k in range(300, 310)]))
    oracle.rows.update({k: make_row(k) for k in range(300, 310)})
    upsert(lake, table, oracle, [4, 104, 204, 304, 42], strategy, 3, blocked=False)
    if strategy == "equality-delete":  # an UPDATE is not expressible: the same change as a MERGE
        upsert(lake, table, oracle, [k for k in oracle.rows if k % 4 == 0], strategy, 4, blocked=False)
    else:
        rowops.update(table, set={"n": "n + 100"}, where="k % 4 = 0", strategy=strategy)
        for k, r in oracle.rows.items():
            if k % 4 == 0:
                oracle.rows[k] = (*r[:4], r[4] + 100)
    check(table, oracle)

    table.drop_partition_field("bucket(4, k)")
    assert [f.name for f in table.metadata.spec().fields] == ["ts_day"]
    table.append(frame(lake, [make_row(k) for k in range(400, 410)]))
    oracle.rows.update({k: make_row(k) for k in range(400, 410)})
    delete_keys(lake, table, oracle, [5, 105, 205, 305, 405], strategy, blocked=False)
    assert len(specs_of_live_files(table)) >= 2  # (copy-on-write moves touched rows to the new spec)
    check(table, oracle)

    table.drop_partition_field("ts_day")
    assert table.metadata.default_spec_id == 0  # the unpartitioned spec is reused
    # unpartitioned again: equality deletes are global, so they apply to files of every spec
    upsert(lake, table, oracle, [6, 106, 206, 306, 406, 500], strategy, 5, blocked=False)
    delete_keys(lake, table, oracle, [7, 107, 207, 307, 407], strategy, blocked=False)

    files = table.files()
    by_path = {f.path: f for f in files.data}
    old_spec_targets = 0
    for d in files.position_deletes:  # a position delete carries the spec of the file it references
        target = by_path.get(d.referenced_file or "")
        assert target is None or (d.spec_id, d.partition) == (target.spec_id, target.partition)
        old_spec_targets += target is not None and target.spec_id != table.metadata.default_spec_id
    if strategy == "position-delete":
        assert old_spec_targets > 0
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_equality_deletes_of_an_old_spec_still_apply(lake, java) -> None:  # type: ignore[no-untyped-def]
    """Equality deletes written partitioned by bucket(4, k) keep applying to that spec's files after the
    spec changes; files written under the new spec are not touched by them."""
    oracle = Oracle(range(40))
    table = lake.create_table(
        "db.q", frame(lake, oracle.values()), partition_by=["bucket(4, k)"], identifier=["k"]
    )
    upsert(lake, table, oracle, [1, 2, 3, 50], "equality-delete", 1, blocked=False)
    delete_keys(lake, table, oracle, [4, 5], "equality-delete", blocked=False)
    assert table.files().equality_deletes
    table.add_partition_field("day(ts)")
    table.append(frame(lake, [make_row(k, 9) for k in (4, 60)]))  # key 4 again: newer than its delete
    oracle.rows.update({4: make_row(4, 9), 60: make_row(60, 9)})
    assert specs_of_live_files(table) == {0, 1}
    assert {d.spec_id for d in table.files().equality_deletes} == {0}
    # day(ts) is not a key column and the table has no unpartitioned spec: refused. Position deletes
    # instead (auto may pay the read debt down with a copy-on-write that clears the old deletes)
    upsert(lake, table, oracle, [2, 60, 61], "equality-delete", 2, blocked=True, fallback="position-delete")
    assert {d.spec_id for d in table.files().equality_deletes} == {0}
    assert_readers_agree(table, oracle.values(), COLUMNS, java)
    # delete maintenance per spec: the old-spec equality deletes become position deletes of their files
    table.convert_equality_deletes()
    files = table.files()
    by_path = {f.path: f for f in files.data}
    targets = [by_path[d.referenced_file or ""] for d in files.position_deletes]
    assert not files.equality_deletes and 0 in {t.spec_id for t in targets}
    for d, t in zip(files.position_deletes, targets, strict=True):
        assert (d.spec_id, d.partition) == (t.spec_id, t.partition)
    assert_readers_agree(table, oracle.values(), COLUMNS, java)  # PyIceberg reads it too now


def new_eq_deletes(table) -> list[tuple[int, tuple[Any, ...]]]:  # type: ignore[no-untyped-def]
    """(spec id, partition) of the equality deletes the last commit added."""
    seq = table.metadata.current_snapshot().sequence_number
    return sorted(
        {(d.spec_id, d.partition) for d in table.files().equality_deletes if d.seq == seq}, key=repr
    )


def assert_readers_but_duckdb_agree(table, oracle: Oracle, java) -> None:  # type: ignore[no-untyped-def]
    """rowops and Iceberg Java read the oracle's rows. DuckDB 1.5.5 stops with an internal assertion
    on an equality delete whose spec has a partition field the data file's spec lacks (an equality
    delete of spec 1 = bucket + truncate vs files of spec 0 = bucket), rather than a wrong answer."""
    check(table, oracle)
    if java is not None:
        assert_same_rows(oracle.values(), java.read(table.metadata_location), COLUMNS, "iceberg-java")
    # a database of its own: the internal error invalidates the database it happens in
    con = duckdb.connect(
        ":memory:", config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    )
    try:
        for name in EXTENSIONS:
            con.execute(f"LOAD '{extension_path(name)}'")
        with pytest.raises(duckdb.InternalException, match="Comparison on NULL values"):
            con.execute("SELECT * FROM iceberg_scan(?)", [table.metadata_location]).fetchall()
    finally:
        con.close()


def delete_keys_of(path: str) -> list[int]:
    return sorted(pq.read_table(path, columns=["k"])["k"].to_pylist())


def test_equality_deletes_per_live_spec(lake, java) -> None:  # type: ignore[no-untyped-def]
    """bucket(4, k) -> + truncate(10, k) -> bucket(4, k) replaced by bucket(2, k): an equality-delete
    upsert writes its keys once per spec with live data files, each file partitioned by its spec's
    transforms of the keys; Iceberg Java reads what the oracle holds (and, after the equality deletes
    are converted to position deletes, PyIceberg and DuckDB too)."""
    oracle = Oracle(range(40))
    table = lake.create_table(
        "db.ps", frame(lake, oracle.values()), partition_by=["bucket(4, k)"], identifier=["k"]
    )
    upsert(lake, table, oracle, [1, 2, 50], "equality-delete", 1, blocked=False)
    assert {s for s, _ in new_eq_deletes(table)} == {0}
    table.add_partition_field("truncate(10, k)")
    table.append(frame(lake, [make_row(k) for k in range(100, 120)]))
    oracle.rows.update({k: make_row(k) for k in range(100, 120)})
    assert specs_of_live_files(table) == {0, 1}
    upsert(lake, table, oracle, [2, 3, 105, 115, 60], "equality-delete", 2, blocked=False)
    written = new_eq_deletes(table)
    assert {s for s, _ in written} == {0, 1}
    assert {p[1] for s, p in written if s == 1} == {0, 60, 100, 110}  # truncate(10, k) of the keys
    seq = table.metadata.current_snapshot().sequence_number
    for d in table.files().equality_deletes:  # every key of a spec-1 file lies in the file's partition
        if d.seq == seq and d.spec_id == 1:
            assert {k // 10 * 10 for k in delete_keys_of(d.path)} == {d.partition[1]}
    check(table, oracle)
    assert_readers_but_duckdb_agree(table, oracle, java)

    table.replace_partition_field("bucket(4, k)", "bucket(2, k)")
    assert [f.name for f in table.metadata.spec().fields] == ["k_trunc_10", "k_bucket_2"]
    table.append(frame(lake, [make_row(k) for k in range(200, 210)]))
    oracle.rows.update({k: make_row(k) for k in range(200, 210)})
    delete_keys(lake, table, oracle, [3, 105, 205, 7], "equality-delete", blocked=False)
    assert {s for s, _ in new_eq_deletes(table)} == {0, 1, 2}
    upsert(lake, table, oracle, [4, 106, 206, 300], "equality-delete", 3, blocked=False)
    assert_readers_but_duckdb_agree(table, oracle, java)
    # delete maintenance per spec: every equality delete becomes position deletes of its spec's files
    table.convert_equality_deletes()
    assert not table.files().equality_deletes
    assert_readers_agree(table, oracle.values(), COLUMNS, java)  # PyIceberg and DuckDB read it now


def test_equality_deletes_fall_back_to_a_global_delete(lake, java) -> None:  # type: ignore[no-untyped-def]
    """Partitioned by day(ts), not a key column, after starting unpartitioned: the keys go into one
    global delete under the unpartitioned spec 0 (it applies to the files of every spec)."""
    oracle = Oracle(range(30))
    table = lake.create_table("db.gl", frame(lake, oracle.values()), identifier=["k"])
    table.add_partition_field("day(ts)")
    table.append(frame(lake, [make_row(k) for k in range(100, 110)]))
    oracle.rows.update({k: make_row(k) for k in range(100, 110)})
    upsert(lake, table, oracle, [1, 2, 105, 70], "equality-delete", 1, blocked=False)
    assert new_eq_deletes(table) == [(0, ())]
    upsert(lake, table, oracle, [2, 106, 71], "equality-delete", 2, blocked=False)  # spec 1 files now live
    assert new_eq_deletes(table) == [(0, ())]
    check(table, oracle)
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def new_data_files(table, before: set[str]) -> list[Any]:  # type: ignore[no-untyped-def]
    return [f for f in table.files().data if f.path not in before]


def test_sort_order_changes_sort_new_files(lake) -> None:  # type: ignore[no-untyped-def]
    rows = [make_row(k) for k in range(20)]
    table = lake.create_table("db.s", frame(lake, rows), identifier=["k"])
    old = {f.path for f in table.files().data}
    table.replace_sort_order(["n DESC", "k"])
    assert table.metadata.default_sort_order_id == 1
    table.append(frame(lake, [make_row(k, k % 5) for k in range(100, 160)]))
    added = new_data_files(table, old)
    assert added and all(f.data_file.sort_order_id == 1 for f in added)
    for f in added:
        got = pq.read_table(f.path).select(["n", "k"]).to_pylist()
        assert got == sorted(got, key=lambda r: (-r["n"], r["k"]))
    assert all(f.data_file.sort_order_id in (None, 0) for f in table.files().data if f.path in old)

    rowops.sql(lake, "ALTER TABLE db.s WRITE ORDERED BY s ASC NULLS LAST, k DESC")
    assert table.metadata.default_sort_order_id == 2
    assert table.metadata.properties["write.distribution-mode"] == "range"
    before = {f.path for f in table.files().data}
    changes = [make_row(k, 7) for k in (0, 11, 22, 101, 102, 300, 301)]
    rowops.merge(frame(lake, changes), table, on=["k"], strategy="copy-on-write")
    for f in new_data_files(table, before):
        got = [(r["s"], r["k"]) for r in pq.read_table(f.path).select(["s", "k"]).to_pylist()]
        assert got == sorted(got, key=lambda r: (r[0] is None, r[0] or "", -r[1]))
        assert f.data_file.sort_order_id == 2

    rowops.sql(lake, "ALTER TABLE db.s WRITE UNORDERED")
    assert table.metadata.default_sort_order_id == 0 and not table.metadata.sort_order().fields
    assert table.metadata.properties["write.distribution-mode"] == "none"
    rowops.sql(lake, "ALTER TABLE db.s WRITE ORDERED BY n DESC, k")
    assert table.metadata.default_sort_order_id == 1  # the identical order is reused


def second_handle(lake, name: str):  # type: ignore[no-untyped-def]
    return rowops.Lakehouse(lake.location, spark=lake.spark).table(name)


def test_concurrent_spec_changes_conflict(lake, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    table = lake.create_table("db.c", frame(lake, [make_row(k) for k in range(10)]), identifier=["k"])
    other = second_handle(lake, "db.c")
    evolve = table.scope.evolve_schema

    def data_first(*args: Any, **kwargs: Any) -> Any:
        other.append(frame(lake, [make_row(77)]))
        return evolve(*args, **kwargs)

    monkeypatch.setattr(table.scope, "evolve_schema", data_first)
    table.add_partition_field("bucket(2, k)")  # rebases over a data commit
    assert table.metadata.default_spec_id == 1 and len(rowops_rows(table)) == 11

    def spec_first(*args: Any, **kwargs: Any) -> Any:
        other.add_partition_field("g")
        return evolve(*args, **kwargs)

    monkeypatch.setattr(table.scope, "evolve_schema", spec_first)
    with pytest.raises(CommitConflictError) as caught:
        table.add_partition_field("day(ts)")
    monkeypatch.undo()
    assert caught.value.kind == ConflictKind.SPEC_CHANGED and caught.value.retry_safe
    assert "Help:" in str(caught.value)
    assert [f.name for f in table.metadata.spec().fields] == ["k_bucket_2", "g"]


def test_write_planned_on_an_old_spec_conflicts(lake, strategy, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A MERGE planned on spec N whose commit meets spec N+1 must not land files written for N."""
    oracle = Oracle(range(10))
    table = lake.create_table("db.w", frame(lake, oracle.values()), identifier=["k"])
    other = second_handle(lake, "db.w")
    commit = table.scope.commit_delta

    def spec_change_first(*args: Any, **kwargs: Any) -> Any:
        other.add_partition_field("bucket(4, k)")
        return commit(*args, **kwargs)

    monkeypatch.setattr(table.scope, "commit_delta", spec_change_first)
    rows = [make_row(k, 1) for k in (2, 40)]
    with pytest.raises(CommitConflictError) as caught:
        rowops.merge(frame(lake, rows), table, on=["k"], strategy=strategy)
    monkeypatch.undo()
    assert caught.value.kind == ConflictKind.SPEC_CHANGED and caught.value.retry_safe
    check(table, oracle)
    assert table.metadata.default_spec_id == 1
    strategy = "auto" if strategy == "equality-delete" else strategy  # spec-0 files remain
    rowops.merge(frame(lake, rows), table, on=["k"], strategy=strategy)
    oracle.rows.update({r[0]: r for r in rows})
    check(table, oracle)


def test_alter_table_text_and_transactions(lake, java) -> None:  # type: ignore[no-untyped-def]
    oracle = Oracle(range(20))
    table = lake.create_table("db.a", frame(lake, oracle.values()), identifier=["k"])
    out = rowops.sql(lake, "ALTER TABLE db.a ADD PARTITION FIELD bucket(4, k) AS shard")
    assert out == "ADD PARTITION FIELD: db.a is partitioned by shard=bucket[4](k)"
    table.append(frame(lake, [make_row(k) for k in range(30, 40)]))
    oracle.rows.update({k: make_row(k) for k in range(30, 40)})
    lake.sql("ALTER TABLE db.a REPLACE PARTITION FIELD shard WITH days(ts)")
    assert [(f.name, str(f.transform)) for f in table.metadata.spec().fields] == [("ts_day", "day")]
    with lake.transaction() as tx:  # a spec change and a write under it: one lake version
        tx.sql("ALTER TABLE db.a ADD PARTITION FIELD truncate(2, s)")
        t = tx.table("db.a")
        rowops.merge(
            frame(lake, [make_row(k, 1) for k in (1, 31, 50)]), t, on=["k"], strategy="position-delete"
        )
    oracle.rows.update({k: make_row(k, 1) for k in (1, 31, 50)})
    assert [f.name for f in table.metadata.spec().fields] == ["ts_day", "s_trunc_2"]
    assert table.metadata.default_spec_id in specs_of_live_files(table)
    lake.sql("ALTER TABLE db.a DROP PARTITION FIELD ts_day")
    lake.sql("ALTER TABLE db.a DROP PARTITION FIELD truncate(2, s)")
    assert table.metadata.default_spec_id == 0
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


@pytest.mark.parametrize(
    ("action", "error", "needle"),
    [
        (
            lambda t, lake: t.add_partition_field("bucket(4, nope)"),
            InvalidPartitionSpecError,
            "no column 'nope'",
        ),
        (lambda t, lake: t.add_partition_field("hour(k)"), InvalidPartitionSpecError, "cannot apply hour"),
        (lambda t, lake: t.add_partition_field("bucket(-1, k)"), InvalidPartitionSpecError, "cannot parse"),
        (
            lambda t, lake: t.add_partition_field("k_bucket_4"),
            InvalidPartitionSpecError,
            "no column 'k_bucket_4'",
        ),
        (lambda t, lake: t.drop_partition_field("day(ts)"), InvalidPartitionSpecError, "has no field"),
        (lambda t, lake: t.rename_partition_field("nope", "x"), InvalidPartitionSpecError, "has no field"),
        (lambda t, lake: t.replace_sort_order(["nope"]), NoSuchColumnError, "'nope'"),
        (lambda t, lake: t.replace_sort_order(["bucket(2, k)"]), InvalidSortOrderError, "bucket(2, k)"),
        (
            lambda t, lake: lake.sql("ALTER TABLE db.b ADD PARTITION FIELD years(n)"),
            InvalidPartitionSpecError,
            "cannot apply year",
        ),
        (
            lambda t, lake: lake.sql("ALTER TABLE db.b ADD COLUMNS (x int)"),
            UnsupportedSqlError,
            "ADD COLUMNS",
        ),
        (lambda t, lake: t.add_partition_field("bucket(4, k)"), None, None),
    ],
)
def test_bad_spec_changes_leave_the_lake_unchanged(lake, action, error, needle) -> None:  # type: ignore[no-untyped-def]
    table = lake.create_table("db.b", frame(lake, [make_row(k) for k in range(5)]), identifier=["k"])
    if error is None:  # the control: a valid change does commit
        action(table, lake)
        assert table.metadata.default_spec_id == 1
        return
    assert_unchanged(lake, lambda: action(table, lake), error, needle, "Help:")


def test_colocated_join_falls_back_to_a_shuffle_over_several_specs(lake) -> None:  # type: ignore[no-untyped-def]
    """Slices re-partition the source with the current spec; files of an older spec cannot be sliced."""
    oracle = Oracle(range(200))
    table = lake.create_table(
        "db.j", frame(lake, oracle.values()), partition_by=["bucket(4, k)"], identifier=["k"]
    )
    table.set_properties(**{"rowops.colocated-join.max-bytes": "1024"})  # every source is "large"
    rows = [make_row(k, 1) for k in range(0, 600, 2)]
    first = rowops.merge(frame(lake, rows), table, on=["k"], strategy="position-delete")
    assert "older partition specs" not in first.explain
    oracle.rows.update({r[0]: r for r in rows})
    table.replace_partition_field("bucket(4, k)", "bucket(8, k)")
    assert [f.name for f in table.metadata.spec().fields] == ["k_bucket_8"]
    rows = [make_row(k, 2) for k in range(1, 600, 2)]
    second = rowops.merge(frame(lake, rows), table, on=["k"], strategy="position-delete")
    assert "older partition specs: shuffle join" in second.explain
    assert "co-located join: no" in second.explain
    oracle.rows.update({r[0]: r for r in rows})
    check(table, oracle)


def test_spec_changes_through_a_pyiceberg_catalog(spark, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """On a table that stays in a pyiceberg catalog: one ``commit_table`` per change (with
    ``AssertDefaultSpecId``), a concurrent spec change made by pyiceberg itself is a conflict, and
    pyiceberg reads back rows rowops wrote under the evolved spec (position deletes of old-spec files)."""
    catalog = SqlCatalog("sql", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/warehouse")
    catalog.create_namespace("db")
    rows = [catalog_row(k) for k in range(10)]
    pyiceberg_table(catalog, rows)
    lake = rowops.Lakehouse.from_catalog(catalog, spark=spark)
    table = lake.table("db.t")
    table.add_partition_field("bucket(4, k)")
    assert catalog.load_table("db.t").spec().spec_id == 1
    evolve = table.scope.evolve_schema

    def pyiceberg_first(*args: Any, **kwargs: Any) -> Any:
        with catalog.load_table("db.t").update_spec() as update:
            update.add_identity("n")
        return evolve(*args, **kwargs)

    monkeypatch.setattr(table.scope, "evolve_schema", pyiceberg_first)
    with pytest.raises(CommitConflictError) as caught:
        table.add_partition_field("truncate(2, v)")
    monkeypatch.undo()
    assert caught.value.kind == ConflictKind.SPEC_CHANGED
    assert [f.name for f in catalog.load_table("db.t").spec().fields] == ["k_bucket_4", "n"]
    source = spark.createDataFrame([(3, "x", 7), (50, "y", None)], "k long, v string, n int")
    rowops.merge(source, table, on=["k"], strategy="position-delete")
    expected = {r[0]: r for r in rows} | {3: (3, "x", 7), 50: (50, "y", None)}
    scanned = catalog.load_table("db.t").scan().to_arrow().to_pylist()
    assert sorted(tuple(r.values()) for r in scanned) == sorted(expected.values())
