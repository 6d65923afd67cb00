"""SQL text → the builder's specs (``rowops/sqltext``), and errors naming the clause (no Spark)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rowops.errors import InvalidInputError, SqlSyntaxError, UnsupportedSqlError
from rowops.request.operations import (
    DEFAULT,
    DeleteSpec,
    MergeClause,
    MergeSpec,
    UpdateSpec,
    simple_merge_spec,
)
from rowops.sqltext.parse import Dml, Query, parse_statement
from rowops.sqltext.tables import TimeTravel, lake_template, parse_query, snapshot_at, snapshot_of


def merge(text: str) -> Dml:
    statement = parse_statement(text)
    assert isinstance(statement, Dml) and isinstance(statement.spec, MergeSpec)
    return statement


def test_upsert_text_is_the_upsert_spec() -> None:
    """Iceberg's TestMerge ``ON t.id == s.id ... UPDATE SET * ... INSERT *``: the spec of ``on=[...]``."""
    dml = merge(
        "MERGE INTO db.t AS t USING source AS s ON t.id == s.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    assert dml.target == "db.t" and not dml.explain
    assert dml.spec == simple_merge_spec(["id"])
    assert dml.spec.key_upsert_or_delete == "upsert"
    assert dml.source is not None and dml.source.sql(dialect="spark") == "SELECT * FROM source AS s"


def test_every_clause_kind_in_written_order() -> None:
    dml = merge(
        """MERGE INTO db.target tgt USING (SELECT * FROM db.changes WHERE id < 10) src
        ON tgt.id = src.id AND src.dep = tgt.dep
        WHEN MATCHED AND tgt.id = 1 THEN UPDATE SET *
        WHEN MATCHED AND src.op = 'delete' THEN DELETE
        WHEN MATCHED THEN UPDATE SET tgt.salary = src.salary + 1, dep = 'x'
        WHEN NOT MATCHED BY TARGET AND src.id > 3 THEN INSERT (id, dep) VALUES (src.id, upper(src.dep))
        WHEN NOT MATCHED THEN INSERT *
        WHEN NOT MATCHED BY SOURCE AND tgt.id > 5 THEN DELETE
        WHEN NOT MATCHED BY SOURCE THEN UPDATE SET salary = 0"""
    )
    assert dml.spec == MergeSpec(
        on="t.`id` = s.`id` AND t.`dep` = s.`dep`",
        clauses=(
            MergeClause("matched", "update", "t.id = 1"),
            MergeClause("matched", "delete", "s.op = 'delete'"),
            MergeClause("matched", "update", None, (("salary", "s.salary + 1"), ("dep", "'x'"))),
            MergeClause("not_matched", "insert", "s.id > 3", (("id", "s.id"), ("dep", "UPPER(s.dep)"))),
            MergeClause("not_matched", "insert"),
            MergeClause("not_matched_by_source", "delete", "t.id > 5"),
            MergeClause("not_matched_by_source", "update", None, (("salary", "0"),)),
        ),
        on_columns=("id", "dep"),
    )
    assert dml.source is not None
    assert dml.source.sql(dialect="spark") == "SELECT * FROM (SELECT * FROM db.changes WHERE id < 10) AS src"


@pytest.mark.parametrize(
    ("on", "expected"),
    [
        ("t.k = s.k AND t.g = 1", "t.k = s.k AND t.g = 1"),
        ("t.k = s.j", "t.k = s.j"),
        ("t.k <=> s.k", "t.k IS NOT DISTINCT FROM s.k"),  # Spark's own spelling of <=>
        ("t.k < s.k", "t.k < s.k"),
        ("t.k = s.k OR t.g = s.g", "t.k = s.k OR t.g = s.g"),
    ],
)
def test_other_on_conditions_stay_conditions(on: str, expected: str) -> None:
    """Like ``on="..."`` in the builder: no key columns, the join condition as written."""
    dml = merge(f"MERGE INTO db.t t USING db.u s ON {on} WHEN MATCHED THEN DELETE")
    assert (dml.spec.on, dml.spec.on_columns) == (expected, None)


def test_aliases_map_to_t_and_s_whatever_they_are() -> None:
    """Swapped aliases, then none at all (the tables' names, also namespace-qualified)."""
    swapped = merge(
        "MERGE INTO db.t AS s USING db.u AS t ON s.k = t.k "
        "WHEN MATCHED AND t.n > s.n THEN UPDATE SET s.n = t.n + s.n"
    )
    assert swapped.spec.on_columns == ("k",)
    assert swapped.spec.clauses == (MergeClause("matched", "update", "s.n > t.n", (("n", "s.n + t.n"),)),)
    plain = merge("MERGE INTO db.t USING db.u ON db.t.k = u.k WHEN MATCHED AND t.n > u.n THEN DELETE")
    assert plain.spec.on_columns == ("k",)
    assert plain.spec.clauses == (MergeClause("matched", "delete", "t.n > s.n"),)


def test_cte_source_and_values_source() -> None:
    dml = merge(
        "WITH c AS (SELECT * FROM db.u WHERE k > 1) MERGE INTO db.t t USING c s ON t.k = s.k "
        "WHEN MATCHED THEN DELETE"
    )
    assert dml.source is not None
    assert (
        dml.source.sql(dialect="spark") == "WITH c AS (SELECT * FROM db.u WHERE k > 1) SELECT * FROM c AS s"
    )
    values = merge(
        "MERGE INTO db.t t USING (VALUES (1, 'a')) AS s(k, v) ON t.k = s.k WHEN MATCHED THEN DELETE"
    )
    assert values.source is not None and "VALUES (1, 'a') AS s(k, v)" in values.source.sql(dialect="spark")


def test_update_and_delete_text() -> None:
    update = parse_statement("UPDATE db.t AS a SET a.n = a.n * 2, s = 'x' WHERE a.k IN (1, 2) AND db.t.g = 0")
    assert update == Dml("db.t", UpdateSpec((("n", "n * 2"), ("s", "'x'")), "k IN (1, 2) AND db.t.g = 0"))
    named = parse_statement("UPDATE db.t SET n = 1 WHERE t.k = 1 OR db.t.k = 2")
    assert isinstance(named, Dml) and named.spec == UpdateSpec((("n", "1"),), "k = 1 OR k = 2")
    assert parse_statement("DELETE FROM db.t") == Dml("db.t", DeleteSpec(None))
    assert parse_statement("delete from db.t x where x.k > 3;") == Dml("db.t", DeleteSpec("k > 3"))


def test_explain_prefix() -> None:
    dml = parse_statement("  explain DELETE FROM db.t WHERE k = 1")
    assert isinstance(dml, Dml) and dml.explain and dml.spec == DeleteSpec("k = 1")


def test_a_query_is_left_to_the_query_path() -> None:
    assert isinstance(parse_statement("SELECT * FROM db.t JOIN view ON true"), Query)


@pytest.mark.parametrize(
    ("text", "error", "needle"),
    [
        ("INSERT OVERWRITE db.t SELECT * FROM db.u", UnsupportedSqlError, "INSERT OVERWRITE"),
        ("INSERT INTO db.t SELECT * FROM db.u", UnsupportedSqlError, "INSERT INTO"),
        ("CREATE TABLE db.x (a INT)", UnsupportedSqlError, "CREATE TABLE"),
        ("ALTER TABLE db.t ADD COLUMN c INT", UnsupportedSqlError, "ALTER TABLE"),
        ("EXPLAIN SELECT 1", UnsupportedSqlError, "EXPLAIN of a query"),
        ("DELETE FROM db.t WHERE k IN (SELECT k FROM db.u)", UnsupportedSqlError, "WHERE of DELETE"),
        ("UPDATE db.t SET n = (SELECT max(n) FROM db.u)", UnsupportedSqlError, "UPDATE SET"),
        (
            "MERGE INTO db.t t USING db.u s ON t.k = s.k WHEN MATCHED AND EXISTS (SELECT 1) THEN DELETE",
            UnsupportedSqlError,
            "WHEN MATCHED",
        ),
        (
            "MERGE INTO db.t t USING db.u s ON t.k IN (SELECT k FROM db.v) WHEN MATCHED THEN DELETE",
            UnsupportedSqlError,
            "ON condition",
        ),
        (
            "MERGE INTO db.t t USING db.u s ON t.k = s.k WHEN NOT MATCHED THEN INSERT (k, n) VALUES (s.k)",
            UnsupportedSqlError,
            "WHEN NOT MATCHED INSERT needs as many values as columns",
        ),
        ("MERGE INTO db.t x USING db.u x ON x.k = x.k WHEN MATCHED THEN DELETE", UnsupportedSqlError, "'x'"),
        ("UPDATE t SET n = 1", UnsupportedSqlError, "namespace.table"),
        ("DELETE FROM db.t VERSION AS OF 1", UnsupportedSqlError, "Time travel on the target of DELETE"),
        ("MERGE INTO db.t USING", SqlSyntaxError, "does not parse"),
        ("DELETE FROM db.t; DELETE FROM db.u", SqlSyntaxError, "one SQL statement"),
        (
            "MERGE INTO db.t t USING db.u s ON t.k = s.k WHEN MATCHED THEN DELETE WHEN MATCHED THEN DELETE",
            InvalidInputError,
            "Only the last WHEN MATCHED",
        ),
    ],
)
def test_unsupported_text_names_the_statement_or_clause(
    text: str, error: type[Exception], needle: str
) -> None:
    with pytest.raises(error) as caught:
        parse_statement(text)
    assert needle in str(caught.value) and "\nHelp: " in str(caught.value)


def test_nested_field_assignments_become_dotted_paths() -> None:
    update = parse_statement("UPDATE db.t SET s.c1 = 5, t.s.c2 = c2 + 1, db.t.n = 0 WHERE k = 1")
    assert isinstance(update, Dml) and isinstance(update.spec, UpdateSpec)
    assert update.spec.assignments == (("s.c1", "5"), ("s.c2", "c2 + 1"), ("n", "0"))
    merge = parse_statement(
        "MERGE INTO db.t t USING db.u s ON t.k = s.k WHEN MATCHED THEN UPDATE SET t.st.f = s.f, st.g.h = 1"
    )
    assert isinstance(merge, Dml) and isinstance(merge.spec, MergeSpec)
    assert merge.spec.clauses[0].assignments == (("st.f", "s.f"), ("st.g.h", "1"))
    aliased = parse_statement(
        "MERGE INTO db.t AS tgt USING db.u AS src ON tgt.k = src.k "
        "WHEN MATCHED THEN UPDATE SET tgt.st.f = tgt.st.f + src.x"
    )
    assert isinstance(aliased, Dml) and isinstance(aliased.spec, MergeSpec)
    assert aliased.spec.clauses[0].assignments == (("st.f", "t.st.f + s.x"),)


def test_lake_tables_become_placeholders_with_time_travel() -> None:
    tree = parse_query(
        "SELECT db.t.k, x.n FROM db.t VERSION AS OF 'audit' JOIN db.u TIMESTAMP AS OF '2024-01-01' AS x "
        "ON db.t.k = x.k JOIN spark_view v ON v.k = x.k JOIN other.tbl o ON o.k = x.k"
    )
    template = lake_template(tree, lambda name: name.startswith("db."))
    assert template.text == (
        "SELECT t.k, x.n FROM {rowops_ref_0} AS t JOIN {rowops_ref_1} AS x ON t.k = x.k "
        "JOIN spark_view AS v ON v.k = x.k JOIN other.tbl AS o ON o.k = x.k"
    )
    assert [u.travel for u in template.uses] == [
        TimeTravel("ref", "audit"),
        TimeTravel("timestamp", "'2024-01-01'"),
    ]
    untouched = lake_template(parse_query("SELECT '{a}' FROM v"), lambda name: True)
    assert untouched == type(untouched)("SELECT '{a}' FROM v", ())


def test_snapshot_at_a_time_is_the_last_one_at_or_before_it() -> None:
    log = [
        SimpleNamespace(timestamp_ms=ts, snapshot_id=sid)
        for ts, sid in [(100, 1), (200, 2), (200, 3), (300, 4)]
    ]
    metadata = SimpleNamespace(snapshot_log=log, refs={"main": SimpleNamespace(snapshot_id=4)})
    assert [snapshot_at(metadata, ms, "db.t") for ms in (100, 199, 200, 10**12)] == [1, 1, 3, 4]  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="no snapshot at or before 99"):
        snapshot_at(metadata, 99, "db.t")  # type: ignore[arg-type]
    assert snapshot_of(metadata, TimeTravel("ref", "main"), "db.t", None) == 4  # type: ignore[arg-type]
    assert snapshot_of(metadata, TimeTravel("snapshot", "7"), "db.t", None) == 7  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="no branch or tag 'nope'"):
        snapshot_of(metadata, TimeTravel("ref", "nope"), "db.t", None)  # type: ignore[arg-type]


def test_default_keyword_becomes_the_default_sentinel() -> None:
    """``DEFAULT`` (any case) in SET and in INSERT VALUES is rowops.DEFAULT; a quoted `default` is a column."""
    update = parse_statement("UPDATE db.t SET n = default, m = `DEFAULT` WHERE k = 1").spec
    assert isinstance(update, UpdateSpec)
    assert update.assignments == (("n", DEFAULT), ("m", "`DEFAULT`"))
    merge = parse_statement(
        "MERGE INTO db.t t USING db.u s ON t.k = s.k WHEN MATCHED THEN UPDATE SET t.n = DEFAULT "
        "WHEN NOT MATCHED THEN INSERT (k, n) VALUES (s.k, DEFAULT)"
    ).spec
    assert isinstance(merge, MergeSpec)
    assert [c.assignments for c in merge.clauses] == [(("n", DEFAULT),), (("k", "s.k"), ("n", DEFAULT))]
