"""Bad input gets a clear error and changes nothing; a crash before commit leaves no trace."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

import rowops
from rowops import errors
from rowops.faults import InjectedFault
from tests.spark.tables import COLUMNS, SCHEMA, fingerprint, frame, make_row

N = 30


@pytest.fixture()
def table(lake):  # type: ignore[no-untyped-def]
    rows = [make_row(k) for k in range(N)]
    return lake.create_table("db.t", frame(lake.spark, rows), partition_by=["bucket(4, k)"], identifier=["k"])


def assert_unchanged(
    lake: Any, action: Callable[[], object], error: type[BaseException], *needles: str
) -> str:
    """Run ``action``; it must raise ``error`` mentioning ``needles`` and leave every lake file as it was."""
    before = fingerprint(lake)
    with pytest.raises(error) as caught:
        action()
    assert fingerprint(lake) == before, "the failed operation changed files in the lake"
    message = str(caught.value)
    for needle in needles:
        assert needle in message, f"{needle!r} not in error message: {message}"
    return message


@pytest.mark.parametrize("strategy", ["copy-on-write", "position-delete"])
def test_cardinality_violation_names_keys_and_changes_nothing(lake, table, strategy) -> None:  # type: ignore[no-untyped-def]
    source = frame(lake.spark, [make_row(5, 1), make_row(5, 2), make_row(7, 1), make_row(100, 1)])
    message = assert_unchanged(
        lake,
        lambda: rowops.merge(source, table, on=["k"], strategy=strategy),
        errors.CardinalityViolationError,
        "(5,)",
        "Help:",
    )
    assert "(7,)" not in message


def test_duplicate_source_keys_for_equality_deletes(lake, table) -> None:  # type: ignore[no-untyped-def]
    source = frame(lake.spark, [make_row(5, 1), make_row(5, 2), make_row(6, 1)])
    assert_unchanged(
        lake,
        lambda: rowops.merge(source, table, on=["k"], strategy="equality-delete"),
        errors.DuplicateKeyError,
        "(5,)",
    )


def test_null_keys_for_equality_deletes(lake, table) -> None:  # type: ignore[no-untyped-def]
    source = frame(lake.spark, [(None, *make_row(5, 1)[1:]), make_row(6, 1)])
    assert_unchanged(
        lake,
        lambda: rowops.merge(source, table, on=["k"], strategy="equality-delete"),
        errors.NullKeyError,
        "NULL",
    )


def test_null_keys_are_reported_before_duplicates(lake, table) -> None:  # type: ignore[no-untyped-def]
    """One aggregation finds both kinds of bad key; a NULL key is named first, whatever the order."""
    repeated = [make_row(k, v) for k in range(20) for v in (1, 2)]
    source = frame(lake.spark, [*repeated, (None, *make_row(50, 1)[1:])]).repartition(4)
    assert_unchanged(
        lake,
        lambda: rowops.merge(source, table, on=["k"], strategy="equality-delete"),
        errors.NullKeyError,
        "e.g. [(None,)]",
    )


def test_auto_does_not_blind_write_repeated_keys(lake, table) -> None:  # type: ignore[no-untyped-def]
    """``auto`` (read weight 0 favours equality deletes) whose pre-scan finds a repeated key scans instead:
    whether the repeat is an error depends on the target. Matching a target row, it is SQL's
    cardinality violation naming the key; matching none, both rows are inserted (as Iceberg does)."""
    table.set_properties(**{"rowops.read-weight": "0"})
    unique = frame(lake.spark, [make_row(5, 1), make_row(6, 1)])
    assert "strategy: equality-delete" in rowops.explain(unique, table, on=["k"])
    repeated = frame(lake.spark, [make_row(5, 1), make_row(5, 2), make_row(6, 1)])
    assert "strategy: equality-delete" not in rowops.explain(repeated, table, on=["k"])
    assert_unchanged(
        lake, lambda: rowops.merge(repeated, table, on=["k"]), errors.CardinalityViolationError, "(5,)"
    )
    new_twice = frame(lake.spark, [make_row(500, 1), make_row(500, 2)])
    result = rowops.merge(new_twice, table, on=["k"])
    assert result.rows_inserted == 2 and table.to_df().filter("k = 500").count() == 2


@pytest.mark.parametrize("strategy", ["copy-on-write", "position-delete"])
def test_null_into_identifier_column(lake, table, strategy) -> None:  # type: ignore[no-untyped-def]
    source = frame(lake.spark, [(None, *make_row(5, 1)[1:])])
    assert_unchanged(
        lake, lambda: rowops.merge(source, table, on=["k"], strategy=strategy), errors.NullKeyError, "k"
    )


def test_schema_mismatch_names_columns(lake, table) -> None:  # type: ignore[no-untyped-def]
    missing = frame(lake.spark, [make_row(1)[:-1]], T.StructType(SCHEMA.fields[:-1]))
    assert_unchanged(
        lake, lambda: rowops.merge(missing, table, on=["k"]), errors.SchemaMismatchError, "['n']"
    )
    extra_schema = T.StructType([*SCHEMA.fields, T.StructField("zz", T.IntegerType())])
    extra = lake.spark.createDataFrame([(*make_row(1), 1)], extra_schema)
    assert_unchanged(lake, lambda: rowops.merge(extra, table, on=["k"]), errors.SchemaMismatchError, "zz")
    wrong = lake.spark.createDataFrame([make_row(1)], SCHEMA).withColumn("k", F.col("k").cast("string"))
    assert_unchanged(
        lake, lambda: rowops.merge(wrong, table, on=["k"]), errors.SchemaMismatchError, "k (string"
    )
    assert_unchanged(lake, lambda: table.append(missing), errors.SchemaMismatchError, "missing columns")


@pytest.mark.parametrize(
    ("action", "error", "needle"),
    [
        (
            lambda t: rowops.update(t, set={"n": "n +"}, where="k = 1"),
            errors.InvalidExpressionError,
            "Invalid SQL",
        ),
        (lambda t: rowops.delete(t, where="no_such_col > 1"), errors.InvalidExpressionError, "no_such_col"),
        (  # it would parse in parentheses: "(k = 1) OR (k = 2)"; alone it does not
            lambda t: rowops.delete(t, where="k = 1) OR (k = 2"),
            errors.InvalidExpressionError,
            "k = 1) OR (k = 2",
        ),
        (lambda t: rowops.update(t, set={"nope": "1"}), errors.NoSuchColumnError, "nope"),
        (lambda t: rowops.delete(t, where="k = 1", strategy="fastest"), errors.InvalidInputError, "fastest"),
        (
            lambda t: rowops.delete(t, where="k = 1", strategy="equality-delete"),
            errors.UnsupportedStrategyError,
            "scan",
        ),
    ],
)
def test_invalid_requests(lake, table, action, error, needle) -> None:  # type: ignore[no-untyped-def]
    assert_unchanged(lake, lambda: action(table), error, needle)


def test_invalid_merge_condition(lake, table) -> None:  # type: ignore[no-untyped-def]
    source = frame(lake.spark, [make_row(1, 1)])
    builder = table.merge(source, on="t.k = s.k").when_matched("s.bogus = 1").delete()
    assert_unchanged(lake, builder.execute, errors.InvalidExpressionError, "bogus")


def test_equality_delete_needs_key_partitioning(lake) -> None:  # type: ignore[no-untyped-def]
    t = lake.create_table("db.g", frame(lake.spark, [make_row(1)]), partition_by=["g"], identifier=["k"])
    source = frame(lake.spark, [make_row(1, 1)])
    assert_unchanged(
        lake,
        lambda: rowops.merge(source, t, on=["k"], strategy="equality-delete"),
        errors.UnsupportedStrategyError,
        "partition columns ['g']",
    )


def test_catalog_errors(lake, table) -> None:  # type: ignore[no-untyped-def]
    rows = frame(lake.spark, [make_row(1)])
    assert_unchanged(lake, lambda: lake.table("db.missing"), errors.NoSuchTableError, "db.missing")
    assert_unchanged(lake, lambda: lake.list_tables("nope"), errors.NoSuchNamespaceError, "nope")
    assert_unchanged(lake, lambda: lake.create_table("db.t", rows), errors.TableAlreadyExistsError, "db.t")
    assert_unchanged(lake, lambda: lake.create_table("../x", rows), errors.InvalidIdentifierError, "../x")
    assert_unchanged(
        lake,
        lambda: lake.create_table("db.p", rows, partition_by=["bucket(4, nope)"]),
        errors.InvalidPartitionSpecError,
        "nope",
    )
    assert_unchanged(
        lake,
        lambda: lake.create_table("db.p", rows, partition_by=["hour(d)"]),
        errors.InvalidPartitionSpecError,
        "hour",
    )
    assert_unchanged(
        lake, lambda: lake.create_table("db.p", rows, identifier=["x"]), errors.InvalidInputError, "x"
    )
    assert lake.list_tables("db") == ["db.t"]


@pytest.mark.parametrize("strategy", ["copy-on-write", "position-delete", "equality-delete"])
def test_crash_before_commit_leaves_no_trace(lake, table, strategy, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("ROWOPS_FAULT", "before-commit")
    source = frame(lake.spark, [make_row(3, 1), make_row(200, 1)])
    assert_unchanged(
        lake, lambda: rowops.merge(source, table, on=["k"], strategy=strategy), InjectedFault, "before-commit"
    )
    monkeypatch.delenv("ROWOPS_FAULT")
    rowops.merge(source, table, on=["k"], strategy=strategy)  # the same operation then succeeds
    rows = {r[0]: r for r in table.to_df().select(*COLUMNS).collect()}
    assert rows[200][COLUMNS.index("n")] == 1 and rows[3][COLUMNS.index("n")] == 1 and len(rows) == N + 1


@pytest.mark.parametrize("strategy", ["copy-on-write", "position-delete"])
def test_a_data_file_spark_cannot_find_is_a_missing_file_error(lake, table, strategy) -> None:  # type: ignore[no-untyped-def]
    """As on executors that do not see the driver's disk (tests/cluster): named, with what to do."""
    gone = table.files().data[0].path
    Path(gone).unlink()
    source = frame(lake.spark, [make_row(k, 1) for k in range(N)])
    message = assert_unchanged(
        lake,
        lambda: rowops.merge(source, table, on=["k"], strategy=strategy),
        errors.MissingFileError,
        Path(gone).name,
        "does not exist",
        "same path as the driver",
    )
    assert isinstance(errors.MissingFileError(""), errors.SparkJobError)
    assert "Help:" in message
