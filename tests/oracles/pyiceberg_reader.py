"""Oracle 3: PyIceberg's ``StaticTable`` scan (reads position deletes, not equality deletes)."""

from __future__ import annotations

import pyarrow as pa
from pyiceberg.manifest import DataFileContent, ManifestContent
from pyiceberg.table import StaticTable


class EqualityDeletesUnsupportedError(NotImplementedError):
    """The snapshot has live equality-delete files, which PyIceberg cannot apply; skip this oracle."""


def equality_delete_files(table: StaticTable, snapshot_id: int | None = None) -> list[str]:
    """Paths of the live equality-delete files of a snapshot (the current one by default)."""
    snapshot = table.current_snapshot() if snapshot_id is None else table.snapshot_by_id(snapshot_id)
    if snapshot is None:
        return []
    return [
        entry.data_file.file_path
        for manifest in snapshot.manifests(table.io)
        if manifest.content == ManifestContent.DELETES
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
        if entry.data_file.content == DataFileContent.EQUALITY_DELETES
    ]


def read_pyiceberg(
    metadata_location: str, snapshot_id: int | None = None, options: dict[str, str] | None = None
) -> pa.Table:
    """Read a table (optionally at ``snapshot_id``); raise ``EqualityDeletesUnsupportedError`` if needed.

    ``options``: pyiceberg FileIO properties (S3 endpoint and credentials).
    """
    table = StaticTable.from_metadata(str(metadata_location), properties=dict(options or {}))
    if snapshot_id is not None and table.snapshot_by_id(snapshot_id) is None:
        raise ValueError(f"snapshot {snapshot_id} not found in {metadata_location}")
    eq_deletes = equality_delete_files(table, snapshot_id)
    if eq_deletes:
        raise EqualityDeletesUnsupportedError(
            f"PyIceberg cannot apply equality deletes ({len(eq_deletes)} files, e.g. {eq_deletes[0]})"
        )
    return table.scan(snapshot_id=snapshot_id).to_arrow()
