"""Errors of commits: conflicts as data (:class:`ConflictKind`), unknown commit state, refs, and the
mark that keeps an attempted commit's files (:func:`keep_files`)."""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

from rowops.errors.base import InvalidInputError, RowOpsError

_KEEP_FILES = "_rowops_keep_files"


class UnsupportedStrategyError(RowOpsError):
    """The requested write strategy cannot encode this operation on this table."""

    help = "Use strategy='auto', 'copy-on-write' or 'position-delete'."


class ConflictKind(Enum):
    """Why a concurrent commit conflicts with this one (delta-rs style), for programs to branch on."""

    CONCURRENT_APPEND = "concurrent-append"
    """New data files landed where this operation read (serializable isolation)."""
    CONCURRENT_DELETE_READ = "concurrent-delete-read"
    """Rows this operation read or rewrites were deleted (new delete files apply to them)."""
    DELETE_DELETE = "delete-delete"
    """Data files this operation rewrites or deletes from were removed concurrently."""
    METADATA_CHANGED = "metadata-changed"
    """The table changed in a way this operation cannot rebase over (e.g. rollback on a moved table)."""
    TABLE_DROPPED = "table-dropped"
    """The table was dropped (or dropped and recreated) concurrently."""
    TOO_MANY_ATTEMPTS = "too-many-attempts"
    """Lost the race for the next lake version too often."""
    WRITE_WRITE = "write-write"
    """Rows with keys this transaction writes were written by a transaction committed after it began."""
    READ_CHANGED = "read-changed"
    """A table this serializable transaction read was changed by a transaction committed after it began."""
    TABLE_CREATED = "table-created"
    """A table this transaction creates was created concurrently by another transaction."""
    SCHEMA_CHANGED = "schema-changed"
    """The table's schema changed after this operation read it (its files or its schema change were
    computed for the old schema)."""
    SPEC_CHANGED = "spec-changed"
    """The table's partition spec or sort order changed after this partition or sort order change was
    computed (``meta/spec_evolution.py``)."""
    BASE_NOT_ANCESTOR = "base-not-ancestor"
    """The snapshot this operation read is no longer an ancestor of the branch head (the table or the
    lake was rolled back, or the history in between expired): rebasing would re-apply what the rollback
    undid."""
    DELETES_REMOVED = "deletes-removed"
    """A delete file that applied to a data file this operation changes, live when it read the table, is
    no longer live."""


class CommitConflictError(RowOpsError):
    """A concurrent commit conflicts with this operation; nothing of it was committed.

    Attributes:
        kind: what kind of conflict (:class:`ConflictKind`).
        retry_safe: True when nothing of this operation landed, so running it again is safe.
        conflicting_snapshot_id: the concurrent snapshot that caused the conflict, if known.
        conflicting_files: files of that snapshot that collide with this operation.
        table: the table in conflict, if known.
        other_transaction: id of the committed transaction this one conflicts with, if known.
        other_version: the lake version that transaction committed.
    """

    help = "Nothing was committed; run the operation again to apply it on top of the new table state."

    def __init__(
        self,
        message: str,
        kind: ConflictKind = ConflictKind.CONCURRENT_DELETE_READ,
        conflicting_snapshot_id: int | None = None,
        conflicting_files: Sequence[str] = (),
        retry_safe: bool = True,
        help: str | None = None,
        table: str | None = None,
        other_transaction: str | None = None,
        other_version: int | None = None,
    ) -> None:
        self.kind = kind
        self.conflicting_snapshot_id = conflicting_snapshot_id
        self.conflicting_files = list(conflicting_files)
        self.retry_safe = retry_safe
        self.table = table
        self.other_transaction = other_transaction
        self.other_version = other_version
        super().__init__(f"[{kind.value}] {message}", help)


class TransactionClosedError(RowOpsError):
    """The transaction was committed or rolled back already; it takes no more work."""

    help = "Start a new transaction with lake.transaction() or lake.begin()."


class ReadOnlyError(RowOpsError):
    """A write through a read-only view of the lake (``lake.at(...)``)."""

    help = "Time-travel views are read-only: write through the lake itself, or lake.rollback_to(version)."


class InvalidRefError(InvalidInputError):
    """A branch or tag that does not exist, already exists, cannot be written or cannot move as asked."""

    help = (
        "List the table's branches and tags with table.refs(); write through table.branch(name) (tags are "
        "read-only); nothing was changed."
    )


class NotFastForwardError(InvalidRefError):
    """``fast_forward(to, from)``: the branch ``to`` is not an ancestor of ``from`` (the branches diverged)."""

    help = (
        "Nothing was changed. Merge the changes of the target branch into the source branch first (or "
        "recreate the source branch from it), then fast-forward again."
    )


class CommitStateUnknownError(RowOpsError):
    """The commit may or may not have landed (storage failed while or after committing).

    rowops leaves every file of the attempt in place: a version that did land references them.
    """

    help = (
        "Do not retry blindly: reload the table (lake.table(name).snapshots()) and check whether the "
        "operation's snapshot is there before running it again; lake files left behind by an attempt that "
        "did not land are harmless."
    )


def keep_files(exc: BaseException) -> BaseException:
    """Mark ``exc`` as raised after a commit was attempted: its files must not be cleaned up.

    Like Iceberg's distinction between cleanable failures and ``CommitStateUnknownException``: any
    exception (even ``KeyboardInterrupt``) that passes a commit attempt whose outcome is not known to
    be a loss carries this mark, and staging cleanup honours it.
    """
    setattr(exc, _KEEP_FILES, True)
    return exc


def is_cleanable(exc: BaseException) -> bool:
    """Whether the files written by the failed operation may be deleted (no commit may reference them)."""
    return not getattr(exc, _KEEP_FILES, False)


class WriteVerificationError(RowOpsError):
    """The files found after a Spark write do not hold the rows Spark wrote; nothing was committed."""

    help = (
        "Spark's executors must write where the driver can read: put the lake on object storage "
        "(s3://) or on a file system shared by the driver and every executor (the same path on all "
        "machines). Nothing was committed."
    )
