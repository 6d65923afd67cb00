"""Writing manifests, including delete manifests, on pyiceberg's internals.

pyiceberg (0.12) has no public API to write delete files or delete manifests: its ``ManifestWriterV2``
always declares ``content=data``. This module is the one place that subclasses it to write
``content=deletes`` manifests (the Avro schema of a manifest entry is the same for both contents in
format v2). Everything else in rowops goes through the functions here.

Format v3 (pyiceberg 0.12 writes v1/v2 manifests and manifest lists only): ``ManifestWriterV3`` writes
v3 entries (the data file's ``first_row_id``, and a deletion vector's ``referenced_data_file``,
``content_offset``, ``content_size_in_bytes``), ``ManifestListWriterV3`` assigns manifests'
``first_row_id`` (row lineage) as Iceberg Java's ``ManifestListWriter.V3Writer`` does.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pyiceberg.avro.file import AvroOutputFile
from pyiceberg.io import FileIO, OutputFile
from pyiceberg.manifest import (
    MANIFEST_LIST_FILE_SCHEMAS,
    DataFile,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestListWriterV2,
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

from rowops.meta.v3 import V3, as_v3_data_file, as_v3_manifest, entry_id, manifest_first_row_id

_CODEC: Literal["deflate"] = "deflate"


# The spec types equality_ids as list<int>; pyiceberg 0.12 declares list<long>, which Iceberg Java
# rejects (ClassCastException Long -> Integer in BaseFile). Fixed upstream after 0.12 (iceberg-python#3842).
EQUALITY_IDS = NestedField(
    135, "equality_ids", ListType(136, IntegerType(), element_required=True), required=False
)


def _entry_schema(spec: PartitionSpec, schema: Schema, format_version: TableVersion) -> Schema:
    """The manifest entry schema of ``format_version`` with the spec's type of ``equality_ids``."""
    data_file = data_file_with_partition(spec.partition_type(schema), format_version)
    fields = [EQUALITY_IDS if f.field_id == EQUALITY_IDS.field_id else f for f in data_file.fields]
    return manifest_entry_schema_with_data_file(format_version, StructType(*fields))


