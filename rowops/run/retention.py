"""Running snapshot expiry and orphan removal on a table of rowops' own lake log (plans:
``rowops/maintenance/expiry.py``; deletes: ``rowops/catalog/retention.py``). Both honour ``gc.enabled``
and never delete a file a reachable version references."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from pyiceberg.table.metadata import TableMetadata

from rowops.catalog.retention import expire, remove_table_orphans
from rowops.catalog.tables import TableCatalog
from rowops.errors import CatalogFeatureError, InvalidInputError
from rowops.maintenance.expiry import (
    ExpiryPlan,
    check_gc_enabled,
    check_retain_last,
    cutoff_ms,
    expiry_defaults,
    plan_expiry,
)
from rowops.meta.paths import normalize_path
from rowops.request.results import MaintenanceResult
from rowops.run.maintenance import logged, nothing, require_live

if TYPE_CHECKING:
    from rowops.run.target import TableTarget


def _lake_catalog(table: TableTarget, operation: str) -> TableCatalog:
    require_live(table, operation)
    catalog = table.lake.catalog
    if not isinstance(catalog, TableCatalog):
        raise CatalogFeatureError(f"{operation} needs rowops' own lake log (table {table.name})")
    return catalog


def expire_snapshots(
    table: TableTarget, older_than: datetime | timedelta | None = None, retain_last: int | None = None
) -> MaintenanceResult:
    """Expire snapshots and delete the files only they referenced (see ``Table.expire_snapshots``)."""
    started = time.perf_counter()
    check_retain_last(retain_last)
    now = int(time.time() * 1000)
    before = cutoff_ms(older_than, now)
    catalog = _lake_catalog(table, "expire_snapshots")
    loaded = table.load()
    check_gc_enabled(loaded.metadata, "expire_snapshots", table.name)

    def choose(metadata: TableMetadata) -> ExpiryPlan:
        return plan_expiry(metadata, now, *expiry_defaults(metadata.properties, now, before, retain_last))

    chosen = choose(loaded.metadata)
    if not chosen.refs and not chosen.snapshots:
        return nothing(table, "expire_snapshots", started)
    done = expire(catalog, loaded, chosen, choose)
    return logged(
        table,
        MaintenanceResult(
            "expire_snapshots",
            done.committed.metadata.current_snapshot_id if done.snapshots else None,
            files_removed=done.files_deleted,
            bytes_removed=done.bytes_deleted,
            duration_s=time.perf_counter() - started,
            snapshots_expired=len(done.snapshots),
        ),
    )


def remove_orphans(table: TableTarget, older_than: timedelta, dry_run: bool = False) -> MaintenanceResult:
    """Delete unreferenced files of the table older than ``older_than`` (see ``Table.remove_orphans``)."""
    started = time.perf_counter()
    if not isinstance(older_than, timedelta) or older_than < timedelta(0):
        raise InvalidInputError(
            f"older_than must be a timedelta >= 0, got {older_than!r}",
            help="Files younger than the safety age may belong to a commit in flight: keep it at hours or "
            "days (default 3 days). Nothing was changed.",
        )
    catalog = _lake_catalog(table, "remove_orphans")
    metadata = table.load().metadata
    check_gc_enabled(metadata, "remove_orphans", table.name)
    location = normalize_path(metadata.location)
    found = remove_table_orphans(catalog, table.name, location, older_than, dry_run)
    return logged(
        table,
        MaintenanceResult(
            "remove_orphans",
            None,
            files_removed=found.orphans_removed,
            bytes_removed=found.bytes_removed,
            duration_s=time.perf_counter() - started,
            dry_run=dry_run,
            paths=tuple(f"{location}/{p}" for p in found.removed),
        ),
    )
