"""One log line per operation: what ran, on which table, in which encoding and why, what it did.

Records go to the ``rowops.operations`` logger at INFO (the package logger has a ``NullHandler``:
nothing is printed unless the application configures logging, e.g. ``logging.basicConfig(level=
logging.INFO)``, see docs/guide/observability.md).

>>> from rowops.request.results import OperationResult
>>> result = OperationResult("position-delete", 42, 3, 2, 1, 1, 0, 1, 1.25, files_scanned=2,
...                          files_pruned=8)
>>> operation_line("MERGE", "db.t", result, "few rows per file")
'MERGE db.t: position-delete (few rows per file); scanned 2 files, pruned 8; rows +3 ~2 -1; data files +1 -0, delete files +1 -0; snapshot 42; 1.25 s'
"""

from __future__ import annotations

import logging

from rowops.request.results import MaintenanceResult, OperationResult

LOG = logging.getLogger("rowops.operations")


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)


def operation_line(verb: str, table: str, result: OperationResult, reason: str = "") -> str:
    """The log line of a row-level operation or append."""
    why = f" ({reason})" if reason else ""
    rows = f"+{_count(result.rows_inserted)} ~{_count(result.rows_updated)} -{_count(result.rows_deleted)}"
    snapshot = "none (nothing changed)" if result.snapshot_id is None else str(result.snapshot_id)
    return (
        f"{verb} {table}: {result.strategy}{why}; scanned {result.files_scanned} files, pruned "
        f"{result.files_pruned}; rows {rows}; data files +{result.data_files_added} "
        f"-{result.data_files_removed}, delete files +{result.delete_files_added} "
        f"-{result.delete_files_removed}; snapshot {snapshot}; {result.duration_s:.2f} s"
    )


def log_operation(verb: str, table: str, result: OperationResult, reason: str = "") -> None:
    """Log ``result`` at INFO on ``rowops.operations``."""
    if LOG.isEnabledFor(logging.INFO):
        LOG.info(operation_line(verb, table, result, reason))


def maintenance_line(table: str, result: MaintenanceResult) -> str:
    """The log line of a maintenance operation.

    >>> maintenance_line("db.t", MaintenanceResult("compact", 7, files_read=4, files_written=1,
    ...                  files_removed=4, duration_s=2.0))
    'compact db.t: read 4 files (0 bytes), wrote 1 (0 bytes), removed 4 (0 bytes); snapshot 7; 2.00 s'
    """
    snapshot = "none (nothing to do)" if result.snapshot_id is None else str(result.snapshot_id)
    return (
        f"{result.operation} {table}: read {result.files_read} files ({result.bytes_read} bytes), wrote "
        f"{result.files_written} ({result.bytes_written} bytes), removed {result.files_removed} "
        f"({result.bytes_removed} bytes); snapshot {snapshot}; {result.duration_s:.2f} s"
    )


def log_maintenance(table: str, result: MaintenanceResult) -> None:
    """Log ``result`` at INFO on ``rowops.operations``."""
    if LOG.isEnabledFor(logging.INFO):
        LOG.info(maintenance_line(table, result))
