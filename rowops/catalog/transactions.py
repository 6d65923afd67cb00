"""Multi-statement, multi-table transactions over the lake log (no Spark here).

A transaction pins the lake version current at begin. Its reads see that version plus its own
writes; its writes are applied at once to a private working copy of each table (manifests written,
nothing published) and recorded as steps (``catalog/steps.py``). Commit publishes one lake version
holding every changed table, with put-if-absent. When another transaction took that version first,
the transaction validates and rebases, without rewriting any data or delete file::

    begin: pin version P ─► steps on working copies ─► write metadata.json per table ─► put P+1
                                                                                        │ taken
    validate reads (serializable) ◄── latest version L ◄────────────────────────────────┘
    replay the steps of each table that changed since P on its state in L ─► put L+1 ...
    a step that cannot be replayed ─► CommitConflictError (names the other transaction)

The files of an attempt follow the same states as a single-table commit (``catalog/tables.py``):
nothing an attempt references is removed once its put was issued, unless the put certainly lost.
"""

from __future__ import annotations

import random
import time
import uuid
import weakref
from typing import Any

from pyiceberg.table.metadata import TableMetadata

from rowops import faults
from rowops.catalog.attempts import AllListeners, Attempts, CommitListener, discard, remove_quietly
from rowops.catalog.batches import refuse_committed_batch
from rowops.catalog.history import created_counts
from rowops.catalog.leases import pin_newest
from rowops.catalog.log import LakeVersion, TableEntry
from rowops.catalog.steps import (
    DeltaStep,
    PropertiesStep,
    RefStep,
    Replay,
    SchemaStep,
    SnapshotStep,
    Step,
    StepConflict,
    publishable,
    referenced,
    replay_all,
)
from rowops.catalog.storage import sync_files
from rowops.catalog.table_work import TableWork, conflict_error, transaction_record, who_changed
from rowops.catalog.tables import MAX_COMMIT_ATTEMPTS, LoadedTable, TableCatalog, new_snapshot_id
from rowops.commit.refs import RefChange
from rowops.commit.row_delta import RowDelta, apply
from rowops.errors import (
    CommitConflictError,
    ConflictKind,
    InvalidInputError,
    NoSuchTableError,
    TableAlreadyExistsError,
    TransactionClosedError,
    is_cleanable,
)
from rowops.meta.evolution import SchemaChange
from rowops.meta.files import TableFiles
from rowops.request.identifiers import TableIdentifier

ISOLATION_LEVELS = ("serializable", "snapshot")
DEFAULT_ISOLATION = "serializable"


