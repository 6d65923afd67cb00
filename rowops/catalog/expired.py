"""What expiries removed, from their records in the lake log, and the lake versions still offered.

Each ``expire_snapshots`` commit records the snapshot ids it removed in its lake version's
transaction record (``"expired-snapshots"`` next to the table's name and uuid). Lake versions are
immutable, so the records are read once per process (``ExpiredIndex``, extended as the log grows).

**Offered versions.** rowops has no lake-level retention: every lake version is offered, except the
state of a table at a version whose snapshot an expiry removed. So a snapshot is protected from
expiry's deletes while any lake version's table state points at it (its current snapshot, branches,
tags) and no expiry removed it: abandoned lines of history (left by ``lake.rollback_to``) included.
``lake.at`` and ``lake.rollback_to`` refuse exactly the states whose snapshots an expiry removed,
naming that expiry's lake version.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Set
from dataclasses import dataclass, field

from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot

from rowops.catalog.log import LakeLog, TableEntry
from rowops.errors import SnapshotExpiredError
from rowops.meta.paths import normalize_path

EXPIRED_KEY = "expired-snapshots"
UUID_KEY = "table-uuid"


@dataclass
class ExpiredIndex:
    """Snapshot id → the lake version of the expiry that removed it, per (table name, table uuid)."""

    scanned: int = 0
    removed: dict[tuple[str, str], dict[int, int]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def refresh(self, log: LakeLog) -> ExpiredIndex:
        """Read the records of the versions committed since the last call."""
        with self.lock:
            for version in log.history(self.scanned + 1):
                for commit in version.transaction.get("commits", []):
                    ids = commit.get(EXPIRED_KEY)
                    if ids:
                        key = (str(commit.get("table")), str(commit.get(UUID_KEY)))
                        self.removed.setdefault(key, {}).update((int(i), version.version) for i in ids)
                self.scanned = version.version
        return self

    def expired_by(self, name: str, table_uuid: str, snapshot_id: int) -> int | None:
        """The lake version of the expiry that removed ``snapshot_id`` of this table, or None."""
        return self.removed.get((name, table_uuid), {}).get(snapshot_id)


_INDEXES: weakref.WeakKeyDictionary[LakeLog, ExpiredIndex] = weakref.WeakKeyDictionary()
_INDEXES_LOCK = threading.Lock()


def expired_index(log: LakeLog) -> ExpiredIndex:
    """The index of ``log``'s expiry records, up to its newest version."""
    with _INDEXES_LOCK:
        index = _INDEXES.setdefault(log, ExpiredIndex())
    return index.refresh(log)


def ref_snapshots(metadata: TableMetadata) -> dict[str, int]:
    """Ref name → snapshot id of a table state (``main`` is the current snapshot)."""
    found = {name: ref.snapshot_id for name, ref in metadata.refs.items()}
    if metadata.current_snapshot_id is not None:
        found["main"] = metadata.current_snapshot_id
    return found


def check_offered(log: LakeLog, name: str, metadata: TableMetadata, every_ref: bool = False) -> None:
    """Refuse a table state (of ``lake.at``: its current snapshot; of a ``lake.rollback_to`` target:
    every ref) that points at a snapshot an expiry removed; the error names that expiry."""
    index = expired_index(log)
    for ref, snapshot_id in sorted(ref_snapshots(metadata).items()):
        if ref != "main" and not every_ref:
            continue
        by = index.expired_by(name, str(metadata.table_uuid), snapshot_id)
        if by is not None:
            what = "its current snapshot" if ref == "main" else f"the snapshot of its ref {ref!r}"
            raise SnapshotExpiredError(
                f"Table {name} as of this lake version cannot be read or restored: {what} ({snapshot_id}) "
                f"was expired by table.expire_snapshots at lake version {by}, which deleted its files. "
                "Nothing was changed."
            )


def offered_snapshots(
    log: LakeLog,
    read: Callable[[str], TableMetadata],
    location: str,
    expiring: tuple[str, Set[int]],
) -> list[Snapshot]:
    """Snapshots any lake version's state of a table under ``location`` points at (refs and current),
    except those an expiry removed and those ``expiring`` (name, ids) is about to remove from that name.

    Every distinct table entry is read once (``read`` caches parsed metadata).
    """
    index = expired_index(log)
    prefix = normalize_path(location).rstrip("/") + "/metadata/"
    found: dict[int, Snapshot] = {}
    for name, entry in _entries_under(log, prefix):
        metadata = read(entry.metadata_location)
        for snapshot_id in ref_snapshots(metadata).values():
            if (
                snapshot_id in found
                or index.expired_by(name, str(metadata.table_uuid), snapshot_id) is not None
            ):
                continue
            if name == expiring[0] and snapshot_id in expiring[1]:
                continue
            snapshot = metadata.snapshot_by_id(snapshot_id)
            if snapshot is not None:
                found[snapshot_id] = snapshot
    return list(found.values())


def _entries_under(log: LakeLog, prefix: str) -> list[tuple[str, TableEntry]]:
    return [(n, e) for n, e in log.named_entries() if normalize_path(e.metadata_location).startswith(prefix)]
