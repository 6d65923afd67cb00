"""The rebase rule: may a delta built on one table state be re-applied on the current one?

``find_conflict`` answers for every commit that lost the race for a lake version (single statements,
maintenance, transaction replays, catalog commits): ``None`` means rebase and retry, a
:class:`~rowops.commit.row_conflicts.Conflict` means abort (``CommitConflictError``).
"""

from __future__ import annotations

from pyiceberg.io import FileIO
from pyiceberg.table.metadata import TableMetadata

from rowops.commit import refs
from rowops.commit.row_conflicts import Conflict, delete_conflict
from rowops.commit.row_delta import RowDelta
from rowops.errors import ConflictKind
from rowops.meta.delete_index import delete_index
from rowops.meta.files import TableFiles
from rowops.request.properties import row_level_conflicts

__all__ = ["find_conflict"]


def find_conflict(
    delta: RowDelta,
    base: TableFiles,
    current: TableFiles,
    current_meta: TableMetadata,
    row_level: bool | None = None,
    *,
    io: FileIO,
) -> Conflict | None:
    """Check the changes committed between ``base`` and ``current`` against ``delta``.

    Rules (Iceberg's RowDelta / OverwriteFiles validations, refined to rows):
      * files this delta removes or references by position must still be live (delete-delete);
      * no concurrent delete file may remove rows this delta changed (concurrent delete of rows this
        operation read). Row level (``commit/row_conflicts.py``): position deletes of the same data
        file conflict only if they delete a common position; an equality delete only if its keys can
        fall in the delta's key ranges (a MERGE on keys; other reads stay file level). A concurrent
        delete on a file this delta *rewrote* (copy-on-write) always conflicts: the new file has no
        row mapping to the old one, and the rewrite would resurrect the deleted rows;
      * serializable: no concurrent data file that may hold a row of the delta's read set
        (its partition and key ranges; concurrent append).
      * the table's current schema must be the one the delta was planned on (``schema_id``): files
        written for an older schema, or an UPDATE of a column since renamed, dropped or re-added,
        must not land silently (``schema-changed``; this applies to blind deltas too);
      * likewise the default partition spec (``spec_id``, ``spec-changed``): new files are written with
        the newest spec, and an equality delete written for one spec would not apply to files of another.
      * the rebase rule: the base's snapshot must be an ancestor of the head (``base-not-ancestor``; a
        table or lake rollback, or history expired in between, as Iceberg's ``validationHistory``), and
        no delete file live at the base that applies to a data file this delta touches may be gone
        (``deletes-removed``): the delta's files were computed with those rows deleted.
    Blind deltas (appends, equality deletes) never conflict otherwise: their meaning does not depend
    on a read (rebasing one over a rollback is the serial order "rollback, then write").

    Args:
        row_level: compare rows (True) or stop at files (False); None reads the table property
            ``rowops.conflict-detection`` (``row``, the default, or ``file``) of ``current_meta``.
        io: the lake's FileIO, which reads the concurrent delete files a row-level comparison needs
            (on an object store, with the lake's endpoint and credentials).
    """
    if delta.schema_id is not None and delta.schema_id != current_meta.current_schema_id:
        reason = (
            f"the table's schema changed (schema {delta.schema_id} -> {current_meta.current_schema_id}) "
            "after this operation was planned"
        )
        return Conflict(ConflictKind.SCHEMA_CHANGED, reason, current.snapshot_id, ())
    if delta.spec_id is not None and delta.spec_id != current_meta.default_spec_id:
        reason = (
            f"the table's partition spec changed (spec {delta.spec_id} -> {current_meta.default_spec_id}) "
            "after this operation was planned"
        )
        return Conflict(ConflictKind.SPEC_CHANGED, reason, current.snapshot_id, ())
    if delta.blind:
        return None
    snapshot = current.snapshot_id
    conflict = _history_conflict(delta, base, current, current_meta)
    if conflict is not None:
        return conflict
    if row_level is None:
        row_level = row_level_conflicts(current_meta.properties)
    live = {f.path for f in current.data}
    gone = sorted(p for p in delta.touched_data if p not in live)
    if gone:
        reason = "data files this operation rewrites or deletes from were removed"
        return Conflict(ConflictKind.DELETE_DELETE, reason, snapshot, tuple(gone))
    conflict = delete_conflict(delta, base, current, current_meta.schema(), row_level, io)
    if conflict is not None:
        return conflict
    if delta.serializable:
        base_data = {f.path for f in base.data}
        schema = current_meta.schema()
        for new_file in (f for f in current.data if f.path not in base_data):
            if delta.read_set.may_hold_file(new_file, schema):
                reason = "concurrent data files were added where this operation read (serializable)"
                return Conflict(ConflictKind.CONCURRENT_APPEND, reason, snapshot, (new_file.path,))
    return None


def _history_conflict(
    delta: RowDelta, base: TableFiles, current: TableFiles, current_meta: TableMetadata
) -> Conflict | None:
    """The rebase rule: the base is in the head's history, and the deletes the delta's files were
    computed under are still in force."""
    snapshot = current.snapshot_id
    if not refs.is_ancestor(current_meta, base.snapshot_id, snapshot):
        reason = (
            f"the snapshot it read ({base.snapshot_id}) is no longer an ancestor of the head of branch "
            f"{delta.branch!r}: the table or the lake was rolled back (or the history in between expired)"
        )
        return Conflict(ConflictKind.BASE_NOT_ANCESTOR, reason, snapshot, ())
    lost = _lost_deletes(delta, base, current)
    if lost:
        reason = "delete files that applied to data files this operation changes were removed, unreplaced"
        return Conflict(ConflictKind.DELETES_REMOVED, reason, snapshot, lost)
    return None


def _lost_deletes(delta: RowDelta, base: TableFiles, current: TableFiles) -> tuple[str, ...]:
    """Delete files live at the base that applied to a data file the delta touches, still live, with
    no delete file added since that applies to it: its deleted rows came back, and this delta's files
    were computed without them. (A removed delete file *replaced* by a new one on the same data file,
    as a position-delete merge or an equality-delete conversion does, is checked row by row like any
    new delete file; a data file no longer live is a ``delete-delete`` conflict.)"""
    touched = [f for f in base.data if f.path in delta.touched_data]
    if not touched or not base.deletes:
        return ()
    live, index = {d.path for d in current.deletes}, delete_index(base)
    lost = {
        f.path: [
            d.path
            for d in (*index.position_deletes_of(f), *index.equality_deletes_of(f))
            if d.path not in live
        ]
        for f in touched
    }
    lost = {path: gone for path, gone in lost.items() if gone}
    if not lost:
        return ()
    before, now = {d.path for d in base.deletes}, delete_index(current)
    found: set[str] = set()
    for f in current.data:
        if f.path in lost:
            applying = (*now.position_deletes_of(f), *now.equality_deletes_of(f))
            if not any(d.path not in before for d in applying):
                found.update(lost[f.path])
    return tuple(sorted(found))
