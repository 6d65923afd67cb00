"""The lakehouse: a directory of Iceberg tables under one transactional lake log."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from rowops.catalog.storage import sync_files
from rowops.catalog.tables import TableCatalog, new_snapshot_id
from rowops.commit.row_delta import apply
from rowops.errors import TableAlreadyExistsError, is_cleanable
from rowops.exec.session import configure, create_session
from rowops.exec.types import to_iceberg_schema
from rowops.exec.validation import require_dataframe
from rowops.exec.write import staging
from rowops.meta.files import TableFiles
from rowops.meta.paths import local_path
from rowops.meta.tables import new_metadata
from rowops.operations import append_delta, spark_errors
from rowops.spec.identifiers import TableIdentifier, parse_namespace
from rowops.spec.inputs import check_properties, checked_call, name_list
from rowops.spec.partitioning import parse_partition_by
from rowops.spec.sorting import parse_sort_by
from rowops.table import Table

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata

_NO_FILES = TableFiles(None, 0, (), (), (), ())


class Lakehouse:
    """Open (or create) a lakehouse directory.

    Args:
        path: the lake root directory (a local path or ``file:`` URI); created if missing. Object
            storage and HDFS URIs are not supported yet (``UnsupportedStorageError``).
        spark: the SparkSession to use; None creates a local one from ``conf/spark-defaults.conf``.
    """

    def __init__(self, path: str | Path, spark: SparkSession | None = None) -> None:
        self.root = Path(local_path(str(path))).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.catalog = TableCatalog(self.root)
        self._spark = configure(spark) if spark is not None else None

    def __repr__(self) -> str:
        return f"Lakehouse({str(self.root)!r})"

    @property
    def spark(self) -> SparkSession:
        """The SparkSession in use (created on first use)."""
        if self._spark is None:
            self._spark = create_session()
        return self._spark

    def table(self, name: str) -> Table:
        """Open an existing table; raises NoSuchTableError if there is none."""
        ident = TableIdentifier.parse(name)
        self.catalog.load(ident)
        return Table(self, ident)

    def list_tables(self, namespace: str) -> list[str]:
        """Names of the tables in a namespace."""
        return self.catalog.list_tables(parse_namespace(namespace))

    def drop_table(self, name: str) -> None:
        """Remove a table from the lake (its files stay for lake-level time travel)."""
        self.catalog.drop(TableIdentifier.parse(name))

    @checked_call
    def create_table(
        self,
        name: str,
        data: DataFrame | T.StructType,
        partition_by: Sequence[str] | None = None,
        identifier: Sequence[str] | None = None,
        properties: dict[str, str] | None = None,
        sort_by: Sequence[str] | None = None,
    ) -> Table:
        """Create a format-v2 Iceberg table; rows of ``data`` (if a DataFrame) are its first snapshot.

        Args:
            name: ``namespace.table``.
            data: a DataFrame (its schema and rows) or a StructType (empty table).
            partition_by: identity columns and ``bucket(N, c)``, ``truncate(W, c)``, ``year/month/day/hour(c)``.
            identifier: Iceberg identifier (key) columns; they become required. Columns that are NOT NULL
                in the schema (``nullable=False``) stay required too; NULLs written to them are rejected.
            properties: extra Iceberg table properties (e.g. ``write.distribution-mode``: ``hash``,
                the default for partitioned tables, ``range`` or ``none``).
            sort_by: the table's sort order, ``column [ASC|DESC] [NULLS FIRST|LAST]`` per entry; every
                data file rowops writes is sorted by it.
        """
        ident = TableIdentifier.parse(name)
        if str(ident) in self.catalog.log.latest():
            raise TableAlreadyExistsError(f"Table {ident} already exists in lakehouse {self.root}")
        struct = (
            data
            if isinstance(data, T.StructType)
            else require_dataframe(data, "create_table's data (or a StructType)").schema
        )
        check_properties(properties or {})
        fields = parse_partition_by(name_list(partition_by, "partition_by"))
        metadata = new_metadata(
            to_iceberg_schema(struct),
            fields,
            name_list(identifier, "identifier"),
            self.catalog.location(ident),
            properties,
            parse_sort_by(name_list(sort_by, "sort_by")),
        )
        if isinstance(data, DataFrame):
            self._create_with_rows(ident, data, metadata)
        else:
            self.catalog.create(ident, metadata)
        return Table(self, ident)

    def _create_with_rows(self, ident: TableIdentifier, df: DataFrame, metadata: TableMetadata) -> None:
        """Write the rows, then commit the table with them as its first snapshot."""
        _ = self.spark  # make sure the session is configured before writing
        with staging(metadata.location) as stage, spark_errors("create_table"):
            delta = append_delta(df, metadata, stage)
            first, manifests = apply(delta, metadata, _NO_FILES, self.catalog.io, new_snapshot_id())
            try:
                sync_files([*(f.file_path for f in delta.added_data), *manifests])
                self.catalog.create(ident, first, listener=stage)
            except BaseException as exc:
                if is_cleanable(exc):
                    for path in manifests:
                        with contextlib.suppress(Exception):
                            self.catalog.io.delete(path)
                raise
