"""NOT NULL columns: kept from the input schema as required Iceberg fields, enforced on every write
by value (a nullable source column without NULLs is fine), errors naming the column and a row's key."""

from __future__ import annotations

from typing import Any

from pyiceberg.table import StaticTable
from pyspark.sql import types as T

import rowops
from rowops.errors import InvalidSchemaChangeError, NullValueError
from tests.readers import assert_readers_agree
from tests.spark.tables import COLUMNS, SCHEMA, frame, make_row
from tests.spark.test_errors import assert_unchanged

N = 30
REQUIRED = {"k", "g", "n"}  # make_row never puts NULL there
STRICT = T.StructType([T.StructField(f.name, f.dataType, f.name not in REQUIRED) for f in SCHEMA.fields])


def _with_null(k: int, column: str) -> tuple[Any, ...]:
    row = list(make_row(k, 1))
    row[COLUMNS.index(column)] = None
    return tuple(row)


def test_required_columns_reach_every_reader_and_nulls_are_rejected(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    rows = [make_row(k) for k in range(N)]
    table = lake.create_table(
        "db.t", lake.spark.createDataFrame(rows, STRICT), partition_by=["bucket(4, k)"], identifier=["k"]
    )
    assert {f.name for f in table.schema.fields if f.required} == REQUIRED
    pyiceberg_schema = StaticTable.from_metadata(table.metadata_location).schema()
    assert {f.name for f in pyiceberg_schema.fields if f.required} == REQUIRED
    assert_readers_agree(table, rows, COLUMNS, java)
    if java is not None:
        assert set(java.last_required) == REQUIRED, "Iceberg's Java reader sees the required fields"

    nullable = frame(lake.spark, [make_row(3, 1), _with_null(200, "g")])  # SCHEMA: every column nullable
    message = assert_unchanged(
        lake,
        lambda: rowops.merge(nullable, table, on=["k"], strategy=strategy),
        NullValueError,
        "column g is declared NOT NULL",
        "offending row: k=200",
        "Help:",
    )
    assert "k=3" not in message
    assert_unchanged(
        lake, lambda: table.append(frame(lake.spark, [_with_null(201, "n")])), NullValueError, "k=201"
    )
    if strategy != "equality-delete":
        assert_unchanged(
            lake,
            lambda: rowops.update(
                table, set={"n": "CASE WHEN k = 4 THEN NULL ELSE n END"}, strategy=strategy
            ),
            NullValueError,
            "column n",
            "offending row: k=4",
        )
    # a nullable source column holding no NULL writes fine
    rowops.merge(frame(lake.spark, [make_row(3, 1), make_row(300, 1)]), table, on=["k"], strategy=strategy)
    expected = {r[0]: r for r in rows} | {3: make_row(3, 1), 300: make_row(300, 1)}
    assert_readers_agree(table, list(expected.values()), COLUMNS, java)


def test_without_a_key_the_error_shows_the_rows_first_columns(lake) -> None:  # type: ignore[no-untyped-def]
    table = lake.create_table("db.t", STRICT)
    assert_unchanged(
        lake,
        lambda: table.append(frame(lake.spark, [_with_null(7, "n")])),
        NullValueError,
        "column n is declared NOT NULL; offending row: k=7, g=1, s=s7-v1",
    )


def test_adding_a_required_column_is_rejected(lake) -> None:  # type: ignore[no-untyped-def]
    table = lake.create_table("db.t", frame(lake.spark, [make_row(1)]))
    assert_unchanged(
        lake,
        lambda: table.add_columns({"c": "int NOT NULL"}),
        InvalidSchemaChangeError,
        "Cannot add column 'c' as NOT NULL",
        "initial default",
    )
    table.add_columns({"c": "int"})
    assert not table.schema.find_field("c").required
