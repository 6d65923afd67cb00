"""Retention rules (issue 42, items 3, 5, 8): what protects a file from ``expire_snapshots`` and
``remove_orphans``, which lake versions stay readable, and which are refused (and why).

Every check reads cold (a fresh ``Lakehouse`` handle) and, where a table is read back, through
DuckDB and PyIceberg as well as rowops.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from typing import Any

import pytest

import rowops
from rowops.errors import RowOpsError, SnapshotExpiredError
from rowops.meta.paths import local_path
from tests.readers import assert_readers_agree
from tests.spark.tables import COLUMNS, frame, make_row
from tests.spark.test_errors import assert_unchanged

NOW = timedelta(0)  # "any age": the tests expire minute-old snapshots explicitly


def cold(lake: Any) -> Any:
    """A fresh handle on the same lake: no metadata cache of the process that wrote."""
    return rowops.Lakehouse(lake.location, spark=lake.spark)


def rows(keys: range, version: int = 0) -> list[tuple[Any, ...]]:
    return [make_row(k, version) for k in keys]


def assert_version_reads(lake: Any, version: int, expected: list[tuple[Any, ...]]) -> None:
    table = cold(lake).at(version=version).table("db.t")
    assert_readers_agree(table, expected, COLUMNS, None)


def test_expire_after_lake_rollback_keeps_what_newer_versions_need(lake) -> None:  # type: ignore[no-untyped-def]
    """Item 3 and the abandoned line: versions after the rollback target keep their files; only the
    version whose snapshot the expiry removed is refused, and the error names that expiry."""
    table = lake.create_table("db.t", frame(lake.spark, rows(range(4))), identifier=["k"])
    v1 = lake.version
    table.append(frame(lake.spark, rows(range(4, 6))))
    v2 = lake.version
    table.append(frame(lake.spark, rows(range(6, 8))))
    v3 = lake.version
    lake.rollback_to(v1)  # v2 and v3 now live only on an abandoned line of history
    rowops.merge(frame(lake.spark, rows(range(4), 1)), table, on=["k"], strategy="copy-on-write")
    done = table.expire_snapshots(older_than=NOW, retain_last=1)  # the first snapshot expires
    assert done.snapshots_expired == 1
    expiry = lake.version

    assert_version_reads(lake, v3, rows(range(8)))  # never expired: its files are all there
    assert_version_reads(lake, v2, rows(range(6)))
    assert_readers_agree(cold(lake).table("db.t"), rows(range(4), 1), COLUMNS, None)
    with pytest.raises(SnapshotExpiredError) as refused:  # the expired state is refused, and why
        cold(lake).at(version=v1).table("db.t").to_df()
    assert f"lake version {expiry}" in str(refused.value) and "Help:" in str(refused.value)
    assert_unchanged(lake, lambda: cold(lake).rollback_to(v1), SnapshotExpiredError, f"lake version {expiry}")
    back = cold(lake).rollback_to(v3)  # an abandoned version that no expiry touched comes back whole
    assert_version_reads(lake, back, rows(range(8)))
    assert_readers_agree(cold(lake).table("db.t"), rows(range(8)), COLUMNS, None)


def test_expire_copes_with_snapshots_a_lake_rollback_brought_back(lake) -> None:  # type: ignore[no-untyped-def]
    """Item 8: the metadata a rollback restores still lists snapshots an earlier expiry removed."""
    table = lake.create_table("db.t", frame(lake.spark, rows(range(2))), identifier=["k"])
    table.append(frame(lake.spark, rows(range(2, 4))))
    table.append(frame(lake.spark, rows(range(4, 6))))
    v3 = lake.version
    assert table.expire_snapshots(older_than=NOW, retain_last=1).snapshots_expired == 2
    lake.rollback_to(v3)  # its current snapshot was kept; its metadata lists the two expired ones
    again = cold(lake).table("db.t").expire_snapshots(older_than=NOW, retain_last=1)
    assert again.snapshots_expired == 2 and len(cold(lake).table("db.t").snapshots()) == 1
    assert_readers_agree(cold(lake).table("db.t"), rows(range(6)), COLUMNS, None)
    assert_version_reads(lake, v3, rows(range(6)))


def test_expire_that_fails_commits_nothing(lake) -> None:  # type: ignore[no-untyped-def]
    """Item 8: everything an expiry needs is read before it commits; a failure leaves the lake as it was."""
    table = lake.create_table("db.t", frame(lake.spark, rows(range(2))), identifier=["k"])
    first = table.snapshots()[0]
    table.append(frame(lake.spark, rows(range(2, 4))))
    manifest_list = local_path(table.metadata.snapshot_by_id(first["snapshot_id"]).manifest_list)
    with open(manifest_list, "wb") as out:  # unreadable, not missing: expiry cannot know its files
        out.write(b"not avro")
    history, snapshots = len(lake.history()), cold(lake).table("db.t").snapshots()
    with pytest.raises(Exception):  # noqa: B017 - whatever the reader raises
        cold(lake).table("db.t").expire_snapshots(older_than=NOW, retain_last=1)
    assert len(cold(lake).history()) == history and cold(lake).table("db.t").snapshots() == snapshots


def test_gc_disabled_refuses_expiry_and_orphan_removal(lake) -> None:  # type: ignore[no-untyped-def]
    """Item 5: ``gc.enabled=false``: the table's files may be shared with another table."""
    table = lake.create_table("db.t", frame(lake.spark, rows(range(2))), identifier=["k"])
    table.append(frame(lake.spark, rows(range(2, 4))))
    table.set_properties(**{"gc.enabled": "false"})
    orphan = f"{local_path(table.metadata.location)}/data/orphan.parquet"
    with open(orphan, "wb") as out:
        out.write(b"not referenced")
    os.utime(orphan, (time.time() - 7 * 86400, time.time() - 7 * 86400))
    for action in (
        lambda: cold(lake).table("db.t").expire_snapshots(older_than=NOW, retain_last=1),
        lambda: cold(lake).table("db.t").remove_orphans(older_than=timedelta(hours=1)),
    ):
        assert_unchanged(lake, action, RowOpsError, "gc.enabled", "Help:", "set_properties")
    with pytest.raises(RowOpsError) as caught:
        table.expire_snapshots(older_than=NOW)
    assert type(caught.value).__name__ == "GcDisabledError"
    assert os.path.exists(orphan) and len(table.snapshots()) == 2


