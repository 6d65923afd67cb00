"""Non-Spark inputs and bad calls get a RowOpsError with a Help line, and change nothing."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

import rowops
from rowops import errors
from tests.spark.tables import frame, make_row
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
