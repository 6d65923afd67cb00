"""Iceberg's metadata tables of a table, and the lake log's versions, as Spark DataFrames.

The tables come from pyiceberg's ``InspectTable`` (``snapshots``, ``history``, ``refs``, ``files``,
``data_files``, ``delete_files``, ``manifests``, ``entries``, ``partitions``,
``metadata_log_entries`` and the ``all_*`` variants): the same names and columns as Iceberg Java's
metadata tables (``db.t.snapshots`` in Iceberg's Spark SQL), read from the table's manifests on the
driver, as any planning does, and handed to Spark (``compat.frame_of_arrow``).
``position_deletes`` is table data: its rows are read from the delete files by Spark's executors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyiceberg.catalog.noop import NoopCatalog
from pyiceberg.manifest import DataFileContent
from pyiceberg.table import Table as IcebergTable

from rowops.catalog.history import LakeCommit
from rowops.catalog.tables import LoadedTable
from rowops.errors import InvalidInputError
from rowops.exec.reading.deletes_table import position_delete_rows
from rowops.exec.spark.compat import frame_of_arrow
from rowops.meta.files import live_files
from rowops.meta.inspect_tables import IcebergInspect, without_empty_partition

if TYPE_CHECKING:
    from rowops.exec.spark.frames import DataFrame, SparkSession
    from rowops.run.target import TableTarget

METADATA_TABLES = (
    "snapshots",
    "history",
    "refs",
    "files",
    "data_files",
    "delete_files",
    "manifests",
    "entries",
    "partitions",
    "metadata_log_entries",
    "all_manifests",
    "all_files",
    "all_data_files",
    "all_delete_files",
)
_BY_SNAPSHOT = {"files", "data_files", "delete_files", "entries", "partitions"}


def metadata_table(table: TableTarget, name: str, snapshot_id: int | None = None) -> DataFrame:
    """Iceberg's metadata table ``name`` of ``table`` (as of ``snapshot_id`` where Iceberg allows one)."""
    if name == "position_deletes":
        return position_deletes(table, snapshot_id)
    if name not in METADATA_TABLES:
        known = ", ".join((*METADATA_TABLES, "position_deletes"))
        raise InvalidInputError(
            f"No metadata table {name!r}", help=f"Iceberg's metadata tables are: {known}."
        )
    iceberg = _iceberg_table(table, table.load())
    kwargs: dict[str, Any] = {"snapshot_id": snapshot_id} if snapshot_id is not None else {}
    if kwargs and name not in _BY_SNAPSHOT:
        raise InvalidInputError(
            f"Metadata table {name} has no snapshot_id",
            help=f"Only {', '.join(sorted(_BY_SNAPSHOT))} are read as of a snapshot.",
        )
    arrow: pa.Table = without_empty_partition(getattr(IcebergInspect(iceberg), name)(**kwargs))
    return frame_of_arrow(table.lake.spark, arrow)


def _iceberg_table(table: TableTarget, loaded: LoadedTable) -> IcebergTable:
    """pyiceberg's read-only view of the loaded table state (its catalog does nothing)."""
    return IcebergTable(
        loaded.identifier.path_parts,
        loaded.metadata,
        loaded.metadata_location,
        table.lake.catalog.io,
        NoopCatalog("rowops"),
    )


def position_deletes(table: TableTarget, snapshot_id: int | None = None) -> DataFrame:
    """Iceberg's ``position_deletes`` table: one row per deleted position of a live position-delete file
    or deletion vector (``file_path``, ``pos``, ``row``, ``partition``, ``spec_id``, ``delete_file_path``)."""
    loaded = table.load()
    files = live_files(loaded.metadata, table.lake.catalog.io, snapshot_id)
    deletes = [f for f in files.deletes if f.content == DataFileContent.POSITION_DELETES]
    kwargs: dict[str, Any] = {"snapshot_id": snapshot_id} if snapshot_id is not None else {}
    located = without_empty_partition(IcebergInspect(_iceberg_table(table, loaded)).files(**kwargs))
    located = located.select([c for c in ("file_path", "partition", "spec_id") if c in located.schema.names])
    return position_delete_rows(table.lake.spark, loaded.metadata, deletes, files.data, located)


_VERSIONS = pa.schema(
    [
        ("version", pa.int64()),
        ("committed_at", pa.timestamp("ms", tz="UTC")),
        ("transaction_id", pa.string()),
        ("isolation", pa.string()),
        ("batch", pa.string()),
        ("tables", pa.map_(pa.string(), pa.list_(pa.string()))),
        ("rows_inserted", pa.int64()),
        ("rows_updated", pa.int64()),
        ("rows_deleted", pa.int64()),
    ]
)


def lake_versions(spark: SparkSession, commits: list[LakeCommit]) -> DataFrame:
    """The lake log's versions (``Lakehouse.history``) as a DataFrame, oldest first."""
    rows = [
        {
            "version": c.version,
            "committed_at": c.timestamp_ms,
            "transaction_id": c.transaction_id,
            "isolation": c.isolation,
            "batch": c.batch,
            "tables": list(c.tables.items()),
            "rows_inserted": c.rows_inserted,
            "rows_updated": c.rows_updated,
            "rows_deleted": c.rows_deleted,
        }
        for c in commits
    ]
    return frame_of_arrow(spark, pa.Table.from_pylist(rows, schema=_VERSIONS))
