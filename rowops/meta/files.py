"""Live files of a snapshot and DataFile entries built from Parquet footers.

Reading manifests and Parquet footers is metadata work: it runs on the driver and never touches rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import pyarrow.parquet as pq
from pyiceberg.expressions import BooleanExpression
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import (
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
)
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestEntry, ManifestFile
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, PrimitiveType, StringType

from rowops.errors import SnapshotExpiredError
from rowops.meta.fileio import read_footer
from rowops.meta.lineage import with_lineage
from rowops.meta.manifests import PartitionFilter, read_live
from rowops.meta.metrics import statistics_plan
from rowops.meta.paths import normalize_path, to_uri
from rowops.meta.stored_schema import absent_ids, defaulted_ids, promoted_ids, stored_types
from rowops.meta.v3 import V3, is_deletion_vector, read_manifest_list, referenced_data_file

FILE_PATH_ID, POS_ID = 2147483546, 2147483545
POSITION_DELETE_SCHEMA = Schema(
    NestedField(FILE_PATH_ID, "file_path", StringType(), required=True),
    NestedField(POS_ID, "pos", LongType(), required=True),
)
# Bounds on file_path must not be truncated: readers use them to scope a delete file to data files.
_FULL_METRICS = {"write.metadata.metrics.default": "full"}


DV_SEPARATOR = "#dv:"


@dataclass(frozen=True)
class LiveFile:
    """A live data or delete file of a snapshot, with its inherited sequence number.

    ``path`` names the file in rowops (removals, conflicts, the delete index): its local path, and for
    a deletion vector its Puffin file's path + ``#dv:`` + the data file it references (the same Puffin
    file may hold vectors of other data files); ``file_key`` is where its bytes are.
    """

    entry: ManifestEntry = field(repr=False, compare=False)
    path: str
    content: DataFileContent
    seq: int
    spec_id: int
    partition: tuple[object, ...]
    partition_sources: tuple[int, ...] | None = None  # source field ids of its spec's fields (None: unknown)
    # (field id, type in the file) of the table's widened columns this file has (``meta/evolution.py``)
    stored: tuple[tuple[int, PrimitiveType], ...] = field(default=(), compare=False)
    # field ids of columns with an initial-default (format v3) this file does not store
    absent: frozenset[int] = field(default=frozenset(), compare=False)

    @property
    def data_file(self) -> DataFile:
        return self.entry.data_file

    @property
    def file_key(self) -> str:
        """The local path / key of the file holding this file's bytes (a vector's Puffin file)."""
        return self.path.split(DV_SEPARATOR, 1)[0]

    @property
    def record_count(self) -> int:
        return int(self.entry.data_file.record_count)

    @property
    def size(self) -> int:
        return int(self.entry.data_file.file_size_in_bytes)

    @property
    def equality_ids(self) -> tuple[int, ...]:
        return tuple(self.entry.data_file.equality_ids or ())

    @property
    def referenced_paths(self) -> tuple[str, str] | None:
        """For a position delete file: the (lowest, highest) data file path it names, from its metrics.

        None when the metrics are missing (then it may reference any data file).
        """
        if is_deletion_vector(self.data_file):  # v3: a DV names its one data file
            ref = referenced_data_file(self.data_file)
            return (normalize_path(ref), normalize_path(ref)) if ref is not None else None
        lower = (self.data_file.lower_bounds or {}).get(FILE_PATH_ID)
        upper = (self.data_file.upper_bounds or {}).get(FILE_PATH_ID)
        if lower is None or upper is None:
            return None
        low, high = lower.decode(), upper.decode()
        if _prefix(low) != _prefix(high):  # mixed path forms: the normalized bounds would not bound
            return None
        return normalize_path(low), normalize_path(high)

    @property
    def referenced_file(self) -> str | None:
        """For a position delete file: the one data file it names (equal file_path bounds), if only one."""
        bounds = self.referenced_paths
        return bounds[0] if bounds is not None and bounds[0] == bounds[1] else None

    @property
    def names_in_deletes(self) -> tuple[str, ...]:
        """How a position delete file may name this data file: the manifest's path first, then its
        key, ``file:`` URI and ``file://`` form."""
        forms = [self.data_file.file_path, self.path, to_uri(self.path), "file://" + self.path]
        return tuple(dict.fromkeys(forms))

    def may_reference(self, data_path: str) -> bool:
        """Whether this position delete file can name ``data_path`` (from its file_path bounds only)."""
        bounds = self.referenced_paths
        return bounds is None or bounds[0] <= data_path <= bounds[1]

    def may_apply_to(self, data: LiveFile) -> bool:
        """Whether this delete file may remove rows of ``data`` (Iceberg's scoping rules).

        A position delete naming one file applies to that file. Any other position delete applies to
        the data files its file_path bounds admit that are at most as new as it (sequence number) and
        of its partition (same spec and partition tuple), or of any partition when its spec is
        unpartitioned. An equality delete applies to older data files (smaller sequence number) of its
        partition, or of the whole table when its spec is unpartitioned.

        This is the brute-force rule; :class:`rowops.meta.delete_index.DeleteIndex` answers it for a
        whole snapshot without pairing every file with every delete.
        """
        in_scope = self.is_global or self.same_partition(data)
        if self.content == DataFileContent.POSITION_DELETES:
            target = self.referenced_file
            if target is not None:
                return target == data.path
            return self.seq >= data.seq and in_scope and self.may_reference(data.path)
        return self.seq > data.seq and in_scope

    @property
    def is_global(self) -> bool:
        """A delete file of an unpartitioned spec: its scope is every partition."""
        return not self.partition

    def same_partition(self, other: LiveFile) -> bool:
        return self.spec_id == other.spec_id and self.partition == other.partition

    def key_determines_partition(self) -> bool:
        """For an equality delete: every partition field is a transform of an equality column, so a key
        match implies a partition match (within one spec)."""
        sources = self.partition_sources
        return sources is not None and set(sources) <= set(self.equality_ids)


