"""One behaviour suite for MERGE, UPDATE and DELETE, run under all three write strategies.

Expected rows come from a plain-Python oracle; every final table is read back by rowops, DuckDB,
PyIceberg (where it can apply the deletes) and Iceberg's Java reader. Every test runs on a local
lake and on an S3 lake (moto on loopback, marker ``s3``).
"""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

import rowops
from rowops.errors import (
    NullValueError,
    SchemaMismatchError,
    SparkJobError,
    UnsupportedStrategyError,
    ValueOutOfRangeError,
)
from tests.conftest import make_lake
from tests.readers import assert_readers_agree
from tests.spark.tables import COLUMNS, LAYOUTS, SCHEMA, Layout, Oracle, fingerprint, frame, make_row
from tests.spark.test_errors import assert_unchanged

N = 60


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def lake(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """Every behaviour test runs on a local lake and on a lake on the S3 server."""
    return make_lake(request.param, request)


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
        .insert({c: f"s.{c}" for c in COLUMNS})  # the source's extra column op is not inserted
        .when_not_matched_by_source("t.k >= 50")
        .delete()
    )
    if strategy == "equality-delete":
        before = fingerprint(lake)
        with pytest.raises(UnsupportedStrategyError):
            builder.execute(strategy=strategy)
        assert fingerprint(lake) == before
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


# identity partitioning runs in `make test`; the other layouts in `make test-slow`
@pytest.mark.parametrize(
    "layout",
    [pytest.param(x, marks=() if x.name == "identity" else pytest.mark.slow) for x in LAYOUTS],
    ids=lambda x: x.name,
)
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


def _source_with(lake, rows, **columns):  # type: ignore[no-untyped-def]
    """Test rows with some columns replaced by SQL expressions (e.g. a wider type)."""
    df = frame(lake.spark, rows)
    for name, expression in columns.items():
        df = df.withColumn(name, F.expr(expression))
    return df


def test_assignment_of_string_to_number_is_rejected(lake, strategy) -> None:  # type: ignore[no-untyped-def]
    """Spark's ANSI store assignment: a string is never stored in a numeric column (no NULL written)."""
    table, _ = create(lake, Layout("bucket", ("bucket(4, k)",), ("k",)))
    source = frame(lake.spark, [make_row(1, 1), make_row(100, 1)])
    attempts = [
        lambda: rowops.update(table, set={"n": "'abc'"}, where="k = 1", strategy=strategy),
        lambda: table.merge(source, on=["k"]).when_matched().update({"n": "'abc'"}).execute(strategy),
        lambda: (
            table.merge(source, on="t.k = s.k")
            .when_not_matched()
            .insert({"k": "s.k", "amt": "s.s"})
            .execute(strategy)
        ),
    ]
    for attempt in attempts:
        message = assert_unchanged(lake, attempt, SchemaMismatchError, "string -> ", "Help:")
        assert "n = 'abc'" in message or "amt = s.s" in message


def test_narrower_decimal_is_accepted_and_overflow_fails(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    """A decimal(11,2) source column (``amt + 1``) goes into the decimal(10,2) column; a value that does
    not fit fails the whole operation at run time instead of becoming NULL."""
    layout = Layout("bucket", ("bucket(4, k)",), ("k",))
    table, oracle = create(lake, layout)
    changes = [make_row(k, 1) for k in (2, 3, 100)]
    source = _source_with(lake, changes, amt="amt + 1")
    assert source.schema["amt"].dataType == T.DecimalType(11, 2)
    rowops.merge(source, table, on=["k"], strategy=strategy)
    oracle.upsert([(*r[:3], r[3] + 1, *r[4:]) for r in changes])
    assert_readers_agree(table, oracle.values(), COLUMNS, java)
    overflow = _source_with(
        lake, [make_row(5, 2), make_row(6, 2)], amt="amt + CAST(123456789 AS DECIMAL(11, 2))"
    )
    assert_unchanged(
        lake,
        lambda: rowops.merge(overflow, table, on=["k"], strategy=strategy),
        ValueOutOfRangeError,
        "amt",
        "-> decimal(10,2)",
        "Help:",
    )
    if strategy != "equality-delete":
        assert_unchanged(
            lake,
            lambda: rowops.update(table, set={"g": "k * 10000000000"}, where="k = 7", strategy=strategy),
            ValueOutOfRangeError,
            "bigint -> int",
        )
        rowops.update(table, set={"g": "k * 2"}, where="k = 7", strategy=strategy)  # bigint that fits
        oracle.upsert([(7, 14, *oracle.rows[(7,)][2:])])
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


@pytest.mark.parametrize("on", [["k"], "t.k = s.k"])
def test_new_source_column_is_an_error_for_both_on_forms(lake, strategy, on) -> None:  # type: ignore[no-untyped-def]
    table, _ = create(lake, Layout("bucket", ("bucket(4, k)",), ("k",)))
    source = _source_with(lake, [make_row(1, 1), make_row(100, 1)], zz="k + 1")
    builder = table.merge(source, on=on).when_matched().update_all().when_not_matched().insert_all()
    error = assert_unchanged(lake, lambda: builder.execute(strategy), SchemaMismatchError, "zz", "Help:")
    assert "extra columns" in error


def test_not_null_columns_are_kept_and_enforced(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    """A NOT NULL field of the input schema stays required; NULL written to it fails, nothing changes."""
    schema = T.StructType([T.StructField(f.name, f.dataType, f.name != "n") for f in SCHEMA.fields])
    rows = [make_row(k) for k in range(N)]
    table = lake.create_table(
        "db.t", lake.spark.createDataFrame(rows, schema), partition_by=["bucket(4, k)"], identifier=["k"]
    )
    assert [f.name for f in table.schema.fields if f.required] == ["k", "n"]
    assert_readers_agree(table, rows, COLUMNS, java)
    nulls = frame(lake.spark, [make_row(3, 1), (200, *make_row(200, 1)[1:-1], None)])  # nullable source: fine
    assert_unchanged(
        lake,
        lambda: rowops.merge(nulls, table, on=["k"], strategy=strategy),
        NullValueError,
        "column n is declared NOT NULL",
        "Help:",
    )
    assert_unchanged(lake, lambda: table.append(nulls), NullValueError, "column n")
    if strategy != "equality-delete":
        assert_unchanged(
            lake,
            lambda: rowops.update(table, set={"n": "NULL"}, where="k = 4", strategy=strategy),
            NullValueError,
            "column n",
        )
    rowops.merge(frame(lake.spark, [make_row(3, 1)]), table, on=["k"], strategy=strategy)
    assert_readers_agree(table, [make_row(3, 1) if r[0] == 3 else r for r in rows], COLUMNS, java)


def test_spark_failure_inside_the_job_is_a_rowops_error(lake, strategy) -> None:  # type: ignore[no-untyped-def]
    """An error Spark raises while running the operation arrives as SparkJobError; nothing is written."""
    table, _ = create(lake, Layout("bucket", ("bucket(4, k)",), ("k",)))
    source = frame(lake.spark, [make_row(1, 1), make_row(100, 1)])
    boom = table.merge(source, on=["k"]).when_matched().update({"s": "raise_error('boom ' || s.k)"})
    if strategy == "equality-delete":
        assert_unchanged(lake, lambda: boom.execute(strategy), UnsupportedStrategyError)
        return
    message = assert_unchanged(lake, lambda: boom.execute(strategy), SparkJobError, "boom 1", "Help:")
    assert "Py4J" not in message.splitlines()[0]
