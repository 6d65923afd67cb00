"""Branches and tags (Iceberg snapshot refs): write-audit-publish, tag reads, retention, conflicts.

Every state is read back through rowops, DuckDB, PyIceberg (``snapshot_by_name``) and Iceberg's Java
reader (``spark.read.option("branch"|"tag", name)``).
"""

from __future__ import annotations

import contextlib
import time
from datetime import timedelta
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import StaticTable

import rowops
from rowops.errors import CommitConflictError, InvalidInputError, InvalidRefError, NotFastForwardError
from rowops.exec.reading.source import release
from rowops.request.operations import simple_merge_spec
from rowops.run import row_level as operations
from tests.oracles.compare import assert_same_rows
from tests.oracles.duckdb_reader import read_duckdb
from tests.oracles.java_reader import JavaIcebergReader
from tests.oracles.pyiceberg_reader import EqualityDeletesUnsupportedError, read_pyiceberg
from tests.readers import assert_readers_agree, df_rows, rowops_rows
from tests.spark.tables import COLUMNS, fingerprint, frame, make_row
from tests.spark.test_catalogs import SPARK_SCHEMA, catalog_rows, pyiceberg_table, row
from tests.spark.test_errors import assert_unchanged

N = 40
Row = tuple[Any, ...]


def _table(lake: Any) -> Any:
    rows = [make_row(k) for k in range(N)]
    return lake.create_table(
        "db.t", frame(lake.spark, rows), partition_by=["bucket(4, k)"], identifier=["k"]
    ), rows


def assert_ref_reads(
    table: Any, kind: str, name: str, expected: list[Row], java: JavaIcebergReader | None
) -> None:
    """Every reader sees ``expected`` at branch or tag ``name``."""
    location, options = table.metadata_location, dict(table.lake.storage_options)
    snapshot_id = StaticTable.from_metadata(location).snapshot_by_name(name).snapshot_id
    assert snapshot_id == table.refs()[name]["snapshot_id"]
    assert_same_rows(expected, df_rows(table.to_df(ref=name)), COLUMNS, "rowops ref=")
    assert_same_rows(expected, rowops_rows(table, snapshot_id), COLUMNS, "rowops snapshot_id=")
    assert_same_rows(expected, read_duckdb(location, snapshot_id, options), COLUMNS, "duckdb")
    with contextlib.suppress(EqualityDeletesUnsupportedError):
        assert_same_rows(expected, read_pyiceberg(location, snapshot_id, options), COLUMNS, "pyiceberg")
    if java is not None:
        assert_same_rows(expected, java.read(location, options=options, ref=(kind, name)), COLUMNS, "java")


