"""Tables of existing Iceberg catalogs: registered into a lake, or operated on in their own catalog.

* A table created and written by PyIceberg in a SQLite ``SqlCatalog`` is updated through
  ``Lakehouse.from_catalog`` (each operation one ``commit_table``) and read back by PyIceberg through
  the same catalog, DuckDB and Iceberg's Java reader.
* A PyIceberg-written table (``file:///`` paths) registered with ``lake.register_table`` in every path
  form keeps its rows through every operation.
* A table created by Iceberg's Java runtime in a Hadoop catalog directory is registered, updated and
  read back by Iceberg Java (at the new metadata file) and DuckDB.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import IntegerType, LongType, NestedField, StringType

import rowops
from rowops.catalog.external import CatalogScope
from rowops.errors import (
    CatalogFeatureError,
    CommitConflictError,
    MetadataNotReadableError,
    NoSuchTableError,
    TableAlreadyExistsError,
    UnsupportedTableFormatError,
)
from rowops.meta.paths import normalize_path
from rowops.request.identifiers import TableIdentifier
from tests.oracles.duckdb_reader import read_duckdb
from tests.readers import assert_readers_agree
from tests.spark.conftest import STRATEGIES
from tests.spark.tables import fingerprint

Row = tuple[Any, ...]
COLUMNS = ["k", "v", "n"]
SCHEMA = Schema(
    NestedField(1, "k", LongType(), required=True),
    NestedField(2, "v", StringType(), required=False),
    NestedField(3, "n", IntegerType(), required=False),
    identifier_field_ids=[1],
)
SPARK_SCHEMA = "k bigint, v string, n int"
REPO = Path(__file__).resolve().parents[2]


def row(k: int, version: int = 0) -> Row:
    return (k, f"v{k}" if version == 0 else f"v{k}.{version}", None if k % 5 == 0 else k % 7 + version)


def arrow(rows: list[Row]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(COLUMNS, r, strict=True)) for r in rows], SCHEMA.as_arrow())


@pytest.fixture()
def sql_catalog(tmp_path: Path) -> SqlCatalog:
    """A SQLite SqlCatalog with a file:// warehouse (PyIceberg writes file:/// paths there)."""
    catalog = SqlCatalog(
        "pyiceberg_sql", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/warehouse"
    )
    catalog.create_namespace("db")
    return catalog


def pyiceberg_table(catalog: SqlCatalog, rows: list[Row]) -> Any:
    """``db.t`` created by PyIceberg and written in two appends (two data files)."""
    table = catalog.create_table("db.t", SCHEMA)
    half = len(rows) // 2
    table.append(arrow(rows[:half]))
    table.append(arrow(rows[half:]))
    return catalog.load_table("db.t")


def merge_changes(lake: Any, table: rowops.Table, keys: range, strategy: str) -> tuple[list[Row], Any]:
    """Upsert version-1 rows of every 3rd key of ``keys`` plus new keys 100..104."""
    changes = [row(k, 1) for k in keys if k % 3 == 0] + [row(k) for k in range(100, 105)]
    df = lake.spark.createDataFrame(changes, SPARK_SCHEMA)
    result = rowops.merge(df, table, on=["k"], strategy=strategy)
    return changes, result


def catalog_rows(catalog: SqlCatalog) -> list[Row]:
    return sorted(tuple(r.values()) for r in catalog.load_table("db.t").scan().to_arrow().to_pylist())


# -- (a) operating on a table that stays in a pyiceberg SqlCatalog -----------------------------------
def test_merge_through_sql_catalog(spark, sql_catalog, strategy, java) -> None:  # type: ignore[no-untyped-def]
    rows = [row(k) for k in range(30)]
    before = pyiceberg_table(sql_catalog, rows)
    lake = rowops.Lakehouse.from_catalog(sql_catalog, spark=spark)
    table = lake.table("db.t")
    changes, result = merge_changes(lake, table, range(30), strategy)
    expected = sorted(({r[0]: r for r in rows} | {r[0]: r for r in changes}).values())

    committed = sql_catalog.load_table("db.t")
    assert committed.metadata.current_snapshot_id == result.snapshot_id
    assert committed.metadata.snapshot_by_id(result.snapshot_id).parent_snapshot_id == (
        before.metadata.current_snapshot_id
    )
    assert committed.metadata_location == table.metadata_location != before.metadata_location
    assert_readers_agree(table, expected, COLUMNS, java)
    if strategy != "equality-delete":  # PyIceberg 0.12 cannot apply equality deletes
        assert catalog_rows(sql_catalog) == expected


