"""``ALTER TABLE`` of Iceberg's SQL extensions (partition and sort order evolution): the hand parser."""

from __future__ import annotations

import pytest

from rowops.errors import SqlSyntaxError, UnsupportedSqlError
from rowops.sqltext.alter import Alter, parse_alter
from rowops.sqltext.parse import parse_statement


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "ALTER TABLE db.t ADD PARTITION FIELD bucket(16, id)",
            Alter("db.t", "ADD PARTITION FIELD", add=(("bucket(16, id)", None),)),
        ),
        (
            "alter table db.t add partition field truncate(4, s) as s4;",
            Alter("db.t", "ADD PARTITION FIELD", add=(("truncate(4, s)", "s4"),)),
        ),
        (  # the argument order of older Iceberg releases
            "ALTER TABLE db.t ADD PARTITION FIELD truncate(s, 4)",
            Alter("db.t", "ADD PARTITION FIELD", add=(("truncate(4, s)", None),)),
        ),
        (
            "ALTER TABLE `db`.`t` ADD PARTITION FIELD years(`ts`)",
            Alter("db.t", "ADD PARTITION FIELD", add=(("year(ts)", None),)),
        ),
        (
            "ALTER TABLE db.t ADD PARTITION FIELD region",
            Alter("db.t", "ADD PARTITION FIELD", add=(("region", None),)),
        ),
        (
            "ALTER TABLE db.t DROP PARTITION FIELD days(ts)",
            Alter("db.t", "DROP PARTITION FIELD", drop=("day(ts)",)),
        ),
        (
            "ALTER TABLE db.t DROP PARTITION FIELD shard",
            Alter("db.t", "DROP PARTITION FIELD", drop=("shard",)),
        ),
        (
            "ALTER TABLE db.t REPLACE PARTITION FIELD ts_day WITH hours(ts) AS hr",
            Alter("db.t", "REPLACE PARTITION FIELD", add=(("hour(ts)", "hr"),), drop=("ts_day",)),
        ),
        (
            "ALTER TABLE db.t WRITE ORDERED BY ts DESC NULLS LAST, id ASC, s",
            Alter(
                "db.t",
                "WRITE ORDERED BY",
                sort_by=("ts DESC NULLS LAST", "id ASC", "s"),
                distribution="range",
            ),
        ),
        (
            "ALTER TABLE db.t WRITE LOCALLY ORDERED BY id",
            Alter("db.t", "WRITE LOCALLY ORDERED BY", sort_by=("id",), distribution="none"),
        ),
        (
            "ALTER TABLE db.t WRITE DISTRIBUTED BY PARTITION LOCALLY ORDERED BY id NULLS FIRST",
            Alter("db.t", "WRITE LOCALLY ORDERED BY", sort_by=("id NULLS FIRST",), distribution="hash"),
        ),
        (
            "ALTER TABLE db.t WRITE DISTRIBUTED BY PARTITION",
            Alter("db.t", "WRITE DISTRIBUTED BY PARTITION", distribution="hash"),
        ),
        (
            "ALTER TABLE db.t WRITE UNORDERED",
            Alter("db.t", "WRITE UNORDERED", sort_by=(), distribution="none"),
        ),
        (  # fields of structs
            "ALTER TABLE db.t REPLACE PARTITION FIELD s.c1 WITH bucket(4, `s`.c2) AS b",
            Alter("db.t", "REPLACE PARTITION FIELD", add=(("bucket(4, s.c2)", "b"),), drop=("s.c1",)),
        ),
        (
            "ALTER TABLE db.t WRITE ORDERED BY s.c1 DESC",
            Alter("db.t", "WRITE ORDERED BY", sort_by=("s.c1 DESC",), distribution="range"),
        ),
    ],
)
def test_supported_alter_statements(text: str, expected: Alter) -> None:
    assert parse_alter(text) == expected
    assert parse_statement(text) == expected  # rowops.sql routes ALTER TABLE here


@pytest.mark.parametrize(
    ("text", "error", "needle"),
    [
        ("ALTER TABLE db.t ADD COLUMNS (c int)", UnsupportedSqlError, "ADD COLUMNS"),
        ("ALTER TABLE db.t RENAME TO db.u", UnsupportedSqlError, "RENAME TO"),
        ("ALTER TABLE db.t SET TBLPROPERTIES ('a'='b')", UnsupportedSqlError, "SET TBLPROPERTIES"),
        ("ALTER TABLE db.t CREATE BRANCH audit", UnsupportedSqlError, "CREATE BRANCH"),
        ("ALTER TABLE db.t WRITE ORDERED BY bucket(4, id)", UnsupportedSqlError, "transforms"),
        ("EXPLAIN ALTER TABLE db.t WRITE UNORDERED", UnsupportedSqlError, "EXPLAIN of ALTER TABLE"),
        ("ALTER TABLE db.t ADD PARTITION FIELD bucket(16 id)", SqlSyntaxError, "expected ','"),
        ("ALTER TABLE db.t ADD PARTITION FIELD bucket(16, id", SqlSyntaxError, "expected ')'"),
        ("ALTER TABLE db.t ADD PARTITION FIELD id extra", SqlSyntaxError, "unexpected 'extra'"),
        ("ALTER TABLE db.t REPLACE PARTITION FIELD a b", SqlSyntaxError, "expected WITH"),
        ("ALTER TABLE db.t ADD PARTITION FIELD id = 3", SqlSyntaxError, "unexpected '= 3'"),
        ("ALTER TABLE", SqlSyntaxError, "expected a table name"),
    ],
)
def test_unsupported_or_broken_alter_statements(text: str, error: type[Exception], needle: str) -> None:
    with pytest.raises(error) as caught:
        parse_statement(text)
    assert needle in str(caught.value) and "Help:" in str(caught.value)