class LakeTransaction:
    """The state and commit protocol of one transaction (the user-facing API is ``rowops.transaction``)."""

    def __init__(self, catalog: TableCatalog, isolation: str = DEFAULT_ISOLATION) -> None:
        if isolation not in ISOLATION_LEVELS:
            raise InvalidInputError(
                f"isolation={isolation!r} is not a transaction isolation level",
                help='Use isolation="serializable" (the default) or isolation="snapshot".',
            )
        self.catalog = catalog
        self.isolation = isolation
        self.id = str(uuid.uuid4())
        self.pinned, self.lease = pin_newest(catalog.log)  # keeps what it reads from other expiries
        self.state = "open"
        self.version: LakeVersion | None = None
        self.work: dict[str, TableWork] = {}
        self.reads: set[str] = set()
        self.listeners: list[CommitListener] = []
        self.replays = 0
        self._garbage: list[str] = []
        self.batch: dict[str, Any] | None = None  # a pipeline batch, committed once (catalog/batches)
        self._batch_checked = self.pinned.version
        weakref.finalize(self, self.lease.release)

    # -- reading ---------------------------------------------------------------------------------
    def load(self, ident: TableIdentifier) -> LoadedTable:
        """The table as this transaction sees it: the pinned version plus its own writes."""
        self._check_open()
        self.lease.touch()
        work = self.work.get(str(ident))
        if work is None:
            return self.catalog.load(ident, self.pinned)
        if work.dropped:
            raise NoSuchTableError(f"Table {ident} was dropped by this transaction")
        location = work.pinned.metadata_location if work.pinned else ""
        return LoadedTable(ident, self.pinned.version, location, work.metadata)

    def note_read(self, ident: TableIdentifier) -> None:
        """Record that the transaction read ``ident`` (serializable validation checks it at commit)."""
        if str(ident) in self.pinned:
            self.reads.add(str(ident))

    def table_exists(self, ident: TableIdentifier) -> bool:
        work = self.work.get(str(ident))
        if work is not None:
            return not work.dropped
        return str(ident) in self.pinned

    # -- writing ---------------------------------------------------------------------------------
    def commit_delta(
        self,
        base: LoadedTable,
        base_files: TableFiles,
        delta: RowDelta,
        snapshot_id: int | None = None,
        listener: CommitListener | None = None,
    ) -> LoadedTable:
        """Apply ``delta`` to the working copy of its table (published at commit)."""
        work = self._work(base.identifier)
        snapshot_id = snapshot_id or new_snapshot_id()
        if listener is not None:
            self.listeners.append(listener)
            work.listeners.append(listener)
        # durable before any version can reference them (a power loss keeps no page cache)
        sync_files(f.file_path for f in (*delta.added_data, *delta.added_deletes))
        at = work.pinned.metadata_location if work.pinned and not work.steps else None
        metadata, written = apply(delta, work.metadata, base_files, self.catalog.io, snapshot_id, at)
        work.files += written
        work.steps.append(DeltaStep(delta, base_files, snapshot_id))
        work.metadata = metadata
        return self.load(base.identifier)

    def set_properties(self, base: LoadedTable, properties: dict[str, str]) -> LoadedTable:
        return self._step(base.identifier, PropertiesStep(properties))

    def evolve_schema(self, base: LoadedTable, change: SchemaChange) -> LoadedTable:
        return self._step(base.identifier, SchemaStep(change))

    def set_current_snapshot(self, base: LoadedTable, snapshot_id: int) -> LoadedTable:
        seen = self._work(base.identifier).metadata.current_snapshot_id
        return self._step(base.identifier, SnapshotStep(snapshot_id, seen))

    def update_refs(self, base: LoadedTable, change: RefChange) -> LoadedTable:
        return self._step(base.identifier, RefStep(change))

    def create(
        self,
        ident: TableIdentifier,
        metadata: TableMetadata,
        files: list[str],
        listener: CommitListener | None,
    ) -> None:
        """Create a table in this transaction; ``files`` are metadata files its first snapshot wrote."""
        self._check_open()
        if self.table_exists(ident):
            raise TableAlreadyExistsError(f"Table {ident} already exists in lakehouse {self.catalog.root}")
        if str(ident) in self.work:
            raise InvalidInputError(
                f"Table {ident} was dropped by this transaction; it cannot be created again in it",
                help="Commit the drop first, then create the table in a new transaction.",
            )
        work = TableWork(str(ident), None, metadata, files=list(files), created=True)
        if listener is not None:
            self.listeners.append(listener)
            work.listeners.append(listener)
        work.created_counts = created_counts(metadata)
        self.work[str(ident)] = work

    def drop(self, ident: TableIdentifier) -> None:
        """Drop a table in this transaction (its committed files stay for lake time travel).

        What this transaction staged for the table (data and delete files, manifests) was never
        referenced by a lake version and never will be: it is removed now.
        """
        self._check_open()
        if not self.table_exists(ident):
            raise NoSuchTableError(f"Table {ident} does not exist in lakehouse {self.catalog.root}")
        work = self._work(ident)
        if work.created:
            del self.work[str(ident)]
        else:
            work.dropped = True
        remove_quietly(self.catalog.io, work.files)
        work.files = []
        for listener in work.listeners:
            self.listeners.remove(listener)
            discard(listener)
        work.listeners = []

    # -- ending ----------------------------------------------------------------------------------
    def commit(self) -> LakeVersion | None:
        """Publish every change as one lake version; None when the transaction changed nothing."""
        try:
            return self._publish()
        finally:
            self.lease.release()

    def _publish(self) -> LakeVersion | None:
        self._check_open()
        self.state = "committing"
        changed = [w for w in self.work.values() if w.changed]
        if not changed:
            self.state = "committed"
            remove_quietly(self.catalog.io, self._garbage)
            return None
        attempts = Attempts(self.catalog.io, AllListeners(self.listeners))
        attempts.current = [f for w in changed for f in w.files]
        attempts.garbage = list(self._garbage)
        try:
            self.version = self._commit_loop(changed, attempts)
        except BaseException as exc:
            attempts.fail(exc)
            if is_cleanable(exc):
                self._discard_staged()
            self.state = "failed"
            raise
        self.state = "committed"
        self.catalog.on_commit(self.version.version)  # after the try: the version has landed
        return self.version

    def rollback(self) -> None:
        """Discard everything this transaction wrote; nothing was published."""
        self.lease.release()
        if self.state != "open":
            return
        self.state = "rolled back"
        remove_quietly(self.catalog.io, [f for w in self.work.values() for f in w.files] + self._garbage)
        self._discard_staged()

    # -- internals -------------------------------------------------------------------------------
    def _how(self) -> Replay:
        return Replay(self.catalog.io, self.isolation == "serializable")

    def _check_open(self) -> None:
        if self.state != "open":
            raise TransactionClosedError(f"Transaction {self.id} is {self.state}")

    def _work(self, ident: TableIdentifier) -> TableWork:
        self._check_open()
        name = str(ident)
        if name not in self.work:
            loaded = self.catalog.load(ident, self.pinned)
            log_start = len(loaded.metadata.snapshot_log)
            self.work[name] = TableWork(name, self.pinned.get(name), loaded.metadata, log_start=log_start)
        work = self.work[name]
        if work.dropped:
            raise NoSuchTableError(f"Table {ident} was dropped by this transaction")
        return work

    def _step(self, ident: TableIdentifier, step: Step) -> LoadedTable:
        work = self._work(ident)
        at = work.pinned.metadata_location if work.pinned and not work.steps else None
        work.metadata, written = step.replay(work.metadata, at, self._how())
        work.files += written
        work.steps.append(step)
        return self.load(ident)

    def _commit_loop(self, changed: list[TableWork], attempts: Attempts) -> LakeVersion:
        latest = self.pinned
        for attempt in range(MAX_COMMIT_ATTEMPTS):
            if attempt:
                time.sleep(random.uniform(0, min(0.002 * 2**attempt, 0.25)))  # back off under contention
            self._validate_reads(latest)
            self._check_batch(latest)
            changes = {w.name: self._prepare(w, latest, attempts) for w in changed}
            faults.check("before-commit")
            version = attempts.commit(
                self.catalog.log,
                latest,
                changes,
                transaction_record(
                    self.id, self.isolation, self.pinned.version, self.reads, self.batch, changed
                ),
            )
            if version is None:
                latest = self.catalog.log.latest()
                continue
            faults.check("after-commit")
            attempts.remove_garbage()
            return version
        raise CommitConflictError(
            f"Transaction {self.id} gave up after {MAX_COMMIT_ATTEMPTS} lost races for the next lake version",
            kind=ConflictKind.TOO_MANY_ATTEMPTS,
        )

    def _prepare(self, work: TableWork, latest: LakeVersion, attempts: Attempts) -> TableEntry | None:
        """The table's entry in the next version; replays the steps on a table changed since begin."""
        entry = latest.get(work.name)
        if work.created:
            if entry is not None:
                raise self._conflict(
                    work.name, latest, ConflictKind.TABLE_CREATED, "the table was created concurrently", False
                )
            if work.location is None:
                work.location = self._write_metadata(work, attempts)
            return TableEntry(work.location, str(work.metadata.table_uuid))
        assert work.pinned is not None
        if entry is None or entry.table_uuid != work.pinned.table_uuid:
            raise self._conflict(
                work.name, latest, ConflictKind.TABLE_DROPPED, "the table was dropped concurrently", False
            )
        if work.dropped:
            if entry.metadata_location != work.pinned.metadata_location:
                reason = "the table this transaction drops was changed concurrently"
                raise self._conflict(work.name, latest, ConflictKind.WRITE_WRITE, reason)
            return None
        if work.prepared_on != entry.metadata_location:
            if entry.metadata_location != work.pinned.metadata_location:
                self._replay(work, entry, latest, attempts)
            work.location = self._write_metadata(work, attempts)
            work.prepared_on = entry.metadata_location
        assert work.location is not None
        return TableEntry(work.location, entry.table_uuid)

    def _replay(self, work: TableWork, entry: TableEntry, latest: LakeVersion, attempts: Attempts) -> None:
        """Rebuild the working state on the table's state in ``latest`` (no data file is rewritten)."""
        self.replays += 1
        current = self.catalog.read_metadata(entry.metadata_location)
        written: list[str] = []
        try:
            metadata = replay_all(work.steps, current, entry.metadata_location, self._how(), written)
        except StepConflict as exc:
            attempts.garbage += written
            c = exc.conflict
            raise self._conflict(work.name, latest, c.kind, c.reason, True, c.snapshot_id, c.files) from None
        except BaseException:
            attempts.garbage += written
            raise
        attempts.garbage += work.files
        old = set(work.files)
        attempts.current = [f for f in attempts.current if f not in old] + written
        work.files, work.metadata, work.location = written, metadata, None
        work.log_start = len(current.snapshot_log)

    def _write_metadata(self, work: TableWork, attempts: Attempts) -> str:
        ours = work.snapshots_made()
        work.metadata, dropped = publishable(work.metadata, ours, self.catalog.io, work.log_start)
        if dropped:  # snapshots no ref reaches: referenced by nothing published
            gone = set(dropped)
            work.files = [f for f in work.files if f not in gone]
            attempts.current = [f for f in attempts.current if f not in gone]
            attempts.garbage += dropped
        # never remove what this attempt references, whatever an earlier attempt left as garbage
        listed = referenced(work.metadata, ours, self.catalog.io)
        kept = [f for f in attempts.garbage if f in listed]
        if kept:
            attempts.garbage = [f for f in attempts.garbage if f not in listed]
            work.files += kept
            attempts.current += kept
        location = attempts.stage(self.catalog.metadata_path(work.metadata))
        work.files.append(location)
        self.catalog.write_metadata(work.metadata, location)
        sync_files(work.files)  # this table's manifests and metadata (data files: at commit_delta)
        return location

    def _validate_reads(self, latest: LakeVersion) -> None:
        """Serializable: no table this transaction read may have changed since it began (LakeVilla R2).

        Reads through ``to_df`` are tracked per table; the reads of a MERGE are finer (its key ranges)
        and are validated by its own step.
        """
        if self.isolation != "serializable" or latest.version == self.pinned.version:
            return
        for name in sorted(self.reads):
            if latest.get(name) != self.pinned.get(name):
                reason = "a table this serializable transaction read was changed after it began"
                raise self._conflict(name, latest, ConflictKind.READ_CHANGED, reason)

    def _check_batch(self, latest: LakeVersion) -> None:
        """A pipeline batch: no version committed since the last check may carry the same batch."""
        if self.batch is None or latest.version <= self._batch_checked:
            return
        refuse_committed_batch(self.catalog.log, self.batch, self._batch_checked, latest.version, self.id)
        self._batch_checked = latest.version

    def _conflict(
        self,
        name: str,
        latest: LakeVersion,
        kind: ConflictKind,
        reason: str,
        retry_safe: bool = True,
        snapshot_id: int | None = None,
        files: tuple[str, ...] = (),
    ) -> CommitConflictError:
        other = who_changed(self.catalog.log, self.pinned, name, latest)
        return conflict_error(self.id, other, name, kind, reason, retry_safe, snapshot_id, files)

    def _discard_staged(self) -> None:
        for listener in self.listeners:
            discard(listener)
