"""Importing an existing Iceberg table into the lake, as Iceberg's ``Catalog.register_table`` does.

The table's files stay where they are: one lake version adds a ``TableEntry`` pointing at the given
``metadata.json`` (written by Iceberg Java, PyIceberg, Flink, ... in any local path form). Later commits
write new metadata under the table's own ``location``, like for rowops' own tables; the catalog the
table came from (a Hadoop catalog's ``version-hint.text``, a SQL catalog's row) is not updated.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from pyiceberg.table.metadata import TableMetadata

from rowops.catalog.log import TableEntry, VersionTaken
from rowops.catalog.tables import LoadedTable, TableCatalog
from rowops.errors import MetadataNotReadableError, TableAlreadyExistsError, UnsupportedTableFormatError
from rowops.meta.paths import scheme
from rowops.request.identifiers import TableIdentifier


def register_table(catalog: TableCatalog, ident: TableIdentifier, metadata_location: str) -> LoadedTable:
    """Commit a lake version in which ``ident`` is the table whose current metadata is ``metadata_location``.

    Raises:
        TableAlreadyExistsError: the name is taken (nothing is changed).
        MetadataNotReadableError: the location is missing or not Iceberg table metadata.
        UnsupportedTableFormatError: not a format-v2 table.
    """
    location = absolute_location(metadata_location)
    _check_free(catalog, ident)
    metadata = read_table_metadata(catalog, location)
    require_v2(metadata, ident, location, allowed=(2, 3))
    txn = {"id": str(uuid.uuid4()), "commits": [{"table": str(ident), "operation": "register"}]}
    entry = TableEntry(location, str(metadata.table_uuid))
    while True:
        latest = catalog.log.latest()
        if str(ident) in latest:
            raise TableAlreadyExistsError(f"Table {ident} already exists in lakehouse {catalog.root}")
        try:
            version = catalog.log.commit(latest, {str(ident): entry}, txn)
        except VersionTaken:
            continue
        catalog.on_commit(version.version)
        return LoadedTable(ident, version.version, location, metadata)


def absolute_location(metadata_location: str) -> str:
    """A URI as given; a plain path made absolute (a lake entry must not depend on the working directory).

    >>> absolute_location("file:///w/t/metadata/v2.metadata.json")
    'file:///w/t/metadata/v2.metadata.json'
    >>> absolute_location("/w/t/metadata/v2.metadata.json")
    '/w/t/metadata/v2.metadata.json'
    """
    if not isinstance(metadata_location, str) or not metadata_location:
        raise MetadataNotReadableError(f"metadata_location must be a path or URI, got {metadata_location!r}")
    if scheme(metadata_location) is not None:
        return metadata_location
    return str(Path(metadata_location).absolute())


def read_table_metadata(catalog: TableCatalog, location: str) -> TableMetadata:
    """The table metadata at ``location``, or a ``MetadataNotReadableError`` naming it."""
    try:
        return catalog.read_metadata(location)
    except FileNotFoundError as exc:
        raise MetadataNotReadableError(f"No Iceberg metadata file at {location!r}") from exc
    except Exception as exc:  # JSON or validation errors of pyiceberg, I/O errors of pyarrow
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise MetadataNotReadableError(
            f"{location!r} is not readable Iceberg table metadata ({type(exc).__name__}: {reason[:200]})"
        ) from exc


def require_v2(
    metadata: TableMetadata, ident: TableIdentifier, location: str, allowed: tuple[int, ...] = (2,)
) -> None:
    """rowops writes format-v2 manifests and delete files (and v3 ones in its own lake: pyiceberg
    catalogs cannot commit v3 metadata): other format versions are refused."""
    if metadata.format_version not in allowed:
        versions = " and ".join(f"v{v}" for v in allowed)
        raise UnsupportedTableFormatError(
            f"Table {ident} ({location}) is an Iceberg format v{metadata.format_version} table; "
            f"rowops reads and writes format {versions} tables only here"
        )


def _check_free(catalog: TableCatalog, ident: TableIdentifier) -> None:
    if str(ident) in catalog.log.latest():
        raise TableAlreadyExistsError(f"Table {ident} already exists in lakehouse {catalog.root}")
