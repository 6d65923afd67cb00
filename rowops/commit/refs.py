"""Iceberg snapshot references (spec "Snapshot References"): branches and tags.

A ref names a snapshot: ``main`` is the table's current snapshot; other branches move with their own
commits (a ``RowDelta`` carries the branch it commits to, ``apply`` makes the new snapshot a child of
that branch's head and moves only that ref); tags never move. Every change of the refs themselves
(create, drop, fast-forward) is a ``RefChange``: a function of the newest table metadata that checks
its preconditions there and returns the metadata updates, so it rebases like any metadata commit and
fails cleanly (``InvalidRefError``) when a concurrent commit made it invalid.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta

from pyiceberg.io import FileIO
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRef, SnapshotRefType
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.table.update import RemoveSnapshotRefUpdate, SetSnapshotRefUpdate, TableUpdate

from rowops.errors import (
    CommitConflictError,
    ConflictKind,
    InvalidInputError,
    InvalidRefError,
    NotFastForwardError,
)
from rowops.meta.files import TableFiles, live_files

RefChange = Callable[[TableMetadata], tuple[TableUpdate, ...]]
BRANCH, TAG = SnapshotRefType.BRANCH, SnapshotRefType.TAG


def head(metadata: TableMetadata, branch: str) -> int | None:
    """The snapshot a commit to ``branch`` builds on (None: ``main`` of a table without snapshots).

    Raises:
        CommitConflictError: the branch is gone (dropped concurrently) or is a tag now.
    """
    if branch == MAIN_BRANCH:
        return metadata.current_snapshot_id
    ref = metadata.refs.get(branch)
    if ref is None or ref.snapshot_ref_type != BRANCH:
        raise CommitConflictError(
            f"Branch {branch!r} of the table at {metadata.location} was dropped concurrently",
            kind=ConflictKind.METADATA_CHANGED,
            retry_safe=False,
            help="Nothing was committed. Recreate the branch (table.create_branch) before writing to it.",
        )
    return ref.snapshot_id


def files_at_head(metadata: TableMetadata, io: FileIO, branch: str, base_files: TableFiles) -> TableFiles:
    """The live files of ``branch``'s head in ``metadata``: ``base_files`` again when the head did not
    move (a concurrent commit to another branch, or a metadata-only change)."""
    at = head(metadata, branch)
    return base_files if at == base_files.snapshot_id else live_files(metadata, io, at)


def move(metadata: TableMetadata, name: str, snapshot_id: int) -> SetSnapshotRefUpdate:
    """The update that points ``name`` at ``snapshot_id``, keeping the ref's type and retention."""
    ref = metadata.refs.get(name)
    return SetSnapshotRefUpdate(
        ref_name=name,
        type=ref.snapshot_ref_type if ref else BRANCH,
        snapshot_id=snapshot_id,
        max_ref_age_ms=ref.max_ref_age_ms if ref else None,
        max_snapshot_age_ms=ref.max_snapshot_age_ms if ref else None,
        min_snapshots_to_keep=ref.min_snapshots_to_keep if ref else None,
    )


def ancestors(metadata: TableMetadata, snapshot_id: int | None) -> Iterator[Snapshot]:
    """``snapshot_id`` and its parents, newest first, as far as the table still has them."""
    by_id = {s.snapshot_id: s for s in metadata.snapshots}
    while snapshot_id is not None and snapshot_id in by_id:
        snapshot = by_id[snapshot_id]
        yield snapshot
        snapshot_id = snapshot.parent_snapshot_id


def is_ancestor(metadata: TableMetadata, ancestor: int | None, head: int | None) -> bool:
    """Whether ``ancestor`` is ``head`` or one of its parents in ``metadata``.

    ``None`` (the table before its first snapshot) is an ancestor of every head. The walk follows parent
    ids while the table still has the snapshot: a parent id naming ``ancestor`` counts even when that
    snapshot has expired since; a walk that ends at an expired snapshot first does not (as Iceberg's
    ``SnapshotUtil.isAncestorOf``: the history in between is unknown).
    """
    if ancestor is None:
        return True
    by_id = {s.snapshot_id: s for s in metadata.snapshots}
    seen: set[int] = set()
    while head is not None and head not in seen:
        if head == ancestor:
            return True
        seen.add(head)
        snapshot = by_id.get(head)
        head = snapshot.parent_snapshot_id if snapshot is not None else None
    return False


