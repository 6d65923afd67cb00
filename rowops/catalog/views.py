"""A read-only view of every table as of one lake version (lake-wide time travel)."""

from __future__ import annotations

import weakref

from rowops.catalog.attempts import CommitListener
from rowops.catalog.expired import check_offered
from rowops.catalog.leases import Holder
from rowops.catalog.log import LakeVersion
from rowops.catalog.tables import LoadedTable, TableCatalog
from rowops.commit.refs import RefChange
from rowops.commit.row_delta import RowDelta
from rowops.errors import ReadOnlyError
from rowops.meta.evolution import SchemaChange
from rowops.meta.files import TableFiles
from rowops.request.identifiers import TableIdentifier


class PinnedView:
    """Reads see lake version ``version``; every write raises :class:`ReadOnlyError`."""

    def __init__(self, catalog: TableCatalog, version: LakeVersion) -> None:
        self.catalog = catalog
        self.version = version
        self.lease = Holder(catalog.log, version.version)  # keeps what it reads from other expiries
        weakref.finalize(self, self.lease.release)

    def close(self) -> None:
        """Let expiries remove what this view reads (also done when the view is garbage-collected)."""
        self.lease.release()

    def load(self, ident: TableIdentifier) -> LoadedTable:
        """The table as of this version; refused (``SnapshotExpiredError``) when an expiry removed its
        snapshot of that version."""
        self.lease.touch()
        loaded = self.catalog.load(ident, self.version)
        check_offered(self.catalog.log, str(ident), loaded.metadata)
        return loaded

    def note_read(self, ident: TableIdentifier) -> None:
        """Reads of a past version need no validation."""

    def commit_delta(
        self,
        base: LoadedTable,
        base_files: TableFiles,
        delta: RowDelta,
        snapshot_id: int | None = None,
        listener: CommitListener | None = None,
    ) -> LoadedTable:
        raise self._read_only(base)

    def set_properties(self, base: LoadedTable, properties: dict[str, str]) -> LoadedTable:
        raise self._read_only(base)

    def set_current_snapshot(self, base: LoadedTable, snapshot_id: int) -> LoadedTable:
        raise self._read_only(base)

    def evolve_schema(self, base: LoadedTable, change: SchemaChange) -> LoadedTable:
        raise self._read_only(base)

    def update_refs(self, base: LoadedTable, change: RefChange) -> LoadedTable:
        raise self._read_only(base)

    def _read_only(self, base: LoadedTable) -> ReadOnlyError:
        return ReadOnlyError(f"Table {base.identifier} is read as of lake version {self.version.version}")
