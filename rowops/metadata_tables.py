"""``table.inspect`` and ``lake.inspect``: Iceberg's metadata tables and the lake log as DataFrames.

``t.inspect.snapshots()``, ``history()``, ``refs()``, ``files()``, ``data_files()``, ``delete_files()``,
``manifests()``, ``entries()``, ``partitions()``, ``position_deletes()``, ``metadata_log_entries()`` and
``all_manifests()``, ``all_files()``, ``all_data_files()``, ``all_delete_files()`` carry the names and
columns of Iceberg's metadata tables (``SELECT * FROM db.t.snapshots`` in Iceberg's Spark SQL), so
queries written for Iceberg port; ``lake.inspect.versions()`` is the lake log (``run/inspect.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rowops.catalog.history import LakeCommit
from rowops.run import inspect as inspect_run

if TYPE_CHECKING:
    from rowops.exec.spark.frames import DataFrame, SparkSession
    from rowops.run.target import TableTarget


class TableInspector:
    """Iceberg's metadata tables of one table handle (as of its lake version), as Spark DataFrames."""

    def __init__(self, table: TableTarget) -> None:
        self._table = table

    def table(self, name: str, snapshot_id: int | None = None) -> DataFrame:
        """The metadata table ``name`` (``"snapshots"``, ``"files"``, ...)."""
        return inspect_run.metadata_table(self._table, name, snapshot_id)

    def snapshots(self) -> DataFrame:
        return self.table("snapshots")

    def history(self) -> DataFrame:
        return self.table("history")

    def refs(self) -> DataFrame:
        return self.table("refs")

    def files(self, snapshot_id: int | None = None) -> DataFrame:
        return self.table("files", snapshot_id)

    def data_files(self, snapshot_id: int | None = None) -> DataFrame:
        return self.table("data_files", snapshot_id)

    def delete_files(self, snapshot_id: int | None = None) -> DataFrame:
        return self.table("delete_files", snapshot_id)

    def manifests(self) -> DataFrame:
        return self.table("manifests")

    def entries(self, snapshot_id: int | None = None) -> DataFrame:
        return self.table("entries", snapshot_id)

    def partitions(self, snapshot_id: int | None = None) -> DataFrame:
        return self.table("partitions", snapshot_id)

    def position_deletes(self, snapshot_id: int | None = None) -> DataFrame:
        return self.table("position_deletes", snapshot_id)

    def metadata_log_entries(self) -> DataFrame:
        return self.table("metadata_log_entries")

    def all_manifests(self) -> DataFrame:
        return self.table("all_manifests")

    def all_files(self) -> DataFrame:
        return self.table("all_files")

    def all_data_files(self) -> DataFrame:
        return self.table("all_data_files")

    def all_delete_files(self) -> DataFrame:
        return self.table("all_delete_files")


class LakeInspector:
    """The lake log of a lakehouse as a Spark DataFrame."""

    def __init__(self, spark: SparkSession, history: Callable[[int], list[LakeCommit]]) -> None:
        self._spark, self._history = spark, history

    def versions(self, since: int = 1) -> DataFrame:
        """Every lake version from ``since`` on, oldest first: ``version``, ``committed_at``,
        ``transaction_id``, ``isolation``, ``batch`` (pipeline/batch), ``tables`` (table -> operations),
        ``rows_inserted`` / ``rows_updated`` / ``rows_deleted`` (NULL where an encoding cannot count)."""
        return inspect_run.lake_versions(self._spark, self._history(since))
