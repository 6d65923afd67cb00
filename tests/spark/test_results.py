"""What results, snapshot summaries, the lake history and health reports say an operation did.

Issue 43 items 2-4: counts that say what is known (``None`` only where the encoding cannot know it),
one strategy for a commit in its result and its snapshot, and debt figures believable on tiny tables.
"""

from __future__ import annotations

import pytest
from pyiceberg.table import StaticTable
from pyspark.sql import functions as F

import rowops
from rowops.cli.text import commit_line, snapshot_line
from tests.spark.tables import frame, make_row

ICEBERG_COUNTS = (
    "added-records",
    "deleted-records",
    "added-position-deletes",
    "added-equality-deletes",
    "total-records",
    "total-position-deletes",
    "total-equality-deletes",
)


def _summaries(lake, spark, name: str = "db.t") -> tuple[dict[str, str], dict[str, str]]:  # type: ignore[no-untyped-def]
    """The current snapshot's summary read cold by rowops and by PyIceberg (an independent reader)."""
    cold = rowops.Lakehouse(lake.root, spark=spark).table(name)
    ours = dict(cold.snapshots()[-1]["summary"])
    snapshot = StaticTable.from_metadata(cold.metadata_location).current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    theirs = {"operation": snapshot.summary.operation.value, **snapshot.summary.additional_properties}
    return ours, theirs


def _tiny(lake, spark, rows: int = 6):  # type: ignore[no-untyped-def]
    return lake.create_table(
        "db.t", frame(spark, [make_row(k) for k in range(rows)]).coalesce(1), identifier=["k"]
    )


def test_blind_upsert_says_what_it_wrote(lake, spark) -> None:  # type: ignore[no-untyped-def]
    t = _tiny(lake, spark)
    changes = [make_row(k, 1) for k in (1, 2, 10)]  # two keys exist, one is new: the encoding cannot tell
    result = rowops.merge(frame(spark, changes), t, on=["k"], strategy="equality-delete")
    assert (result.rows_inserted, result.rows_updated, result.rows_deleted) == (None, None, 0)
    assert (result.rows_written, result.keys_deleted) == (3, 3)
    ours, theirs = _summaries(lake, spark)
    expected = {  # a change count of 0 is not written (Iceberg Java's SnapshotSummary)
        "added-records": "3",
        "deleted-records": None,
        "added-position-deletes": None,
        "added-equality-deletes": "3",
        "total-records": "9",
        "total-position-deletes": "0",
        "total-equality-deletes": "3",
    }
    assert {k: ours.get(k) for k in ICEBERG_COUNTS} == expected
    assert {k: theirs.get(k) for k in ICEBERG_COUNTS} == expected
    entry = rowops.Lakehouse(lake.root, spark=spark).history()[-1]
    assert (entry.rows_inserted, entry.rows_updated, entry.rows_deleted) == (None, None, 0)
    assert (entry.records_added, entry.records_removed, entry.equality_deletes_added) == (3, 0, 3)
    line = commit_line(entry)
    assert "rows +? ~? -0" in line and "records +3 -0" in line and "equality deletes +3" in line


def test_blind_delete_by_key_says_what_it_wrote(lake, spark) -> None:  # type: ignore[no-untyped-def]
    t = _tiny(lake, spark)
    keys = frame(spark, [make_row(k, 1) for k in (1, 20)])  # key 20 does not exist: deleted rows unknown
    result = rowops.merge(
        keys, t, on=["k"], when_matched="delete", when_not_matched=None, strategy="equality-delete"
    )
    assert (result.rows_inserted, result.rows_updated, result.rows_deleted) == (0, 0, None)
    assert (result.rows_written, result.keys_deleted) == (0, 2)
    entry = rowops.Lakehouse(lake.root, spark=spark).history()[-1]
    assert (entry.rows_inserted, entry.rows_updated, entry.rows_deleted) == (0, 0, None)
    assert "rows +0 ~0 -?" in commit_line(entry)


