"""Tables whose manifests name files in other path forms, and sessions whose default file system is not
``file:``: rows are matched exactly whatever the form, or the operation fails before committing.

Tables written by PyIceberg record ``file:///...`` paths; rowops writes ``file:/...`` (as Iceberg Java
does) and reads every local form (``/x``, ``file:/x``, ``file:///x``).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table as IcebergTable

import rowops
from rowops.catalog.log import TableEntry
from rowops.errors import InvalidInputError, UnsupportedStorageError, WriteVerificationError
from rowops.exec.spark.types import to_spark_schema
from tests.oracles import assert_same_rows
from tests.oracles.test_oracles import (
    CASE_NAMES,
    COLUMNS,
    PARTITIONED,
    SCHEMA,
    Case,
    LocalCatalog,
    build_cases,
    canon,
    make_rows,
    to_arrow,
)
from tests.readers import assert_readers_agree, rowops_rows
from tests.spark.tables import COLUMNS as ROW_COLUMNS
from tests.spark.tables import fingerprint, frame, make_row

Row = tuple[Any, ...]
KEYED = Schema(*SCHEMA.fields, identifier_field_ids=[1])


class KeyedCatalog(LocalCatalog):
    """The oracles' catalog, creating tables keyed by ``id`` (so equality deletes can express upserts)."""

    def create_table(  # type: ignore[override]
        self, identifier: str, location: str, spec: PartitionSpec = UNPARTITIONED_PARTITION_SPEC
    ) -> IcebergTable:
        staged = self._create_staged_table(identifier, KEYED, location, spec)
        self._write_metadata(staged.metadata, staged.io, staged.metadata_location)
        self._pointers[staged.name()] = staged.metadata_location
        return self.load_table(identifier)


def register(lake: rowops.Lakehouse, name: str, metadata_location: str) -> rowops.Table:
    """Point lake table ``name`` at an existing Iceberg metadata file (a test-only import)."""
    latest = lake.catalog.log.latest()
    table_uuid = lake.catalog.read_metadata(metadata_location).table_uuid
    entry = TableEntry(metadata_location, str(table_uuid))
    txn = {"id": str(uuid.uuid4()), "commits": [{"table": name, "operation": "register"}]}
    lake.catalog.log.commit(latest, {name: entry}, txn)
    return lake.table(name)


def pyiceberg_table(root: Path, name: str, rows: list[Row], partitioned: bool = False) -> IcebergTable:
    """A table written by PyIceberg at a ``file://`` location (so its manifests hold ``file:///`` paths)."""
    catalog = KeyedCatalog()
    spec = PARTITIONED if partitioned else UNPARTITIONED_PARTITION_SPEC
    table = catalog.create_table(name, "file://" + str(root / name.replace(".", "/")), spec)
    table.append(to_arrow(rows))
    return table


def data_paths(table: rowops.Table) -> list[str]:
    return [f.data_file.file_path for f in table.files().data]


@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
def test_merge_on_pyiceberg_table(lake, tmp_path, strategy, partitioned, java) -> None:  # type: ignore[no-untyped-def]
    rows = make_rows(range(40))
    source = pyiceberg_table(tmp_path / "pyiceberg", "db.t", rows, partitioned)
    table = register(lake, "db.t", source.metadata_location)
    assert all(p.startswith("file:///") for p in data_paths(table))
    changes = [(r[0], 1000 + r[0], *r[2:]) for r in rows[::4]] + make_rows(range(100, 105))
    df = lake.spark.createDataFrame(changes, to_spark_schema(SCHEMA))
    if partitioned and strategy == "equality-delete":
        with pytest.raises(rowops.errors.UnsupportedStrategyError):
            rowops.merge(df, table, on=["id"], strategy=strategy)
        return
    result = rowops.merge(df, table, on=["id"], strategy=strategy)
    expected = {r[0]: r for r in rows} | {r[0]: r for r in changes}
    if strategy != "equality-delete":
        assert (result.rows_updated, result.rows_inserted) == (10, 5)
    assert_readers_agree(table, canon(list(expected.values())), COLUMNS, java)
    new_paths = [p for p in data_paths(table) if not p.startswith("file:///")]
    assert new_paths and all(p.startswith("file:/") and not p.startswith("file://") for p in new_paths)


def test_update_and_delete_on_pyiceberg_table(lake, tmp_path, strategy, java) -> None:  # type: ignore[no-untyped-def]
    if strategy == "equality-delete":
        pytest.skip("UPDATE/DELETE by condition cannot be expressed as equality deletes")
    rows = make_rows(range(40))
    source = pyiceberg_table(tmp_path / "pyiceberg", "db.t", rows)
    table = register(lake, "db.t", source.metadata_location)
    rowops.update(table, {"qty": "qty + 1"}, where="id % 3 = 0", strategy=strategy)
    rowops.delete(table, where="id >= 30", strategy=strategy)
    expected = [
        (r[0], r[1] + 1 if r[0] % 3 == 0 and r[1] is not None else r[1], *r[2:]) for r in rows if r[0] < 30
    ]
    assert_readers_agree(table, canon(expected), COLUMNS, java)


