"""The scope of a branch handle (``table.branch("audit")``): reads and commits on a branch, not main.

Planning, scans, encodings and results all read "the current snapshot" of the metadata they are
given. A branch scope hands them a *view* of the table metadata whose current snapshot is the branch's
head (``BranchLoaded``; everything else is the table's), and routes commits to the scope it wraps with
the real metadata and the branch named on the ``RowDelta``: ``apply`` builds on the branch head and
moves only that ref, conflicts are checked against the branch head (``refs.files_at_head``), and
``main`` does not move. The view is never written: every commit goes through the wrapped scope.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pyiceberg.table.metadata import TableMetadata

from rowops.catalog.attempts import CommitListener
from rowops.catalog.tables import LoadedTable, TableScope
from rowops.commit import refs
from rowops.commit.row_delta import RowDelta
from rowops.errors import InvalidInputError
from rowops.meta.evolution import SchemaChange
from rowops.meta.files import TableFiles
from rowops.request.identifiers import TableIdentifier


@dataclass(frozen=True)
class BranchLoaded(LoadedTable):
    """A table as a branch sees it: ``metadata`` is the view (current snapshot = branch head), ``real``
    the table state it was made from (what commits build on)."""

    real: LoadedTable | None = None


def view(loaded: LoadedTable, branch: str) -> BranchLoaded:
    """``loaded`` seen from ``branch`` (an ``InvalidRefError`` if it is not a branch of the table)."""
    head = refs.writable(loaded.metadata, branch).snapshot_id
    metadata: TableMetadata = loaded.metadata.model_copy(update={"current_snapshot_id": head})
    return BranchLoaded(loaded.identifier, loaded.lake_version, loaded.metadata_location, metadata, loaded)


def real(base: LoadedTable) -> LoadedTable:
    return base.real if isinstance(base, BranchLoaded) and base.real is not None else base


class BranchScope:
    """Reads and writes of one branch, through ``inner`` (the lake, or a transaction)."""

    def __init__(self, inner: TableScope, branch: str) -> None:
        self.inner = inner
        self.branch = branch

    def load(self, ident: TableIdentifier) -> LoadedTable:
        return view(self.inner.load(ident), self.branch)

    def note_read(self, ident: TableIdentifier) -> None:
        self.inner.note_read(ident)

    def commit_delta(
        self,
        base: LoadedTable,
        base_files: TableFiles,
        delta: RowDelta,
        snapshot_id: int | None = None,
        listener: CommitListener | None = None,
    ) -> LoadedTable:
        delta = replace(delta, branch=self.branch)
        committed = self.inner.commit_delta(real(base), base_files, delta, snapshot_id, listener)
        return view(committed, self.branch)

    def set_properties(self, base: LoadedTable, properties: dict[str, str]) -> LoadedTable:
        return view(self.inner.set_properties(real(base), properties), self.branch)

    def evolve_schema(self, base: LoadedTable, change: SchemaChange) -> LoadedTable:
        return view(self.inner.evolve_schema(real(base), change), self.branch)

    def set_current_snapshot(self, base: LoadedTable, snapshot_id: int) -> LoadedTable:
        raise InvalidInputError(
            f"rollback_to moves the main branch only (this handle writes branch {self.branch!r})",
            help="Call it on lake.table(name); to move a branch, drop and recreate it at the snapshot "
            "(create_branch(name, snapshot_id)). Nothing was changed.",
        )

    def update_refs(self, base: LoadedTable, change: refs.RefChange) -> LoadedTable:
        return self.inner.update_refs(real(base), change)
