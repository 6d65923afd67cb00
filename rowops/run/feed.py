"""A table's change feed: the rows each commit in a range inserted, deleted or updated.

A range is given in lake versions or timestamps (``start`` exclusive, ``end`` inclusive), or in
snapshot ids. Over lake versions, a commit is one lake version that changed the table: a lake
transaction is one commit with all its statements, and a table or lake rollback is a commit whose
changes undo what it rolled back. Over snapshot ids (also for tables of other catalogs), a commit is
one snapshot of the end snapshot's history.

Each commit is the difference of two table states, read from the files that differ only
(``plan/feed.py``, ``exec/changes/feed.py``); maintenance rewrites are skipped unread. ``net`` reads one
difference, from the start state to the end state: one net change per row (per key with identifier
columns: insert then update is an insert, insert then delete is nothing).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from pyiceberg.io import FileIO
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata

from rowops.catalog.expired import check_offered
from rowops.catalog.log import LakeVersion
from rowops.catalog.tables import TableCatalog
from rowops.errors import InvalidInputError, SnapshotExpiredError
from rowops.exec.changes.feed import appended_rows_of, state_changes, union_commits, with_commit
from rowops.exec.checks.expressions import check_condition
from rowops.meta.files import TableFiles, live_files
from rowops.meta.lineage import ROW_ID
from rowops.meta.stored_schema import schema_of
from rowops.meta.v3 import V3
from rowops.plan.feed import FileDiff, file_diff, only_rewrites

if TYPE_CHECKING:
    from rowops.exec.spark.frames import DataFrame
    from rowops.run.target import TableTarget

Bound = int | datetime | None


@dataclass(frozen=True)
class TableState:
    """A table as of one point of the feed: its metadata and the snapshot of its main branch."""

    metadata: TableMetadata | None
    snapshot_id: int | None

    @property
    def uuid(self) -> str | None:
        return str(self.metadata.table_uuid) if self.metadata is not None else None


@dataclass(frozen=True)
class FeedCommit:
    """One commit of the feed: the table went from ``before`` to ``after``."""

    before: TableState
    after: TableState
    version: int | None
    timestamp_ms: int


def table_changes(
    table: TableTarget,
    start: Bound = None,
    end: Bound = None,
    start_snapshot_id: int | None = None,
    end_snapshot_id: int | None = None,
    net: bool = False,
) -> DataFrame:
    """The change feed of ``table`` (``Table.changes``)."""
    commits = feed_commits(table, start, end, start_snapshot_id, end_snapshot_id, net)
    if net and commits:
        last = commits[-1]
        commits = [FeedCommit(commits[0].before, last.after, last.version, last.timestamp_ms)]
    schema = _schema(table, commits)
    keys = _pairing_keys(schema, commits)
    spark, parts = table.lake.spark, []
    for ordinal, commit, before, after, diff in _commit_diffs(table, commits):
        rows = state_changes(spark, schema, before, after, diff, keys, table.lake.catalog.io)
        parts.append(
            with_commit(rows, commit.version, commit.after.snapshot_id, commit.timestamp_ms, ordinal)
        )
    return union_commits(spark, schema, parts)


def appended_rows(
    table: TableTarget,
    start: Bound = None,
    end: Bound = None,
    start_snapshot_id: int | None = None,
    end_snapshot_id: int | None = None,
    where: str | None = None,
) -> DataFrame:
    """The rows appended by the commits of a range (Iceberg's incremental append scan) that match
    ``where``; a commit that deletes or rewrites rows is refused (``InvalidInputError``: read
    ``changes()`` instead)."""
    commits = feed_commits(table, start, end, start_snapshot_id, end_snapshot_id)
    schema = _schema(table, commits)
    parts = []
    for _, commit, _, after, diff in _commit_diffs(table, commits):
        if diff.removed or diff.redeleted:
            at = f"lake version {commit.version}" if commit.version is not None else "the range"
            raise InvalidInputError(
                f"Table {table.name}: the commit of snapshot {commit.after.snapshot_id} ({at}) deletes or "
                "rewrites rows, so the range is not append-only",
                help="Read every change of the range (inserts, deletes and updates) with table.changes() and the same range; "
                "nothing was read.",
            )
        if diff.added:
            parts.append((after, diff.added))
    rows = appended_rows_of(table.lake.spark, schema, parts)
    return rows if where is None else rows.where(check_condition(rows, where, "to_df(where=...)"))


def _commit_diffs(
    table: TableTarget, commits: list[FeedCommit]
) -> Iterator[tuple[int, FeedCommit, TableFiles, TableFiles, FileDiff]]:
    """Each commit that may change rows, with its ordinal, its two states' files and the files that
    differ (maintenance rewrites and commits whose files are the same are skipped unread)."""
    files = _FilesOf(table.lake.catalog.io)
    ordinal = 0  # counts the commits of the table but maintenance rewrites, as Iceberg's changelog does
    for commit in commits:
        if _unchanged(commit):
            continue
        before, after = files.of(commit.before), files.of(commit.after)
        diff = file_diff(before, after)
        if not diff.empty:
            yield ordinal, commit, before, after, diff
        ordinal += 1


def feed_commits(
    table: TableTarget,
    start: Bound = None,
    end: Bound = None,
    start_snapshot_id: int | None = None,
    end_snapshot_id: int | None = None,
    net: bool = False,
) -> list[FeedCommit]:
    """The commits of a range given in lake versions / timestamps or in snapshot ids (``net``: at most
    one, from the range's first state to its last)."""
    if start_snapshot_id is None and end_snapshot_id is None:
        return list(_version_commits(table, start, end, net))
    if start is not None or end is not None:
        raise InvalidInputError(
            "A range is given in lake versions or timestamps (start=, end=) or in snapshot ids "
            "(start_snapshot_id=, end_snapshot_id=), not both",
            help="Pass one kind of range; nothing was read.",
        )
    return list(_snapshot_commits(table, start_snapshot_id, end_snapshot_id))


class _FilesOf:
    """The live files of the states of a range, each listed once."""

    def __init__(self, io: FileIO) -> None:
        self.io = io
        self.known: dict[tuple[str | None, int | None], TableFiles] = {}

    def of(self, state: TableState) -> TableFiles:
        key = (state.uuid, state.snapshot_id)
        if key not in self.known:
            if state.metadata is None or state.snapshot_id is None:
                self.known[key] = TableFiles(None, 0, (), (), (), ())
            else:
                self.known[key] = live_files(state.metadata, self.io, state.snapshot_id)
        return self.known[key]


def _unchanged(commit: FeedCommit) -> bool:
    """No row changed: the same snapshot, or only maintenance rewrites in between."""
    before, after = commit.before, commit.after
    if before.snapshot_id == after.snapshot_id and before.uuid == after.uuid:
        return True
    if before.snapshot_id is None or after.metadata is None or before.uuid != after.uuid:
        return False
    return only_rewrites(after.metadata, before.snapshot_id, after.snapshot_id)


def _schema(table: TableTarget, commits: list[FeedCommit]) -> Schema:
    """The schema of the range's last state (rows of older states are read with it): the current
    schema when that state is its metadata's current snapshot (as ``to_df`` reads it: a column added
    since the last commit is there, NULL), else the snapshot's own."""
    final = commits[-1].after if commits else None
    if final is None or final.metadata is None:
        return table.metadata.schema()
    if final.snapshot_id == final.metadata.current_snapshot_id:
        return final.metadata.schema()
    return schema_of(final.metadata, final.snapshot_id)


def _pairing_keys(schema: Schema, commits: list[FeedCommit]) -> list[str]:
    """Identifier columns pair updates; without them, v3 row ids; else none (inserts and deletes)."""
    final = commits[-1].after if commits else None
    names = [schema.find_column_name(i) or "" for i in schema.identifier_field_ids]
    if names:
        return names
    if final is not None and final.metadata is not None and final.metadata.format_version >= V3:
        return [ROW_ID]
    return []


# -- ranges over lake versions ----------------------------------------------------------------------
def _version_commits(table: TableTarget, start: Bound, end: Bound, net: bool = False) -> Iterator[FeedCommit]:
    catalog = table.lake.catalog
    if not isinstance(catalog, TableCatalog):
        raise InvalidInputError(
            f"Table {table.name} is not in a rowops lake: its change feed is ranged in snapshot ids",
            help="Give the range as start_snapshot_id= and end_snapshot_id= (table.snapshots()); nothing was read.",
        )
    newest = table.load().lake_version
    first, last = lake_version(catalog, start, 0, newest), lake_version(catalog, end, newest, newest)
    if first > last:
        raise InvalidInputError(
            f"changes(): start (lake version {first}) is after end (lake version {last})",
            help="Give start <= end (start is exclusive, end inclusive); nothing was read.",
        )
    name = table.name
    previous = _state_at(catalog, name, catalog.log.read(first)) if first > 0 else TableState(None, None)
    if net:
        yield from _net_commit(catalog, name, previous, catalog.log.read(last))
        return
    for version in catalog.log.history(first + 1, last + 1):
        entry = version.get(name)
        state = _state_at(catalog, name, version)
        if state.metadata is not None and previous.metadata is not None and state.uuid != previous.uuid:
            raise InvalidInputError(
                f"Table {name} was dropped and created again at lake version {version.version}: a change feed "
                "follows one table",
                help=f"Read the changes up to version {version.version - 1}, then from {version.version}.",
            )
        if entry is None and previous.metadata is not None:
            raise InvalidInputError(
                f"Table {name} was dropped at lake version {version.version}, inside the range",
                help=f"End the range before version {version.version}; nothing was read.",
            )
        if state.snapshot_id != previous.snapshot_id:
            yield FeedCommit(previous, state, version.version, version.timestamp_ms)
        previous = state


def _net_commit(
    catalog: TableCatalog, name: str, before: TableState, last: LakeVersion
) -> Iterator[FeedCommit]:
    """The one commit of a net feed: the range's first state to its last (the states in between are
    not read, so history expired in between does not matter)."""
    after = _state_at(catalog, name, last)
    if after.metadata is None:
        raise InvalidInputError(
            f"Table {name} does not exist at lake version {last.version}, the end of the range",
            help="End the range at a version that has the table (lake.history()); nothing was read.",
        )
    if before.metadata is not None and before.uuid != after.uuid:
        raise InvalidInputError(
            f"Table {name} was dropped and created again inside the range: a change feed follows one table",
            help="Start the range after the table was created again (lake.history()); nothing was read.",
        )
    if before.snapshot_id != after.snapshot_id:
        yield FeedCommit(before, after, last.version, last.timestamp_ms)


def lake_version(catalog: TableCatalog, bound: Bound, default: int, newest: int) -> int:
    """A range bound (lake version, datetime, None: ``default``) as a lake version <= ``newest``."""
    if bound is None:
        return default
    if isinstance(bound, datetime):
        return catalog.log.version_at(int(bound.timestamp() * 1000)).version
    if isinstance(bound, bool) or not isinstance(bound, int):
        raise InvalidInputError(
            f"changes(): a range bound is a lake version (int) or a datetime, not {bound!r}",
            help="Pass start=/end= as lake versions (lake.history()) or datetimes; nothing was read.",
        )
    if not 0 <= bound <= newest:
        raise InvalidInputError(
            f"changes(): lake version {bound} does not exist (versions 0..{newest})",
            help="List versions with lake.history(); nothing was read.",
        )
    return bound


def _state_at(catalog: TableCatalog, name: str, version: LakeVersion) -> TableState:
    entry = version.get(name)
    if entry is None:
        return TableState(None, None)
    metadata = catalog.read_metadata(entry.metadata_location)
    check_offered(catalog.log, name, metadata)
    return TableState(metadata, metadata.current_snapshot_id)


# -- ranges over snapshot ids -----------------------------------------------------------------------
def _snapshot_commits(table: TableTarget, start: int | None, end: int | None) -> Iterator[FeedCommit]:
    metadata = table.metadata
    end = end if end is not None else metadata.current_snapshot_id
    chain = _ancestry(metadata, end, start)
    previous = TableState(metadata if start is not None else None, start)
    for snapshot_id in reversed(chain):
        snapshot = metadata.snapshot_by_id(snapshot_id)
        state = TableState(metadata, snapshot_id)
        yield FeedCommit(previous, state, None, snapshot.timestamp_ms if snapshot else 0)
        previous = state


def _ancestry(metadata: TableMetadata, end: int | None, start: int | None) -> list[int]:
    """Snapshot ids from ``end`` back to (not including) ``start``; ``start`` must be an ancestor."""
    for given in (start, end):
        if given is not None and metadata.snapshot_by_id(given) is None:
            raise SnapshotExpiredError(
                f"changes(): the table has no snapshot {given} (never made, or expired)",
                help="List snapshots with table.snapshots(); nothing was read.",
            )
    chain, current = [], end
    while current is not None and current != start:
        chain.append(current)
        snapshot = metadata.snapshot_by_id(current)
        if snapshot is None:
            raise SnapshotExpiredError(
                f"changes(): snapshot {current} in the range was expired",
                help="Start the range after the expired history; nothing was read.",
            )
        current = snapshot.parent_snapshot_id
    if current != start:
        raise InvalidInputError(
            f"changes(): snapshot {start} is not an ancestor of snapshot {end}",
            help="Give a start snapshot on the end snapshot's history (table.snapshots()); nothing was read.",
        )
    return chain