def test_update_and_delete_through_sql_catalog(spark, sql_catalog, strategy, java) -> None:  # type: ignore[no-untyped-def]
    if strategy == "equality-delete":
        pytest.skip("UPDATE/DELETE by condition cannot be expressed as equality deletes")
    rows = [row(k) for k in range(30)]
    pyiceberg_table(sql_catalog, rows)
    lake = rowops.Lakehouse.from_catalog(sql_catalog, spark=spark)
    table = lake.table("db.t")
    updated = rowops.update(table, {"v": "concat(v, '!')"}, where="k % 4 = 0", strategy=strategy)
    deleted = rowops.delete(table, where="k >= 25", strategy=strategy)
    assert (updated.rows_updated, deleted.rows_deleted) == (8, 5)
    expected = sorted((r[0], r[1] + "!" if r[0] % 4 == 0 else r[1], r[2]) for r in rows if r[0] < 25)
    snapshots = [s.snapshot_id for s in sql_catalog.load_table("db.t").metadata.snapshots]
    assert snapshots[-2:] == [updated.snapshot_id, deleted.snapshot_id]
    assert catalog_rows(sql_catalog) == expected
    assert_readers_agree(table, expected, COLUMNS, java)


class ConcurrentScope(CatalogScope):
    """The catalog scope, with another writer's commit landing after rowops read and wrote its files."""

    def __init__(self, catalog: SqlCatalog, concurrent: Callable[[], None]) -> None:
        super().__init__(catalog)
        self.concurrent = concurrent

    def commit_delta(self, *args: Any, **kwargs: Any) -> Any:
        self.concurrent()
        return super().commit_delta(*args, **kwargs)


def test_concurrent_pyiceberg_append_is_rebased(spark, sql_catalog) -> None:  # type: ignore[no-untyped-def]
    rows = [row(k) for k in range(30)]
    pyiceberg_table(sql_catalog, rows)
    lake = rowops.Lakehouse.from_catalog(sql_catalog, spark=spark)
    appended = [row(k) for k in range(200, 205)]  # outside the MERGE's key range: no conflict
    landed: list[int] = []

    def append() -> None:
        other = sql_catalog.load_table("db.t")
        other.append(arrow(appended))
        landed.append(sql_catalog.load_table("db.t").metadata.current_snapshot_id)

    table = rowops.Table(lake, TableIdentifier.parse("db.t"), ConcurrentScope(sql_catalog, append))
    changes, result = merge_changes(lake, table, range(30), "position-delete")
    metadata = sql_catalog.load_table("db.t").metadata
    assert metadata.current_snapshot_id == result.snapshot_id
    assert metadata.snapshot_by_id(result.snapshot_id).parent_snapshot_id == landed[0]
    expected = sorted(({r[0]: r for r in rows + appended} | {r[0]: r for r in changes}).values())
    assert catalog_rows(sql_catalog) == expected


def test_concurrent_pyiceberg_delete_is_a_conflict(spark, sql_catalog, tmp_path) -> None:  # type: ignore[no-untyped-def]
    rows = [row(k) for k in range(30)]
    pyiceberg_table(sql_catalog, rows)
    lake = rowops.Lakehouse.from_catalog(sql_catalog, spark=spark)
    state: dict[str, Any] = {}

    def delete() -> None:  # PyIceberg rewrites the file holding k = 3, which the MERGE changes too
        sql_catalog.load_table("db.t").delete("k = 3")
        state["files"] = fingerprint(tmp_path / "warehouse")
        state["rows"] = catalog_rows(sql_catalog)

    table = rowops.Table(lake, TableIdentifier.parse("db.t"), ConcurrentScope(sql_catalog, delete))
    with pytest.raises(CommitConflictError, match="conflicts with concurrent snapshot") as caught:
        merge_changes(lake, table, range(30), "copy-on-write")
    assert caught.value.retry_safe and "\nHelp: " in str(caught.value)
    # the hook ran after rowops staged its data files (in directories below data/): all of them are gone
    staged = {p for p in state["files"] if len(Path(p).parts) > 4 and Path(p).parts[2] == "data"}
    assert staged, "rowops had staged its files when the concurrent commit landed"
    others = {p: h for p, h in state["files"].items() if p not in staged}
    assert fingerprint(tmp_path / "warehouse") == others, "rowops must leave no file behind"
    assert catalog_rows(sql_catalog) == state["rows"] == [r for r in rows if r[0] != 3]
    changes, _ = merge_changes(lake, lake.table("db.t"), range(30), "copy-on-write")  # a retry works
    expected = sorted(({r[0]: r for r in rows if r[0] != 3} | {r[0]: r for r in changes}).values())
    assert catalog_rows(sql_catalog) == expected


