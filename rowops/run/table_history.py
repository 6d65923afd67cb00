"""``table.history()``: a table's commits as Delta's ``DESCRIBE HISTORY`` shows them, from its snapshots.

One row per snapshot of the current branch's history, newest first: ``version`` (the snapshot's
sequence number, Iceberg's counter of table commits), ``timestamp``, ``snapshot_id``, ``parent_id``,
``operation`` (``MERGE``, ``UPDATE``, ``DELETE``, ``APPEND``, ``COMPACT``, ... as rowops recorded it,
else Iceberg's ``append`` / ``overwrite`` / ``delete`` / ``replace``), ``operationParameters``
(``strategy``), ``isBlindAppend`` and ``operationMetrics``: the snapshot summary under Delta's metric
names (:data:`DELTA_METRICS`); ``summary`` keeps every key of the snapshot summary as written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import pyarrow as pa

from rowops.exec.spark.compat import frame_of_arrow

if TYPE_CHECKING:
    from rowops.exec.spark.frames import DataFrame
    from rowops.run.target import TableTarget

# Delta's operationMetrics names <- the snapshot summary keys (Iceberg's, Spark 4.1's MERGE keys, rowops')
DELTA_METRICS = {
    "numTargetRowsInserted": ("spark.merge-into.num-target-rows-inserted", "rowops.rows-inserted"),
    "numTargetRowsUpdated": ("spark.merge-into.num-target-rows-updated", "rowops.rows-updated"),
    "numTargetRowsDeleted": ("spark.merge-into.num-target-rows-deleted", "rowops.rows-deleted"),
    "numTargetRowsCopied": ("spark.merge-into.num-target-rows-copied",),
    "numTargetRowsMatchedUpdated": ("spark.merge-into.num-target-rows-matched-updated",),
    "numTargetRowsMatchedDeleted": ("spark.merge-into.num-target-rows-matched-deleted",),
    "numTargetRowsNotMatchedBySourceUpdated": (
        "spark.merge-into.num-target-rows-not-matched-by-source-updated",
    ),
    "numTargetRowsNotMatchedBySourceDeleted": (
        "spark.merge-into.num-target-rows-not-matched-by-source-deleted",
    ),
    "numOutputRows": ("added-records",),
    "numAddedFiles": ("added-data-files",),
    "numRemovedFiles": ("deleted-data-files",),
    "numAddedBytes": ("added-files-size",),
    "numRemovedBytes": ("removed-files-size",),
    "numDeletionVectorsAdded": ("added-dvs",),
    "numAddedDeleteFiles": ("added-delete-files",),
    "numRemovedDeleteFiles": ("removed-delete-files",),
    "numAddedPositionDeletes": ("added-position-deletes",),
    "numAddedEqualityDeletes": ("added-equality-deletes",),
}
_SCHEMA = pa.schema(
    [
        ("version", pa.int64()),
        ("timestamp", pa.timestamp("ms", tz="UTC")),
        ("snapshot_id", pa.int64()),
        ("parent_id", pa.int64()),
        ("operation", pa.string()),
        ("operationParameters", pa.map_(pa.string(), pa.string())),
        ("isBlindAppend", pa.bool_()),
        ("operationMetrics", pa.map_(pa.string(), pa.string())),
        ("summary", pa.map_(pa.string(), pa.string())),
    ]
)


def operation_metrics(summary: Mapping[str, str]) -> dict[str, str]:
    """A snapshot summary's metrics under Delta's ``operationMetrics`` names (those it has).

    >>> operation_metrics({"added-records": "3", "rowops.rows-updated": "2", "added-data-files": "1"})
    {'numTargetRowsUpdated': '2', 'numOutputRows': '3', 'numAddedFiles': '1'}
    """
    out = {}
    for name, keys in DELTA_METRICS.items():
        value = next((summary[k] for k in keys if k in summary), None)
        if value is not None:
            out[name] = value
    return out


def operation_name(summary: Mapping[str, str]) -> str:
    """``MERGE``, ``UPDATE``, ... as rowops recorded the operation, else Iceberg's operation.

    >>> operation_name({"operation": "overwrite", "rowops.operation": "merge"}), operation_name({"operation": "append"})
    ('MERGE', 'APPEND')
    """
    return summary.get("rowops.operation", summary.get("operation", "unknown")).replace("-", " ").upper()


def table_history(table: TableTarget) -> DataFrame:
    """The rows of ``table.history()`` (module docstring), newest first."""
    metadata = table.metadata
    rows = []
    current = metadata.current_snapshot_id
    while current is not None:
        snapshot = metadata.snapshot_by_id(current)
        if snapshot is None:  # expired: the history ends here
            break
        summary = dict(snapshot.summary.additional_properties) if snapshot.summary else {}
        if snapshot.summary is not None:
            summary["operation"] = snapshot.summary.operation.value
        rows.append(
            {
                "version": snapshot.sequence_number,
                "timestamp": snapshot.timestamp_ms,
                "snapshot_id": snapshot.snapshot_id,
                "parent_id": snapshot.parent_snapshot_id,
                "operation": operation_name(summary),
                "operationParameters": [
                    ("strategy", summary[k]) for k in ("rowops.strategy",) if k in summary
                ],
                "isBlindAppend": summary.get("operation") == "append",
                "operationMetrics": list(operation_metrics(summary).items()),
                "summary": sorted(summary.items()),
            }
        )
        current = snapshot.parent_snapshot_id
    return frame_of_arrow(table.lake.spark, pa.Table.from_pylist(rows, schema=_SCHEMA))
