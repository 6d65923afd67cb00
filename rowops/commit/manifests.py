"""Writing manifests, including delete manifests, on pyiceberg's internals.

pyiceberg (0.12) has no public API to write delete files or delete manifests: its ``ManifestWriterV2``
always declares ``content=data``. This module is the one place that subclasses it to write
``content=deletes`` manifests (the Avro schema of a manifest entry is the same for both contents in
format v2). Everything else in rowops goes through the functions here.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
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
    with _writer(first.content, spec, target.schema, target.io, path, target.snapshot_id) as writer:
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
