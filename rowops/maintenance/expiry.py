"""Which snapshots expire, and which files only expired snapshots reference.

Never expired: the current snapshot, the snapshot of any ref (tag or branch), and the ``retain_last``
newest snapshots of the main branch's history. A file may be deleted when an expired snapshot
references it (its manifest list, manifests, data and delete files) and no retained snapshot does
(reading a retained snapshot needs its manifest list, its manifests and their live entries).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta, timezone

from pyiceberg.table.metadata import TableMetadata

from rowops.errors import InvalidInputError


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


def check_retain_last(retain_last: int) -> None:
    if isinstance(retain_last, bool) or not isinstance(retain_last, int) or retain_last < 1:
        raise InvalidInputError(
            f"retain_last must be an int >= 1, got {retain_last!r}",
            help="The current snapshot is always kept: pass retain_last=1 or more. Nothing was changed.",
        )


def protected(metadata: TableMetadata, retain_last: int) -> set[int]:
    """Snapshots that never expire: the current one, every ref's, the newest ``retain_last`` of main."""
    keep = {ref.snapshot_id for ref in metadata.refs.values()}
    by_id = {s.snapshot_id: s for s in metadata.snapshots}
    current = metadata.current_snapshot_id
    while current is not None and current in by_id and retain_last > 0:
        keep.add(current)
        retain_last -= 1
        current = by_id[current].parent_snapshot_id
    return keep


def snapshots_to_expire(metadata: TableMetadata, before_ms: int | None, retain_last: int) -> list[int]:
    """The snapshot ids to remove, oldest first."""
    keep = protected(metadata, retain_last)
    return [
        s.snapshot_id
        for s in sorted(metadata.snapshots, key=lambda s: s.timestamp_ms)
        if s.snapshot_id not in keep and (before_ms is None or s.timestamp_ms < before_ms)
    ]


def only_expired(expired: Iterable[str], retained: set[str]) -> list[str]:
    """Files of expired snapshots that no retained snapshot references, sorted."""
    return sorted(set(expired) - retained)