def test_history_counts_creates_and_appends(lake, spark) -> None:  # type: ignore[no-untyped-def]
    data = spark.range(1000).select("id", (F.col("id") % 7).alias("v"))
    t = lake.create_table("db.t", data, identifier=["id"])
    t.append(spark.range(1000, 1010).select("id", F.lit(1).cast("long").alias("v")))
    with lake.transaction() as tx:
        tx.create_table("db.u", spark.range(5).select("id"))
    created, appended, in_tx = rowops.Lakehouse(lake.root, spark=spark).history()[-3:]
    assert (created.rows_inserted, created.rows_updated, created.rows_deleted) == (1000, 0, 0)
    assert created.records_added == 1000 and "rows +1000 ~0 -0" in commit_line(created)
    assert (appended.rows_inserted, appended.records_added) == (10, 10)
    assert (in_tx.rows_inserted, in_tx.records_added) == (5, 5)
    ours, theirs = _summaries(lake, spark)
    assert ours["added-records"] == theirs["added-records"] == "10"
    assert ours["total-records"] == theirs["total-records"] == "1010"
    first = rowops.Lakehouse(lake.root, spark=spark).table("db.t").snapshots()[0]
    assert "added-records=1000" in snapshot_line(first)


def _readme_merge(t, spark, strategy: str):  # type: ignore[no-untyped-def]
    """The MERGE builder example of docs/guide/merge.md, on the tiny table."""
    source = frame(spark, [make_row(k, 1) for k in (0, 1, 2, 3, 4, 10, 11)])
    source = source.withColumn("op", F.when(F.col("k") % 2 == 0, "D").otherwise("U"))
    return (
        t.merge(source, on="t.k = s.k")
        .when_matched("s.op = 'D'")
        .delete()
        .when_matched()
        .update({"n": "s.n + t.n"})
        .when_not_matched()
        .insert({"k": "s.k", "g": "s.g", "s": "s.s", "n": "s.n"})
        .execute(strategy=strategy)
    )


@pytest.mark.parametrize(
    "strategy",
    [
        "auto",
        "hybrid",
        *(pytest.param(s, marks=pytest.mark.slow) for s in ("copy-on-write", "position-delete")),
    ],
)
def test_result_strategy_is_the_snapshot_strategy(lake, spark, strategy: str) -> None:  # type: ignore[no-untyped-def]
    t = _tiny(lake, spark)
    result = _readme_merge(t, spark, strategy)
    ours, theirs = _summaries(lake, spark)
    assert result.strategy == ours["rowops.strategy"] == theirs["rowops.strategy"]
    if strategy != "auto":
        assert result.strategy in (strategy, "copy-on-write", "position-delete")


def test_equality_delete_strategy_is_the_snapshot_strategy(lake, spark) -> None:  # type: ignore[no-untyped-def]
    t = _tiny(lake, spark)
    result = rowops.merge(frame(spark, [make_row(1, 1)]), t, on=["k"], strategy="equality-delete")
    ours, theirs = _summaries(lake, spark)
    assert result.strategy == ours["rowops.strategy"] == theirs["rowops.strategy"] == "equality-delete"


def test_health_of_a_tiny_table_is_believable(lake, spark) -> None:  # type: ignore[no-untyped-def]
    """A dozen files of a row or two: each read opens files it would not need after a compaction, a
    fixed cost of about 11 ms each, not a multiple of the table's few kilobytes."""
    t = lake.create_table(
        "db.t", frame(spark, [make_row(k) for k in range(24)]).repartition(12), identifier=["k"]
    )
    report = t.health()
    files = report.data_files
    assert files >= 8 and report.data_bytes < 100_000
    assert 0 < report.read_overhead_ratio < 1.0  # against a read's fixed cost, not 30 KB of data
    assert report.extra_file_opens == files and report.read_overhead_bytes > 0
    advice = " ".join(report.advice)
    assert f"{files} extra file opens" in advice and "ms each" in advice
    two = lake.create_table("db.two", frame(spark, [make_row(k) for k in range(2)]).repartition(2))
    assert two.health().advice == []  # two tiny files: their opens are not worth a rewrite
