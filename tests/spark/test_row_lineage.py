"""Format v3 row lineage as Iceberg Java reads it (issue 42 item 14).

``_row_id`` and ``_last_updated_sequence_number`` of every row, read by Iceberg's Java reader, against
what the v3 spec (and Iceberg's own MERGE/UPDATE/compaction, which write both columns into the files
they rewrite) gives: an updated row keeps its ``_row_id`` and takes the new sequence number; an
untouched row keeps both, also when its file is rewritten (copy-on-write, compaction). An equality-
delete upsert is blind: the new row version gets a new row id (as Flink's upserts).

rowops writes both columns into the files it writes rows of the table into (``exec/lineage.py``):
moved rows keep their lineage, updated rows their ids.
"""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq
import pytest

import rowops
from tests.readers import assert_readers_agree

LINEAGE = ["k", "_row_id", "_last_updated_sequence_number"]
START = [(k, 0) for k in range(4)]
SLOW = pytest.mark.slow


def _create(lake: Any) -> Any:
    df = lake.spark.createDataFrame(START, "k long, v int").coalesce(1)
    table = lake.create_table("db.t", df, identifier=["k"], format_version=3)
    assert len(table.files().data) == 1
    return table


def _lineage(table: Any, java: Any) -> dict[int, tuple[int, int]]:
    rows = java.read(table.metadata_location, columns=LINEAGE).to_pylist()
    return {r["k"]: (r["_row_id"], r["_last_updated_sequence_number"]) for r in rows}


@pytest.fixture()
def java_lineage(java):  # type: ignore[no-untyped-def]
    if java is None:
        pytest.skip("the Java oracle is not available")
    return java


@SLOW
def test_rows_of_the_first_snapshot(lake, java_lineage) -> None:  # type: ignore[no-untyped-def]
    table = _create(lake)
    assert _lineage(table, java_lineage) == {k: (k, 1) for k in range(4)}


@pytest.mark.parametrize(
    ("strategy", "arrow"),
    [("position-delete", "true"), ("copy-on-write", "true"), ("copy-on-write", "false")],
)
def test_update_keeps_row_ids(lake, java_lineage, strategy: str, arrow: str) -> None:  # type: ignore[no-untyped-def]
    """UPDATE k = 1 at sequence number 2: k = 1 keeps row id 1 and takes sequence number 2; the other
    rows keep (id, 1). A copy-on-write rewrites the file in Arrow, or by Spark when that is off."""
    table = _create(lake)
    if arrow == "false":
        table.set_properties(**{"rowops.rewrite.arrow.enabled": arrow})
    table.update({"v": "99"}, where="k = 1", strategy=strategy)
    seen = _lineage(table, java_lineage)
    assert seen == {0: (0, 1), 1: (1, 2), 2: (2, 1), 3: (3, 1)}, seen


@SLOW  # test_update_keeps_row_ids[position-delete-true] checks these rows too
def test_untouched_rows_of_a_position_delete_update(lake, java_lineage) -> None:  # type: ignore[no-untyped-def]
    """The file stays: its untouched rows keep their ids and sequence numbers."""
    table = _create(lake)
    table.update({"v": "99"}, where="k = 1", strategy="position-delete")
    seen = _lineage(table, java_lineage)
    assert {k: seen[k] for k in (0, 2, 3)} == {0: (0, 1), 2: (2, 1), 3: (3, 1)}, seen


def test_blind_upsert_gives_a_new_row_id(lake, java_lineage) -> None:  # type: ignore[no-untyped-def]
    table = _create(lake)
    source = lake.spark.createDataFrame([(1, 99)], "k long, v int")
    table.merge(source, on=["k"]).when_matched().update_all().when_not_matched().insert_all().execute(
        strategy="equality-delete"
    )
    seen = _lineage(table, java_lineage)
    assert seen == {0: (0, 1), 1: (4, 2), 2: (2, 1), 3: (3, 1)}, seen


def test_compaction_keeps_row_ids(lake, java_lineage) -> None:  # type: ignore[no-untyped-def]
    """A DELETE of k = 2 (deletion vector), then a compaction: the rewritten rows keep (id, 1)."""
    table = _create(lake)
    table.delete("k = 2", strategy="position-delete")
    assert table.compact().committed
    seen = _lineage(table, java_lineage)
    assert seen == {0: (0, 1), 1: (1, 1), 3: (3, 1)}, seen


def _cold(lake: Any) -> Any:
    """The table through a fresh handle (no metadata cache of the writer)."""
    return rowops.Lakehouse(lake.location, spark=lake.spark).table("db.t")


