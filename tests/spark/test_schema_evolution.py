"""Schema evolution: add, widen, rename and drop columns, then reads and writes under every strategy.

Files written under each schema stay as they are (old files lack added columns, store widened columns
narrower, name renamed columns by field id only); every reader must still see the oracle's rows.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import types as T

import rowops
from rowops.errors import (
    CommitConflictError,
    ConflictKind,
    InvalidSchemaChangeError,
    NoSuchColumnError,
    RowOpsError,
)
from tests.oracles.compare import assert_same_rows
from tests.readers import assert_readers_agree, rowops_rows
from tests.spark.test_catalogs import pyiceberg_table
from tests.spark.test_catalogs import row as catalog_row
from tests.spark.test_errors import assert_unchanged

SCHEMA = T.StructType(
    [
        T.StructField("k", T.LongType()),
        T.StructField("n", T.IntegerType()),
        T.StructField("f", T.FloatType()),
        T.StructField("amt", T.DecimalType(10, 2)),
        T.StructField("s", T.StringType()),
        T.StructField("x", T.DoubleType()),
    ]
)
N = 30


def old_row(k: int) -> dict[str, Any]:
    return {
        "k": k,
        "n": k * 10,
        "f": k * 0.5,  # exact in float32: widening to double keeps the value
        "amt": Decimal(f"{k}.25"),
        "s": None if k % 7 == 0 else f"s{k}",
        "x": k * 1.5,
    }


def create(lake) -> Any:  # type: ignore[no-untyped-def]
    rows = [old_row(k) for k in range(N)]
    df = lake.spark.createDataFrame([tuple(r[c] for c in SCHEMA.fieldNames()) for r in rows], SCHEMA)
    return lake.create_table("db.t", df, partition_by=["bucket(4, k)"], identifier=["k"])


class Oracle:
    """Rows by key as dicts; columns renamed, added and dropped like the table's."""

    def __init__(self) -> None:
        self.rows = {k: old_row(k) for k in range(N)}

    def add(self, *names: str) -> None:
        for r in self.rows.values():
            r.update(dict.fromkeys(names))

    def rename(self, old: str, new: str) -> None:
        for r in self.rows.values():
            r[new] = r.pop(old)

    def drop(self, name: str) -> None:
        for r in self.rows.values():
            del r[name]

    def values(self, columns: list[str]) -> list[tuple[Any, ...]]:
        return [tuple(r[c] for c in columns) for r in self.rows.values()]


def frame(spark, table, rows: list[dict[str, Any]]):  # type: ignore[no-untyped-def]
    """Source rows in the table's current schema (so they carry the new columns)."""
    struct = table.to_df().schema
    return spark.createDataFrame([tuple(r[c] for c in struct.fieldNames()) for r in rows], struct)


def check(table, oracle: Oracle) -> None:  # type: ignore[no-untyped-def]
    columns = table.schema.column_names
    assert sorted(rowops_rows(table), key=repr) == sorted(oracle.values(columns), key=repr)


def upsert(lake, table, oracle: Oracle, rows: list[dict[str, Any]], strategy: str) -> None:  # type: ignore[no-untyped-def]
    rowops.merge(frame(lake.spark, table, rows), table, on=["k"], strategy=strategy)
    for r in rows:
        oracle.rows[r["k"]] = dict(r)


