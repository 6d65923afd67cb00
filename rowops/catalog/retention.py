"""Expiring snapshots and removing a table's orphan files, on a lake with rowops' own log.

**Expiry.** One metadata commit removes the chosen refs (past their ``max-ref-age-ms``) and snapshots
(``TableCatalog.remove_snapshots``, with the usual optimistic retry: the choice is made again on the
newest table state) and records the removed ids in its lake version (``catalog/expired.py``). The
files to delete are computed before that commit: those an expired snapshot referenced and neither a
retained snapshot of the committed metadata nor a snapshot of an offered lake version does (every
ref of every version's state of the table, abandoned lines of a ``lake.rollback_to`` included,
unless an expiry removed it). After the commit only deletes run. A lake version whose state of the
table is an expired snapshot can no longer read it (``SnapshotExpiredError`` naming the expiry); its
``metadata.json`` files are kept (they are small, and the history stays listable). Iceberg's
``write.metadata.delete-after-commit.enabled`` is not honoured for the same reason: the lake log's
versions point at old ``metadata.json`` files.

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
from pyiceberg.manifest import ManifestEntry, ManifestFile
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot

from rowops.catalog.cleanup import CleanupResult, lake_references, remove_orphans
from rowops.catalog.expired import check_offered, offered_snapshots
from rowops.catalog.leases import LiveLeases, leased_snapshots, live_leases, sweep
from rowops.catalog.log import TableEntry
from rowops.catalog.tables import LoadedTable, TableCatalog
from rowops.errors import ForeignFilesError, SnapshotExpiredError
from rowops.maintenance.expiry import ExpiryPlan, check_gc_enabled, only_expired
from rowops.meta.paths import normalize_path, to_uri


@dataclass(frozen=True)
class Expired:
    """What an expiry committed and deleted."""

    committed: LoadedTable
    snapshots: tuple[int, ...]
    files_deleted: int
    bytes_deleted: int


def _reachable(io: FileIO, snapshots: Iterable[Snapshot], live_only: bool) -> dict[str, int]:
    """Keys (with sizes where the metadata knows them) of every file the snapshots reference.

    A manifest list or manifest that is gone (an earlier expiry removed it) contributes nothing: that
    snapshot cannot be read any more, and what it still names is kept or deleted by the others' refs.
    Any other read error is raised (before an expiry commits anything).
    """
    found: dict[str, int] = {}
    manifests = {}
    for snapshot in snapshots:
        found[normalize_path(snapshot.manifest_list)] = -1
        with contextlib.suppress(FileNotFoundError):
            manifests.update({m.manifest_path: m for m in snapshot.manifests(io)})
    with ThreadPoolExecutor(max_workers=8) as pool:
        listed = list(pool.map(lambda m: _entries(io, m, live_only), manifests.values()))
    for manifest, entries in zip(manifests.values(), listed, strict=True):
        found[normalize_path(manifest.manifest_path)] = int(manifest.manifest_length)
        for e in entries:
            found[normalize_path(e.data_file.file_path)] = int(e.data_file.file_size_in_bytes)
    return found


def _entries(io: FileIO, manifest: ManifestFile, live_only: bool) -> list[ManifestEntry]:
    try:
        return manifest.fetch_manifest_entry(io, discard_deleted=live_only)
    except FileNotFoundError:
        return []


@dataclass
class _Choice:
    """The refs and snapshots one attempt removes, and the files that then only they reference."""

    refs: list[str]
    snapshots: list[int]
    doomed: list[str]
    sizes: dict[str, int]


def expire(
    catalog: TableCatalog,
    base: LoadedTable,
    chosen: ExpiryPlan,
    choose: Callable[[TableMetadata], ExpiryPlan],
) -> Expired:
    """Commit the removal of the refs and snapshots of ``chosen`` that ``choose`` still picks on the newest
    state (a concurrent commit may have made one needed again), then delete the files only they referenced.

    Everything is read before the commit (on the table state the commit is built on): the files of the
    removed snapshots, of the retained ones, and of every snapshot an offered lake version points at
    (``expired.offered_snapshots``). A read failure raises before anything is committed; after the
    commit, only deletes run.
    """
    name = str(base.identifier)
    choice = _Choice([], [], [], {})

    leases = LiveLeases(frozenset(), ())  # read on each attempt, in pick

    def pick(metadata: TableMetadata) -> tuple[list[str], list[int]]:
        nonlocal leases
        check_gc_enabled(metadata, "expire_snapshots", name)
        now = choose(metadata)
        leases = live_leases(catalog.log)
        read = leased_snapshots(catalog.log, catalog.read_metadata, name, str(metadata.table_uuid), leases)
        refs = [r for r in chosen.refs if r in now.refs]
        ids = [i for i in chosen.snapshots if i in now.snapshots and i not in read]  # leases keep theirs
        doomed, sizes = _doomed(catalog, metadata, name, set(ids))
        choice.refs, choice.snapshots, choice.doomed, choice.sizes = refs, ids, doomed, sizes
        return refs, ids

    committed, removed = catalog.remove_snapshots(base, pick)
    sweep(catalog.log, leases)
    sizes = [_size(catalog.io, p, choice.sizes[p]) for p in choice.doomed]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda p: _delete(catalog.io, p), choice.doomed))
    return Expired(committed, tuple(removed), len(choice.doomed), sum(sizes))


def _doomed(
    catalog: TableCatalog, metadata: TableMetadata, name: str, removing: set[int]
) -> tuple[list[str], dict[str, int]]:
    """The files of the ``removing`` snapshots that no retained snapshot of ``metadata`` and no snapshot
    of an offered lake version references (files a table registered twice shares included)."""
    if not removing:
        return [], {}
    io = catalog.io
    candidates = _reachable(io, [s for s in metadata.snapshots if s.snapshot_id in removing], live_only=False)
    kept = [s for s in metadata.snapshots if s.snapshot_id not in removing]
    kept += offered_snapshots(catalog.log, catalog.read_metadata, metadata.location, (name, removing))
    retained = _reachable(io, {s.snapshot_id: s for s in kept}.values(), live_only=True)
    doomed = only_expired(candidates, set(retained))
    return doomed, {p: candidates[p] for p in doomed}


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
    """Refuse to point tables back at states (``lake.rollback_to``) a ref of which (current snapshot,
    branch, tag) points at a snapshot an expiry removed, by the expiries' records in the lake log; for
    expiries older than those records, a current snapshot whose manifest list is gone."""
    for name, entry in entries.items():
        if entry is None:
            continue
        metadata = catalog.read_metadata(entry.metadata_location)
        check_offered(catalog.log, name, metadata, every_ref=True)
        snapshot = metadata.current_snapshot()
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