@pytest.mark.parametrize("uri", ["gs://b/l", "abfs://c@a/l", "hdfs://nn/l"])
def test_unsupported_storage_uri_is_a_clear_error(spark, tmp_path, monkeypatch, uri) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    for path in (uri, Path(uri)):
        with pytest.raises(UnsupportedStorageError, match="cannot serve") as caught:
            rowops.Lakehouse(path, spark=spark)
        assert isinstance(caught.value, InvalidInputError) and "\nHelp: " in str(caught.value)
    assert list(tmp_path.iterdir()) == [], "no local folder may be created for a URI"


@pytest.mark.parametrize("form", ["file:", "file://", "file://localhost"])
def test_file_uri_is_the_local_path(spark, tmp_path, form) -> None:  # type: ignore[no-untyped-def]
    lake = rowops.Lakehouse(form + str(tmp_path / "lake"), spark=spark)
    assert lake.root == tmp_path / "lake" and lake.root.is_dir()


def test_write_that_misses_rows_fails_before_commit(lake, strategy, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    table = lake.create_table(
        "db.t",
        frame(lake.spark, [make_row(k) for k in range(40)]),
        partition_by=["bucket(4, k)"],
        identifier=["k"],
    )
    changes = frame(lake.spark, [make_row(k, 1) for k in range(0, 50, 3)])
    monkeypatch.setenv("ROWOPS_FAULT", "hide-written-file")
    before = fingerprint(lake.root)
    with pytest.raises(WriteVerificationError, match="executors wrote where the driver cannot read"):
        rowops.merge(changes, table, on=["k"], strategy=strategy)
    assert fingerprint(lake.root) == before
    with pytest.raises(WriteVerificationError):
        table.append(changes)
    assert fingerprint(lake.root) == before


def test_other_default_file_system(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    """A session whose ``fs.defaultFS`` is not ``file:``: rowops still reads and writes the lake's files
    (never a scheme-less path), deleted rows stay deleted, and manifests hold ``file:/`` URIs."""
    conf = lake.spark.sparkContext._jsc.hadoopConfiguration()
    previous = conf.get("fs.defaultFS")
    rows = [make_row(k) for k in range(40)]
    conf.set("fs.defaultFS", "hdfs://nowhere.invalid:9000")
    try:
        table = lake.create_table(
            "db.t", frame(lake.spark, rows), partition_by=["bucket(4, k)"], identifier=["k"]
        )
        changes = [make_row(k, 1) for k in range(0, 50, 3)]
        rowops.merge(frame(lake.spark, changes), table, on=["k"], strategy=strategy)
        if strategy != "equality-delete":
            rowops.delete(table, where="k % 5 = 0", strategy=strategy)
        expected = {r[0]: r for r in rows} | {r[0]: r for r in changes}
        if strategy != "equality-delete":
            expected = {k: r for k, r in expected.items() if k % 5 != 0}
        got = [tuple(r) for r in table.to_df().select(*ROW_COLUMNS[:3]).collect()]
        assert sorted(got, key=repr) == sorted((r[:3] for r in expected.values()), key=repr)
    finally:
        conf.set("fs.defaultFS", previous)
    paths = [f.data_file.file_path for f in table.files().data + table.files().deletes]
    assert paths and all(p.startswith("file:/") and not p.startswith("file://") for p in paths)
    assert_readers_agree(table, list(expected.values()), ROW_COLUMNS, java)


@pytest.fixture(scope="module")
def oracle_cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Case]:
    """The oracles' self-test tables (written by PyIceberg with plain paths, delete files by hand)."""
    return build_cases(tmp_path_factory.mktemp("oracle-tables"))


@pytest.mark.parametrize("name", CASE_NAMES)
def test_rowops_reads_tables_of_other_writers(lake, oracle_cases, name) -> None:  # type: ignore[no-untyped-def]
    """Includes an equality delete scoped to one partition whose key also lives in another partition:
    the row in the other partition stays (Iceberg's scoping rule; DuckDB 1.5.5 gets this one wrong)."""
    case = oracle_cases[name]
    table = register(lake, "db.t", case.metadata_location)
    assert_same_rows(case.expected, rowops_rows(table, case.snapshot_id), COLUMNS, name)


def test_merge_over_partition_scoped_equality_delete(lake, oracle_cases, strategy, java) -> None:  # type: ignore[no-untyped-def]
    if strategy == "equality-delete":
        pytest.skip("the table has no identifier columns (and a partition column outside the key)")
    case = oracle_cases["equality_deletes_partitioned"]
    table = register(lake, "db.t", case.metadata_location)
    expected = {r[0]: r for r in case.expected}
    (delete_file,) = table.files().equality_deletes
    deleted_ids = set(pq.read_table(delete_file.path)["id"].to_pylist())  # one lives in another partition
    changes = [(i, 7, *expected[i][2:]) for i in sorted(expected)[::3] if i not in deleted_ids]
    rowops.merge(
        lake.spark.createDataFrame(changes, to_spark_schema(SCHEMA)), table, on=["id"], strategy=strategy
    )
    expected |= {r[0]: r for r in changes}
    rows = canon(list(expected.values()))
    assert_same_rows(rows, rowops_rows(table), COLUMNS, "rowops")
    if java is not None:
        assert_same_rows(rows, java.read(table.metadata_location), COLUMNS, "iceberg-java")
