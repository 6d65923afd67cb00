"""Iceberg's metadata tables as DataFrames (issue 46, part 3) against Iceberg Java's on the same table:
the same column names and types (nullability aside) and the same rows, for every table rowops offers,
after writes in every encoding (v2) and with deletion vectors (v3); the lake log as a DataFrame; the
metadata tables in ``lake.sql`` as ``db.t.snapshots``."""

from __future__ import annotations

import datetime
from typing import Any

import pyarrow as pa
import pytest

import rowops
from rowops.errors import InvalidInputError
from rowops.exec.spark.compat import collect_arrow
from rowops.run.inspect import METADATA_TABLES
from tests.spark.tables import written_in_every_encoding

pytestmark = pytest.mark.java
ALL_TABLES = (*METADATA_TABLES, "position_deletes")


def _plain(value: Any) -> Any:
    """A value of ``to_pylist`` in one form for both sides: maps as dicts, bytes, naive UTC times."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in sorted(value.items())}
    if isinstance(value, list) and value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        return {k: _plain(v) for k, v in sorted(value)}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if isinstance(value, datetime.datetime):
        return value.replace(tzinfo=None)
    return value


def _bare(kind: pa.DataType) -> str:
    """An Arrow type without field names of maps, nullability or metadata."""
    if pa.types.is_struct(kind):
        return "struct<" + ", ".join(f"{f.name}: {_bare(f.type)}" for f in kind) + ">"
    if pa.types.is_map(kind):
        return f"map<{_bare(kind.key_type)}, {_bare(kind.item_type)}>"
    if pa.types.is_list(kind):
        return f"list<{_bare(kind.value_type)}>"
    if pa.types.is_timestamp(kind):
        return "timestamp"
    return str(kind)


def assert_same_as_java(table: Any, java: Any) -> None:
    for name in ALL_TABLES:
        theirs = java.read(f"{table.metadata_location}#{name}")
        ours = collect_arrow(table.inspect.table(name))
        assert ours.schema.names == theirs.schema.names, name
        for column in ours.schema.names:
            assert _bare(ours.schema.field(column).type) == _bare(theirs.schema.field(column).type), (
                name,
                column,
            )
        rows = sorted(repr(_plain(r)) for r in ours.to_pylist())
        assert rows == sorted(repr(_plain(r)) for r in theirs.to_pylist()), name


def test_metadata_tables_equal_iceberg_javas_in_every_encoding(lake, java) -> None:  # type: ignore[no-untyped-def]
    if java is None:
        pytest.skip("needs Iceberg's Java reader")
    table = written_in_every_encoding(lake)
    table.delete("k = 1", strategy="copy-on-write")
    table.create_tag("before-compact")
    table.compact_position_deletes()
    assert_same_as_java(table, java)
    first = table.snapshots()[0]["snapshot_id"]
    assert table.inspect.files(first).count() == java.read(f"{table.metadata_location}#files").num_rows - 7


def test_metadata_tables_of_a_v3_table_with_deletion_vectors(lake, java) -> None:  # type: ignore[no-untyped-def]
    if java is None:
        pytest.skip("needs Iceberg's Java reader")
    spark = lake.spark
    rows = spark.range(20).selectExpr("id AS k", "CAST(id AS STRING) AS s").coalesce(1)
    table = lake.create_table("db.v3", rows, identifier=["k"], format_version=3)
    rowops.delete(table, where="k < 3", strategy="position-delete")
    rowops.merge(
        spark.range(15, 25).selectExpr("id AS k", "'x' AS s"), table, on=["k"], strategy="position-delete"
    )
    vectors = table.inspect.delete_files().where("file_format = 'PUFFIN'").collect()
    assert vectors and all(v.referenced_data_file and v.content_size_in_bytes for v in vectors)
    assert table.inspect.position_deletes().count() == 8  # k 0, 1, 2 and the old versions of k 15..19
    assert_same_as_java(table, java)


def test_lake_versions_and_bad_names(lake) -> None:  # type: ignore[no-untyped-def]
    spark = lake.spark
    table = lake.create_table("db.t", spark.range(4).selectExpr("id AS k"), identifier=["k"])
    with lake.transaction() as tx:
        tx.table("db.t").delete("k = 1")
    versions = {r.version: r for r in lake.inspect.versions().collect()}
    assert sorted(versions) == [1, 2]
    assert versions[2].isolation == "serializable" and dict(versions[2].tables) == {"db.t": ["delete"]}
    assert versions[2].rows_deleted == 1 and versions[2].committed_at is not None
    snapshots = lake.sql("SELECT s.snapshot_id, s.operation FROM db.t.snapshots AS s ORDER BY committed_at")
    assert [r.snapshot_id for r in snapshots.collect()] == [s["snapshot_id"] for s in table.snapshots()]
    first = table.snapshots()[0]["snapshot_id"]
    live = lake.sql(f"SELECT count(*) AS n FROM db.t.files VERSION AS OF {first} WHERE content = 0")
    assert live.collect()[0].n == len(table.files(first).data)
    with pytest.raises(InvalidInputError, match="No metadata table 'snapshot'"):
        table.inspect.table("snapshot")
    with pytest.raises(InvalidInputError, match="has no snapshot_id"):
        table.inspect.table("snapshots", snapshot_id=1)
