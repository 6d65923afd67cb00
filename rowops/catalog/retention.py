"""Expiring snapshots and removing a table's orphan files, on a lake with rowops' own log.

**Expiry.** One metadata commit removes the chosen refs (past their ``max-ref-age-ms``) and snapshots (``TableCatalog.remove_snapshots``, with
the usual optimistic retry: the choice is made again on the newest table state). Only once that commit
has succeeded are the files deleted that an expired snapshot referenced and no retained snapshot of the
committed metadata does. Retention rule for lake time travel: a lake version whose state of the table
is an expired snapshot can no longer read that table (``SnapshotExpiredError``); its ``metadata.json``
files are kept (they are small, and the history stays listable).

**Orphans.** Files under the table's ``data/`` and ``metadata/`` that no lake version references (the
lake-wide reference set of ``catalog/cleanup.py``: every version, every table), older than the safety
age, are removed with ``cleanup.remove_orphans``, in tables the lake created only (a registered
table's location belongs to the catalog it came from: ``ForeignFilesError``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta

from pyiceberg.io import FileIO
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot

from rowops.catalog.cleanup import CleanupResult, lake_references, remove_orphans
from rowops.catalog.log import TableEntry
from rowops.catalog.tables import LoadedTable, TableCatalog
from rowops.errors import ForeignFilesError, SnapshotExpiredError
from rowops.maintenance.expiry import ExpiryPlan, only_expired
from rowops.meta.paths import normalize_path, to_uri


@dataclass(frozen=True)
class Expired:
    """What an expiry committed and deleted."""

    committed: LoadedTable
    snapshots: tuple[int, ...]
    files_deleted: int
    bytes_deleted: int


def _reachable(io: FileIO, snapshots: Iterable[Snapshot], live_only: bool) -> dict[str, int]:
    """Keys (with sizes where the metadata knows them) of every file the snapshots reference."""
    found: dict[str, int] = {}
    manifests = {}
    for snapshot in snapshots:
        found[normalize_path(snapshot.manifest_list)] = -1
        manifests.update({m.manifest_path: m for m in snapshot.manifests(io)})
    with ThreadPoolExecutor(max_workers=8) as pool:
        listed = list(
            pool.map(lambda m: m.fetch_manifest_entry(io, discard_deleted=live_only), manifests.values())
        )
    for manifest, entries in zip(manifests.values(), listed, strict=True):
        found[normalize_path(manifest.manifest_path)] = int(manifest.manifest_length)
        for e in entries:
            found[normalize_path(e.data_file.file_path)] = int(e.data_file.file_size_in_bytes)
    return found


def expire(
    catalog: TableCatalog,
    base: LoadedTable,
    chosen: ExpiryPlan,
    choose: Callable[[TableMetadata], ExpiryPlan],
) -> Expired:
    """Commit the removal of the refs and snapshots of ``chosen`` that ``choose`` still picks on the newest
    state (a concurrent commit may have made one needed again), then delete the files only they referenced."""
    by_id = {s.snapshot_id: s for s in base.metadata.snapshots}

    def pick(metadata: TableMetadata) -> tuple[list[str], list[int]]:
        now = choose(metadata)
        return [r for r in chosen.refs if r in now.refs], [i for i in chosen.snapshots if i in now.snapshots]

    committed, removed = catalog.remove_snapshots(base, pick)
    retained = _reachable(catalog.io, committed.metadata.snapshots, live_only=True)
    for other in _sharing(catalog, committed):
        retained.update(_reachable(catalog.io, other.snapshots, live_only=True))
    candidates = _reachable(catalog.io, [by_id[i] for i in removed if i in by_id], live_only=False)
    doomed = only_expired(candidates, set(retained))
    sizes = [_size(catalog.io, p, candidates[p]) for p in doomed]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda p: _delete(catalog.io, p), doomed))
    return Expired(committed, tuple(removed), len(doomed), sum(sizes))


def _sharing(catalog: TableCatalog, table: LoadedTable) -> list[TableMetadata]:
    """Other tables of the newest lake version whose metadata lives in this table's location (one
    table registered under two names): their snapshots' files are kept too."""
    prefix = normalize_path(table.metadata.location).rstrip("/") + "/metadata/"
    return [
        catalog.read_metadata(entry.metadata_location)
        for name, entry in catalog.log.latest().items()
        if name != str(table.identifier) and normalize_path(entry.metadata_location).startswith(prefix)
    ]


def _size(io: FileIO, key: str, known: int) -> int:
    if known >= 0:
        return known
    with contextlib.suppress(OSError):
        return len(io.new_input(to_uri(key)))
    return 0


def _delete(io: FileIO, key: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        io.delete(to_uri(key))


def check_not_expired(catalog: TableCatalog, entries: Mapping[str, TableEntry | None]) -> None:
    """Refuse to point tables back at states whose current snapshot was expired (``lake.rollback_to``):
    the new version could not read them."""
    for name, entry in entries.items():
        if entry is None:
            continue
        snapshot = catalog.read_metadata(entry.metadata_location).current_snapshot()
        if snapshot is not None and not catalog.io.new_input(snapshot.manifest_list).exists():
            raise SnapshotExpiredError(
                f"Table {name} cannot be rolled back: its snapshot {snapshot.snapshot_id} of that version was "
                "expired (table.expire_snapshots deleted its files). Nothing was changed."
            )


def remove_table_orphans(
    catalog: TableCatalog, name: str, location: str, older_than: timedelta, dry_run: bool = False
) -> CleanupResult:
    """Remove (``dry_run``: list) files below the table's ``data/`` and ``metadata/`` that no lake
    version references; refuse a location the lake did not create (``ForeignFilesError``).

    Args:
        location: the table's location in key form.
    """
    location = location.rstrip("/")
    referenced, owned = lake_references(catalog.io, catalog.log)
    if location not in owned:
        raise ForeignFilesError(
            f"Table {name} was registered from another catalog's location {location}; files there that "
            "no lake version references may still be that catalog's, so rowops removes none of them."
        )
    return remove_orphans(catalog.io, location, [location], referenced, older_than, dry_run)