def test_evolve_then_write_and_read_everywhere(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    """Each evolution is one commit; after each, MERGE / UPDATE / DELETE (or their MERGE forms under
    equality deletes) write files under the new schema next to files of every older one."""
    table = create(lake)
    oracle = Oracle()
    before = table.current_snapshot_id
    versions = len(lake.history())

    table.add_columns({"note": "string", "score": "decimal(12,2)"})
    oracle.add("note", "score")
    assert len(lake.history()) == versions + 1 and table.current_snapshot_id == before
    assert [f.field_id for f in table.schema.fields][-2:] == [7, 8] and table.metadata.last_column_id == 8
    check(table, oracle)
    new = [{**oracle.rows[k], "note": f"n{k}", "score": Decimal("1.50")} for k in (0, 3, 6)]
    new += [{**old_row(k), "note": "new", "score": Decimal("2.00")} for k in (N, N + 1)]
    upsert(lake, table, oracle, new, strategy)
    check(table, oracle)

    table.widen_column("n", "bigint")
    table.widen_column("f", "double")
    table.widen_column("amt", "decimal(14,2)")
    check(table, oracle)
    big = 5_000_000_000  # does not fit the old int column
    changed = [k for k in oracle.rows if k % 5 == 0]
    if strategy == "equality-delete":  # an UPDATE is not expressible: the same change as a MERGE
        rows = [
            {**oracle.rows[k], "n": oracle.rows[k]["n"] + big, "amt": Decimal("123456789012.25")}
            for k in changed
        ]
        upsert(lake, table, oracle, rows, strategy)
    else:
        rowops.update(
            table, set={"n": f"n + {big}", "amt": "123456789012.25"}, where="k % 5 = 0", strategy=strategy
        )
        for k in changed:
            oracle.rows[k].update(n=oracle.rows[k]["n"] + big, amt=Decimal("123456789012.25"))
    check(table, oracle)

    table.rename_column("s", "label")
    oracle.rename("s", "label")
    check(table, oracle)
    gone = [1, 4, N + 1]
    if strategy == "equality-delete":
        src = frame(lake.spark, table, [oracle.rows[k] for k in gone])
        rowops.merge(src, table, on=["k"], when_matched="delete", when_not_matched=None, strategy=strategy)
    else:
        rowops.delete(table, where="label IN ('s1', 's4') OR note = 'new' AND k > 30", strategy=strategy)
    for k in gone:
        del oracle.rows[k]
    check(table, oracle)

    table.drop_column("x")
    oracle.drop("x")
    check(table, oracle)
    upsert(lake, table, oracle, [{**oracle.rows[k], "label": "again", "f": 0.1} for k in (2, 3)], strategy)
    table.append(frame(lake.spark, table, [{**oracle.rows[2], "k": 100, "note": "appended"}]))
    oracle.rows[100] = {**oracle.rows[2], "k": 100, "note": "appended"}

    assert len(lake.history()) >= versions + 7
    assert_readers_agree(table, oracle.values(table.schema.column_names), table.schema.column_names, java)
    # time travel to the snapshot before any change reads the columns as they were
    first = Oracle()
    old_columns = SCHEMA.fieldNames()
    assert table.to_df(snapshot_id=before).columns == old_columns
    assert_readers_agree(table, first.values(old_columns), old_columns, java, snapshot_id=before)


def second_handle(lake):  # type: ignore[no-untyped-def]
    """The same table through another Lakehouse object (its own catalog), as another writer has."""
    return rowops.Lakehouse(lake.location, spark=lake.spark).table("db.t")


def test_merge_planned_on_old_schema_conflicts(lake, strategy, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A MERGE planned on schema N whose commit meets schema N+1 must not land files written for N
    (under any strategy, blind equality deletes included): schema-changed, nothing committed; run again
    it succeeds on the new schema."""
    table = create(lake)
    other = second_handle(lake)
    commit = table.scope.commit_delta

    def concurrent_schema_change_first(*args: Any, **kwargs: Any) -> Any:
        other.add_columns({"late": "int"})  # lands between planning and commit
        return commit(*args, **kwargs)

    monkeypatch.setattr(table.scope, "commit_delta", concurrent_schema_change_first)
    rows = [{**old_row(k), "n": -1} for k in (2, 40)]
    with pytest.raises(CommitConflictError) as caught:
        rowops.merge(frame(lake.spark, table, rows), table, on=["k"], strategy=strategy)
    monkeypatch.undo()
    assert caught.value.kind == ConflictKind.SCHEMA_CHANGED and caught.value.retry_safe
    assert "Help:" in str(caught.value)
    oracle = Oracle()
    oracle.add("late")
    check(table, oracle)  # the schema change landed, the MERGE did not
    rows = [{**r, "late": 7} for r in rows]
    upsert(lake, table, oracle, rows, strategy)
    check(table, oracle)


def test_append_planned_on_old_schema_conflicts(lake, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    table = create(lake)
    other = second_handle(lake)
    commit = table.scope.commit_delta

    def concurrent_schema_change_first(*args: Any, **kwargs: Any) -> Any:
        other.rename_column("s", "label")
        return commit(*args, **kwargs)

    monkeypatch.setattr(table.scope, "commit_delta", concurrent_schema_change_first)
    with pytest.raises(CommitConflictError) as caught:
        table.append(frame(lake.spark, table, [old_row(99)]))
    monkeypatch.undo()
    assert caught.value.kind == ConflictKind.SCHEMA_CHANGED
    assert len(rowops_rows(table)) == N


def test_concurrent_schema_changes(lake, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A schema change rebases over a data commit, not over another schema change."""
    table = create(lake)
    other = second_handle(lake)
    evolve = table.scope.evolve_schema

    def data_first(*args: Any, **kwargs: Any) -> Any:
        other.append(frame(lake.spark, other, [old_row(77)]))
        return evolve(*args, **kwargs)

    monkeypatch.setattr(table.scope, "evolve_schema", data_first)
    table.add_columns({"c1": "int"})
    assert table.schema.column_names[-1] == "c1" and len(rowops_rows(table)) == N + 1

    def schema_first(*args: Any, **kwargs: Any) -> Any:
        other.add_columns({"c2": "string"})
        return evolve(*args, **kwargs)

    monkeypatch.setattr(table.scope, "evolve_schema", schema_first)
    with pytest.raises(CommitConflictError) as caught:
        table.add_columns({"c3": "string"})
    monkeypatch.undo()
    assert caught.value.kind == ConflictKind.SCHEMA_CHANGED
    assert table.schema.column_names[-2:] == ["c1", "c2"]


def test_schema_change_in_a_transaction(lake, java) -> None:  # type: ignore[no-untyped-def]
    table = create(lake)
    oracle = Oracle()
    with lake.transaction() as tx:
        t = tx.table("db.t")
        t.add_columns({"note": "string"})
        t.widen_column("n", "bigint")
        rows = [{**oracle.rows[k], "n": 6_000_000_000, "note": "tx"} for k in (5, 6)]
        rowops.merge(frame(lake.spark, t, rows), t, on=["k"], strategy="position-delete")
    oracle.add("note")
    for r in rows:
        oracle.rows[r["k"]] = r
    assert table.metadata.current_schema_id == 2
    columns = table.schema.column_names
    assert_readers_agree(table, oracle.values(columns), columns, java)


@pytest.fixture(scope="module")
def refused_table(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    """One table for every refused change: each must leave every lake file as it was (assert_unchanged
    checks), so they share it (a table per case cost a Spark write each)."""
    return create(rowops.Lakehouse(tmp_path_factory.mktemp("refused") / "lake", spark=spark))


@pytest.mark.parametrize(
    ("action", "error", "needle"),
    [
        (lambda t: t.add_columns({"S": "string"}), InvalidSchemaChangeError, "already has a column 's'"),
        (lambda t: t.add_columns({"y": "varchar(3)"}), InvalidSchemaChangeError, "Unknown or unsupported"),
        (lambda t: t.add_columns({"y": "decimal(50,2)"}), InvalidSchemaChangeError, "decimal(50,2)"),
        (lambda t: t.add_columns({}), InvalidSchemaChangeError, "non-empty mapping"),
        (lambda t: t.add_columns({"a.b": "int"}), InvalidSchemaChangeError, "not a valid top-level"),
        (lambda t: t.widen_column("nope", "bigint"), NoSuchColumnError, "no column 'nope'"),
        (lambda t: t.widen_column("k", "int"), InvalidSchemaChangeError, "from long to int"),
        (lambda t: t.widen_column("s", "bigint"), InvalidSchemaChangeError, "from string to long"),
        (lambda t: t.widen_column("x", "float"), InvalidSchemaChangeError, "from double to float"),
        (lambda t: t.widen_column("amt", "decimal(12,3)"), InvalidSchemaChangeError, "decimal(12, 3)"),
        (lambda t: t.widen_column("n", "int"), InvalidSchemaChangeError, "from int to int"),
        (lambda t: t.widen_column("n", "bigint "), None, None),
        (lambda t: t.rename_column("s", "x"), InvalidSchemaChangeError, "already has a column 'x'"),
        (lambda t: t.rename_column("zz", "y"), NoSuchColumnError, "no column 'zz'"),
        (lambda t: t.drop_column("k"), InvalidSchemaChangeError, "identifier (key) column"),
        (lambda t: t.drop_column("zz"), NoSuchColumnError, "no column 'zz'"),
    ],
)
def test_bad_schema_changes_leave_the_lake_unchanged(request, action, error, needle) -> None:  # type: ignore[no-untyped-def]
    if error is None:  # the control: a valid change does commit (on a table of its own)
        table = create(request.getfixturevalue("lake"))
        action(table)
        assert str(table.schema.find_field("n").field_type) == "long"
        return
    table = request.getfixturevalue("refused_table")
    message = assert_unchanged(table.lake, lambda: action(table), error, needle, "Help:")
    assert issubclass(error, RowOpsError), message


def test_drop_partition_or_sort_column_is_refused(lake) -> None:  # type: ignore[no-untyped-def]
    df = lake.spark.createDataFrame([(1, 2, 3)], "k long, p int, o int")
    table = lake.create_table("db.p", df, partition_by=["p"], sort_by=["o"])
    assert_unchanged(
        lake, lambda: table.drop_column("p"), InvalidSchemaChangeError, "partition field", "Help:"
    )
    assert_unchanged(lake, lambda: table.drop_column("o"), InvalidSchemaChangeError, "sort order", "Help:")


def test_name_mapping_follows_renames_and_adds(lake) -> None:  # type: ignore[no-untyped-def]
    """A table with a name mapping (files without field ids, e.g. imported ones) keeps it current:
    a renamed column keeps its id under both names, an added column gets its own."""
    table = create(lake)
    mapping = [{"field-id": f.field_id, "names": [f.name]} for f in table.schema.fields]
    table.set_properties(**{"schema.name-mapping.default": json.dumps(mapping)})
    table.rename_column("s", "label")
    table.add_columns({"note": "string"})
    mapping = json.loads(table.metadata.properties["schema.name-mapping.default"])
    updated = {frozenset(m["names"]): m["field-id"] for m in mapping}
    assert updated[frozenset({"s", "label"})] == 5 and updated[frozenset({"note"})] == 7


def test_widen_key_and_partition_column(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    """An int key, also the bucket source, widened to bigint: old data files, old delete files (for
    equality deletes: int keys) and 4-byte manifest bounds meet long keys in later writes."""
    df = lake.spark.createDataFrame([(k, f"v{k}") for k in range(20)], "k int, v string")
    table = lake.create_table("db.w", df, partition_by=["bucket(4, k)"], identifier=["k"])
    before = lake.spark.createDataFrame([(k, "old") for k in (1, 2, 25)], "k int, v string")
    rowops.merge(before, table, on=["k"], strategy=strategy)
    expected = {k: f"v{k}" for k in range(20)} | {1: "old", 2: "old", 25: "old"}
    table.widen_column("k", "bigint")
    big = 3_000_000_000
    source = lake.spark.createDataFrame([(2, "w"), (3, "w"), (big, "w")], "k long, v string")
    rowops.merge(source, table, on=["k"], strategy=strategy)
    expected |= {2: "w", 3: "w", big: "w"}
    if strategy != "equality-delete":
        rowops.delete(table, where="k IN (4, 25)", strategy=strategy)
        del expected[4], expected[25]
        assert_readers_agree(table, list(expected.items()), ["k", "v"], java)
        return
    # DuckDB 1.5's iceberg_scan fails on equality-delete files older than their key's widening
    # ("Expected vector of type INT64, but found vector of type INT32"); rowops and Iceberg Java agree
    assert sorted(rowops_rows(table)) == sorted(expected.items())
    if java is not None:
        assert_same_rows(
            list(expected.items()), java.read(table.metadata_location, None, {}), ["k", "v"], "java"
        )


@pytest.fixture()
def sql_catalog(tmp_path: Path) -> SqlCatalog:
    catalog = SqlCatalog(
        "sql", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/warehouse"
    )
    catalog.create_namespace("db")
    return catalog


def test_schema_changes_through_a_pyiceberg_catalog(spark, sql_catalog, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """On a table that stays in a pyiceberg catalog: one ``commit_table`` per change (with
    ``AssertCurrentSchemaId``), a concurrent schema change made by pyiceberg itself is a conflict, and
    pyiceberg reads back rows rowops wrote under the evolved schema."""
    rows = [catalog_row(k) for k in range(10)]
    pyiceberg_table(sql_catalog, rows)
    lake = rowops.Lakehouse.from_catalog(sql_catalog, spark=spark)
    table = lake.table("db.t")
    table.widen_column("n", "bigint")
    table.add_columns({"note": "string"})
    evolve = table.scope.evolve_schema

    def pyiceberg_first(*args: Any, **kwargs: Any) -> Any:
        with sql_catalog.load_table("db.t").update_schema() as update:
            update.rename_column("v", "value")
        return evolve(*args, **kwargs)

    monkeypatch.setattr(table.scope, "evolve_schema", pyiceberg_first)
    with pytest.raises(CommitConflictError) as caught:
        table.drop_column("note")
    monkeypatch.undo()
    assert caught.value.kind == ConflictKind.SCHEMA_CHANGED
    assert table.schema.column_names == ["k", "value", "n", "note"]
    source = spark.createDataFrame(
        [(3, "x", 7_000_000_000, "hi"), (50, "y", None, None)], "k long, value string, n long, note string"
    )
    rowops.merge(source, table, on=["k"], strategy="position-delete")
    expected = {r[0]: (*r, None) for r in rows} | {
        3: (3, "x", 7_000_000_000, "hi"),
        50: (50, "y", None, None),
    }
    scanned = sql_catalog.load_table("db.t").scan().to_arrow().to_pylist()
    assert sorted(tuple(r.values()) for r in scanned) == sorted(expected.values())
