"""Non-Spark inputs and bad calls get a RowOpsError with a Help line, and change nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pyspark.sql import functions as F

import rowops
from rowops import errors
from rowops.table import MergeBuilder
from tests.spark.tables import COLUMNS, frame, make_row
from tests.spark.test_errors import assert_unchanged

N = 10


@pytest.fixture()
def table(lake):  # type: ignore[no-untyped-def]
    return lake.create_table("db.t", frame(lake.spark, [make_row(k) for k in range(N)]), identifier=["k"])


def test_pandas_source_is_rejected_with_help(lake, table) -> None:  # type: ignore[no-untyped-def]
    pdf = frame(lake.spark, [make_row(1, 1)]).toPandas()
    for attempt in (
        lambda: rowops.merge(pdf, table, on=["k"]),
        lambda: table.merge(pdf, on=["k"]).when_matched().update_all().execute(),
        lambda: table.append(pdf),
        lambda: lake.create_table("db.p", pdf),
        lambda: rowops.explain(pdf, table, on=["k"]),
    ):
        message = assert_unchanged(
            lake, attempt, errors.InvalidArgumentError, "pandas", "spark.createDataFrame"
        )
        assert "Help:" in message


def test_column_predicates_are_rejected_with_help(lake, table) -> None:  # type: ignore[no-untyped-def]
    source = frame(lake.spark, [make_row(1, 1)])
    for attempt in (
        lambda: rowops.delete(table, where=F.col("k") > 5),
        lambda: table.delete(where=F.col("k") > 5),
        lambda: rowops.update(table, set={"n": F.col("n") + 1}),
        lambda: table.update(set={"n": "n + 1"}, where=F.col("k") == 1),
        lambda: table.merge(source, on=["k"]).when_matched(F.col("s.n") > 0).delete().execute(),
        lambda: table.merge(source, on=F.col("t.k") == F.col("s.k")).when_matched().delete().execute(),
        lambda: table.merge(source, on=["k"]).when_not_matched().insert({"k": F.col("s.k")}).execute(),
    ):
        assert_unchanged(lake, attempt, errors.InvalidArgumentError, "Spark SQL", "Help:")


def test_unknown_keywords_name_the_close_match(lake, table) -> None:  # type: ignore[no-untyped-def]
    source = frame(lake.spark, [make_row(1, 1)])
    message = assert_unchanged(
        lake,
        lambda: rowops.delete(table, wher="k = 1"),
        errors.InvalidArgumentError,
        "wher",
        "'where'",
        "Help:",
    )
    assert "did you mean" in message
    for attempt in (
        lambda: rowops.merge(source, table, on=["k"], stratgy="auto"),
        lambda: rowops.update(table, sett={"n": "1"}),
        lambda: table.delete(wehre="k = 1"),
        lambda: table.update({"n": "1"}, condition="k = 1"),
        lambda: table.merge(source, keys=["k"]),
        lambda: table.merge(source, on=["k"]).when_matched().delete().execute(strategey="auto"),
        lambda: lake.create_table("db.p", source, partitionBy=["k"]),
    ):
        assert_unchanged(lake, attempt, errors.InvalidArgumentError, "Help:")
    with pytest.raises(TypeError):  # still a TypeError, as Python raises for a bad call
        rowops.delete(table, wher="k = 1")


def test_bad_property_values_are_rejected_when_set(lake, table) -> None:  # type: ignore[no-untyped-def]
    for key, value in (
        ("rowops.read-weight", "heavy"),
        ("rowops.colocated-join.max-bytes", "1.5"),
        ("write.target-file-size-bytes", "0"),
        ("rowops.colocated-join.enabled", "yes"),
    ):
        assert_unchanged(
            lake,
            lambda k=key, v=value: table.set_properties(**{k: v}),
            errors.InvalidArgumentError,
            key,
            "Help:",
        )
    assert_unchanged(
        lake,
        lambda: lake.create_table(
            "db.p", frame(lake.spark, [make_row(1)]), properties={"rowops.read-weight": "x"}
        ),
        errors.InvalidArgumentError,
        "rowops.read-weight",
    )
    table.set_properties(**{"rowops.read-weight": "2.5"})
    rowops.merge(frame(lake.spark, [make_row(1, 1)]), table, on=["k"])  # the property is usable


def test_target_must_be_a_table(lake, table) -> None:  # type: ignore[no-untyped-def]
    source = frame(lake.spark, [make_row(1, 1)])
    for attempt in (
        lambda: rowops.merge(source, "db.t", on=["k"]),
        lambda: rowops.delete(source, where="k = 1"),
        lambda: rowops.update("db.t", set={"n": "1"}),
    ):
        assert_unchanged(lake, attempt, errors.InvalidArgumentError, "rowops Table", "lake.table(")


def test_python_udf_failure_is_a_spark_job_error(lake, table) -> None:  # type: ignore[no-untyped-def]
    """A user's Python UDF that fails inside the job: SparkJobError naming the Python error."""
    lake.spark.udf.register("rowops_test_divide", lambda n: 1 // (n - n), "int")
    source = frame(lake.spark, [make_row(1, 1)])
    builder = table.merge(source, on=["k"]).when_matched().update({"n": "rowops_test_divide(s.n)"})
    message = assert_unchanged(
        lake, lambda: builder.execute("position-delete"), errors.SparkJobError, "ZeroDivisionError", "Help:"
    )
    assert "Traceback" not in message.splitlines()[0]


def test_single_string_for_list_arguments(lake) -> None:  # type: ignore[no-untyped-def]
    t = lake.create_table(
        "db.p", frame(lake.spark, [make_row(1)]), partition_by="bucket(2, k)", sort_by="amt"
    )
    assert [f.name for f in t.metadata.spec().fields] == ["k_bucket"]
    assert len(t.metadata.sort_order().fields) == 1


def _cold_rows(lake) -> list[tuple[object, ...]]:  # type: ignore[no-untyped-def]
    """The rows of db.t through a fresh handle (no cached metadata), by key."""
    fresh = rowops.Lakehouse(lake.location, spark=lake.spark).table("db.t")
    return sorted((tuple(r) for r in fresh.to_df().collect()), key=lambda r: r[0])


@pytest.fixture()
def grouped(lake):  # type: ignore[no-untyped-def]
    """db.t partitioned by g (so that a compaction filter over g is a valid one)."""
    rows = [make_row(k) for k in range(N)]
    return lake.create_table("db.t", frame(lake.spark, rows), partition_by=["g"], identifier=["k"])


def _sql_text_calls(lake, table, condition: str, value: str) -> dict[str, Callable[[], object]]:  # type: ignore[no-untyped-def]
    """Every public call taking Spark SQL text, given ``condition`` (over g) or ``value`` (an int)."""
    source = frame(lake.spark, [make_row(1, 1), make_row(100, 1)])

    def merge() -> MergeBuilder:
        return table.merge(source, on=["k"])

    insert = {c: f"s.{c}" for c in COLUMNS} | {"n": value}
    return {
        "rowops.delete": lambda: rowops.delete(table, where=condition),
        "Table.delete": lambda: table.delete(where=condition),
        "rowops.update where": lambda: rowops.update(table, set={"n": "1"}, where=condition),
        "Table.update set": lambda: table.update(set={"n": value}, where="k = 1"),
        "rowops.explain": lambda: rowops.explain(None, table, update_set={"n": value}),
        "transaction delete": lambda: _in_transaction(lake, lambda tx: tx.delete("db.t", where=condition)),
        "merge on": lambda: (
            table.merge(source, on=f"t.k = s.k AND t.{condition}").when_matched().delete().execute()
        ),
        "when_matched condition": lambda: merge().when_matched(f"s.{condition}").delete().execute(),
        "when_not_matched_by_source condition": lambda: (
            merge().when_not_matched_by_source(f"t.{condition}").delete().execute()
        ),
        "when_matched update value": lambda: merge().when_matched().update({"n": value}).execute(),
        "when_not_matched insert value": lambda: merge().when_not_matched().insert(insert).execute(),
        "to_df": lambda: table.to_df(where=condition),
        "compact": lambda: table.compact(where=condition),
    }


def _in_transaction(lake, work: Callable[[Any], object]) -> None:  # type: ignore[no-untyped-def]
    with lake.transaction() as tx:
        work(tx)


# Spark's expression parser reads `expr word` as `expr AS word`: a stray word must not become an alias
TRAILING = [("g = 1 or", "1 or"), ("g = 2 bogus", "2 bogus"), ("g = 0 AS x", "0 AS x")]


@pytest.mark.parametrize(("condition", "value"), TRAILING, ids=["or", "bogus", "as"])
def test_trailing_words_are_refused_everywhere(lake, grouped, condition, value) -> None:  # type: ignore[no-untyped-def]
    """Issue 43.1: ``where="id = 6 bogus"`` deleted id 6; every condition and value must be one
    expression, or an InvalidExpressionError naming it, with the table unchanged."""
    before = _cold_rows(lake)
    for where, call in _sql_text_calls(lake, grouped, condition, value).items():
        message = assert_unchanged(lake, call, errors.InvalidExpressionError, "Help:")
        assert condition.split()[-1] in message and (condition in message or value in message), (
            where,
            message,
        )
    for text in (
        f"DELETE FROM db.t WHERE {condition}",
        f"UPDATE db.t SET n = {value} WHERE k = 1",
        f"UPDATE db.t SET n = 1 WHERE {condition}",
        f"MERGE INTO db.t t USING (SELECT 100L AS k) s ON t.k = s.k WHEN MATCHED AND t.{condition} THEN DELETE",
        f"MERGE INTO db.t t USING (SELECT 100L AS k) s ON t.k = s.k "
        f"WHEN NOT MATCHED THEN INSERT (k, n) VALUES (s.k, {value})",
    ):
        assert_unchanged(lake, lambda t=text: lake.sql(t), errors.InvalidInputError, "Help:")
    assert _cold_rows(lake) == before


LEGIT = {  # condition -> how many of the rows k = 0..9 it holds for
    "s = 's1-v0' -- a comment": 1,
    "s LIKE 's%' /* a block comment */": 9,
    "s = 'a b or c'": 0,
    "CASE WHEN k > 7 THEN true ELSE false END": 2,
    "k IN (1, 2)": 2,
    "`k` = 3": 1,
    "NOT (k = 1)": 9,
    "abs(k - 5) <= 1": 3,
    "d < current_date()": 10,
    "ts >= timestamp'2024-01-01 05:00:00' - interval 1 hour": 6,
    "named_struct('a', k).a = 2": 1,
    "exists(array(k, g), v -> v = 9)": 1,
    "(k = 1 OR k = 2) AND g IS NOT NULL": 2,
}


def test_legitimate_expressions_still_pass(lake, table) -> None:  # type: ignore[no-untyped-def]
    for condition, count in LEGIT.items():
        assert table.to_df(where=condition).count() == count, condition
    values = {"n": "CASE WHEN k > 5 THEN 1 ELSE 2 END", "s": "concat('a b', ' -- c')"}
    result = table.update(set=values, where="k IN (1, 7) -- comment")
    assert result.rows_updated == 2
    rows = {r[0]: r for r in _cold_rows(lake)}
    assert (rows[1][-1], rows[1][2], rows[7][-1], rows[2][-1]) == (2, "a b -- c", 1, 0)


def test_a_null_condition_never_holds(lake, table) -> None:  # type: ignore[no-untyped-def]
    """Issue 43.11: a NULL-typed condition is never true (Spark's and Iceberg's MERGE, DELETE)."""
    before = _cold_rows(lake)
    rowops.delete(table, where="NULL")
    table.update(set={"n": "7"}, where="null")
    lake.sql("MERGE INTO db.t t USING (SELECT 2L AS k) s ON t.k = s.k WHEN MATCHED AND NULL THEN DELETE")
    assert _cold_rows(lake) == before
    assert table.to_df(where="NULL").count() == 0
    source = frame(lake.spark, [make_row(1, 1), make_row(100, 1)])
    builder = table.merge(source, on=["k"]).when_matched("NULL").delete().when_matched().update_all()
    builder.when_not_matched("NULL").insert_all().execute()
    after = _cold_rows(lake)  # the NULL clauses did nothing; the next WHEN MATCHED applied
    assert [r for r in after if r[0] != 1] == [r for r in before if r[0] != 1]
    assert [r[-1] for r in after if r[0] == 1] == [1]