def lookup(metadata: TableMetadata, name: str, kind: SnapshotRefType | None = None) -> SnapshotRef:
    """The ref ``name`` (of type ``kind`` when given), or an ``InvalidRefError`` naming the refs there are."""
    ref = metadata.refs.get(name)
    if ref is None or (kind is not None and ref.snapshot_ref_type != kind):
        what = kind.value if kind else "branch or tag"
        known = ", ".join(f"{n} ({r.snapshot_ref_type.value})" for n, r in sorted(metadata.refs.items()))
        raise InvalidRefError(f"The table has no {what} {name!r} (refs: {known or 'none'})")
    return ref


def writable(metadata: TableMetadata, name: str) -> SnapshotRef:
    """The branch ``name``; a tag is read-only."""
    ref = lookup(metadata, name)
    if ref.snapshot_ref_type == TAG:
        raise InvalidRefError(
            f"{name!r} is a tag: tags are read-only snapshots and cannot be written to",
            help="Create a branch from it (table.create_branch(name, table.refs()[tag]['snapshot_id'])) "
            "and write there. Nothing was changed.",
        )
    return ref


def check_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidRefError(f"A branch or tag name must be a non-empty string, got {name!r}")
    return name


def millis(value: timedelta | None, what: str) -> int | None:
    """A retention age in ms (Iceberg's ``*-ms`` fields); None stays None (the table's default)."""
    if value is None:
        return None
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise InvalidInputError(
            f"{what} must be a positive timedelta or None, got {value!r}",
            help=f"e.g. {what}=timedelta(days=7). Nothing was changed.",
        )
    return max(1, int(value.total_seconds() * 1000))


def count(value: int | None, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(f"{what} must be an int >= 1 or None, got {value!r}")
    return value


def create(
    name: str,
    kind: SnapshotRefType,
    snapshot_id: int | None,
    max_ref_age_ms: int | None = None,
    min_snapshots_to_keep: int | None = None,
    max_snapshot_age_ms: int | None = None,
) -> RefChange:
    """Create ref ``name`` at ``snapshot_id`` (None: the current snapshot of the table it applies to)."""

    def change(metadata: TableMetadata) -> tuple[TableUpdate, ...]:
        if name in metadata.refs:
            existing = metadata.refs[name].snapshot_ref_type.value
            raise InvalidRefError(f"The table already has a {existing} named {name!r}")
        target = snapshot_id if snapshot_id is not None else metadata.current_snapshot_id
        if target is None:
            raise InvalidRefError(
                f"Cannot create {kind.value} {name!r}: the table has no snapshot yet",
                help="Write to the table first (a branch or tag names a snapshot). Nothing was changed.",
            )
        if metadata.snapshot_by_id(target) is None:
            raise InvalidRefError(f"Cannot create {kind.value} {name!r}: the table has no snapshot {target}")
        update = SetSnapshotRefUpdate(
            ref_name=name,
            type=kind,
            snapshot_id=target,
            max_ref_age_ms=max_ref_age_ms,
            max_snapshot_age_ms=max_snapshot_age_ms,
            min_snapshots_to_keep=min_snapshots_to_keep,
        )
        return (update,)

    return change


def drop(name: str, kind: SnapshotRefType) -> RefChange:
    """Remove the branch or tag ``name`` (never ``main``); its snapshots stay until expiry."""

    def change(metadata: TableMetadata) -> tuple[TableUpdate, ...]:
        if name == MAIN_BRANCH:
            raise InvalidRefError("The main branch cannot be dropped")
        lookup(metadata, name, kind)
        return (RemoveSnapshotRefUpdate(ref_name=name),)

    return change


def fast_forward(to: str, source: str) -> RefChange:
    """Move branch ``to`` to the snapshot of ref ``source``; ``to``'s head must be an ancestor of it."""

    def change(metadata: TableMetadata) -> tuple[TableUpdate, ...]:
        target = lookup(metadata, source).snapshot_id
        current = writable(metadata, to).snapshot_id if to != MAIN_BRANCH else metadata.current_snapshot_id
        if current == target:
            return ()
        if current is not None and all(s.snapshot_id != current for s in ancestors(metadata, target)):
            raise NotFastForwardError(
                f"Cannot fast-forward {to!r} to {source!r}: {to!r} (snapshot {current}) is not an ancestor "
                f"of {source!r} (snapshot {target}); the branches diverged"
            )
        return (move(metadata, to, target),)

    return change


def describe(metadata: TableMetadata) -> dict[str, dict[str, object]]:
    """Every ref: its type, snapshot and retention settings (None: the table's default)."""
    return {
        name: {
            "type": ref.snapshot_ref_type.value,
            "snapshot_id": ref.snapshot_id,
            "max_ref_age_ms": ref.max_ref_age_ms,
            "min_snapshots_to_keep": ref.min_snapshots_to_keep,
            "max_snapshot_age_ms": ref.max_snapshot_age_ms,
        }
        for name, ref in sorted(metadata.refs.items())
    }
