"""``rowops.sql`` / ``lake.sql``: SQL text gives the same tables as the builder; lake tables in queries.

MERGE texts in the style of Iceberg's Spark ``TestMerge`` (multiple WHEN MATCHED clauses with
conditions, delete + update + insert, NOT MATCHED BY SOURCE, subquery sources, ``INSERT *`` /
``UPDATE SET *``) run through ``rowops.sql`` on one table and through ``MergeBuilder`` on its twin,
for every strategy; the SQL table is read back by every independent reader and must hold exactly the
builder table's rows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import DataFrame

import rowops
from rowops import errors
from rowops.table import MergeBuilder, Table
from tests.readers import assert_readers_agree, rowops_rows
from tests.spark.conftest import STRATEGIES
from tests.spark.tables import COLUMNS, fingerprint, frame, make_row
from tests.spark.test_catalogs import pyiceberg_table
from tests.spark.test_catalogs import row as catalog_row
from tests.spark.test_merge_semantics import unchanged
from tests.sql_smoke import sql_smoke

N = 20
SOURCE_KEYS = (1, 2, 3, 4, 6, 8, 21, 22, 25)
VIEW = "sql_src"


@dataclass(frozen=True)
class Case:
    """One MERGE as SQL text (target ``{target}``) and as builder calls on the twin table."""

    name: str
    text: str
    build: Callable[[Table, DataFrame], MergeBuilder]
    expressible: bool  # by equality deletes
    lake_source: bool = False  # the source is the lake table db.src (not the temporary view)


CASES = [
    Case(
        "upsert",
        f"MERGE INTO {{target}} AS t USING {VIEW} AS s ON t.k == s.k "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
        lambda t, s: t.merge(s, on=["k"]).when_matched().update_all().when_not_matched().insert_all(),
        expressible=True,
    ),
    Case(
        "delete-by-key",
        f"MERGE INTO {{target}} t USING {VIEW} s ON t.k = s.k WHEN MATCHED THEN DELETE",
        lambda t, s: t.merge(s, on=["k"]).when_matched().delete(),
        expressible=True,
    ),
    Case(  # Iceberg TestMerge.testMergeWithAllCauses
        "all-clauses",
        f"MERGE INTO {{target}} AS t USING {VIEW} AS s ON t.k == s.k "
        "WHEN MATCHED AND t.k = 1 THEN UPDATE SET * WHEN MATCHED AND t.k = 2 THEN DELETE "
        "WHEN NOT MATCHED THEN INSERT *",
        lambda t, s: (
            t.merge(s, on=["k"])
            .when_matched("t.k = 1")
            .update_all()
            .when_matched("t.k = 2")
            .delete()
            .when_not_matched()
            .insert_all()
        ),
        expressible=False,
    ),
    Case(
        "conditions-and-assignments",
        f"MERGE INTO {{target}} AS tgt USING {VIEW} AS src ON tgt.k = src.k "
        "WHEN MATCHED AND src.k % 2 = 0 THEN UPDATE SET tgt.n = src.n + 100, s = concat(tgt.s, '!') "
        "WHEN MATCHED AND src.k = 3 THEN DELETE "
        "WHEN NOT MATCHED AND src.k > 21 THEN INSERT (k, g, n) VALUES (src.k, src.g, -1)",
        lambda t, s: (
            t.merge(s, on=["k"])
            .when_matched("s.k % 2 = 0")
            .update({"n": "s.n + 100", "s": "concat(t.s, '!')"})
            .when_matched("s.k = 3")
            .delete()
            .when_not_matched("s.k > 21")
            .insert({"k": "s.k", "g": "s.g", "n": "-1"})
        ),
        expressible=False,
    ),
    Case(
        "not-matched-by-source",
        f"MERGE INTO {{target}} t USING {VIEW} s ON t.k = s.k WHEN MATCHED THEN UPDATE SET n = s.n "
        "WHEN NOT MATCHED BY SOURCE AND t.k < 5 THEN DELETE WHEN NOT MATCHED BY SOURCE THEN UPDATE SET n = -7",
        lambda t, s: (
            t.merge(s, on=["k"])
            .when_matched()
            .update({"n": "s.n"})
            .when_not_matched_by_source("t.k < 5")
            .delete()
            .when_not_matched_by_source()
            .update({"n": "-7"})
        ),
        expressible=False,
    ),
    Case(  # the source: a subquery over a lake table whose deletes must apply (k = 22 deleted)
        "subquery-over-lake-table",
        "MERGE INTO {target} t USING (SELECT * FROM db.src WHERE k % 2 = 0) s ON t.k = s.k "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
        lambda t, s: (
            t.merge(s.where("k % 2 = 0"), on=["k"])
            .when_matched()
            .update_all()
            .when_not_matched()
            .insert_all()
        ),
        expressible=True,
        lake_source=True,
    ),
    Case(
        "non-key-on",
        f"MERGE INTO {{target}} t USING {VIEW} s ON t.k = s.k AND t.g = 1 "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
        lambda t, s: (
            t.merge(s, on="t.k = s.k AND t.g = 1").when_matched().update_all().when_not_matched().insert_all()
        ),
        expressible=False,
    ),
]


def create(lake, name: str = "db.t") -> Table:  # type: ignore[no-untyped-def]
    rows = [make_row(k) for k in range(N)]
    return lake.create_table(name, frame(lake.spark, rows), partition_by=["bucket(4, k)"], identifier=["k"])


@pytest.fixture()
def source(lake) -> Iterator[DataFrame]:  # type: ignore[no-untyped-def]
    """The change rows, also as the temporary view ``sql_src`` (a name Spark resolves, not the lake)."""
    df = frame(lake.spark, [make_row(k, 1) for k in SOURCE_KEYS])
    df.createOrReplaceTempView(VIEW)
    yield df
    lake.spark.catalog.dropTempView(VIEW)


def lake_source(lake) -> DataFrame:  # type: ignore[no-untyped-def]
    table = lake.create_table("db.src", frame(lake.spark, [make_row(k, 1) for k in SOURCE_KEYS]))
    table.delete("k = 22", strategy="position-delete")
    return table.to_df()


def counts(result: rowops.OperationResult) -> tuple[object, ...]:
    return result.strategy, result.rows_inserted, result.rows_updated, result.rows_deleted


# the text-to-spec mapping does not depend on the encoding: `make test` runs every case with position
# deletes, `make test-slow` with the other two strategies as well
@pytest.mark.parametrize(
    "strategy",
    [pytest.param(s, marks=() if s == "position-delete" else pytest.mark.slow) for s in STRATEGIES],
)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_sql_merge_gives_the_builders_table(lake, strategy, source, java, case: Case) -> None:  # type: ignore[no-untyped-def]
    target, twin = create(lake), create(lake, "db.b")
    changes = lake_source(lake) if case.lake_source else source
    text = case.text.format(target="db.t")
    if strategy == "equality-delete" and not case.expressible:
        unchanged(lake, lambda: rowops.sql(lake, text, strategy=strategy), errors.UnsupportedStrategyError)
        unchanged(
            lake,
            lambda: case.build(twin, changes).execute(strategy=strategy),
            errors.UnsupportedStrategyError,
        )
        return
    result = rowops.sql(lake, text, strategy=strategy)
    expected = case.build(twin, changes).execute(strategy=strategy)
    assert isinstance(result, rowops.OperationResult)
    assert counts(result) == counts(expected)
    assert_readers_agree(target, rowops_rows(twin), COLUMNS, java)


def test_sql_update_and_delete_give_the_builders_table(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    """Iceberg TestUpdate/TestDelete style: aliased target, qualified and plain names."""
    target, twin = create(lake), create(lake, "db.b")
    update = "UPDATE db.t AS a SET a.n = a.n + 10, s = upper(s) WHERE a.k % 3 = 1 AND g IS NOT NULL"
    delete = "DELETE FROM db.t WHERE k > 15 OR t.s IS NULL"
    if strategy == "equality-delete":
        for text in (update, delete):
            unchanged(
                lake, lambda t=text: rowops.sql(lake, t, strategy=strategy), errors.UnsupportedStrategyError
            )
        return
    results = [rowops.sql(lake, update, strategy=strategy), lake.sql(delete, strategy=strategy)]
    expected = [
        twin.update({"n": "n + 10", "s": "upper(s)"}, where="k % 3 = 1 AND g IS NOT NULL", strategy=strategy),
        twin.delete("k > 15 OR s IS NULL", strategy=strategy),
    ]
    assert [counts(r) for r in results] == [counts(e) for e in expected]  # type: ignore[arg-type]
    assert_readers_agree(target, rowops_rows(twin), COLUMNS, java)


def test_explain_text_is_rowops_explain(lake, source) -> None:  # type: ignore[no-untyped-def]
    table = create(lake)
    before = fingerprint(lake.root)
    text = rowops.sql(lake, f"EXPLAIN MERGE INTO db.t t USING {VIEW} s ON t.k = s.k WHEN MATCHED THEN DELETE")
    built = table.merge(source, on=["k"]).when_matched().delete().explain()
    assert isinstance(text, str) and text.startswith("== rowops plan ==")
    assert text.splitlines()[:3] == built.splitlines()[:3]  # operation, strategy and why, files
    assert "explain" not in str(lake.sql("EXPLAIN DELETE FROM db.t WHERE k = 1")).lower().split("==")[0]
    assert fingerprint(lake.root) == before


def temp_views(lake) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(t.name for t in lake.spark.catalog.listTables() if t.isTemporary)


def test_select_resolves_lake_tables_at_their_snapshots(lake, source) -> None:  # type: ignore[no-untyped-def]
    """A join of two lake tables (a position and an equality delete applied) and a Spark view; the
    DataFrame keeps working after the query's views are gone, and keeps its snapshot after a write."""
    t = lake.create_table("db.t", frame(lake.spark, [make_row(k) for k in range(10)]), identifier=["k"])
    u = lake.create_table("db.u", frame(lake.spark, [make_row(k, 1) for k in range(5, 15)]), identifier=["k"])
    t.delete("k = 6", strategy="position-delete")
    rowops.merge(frame(lake.spark, [make_row(7)]), u, on=["k"], when_matched="delete", when_not_matched=None,
                 strategy="equality-delete")  # fmt: skip
    views = temp_views(lake)
    query = f"SELECT t.k, u.n, v.n AS vn FROM db.t JOIN db.u AS u ON t.k = u.k LEFT JOIN {VIEW} v ON v.k = t.k ORDER BY t.k"
    df = lake.sql(query)
    assert temp_views(lake) == views and VIEW in views  # no view of the query's is left behind
    assert [tuple(r) for r in df.collect()] == [(5, 1, None), (8, 1, 1), (9, 1, None)]
    t.delete("k = 5")
    assert [tuple(r) for r in df.collect()] == [(5, 1, None), (8, 1, 1), (9, 1, None)]  # its snapshot
    assert [r.k for r in lake.sql(query).collect()] == [8, 9]
    assert lake.sql("SELECT count(*) FROM db.t").first()[0] == 8