@dataclass(frozen=True)
class TableFiles:
    """All live files of one snapshot, split by content."""

    snapshot_id: int | None
    sequence_number: int
    manifests: tuple[ManifestFile, ...]
    data: tuple[LiveFile, ...]
    position_deletes: tuple[LiveFile, ...]
    equality_deletes: tuple[LiveFile, ...]
    # Not None: only files whose partition may match this filter were listed (``manifests`` still holds
    # every manifest of the snapshot). Such a listing plans and reads; commits need the full one.
    partition_filter: PartitionFilter | None = field(default=None, compare=False, repr=False)

    @property
    def deletes(self) -> tuple[LiveFile, ...]:
        return self.position_deletes + self.equality_deletes


def _prefix(path: str) -> str:
    """The part of a path that :func:`normalize_path` strips (e.g. ``file:///``'s ``file://``)."""
    return path[: len(path) - len(normalize_path(path))]


def _live(entry: ManifestEntry, metadata: TableMetadata) -> LiveFile:
    df = entry.data_file
    spec = metadata.specs().get(int(df.spec_id))
    path = normalize_path(df.file_path)
    if is_deletion_vector(df):  # one Puffin file may hold the vectors of several data files
        path = f"{path}{DV_SEPARATOR}{normalize_path(referenced_data_file(df) or '')}"
    return LiveFile(
        entry=entry,
        path=path,
        content=df.content,
        seq=int(entry.sequence_number or 0),
        spec_id=int(df.spec_id),
        partition=tuple(df.partition._data),
        partition_sources=tuple(f.source_id for f in spec.fields) if spec is not None else None,
    )


def _with_stored_types(
    f: LiveFile, io: FileIO, promoted: frozenset[int], defaulted: frozenset[int]
) -> LiveFile:
    if f.content == DataFileContent.POSITION_DELETES:
        return f
    stored = stored_types(io, f.path, promoted) if promoted else ()
    return replace(f, stored=stored, absent=absent_ids(io, f.path, defaulted) if defaulted else frozenset())


def live_files(
    metadata: TableMetadata,
    io: FileIO,
    snapshot_id: int | None = None,
    partition_filter: BooleanExpression | None = None,
) -> TableFiles:
    """List the live files of a snapshot (the current one by default).

    Manifests are read in parallel threads through the process-wide cache (``meta/manifests.py``).

    Args:
        partition_filter: a row filter on table columns (pyiceberg expression). Only files whose
            partition may hold a matching row are listed: manifests whose partition summaries exclude
            it are not opened, entries of other partitions are skipped. Delete files are filtered by the
            same inclusive projection, so every delete that may apply to a listed data file is listed
            (position deletes share their data file's partition; equality deletes apply within their
            partition, or everywhere when their spec is unpartitioned, which projects to true).
    """
    snapshot = (
        metadata.snapshot_by_id(snapshot_id) if snapshot_id is not None else metadata.current_snapshot()
    )
    if snapshot is None:
        return TableFiles(None, 0, (), (), (), ())
    keep = PartitionFilter(metadata, partition_filter) if partition_filter is not None else None
    try:
        manifests = read_manifest_list(io, snapshot.manifest_list)
        wanted = [m for m in manifests if keep is None or keep.manifest(m)]
        per_manifest = read_live(wanted, io, lambda e: _live(e, metadata))
    except FileNotFoundError:
        raise SnapshotExpiredError(
            f"Snapshot {snapshot.snapshot_id} of the table at {metadata.location} was expired: its manifest "
            "list or manifests are gone (deleted by table.expire_snapshots, or removed by hand)"
        ) from None
    files = [f for live in per_manifest for f in live]
    if keep is not None:
        files = [f for f in files if keep.partition(f.spec_id, f.partition)]
    promoted, defaulted = promoted_ids(metadata), defaulted_ids(metadata)
    if promoted or defaulted:  # a widened column: which type does each file store? a column with an
        # initial-default: does the file have it? (footers, cached)
        with ThreadPoolExecutor(max_workers=8) as pool:
            files = list(pool.map(lambda f: _with_stored_types(f, io, promoted, defaulted), files))
    return TableFiles(
        snapshot_id=snapshot.snapshot_id,
        sequence_number=int(snapshot.sequence_number or 0),
        manifests=manifests,
        data=tuple(f for f in files if f.content == DataFileContent.DATA),
        position_deletes=tuple(f for f in files if f.content == DataFileContent.POSITION_DELETES),
        equality_deletes=tuple(f for f in files if f.content == DataFileContent.EQUALITY_DELETES),
        partition_filter=keep,
    )


