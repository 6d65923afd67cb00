"""Which refs and snapshots expire, and which files only expired snapshots reference.

The rules are Iceberg's ``RemoveSnapshots`` (``plan_expiry``): refs past their ``max-ref-age-ms``
are dropped; every other ref keeps its snapshot, and each branch (``main`` included) keeps the newest
``min-snapshots-to-keep`` (default ``retain_last``) of its history plus those younger than its
``max-snapshot-age-ms`` (default ``older_than``). Without ``older_than`` / ``retain_last`` the
table's ``history.expire.max-snapshot-age-ms`` (5 days) and ``history.expire.min-snapshots-to-keep``
(1) are the defaults (``expiry_defaults``); ``gc.enabled=false`` refuses expiry and orphan removal
(``check_gc_enabled``). A file may be deleted when an expired snapshot
references it (its manifest list, manifests, data and delete files) and no retained snapshot does
(reading a retained snapshot needs its manifest list, its manifests and their live entries).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRef, SnapshotRefType

from rowops.commit.refs import ancestors
from rowops.errors import GcDisabledError, InvalidInputError

MAX_SNAPSHOT_AGE_MS = "history.expire.max-snapshot-age-ms"
MIN_SNAPSHOTS_TO_KEEP = "history.expire.min-snapshots-to-keep"
MAX_REF_AGE_MS = "history.expire.max-ref-age-ms"
DEFAULT_MAX_SNAPSHOT_AGE_MS = 5 * 24 * 60 * 60 * 1000  # Iceberg's TableProperties defaults
DEFAULT_MIN_SNAPSHOTS_TO_KEEP = 1


def cutoff_ms(older_than: datetime | timedelta | None, now_ms: int) -> int | None:
    """Snapshots committed before this time (ms since the epoch) may expire; None: any age.

    >>> cutoff_ms(timedelta(seconds=1), 5000)
    4000
    """
    if older_than is None:
        return None
    if isinstance(older_than, timedelta):
        if older_than < timedelta(0):
            raise InvalidInputError(
                f"older_than must not be negative, got {older_than}",
                help="Pass a timedelta >= 0 (an age) or a datetime. Nothing was changed.",
            )
        return now_ms - int(older_than.total_seconds() * 1000)
    if isinstance(older_than, datetime):
        moment = older_than if older_than.tzinfo else older_than.replace(tzinfo=timezone.utc)
        return int(moment.timestamp() * 1000)
    raise InvalidInputError(
        f"older_than must be a datetime, a timedelta or None, got {type(older_than).__name__}",
        help="e.g. expire_snapshots(older_than=timedelta(days=5)). Nothing was changed.",
    )


def check_retain_last(retain_last: int | None) -> None:
    if retain_last is None:
        return
    if isinstance(retain_last, bool) or not isinstance(retain_last, int) or retain_last < 1:
        raise InvalidInputError(
            f"retain_last must be an int >= 1, got {retain_last!r}",
            help="The current snapshot is always kept: pass retain_last=1 or more. Nothing was changed.",
        )


def expiry_defaults(
    properties: dict[str, str], now_ms: int, before_ms: int | None, retain_last: int | None
) -> tuple[int, int]:
    """The cutoff and minimum count of an expiry: the caller's, else the table's ``history.expire.*``
    properties, else Iceberg's defaults (5 days, 1), as Iceberg's ``RemoveSnapshots``.

    >>> expiry_defaults({}, 10**12, None, None) == (10**12 - 432_000_000, 1)
    True
    >>> expiry_defaults({MAX_SNAPSHOT_AGE_MS: "1", MIN_SNAPSHOTS_TO_KEEP: "3"}, 100, None, None)
    (99, 3)
    >>> expiry_defaults({MIN_SNAPSHOTS_TO_KEEP: "3"}, 100, 7, 2)
    (7, 2)
    """
    if before_ms is None:
        age = _int(properties.get(MAX_SNAPSHOT_AGE_MS))
        before_ms = now_ms - (age if age is not None and age >= 0 else DEFAULT_MAX_SNAPSHOT_AGE_MS)
    if retain_last is None:
        count = _int(properties.get(MIN_SNAPSHOTS_TO_KEEP))
        retain_last = count if count is not None and count >= 1 else DEFAULT_MIN_SNAPSHOTS_TO_KEEP
    return before_ms, retain_last


def gc_enabled(metadata: TableMetadata) -> bool:
    """Iceberg's ``gc.enabled`` (default true): false means the table's files may be shared with
    another table, so nothing of them may be deleted."""
    return metadata.properties.get("gc.enabled", "true").strip().lower() != "false"


def check_gc_enabled(metadata: TableMetadata, operation: str, name: str) -> None:
    """Refuse to delete files of a table whose ``gc.enabled`` is false (Iceberg: "deleting files may
    corrupt other tables")."""
    if not gc_enabled(metadata):
        raise GcDisabledError(
            f"{operation} refused on table {name}: its property gc.enabled is false (its files may be "
            "shared with another table, so rowops deletes none of them)"
        )


@dataclass(frozen=True)
class ExpiryPlan:
    """What one expiry removes: refs whose ``max-ref-age-ms`` passed, and snapshots nothing retains."""

    refs: tuple[str, ...]
    snapshots: tuple[int, ...]


def plan_expiry(metadata: TableMetadata, now_ms: int, before_ms: int | None, retain_last: int) -> ExpiryPlan:
    """Iceberg's ``RemoveSnapshots`` rules, with ``before_ms`` (None: any age) and ``retain_last`` as the
    defaults of every branch.

    1. A ref other than ``main`` whose snapshot is older than its ``max-ref-age-ms`` (else the table's
       ``history.expire.max-ref-age-ms``; else forever) is removed.
    2. A retained tag keeps its snapshot. A retained branch keeps its head and walks its ancestors,
       newest first, keeping each while fewer than its ``min-snapshots-to-keep`` (else ``retain_last``)
       are kept or while the snapshot is younger than ``now - max-snapshot-age-ms`` (else ``before_ms``).
    3. Snapshots that are no retained branch's ancestor nor a retained tag's snapshot are kept when
       younger than ``before_ms``.
    Everything else expires (oldest first).
    """
    snapshots = {s.snapshot_id: s for s in metadata.snapshots}
    default_ref_age = _int(metadata.properties.get(MAX_REF_AGE_MS))
    dropped: list[str] = []
    kept_refs: list[SnapshotRef] = []
    for name, ref in sorted(metadata.refs.items()):
        snapshot = snapshots.get(ref.snapshot_id)
        max_age = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else default_ref_age
        if name != MAIN_BRANCH and (
            snapshot is None or (max_age is not None and now_ms - snapshot.timestamp_ms > max_age)
        ):
            dropped.append(name)
        else:
            kept_refs.append(ref)
    keep = {ref.snapshot_id for ref in kept_refs}
    if metadata.current_snapshot_id is not None:
        keep.add(metadata.current_snapshot_id)
    reachable = set(keep)
    for ref in kept_refs:
        if ref.snapshot_ref_type != SnapshotRefType.BRANCH:
            continue
        older = now_ms - ref.max_snapshot_age_ms if ref.max_snapshot_age_ms is not None else before_ms
        minimum = ref.min_snapshots_to_keep if ref.min_snapshots_to_keep is not None else retain_last
        kept_here = 0
        for snapshot in ancestors(metadata, ref.snapshot_id):
            if kept_here < minimum or (older is not None and snapshot.timestamp_ms >= older):
                keep.add(snapshot.snapshot_id)
                kept_here += 1
            else:
                break
        reachable.update(s.snapshot_id for s in ancestors(metadata, ref.snapshot_id))
    young = {
        i
        for i, s in snapshots.items()
        if i not in reachable and before_ms is not None and s.timestamp_ms >= before_ms
    }
    keep |= young
    expired = [
        s.snapshot_id
        for s in sorted(metadata.snapshots, key=lambda s: s.timestamp_ms)
        if s.snapshot_id not in keep
    ]
    return ExpiryPlan(tuple(dropped), tuple(expired))


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def only_expired(expired: Iterable[str], retained: set[str]) -> list[str]:
    """Files of expired snapshots that no retained snapshot references, sorted."""
    return sorted(set(expired) - retained)
