"""Spec parsing and validation (no Spark)."""

from __future__ import annotations

import pytest

from rowops.errors import InvalidIdentifierError, InvalidInputError, InvalidPartitionSpecError, RowOpsError
from rowops.request.identifiers import TableIdentifier, parse_namespace
from rowops.request.operations import MergeClause, MergeSpec, simple_merge_spec
from rowops.request.partitioning import parse_partition_by, parse_partition_field


@pytest.mark.parametrize(
    "name", ["../x", "db/x", "x", "db..t", ".t", "db.t-1", "db.1t", "", "db.t ", "db.\u00e9"]
)
def test_bad_table_names_are_rejected(name: str) -> None:
    with pytest.raises(InvalidIdentifierError) as err:
        TableIdentifier.parse(name)
    assert "Help:" in str(err.value)


def test_table_name_parts() -> None:
    ident = TableIdentifier.parse("a.b.c")
    assert ident.namespace == ("a", "b") and ident.name == "c" and ident.path_parts == ("a", "b", "c")
    assert parse_namespace("a.b") == ("a", "b")
    with pytest.raises(InvalidIdentifierError):
        parse_namespace("../etc")


@pytest.mark.parametrize(
    ("text", "transform", "source", "param"),
    [
        ("k", "identity", "k", None),
        ("bucket(16, k)", "bucket", "k", 16),
        ("truncate(4,s)", "truncate", "s", 4),
        ("days(ts)", "day", "ts", None),
        ("hour(ts)", "hour", "ts", None),
        ("year(d)", "year", "d", None),
    ],
)
def test_partition_fields(text: str, transform: str, source: str, param: int | None) -> None:
    field = parse_partition_field(text)
    assert (field.transform, field.source, field.param) == (transform, source, param)


@pytest.mark.parametrize(
    "text", ["bucket(0, k)", "bucket(k)", "foo(k)", "day(3, k)", "k + 1", "bucket(16, k"]
)
def test_bad_partition_fields(text: str) -> None:
    with pytest.raises(InvalidPartitionSpecError):
        parse_partition_field(text)


def test_repeated_partition_field() -> None:
    with pytest.raises(InvalidPartitionSpecError):
        parse_partition_by(["bucket(4, k)", "bucket(8, k)"])


def test_merge_spec_rules() -> None:
    with pytest.raises(InvalidInputError):
        MergeSpec("t.k = s.k", ())
    with pytest.raises(InvalidInputError):  # unconditional clause before another of its kind
        MergeSpec(
            "t.k = s.k", (MergeClause("matched", "delete"), MergeClause("matched", "update", "s.x > 1"))
        )
    with pytest.raises(InvalidInputError):
        MergeClause("not_matched", "delete")
    with pytest.raises(InvalidInputError):
        simple_merge_spec(["k"], when_matched="insert")


def test_key_upsert_detection() -> None:
    assert simple_merge_spec(["k"]).key_upsert_or_delete == "upsert"
    assert simple_merge_spec(["k"], "delete", None).key_upsert_or_delete == "delete"
    assert simple_merge_spec(["k"], None, "insert").key_upsert_or_delete is None
    conditional = MergeSpec("t.k = s.k", (MergeClause("matched", "delete", "s.op = 'D'"),), ("k",))
    assert conditional.key_upsert_or_delete is None


def test_error_root() -> None:
    assert issubclass(InvalidPartitionSpecError, RowOpsError)
