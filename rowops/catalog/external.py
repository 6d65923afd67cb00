"""Tables that stay in a pyiceberg catalog (SQL, REST, Glue, Hive, ...): a ``TableScope`` committing
through the catalog's own ``commit_table``.

rowops builds the new snapshot exactly as for its own tables (``commit.row_delta.apply`` writes the
manifests and the manifest list); the catalog gets it as Iceberg's REST commit protocol words it::

    requirements: AssertTableUUID(uuid), AssertRefSnapshotId(ref="main", snapshot_id=<base snapshot>)
    updates:      AddSnapshotUpdate(snapshot), SetSnapshotRefUpdate(main -> snapshot)

and writes the table's next ``metadata.json`` itself. A commit the catalog refuses
(``CommitFailedException``: another writer moved ``main``) is retried on the reloaded table after the
same validation as on the lake log (``find_conflict``); a real conflict raises ``CommitConflictError``.
Each operation is one catalog commit of one table: multi-table transactions need rowops' lake log.
"""

from __future__ import annotations

from collections.abc import Callable

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException
from pyiceberg.exceptions import NoSuchTableError as IcebergNoSuchTableError
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.table import Table as IcebergTable
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.table.update import (
    AddSnapshotUpdate,
    AssertCurrentSchemaId,
    AssertRefSnapshotId,
    AssertTableUUID,
    SetPropertiesUpdate,
    TableRequirement,
    TableUpdate,
)

from rowops.catalog.storage import sync_files
from rowops.catalog.tables import (
    MAX_COMMIT_ATTEMPTS,
    Attempts,
    CommitListener,
    LoadedTable,
    new_snapshot_id,
    raise_on_conflict,
)
from rowops.commit import refs
from rowops.commit.refs import files_at_head
from rowops.commit.row_delta import RowDelta, apply, main_branch_update
from rowops.errors import CommitConflictError, CommitStateUnknownError, ConflictKind, NoSuchTableError
from rowops.meta.evolution import SchemaChange
from rowops.meta.files import TableFiles
from rowops.request.identifiers import TableIdentifier

# What one attempt sends, built on the table state it is given: requirements, updates, files written.
Change = tuple[tuple[TableRequirement, ...], tuple[TableUpdate, ...], list[str]]
Producer = Callable[[LoadedTable], Change]