@dataclass(frozen=True)
class WrittenFile:
    """A Parquet file just written by Spark (its local path), with its partition (Iceberg internal
    representation)."""

    path: str
    partition: tuple[object, ...]
    entry: DataFile | None = None  # its manifest entry when the writer built it (deletion vectors)
    spec_id: int | None = None  # the spec of ``partition`` (None: the table's default spec)
    # (footer, size) as read when the write was verified: its manifest entry needs no second read
    footer: tuple[pq.FileMetaData, int] | None = field(default=None, compare=False, repr=False)


def _data_file(
    io: FileIO,
    written: WrittenFile,
    schema: Schema,
    properties: dict[str, str],
    spec: PartitionSpec,
    partition: tuple[object, ...],
    content: DataFileContent,
    equality_ids: Sequence[int] | None,
    sort_order_id: int | None = None,
) -> DataFile:
    path = written.path
    footer, size = written.footer or read_footer(io, path)  # the write check read most footers
    stats = data_file_statistics_from_parquet_metadata(
        parquet_metadata=footer,
        stats_columns=statistics_plan(schema, properties),
        parquet_column_mapping=parquet_path_to_id_mapping(schema),
    )
    built = DataFile.from_args(
        content=content,
        file_path=to_uri(path),
        file_format=FileFormat.PARQUET,
        partition=Record(*partition),
        file_size_in_bytes=size,
        sort_order_id=sort_order_id,
        equality_ids=list(equality_ids) if equality_ids else None,
        key_metadata=None,
        **stats.to_serialized_dict(),
    )
    built.spec_id = spec.spec_id  # not a field of the struct: from_args would drop it
    return built


def data_files_from_parquet(
    written: Sequence[WrittenFile],
    metadata: TableMetadata,
    io: FileIO,
    content: DataFileContent = DataFileContent.DATA,
    equality_ids: Sequence[int] | None = None,
) -> list[DataFile]:
    """Build DataFile entries (with full column metrics) from the footers of written files.

    Empty files (Spark writes one per empty task) are deleted here: no snapshot will reference them.
    """
    spec, specs = metadata.spec(), metadata.specs()  # a position delete takes its data file's spec
    if content == DataFileContent.POSITION_DELETES:
        schema, props = POSITION_DELETE_SCHEMA, _FULL_METRICS
    elif content == DataFileContent.EQUALITY_DELETES:
        schema, props = (
            metadata.schema().select(*_names(metadata.schema(), equality_ids)),
            dict(metadata.properties),
        )
    else:  # v3 data files may hold the row lineage columns (``meta/lineage.py``)
        schema, props = metadata.schema(), dict(metadata.properties)
        schema = with_lineage(schema) if metadata.format_version >= V3 else schema
    # data files are written sorted by the table's sort order (rowops' writers sort every data file)
    sorted_by = (
        metadata.default_sort_order_id
        if content == DataFileContent.DATA and metadata.sort_order().fields
        else None
    )
    built = [w.entry for w in written if w.entry is not None]
    with ThreadPoolExecutor(max_workers=8) as pool:
        files = list(
            pool.map(
                lambda w: _data_file(
                    io,
                    w,
                    schema,
                    props,
                    specs.get(w.spec_id, spec) if w.spec_id is not None else spec,
                    w.partition,
                    content,
                    equality_ids,
                    sorted_by,
                ),
                [w for w in written if w.entry is None],
            )
        )
    for empty in (f for f in files if f.record_count == 0):
        io.delete(empty.file_path)
    return built + [f for f in files if f.record_count > 0]


def _names(schema: Schema, ids: Sequence[int] | None) -> list[str]:
    return [schema.find_column_name(i) or "" for i in ids or ()]