def test_time_travel_in_queries(lake) -> None:  # type: ignore[no-untyped-def]
    t = lake.create_table("db.t", frame(lake.spark, [make_row(k) for k in range(10)]), identifier=["k"])
    t.delete("k < 3")
    first, second = (s["snapshot_id"] for s in t.snapshots())
    times = [int(s["timestamp_ms"]) for s in t.snapshots()]  # type: ignore[call-overload]

    def at(ms: int) -> str:
        return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("'%Y-%m-%d %H:%M:%S.%f'")

    def count(clause: str) -> int:
        return int(lake.sql(f"SELECT count(*) FROM db.t {clause}").first()[0])

    assert [count(f"VERSION AS OF {first}"), count(f"VERSION AS OF {second}"), count("")] == [10, 7, 7]
    assert count("VERSION AS OF 'main'") == 7
    assert [count(f"TIMESTAMP AS OF {at(times[1] - 1)}"), count(f"TIMESTAMP AS OF {at(times[1])}")] == [10, 7]
    assert count(f"FOR TIMESTAMP AS OF {at(times[0])}") == 10
    with pytest.raises(errors.InvalidInputError, match="no snapshot at or before"):
        lake.sql("SELECT * FROM db.t TIMESTAMP AS OF '2000-01-01 00:00:00'")
    with pytest.raises(errors.InvalidInputError, match="no branch or tag 'audit'"):
        lake.sql("SELECT * FROM db.t VERSION AS OF 'audit'")
    with pytest.raises(errors.InvalidInputError, match="has no snapshot 12345"):
        lake.sql("SELECT * FROM db.t VERSION AS OF 12345")
    old = lake.sql(f"SELECT k FROM db.t VERSION AS OF {first} WHERE k < 3 ORDER BY k")
    assert [r.k for r in old.collect()] == [0, 1, 2]


