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

import pytest

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
    "strategy",
    [
        pytest.param("position-delete"),
        pytest.param("copy-on-write"),
    ],
)
def test_update_keeps_row_ids(lake, java_lineage, strategy: str) -> None:  # type: ignore[no-untyped-def]
    """UPDATE k = 1 at sequence number 2: k = 1 keeps row id 1 and takes sequence number 2; the other
    rows keep (id, 1)."""
    table = _create(lake)
    table.update({"v": "99"}, where="k = 1", strategy=strategy)
    seen = _lineage(table, java_lineage)
    assert seen == {0: (0, 1), 1: (1, 2), 2: (2, 1), 3: (3, 1)}, seen


def test_untouched_rows_of_a_position_delete_update(lake, java_lineage) -> None:  # type: ignore[no-untyped-def]
    """The file stays: its untouched rows keep their ids and sequence numbers (passes today)."""
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