def test_create_table_and_properties_through_catalog(spark, sql_catalog) -> None:  # type: ignore[no-untyped-def]
    lake = rowops.Lakehouse.from_catalog(sql_catalog, spark=spark)
    rows = [row(k) for k in range(12)]
    table = lake.create_table(
        "db.made", spark.createDataFrame(rows, SPARK_SCHEMA), partition_by=["bucket(2, k)"], identifier=["k"]
    )
    assert lake.list_tables("db") == ["db.made"] == lake.list_tables()  # no namespace: every table
    loaded = sql_catalog.load_table("db.made")
    assert loaded.schema().identifier_field_names() == {"k"} and len(loaded.spec().fields) == 1
    assert sorted(tuple(r.values()) for r in loaded.scan().to_arrow().to_pylist()) == rows
    table.set_properties(**{"rowops.read-weight": "3"})
    assert sql_catalog.load_table("db.made").properties["rowops.read-weight"] == "3"
    first = table.current_snapshot_id
    appended = table.append(spark.createDataFrame([row(50)], SPARK_SCHEMA))
    assert sql_catalog.load_table("db.made").metadata.current_snapshot_id == appended.snapshot_id != first
    table.rollback_to(first)  # a table-level rollback is one catalog commit too
    assert sql_catalog.load_table("db.made").metadata.current_snapshot_id == first
    with pytest.raises(TableAlreadyExistsError):
        lake.create_table("db.made", spark.createDataFrame(rows, SPARK_SCHEMA))
    with pytest.raises(NoSuchTableError, match="pyiceberg_sql"):
        lake.table("db.missing")


def test_lake_log_features_are_clear_errors_on_a_catalog(spark, sql_catalog) -> None:  # type: ignore[no-untyped-def]
    lake = rowops.Lakehouse.from_catalog(sql_catalog, spark=spark)
    calls: list[Callable[[], Any]] = [
        lake.transaction,
        lake.begin,
        lake.history,
        lambda: lake.at(version=1),
        lambda: lake.rollback_to(1),
        lake.cleanup,
        lambda: lake.version,
    ]
    for call in calls:
        with pytest.raises(CatalogFeatureError, match="rowops' own lake log") as caught:
            call()
        assert "\nHelp: " in str(caught.value)


# -- (c) PyIceberg-written tables registered into a lake ----------------------------------------------
FORMS = {
    "file:///": lambda loc: loc,
    "file:/": lambda loc: "file:" + normalize_path(loc),
    "plain": normalize_path,
}


@pytest.mark.parametrize("form", list(FORMS))
def test_registered_pyiceberg_table_keeps_rows(lake, sql_catalog, strategy, form, java) -> None:  # type: ignore[no-untyped-def]
    rows = [row(k) for k in range(30)]
    source = pyiceberg_table(sql_catalog, rows)
    assert source.location().startswith("file:///")
    table = lake.register_table("db.t", FORMS[form](source.metadata_location))
    assert table.metadata_location == FORMS[form](source.metadata_location)
    changes, result = merge_changes(lake, table, range(30), strategy)
    if strategy != "equality-delete":
        assert (result.rows_updated, result.rows_inserted) == (10, 5)
    expected = sorted(({r[0]: r for r in rows} | {r[0]: r for r in changes}).values())
    assert_readers_agree(table, expected, COLUMNS, java)
    new_location = table.metadata_location  # under the table's own location, as PyIceberg spells it
    assert new_location.startswith(source.location() + "/metadata/") and "//metadata" not in new_location
    assert Path(normalize_path(new_location)).is_file()
    assert catalog_rows(sql_catalog) == rows, "the catalog the table came from is not changed"


def test_registered_pyiceberg_table_update_and_delete(lake, sql_catalog, strategy, java) -> None:  # type: ignore[no-untyped-def]
    if strategy == "equality-delete":
        pytest.skip("UPDATE/DELETE by condition cannot be expressed as equality deletes")
    rows = [row(k) for k in range(30)]
    table = lake.register_table("db.t", pyiceberg_table(sql_catalog, rows).metadata_location)
    rowops.update(table, {"n": "coalesce(n, 0) + 10"}, where="k < 10", strategy=strategy)
    rowops.delete(table, where="k % 6 = 1", strategy=strategy)
    expected = sorted((r[0], r[1], (r[2] or 0) + 10 if r[0] < 10 else r[2]) for r in rows if r[0] % 6 != 1)
    assert_readers_agree(table, expected, COLUMNS, java)
    assert lake.history()[0].tables == {"db.t": ["register"]}


