"""UPDATE and DELETE prune files by their predicate (partition values, column bounds), and a DELETE
that matches whole files or partitions is committed from metadata alone (``plan/predicates.py``,
``plan/metadata_delete.py``). Results are checked through every reader."""

from __future__ import annotations

import pytest

import rowops
from rowops.errors import UnsupportedStrategyError
from tests.readers import assert_readers_agree
from tests.spark.spark_metrics import stages_run
from tests.spark.tables import COLUMNS, frame, make_row

BATCHES = [range(0, 20), range(20, 40), range(40, 60)]  # one append each: disjoint key ranges


def build(lake, partition_by=()):  # type: ignore[no-untyped-def]
    """A table of three appends (keys 0-19, 20-39, 40-59), partitioned by ``partition_by``."""
    rows = [make_row(k) for k in BATCHES[0]]
    first = frame(lake.spark, rows).coalesce(1)  # one file per append (per partition)
    table = lake.create_table("db.t", first, partition_by=list(partition_by), identifier=["k"])
    for keys in BATCHES[1:]:
        batch = [make_row(k) for k in keys]
        table.append(frame(lake.spark, batch).coalesce(1))
        rows += batch
    return table, rows


def _unsupported(strategy: str, action) -> bool:  # type: ignore[no-untyped-def]
    """UPDATE/DELETE cannot be equality deletes: the request is still refused as before."""
    if strategy != "equality-delete":
        return False
    with pytest.raises(UnsupportedStrategyError):
        action()
    return True


def test_delete_scans_only_files_whose_bounds_match(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    table, rows = build(lake)
    where = "k >= 25 AND k < 31 AND n = 0"
    if _unsupported(strategy, lambda: rowops.delete(table, where=where, strategy=strategy)):
        return
    plan = rowops.explain(None, table, where=where, strategy=strategy)
    assert "files: 3 live, 1 scanned, 2 pruned" in plan, plan[:400]
    result = rowops.delete(table, where=where, strategy=strategy)
    assert (result.files_scanned, result.files_pruned, result.rows_deleted) == (1, 2, 6)
    assert_readers_agree(table, [r for r in rows if not 25 <= r[0] < 31], COLUMNS, java)


def test_update_with_partition_predicate_scans_its_partition(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    table, rows = build(lake, partition_by=("g",))
    live = len(table.files().data)
    where = "g = 1 AND `K` <> 7"  # names resolve ignoring case, as Spark does by default
    update = {"n": "n + 100"}
    if _unsupported(strategy, lambda: rowops.update(table, set=update, where=where, strategy=strategy)):
        return
    result = rowops.update(table, set=update, where=where, strategy=strategy)
    in_g1 = [f for f in table.files(snapshot_id=_parent(table)).data if f.partition == (1,)]
    assert result.files_scanned == len(in_g1) == 3 and result.files_pruned == live - 3
    expected = [(*r[:-1], r[-1] + 100) if r[1] == 1 and r[0] != 7 else r for r in rows]
    assert result.rows_updated == sum(1 for r in rows if r[1] == 1 and r[0] != 7)
    assert_readers_agree(table, expected, COLUMNS, java)


def _parent(table) -> int:  # type: ignore[no-untyped-def]
    return int(table.snapshots()[-2]["snapshot_id"])


def test_delete_of_whole_partition_runs_no_spark_job(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    table, rows = build(lake, partition_by=("g",))
    # a position delete in partition g=2 first: the metadata-only delete must count only live rows
    rowops.delete(table, where="k = 5", strategy="position-delete")
    rows = [r for r in rows if r[0] != 5]
    if _unsupported(strategy, lambda: rowops.delete(table, where="g = 2", strategy=strategy)):
        return
    assert "strategy: metadata-only" in rowops.explain(None, table, where="g = 2", strategy=strategy)
    before = stages_run(lake.spark)
    result = rowops.delete(table, where="g = 2", strategy=strategy)
    assert stages_run(lake.spark) == before  # no Spark job at all
    assert result.strategy == "metadata-only"
    assert result.rows_deleted == sum(1 for r in rows if r[1] == 2)
    assert (result.data_files_removed, result.delete_files_removed, result.files_scanned) == (3, 1, 0)
    assert_readers_agree(table, [r for r in rows if r[1] != 2], COLUMNS, java)


def test_delete_of_whole_files_by_column_bounds(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    table, rows = build(lake)
    where = "k < 40 AND `n` >= 0"  # n has no NULLs: every row of the first two files
    if _unsupported(strategy, lambda: rowops.delete(table, where=where, strategy=strategy)):
        return
    before = stages_run(lake.spark)
    result = rowops.delete(table, where=where, strategy=strategy)
    assert stages_run(lake.spark) == before
    assert (result.strategy, result.rows_deleted, result.data_files_removed) == ("metadata-only", 40, 2)
    assert_readers_agree(table, [r for r in rows if r[0] >= 40], COLUMNS, java)


@pytest.mark.parametrize(
    "where, matches",
    [
        # s is NULL for k % 11 == 0 (in every file): those rows do not match "<>", nor ">="
        ("s <> 'none' AND k < 40", lambda r: r[2] is not None and r[0] < 40),
        ("s >= '' AND k >= 40", lambda r: r[2] is not None and r[0] >= 40),
        ("s IS NULL", lambda r: r[2] is None),
        ("k <=> 3 AND s IS NOT NULL", lambda r: r[0] == 3),
    ],
)
def test_nulls_never_match_a_comparison(lake, strategy, java, where, matches) -> None:  # type: ignore[no-untyped-def]
    """Files whose bounds match but that hold a NULL are not removed whole: the NULL rows stay."""
    table, rows = build(lake)
    if _unsupported(strategy, lambda: rowops.delete(table, where=where, strategy=strategy)):
        return
    result = rowops.delete(table, where=where, strategy=strategy)
    assert result.strategy != "metadata-only"
    assert result.rows_deleted == sum(1 for r in rows if matches(r))
    assert_readers_agree(table, [r for r in rows if not matches(r)], COLUMNS, java)


def test_predicates_that_cannot_be_translated_prune_nothing(lake) -> None:  # type: ignore[no-untyped-def]
    table, rows = build(lake)
    # an OR at the top, a function, a double column: no pruning, and no metadata-only delete
    for where in ("k < 5 OR k > 55", "abs(k) < 5", "x < 3.0"):
        assert "3 live, 3 scanned" in rowops.explain(None, table, where=where, strategy="position-delete")
    result = rowops.delete(table, where="k < 20 AND k % 2 = 0", strategy="copy-on-write")
    assert (result.strategy, result.files_scanned, result.rows_deleted) == ("copy-on-write", 1, 10)
    assert_readers_agree(table, [r for r in rows if not (r[0] < 20 and r[0] % 2 == 0)], COLUMNS, java=None)
