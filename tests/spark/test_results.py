"""What results, snapshot summaries, the lake history and health reports say an operation did.

Issue 43 items 2-4: counts that say what is known (``None`` only where the encoding cannot know it),
one strategy for a commit in its result and its snapshot, and debt figures believable on tiny tables.
"""

from __future__ import annotations

import pytest
from pyiceberg.table import StaticTable
from pyspark.sql import functions as F

import rowops
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


def _readme_merge(t, spark, strategy: str):  # type: ignore[no-untyped-def]
    """The README's MERGE builder example, on the tiny table."""
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