def test_registered_table_in_a_transaction(lake, sql_catalog) -> None:  # type: ignore[no-untyped-def]
    rows = [row(k) for k in range(10)]
    lake.register_table("db.t", pyiceberg_table(sql_catalog, rows).metadata_location)
    with lake.transaction() as tx:
        tx.table("db.t").delete(where="k < 2", strategy="position-delete")
        tx.table("db.t").update({"v": "'x'"}, where="k = 9", strategy="position-delete")
    expected = [r for r in rows if r[0] >= 2 and r[0] != 9] + [(9, "x", rows[9][2])]
    assert sorted(
        tuple(r.values()) for r in read_duckdb(lake.table("db.t").metadata_location).to_pylist()
    ) == sorted(expected)
    assert lake.history()[-1].tables == {"db.t": ["delete", "update"]}


def test_register_table_errors_change_nothing(lake, sql_catalog, tmp_path) -> None:  # type: ignore[no-untyped-def]
    source = pyiceberg_table(sql_catalog, [row(k) for k in range(4)])
    lake.register_table("db.t", source.metadata_location)
    not_metadata = tmp_path / "not-metadata.json"
    not_metadata.write_text('{"hello": 1}')
    before = fingerprint(lake.root)
    with pytest.raises(TableAlreadyExistsError):
        lake.register_table("db.t", source.metadata_location)
    missing = str(tmp_path / "nowhere" / "v9.metadata.json")
    for location, message in [(missing, "No Iceberg metadata file at"), (str(not_metadata), "not readable")]:
        with pytest.raises(MetadataNotReadableError, match=message) as caught:
            lake.register_table("db.other", location)
        assert location in str(caught.value) and "\nHelp: " in str(caught.value)
    v1 = sql_catalog.create_table("db.v1", SCHEMA, properties={"format-version": "1"})
    with pytest.raises(UnsupportedTableFormatError, match="format v1") as caught:
        lake.register_table("db.other", v1.metadata_location)
    assert "\nHelp: " in str(caught.value)
    assert fingerprint(lake.root) == before
    assert lake.list_tables("db") == ["db.t"]
    with pytest.raises(UnsupportedTableFormatError):
        rowops.Lakehouse.from_catalog(sql_catalog, spark=lake.spark).table("db.v1")


# -- (b) a table of Iceberg's Java runtime in a Hadoop catalog ----------------------------------------
@pytest.fixture(scope="module")
def hadoop_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """One table per strategy, created and written by Iceberg Java (Spark + runtime jar, one JVM) in a
    Hadoop catalog: strategy -> the table's current ``vN.metadata.json``."""
    work = tmp_path_factory.mktemp("hadoop")
    names = {s: s.replace("-", "_") for s in STRATEGIES}
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYSPARK_PYTHON": sys.executable}
    writer = str(REPO / "tests" / "spark" / "hadoop_catalog_writer.py")
    done = subprocess.run(
        [sys.executable, writer, f"file:{work}/warehouse", "30", *names.values()],
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    locations = done.stdout.strip().splitlines()[-len(names) :]
    for name, location in zip(names.values(), locations, strict=True):
        assert location == f"file:{work}/warehouse/db/{name}/metadata/v4.metadata.json", location
        hint = work / "warehouse" / "db" / name / "metadata" / "version-hint.text"
        assert hint.read_text().strip() == "4"  # create, identifier fields, two inserts
    return dict(zip(names, locations, strict=True))


def test_hadoop_catalog_table_registered(lake, strategy, java, request) -> None:  # type: ignore[no-untyped-def]
    if java is None:
        pytest.skip("needs Iceberg's Java runtime (ROWOPS_SKIP_JAVA is set)")
    hadoop_table = request.getfixturevalue("hadoop_tables")[strategy]
    table = lake.register_table("db.t", hadoop_table)
    rows = [(k, f"v{k}", k % 7) for k in range(30)]
    assert_readers_agree(table, rows, COLUMNS, java)
    changes, _ = merge_changes(lake, table, range(30), strategy)
    expected = ({r[0]: r for r in rows} | {r[0]: r for r in changes}).values()
    if strategy != "equality-delete":
        rowops.update(table, {"v": "upper(v)"}, where="k >= 20", strategy=strategy)
        rowops.delete(table, where="k < 3", strategy=strategy)
        expected = [(r[0], r[1].upper() if r[0] >= 20 else r[1], r[2]) for r in expected if r[0] >= 3]
    checked = assert_readers_agree(table, sorted(expected), COLUMNS, java)
    assert checked["java"] == "ok" and checked["duckdb"] == "ok"
    metadata_dir = hadoop_table.rsplit("/", 1)[0]
    assert table.metadata_location.startswith(metadata_dir + "/")
    assert read_duckdb(hadoop_table, None).num_rows == 30, "the Hadoop catalog's own version is unchanged"