def test_sql_inside_a_transaction(lake) -> None:  # type: ignore[no-untyped-def]
    create(lake)
    query = "SELECT k, n FROM db.t WHERE k < 3 ORDER BY k"
    version = lake.version
    with lake.transaction() as tx:
        tx.sql("UPDATE db.t SET n = 5 WHERE k = 1")
        rowops.sql(tx, "DELETE FROM db.t WHERE k = 2")
        assert [tuple(r) for r in tx.sql(query).collect()] == [(0, 0), (1, 5)]
        assert [tuple(r) for r in lake.sql(query).collect()] == [(0, 0), (1, 0), (2, 0)]
    assert lake.version == version + 1
    assert [tuple(r) for r in lake.sql(query).collect()] == [(0, 0), (1, 5)]


def test_sql_on_a_read_only_lake_version(lake) -> None:  # type: ignore[no-untyped-def]
    table = create(lake)
    version = lake.version
    table.delete("k < 5")
    past = lake.at(version=version)
    assert past.sql("SELECT count(*) FROM db.t").first()[0] == N
    unchanged(lake, lambda: past.sql("DELETE FROM db.t"), errors.ReadOnlyError)


def test_failed_sql_leaves_the_lake_unchanged(lake, strategy, source) -> None:  # type: ignore[no-untyped-def]
    create(lake)
    twice = f"(SELECT * FROM {VIEW} UNION ALL SELECT * FROM {VIEW})"
    cardinality = f"MERGE INTO db.t t USING {twice} s ON t.k = s.k WHEN MATCHED THEN UPDATE SET n = s.n"
    failure = (
        errors.UnsupportedStrategyError if strategy == "equality-delete" else errors.CardinalityViolationError
    )
    unchanged(lake, lambda: rowops.sql(lake, cardinality, strategy=strategy), failure)
    unchanged(
        lake,
        lambda: lake.sql("UPDATE db.t SET nope = 1", strategy=strategy),
        errors.NoSuchColumnError,
        "nope",
    )
    unchanged(
        lake,
        lambda: lake.sql(
            f"MERGE INTO db.t t USING (SELECT nope FROM {VIEW}) s ON t.k = s.k WHEN MATCHED THEN DELETE"
        ),
        errors.InvalidExpressionError,
        "the MERGE source",
    )
    unchanged(
        lake,
        lambda: lake.sql(
            f"MERGE INTO db.t t USING {VIEW} s ON t.k = s.k WHEN MATCHED AND t.nope > 1 THEN DELETE"
        ),
        errors.InvalidExpressionError,
        "nope",
    )


