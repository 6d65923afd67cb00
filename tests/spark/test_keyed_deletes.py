"""Position deletes of a blind upsert found by key, without a join (``exec/writing/keyed_deletes.py``).

Each test runs the same MERGEs on two tables: one where the position deletes are found by key, one
where ``rowops.rewrite.by-key.enabled=false`` keeps the join. Both must report the same row counts
and hold the same rows, read back through every reader (rowops, DuckDB, PyIceberg, Iceberg Java).
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

import rowops
from rowops.exec.changes.summary import summarize
from rowops.exec.reading import position_keys
from rowops.exec.writing.context import single_file_target
from rowops.meta.v3 import is_deletion_vector
from rowops.plan import strategy
from rowops.run import row_level as operations
from tests.readers import assert_readers_agree
from tests.spark.tables import COLUMNS, Row, frame, make_row

OFF = {"rowops.rewrite.by-key.enabled": "false"}


@pytest.fixture(autouse=True)
def _reads_by_row_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every read of these tests' small tables applies position deletes by row key
    (``exec/reading/position_keys.py``; by default only from 65 files under deletes), checked against
    the independent readers; ``test_reads.py`` covers the join by name."""
    monkeypatch.setattr(position_keys, "MIN_FILES", 1)


def _twins(lake, rows: list[Row], version: int = 2):  # type: ignore[no-untyped-def]
    """The table found by key and its twin that joins, with the same rows."""
    made = []
    for name in ("db.by_key", "db.joined"):
        table = lake.create_table(
            name,
            frame(lake.spark, rows),
            partition_by=["bucket(4, k)"],
            identifier=["k"],
            format_version=version,
        )
        made.append(table)
    made[1].set_properties(**OFF)
    return made


def _merge_both(
    tables, rows: Iterable[Row], strategy: str = "position-delete"
) -> list[rowops.OperationResult]:  # type: ignore[no-untyped-def]
    source = list(rows)
    return [rowops.merge(frame(t.lake.spark, source), t, on=["k"], strategy=strategy) for t in tables]


def _counts(result: rowops.OperationResult) -> tuple[int | None, ...]:
    return (result.rows_inserted, result.rows_updated, result.rows_deleted)


def _one_delete_file_per_data_file(table) -> None:  # type: ignore[no-untyped-def]
    files = table.files()
    targets = [single_file_target(d) for d in files.deletes]
    assert None not in targets and len(targets) == len(set(targets))
    assert set(targets) <= {f.path for f in files.data}


@pytest.mark.parametrize(
    "version", [2, pytest.param(3, marks=pytest.mark.slow)], ids=["v2", "v3"]
)  # v3 in make test: test_row_lineage.py::test_upsert_by_key_keeps_stored_and_inherited_row_ids
def test_position_deletes_of_an_upsert_are_found_by_key(lake, java, monkeypatch, version) -> None:  # type: ignore[no-untyped-def]
    """Three upserts over overlapping keys: the by-key table never runs the join's summary pass, says
    so in its plan, and carries each file's earlier positions into its one new delete file (a
    deletion vector on v3). Counts and rows equal the join's, through every reader."""
    expected = {k: make_row(k) for k in range(300)}
    by_key, joined = _twins(lake, list(expected.values()), version)
    summaries: list[int] = []
    monkeypatch.setattr(operations, "summarize", lambda *a, **k: summaries.append(1) or summarize(*a, **k))
    batches = [
        [make_row(k, 1) for k in (*range(0, 300, 5), 1000)],
        [make_row(k, 2) for k in sorted({*range(0, 300, 10), *range(1, 300, 7), 1000, 1001})],
        [make_row(k, 3) for k in range(0, 300) if k % 4 == 1],
    ]
    for batch in batches:
        summaries.clear()
        ours, theirs = _merge_both([by_key, joined], batch)
        assert summaries == [1], "the by-key MERGE ran no summary pass, the joined one did"
        assert "positions found by key, no join" in ours.explain
        assert "found by key" not in theirs.explain
        assert _counts(ours) == _counts(theirs)
        assert ours.strategy == theirs.strategy == "position-delete"
        expected.update({r[0]: r for r in batch})
        _one_delete_file_per_data_file(by_key)
    for table in (by_key, joined):
        assert_readers_agree(table, expected.values(), COLUMNS, java)


