"""Creating a table: its metadata from a schema and options, its first rows (if any) as its first snapshot."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pyiceberg.table.metadata import TableMetadata

from rowops.catalog.storage import sync_files
from rowops.catalog.tables import TableCatalog, new_snapshot_id
from rowops.catalog.transactions import LakeTransaction
from rowops.commit.row_delta import apply
from rowops.errors import TableAlreadyExistsError, is_cleanable
from rowops.exec.checks.validation import require_dataframe
from rowops.exec.spark.frames import DataFrame, T
from rowops.exec.spark.job_errors import spark_errors
from rowops.exec.spark.types import to_iceberg_schema
from rowops.exec.writing.write import staging
from rowops.meta.defaults import with_write_defaults
from rowops.meta.files import TableFiles
from rowops.meta.tables import new_metadata
from rowops.request.identifiers import TableIdentifier
from rowops.request.inputs import check_properties, name_list
from rowops.request.partitioning import parse_partition_by
from rowops.request.sorting import parse_sort_by
from rowops.run.append import append_delta

_NO_FILES = TableFiles(None, 0, (), (), (), ())


@dataclass(frozen=True)
class TableOptions:
    """``create_table``'s options as the user gave them (checked when the table is created)."""

    partition_by: Sequence[str] | None = None
    identifier: Sequence[str] | None = None
    properties: dict[str, str] | None = None
    sort_by: Sequence[str] | None = None
    format_version: int = 2
    defaults: Mapping[str, object] | None = None


def create_in(
    catalog: TableCatalog,
    session: Callable[[], object],
    tx: LakeTransaction | None,
    name: str,
    data: DataFrame | T.StructType,
    options: TableOptions,
) -> TableIdentifier:
    """Create a table now (``tx`` None) or inside a transaction; ``session`` configures the lake's
    SparkSession before rows are written."""
    ident = TableIdentifier.parse(name)
    exists = tx.table_exists(ident) if tx else str(ident) in catalog.log.latest()
    if exists:
        raise TableAlreadyExistsError(f"Table {ident} already exists in lakehouse {catalog.root}")
    struct = (
        data
        if isinstance(data, T.StructType)
        else require_dataframe(data, "create_table's data (or a StructType)").schema
    )
    check_properties(options.properties or {})
    fields = parse_partition_by(name_list(options.partition_by, "partition_by"))
    metadata = new_metadata(
        to_iceberg_schema(struct),
        fields,
        name_list(options.identifier, "identifier"),
        catalog.location(ident),
        options.properties,
        parse_sort_by(name_list(options.sort_by, "sort_by")),
        options.format_version,
    )
    metadata = with_write_defaults(metadata, options.defaults or {})
    if isinstance(data, DataFrame):
        session()  # make sure the session is configured before writing
        _create_with_rows(catalog, ident, data, metadata, tx)
    elif tx is not None:
        tx.create(ident, metadata, [], None)
    else:
        catalog.create(ident, metadata)
    return ident


def _create_with_rows(
    catalog: TableCatalog,
    ident: TableIdentifier,
    df: DataFrame,
    metadata: TableMetadata,
    tx: LakeTransaction | None,
) -> None:
    """Write the rows, then commit the table with them as its first snapshot."""
    with staging(metadata.location, catalog.io) as stage, spark_errors("create_table"):
        delta = append_delta(df, metadata, stage)
        first, manifests = apply(delta, metadata, _NO_FILES, catalog.io, new_snapshot_id())
        try:
            sync_files([*(f.file_path for f in delta.added_data), *manifests])
            if tx is not None:
                tx.create(ident, first, manifests, stage)
                return
            catalog.create(ident, first, listener=stage)
        except BaseException as exc:
            if is_cleanable(exc):
                for path in manifests:
                    with contextlib.suppress(Exception):
                        catalog.io.delete(path)
            raise