def test_unknown_tables(lake) -> None:  # type: ignore[no-untyped-def]
    create(lake)
    for text in (
        "DELETE FROM db.nope WHERE k = 1",
        "MERGE INTO db.t t USING db.nope s ON t.k = s.k WHEN MATCHED THEN DELETE",
        "SELECT * FROM db.t JOIN db.nope ON true",
    ):
        unchanged(lake, lambda t=text: lake.sql(t), errors.NoSuchTableError, "db.nope")
    unchanged(
        lake, lambda: lake.sql("SELECT * FROM no_such_view"), errors.InvalidExpressionError, "no_such_view"
    )


def test_sql_on_a_pyiceberg_catalog(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``Lakehouse.from_catalog(...).sql``: the catalog's tables, committed through the catalog."""
    sql_catalog = SqlCatalog("sql", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/wh")
    sql_catalog.create_namespace("db")
    pyiceberg_table(sql_catalog, [catalog_row(k) for k in range(30)])
    lake = rowops.Lakehouse.from_catalog(sql_catalog, spark=spark)
    result = lake.sql(
        "UPDATE db.t AS x SET v = concat(x.v, '!') WHERE x.k % 4 = 0", strategy="position-delete"
    )
    assert isinstance(result, rowops.OperationResult) and result.rows_updated == 8
    assert sql_catalog.load_table("db.t").metadata.current_snapshot_id == result.snapshot_id
    assert lake.sql("SELECT count(*) FROM db.t WHERE v LIKE '%!'").first()[0] == 8
    with pytest.raises(errors.NoSuchTableError, match=r"nope\.t"):
        lake.sql("SELECT * FROM nope.t")


def test_bad_arguments(lake) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(errors.InvalidArgumentError, match="Spark SQL text"):
        rowops.sql(lake, 42)  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidArgumentError, match="did you mean 'strategy'"):
        lake.sql("DELETE FROM db.t", strategi="auto")


def test_cte_and_values_sources(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    """``WITH ... MERGE`` (the CTE over a lake table) and a ``VALUES`` source resolve like queries."""
    table = create(lake)
    lake.create_table("db.src", frame(lake.spark, [make_row(k, 1) for k in (2, 3, 30)]))
    with_cte = (
        "WITH c AS (SELECT * FROM db.src WHERE k <> 3) MERGE INTO db.t t USING c s ON t.k = s.k "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    values = "MERGE INTO db.t t USING (VALUES (5L), (6L)) AS s(k) ON t.k = s.k WHEN MATCHED THEN DELETE"
    expected = {r[0]: r for r in (make_row(k) for k in range(N))} | {2: make_row(2, 1), 30: make_row(30, 1)}
    for key in (5, 6):
        expected.pop(key)
    rowops.sql(lake, with_cte, strategy=strategy)
    rowops.sql(lake, values, strategy=strategy)
    assert_readers_agree(table, list(expected.values()), COLUMNS, java)


def test_sql_smoke(lake, java) -> None:  # type: ignore[no-untyped-def]
    """The SQL surface in one pass (``tests/sql_smoke.py``; also run on pyspark 4.x and Spark Connect)."""
    checked = sql_smoke(lake, java)
    assert checked["duckdb"] == "ok"