class _DeleteContent(ManifestWriter):
    """Mixed in before a format's writer: its manifest holds delete files (``content = deletes``)."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class DeleteManifestWriterV2(_DeleteContent, ManifestWriterV2):
    """A format-v2 manifest writer whose manifest holds delete files (``content = deletes``)."""

    def _with_partition(self, format_version: TableVersion) -> Schema:
        return _entry_schema(self._spec, self._schema, format_version)


class ManifestWriterV3(ManifestWriterV2):
    """A format-v3 data manifest writer: v3 entries (``first_row_id``, ``referenced_data_file``,
    ``content_offset``, ``content_size_in_bytes``) from records read or built with the v3 layout
    (``meta/v3.py``); pyiceberg 0.12 writes v1/v2 manifests only."""

    @property
    def version(self) -> TableVersion:
        return V3

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "format-version": "3"}

    def _with_partition(self, format_version: TableVersion) -> Schema:
        return _entry_schema(self._spec, self._schema, V3)

    def to_manifest_file(self) -> ManifestFile:
        return as_v3_manifest(super().to_manifest_file(), None)

    def prepare_entry(self, entry: ManifestEntry) -> ManifestEntry:
        as_v3_data_file(entry.data_file)
        return super().prepare_entry(entry)


class DeleteManifestWriterV3(_DeleteContent, ManifestWriterV3):
    """A format-v3 manifest of delete files (deletion vectors, equality deletes)."""


def _writer(
    content: ManifestContent,
    spec: PartitionSpec,
    schema: Schema,
    io: FileIO,
    path: str,
    snapshot_id: int,
    version: TableVersion = 2,
) -> ManifestWriter:
    deletes = content == ManifestContent.DELETES
    if version >= V3:
        cls: type[ManifestWriterV2] = DeleteManifestWriterV3 if deletes else ManifestWriterV3
    else:
        cls = DeleteManifestWriterV2 if deletes else ManifestWriterV2
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
    version: TableVersion = 2,
) -> ManifestFile:
    """Write a manifest of newly added files (sequence numbers inherited at commit)."""
    with _writer(content, spec, schema, io, path, snapshot_id, version) as writer:
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
    version: TableVersion = 2,
) -> ManifestFile:
    """Rewrite a manifest marking the entries whose id (``meta/v3.entry_id``: the path, plus the
    referenced data file for a deletion vector) is in ``removed_paths`` as DELETED.

    On v3, entries carry the ``first_row_id`` they inherited when read (``meta/v3.py``), so their rows
    keep their row ids in the new manifest."""
    with _writer(manifest.content, spec, schema, io, path, snapshot_id, version) as writer:
        for entry in entries:
            if entry_id(entry.data_file) in removed_paths:
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
    first_row_id: int | None = None,
) -> int:
    """Write the manifest list of a new snapshot (assigns sequence numbers of new manifests).

    Args:
        first_row_id: on v3 tables, the snapshot's ``first-row-id`` (the table's ``next-row-id``).

    Returns:
        The rows the snapshot added to row lineage (v3 ``added-rows``; 0 on v2).
    """
    if first_row_id is not None:
        meta = {"first-row-id": str(first_row_id)}
        with ManifestListWriterV3(io.new_output(path), snapshot_id, parent_id, sequence_number, meta) as v3:
            v3.next_row_id = first_row_id
            v3.add_manifests(manifests)
        return v3.next_row_id - first_row_id
    with write_manifest_list(
        format_version=2,
        output_file=io.new_output(path),
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent_id,
        sequence_number=sequence_number,
        avro_compression=_CODEC,
    ) as writer:
        writer.add_manifests(manifests)
    return 0


class ManifestListWriterV3(ManifestListWriterV2):
    """A format-v3 manifest list (pyiceberg 0.12 writes v1/v2 only): as v2, plus the ``first_row_id``
    of data manifests. As Iceberg's ``ManifestListWriter.V3Writer``: a manifest that has one keeps it;
    a new data manifest gets the next row id, which then advances by its existing and added rows;
    delete manifests have none."""

    def __init__(
        self,
        output_file: OutputFile,
        snapshot_id: int,
        parent_snapshot_id: int | None,
        sequence_number: int,
        extra_meta: dict[str, str],
    ) -> None:
        super().__init__(output_file, snapshot_id, parent_snapshot_id, sequence_number, _CODEC)
        self._format_version = V3
        self._meta = {**self._meta, "format-version": "3", **extra_meta}
        self.next_row_id = 0

    def __enter__(self) -> ManifestListWriterV3:
        self._writer = AvroOutputFile[ManifestFile](
            output_file=self._output_file,
            record_schema=MANIFEST_LIST_FILE_SCHEMAS[V3],
            file_schema=MANIFEST_LIST_FILE_SCHEMAS[V3],
            schema_name="manifest_file",
            metadata=self._meta,
        )
        self._writer.__enter__()
        return self

    def prepare_manifest(self, manifest_file: ManifestFile) -> ManifestFile:
        prepared = super().prepare_manifest(manifest_file)
        row_id = manifest_first_row_id(manifest_file)
        if manifest_file.content == ManifestContent.DATA and row_id is None:
            row_id = self.next_row_id
            self.next_row_id += int(manifest_file.existing_rows_count or 0)
            self.next_row_id += int(manifest_file.added_rows_count or 0)
        return as_v3_manifest(prepared, row_id)


# Iceberg's table properties of manifest merging on commit (MergingSnapshotProducer), same defaults.
MERGE_ENABLED = "commit.manifest-merge.enabled"
MIN_COUNT_TO_MERGE = "commit.manifest.min-count-to-merge"
TARGET_SIZE_BYTES = "commit.manifest.target-size-bytes"


@dataclass(frozen=True)
class MergePolicy:
    """When and how manifests are merged on commit (Iceberg's ``commit.manifest*`` properties).

    >>> MergePolicy.of({MIN_COUNT_TO_MERGE: "5", MERGE_ENABLED: "false"})
    MergePolicy(enabled=False, min_count=5, target_bytes=8388608)
    >>> MergePolicy.of({TARGET_SIZE_BYTES: "big"}).target_bytes  # malformed: Iceberg's default
    8388608
    """

    enabled: bool = True
    min_count: int = 100
    target_bytes: int = 8 * 1024 * 1024

    @classmethod
    def of(cls, properties: Mapping[str, str]) -> MergePolicy:
        default = cls()
        enabled = properties.get(MERGE_ENABLED, "true").strip().lower() != "false"
        return cls(
            enabled,
            _int(properties.get(MIN_COUNT_TO_MERGE), default.min_count),
            _int(properties.get(TARGET_SIZE_BYTES), default.target_bytes),
        )


def _int(raw: str | None, default: int) -> int:
    try:
        return int(raw) if raw is not None else default
    except ValueError:
        return default


def pack_end(weights: Sequence[int], target: int) -> list[list[int]]:
    """Iceberg's ``ListPacker(target, lookback=1).packEnd``: indexes packed greedily from the end, so
    the bin holding the first item is the one left partly filled.

    >>> pack_end([1, 5, 5, 5], 10)
    [[0, 1], [2, 3]]
    >>> pack_end([20, 3, 3], 10)
    [[0], [1, 2]]
    """
    bins: list[list[int]] = []
    weight = 0
    for i in reversed(range(len(weights))):
        if bins and weight + weights[i] <= target:
            bins[-1].append(i)
            weight += weights[i]
        else:
            bins.append([i])
            weight = weights[i]
    return [list(reversed(b)) for b in reversed(bins)]


def mergeable(manifests: Sequence[ManifestFile], policy: MergePolicy) -> bool:
    """Whether two manifests of one content and spec would share a bin of ``policy.target_bytes``.

    >>> m = lambda n: ManifestFile.from_args(manifest_path="m", manifest_length=n, partition_spec_id=0,
    ...     content=ManifestContent.DATA)
    >>> mergeable([m(10), m(10)], MergePolicy(target_bytes=100)), mergeable([m(90), m(90)], MergePolicy(target_bytes=100))
    (True, False)
    """
    groups: dict[tuple[int, int], list[int]] = {}
    for m in manifests:
        groups.setdefault((int(m.content), m.partition_spec_id), []).append(int(m.manifest_length))
    return any(len(b) > 1 for sizes in groups.values() for b in pack_end(sizes, policy.target_bytes))


EntriesOf = Callable[[ManifestFile], Iterable[ManifestEntry]]


@dataclass(frozen=True)
class MergeTarget:
    """Where merged manifests go: the table state and the snapshot being committed."""

    specs: Mapping[int, PartitionSpec]
    schema: Schema
    io: FileIO
    metadata_dir: str
    snapshot_id: int
    version: TableVersion = 2


def merge_manifests(
    manifests: Sequence[ManifestFile], policy: MergePolicy, target: MergeTarget, entries_of: EntriesOf
) -> list[ManifestFile]:
    """Merge small manifests of one content type as Iceberg's ``ManifestMergeManager`` does.

    ``manifests`` come new first (this commit's), then the base's. Per partition spec (highest id
    first), they are packed from the end into bins of ``target_bytes``; a bin of one manifest stays, the
    bin of the first (newest) manifest stays unmerged while it holds fewer than ``min_count`` manifests,
    every other bin becomes one manifest. In a merged manifest, files added by this snapshot stay ADDED
    (sequence numbers inherited at commit), files deleted by this snapshot stay DELETED, deletes of
    earlier snapshots are dropped and every other entry is EXISTING with its data and file sequence
    numbers and its snapshot id.
    """
    if not policy.enabled or not manifests:
        return list(manifests)
    first = manifests[0]
    groups: dict[int, list[ManifestFile]] = {}
    for m in manifests:
        groups.setdefault(m.partition_spec_id, []).append(m)
    out: list[ManifestFile] = []
    for spec_id in sorted(groups, reverse=True):
        group = groups[spec_id]
        for b in pack_end([int(m.manifest_length) for m in group], policy.target_bytes):
            bin_ = [group[i] for i in b]
            if len(bin_) == 1 or (first in bin_ and len(bin_) < policy.min_count):
                out.extend(bin_)
            else:
                path = manifest_path(target.metadata_dir, target.snapshot_id, len(out) + 1000)
                out.append(_merged(bin_, target, path, entries_of))
    return out


def _merged(
    bin_: Sequence[ManifestFile], target: MergeTarget, path: str, entries_of: EntriesOf
) -> ManifestFile:
    first = bin_[0]
    spec = target.specs[first.partition_spec_id]
    with _writer(
        first.content, spec, target.schema, target.io, path, target.snapshot_id, target.version
    ) as writer:
        for manifest in bin_:
            for entry in entries_of(manifest):
                if entry.status == ManifestEntryStatus.DELETED:
                    if entry.snapshot_id == target.snapshot_id:
                        writer.delete(entry)  # suppress deletes of earlier snapshots
                elif entry.status == ManifestEntryStatus.ADDED and entry.snapshot_id in (
                    None,
                    target.snapshot_id,
                ):
                    writer.add(entry)
                else:
                    writer.existing(entry)
    return writer.to_manifest_file()
