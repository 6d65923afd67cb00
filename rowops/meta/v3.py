"""Iceberg format v3 metadata that pyiceberg 0.12 reads only partly or not at all.

pyiceberg 0.12 models v3 table metadata (``TableMetadataV3``, ``next-row-id``), v3 snapshots
(``first-row-id``, ``added-rows``) and the v3 Avro schemas of manifests and manifest lists, but:

* refuses to serialize v3 table metadata (``TableMetadataV3.model_dump_json`` raises);
* reads manifest lists and manifests with the v2 schema, dropping the manifest's ``first_row_id``
  and the data file fields ``first_row_id``, ``referenced_data_file``, ``content_offset`` and
  ``content_size_in_bytes`` (deletion vectors need the last three);
* writes v1 and v2 manifests and manifest lists only (``commit/manifests.py`` adds v3 writers).

This module is the isolated layer for the reading side: it reads every manifest list and manifest
with the v3 schema, a superset of v2's whose extra fields are optional (they read as NULL in v2
files), so one record layout serves both formats: v3 records start with v2's fields in v2's order,
and pyiceberg's v2 writers (which address record fields by position) simply ignore the tail.
"""

from __future__ import annotations

from typing import Literal

from pyiceberg.avro.file import AvroFile
from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    DATA_FILE_TYPE,
    MANIFEST_ENTRY_SCHEMAS,
    MANIFEST_LIST_FILE_SCHEMAS,
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    PartitionFieldSummary,
    _inherit_from_manifest,
)
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.typedef import IcebergBaseModel

V3: Literal[3] = 3
_DATA_FILE_FIELDS = [f.field_id for f in DATA_FILE_TYPE[V3].fields]
_FIRST_ROW_ID = _DATA_FILE_FIELDS.index(142)
_REFERENCED_DATA_FILE = _DATA_FILE_FIELDS.index(143)
_CONTENT_OFFSET = _DATA_FILE_FIELDS.index(144)
_CONTENT_SIZE = _DATA_FILE_FIELDS.index(145)
_MANIFEST_FIRST_ROW_ID = [f.field_id for f in MANIFEST_LIST_FILE_SCHEMAS[V3].fields].index(520)


def metadata_json(metadata: TableMetadata) -> str:
    """The ``metadata.json`` text of any format version (pyiceberg's own serializer for v1/v2).

    v3 fields pyiceberg already models are written as it would write them (``next-row-id``, snapshots'
    ``first-row-id`` / ``added-rows``); its refusal to write v3 is bypassed here only.
    """
    if metadata.format_version < V3:
        return metadata.model_dump_json(exclude_none=True)
    return IcebergBaseModel.model_dump_json(metadata, exclude_none=True, by_alias=True)


def read_manifest_list(io: FileIO, path: str) -> tuple[ManifestFile, ...]:
    """The manifests of a manifest list, read with the v3 schema (``first_row_id`` kept)."""
    with AvroFile[ManifestFile](
        io.new_input(path),
        MANIFEST_LIST_FILE_SCHEMAS[V3],
        read_types={-1: ManifestFile, 508: PartitionFieldSummary},
        read_enums={517: ManifestContent},
    ) as reader:
        return tuple(reader)


def read_manifest(manifest: ManifestFile, io: FileIO) -> list[ManifestEntry]:
    """Every entry of a manifest (DELETED ones too) with the v3 schema, with inherited sequence
    numbers and, in a data manifest with a ``first_row_id``, inherited data file ``first_row_id``s
    (Iceberg's first row ID inheritance: the manifest's value plus the record counts of the earlier
    data files of the manifest without one, in file order)."""
    with AvroFile[ManifestEntry](
        io.new_input(manifest.manifest_path),
        MANIFEST_ENTRY_SCHEMAS[V3],
        read_types={-1: ManifestEntry, 2: DataFile},
        read_enums={0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent},
    ) as reader:
        entries = [_inherit_from_manifest(entry, manifest) for entry in reader]
    next_id = manifest_first_row_id(manifest)
    if next_id is not None and manifest.content == ManifestContent.DATA:
        for entry in entries:
            df = entry.data_file
            if df.content == DataFileContent.DATA and first_row_id(df) is None:
                df._data[_FIRST_ROW_ID] = next_id
                next_id += int(df.record_count)
    return entries


def _field(record: DataFile | ManifestFile, index: int) -> object:
    data = record._data
    return data[index] if index < len(data) else None


def manifest_first_row_id(manifest: ManifestFile) -> int | None:
    value = _field(manifest, _MANIFEST_FIRST_ROW_ID)
    return int(value) if isinstance(value, int) else None


def first_row_id(df: DataFile) -> int | None:
    value = _field(df, _FIRST_ROW_ID)
    return int(value) if isinstance(value, int) else None


def referenced_data_file(df: DataFile) -> str | None:
    value = _field(df, _REFERENCED_DATA_FILE)
    return value if isinstance(value, str) else None


def content_range(df: DataFile) -> tuple[int, int] | None:
    """(offset, length) of a deletion vector's blob in its Puffin file."""
    offset, size = _field(df, _CONTENT_OFFSET), _field(df, _CONTENT_SIZE)
    return (int(offset), int(size)) if isinstance(offset, int) and isinstance(size, int) else None


def is_deletion_vector(df: DataFile) -> bool:
    return df.content == DataFileContent.POSITION_DELETES and df.file_format == FileFormat.PUFFIN


def as_v3_manifest(manifest: ManifestFile, row_id: int | None) -> ManifestFile:
    """``manifest`` as a v3 record (its fields, then ``first_row_id``)."""
    fields = [f.name for f in MANIFEST_LIST_FILE_SCHEMAS[V3].fields]
    values = [*manifest._data[: len(fields) - 1], row_id]
    return ManifestFile.from_args(_table_format_version=V3, **dict(zip(fields, values, strict=True)))


def as_v3_data_file(df: DataFile) -> DataFile:
    """``df`` with the v3 layout: a record built with the v2 one (e.g. from a Parquet footer) gets the
    v3 fields as NULL, in place (the layouts share their prefix, so v2 readers see the same record)."""
    missing = len(_DATA_FILE_FIELDS) - len(df._data)
    if missing > 0:
        df._data.extend([None] * missing)
    return df


def next_row_id(metadata: TableMetadata) -> int | None:
    """The table's ``next-row-id`` (v3), None before v3."""
    value = getattr(metadata, "next_row_id", None)
    return int(value) if value is not None else None


def entry_id(df: DataFile) -> str:
    """What names one manifest entry: its file path, plus the referenced data file for a deletion
    vector (Iceberg Java packs several vectors into one Puffin file; removing one must keep the others)."""
    if is_deletion_vector(df):
        return f"{df.file_path}#{referenced_data_file(df)}"
    return str(df.file_path)
