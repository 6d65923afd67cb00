"""Which files a change feed reads between two states of a table (pure: no Spark, no I/O).

A table state is the live files of a snapshot. Rows only change where files change, so the rows that
differ between two states ``before`` and ``after`` all lie in:
  * data files live ``before`` and gone ``after`` (``removed``: all their live rows are candidates);
  * data files live in both whose applying delete files differ (``redeleted``: new or removed position
    deletes, deletion vectors or equality deletes; only their deleted positions changed);
  * data files live ``after`` and not ``before`` (``added``: all their live rows are candidates).

Everything else is read by neither side, which keeps a feed's work proportional to the change, not
to the table. The two states need not be parent and child: a range of several snapshots, a table
rollback or a lake rollback are diffed the same way.

Maintenance rewrites (compaction, delete conversion, manifest rewrite) are Iceberg ``replace``
snapshots: they change no row, and :func:`only_rewrites` lets the feed skip them without reading files.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Operation

from rowops.meta.delete_index import DeleteIndex, delete_index
from rowops.meta.files import LiveFile, TableFiles


@dataclass(frozen=True)
class FileDiff:
    """The data files whose rows may differ between two states of a table."""

    removed: tuple[LiveFile, ...]
    redeleted: tuple[LiveFile, ...]
    added: tuple[LiveFile, ...]

    @property
    def empty(self) -> bool:
        return not (self.removed or self.redeleted or self.added)

    @property
    def read_before(self) -> tuple[LiveFile, ...]:
        """Data files to read as of ``before`` (rows that may be gone)."""
        return self.removed + self.redeleted


def file_diff(before: TableFiles, after: TableFiles) -> FileDiff:
    """The data files whose rows may differ from ``before`` to ``after`` (linear in the files).

    A data file is the same file in both states when its path is: files are immutable.
    """
    after_paths = {f.path for f in after.data}
    before_paths = {f.path for f in before.data}
    removed = tuple(f for f in before.data if f.path not in after_paths)
    added = tuple(f for f in after.data if f.path not in before_paths)
    if {d.path for d in before.deletes} == {d.path for d in after.deletes}:
        return FileDiff(removed, (), added)
    old, new = delete_index(before), delete_index(after)
    after_by_path = {f.path: f for f in after.data}
    redeleted = tuple(
        f
        for f in before.data
        if f.path in after_by_path and _applying(old, f) != _applying(new, after_by_path[f.path])
    )
    return FileDiff(removed, redeleted, added)


def _applying(index: DeleteIndex, f: LiveFile) -> frozenset[str]:
    return frozenset(d.path for d in (*index.position_deletes_of(f), *index.equality_deletes_of(f)))


def only_rewrites(metadata: TableMetadata, before: int | None, after: int | None) -> bool:
    """Whether ``after`` descends from ``before`` through ``replace`` snapshots only (maintenance
    rewrites, which change no row), so the feed may skip the pair without reading a file.

    >>> only_rewrites(None, 1, 1)  # type: ignore[arg-type]
    True
    """
    if before == after:
        return True
    current = after
    while current is not None and current != before:
        snapshot = metadata.snapshot_by_id(current)
        if snapshot is None or snapshot.summary is None or snapshot.summary.operation != Operation.REPLACE:
            return False
        current = snapshot.parent_snapshot_id
    return current == before
