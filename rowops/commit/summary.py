"""Iceberg's snapshot summary of a commit (the spec's optional summary fields), as Iceberg Java's
``SnapshotSummary`` and ``SnapshotProducer`` write it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from pyiceberg.manifest import DataFile, DataFileContent, ManifestFile
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


# Spark 4.1's ``MergeSummary`` as Iceberg's Spark 4.1 integration writes it into the snapshot summary
# (``BaseSparkWrite.setMergeSummaryProperties``, Iceberg PR 15014)
MERGE_INTO_PREFIX = "spark.merge-into."


def merge_into_summary(counts: Mapping[str, int | None], added_records: int) -> dict[str, str]:
    """A MERGE's row counts under Spark 4.1's ``spark.merge-into.*`` keys; nothing when the encoding
    cannot know them (equality deletes: which source keys existed is never read).

    ``counts`` holds ``insert``, ``update`` and ``delete`` and the parts of the last two done by WHEN NOT
    MATCHED BY SOURCE clauses (``update-by-source``, ``delete-by-source``). Copied rows are the target
    rows a rewrite carried over unchanged: the rows added beyond the inserted and updated ones (none
    under position deletes).

    >>> s = merge_into_summary({"insert": 2, "update": 4, "delete": 4, "update-by-source": 1,
    ...                         "delete-by-source": 2}, added_records=8)
    >>> s["spark.merge-into.num-target-rows-copied"], s["spark.merge-into.num-target-rows-matched-updated"]
    ('2', '3')
    >>> merge_into_summary({"insert": None, "update": None, "delete": 0}, added_records=5)
    {}
    """
    inserted, updated, deleted = counts.get("insert"), counts.get("update"), counts.get("delete")
    if inserted is None or updated is None or deleted is None:
        return {}
    updated_by_source = counts.get("update-by-source") or 0
    deleted_by_source = counts.get("delete-by-source") or 0
    values = {
        "num-target-rows-copied": added_records - inserted - updated,
        "num-target-rows-deleted": deleted,
        "num-target-rows-updated": updated,
        "num-target-rows-inserted": inserted,
        "num-target-rows-matched-updated": updated - updated_by_source,
        "num-target-rows-matched-deleted": deleted - deleted_by_source,
        "num-target-rows-not-matched-by-source-updated": updated_by_source,
        "num-target-rows-not-matched-by-source-deleted": deleted_by_source,
    }
    return {MERGE_INTO_PREFIX + k: str(v) for k, v in values.items() if v >= 0}  # as Iceberg: set if >= 0


def manifests_summary(
    before: Sequence[ManifestFile], after: Sequence[ManifestFile], snapshot_id: int
) -> dict[str, str]:
    """The keys Iceberg Java's ``BaseRewriteManifests`` adds to a manifest rewrite's summary: manifests
    created by it, kept from the base, and replaced, and the live entries of the replaced ones (the
    entries it rewrote)."""
    kept_paths = {m.manifest_path for m in after}
    replaced = [m for m in before if m.manifest_path not in kept_paths]
    created = sum(1 for m in after if m.added_snapshot_id == snapshot_id)
    entries = sum((m.added_files_count or 0) + (m.existing_files_count or 0) for m in replaced)
    return {
        "manifests-created": str(created),
        "manifests-kept": str(len(after) - created),
        "manifests-replaced": str(len(replaced)),
        "entries-processed": str(entries),
    }
