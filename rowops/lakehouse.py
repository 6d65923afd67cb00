"""The lakehouse: a directory of Iceberg tables under one transactional lake log."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from rowops import statements
from rowops.catalog.background import BackgroundRun
from rowops.catalog.cleanup import (
    DEFAULT_AGE,
    CleanupResult,
    lake_references,
    remove_orphans,
)
from rowops.catalog.history import LakeCommit, changes_back_to, describe
from rowops.catalog.log import VersionTaken
from rowops.catalog.object_store import S3Storage, check_put_if_absent
from rowops.catalog.register import register_table
from rowops.catalog.retention import check_not_expired
from rowops.catalog.storage import Storage
from rowops.catalog.tables import TableCatalog
from rowops.catalog.transactions import DEFAULT_ISOLATION, LakeTransaction
from rowops.catalog.verify import VerifyResult, verify
from rowops.catalog.views import PinnedView
from rowops.catalog_lakehouse import CatalogLakehouse
from rowops.errors import (
    InvalidInputError,
    NoSuchLakeError,
    UnsupportedStorageError,
)
from rowops.exec.spark.frames import DataFrame, SparkSession, T
from rowops.exec.spark.session import configure, create_session
from rowops.lake_at import LakeAt
from rowops.maintenance.expiry import gc_enabled
from rowops.meta.fileio import check_storage_options, has_entries, make_io, s3a_conf
from rowops.meta.paths import is_remote, lake_location, local_path, normalize_path
from rowops.metadata_tables import LakeInspector
from rowops.request.identifiers import TableIdentifier, parse_namespace
from rowops.request.inputs import checked_call
from rowops.request.results import OperationResult
from rowops.run.create import TableOptions, create_in
from rowops.run.lake_feed import lake_changes
from rowops.table import Table
from rowops.transaction import Transaction

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog


def _no_lake(location: str) -> NoSuchLakeError:
    return NoSuchLakeError(
        f"no lake at {location}",
        help=f"Check the path; rowops.Lakehouse({location!r}) (create=True, the default) creates a new lake there.",
    )


class Lakehouse:
    """Open (or create) a lakehouse: a local directory or an S3 prefix.

    Args:
        path: the lake root: a local path, a ``file:`` URI or ``s3://bucket/prefix`` (``s3a://`` is the
            same); created if missing (``create=False``: ``NoSuchLakeError`` instead). Other schemes raise
            ``UnsupportedStorageError``.
        spark: the SparkSession to use; None creates a local one from ``conf/spark-defaults.conf``
            (with the matching ``spark.hadoop.fs.s3a.*`` settings for an S3 lake). A caller's session
            is used as it is: it must be able to read and write the lake's ``s3a://`` paths.
        storage_options: pyiceberg FileIO properties for the lake's storage (``s3.endpoint``,
            ``s3.access-key-id``, ``s3.secret-access-key``, ``s3.session-token``, ``s3.region``,
            ``s3.path-style-access``). Credentials never appear in reprs, errors or metadata. An unknown
            key raises ``UnknownStorageOptionError`` (naming the close matches).
        create: create the lake when ``path`` holds none (the default); False raises ``NoSuchLakeError``
            instead, creating nothing (the ``rowops`` command line opens lakes this way).
    """

    def __init__(
        self,
        path: str | Path,
        spark: SparkSession | None = None,
        cleanup_age: timedelta = DEFAULT_AGE,
        cleanup_every: int = 1000,
        storage_options: Mapping[str, str] | None = None,
        create: bool = True,
    ) -> None:
        self.location = lake_location(str(path))
        self.storage_options = check_storage_options(storage_options or {})
        io = make_io(self.storage_options)
        if is_remote(self.location):
            remote = S3Storage(self.location, io, self.storage_options)
            remote.check_access()
            if not create and not has_entries(io, self.location):  # S3 has no empty directories
                raise _no_lake(self.location)
            check_put_if_absent(remote, self.location)
            storage: Storage | None = remote
        elif create:
            Path(self.location).mkdir(parents=True, exist_ok=True)
            storage = None
        elif Path(self.location).is_dir():
            storage = None
        else:
            raise _no_lake(self.location)
        self.catalog = TableCatalog(self.location, io, storage)
        self.catalog.on_commit = self.committed
        self.cleanup_age = cleanup_age
        self.cleanup_every = cleanup_every
        self.background_cleanup: BackgroundRun[CleanupResult] = BackgroundRun(self.cleanup)
        self._spark = configure(spark) if spark is not None else None

    def __repr__(self) -> str:
        return f"Lakehouse({self.location!r})"

    @property
    def root(self) -> Path:
        """The lake's local directory (local lakes only; see ``location`` for any lake)."""
        path = local_path(self.location)
        if path is None:
            raise UnsupportedStorageError(f"{self.location!r} is not on a local file system")
        return path

    @property
    def spark(self) -> SparkSession:
        """The SparkSession in use (created on first use)."""
        if self._spark is None:
            self._spark = create_session(hadoop_conf=s3a_conf(self.storage_options))
        return self._spark

    # -- lake versions and transactions ----------------------------------------------------------
    @property
    def version(self) -> int:
        """The current lake version (0 for an empty lake)."""
        return self.catalog.log.latest().version

    def transaction(self, isolation: str = DEFAULT_ISOLATION) -> Transaction:
        """A transaction over all tables: ``with lake.transaction() as tx: ...`` (see ``Transaction``).

        Args:
            isolation: ``"serializable"`` (default: a transaction also aborts when what it read was
                changed after it began) or ``"snapshot"`` (only write-write conflicts abort it).
        """
        return Transaction(self, isolation)

    def begin(self, isolation: str = DEFAULT_ISOLATION) -> Transaction:
        """Start a transaction to end with ``tx.commit()`` or ``tx.rollback()``."""
        return Transaction(self, isolation)

    @property
    def inspect(self) -> LakeInspector:
        """The lake log as a DataFrame: ``lake.inspect.versions()``."""
        return LakeInspector(self.spark, self.history)

    def history(self, since: int = 1) -> list[LakeCommit]:
        """Every lake version from ``since`` on, oldest first: time, transaction, tables, operations, rows."""
        return [describe(v) for v in self.catalog.log.history(since)]

    @checked_call
    def changes(
        self,
        start: int | datetime | None = None,
        end: int | datetime | None = None,
        *,
        net: bool = False,
        tables: Sequence[str] | None = None,
    ) -> dict[str, DataFrame]:
        """The change feed (``Table.changes``) of every table the lake versions in a range changed,
        by table name: ``start`` exclusive, ``end`` inclusive (lake versions or times); ``tables``:
        only these. A transaction is one commit, with one ``_commit_version`` in every table."""
        return lake_changes(self.catalog, self.table, self.version, start, end, net, tables)

    @checked_call
    def at(self, version: int | None = None, timestamp: datetime | int | None = None) -> LakeAt:
        """A read-only view of every table as of a lake version, or of the time ``timestamp``
        (a datetime, or milliseconds since the epoch: the newest version committed at or before it)."""
        log = self.catalog.log
        if (version is None) == (timestamp is None):
            raise InvalidInputError("Pass exactly one of version= or timestamp= to lake.at()")
        if timestamp is not None:
            millis = int(timestamp.timestamp() * 1000) if isinstance(timestamp, datetime) else int(timestamp)
            return LakeAt(self, PinnedView(self.catalog, log.version_at(millis)))
        assert version is not None
        latest = log.latest().version
        if not 0 <= version <= latest:
            raise InvalidInputError(
                f"Lake version {version} does not exist; versions are 0 to {latest}",
                help="List versions with lake.history().",
            )
        return LakeAt(self, PinnedView(self.catalog, log.read(version)))

    @checked_call
    def rollback_to(self, version: int) -> int:
        """Make every table as it was at lake ``version``, as a new version (history is kept).

        Returns the new lake version. Tables created after ``version`` are dropped, tables dropped
        since are restored. A table whose state at ``version`` was expired raises
        ``SnapshotExpiredError`` (nothing is changed).
        """
        target = self.at(version=version).lake_version
        log = self.catalog.log
        check_not_expired(self.catalog, changes_back_to(log.latest(), target))
        record = {"id": str(uuid.uuid4()), "isolation": "rollback", "target-version": version}
        while True:
            latest = log.latest()
            changes = changes_back_to(latest, target)
            commits = [{"table": name, "operations": [f"rollback-to-{version}"]} for name in changes]
            try:
                new = log.commit(latest, changes, {**record, "commits": commits})
            except VersionTaken:
                continue
            self.committed(new.version)
            return new.version

    def cleanup(self, older_than: timedelta | None = None, dry_run: bool = False) -> CleanupResult:
        """Remove files no lake version references (left by aborted or crashed transactions), in the
        ``data/`` and ``metadata/`` folders of tables this lake created; never another catalog's
        files (``version-hint.text``, registered tables' locations, folders the lake never owned).

        Args:
            older_than: only files older than this are removed (default: the lake's ``cleanup_age``,
                3 days), so that transactions still running keep their files.
            dry_run: delete nothing; ``result.removed`` lists what would go.
        """
        io = self.catalog.io
        referenced, owned = lake_references(io, self.catalog.log)
        age = self.cleanup_age if older_than is None else older_than
        locations = owned - self._gc_disabled_locations()
        return remove_orphans(io, self.location, locations, referenced, age, dry_run)

    def _gc_disabled_locations(self) -> set[str]:
        """Key-form locations of the newest version's tables whose ``gc.enabled`` is false: their files
        may be shared with another table, so cleanup skips them (as Iceberg's DeleteOrphanFiles refuses)."""
        found = set()
        for _, entry in self.catalog.log.latest().items():
            metadata = self.catalog.read_metadata(entry.metadata_location)
            if not gc_enabled(metadata):
                found.add(normalize_path(metadata.location).rstrip("/"))
        return found

    def verify(self) -> VerifyResult:
        """Check every lake version, ref and snapshot still offered: metadata parses, files exist with
        their recorded sizes, sequence numbers and row counts agree, no ref names a missing snapshot
        (``catalog/verify.py``). Reads only; ``result.ok`` when nothing is wrong, else ``result.problems``.
        States whose snapshot was expired are listed in ``result.refused``, not as problems."""
        return verify(self.catalog.log, self.catalog.io)

    def committed(self, version: int) -> None:
        """Called after each commit of this lakehouse: every ``cleanup_every`` versions, starts
        ``cleanup()`` in the background (``background_cleanup.wait()`` waits for it); the write returns
        at once and never fails because of it."""
        if self.cleanup_every > 0 and version % self.cleanup_every == 0:
            self.background_cleanup.start()

    # -- tables -----------------------------------------------------------------------------------
    def table(self, name: str) -> Table:
        """Open an existing table; raises NoSuchTableError if there is none."""
        ident = TableIdentifier.parse(name)
        self.catalog.load(ident)
        return Table(self, ident)

    @checked_call
    def sql(self, text: str, strategy: str = "auto") -> OperationResult | DataFrame | str:
        """Run one SQL statement (:func:`rowops.sql`): ``MERGE INTO`` / ``UPDATE`` /
        ``DELETE FROM`` (an ``OperationResult``; after ``EXPLAIN`` the plan text), or a query whose lake
        tables read their current snapshots (a DataFrame)."""
        return statements.sql(self, text, strategy)

    def list_tables(self, namespace: str | None = None) -> list[str]:
        """Names of the tables in a namespace; without one, every table of the lake (sorted)."""
        if namespace is None:
            return sorted(self.catalog.log.latest().names())
        return self.catalog.list_tables(parse_namespace(namespace))

    def drop_table(self, name: str) -> None:
        """Remove a table from the lake (its files stay for lake-level time travel)."""
        self.catalog.drop(TableIdentifier.parse(name))

    # -- tables of other engines and catalogs -----------------------------------------------------
    @checked_call
    def register_table(self, name: str, metadata_location: str) -> Table:
        """Import an existing Iceberg table (written by Iceberg Java, PyIceberg, ...) as ``name``.

        One lake version points ``name`` at ``metadata_location`` (its current ``metadata.json``, a
        path or ``file:`` URI); the files stay where they are. Later commits write new metadata under
        the table's own location; the catalog the table came from is not updated.

        Raises:
            TableAlreadyExistsError: the name is taken.
            MetadataNotReadableError: no readable Iceberg table metadata at ``metadata_location``.
            UnsupportedTableFormatError: not a format-v2 table.
        """
        register_table(self.catalog, TableIdentifier.parse(name), metadata_location)
        return Table(self, TableIdentifier.parse(name))

    @classmethod
    def from_catalog(cls, catalog: Catalog, spark: SparkSession | None = None) -> CatalogLakehouse:
        """Operate on the tables of a pyiceberg catalog (``SqlCatalog``, ``RestCatalog``, Glue, Hive...).

        Each operation commits one table through the catalog's own ``commit_table``; multi-table
        transactions, lake versions and history need rowops' own lake log (``CatalogFeatureError``).
        """
        return CatalogLakehouse(catalog, spark)

    @checked_call
    def create_table(
        self,
        name: str,
        data: DataFrame | T.StructType,
        partition_by: Sequence[str] | None = None,
        identifier: Sequence[str] | None = None,
        properties: dict[str, str] | None = None,
        sort_by: Sequence[str] | None = None,
        format_version: int = 2,
        defaults: Mapping[str, object] | None = None,
    ) -> Table:
        """Create an Iceberg table (format v2, or v3); rows of ``data`` (if a DataFrame) are its first snapshot.

        Args:
            name: ``namespace.table``.
            data: a DataFrame (its schema and rows) or a StructType (empty table).
            partition_by: identity columns and ``bucket(N, c)``, ``truncate(W, c)``, ``year/month/day/hour(c)``.
            identifier: Iceberg identifier (key) columns; they become required. Columns that are NOT NULL
                in the schema (``nullable=False``) stay required too; NULLs written to them are rejected.
            properties: extra Iceberg table properties (e.g. ``write.distribution-mode``: ``hash``,
                the default for partitioned tables, ``range`` or ``none``).
            sort_by: the table's sort order, ``column [ASC|DESC] [NULLS FIRST|LAST]`` per entry; every
                data file rowops writes is sorted by it.
            format_version: 2 (default) or 3: a v3 table tracks row lineage and gets its position
                deletes as deletion vectors (Puffin files, at most one per data file).
            defaults: format v3 only: ``{column: value}``, the columns' Iceberg ``write-default``,
                stored by writes whose source lacks the column and by ``SET c = DEFAULT``.
        """
        ident = self.create_in(
            None, name, data, partition_by, identifier, properties, sort_by, format_version, defaults
        )
        return Table(self, ident)

    def create_in(
        self,
        tx: LakeTransaction | None,
        name: str,
        data: DataFrame | T.StructType,
        partition_by: Sequence[str] | None = None,
        identifier: Sequence[str] | None = None,
        properties: dict[str, str] | None = None,
        sort_by: Sequence[str] | None = None,
        format_version: int = 2,
        defaults: Mapping[str, object] | None = None,
    ) -> TableIdentifier:
        """Create a table now (``tx`` None) or inside a transaction (``rowops/run/create.py``)."""
        return create_in(
            self.catalog,
            lambda: self.spark,
            tx,
            name,
            data,
            TableOptions(partition_by, identifier, properties, sort_by, format_version, defaults),
        )