@pytest.mark.parametrize("strategy", ["position-delete", "copy-on-write", "hybrid"])
def test_merge_keeps_row_ids_and_inserts_get_new_ones(lake, java_lineage, strategy: str) -> None:  # type: ignore[no-untyped-def]
    """MERGE updates k = 1 and inserts k = 9 at sequence number 2: k = 1 keeps row id 1, k = 9 gets
    a new one (from the table's next-row-id 4 on, below the new next-row-id); the other rows keep
    (id, 1). Every reader reads the same values."""
    table = _create(lake)
    source = lake.spark.createDataFrame([(1, 99), (9, 9)], "k long, v int")
    merge = table.merge(source, on=["k"]).when_matched().update_all().when_not_matched().insert_all()
    merge.execute(strategy=strategy)
    cold = _cold(lake)
    seen = _lineage(cold, java_lineage)
    new_id, new_seq = seen.pop(9)
    assert seen == {0: (0, 1), 1: (1, 2), 2: (2, 1), 3: (3, 1)}, seen
    assert 4 <= new_id < cold.metadata.next_row_id and new_seq == 2, (new_id, new_seq)
    expected = [(0, 0), (1, 99), (2, 0), (3, 0), (9, 9)]
    assert_readers_agree(cold, expected, ["k", "v"], java_lineage)


@pytest.mark.parametrize("strategy", ["position-delete", "copy-on-write"])
def test_moved_rows_keep_their_lineage_again(lake, java_lineage, strategy: str) -> None:  # type: ignore[no-untyped-def]
    """Rows already moved once (their lineage written into their file) keep it through a second
    UPDATE and a compaction: k = 1 updated at sequence number 2, k = 2 at 3, then a compaction (of
    the position-delete table's three files; the copy-on-write table's files may be left as they are)."""
    table = _create(lake)
    table.update({"v": "1"}, where="k = 1", strategy=strategy)
    table.update({"v": "2"}, where="k = 2", strategy=strategy)
    assert table.compact().committed or strategy == "copy-on-write"
    seen = _lineage(_cold(lake), java_lineage)
    assert seen == {0: (0, 1), 1: (1, 2), 2: (2, 3), 3: (3, 1)}, seen


def test_v2_files_hold_no_lineage_columns(lake) -> None:  # type: ignore[no-untyped-def]
    """Row lineage is format v3: a v2 table's rewritten and compacted files hold the table's columns
    only, as before."""
    df = lake.spark.createDataFrame(START, "k long, v int").coalesce(1)
    table = lake.create_table("db.t", df, identifier=["k"])
    table.update({"v": "99"}, where="k = 1", strategy="copy-on-write")
    table.delete("k = 2", strategy="position-delete")
    assert table.compact().committed
    for f in _cold(lake).files().data:
        assert pq.read_schema(f.path).names == ["k", "v"], f.path


def test_copy_on_write_delete_keeps_row_ids(lake, java_lineage) -> None:  # type: ignore[no-untyped-def]
    """A copy-on-write DELETE of k = 2: the rewritten file's rows keep (id, 1) (the small file's
    survivors travel with the operation's new rows, none here)."""
    table = _create(lake)
    table.delete("k = 2", strategy="copy-on-write")
    seen = _lineage(_cold(lake), java_lineage)
    assert seen == {0: (0, 1), 1: (1, 1), 3: (3, 1)}, seen


def test_upsert_by_key_keeps_stored_and_inherited_row_ids(lake, java_lineage) -> None:  # type: ignore[no-untyped-def]
    """A position-delete upsert finds its rows by key (``exec/writing/keyed_deletes.py``): k = 1, whose
    id a copy-on-write stored in its new file, and k = 2, whose id its file inherits, keep their ids
    and take sequence number 3; k = 9 gets a new id."""
    table = _create(lake)
    table.update({"v": "1"}, where="k = 1", strategy="copy-on-write")
    source = lake.spark.createDataFrame([(1, 11), (2, 22), (9, 9)], "k long, v int")
    merge = table.merge(source, on=["k"]).when_matched().update_all().when_not_matched().insert_all()
    result = merge.execute(strategy="position-delete")
    assert "positions found by key" in result.explain
    cold = _cold(lake)
    seen = _lineage(cold, java_lineage)
    new_id, new_seq = seen.pop(9)
    assert seen == {0: (0, 1), 1: (1, 3), 2: (2, 3), 3: (3, 1)}, seen
    assert 4 <= new_id < cold.metadata.next_row_id and new_seq == 3, (new_id, new_seq)
    assert_readers_agree(cold, [(0, 0), (1, 11), (2, 22), (3, 0), (9, 9)], ["k", "v"], java_lineage)
