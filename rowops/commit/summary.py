"""Iceberg's snapshot summary of a commit (the spec's optional summary fields), as Iceberg Java's
``SnapshotSummary`` and ``SnapshotProducer`` write it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from pyiceberg.manifest import DataFile, DataFileContent
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.table.snapshots import Operation, Summary

from rowops.meta.files import TableFiles
from rowops.meta.v3 import content_range, is_deletion_vector


class Change(Protocol):
    """What a summary reads of a commit (``commit.row_delta.RowDelta``)."""

    @property
    def operation(self) -> Operation: ...

    @property
    def added_data(self) -> tuple[DataFile, ...]: ...

    @property
    def added_deletes(self) -> tuple[DataFile, ...]: ...

    @property
    def removed_data(self) -> frozenset[str]: ...

    @property
    def removed_deletes(self) -> frozenset[str]: ...

    @property
    def extra_summary(self) -> dict[str, str]: ...


def _stored_size(f: DataFile) -> int:
    """Bytes of a file as Iceberg's snapshot summaries count them: a deletion vector's blob, else the
    file."""
    blob = content_range(f) if is_deletion_vector(f) else None
    return int(blob[1] if blob is not None else f.file_size_in_bytes)


def _partition_path(spec: PartitionSpec, values: tuple[object, ...]) -> tuple[tuple[str, object], ...]:
    """A partition as Iceberg's ``PartitionSpec.partitionToPath`` tells partitions apart: its fields'
    names and values (an unpartitioned table's one partition: empty)."""
    return tuple((f.name, v) for f, v in zip(spec.fields, values, strict=False))


def _records(files: list[DataFile], content: DataFileContent) -> int:
    return sum(f.record_count for f in files if f.content == content)


def snapshot_summary(
    delta: Change, base: TableFiles, specs: Mapping[int, PartitionSpec] | None = None
) -> Summary:
    """The snapshot summary of ``delta`` applied on ``base``: Iceberg's metrics (the spec's optional
    summary fields, set as Iceberg Java's ``SnapshotSummary`` sets them: an added/removed count only when
    above zero, a deletion vector as ``added-dvs`` / ``removed-dvs`` (not a position delete file) and
    its blob's size, the ``total-*`` counts always, ``changed-partition-count`` when the table's
    ``specs`` are given) and the delta's own properties.

    The lake history records its counts from this same summary (``catalog/history.py``).
    """
    removed_data = [f for f in base.data if f.path in delta.removed_data]
    removed_deletes = [f for f in base.deletes if f.path in delta.removed_deletes]
    pos = [f for f in delta.added_deletes if f.content == DataFileContent.POSITION_DELETES]
    eq = [f for f in delta.added_deletes if f.content == DataFileContent.EQUALITY_DELETES]
    gone = [f.data_file for f in removed_deletes]
    live = [f.data_file for f in base.deletes if f.path not in delta.removed_deletes] + list(
        delta.added_deletes
    )
    total_records = sum(f.record_count for f in base.data) - sum(f.record_count for f in removed_data)
    total_records += sum(f.record_count for f in delta.added_data)
    added_size = sum(_stored_size(f) for f in (*delta.added_data, *delta.added_deletes))
    removed_size = sum(_stored_size(f.data_file) for f in (*removed_data, *removed_deletes))
    base_size = sum(_stored_size(f.data_file) for f in (*base.data, *base.deletes))
    changes = {
        "added-files-size": added_size,
        "removed-files-size": removed_size,
        "added-data-files": len(delta.added_data),
        "deleted-data-files": len(removed_data),
        "added-delete-files": len(delta.added_deletes),
        "removed-delete-files": len(removed_deletes),
        "added-records": sum(f.record_count for f in delta.added_data),
        "deleted-records": sum(f.record_count for f in removed_data),
        "added-position-delete-files": sum(not is_deletion_vector(f) for f in pos),
        "added-dvs": sum(is_deletion_vector(f) for f in pos),
        "added-equality-delete-files": len(eq),
        "removed-position-delete-files": sum(
            f.content == DataFileContent.POSITION_DELETES and not is_deletion_vector(f) for f in gone
        ),
        "removed-dvs": sum(is_deletion_vector(f) for f in gone),
        "removed-equality-delete-files": sum(f.content == DataFileContent.EQUALITY_DELETES for f in gone),
        "added-position-deletes": sum(f.record_count for f in pos),
        "added-equality-deletes": sum(f.record_count for f in eq),
        "removed-position-deletes": _records(gone, DataFileContent.POSITION_DELETES),
        "removed-equality-deletes": _records(gone, DataFileContent.EQUALITY_DELETES),
    }
    props = {k: v for k, v in changes.items() if v > 0}  # Iceberg sets a change count only above 0
    if specs is not None:
        added = (*delta.added_data, *delta.added_deletes)
        touched: list[tuple[int, tuple[object, ...]]] = [(f.spec_id, tuple(f.partition._data)) for f in added]
        touched += [(f.spec_id, f.partition) for f in (*removed_data, *removed_deletes)]
        props["changed-partition-count"] = len({_partition_path(specs[i], p) for i, p in touched})
    props |= {
        "total-files-size": base_size - removed_size + added_size,
        "total-position-deletes": _records(live, DataFileContent.POSITION_DELETES),
        "total-equality-deletes": _records(live, DataFileContent.EQUALITY_DELETES),
        "total-records": total_records,
        "total-data-files": len(base.data) - len(removed_data) + len(delta.added_data),
        "total-delete-files": len(base.deletes) - len(removed_deletes) + len(delta.added_deletes),
    }
    return Summary(delta.operation, **{k: str(v) for k, v in props.items()}, **delta.extra_summary)
