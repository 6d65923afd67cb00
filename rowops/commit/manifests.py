"""Writing manifests, including delete manifests, on pyiceberg's internals.

pyiceberg (0.12) has no public API to write delete files or delete manifests: its ``ManifestWriterV2``
always declares ``content=data``. This module is the one place that subclasses it to write
``content=deletes`` manifests (the Avro schema of a manifest entry is the same for both contents in
format v2). Everything else in rowops goes through the functions here.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Literal

from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    DataFile,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriter,
    ManifestWriterV2,
    data_file_with_partition,
    manifest_entry_schema_with_data_file,
    write_manifest_list,
)
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.typedef import TableVersion
from pyiceberg.types import IntegerType, ListType, NestedField, StructType

_CODEC: Literal["deflate"] = "deflate"


# The spec types equality_ids as list<int>; pyiceberg 0.12 declares list<long>, which Iceberg Java
# rejects (ClassCastException Long -> Integer in BaseFile). Fixed upstream after 0.12 (iceberg-python#3842).
EQUALITY_IDS = NestedField(
    135, "equality_ids", ListType(136, IntegerType(), element_required=True), required=False
)


class DeleteManifestWriterV2(ManifestWriterV2):
    """A format-v2 manifest writer whose manifest holds delete files (``content = deletes``)."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}

    def _with_partition(self, format_version: TableVersion) -> Schema:
        data_file = data_file_with_partition(self._spec.partition_type(self._schema), format_version)
        fields = [EQUALITY_IDS if f.field_id == EQUALITY_IDS.field_id else f for f in data_file.fields]
        return manifest_entry_schema_with_data_file(format_version, StructType(*fields))


def _writer(
    content: ManifestContent, spec: PartitionSpec, schema: Schema, io: FileIO, path: str, snapshot_id: int
) -> ManifestWriter:
    cls = DeleteManifestWriterV2 if content == ManifestContent.DELETES else ManifestWriterV2
    return cls(spec, schema, io.new_output(path), snapshot_id, _CODEC)


def manifest_path(metadata_dir: str, snapshot_id: int, index: int) -> str:
    return f"{metadata_dir}/{uuid.uuid4()}-m{index}-{snapshot_id}.avro"


def write_added(
    files: Sequence[DataFile],
    content: ManifestContent,
    spec: PartitionSpec,
    schema: Schema,
    io: FileIO,
    path: str,
    snapshot_id: int,
) -> ManifestFile:
    """Write a manifest of newly added files (sequence numbers inherited at commit)."""
    with _writer(content, spec, schema, io, path, snapshot_id) as writer:
        for f in files:
            writer.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, data_file=f))
    return writer.to_manifest_file()


def rewrite_without(
    manifest: ManifestFile,
    entries: Iterable[ManifestEntry],
    removed_paths: set[str],
    spec: PartitionSpec,
    schema: Schema,
    io: FileIO,
    path: str,
    snapshot_id: int,
) -> ManifestFile:
    """Rewrite a manifest marking the entries whose path is in ``removed_paths`` as DELETED."""
    with _writer(manifest.content, spec, schema, io, path, snapshot_id) as writer:
        for entry in entries:
            if entry.data_file.file_path in removed_paths:
                writer.delete(entry)
            else:
                writer.existing(entry)
    return writer.to_manifest_file()


def write_list(
    io: FileIO,
    path: str,
    snapshot_id: int,
    parent_id: int | None,
    sequence_number: int,
    manifests: list[ManifestFile],
) -> None:
    """Write the manifest list of a new snapshot (assigns sequence numbers of new manifests)."""
    with write_manifest_list(
        format_version=2,
        output_file=io.new_output(path),
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent_id,
        sequence_number=sequence_number,
        avro_compression=_CODEC,
    ) as writer:
        writer.add_manifests(manifests)