def test_a_file_whose_every_row_is_updated_is_removed(lake) -> None:  # type: ignore[no-untyped-def]
    """Position deletes that would leave a data file without live rows remove the file instead, as
    the join's path does; a later upsert of those keys finds them in the new files."""
    expected = {k: make_row(k) for k in range(40)}
    by_key, joined = _twins(lake, list(expected.values()))
    before = {f.path for f in by_key.files().data}
    batch = [make_row(k, 1) for k in range(40)]
    ours, theirs = _merge_both([by_key, joined], batch)
    assert _counts(ours) == _counts(theirs) == (0, 40, 0)
    assert not before & {f.path for f in by_key.files().data} and not by_key.files().deletes
    again = [make_row(k, 2) for k in range(0, 40, 3)]
    ours, theirs = _merge_both([by_key, joined], again)
    assert _counts(ours) == _counts(theirs) == (0, len(again), 0)
    expected.update({r[0]: r for r in (*batch, *again)})
    for table in (by_key, joined):
        assert_readers_agree(table, expected.values(), COLUMNS, None)


@pytest.mark.parametrize("first", ["equality-delete", "copy-on-write"])
def test_found_by_key_after_other_encodings(lake, java, first) -> None:  # type: ignore[no-untyped-def]
    """After an equality-delete upsert the tasks apply its deletes themselves: a key it replaced is
    matched in its new file only (one update, not two). After a copy-on-write the rewritten files are
    matched as any other."""
    expected = {k: make_row(k) for k in range(200)}
    by_key, joined = _twins(lake, list(expected.values()))
    earlier = [make_row(k, 1) for k in (*range(0, 200, 3), 500)]
    _merge_both([by_key, joined], earlier, strategy=first)
    batch = [make_row(k, 2) for k in (*range(0, 200, 2), 500, 501)]
    ours, theirs = _merge_both([by_key, joined], batch)
    assert "positions found by key" in ours.explain
    assert _counts(ours) == _counts(theirs) == (1, len(batch) - 1, 0)
    expected.update({r[0]: r for r in (*earlier, *batch)})
    for table in (by_key, joined):
        assert_readers_agree(table, expected.values(), COLUMNS, java)


def test_not_by_key_without_the_identifier_or_with_conditions(lake) -> None:  # type: ignore[no-untyped-def]
    """``on`` columns that are not the table's identifier (keys could repeat in the target), and a
    MERGE that is not a blind upsert, keep the join."""
    rows = [make_row(k) for k in range(60)]
    table = lake.create_table(
        "db.t", frame(lake.spark, rows), partition_by=["bucket(4, k)"], identifier=["k", "g"]
    )
    result = rowops.merge(frame(lake.spark, [make_row(3, 1)]), table, on=["k"], strategy="position-delete")
    assert "found by key" not in result.explain and result.rows_updated == 1
    keyed = lake.create_table(
        "db.u", frame(lake.spark, rows), partition_by=["bucket(4, k)"], identifier=["k"]
    )
    source = frame(lake.spark, [make_row(3, 1), make_row(4, 1)])
    conditional = (
        keyed.merge(source, on=["k"]).when_matched("s.k = 3").update_all().execute("position-delete")
    )
    assert "found by key" not in conditional.explain and conditional.rows_updated == 1


def test_auto_on_v3_writes_deletion_vectors_by_key_where_they_are_cheapest(lake, java, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Where ``auto`` prices deletion vectors found by key cheapest (here made so: the cost model's
    numbers are its doctests'), a v3 upsert writes them by key, read back alike by every reader; a
    key delete (not a blind upsert) is never run that way."""
    monkeypatch.setattr(strategy, "keyed_position_cost", lambda *_: 0.0)
    expected = {k: make_row(k) for k in range(120)}
    table = lake.create_table(
        "db.t", frame(lake.spark, list(expected.values())), partition_by=["bucket(4, k)"],
        identifier=["k"], format_version=3,
    )  # fmt: skip
    batch = [make_row(k, 1) for k in (*range(0, 120, 7), 500)]
    result = rowops.merge(frame(lake.spark, batch), table, on=["k"])
    assert result.strategy == "position-delete" and "positions found by key, no join" in result.explain
    assert _counts(result) == (1, len(batch) - 1, 0)
    assert table.files().deletes and all(is_deletion_vector(d.data_file) for d in table.files().deletes)
    expected.update({r[0]: r for r in batch})
    assert_readers_agree(table, expected.values(), COLUMNS, java)
    removed = table.merge(frame(lake.spark, [make_row(3)]), on=["k"]).when_matched().delete().execute()
    assert "positions found by key" not in removed.explain
    assert sorted(r["k"] for r in table.to_df().collect()) == sorted(set(expected) - {3})
