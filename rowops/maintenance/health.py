"""The health (debt) report of a table and the maintenance it advises, from metadata only.

The read overhead is the planner's own model (``plan/cost.py``, as ``plan/debt.py`` uses it): per
data file the anti-joins with its live deletes and the opens of its delete files, plus the open of
every file small enough that merging it pays (when its partition has another file to merge it
with); computed through ``DeleteIndex`` (linear). File opens are a fixed cost each: the report counts
them, and states the overhead as a share of a read no cheaper than a read's fixed cost
(``cost.overhead_ratio``), so a tiny table is advised a compaction only when its files' opens weigh on
that read.
"""

from __future__ import annotations

from collections import Counter

from pyiceberg.table.metadata import TableMetadata

from rowops.maintenance.compaction import is_small, target_file_size
from rowops.meta.delete_index import DeleteIndex, partition_key
from rowops.meta.files import TableFiles
from rowops.plan.cost import FILE_OPEN_BYTES, FILE_OPEN_MS, overhead_ratio, read_overhead, worth_merging
from rowops.request.results import HealthReport

# advice thresholds
DELETED_SHARE_TO_COMPACT = 0.10  # rewrite once a tenth of the rows are deleted ones
OVERHEAD_RATIO_TO_COMPACT = 0.25  # or once reads pay a quarter more than the data's own scan
SNAPSHOTS_TO_EXPIRE = 100  # snapshots kept before expiring is advised


def health_report(
    name: str, metadata: TableMetadata, files: TableFiles, read_weight: float = 1.0
) -> HealthReport:
    """The debt of the snapshot ``files`` describes and the maintenance calls that would reduce it."""
    index = DeleteIndex.of(files)
    target = target_file_size(metadata)
    per_file = [index.deletes_on(f) for f in files.data]
    data_bytes = sum(f.size for f in files.data)
    records = sum(f.record_count for f in files.data)
    deleted = sum(d.record_count for d in files.deletes)
    overhead = sum(
        read_overhead(f.size, bool(index.position_deletes_of(f)), index.equality_deletes_on(f) > 0)
        for f in files.data
    )
    per_partition = Counter(partition_key(f) for f in files.data)
    mergeable = [f for f in files.data if per_partition[partition_key(f)] > 1]
    merged = sum(worth_merging(f.size, read_weight) for f in mergeable)
    overhead += FILE_OPEN_BYTES * (len(files.equality_deletes) + merged)
    pos_deleted = sum(1 for f in files.data if index.position_deletes_of(f))  # one delete-file open each
    small = sum(1 for f in files.data if is_small(f, target) and per_partition[partition_key(f)] > 1)
    report = HealthReport(
        table=name,
        snapshot_id=files.snapshot_id,
        snapshots=len(metadata.snapshots),
        data_files=len(files.data),
        data_bytes=data_bytes,
        records=records,
        position_delete_files=len(files.position_deletes),
        equality_delete_files=len(files.equality_deletes),
        delete_files_per_data_file=sum(per_file) / len(per_file) if per_file else 0.0,
        max_delete_files_per_data_file=max(per_file, default=0),
        deleted_rows_share=min(deleted / records, 1.0) if records else 0.0,
        equality_delete_generations=len({d.seq for d in files.equality_deletes}),
        small_files=small,
        target_file_size=target,
        read_overhead_bytes=overhead,
        read_overhead_ratio=overhead_ratio(overhead, data_bytes),
        extra_file_opens=pos_deleted + len(files.equality_deletes) + merged,
    )
    return HealthReport(**{**report.__dict__, "advice": advice(report, index, files)})


def advice(report: HealthReport, index: DeleteIndex, files: TableFiles) -> list[str]:
    """The maintenance calls worth running, most effective first, each with its reason.

    >>> from rowops.request.results import HealthReport
    >>> empty = TableFiles(None, 0, (), (), (), ())
    >>> advice(HealthReport("t", None, 0, 0, 0, 0, 0, 0, 0.0, 0, 0.0, 0, 0, 1, 0.0, 0.0), DeleteIndex.of(empty), empty)
    []
    """
    out = []
    small_files_weigh = overhead_ratio(FILE_OPEN_BYTES * report.small_files, report.data_bytes)
    if (
        report.deleted_rows_share >= DELETED_SHARE_TO_COMPACT
        or (report.small_files >= 2 and small_files_weigh >= OVERHEAD_RATIO_TO_COMPACT)
        or (report.read_overhead_ratio >= OVERHEAD_RATIO_TO_COMPACT and report.data_files)
    ):
        out.append(
            f"compact(): {report.deleted_rows_share:.0%} of the rows are deleted, {report.small_files} small "
            f"files; each read pays {report.extra_file_opens} extra file opens (a fixed ~{FILE_OPEN_MS} ms "
            f"each), in all about {report.read_overhead_ratio:.0%} of a full read"
        )
    if report.equality_delete_files:
        out.append(
            f"convert_equality_deletes(): {report.equality_delete_files} equality-delete files from "
            f"{report.equality_delete_generations} commits are joined by every read"
        )
    stacked = sum(1 for f in files.data if len(index.position_deletes_of(f)) > 1)
    if stacked:
        out.append(
            f"compact_position_deletes(): {stacked} data files have more than one position-delete file"
        )
    if report.snapshots > SNAPSHOTS_TO_EXPIRE:
        out.append(f"expire_snapshots(): {report.snapshots} snapshots are kept")
    return out
