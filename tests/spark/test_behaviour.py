"""One behaviour suite for MERGE, UPDATE and DELETE, run under all three write strategies.

Expected rows come from a plain-Python oracle; every final table is read back by rowops, DuckDB,
PyIceberg (where it can apply the deletes) and Iceberg's Java reader.
"""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

import rowops
from rowops.errors import UnsupportedStrategyError
from tests.readers import assert_readers_agree
from tests.spark.tables import COLUMNS, SCHEMA, Layout, Oracle, fingerprint, frame, make_row

N = 60


def create(lake, layout: Layout, rows=None):  # type: ignore[no-untyped-def]
    rows = rows if rows is not None else [make_row(k) for k in range(N)]
    table = lake.create_table(
        "db.t", frame(lake.spark, rows), partition_by=list(layout.partition_by), identifier=list(layout.keys)
    )
    return table, Oracle(layout, rows)


def test_upsert(lake, layout, strategy, java) -> None:  # type: ignore[no-untyped-def]
    table, oracle = create(lake, layout)
    changes = [make_row(k, 1) for k in range(0, N, 4)] + [make_row(k, 1) for k in range(N, N + 7)]
    result = rowops.merge(frame(lake.spark, changes), table, on=list(layout.keys), strategy=strategy)
    oracle.upsert(changes)
    assert result.strategy == strategy
    if strategy == "equality-delete":
        assert (result.rows_updated, result.rows_inserted) == (None, None)
    else:
        assert (result.rows_updated, result.rows_inserted, result.rows_deleted) == (N // 4, 7, 0)
    assert result.snapshot_id == table.current_snapshot_id
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_delete_by_key(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    layout = Layout("bucket", ("bucket(4, k)",), ("k",))
    table, oracle = create(lake, layout)
    gone = [make_row(k) for k in (1, 2, 3, 30, 59, 1000)]
    result = rowops.merge(
        frame(lake.spark, gone),
        table,
        on=["k"],
        when_matched="delete",
        when_not_matched=None,
        strategy=strategy,
    )
    oracle.delete_keys(gone)
    if strategy != "equality-delete":
        assert result.rows_deleted == 5
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_conditional_merge_builder(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    layout = Layout("bucket", ("bucket(4, k)",), ("k",))
    table, oracle = create(lake, layout)
    schema_with_op = T.StructType([*SCHEMA.fields, T.StructField("op", T.StringType())])
    rows = [(*make_row(k, 2), "D") for k in (5, 6)] + [(*make_row(k, 2), "U") for k in (7, 8)]
    rows += [(*make_row(k, 2), "I") for k in (100, 101)]
    source = lake.spark.createDataFrame(rows, schema_with_op)
    builder = (
        table.merge(source, on="t.k = s.k")
        .when_matched("s.op = 'D'")
        .delete()
        .when_matched()
        .update({"n": "s.n + t.n", "s": "concat(t.s, '+')"})
        .when_not_matched()
        .insert_all()
        .when_not_matched_by_source("t.k >= 50")
        .delete()
    )
    if strategy == "equality-delete":
        before = fingerprint(lake.root)
        with pytest.raises(UnsupportedStrategyError):
            builder.execute(strategy=strategy)
        assert fingerprint(lake.root) == before
        return
    result = builder.execute(strategy=strategy)
    assert (result.rows_deleted, result.rows_updated, result.rows_inserted) == (2 + 10, 2, 2)
    oracle.delete_keys([make_row(k) for k in (5, 6, *range(50, 60))])
    for k in (7, 8):
        old = make_row(k)
        new = list(old)
        new[COLUMNS.index("n")] = 2 + old[COLUMNS.index("n")]
        new[COLUMNS.index("s")] = None if old[2] is None else old[2] + "+"
        oracle.upsert([tuple(new)])
    oracle.upsert([make_row(k, 2) for k in (100, 101)])
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_update_where(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    layout = Layout("identity", ("g",), ("g", "k"))
    table, oracle = create(lake, layout)
    if strategy == "equality-delete":
        with pytest.raises(UnsupportedStrategyError):
            rowops.update(table, set={"n": "n + 1"}, where="k % 5 = 0", strategy=strategy)
        return
    result = rowops.update(
        table, set={"n": "n + 10", "x": "x * 2"}, where="k % 5 = 0 AND s IS NOT NULL", strategy=strategy
    )
    expected = [r for r in oracle.values() if r[0] % 5 == 0 and r[2] is not None]
    assert result.rows_updated == len(expected)
    for r in expected:
        new = list(r)
        new[COLUMNS.index("n")] = r[COLUMNS.index("n")] + 10
        new[COLUMNS.index("x")] = None if r[6] is None else r[6] * 2
        oracle.upsert([tuple(new)])
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_delete_where_with_nulls(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    layout = Layout("unpartitioned", (), ("k",))
    table, oracle = create(lake, layout)
    if strategy == "equality-delete":
        with pytest.raises(UnsupportedStrategyError):
            rowops.delete(table, where="s IS NULL", strategy=strategy)
        return
    # NULL in a predicate is not true: rows with x NULL are kept by "x > 10"
    result = rowops.delete(table, where="x > 10 OR s IS NULL", strategy=strategy)
    keep = [r for r in oracle.values() if not ((r[6] is not None and r[6] > 10) or r[2] is None)]
    assert result.rows_deleted == N - len(keep)
    assert_readers_agree(table, keep, COLUMNS, java)


def test_mixed_strategies_in_sequence(lake, layout, java) -> None:  # type: ignore[no-untyped-def]
    """Equality deletes on top of position deletes and back, and copy-on-write over both."""
    table, oracle = create(lake, layout)
    first = table.current_snapshot_id
    plan = [
        ("position-delete", range(0, 20, 3), 1),
        ("equality-delete", range(0, 30, 2), 2),
        ("position-delete", range(1, 40, 5), 3),
        ("equality-delete", range(0, 60, 6), 4),
        ("copy-on-write", range(0, 70, 7), 5),
        ("equality-delete", range(3, 25, 4), 6),
    ]
    for strategy, keys, version in plan:
        changes = [make_row(k, version) for k in keys]
        rowops.merge(frame(lake.spark, changes), table, on=list(layout.keys), strategy=strategy)
        oracle.upsert(changes)
    rowops.delete(table, where="k % 10 = 9", strategy="position-delete")
    oracle.rows = {key: r for key, r in oracle.rows.items() if r[0] % 10 != 9}
    assert_readers_agree(table, oracle.values(), COLUMNS, java)
    # time travel: the first snapshot is still readable as it was
    assert_readers_agree(table, [make_row(k) for k in range(N)], COLUMNS, java=None, snapshot_id=first)