class CatalogScope:
    """Where handles of a catalog-backed lakehouse read and commit: the catalog's current table."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.io: FileIO = PyArrowFileIO(properties=dict(catalog.properties))
        self._tables: dict[str, IcebergTable] = {}  # the catalog's handle per metadata location

    def __repr__(self) -> str:
        return f"CatalogScope({self.catalog.name!r})"

    # -- reading -----------------------------------------------------------------------------
    def load(self, ident: TableIdentifier) -> LoadedTable:
        try:
            table = self.catalog.load_table(ident.path_parts)
        except IcebergNoSuchTableError as exc:
            raise NoSuchTableError(f"Table {ident} does not exist in catalog {self.catalog.name!r}") from exc
        self._tables = {table.metadata_location: table}
        return LoadedTable(ident, 0, table.metadata_location, table.metadata)

    def note_read(self, ident: TableIdentifier) -> None:
        """Single statements validate their own reads; nothing to record."""

    # -- writing -----------------------------------------------------------------------------
    def commit_delta(
        self,
        base: LoadedTable,
        base_files: TableFiles,
        delta: RowDelta,
        snapshot_id: int | None = None,
        listener: CommitListener | None = None,
    ) -> LoadedTable:
        """Commit ``delta`` read at ``base`` as one catalog commit; rebase when Iceberg's rules allow."""
        snapshot_id = snapshot_id or new_snapshot_id()
        sync_files(f.file_path for f in (*delta.added_data, *delta.added_deletes))

        def produce(cur: LoadedTable) -> Change:
            cur_files = base_files
            if cur.metadata_location != base.metadata_location:
                cur_files = files_at_head(cur.metadata, self.io, delta.branch, base_files)
                raise_on_conflict(delta, base_files, cur_files, cur, self.io)
            new, written = apply(delta, cur.metadata, cur_files, self.io, snapshot_id, cur.metadata_location)
            snapshot = new.snapshot_by_id(snapshot_id)
            assert snapshot is not None  # apply added it
            updates = (
                AddSnapshotUpdate(snapshot=snapshot),
                refs.move(cur.metadata, delta.branch, snapshot_id),
            )
            return _ref_unchanged(cur, delta.branch), updates, written

        return self._commit(base, produce, listener)

    def set_properties(self, base: LoadedTable, properties: dict[str, str]) -> LoadedTable:
        """Set table properties (rebases trivially: only the table's identity is required)."""
        update = SetPropertiesUpdate(updates=properties)

        def produce(cur: LoadedTable) -> Change:
            return (AssertTableUUID(uuid=cur.metadata.table_uuid),), (update,), []

        return self._commit(base, produce)

    def evolve_schema(self, base: LoadedTable, change: SchemaChange) -> LoadedTable:
        """Commit a schema change, required to apply on the schema it was computed on."""

        def produce(cur: LoadedTable) -> Change:
            reason = change.conflict(cur.metadata)
            if reason is not None:
                raise change.conflict_error(reason, cur.metadata, str(base.identifier))
            requirements = (
                AssertTableUUID(uuid=cur.metadata.table_uuid),
                AssertCurrentSchemaId(current_schema_id=change.base_schema_id),
                *change.requirements(),
            )
            return requirements, change.updates, []

        return self._commit(base, produce)

    def set_current_snapshot(self, base: LoadedTable, snapshot_id: int) -> LoadedTable:
        """Point ``main`` at an existing snapshot; a conflict if the table moved since ``base``."""

        def produce(cur: LoadedTable) -> Change:
            if cur.metadata_location != base.metadata_location:
                raise CommitConflictError(
                    f"Table {base.identifier} changed while rolling back to snapshot {snapshot_id}; "
                    "the rollback would discard the commits that landed in between",
                    kind=ConflictKind.METADATA_CHANGED,
                    conflicting_snapshot_id=cur.metadata.current_snapshot_id,
                    table=str(base.identifier),
                    help="Nothing was changed. Check table.snapshots() and call rollback_to again if the "
                    "rollback is still wanted.",
                )
            return _main_unchanged(cur), (main_branch_update(snapshot_id),), []

        return self._commit(base, produce)

    def update_refs(self, base: LoadedTable, change: refs.RefChange) -> LoadedTable:
        """Create, drop or move branches and tags; the refs it looked at must not have moved."""

        def produce(cur: LoadedTable) -> Change:
            updates = change(cur.metadata)
            names = sorted({str(getattr(u, "ref_name", MAIN_BRANCH)) for u in updates} | {MAIN_BRANCH})
            return _ref_unchanged(cur, *names), updates, []

        return self._commit(base, produce)

    # -- internals ---------------------------------------------------------------------------
    def _commit(
        self, base: LoadedTable, produce: Producer, listener: CommitListener | None = None
    ) -> LoadedTable:
        """The optimistic loop: build on ``cur``, let the catalog check the requirements, reload on refusal."""
        attempts = Attempts(self.io, listener)
        cur = base
        try:
            for _ in range(MAX_COMMIT_ATTEMPTS):
                requirements, updates, files = produce(cur)
                attempts.restage(files)
                committed = self._attempt(attempts, cur, requirements, updates)
                if committed is None:
                    cur = self._reload(base)
                    continue
                attempts.remove_garbage()
                return committed
            raise CommitConflictError(
                f"Gave up committing to {base.identifier} after {MAX_COMMIT_ATTEMPTS} refused catalog commits",
                kind=ConflictKind.TOO_MANY_ATTEMPTS,
                table=str(base.identifier),
            )
        except BaseException as exc:
            attempts.fail(exc)
            raise

    def _attempt(
        self,
        attempts: Attempts,
        cur: LoadedTable,
        requirements: tuple[TableRequirement, ...],
        updates: tuple[TableUpdate, ...],
    ) -> LoadedTable | None:
        """One ``commit_table``; None when the catalog refused it (certainly not committed)."""
        table = self._handle(cur)
        attempts.in_flight = True
        attempts.listener.attempting()
        try:
            response = self.catalog.commit_table(table, requirements, updates)
        except CommitFailedException:
            attempts.in_flight = False
            attempts.listener.lost()
            return None
        except CommitStateUnknownException as exc:
            raise CommitStateUnknownError(
                f"The catalog could not confirm the commit to {cur.identifier}: {exc}"
            ) from exc
        except IcebergNoSuchTableError as exc:
            attempts.in_flight = False
            attempts.listener.lost()
            raise _dropped(cur.identifier) from exc
        attempts.landed = True
        return LoadedTable(cur.identifier, 0, response.metadata_location, response.metadata)

    def _reload(self, base: LoadedTable) -> LoadedTable:
        try:
            cur = self.load(base.identifier)
        except NoSuchTableError as exc:
            raise _dropped(base.identifier) from exc
        if cur.metadata.table_uuid != base.metadata.table_uuid:
            raise _dropped(base.identifier)
        return cur

    def _handle(self, cur: LoadedTable) -> IcebergTable:
        """The catalog's table object for ``cur`` (the one ``load`` returned, or one built from it)."""
        table = self._tables.get(cur.metadata_location)
        if table is None:
            table = IcebergTable(
                cur.identifier.path_parts, cur.metadata, cur.metadata_location, self.io, self.catalog
            )
        return table


def _main_unchanged(cur: LoadedTable) -> tuple[TableRequirement, ...]:
    return _ref_unchanged(cur, MAIN_BRANCH)


def _ref_unchanged(cur: LoadedTable, *names: str) -> tuple[TableRequirement, ...]:
    """The table is the same one and each named ref still points where ``cur`` saw it."""
    seen = {n: (cur.metadata.refs[n].snapshot_id if n in cur.metadata.refs else None) for n in names}
    return (
        AssertTableUUID(uuid=cur.metadata.table_uuid),
        *(AssertRefSnapshotId(ref=n, snapshot_id=snapshot_id) for n, snapshot_id in seen.items()),
    )


def _dropped(ident: TableIdentifier) -> CommitConflictError:
    return CommitConflictError(
        f"Table {ident} was dropped (or replaced) in the catalog concurrently",
        kind=ConflictKind.TABLE_DROPPED,
        retry_safe=False,
        table=str(ident),
        help="Nothing was committed. Recreate the table (or open the new one) before writing to it.",
    )
