"""Iceberg Java's incremental append scan, through the Java reader as it is (no worker change).

Spark's Iceberg source reads the rows appended after ``start-snapshot-id`` up to ``end-snapshot-id``,
which defaults to the current snapshot of the table it loads. Loading the ``metadata.json`` whose
current snapshot is the end of the range therefore needs only one read option, which the worker's
``ref`` request field passes through as it is (``reader.option(name, value)``).
"""

from __future__ import annotations

from tests.oracles.compare import canonical_rows
from tests.oracles.java_reader import JavaIcebergReader


def incremental_append_rows(
    java: JavaIcebergReader, metadata_location: str, start_snapshot_id: int, columns: list[str]
) -> list[tuple[object, ...]]:
    """Rows Iceberg Java's ``IncrementalAppendScan`` returns for the appends committed after
    ``start_snapshot_id`` (exclusive) up to the current snapshot of ``metadata_location`` (inclusive)."""
    table = java.read(metadata_location, ref=("start-snapshot-id", str(start_snapshot_id)))
    return canonical_rows(table, columns)
