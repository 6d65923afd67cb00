"""Tables whose manifests name files in other path forms, and sessions whose default file system is not
``file:``: rows are matched exactly whatever the form, or the operation fails before committing.

Tables written by PyIceberg record ``file:///...`` paths; rowops writes ``file:/...`` (as Iceberg Java
does) and reads every local form (``/x``, ``file:/x``, ``file:///x``).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table as IcebergTable

import rowops
from rowops.catalog.log import TableEntry
from rowops.exec.types import to_spark_schema
from tests.oracles.test_oracles import (
    COLUMNS,
    PARTITIONED,
    SCHEMA,
    LocalCatalog,
    canon,
    make_rows,
    to_arrow,
)
from tests.readers import assert_readers_agree

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
    entry = TableEntry(metadata_location, str(uuid.uuid4()))
    txn = {"id": str(uuid.uuid4()), "commits": [{"table": name, "operation": "register"}]}
    lake.catalog.log.commit(latest, {**latest.tables, name: entry}, txn)
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
