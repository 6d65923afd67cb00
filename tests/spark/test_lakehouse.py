"""The lakehouse and table API: create (from rows or a schema), append, list, drop, rollback."""

from __future__ import annotations

import json

import pytest

import rowops
from rowops import errors
from rowops.exec.reading.file_reads import file_uri
from tests.readers import assert_readers_agree
from tests.spark.tables import COLUMNS, SCHEMA, frame, make_row


def test_empty_table_then_append(lake, java) -> None:  # type: ignore[no-untyped-def]
    t = lake.create_table("db.empty", SCHEMA, partition_by=["day(ts)", "truncate(2, s)"], identifier=["k"])
    assert t.current_snapshot_id is None
    assert t.to_df().count() == 0
    rows = [make_row(k) for k in range(25)]
    result = t.append(frame(lake.spark, rows))
    assert (result.rows_inserted, result.data_files_added > 0) == (25, True)
    assert_readers_agree(t, rows, COLUMNS, java)
    first = t.current_snapshot_id
    more = [make_row(k) for k in range(25, 30)]
    t.append(frame(lake.spark, more))
    assert_readers_agree(t, rows + more, COLUMNS, java)
    assert_readers_agree(t, rows, COLUMNS, java, snapshot_id=first)


def test_list_drop_and_rollback(lake) -> None:  # type: ignore[no-untyped-def]
    rows = [make_row(k) for k in range(10)]
    a = lake.create_table("db.a", frame(lake.spark, rows), identifier=["k"])
    lake.create_table("db.b", SCHEMA)
    lake.create_table("other.c", SCHEMA)
    assert lake.list_tables("db") == ["db.a", "db.b"]
    first = a.current_snapshot_id
    rowops.delete(a, where="k < 5")
    assert a.to_df().count() == 5
    a.rollback_to(first)
    assert a.to_df().count() == 10
    assert len(a.snapshots()) == 2  # history is kept; rollback only moves the main branch
    with pytest.raises(errors.InvalidInputError):
        a.rollback_to(12345)
    lake.drop_table("db.b")
    assert lake.list_tables("db") == ["db.a"]
    with pytest.raises(errors.NoSuchTableError):
        lake.table("db.b")
    with pytest.raises(errors.NoSuchTableError):
        lake.drop_table("db.b")


def test_lake_log_records_each_commit(lake) -> None:  # type: ignore[no-untyped-def]
    rows = frame(lake.spark, [make_row(k) for k in range(5)]).coalesce(1)  # one data file of 5 rows
    t = lake.create_table("db.t", rows, identifier=["k"])
    rowops.merge(frame(lake.spark, [make_row(1, 1)]), t, on=["k"], strategy="position-delete")
    log = lake.catalog.log
    versions = log.versions()
    assert versions == [1, 2]
    body = json.loads((log.dir / f"{2:020d}.json").read_text())
    (commit,) = body["transaction"]["commits"]
    assert commit["table"] == "db.t" and commit["snapshot-id"] == t.current_snapshot_id
    assert body["tables"]["db.t"]["metadata-location"] == t.metadata_location
    summary = t.snapshots()[-1]["summary"]
    assert summary["rowops.strategy"] == "position-delete" and summary["added-position-deletes"] == "1"
    files = t.files()  # Iceberg's size fields: the files this commit added, and every live file
    added = [f for f in (*files.data, *files.deletes) if f.seq == files.sequence_number]
    assert int(summary["added-files-size"]) == sum(f.size for f in added) > 0
    assert int(summary["total-files-size"]) == sum(f.size for f in (*files.data, *files.deletes))


def test_reopen_lake_from_disk(lake, spark) -> None:  # type: ignore[no-untyped-def]
    lake.create_table("db.t", frame(lake.spark, [make_row(k) for k in range(3)]), identifier=["k"])
    again = rowops.Lakehouse(lake.root, spark=spark)
    assert again.table("db.t").to_df().count() == 3


def test_no_change_makes_no_snapshot(lake) -> None:  # type: ignore[no-untyped-def]
    t = lake.create_table("db.t", frame(lake.spark, [make_row(k) for k in range(3)]), identifier=["k"])
    before = t.metadata_location
    result = rowops.delete(t, where="k > 100")
    assert result.rows_deleted == 0 and t.metadata_location == before


def test_lake_path_with_characters_spark_escapes(spark, tmp_path, java) -> None:  # type: ignore[no-untyped-def]
    """Spark reports such paths URL-encoded ('file:/a%20b'); rowops must still match rows to files."""
    lake = rowops.Lakehouse(tmp_path / "my lake+%41", spark=spark)
    rows = [make_row(k) for k in range(20)]
    t = lake.create_table("db.t", frame(spark, rows), partition_by=["bucket(2, k)"], identifier=["k"])
    changes = [make_row(k, 1) for k in (1, 5, 30)]
    result = rowops.merge(frame(spark, changes), t, on=["k"], strategy="position-delete")
    assert (result.rows_updated, result.rows_inserted, result.delete_files_added) == (2, 1, 2)
    expected = {r[0]: r for r in rows}
    expected.update({r[0]: r for r in changes})
    assert_readers_agree(t, list(expected.values()), COLUMNS, java)


@pytest.mark.parametrize("directory", ["plain_dir", "my lake+%41 é"])
def test_file_uri_is_spark_name_of_the_file(spark, tmp_path, directory) -> None:  # type: ignore[no-untyped-def]
    """``_file`` holds Spark's own name of a file; the driver-side translation must agree with it."""
    target = tmp_path / directory / "x"
    spark.range(3).coalesce(1).write.parquet(str(target))
    (path,) = [str(p) for p in target.glob("*.parquet")]
    observed = spark.read.parquet(path).select("_metadata.file_path").first()[0]
    assert file_uri(spark, path) == observed