def test_write_audit_publish(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    """Branch, MERGE into the branch (main stays), read both, fast-forward main: main equals the branch."""
    table, rows = _table(lake)
    main_before = table.current_snapshot_id
    audit = table.create_branch("audit")
    source = [make_row(k, 1) for k in (3, 7, 15)] + [make_row(k, 1) for k in (100, 101)]
    result = rowops.merge(frame(lake.spark, source), audit, on=["k"], strategy=strategy)
    appended = audit.append(frame(lake.spark, [make_row(200, 2)]))
    expected = {r[0]: r for r in rows} | {r[0]: r for r in [*source, make_row(200, 2)]}
    assert table.current_snapshot_id == main_before, "main moved"
    snapshots = {s["snapshot_id"]: s for s in table.snapshots()}
    assert snapshots[result.snapshot_id]["parent_id"] == main_before
    assert snapshots[appended.snapshot_id]["parent_id"] == result.snapshot_id
    assert table.refs()["audit"]["snapshot_id"] == appended.snapshot_id == audit.current_snapshot_id
    assert_readers_agree(table, rows, COLUMNS, java)  # main, through every reader
    assert_ref_reads(table, "branch", "audit", list(expected.values()), java)
    assert_same_rows(list(expected.values()), df_rows(audit.to_df()), COLUMNS, "branch handle")

    table.fast_forward("main", "audit")
    assert table.current_snapshot_id == appended.snapshot_id
    assert_readers_agree(table, list(expected.values()), COLUMNS, java)


def test_tags_are_read_and_kept_by_expiry_until_their_max_age(lake, java) -> None:  # type: ignore[no-untyped-def]
    table, rows = _table(lake)
    table.create_tag("v1")
    v1 = table.current_snapshot_id
    rowops.merge(frame(lake.spark, [make_row(1, 1)]), table, on=["k"], strategy="copy-on-write")
    table.create_tag("short", max_ref_age=timedelta(milliseconds=1))
    short = table.current_snapshot_id
    rowops.merge(frame(lake.spark, [make_row(2, 1)]), table, on=["k"], strategy="copy-on-write")
    rowops.merge(frame(lake.spark, [make_row(3, 1)]), table, on=["k"], strategy="copy-on-write")
    time.sleep(0.05)  # the "short" tag's snapshot is now older than its max-ref-age

    done = table.expire_snapshots(older_than=timedelta(0), retain_last=1)
    ids = {s["snapshot_id"] for s in table.snapshots()}
    assert ids == {v1, table.current_snapshot_id}, "only the tagged and the current snapshot stay"
    assert short not in ids and "short" not in table.refs()
    assert done.snapshots_expired == 2
    assert table.refs()["v1"] == {
        "type": "tag",
        "snapshot_id": v1,
        "max_ref_age_ms": None,
        "min_snapshots_to_keep": None,
        "max_snapshot_age_ms": None,
    }
    assert_ref_reads(table, "tag", "v1", rows, java)  # its files survived the expiry
    table.drop_tag("v1")
    table.expire_snapshots(older_than=timedelta(0), retain_last=1)
    assert [s["snapshot_id"] for s in table.snapshots()] == [table.current_snapshot_id]


def test_branch_retention_keeps_min_snapshots_and_drops_expired_branches(lake) -> None:  # type: ignore[no-untyped-def]
    table, _ = _table(lake)
    keep = table.create_branch("keep", min_snapshots_to_keep=2)
    old = table.create_branch("old", max_ref_age=timedelta(milliseconds=1))
    old.append(frame(lake.spark, [make_row(300)]))
    for k in (100, 101, 102):
        keep.append(frame(lake.spark, [make_row(k)]))
    heads = [s["snapshot_id"] for s in table.snapshots()][-2:]
    rowops.merge(frame(lake.spark, [make_row(1, 1)]), table, on=["k"], strategy="copy-on-write")
    time.sleep(0.05)
    table.expire_snapshots(older_than=timedelta(0), retain_last=1)
    assert set(table.refs()) == {"main", "keep"}
    assert {s["snapshot_id"] for s in table.snapshots()} == {table.current_snapshot_id, *heads}
    assert sorted(r[0] for r in keep.to_df().collect()) == [*range(N), 100, 101, 102]
    table.remove_orphans(older_than=timedelta(0))  # files of every ref's snapshots are live
    assert sorted(r[0] for r in keep.to_df().collect()) == [*range(N), 100, 101, 102]
    assert sorted(r[0] for r in table.to_df(snapshot_id=heads[0]).collect()) == [*range(N), 100, 101]


def test_fast_forward_of_diverged_branch_fails_and_changes_nothing(lake) -> None:  # type: ignore[no-untyped-def]
    table, _ = _table(lake)
    table.create_branch("audit").append(frame(lake.spark, [make_row(100)]))
    table.append(frame(lake.spark, [make_row(101)]))
    assert_unchanged(
        lake, lambda: table.fast_forward("main", "audit"), NotFastForwardError, "diverged", "Help:"
    )
    assert_unchanged(
        lake, lambda: table.fast_forward("main", "nope"), InvalidRefError, "'nope'", "audit (branch)"
    )


def test_writing_to_a_tag_and_bad_ref_changes_fail_and_change_nothing(lake) -> None:  # type: ignore[no-untyped-def]
    table, _ = _table(lake)
    table.create_tag("v1")
    audit = table.create_branch("audit")
    source = frame(lake.spark, [make_row(100)])
    assert_unchanged(
        lake, lambda: table.branch("v1").append(source), InvalidRefError, "'v1' is a tag", "Help:"
    )
    assert_unchanged(lake, lambda: table.fast_forward("v1", "audit"), InvalidRefError, "'v1' is a tag")
    assert_unchanged(lake, lambda: table.create_branch("v1"), InvalidRefError, "already has a tag named 'v1'")
    assert_unchanged(
        lake, lambda: table.drop_branch("main"), InvalidRefError, "main branch cannot be dropped"
    )
    assert_unchanged(lake, lambda: table.drop_tag("audit"), InvalidRefError, "no tag 'audit'")
    assert_unchanged(lake, lambda: table.create_tag("x", 12345), InvalidRefError, "no snapshot 12345")
    assert_unchanged(
        lake, lambda: audit.rollback_to(table.current_snapshot_id), InvalidInputError, "main branch only"
    )
    assert_unchanged(lake, lambda: audit.expire_snapshots(), InvalidInputError, "branch handle")
    assert_unchanged(lake, lambda: table.to_df(snapshot_id=1, ref="v1"), InvalidInputError, "not both")
    table.drop_branch("audit")
    assert_unchanged(lake, lambda: audit.append(source), InvalidRefError, "no branch or tag 'audit'")


def _plan(table: Any, rows: list[Row], strategy: str) -> Any:
    return operations.plan(table, simple_merge_spec(["k"]), frame(table.lake.spark, rows), strategy)


def _execute(planned: Any) -> Any:
    try:
        return operations.execute(planned)
    finally:
        release(planned.source)


def test_concurrent_writes_on_main_and_a_branch_do_not_conflict(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    """A MERGE planned on a branch commits after a MERGE of the same rows on main (and the other way
    round): conflicts are checked against the branch's own head."""
    table, rows = _table(lake)
    audit = table.create_branch("audit")
    on_branch = _plan(audit, [make_row(5, 1)], strategy)
    rowops.merge(frame(lake.spark, [make_row(5, 2)]), table, on=["k"], strategy=strategy)
    on_main = _plan(table, [make_row(6, 2)], strategy)
    branch_result = _execute(on_branch)
    main_result = _execute(on_main)
    assert audit.current_snapshot_id == branch_result.snapshot_id
    assert table.current_snapshot_id == main_result.snapshot_id
    base = {r[0]: r for r in rows}
    assert_ref_reads(table, "branch", "audit", list((base | {5: make_row(5, 1)}).values()), java)
    assert_readers_agree(table, list((base | {5: make_row(5, 2), 6: make_row(6, 2)}).values()), COLUMNS, java)


def test_concurrent_writes_on_the_same_branch_conflict(lake) -> None:  # type: ignore[no-untyped-def]
    table, _ = _table(lake)
    audit = table.create_branch("audit")
    planned = _plan(audit, [make_row(5, 1)], "position-delete")
    rowops.merge(frame(lake.spark, [make_row(5, 2)]), audit, on=["k"], strategy="position-delete")
    before = fingerprint(lake)
    with pytest.raises(CommitConflictError):
        _execute(planned)
    assert fingerprint(lake) == before


def test_transaction_writes_to_a_branch(lake) -> None:  # type: ignore[no-untyped-def]
    """Three statements on a branch inside a transaction publish their three snapshots, a chain on the
    branch (as Iceberg's transactions do: incremental readers see each); main stays."""
    table, rows = _table(lake)
    table.create_branch("audit")
    main_before = table.current_snapshot_id
    with lake.transaction() as tx:
        branch = tx.table("db.t").branch("audit")
        branch.append(frame(lake.spark, [make_row(100)]))
        rowops.merge(frame(lake.spark, [make_row(1, 1)]), branch, on=["k"], strategy="position-delete")
        tx.append(table.branch("audit"), frame(lake.spark, [make_row(101)]))  # the branch, in the transaction
    assert table.current_snapshot_id == main_before
    head = table.refs()["audit"]["snapshot_id"]
    snapshots = {s["snapshot_id"]: s for s in table.snapshots()}
    chain, at = [], head
    while at != main_before:
        chain.append(at)
        at = snapshots[at]["parent_id"]
    assert len(chain) == 3 and set(snapshots) == {main_before, *chain}
    got = sorted(r[0] for r in table.to_df(ref="audit").collect())
    assert got == sorted([*range(N), 100, 101])
    assert_same_rows(rows, df_rows(table.to_df()), COLUMNS, "main")


def test_branch_of_a_table_in_a_pyiceberg_catalog(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Refs commit through ``catalog.commit_table`` too (asserting the refs they looked at)."""
    sql_catalog = SqlCatalog(
        "refs", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/warehouse"
    )
    sql_catalog.create_namespace("db")
    rows = [row(k) for k in range(10)]
    before = pyiceberg_table(sql_catalog, rows)
    lake = rowops.Lakehouse.from_catalog(sql_catalog, spark=spark)
    table = lake.table("db.t")
    audit = table.create_branch("audit")
    result = rowops.merge(
        spark.createDataFrame([row(3, 1)], SPARK_SCHEMA), audit, on=["k"], strategy="position-delete"
    )
    committed = sql_catalog.load_table("db.t")
    assert committed.metadata.current_snapshot_id == before.metadata.current_snapshot_id
    assert committed.metadata.refs["audit"].snapshot_id == result.snapshot_id
    assert catalog_rows(sql_catalog) == sorted(rows)
    table.fast_forward("main", "audit")
    assert catalog_rows(sql_catalog) == sorted([row(3, 1) if r[0] == 3 else r for r in rows])
