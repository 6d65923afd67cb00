"""The result of a row-level operation."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class OperationResult:
    """What an operation did. A count is None where the encoding cannot know it.

    Equality deletes, for example, never scan the target, so they cannot tell updated rows from
    inserted ones.
    """

    strategy: str
    snapshot_id: int | None
    rows_inserted: int | None
    rows_updated: int | None
    rows_deleted: int | None
    data_files_added: int
    data_files_removed: int
    delete_files_added: int
    duration_s: float
    delete_files_removed: int = 0
    files_scanned: int = 0
    files_pruned: int = 0
    files_rewritten: int = 0
    explain: str = field(default="", repr=False)