def test_history_expire_properties_are_the_defaults(lake) -> None:  # type: ignore[no-untyped-def]
    """Item 5: without arguments, expiry follows Iceberg's ``history.expire.*`` properties (and their
    defaults: snapshots younger than 5 days are kept)."""
    table = lake.create_table("db.t", frame(lake.spark, rows(range(2))), identifier=["k"])
    for start in (2, 4, 6):
        table.append(frame(lake.spark, rows(range(start, start + 2))))
    version = lake.version
    assert table.expire_snapshots().snapshots_expired == 0  # minute-old snapshots: max age 5 days
    assert lake.version == version and len(table.snapshots()) == 4
    table.set_properties(
        **{"history.expire.max-snapshot-age-ms": "1", "history.expire.min-snapshots-to-keep": "3"}
    )
    time.sleep(0.01)
    assert cold(lake).table("db.t").expire_snapshots().snapshots_expired == 1  # three kept
    assert len(cold(lake).table("db.t").snapshots()) == 3
    table = cold(lake).table("db.t")
    table.create_tag("old", table.snapshots()[0]["snapshot_id"])
    table.set_properties(
        **{"history.expire.min-snapshots-to-keep": "1", "history.expire.max-ref-age-ms": "1"}
    )
    time.sleep(0.01)
    done = cold(lake).table("db.t").expire_snapshots()  # the tag is past its age: it goes too
    assert done.snapshots_expired == 2 and "old" not in cold(lake).table("db.t").refs()
    assert_readers_agree(cold(lake).table("db.t"), rows(range(8)), COLUMNS, None)
