"""A lakehouse whose tables stay in a pyiceberg catalog (``rowops.Lakehouse.from_catalog(catalog)``).

Tables are loaded with ``catalog.load_table``; every MERGE / UPDATE / DELETE / append is one commit of
one table through ``catalog.commit_table`` (``catalog/external.py``). The lake log's features —
multi-table transactions, lake versions, history, time travel and rollback of the whole lake, cleanup —
do not exist there and raise ``CatalogFeatureError``; table-level snapshots and ``rollback_to`` work.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import NoReturn

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchNamespaceError as IcebergNoSuchNamespaceError
from pyiceberg.exceptions import NoSuchTableError as IcebergNoSuchTableError
from pyiceberg.exceptions import TableAlreadyExistsError as IcebergTableAlreadyExistsError

from rowops import statements
from rowops.catalog.external import CatalogScope
from rowops.catalog.register import require_v2
from rowops.errors import (
    CatalogFeatureError,
    InvalidArgumentError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
    UnsupportedTableFormatError,
)
from rowops.exec.checks.validation import require_dataframe
from rowops.exec.spark.frames import DataFrame, SparkSession, T
from rowops.exec.spark.session import configure, create_session
from rowops.exec.spark.types import to_iceberg_schema
from rowops.meta.tables import new_metadata
from rowops.request.identifiers import TableIdentifier, parse_namespace
from rowops.request.inputs import check_properties, checked_call, name_list
from rowops.request.partitioning import parse_partition_by
from rowops.request.results import OperationResult
from rowops.request.sorting import parse_sort_by
from rowops.run.append import append_table
from rowops.table import Table


class CatalogLakehouse:
    """Tables of a pyiceberg ``Catalog`` (``SqlCatalog``, ``RestCatalog``, Glue, Hive, ...).

    Args:
        catalog: the pyiceberg catalog; rowops reads tables through ``load_table`` and commits through
            ``commit_table`` (requirements ``AssertTableUUID`` + ``AssertRefSnapshotId(main)``).
        spark: the SparkSession to use; None creates a local one.
    """

    def __init__(self, catalog: Catalog, spark: SparkSession | None = None) -> None:
        if not isinstance(catalog, Catalog):
            raise InvalidArgumentError(
                f"from_catalog expects a pyiceberg Catalog, got {type(catalog).__name__}",
                help="Pass a catalog from pyiceberg.catalog.load_catalog(...) or e.g. SqlCatalog(...).",
            )
        self.iceberg_catalog = catalog
        self.catalog = CatalogScope(catalog)
        self._spark = configure(spark) if spark is not None else None

    def __repr__(self) -> str:
        return f"Lakehouse.from_catalog({self.iceberg_catalog.name!r})"

    @property
    def root(self) -> str:
        """Where the tables are, for messages: the catalog's name."""
        return f"catalog {self.iceberg_catalog.name!r}"

    @property
    def location(self) -> str:
        """Where the tables are, for messages and reprs (as ``Lakehouse.location``)."""
        return self.root

    @property
    def storage_options(self) -> dict[str, str]:
        """The catalog's FileIO properties (its tables' storage settings)."""
        return dict(self.catalog.io.properties)

    @property
    def spark(self) -> SparkSession:
        """The SparkSession in use (created on first use)."""
        if self._spark is None:
            self._spark = create_session()
        return self._spark

    # -- tables -----------------------------------------------------------------------------------
    def table(self, name: str) -> Table:
        """Open a table of the catalog; raises NoSuchTableError if there is none."""
        ident = TableIdentifier.parse(name)
        loaded = self.catalog.load(ident)
        require_v2(loaded.metadata, ident, loaded.metadata_location)
        return Table(self, ident)

    @checked_call
    def sql(self, text: str, strategy: str = "auto") -> OperationResult | DataFrame | str:
        """Run one SQL statement on the catalog's tables (:func:`rowops.sql`): ``MERGE INTO`` / ``UPDATE`` /
        ``DELETE FROM`` (an ``OperationResult``; after ``EXPLAIN`` the plan text), or a query whose lake
        tables read their current snapshots (a DataFrame)."""
        return statements.sql(self, text, strategy)

    def list_tables(self, namespace: str | None = None) -> list[str]:
        """Names (``namespace.table``) of the catalog's tables in a namespace (every namespace without one)."""
        if namespace is None:
            return sorted(n for ns in self._namespaces(()) for n in self.list_tables(".".join(ns)))
        parts = parse_namespace(namespace)
        try:
            found = self.iceberg_catalog.list_tables(parts)
        except IcebergNoSuchNamespaceError as exc:
            raise NoSuchNamespaceError(f"Namespace {namespace} does not exist in {self.root}") from exc
        return sorted(".".join(ident) for ident in found)

    def _namespaces(self, parent: tuple[str, ...]) -> list[tuple[str, ...]]:
        """Every namespace below ``parent`` (nested ones too)."""
        found = []
        for child in self.iceberg_catalog.list_namespaces(parent):
            if len(child) > len(parent):
                found += [tuple(child), *self._namespaces(tuple(child))]
        return found

    def drop_table(self, name: str) -> None:
        """Drop a table from the catalog (its files stay, as the catalog's own ``drop_table`` leaves them)."""
        ident = TableIdentifier.parse(name)
        try:
            self.iceberg_catalog.drop_table(ident.path_parts)
        except IcebergNoSuchTableError as exc:
            raise NoSuchTableError(f"Table {ident} does not exist in {self.root}") from exc

    @checked_call
    def register_table(self, name: str, metadata_location: str) -> Table:
        """Register an existing Iceberg table in the catalog (its ``register_table``)."""
        ident = TableIdentifier.parse(name)
        try:
            self.iceberg_catalog.register_table(ident.path_parts, metadata_location)
        except IcebergTableAlreadyExistsError as exc:
            raise TableAlreadyExistsError(f"Table {ident} already exists in {self.root}") from exc
        return Table(self, ident)

    @checked_call
    def create_table(
        self,
        name: str,
        data: DataFrame | T.StructType,
        partition_by: Sequence[str] | None = None,
        identifier: Sequence[str] | None = None,
        properties: dict[str, str] | None = None,
        sort_by: Sequence[str] | None = None,
        format_version: int = 2,
    ) -> Table:
        """Create a table in the catalog (``catalog.create_table``); a DataFrame's rows are then appended
        (a second catalog commit; the table is dropped again if the append fails).

        Arguments as ``Lakehouse.create_table``; the catalog chooses the table's location. Format v3 is
        refused: pyiceberg catalogs (0.12) cannot write v3 metadata.
        """
        if format_version != 2:
            raise UnsupportedTableFormatError(
                f"Tables of a pyiceberg catalog are created with format version 2, not {format_version!r}",
                help="Create format-v3 tables in a rowops lake (rowops.Lakehouse(path).create_table(..., "
                "format_version=3)); pyiceberg 0.12 catalogs cannot write v3 metadata. Nothing was changed.",
            )
        ident = TableIdentifier.parse(name)
        struct = (
            data
            if isinstance(data, T.StructType)
            else require_dataframe(data, "create_table's data (or a StructType)").schema
        )
        check_properties(properties or {})
        metadata = new_metadata(
            to_iceberg_schema(struct),
            parse_partition_by(name_list(partition_by, "partition_by")),
            name_list(identifier, "identifier"),
            "file:/unused",  # only the schema, spec, order and properties are handed to the catalog
            properties,
            parse_sort_by(name_list(sort_by, "sort_by")),
        )
        try:
            self.iceberg_catalog.create_table(
                ident.path_parts,
                schema=metadata.schema(),
                partition_spec=metadata.spec(),
                sort_order=metadata.sort_orders[-1],
                properties=metadata.properties,
            )
        except IcebergTableAlreadyExistsError as exc:
            raise TableAlreadyExistsError(f"Table {ident} already exists in {self.root}") from exc
        table = Table(self, ident)
        if isinstance(data, DataFrame):
            try:
                append_table(table, data)
            except BaseException:
                with contextlib.suppress(Exception):
                    self.iceberg_catalog.drop_table(ident.path_parts)
                raise
        return table

    # -- features of rowops' own lake log ---------------------------------------------------------
    def transaction(self, *args: object, **kwargs: object) -> NoReturn:
        _lake_log_only("multi-table transactions (lake.transaction())")

    def begin(self, *args: object, **kwargs: object) -> NoReturn:
        _lake_log_only("multi-table transactions (lake.begin())")

    @property
    def version(self) -> NoReturn:
        _lake_log_only("lake versions (lake.version)")

    def history(self, *args: object, **kwargs: object) -> NoReturn:
        _lake_log_only("the lake history (lake.history())")

    def at(self, *args: object, **kwargs: object) -> NoReturn:
        _lake_log_only("lake time travel (lake.at())")

    def rollback_to(self, *args: object, **kwargs: object) -> NoReturn:
        _lake_log_only("lake rollback (lake.rollback_to(); table.rollback_to(snapshot_id) works)")

    def cleanup(self, *args: object, **kwargs: object) -> NoReturn:
        _lake_log_only("lake cleanup (lake.cleanup())")


def _lake_log_only(feature: str) -> NoReturn:
    raise CatalogFeatureError(
        f"{feature} is a feature of rowops' own lake log, not available on a lakehouse backed by a "
        "pyiceberg catalog (Lakehouse.from_catalog)"
    )
