"""The rebase rule (issue 42 item 1): a write that loses the race to a rollback must not rebase.

A write planned on one table state and committed after ``table.rollback_to`` or ``lake.rollback_to``
landed would re-apply what the rollback undid (its files were computed on rows the rollback brought
back). Its base is no longer an ancestor of the head: the commit is a retry-safe conflict, nothing
changes, and running the operation again applies it on the rolled-back state. Blind writes (appends,
equality-delete upserts) read nothing, so rebasing them is the serial order "rollback, then write".

Each write is planned with ``operations.plan`` and executed (written and committed) after the rollback,
the same path as a writer whose put-if-absent lost to the rollback's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pyspark.sql import DataFrame

import rowops
from rowops.errors import CommitConflictError, ConflictKind
from rowops.exec.reading.source import release
from rowops.request.operations import DeleteSpec, OperationSpec, UpdateSpec
from rowops.run import maintenance as maintenance_ops
from rowops.run import row_level as operations
from tests.readers import assert_readers_agree
from tests.spark.tables import fingerprint

COLUMNS = ["k", "v"]
START = [(k, 0) for k in range(1, 5)]


def _create(lake: Any, format_version: int = 2) -> Any:
    df = lake.spark.createDataFrame(START, "k long, v int").coalesce(1)
    return lake.create_table("db.t", df, identifier=["k"], format_version=format_version)


def _cold(lake: Any) -> Any:
    """The table through a fresh handle (no metadata cache of the writing handle)."""
    return rowops.Lakehouse(lake.root, spark=lake.spark).table("db.t")


def _roll_back_table(lake: Any, snapshot_id: int, version: int) -> None:
    _cold(lake).rollback_to(snapshot_id)  # another handle, as another writer would


def _roll_back_lake(lake: Any, snapshot_id: int, version: int) -> None:
    rowops.Lakehouse(lake.root, spark=lake.spark).rollback_to(version)


ROLLBACKS = {"table-rollback": _roll_back_table, "lake-rollback": _roll_back_lake}

# (strategy, operation, source rows, rows once run on the rolled-back state)
WRITES: dict[str, tuple[str, Callable[[Any], OperationSpec], list[tuple[int, int]] | None, list]] = {
    "position-delete": ("position-delete", lambda t: DeleteSpec("k = 3"), None, [(1, 0), (2, 0), (4, 0)]),
    "copy-on-write": (
        "copy-on-write",
        lambda t: UpdateSpec((("v", "99"),), "k = 3"),
        None,
        [(1, 0), (2, 0), (3, 99), (4, 0)],
    ),
    "hybrid": (
        "hybrid",
        lambda t: UpdateSpec((("v", "99"),), "k = 3"),
        None,
        [(1, 0), (2, 0), (3, 99), (4, 0)],
    ),
    "position-delete-merge": (
        "position-delete",
        lambda t: t.merge(t.source, on=["k"]).when_matched().update_all().spec(),
        [(3, 99)],
        [(1, 0), (2, 0), (3, 99), (4, 0)],
    ),
}


class _Target:
    """A table handle and the MERGE source a spec builder may need."""

    def __init__(self, table: Any, source: DataFrame | None) -> None:
        self.table, self.source = table, source

    def merge(self, source: DataFrame, on: list[str]) -> Any:
        return self.table.merge(source, on=on)


def _plan(table: Any, strategy: str, make_spec: Callable[[Any], OperationSpec], rows: Any) -> Any:
    source = table.lake.spark.createDataFrame(rows, "k long, v int") if rows is not None else None
    spec = make_spec(_Target(table, source))
    return operations.plan(table, spec, source, strategy)


def _execute(planned: Any) -> Any:
    try:
        return operations.execute(planned)
    finally:
        release(planned.source)


def _deleted_k2(lake: Any) -> tuple[Any, int, int]:
    """k = 1..4 in one file, then DELETE k = 2 as a position delete; returns the table, the first
    snapshot and the lake version before the delete."""
    table = _create(lake)
    first, version = table.current_snapshot_id, lake.version
    table.delete("k = 2", strategy="position-delete")
    assert len(table.files().position_deletes) == 1
    return table, first, version


def _assert_rows(lake: Any, expected: list[tuple[int, int]], java: Any) -> None:
    assert_readers_agree(_cold(lake), expected, COLUMNS, java)


def _assert_rolled_back_conflict(caught: pytest.ExceptionInfo[CommitConflictError]) -> None:
    err = caught.value
    assert err.kind == ConflictKind.BASE_NOT_ANCESTOR and err.retry_safe, err
    assert "Help:" in str(err) and err.table == "db.t"


# `make test`: position deletes after either rollback, copy-on-write after a table rollback; the
# other combinations in `make test-slow` (each case costs several Spark jobs and four readers)
FAST = {
    ("position-delete", "table-rollback"),
    ("position-delete", "lake-rollback"),
    ("copy-on-write", "table-rollback"),
}
CASES = [
    pytest.param(
        write,
        rollback,
        id=f"{write}-{rollback}",
        marks=[] if (write, rollback) in FAST else [pytest.mark.slow],
    )
    for write in WRITES
    for rollback in ROLLBACKS
]
SLOW_LAKE = [pytest.param("table-rollback"), pytest.param("lake-rollback", marks=pytest.mark.slow)]


@pytest.mark.parametrize(("write", "rollback"), CASES)
def test_write_planned_before_a_rollback_conflicts(lake, java, write: str, rollback: str) -> None:  # type: ignore[no-untyped-def]
    """Original code: the write rebased and k = 2 was deleted again ([(1,0),(4,0)]; copy-on-write
    UPDATE: [(1,0),(3,99),(4,0)]), a state no serial order of the rollback and the write gives."""
    strategy, make_spec, rows, after_retry = WRITES[write]
    table, first, version = _deleted_k2(lake)
    planned = _plan(table, strategy, make_spec, rows)
    ROLLBACKS[rollback](lake, first, version)
    before = fingerprint(lake.root)
    with pytest.raises(CommitConflictError) as caught:
        _execute(planned)
    _assert_rolled_back_conflict(caught)
    assert fingerprint(lake.root) == before  # nothing of the losing write is left
    _assert_rows(lake, START, java)
    _execute(_plan(_cold(lake), strategy, make_spec, rows))  # run again: on the rolled-back state
    _assert_rows(lake, after_retry, java)


@pytest.mark.parametrize("rollback", SLOW_LAKE)
def test_blind_upsert_planned_before_a_rollback_rebases(lake, java, rollback: str) -> None:  # type: ignore[no-untyped-def]
    """An equality-delete upsert read nothing: after the rollback it lands on the rolled-back state,
    the serial order "rollback, then upsert" (as Iceberg rebases a blind RowDelta)."""
    table, first, version = _deleted_k2(lake)
    source = lake.spark.createDataFrame([(3, 99)], "k long, v int")
    spec = table.merge(source, on=["k"]).when_matched().update_all().when_not_matched().insert_all().spec()
    planned = operations.plan(table, spec, source, "equality-delete")
    ROLLBACKS[rollback](lake, first, version)
    _execute(planned)
    _assert_rows(lake, [(1, 0), (2, 0), (3, 99), (4, 0)], java)


@pytest.mark.parametrize("rollback", SLOW_LAKE)
def test_compaction_planned_before_a_rollback_conflicts(lake, java, rollback: str) -> None:  # type: ignore[no-untyped-def]
    """Original code: the compaction (file rewritten without k = 2) rebased and k = 2 was lost."""
    table, first, version = _deleted_k2(lake)
    prepared = maintenance_ops.prepare_compact(table, None, None, None)
    assert prepared is not None
    ROLLBACKS[rollback](lake, first, version)
    before = fingerprint(lake.root)  # the compaction's files staged
    with pytest.raises(CommitConflictError) as caught:
        prepared.commit()
    _assert_rolled_back_conflict(caught)
    left = fingerprint(lake.root)
    assert left.items() <= before.items()  # nothing new, nothing changed
    assert not [p for p in left if "/compact-" in p]  # the staged files removed
    _assert_rows(lake, START, java)
    assert not _cold(lake).compact().committed  # nothing to compact on the rolled-back state
    _assert_rows(lake, START, java)


def test_transaction_begun_before_a_rollback_conflicts(lake, java) -> None:  # type: ignore[no-untyped-def]
    """A transaction pins its version; its DELETE replays on the rolled-back table at commit."""
    _, first, version = _deleted_k2(lake)
    tx = lake.begin()
    tx.delete("db.t", where="k = 3", strategy="position-delete")
    _roll_back_table(lake, first, version)
    before = fingerprint(lake.root)
    with pytest.raises(CommitConflictError) as caught:
        tx.commit()
    assert caught.value.kind == ConflictKind.BASE_NOT_ANCESTOR and caught.value.retry_safe
    assert fingerprint(lake.root).items() <= before.items()  # nothing new; staged files removed
    _assert_rows(lake, START, java)
    with lake.transaction() as again:  # run again: on the rolled-back state
        again.delete("db.t", where="k = 3", strategy="position-delete")
    _assert_rows(lake, [(1, 0), (2, 0), (4, 0)], java)


def test_deletes_replaced_on_a_descendant_rebase(lake, java) -> None:  # type: ignore[no-untyped-def]
    """The base stays an ancestor and its delete file on the touched data file was replaced by another
    writer's merged one (the same positions and one more): not a rollback, so the write rebases (row
    level: disjoint positions) and both deletes hold."""
    table, _, _ = _deleted_k2(lake)
    table.set_properties(**{"rowops.isolation-level": "snapshot"})
    planned = _plan(table, "position-delete", lambda t: DeleteSpec("k = 3"), None)
    _cold(lake).delete("k = 1", strategy="position-delete")  # removes the base's delete file
    _execute(planned)
    _assert_rows(lake, [(4, 0)], java)
