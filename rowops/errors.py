"""The one exception hierarchy of rowops.

Every error rowops raises on purpose derives from :class:`RowOpsError`. Messages end with a
``Help:`` line that says what to do next. Conflict errors say whether retrying is safe.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import Enum

_KEEP_FILES = "_rowops_keep_files"


class RowOpsError(Exception):
    """Root of all rowops errors."""

    help: str = ""

    def __init__(self, message: str, help: str | None = None) -> None:
        self.help = help if help is not None else self.help
        text = f"{message}\nHelp: {self.help}" if self.help else message
        super().__init__(text)


class InvalidInputError(RowOpsError):
    """The request is malformed: bad argument values, invalid SQL, invalid partition spec."""

    help = "Check the arguments against the rowops API documentation in docs/guide/ (index.md)."


class UnsupportedStorageError(InvalidInputError):
    """A location on storage rowops cannot serve (GCS, ADLS, HDFS): local file systems and S3 only."""

    help = (
        "rowops serves lakes on local (or shared POSIX) file systems and S3-compatible object storage: "
        "use a local directory, a file: URI or an s3:// URI."
    )


class StorageAccessError(InvalidInputError):
    """The lake's storage cannot be reached: no such bucket, refused credentials, unreachable endpoint."""

    help = (
        "Check the bucket name and the storage_options (s3.endpoint, s3.region, s3.access-key-id, "
        "s3.secret-access-key); rowops never creates buckets."
    )


class InvalidArgumentError(InvalidInputError, TypeError):
    """A public function was called with an unknown keyword or an argument of the wrong kind.

    Also a ``TypeError``, as Python raises for a bad call.
    """

    help = "Check the argument names and types against the function's documentation (help(rowops.merge))."


class InvalidIdentifierError(InvalidInputError):
    """A table or namespace name is not a valid, lake-contained identifier."""

    help = "Use dotted names of letters, digits and underscores, such as 'db.orders'."


class InvalidExpressionError(InvalidInputError):
    """A SQL condition or expression does not parse or does not resolve against the tables."""

    help = "Conditions are Spark SQL; refer to target columns as t.<col> and source columns as s.<col>."


class SqlSyntaxError(InvalidInputError):
    """SQL text given to ``rowops.sql`` / ``lake.sql`` does not parse."""

    help = (
        "Write one Spark SQL statement: MERGE INTO ns.t USING ... ON ... WHEN ..., UPDATE ns.t SET ... "
        "WHERE ..., DELETE FROM ns.t WHERE ..., or a SELECT query (see docs/guide/sql.md)."
    )


class UnsupportedSqlError(InvalidInputError):
    """SQL that parses but that rowops does not run (a statement kind or a clause it cannot express)."""

    help = (
        "rowops.sql runs MERGE INTO, UPDATE, DELETE FROM (optionally after EXPLAIN) and SELECT queries; "
        "use the Python API for the rest (docs/guide/sql.md)."
    )


class InvalidPartitionSpecError(InvalidInputError):
    """A partition_by entry is not a supported Iceberg transform of an existing column."""

    help = "Use column names, bucket(N, col), truncate(W, col), year(col), month(col), day(col) or hour(col)."


class InvalidSortOrderError(InvalidInputError):
    """A ``sort_by`` entry that is not a column with an optional direction and null order."""

    help = 'Sort by plain columns, e.g. sort_by=["event_date", "amount DESC"].'


class NoSuchNamespaceError(RowOpsError):
    """The namespace does not exist in the lakehouse."""

    help = "List the lake's tables with lake.list_tables(), or create a table in that namespace."


class NoSuchTableError(RowOpsError):
    """The table does not exist in the lakehouse."""

    help = "Check the name against lake.list_tables(), or create the table with lake.create_table(name, df)."


class TableAlreadyExistsError(RowOpsError):
    """create_table was called for a name that is taken."""

    help = "Open the existing table with lake.table(name), or drop it first with lake.drop_table(name)."


class NoSuchColumnError(InvalidInputError):
    """A column named by the caller is not part of the table schema."""


class InvalidSchemaChangeError(InvalidInputError):
    """A schema change that Iceberg or the table does not allow: an existing name, a type that is not
    a promotion, dropping a key, partition or sort column, an unknown type."""

    help = "See docs/guide/evolution.md for the changes rowops supports."


class NoDefaultError(InvalidInputError):
    """``SET c = DEFAULT`` (or ``rowops.DEFAULT``) for a column that has no write-default."""

    help = (
        "Give the column a write-default first (format v3 tables: table.set_default(column, value), "
        "or add_columns(..., defaults=...)), or assign a value. Nothing was changed."
    )


class SchemaMismatchError(RowOpsError):
    """The source data does not match the target table schema."""

    help = "Select, rename or cast the source columns so that they match the table schema."

    def __init__(
        self,
        message: str,
        missing: Sequence[str] = (),
        extra: Sequence[str] = (),
        incompatible: Sequence[str] = (),
        help: str | None = None,
    ) -> None:
        self.missing = list(missing)
        self.extra = list(extra)
        self.incompatible = list(incompatible)
        super().__init__(message, help)


class NullValueError(InvalidInputError):
    """A NULL value would be written to a column declared NOT NULL (a required Iceberg field)."""

    help = (
        "Filter out or fill the NULLs (e.g. coalesce) before the operation, or declare the column nullable."
    )


class NullKeyError(NullValueError):
    """Key columns contain NULL where a key is required."""

    help = "Filter out or fill NULL keys in the source before the operation."


class ValueOutOfRangeError(InvalidInputError):
    """A value does not fit the type of the column it is written to (Spark's ANSI store assignment)."""

    help = (
        "Cast or round the values to the column's type before the operation, or filter out the rows "
        "whose values do not fit; nothing was written."
    )


class DuplicateKeyError(InvalidInputError):
    """The source holds the same key more than once where keys must be unique."""

    help = "Deduplicate the source by its key columns (e.g. keep the latest change per key) first."


class CardinalityViolationError(RowOpsError):
    """A target row matched more than one source row in MERGE (SQL standard cardinality rule)."""

    help = "Deduplicate the source so that each target row matches at most one source row."

    def __init__(self, message: str, example_keys: Iterable[object] = (), help: str | None = None) -> None:
        self.example_keys = list(example_keys)
        super().__init__(message, help)


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


class UnmatchedFileError(RowOpsError):
    """Spark read a row from a file that maps to no live file of the table; nothing was committed."""

    help = (
        "The table's manifests name a file in a form rowops could not map to the file Spark read. "
        "Nothing was committed; please report this with the table's metadata files."
    )


class ExecutorEnvironmentError(RowOpsError):
    """Spark's executors cannot run rowops' Python code (missing modules or a broken Python)."""

    help = (
        "Give the executors a Python with rowops' dependencies (pyiceberg-core, pyroaring, pyarrow, pandas, sqlglot): "
        "set PYSPARK_PYTHON before the session starts, or ship a packed environment with --archives "
        "(and rowops itself with --py-files)."
    )


class SparkJobError(RowOpsError):
    """A Spark job of the operation failed for a reason rowops does not recognize; nothing was committed.

    The Spark exception is chained as ``__cause__``.
    """

    help = (
        "Nothing was committed. Read Spark's error (this exception's cause): fix the input that "
        "triggers it, or run the operation again if the cluster failed."
    )


class MissingFileError(SparkJobError):
    """A file Spark had to read does not exist where an executor looked; nothing was committed."""

    help = (
        "Nothing was committed. Every Spark executor must see the lake's files at the same path as the "
        "driver (a file system shared by all machines, or a lake on object storage: s3://); if a file was "
        "removed by hand, restore it."
    )


class SnapshotExpiredError(RowOpsError):
    """The snapshot a read needs was expired (``table.expire_snapshots``): its files were deleted.

    Lake versions (``lake.at``) whose state of a table is an expired snapshot can no longer read it.
    """

    help = (
        "Read a newer snapshot or lake version (table.snapshots(), lake.history()); expire_snapshots "
        "keeps the current snapshot, every tagged one and the newest retain_last ones."
    )


class CorruptLakeError(RowOpsError):
    """The lakehouse log or table metadata is unreadable or inconsistent."""

    help = "Check the lakehouse directory; restore the files from backup if they were modified by hand."


class MetadataNotReadableError(InvalidInputError):
    """``register_table`` was given a location that is not a readable Iceberg ``metadata.json``."""

    help = (
        "Pass the full path or URI of the table's current metadata file (e.g. "
        "file:/warehouse/db/t/metadata/v3.metadata.json, or the metadata_location a catalog reports). "
        "Nothing was changed."
    )


class CatalogFeatureError(RowOpsError):
    """A feature of rowops' own lake log used on a lakehouse backed by another Iceberg catalog."""

    help = (
        "Multi-table transactions, lake versions, lake.history, lake.at, lake.rollback_to and "
        "lake.cleanup exist only on rowops' own lake log (rowops.Lakehouse(path)). Through "
        "Lakehouse.from_catalog, each operation commits one table through the catalog: run operations one "
        "by one, or register the tables in a rowops lake (lake.register_table) to use transactions."
    )


class UnsupportedTableFormatError(InvalidInputError):
    """A table of an Iceberg format version rowops does not write (it writes format v2 metadata)."""

    help = (
        "Upgrade the table to format version 2 first (e.g. Spark: ALTER TABLE t SET TBLPROPERTIES "
        "('format-version'='2'); PyIceberg: table.transaction().upgrade_table_version(2)). Nothing was changed."
    )


class PipelineConfigError(InvalidInputError):
    """A pipeline configuration file is missing, unparseable, or has an unknown or ill-typed field."""

    help = "Fix the named field of the pipeline's TOML file (see docs/guide/pipelines.md)."


class PipelineSourceError(InvalidInputError):
    """A pipeline's source cannot be used: unreadable file, missing column, unknown operation code."""

    help = "Fix the named source file or column, or the pipeline config; nothing was written."


class BatchAlreadyCommittedError(RowOpsError):
    """Another run committed the same (pipeline, batch) while this one ran; this one committed nothing."""

    help = "Nothing more to do: the batch is applied exactly once. Run the next batch."

    def __init__(self, message: str, version: int, help: str | None = None) -> None:
        self.version = version
        super().__init__(message, help)


class GcDisabledError(RowOpsError):
    """A table with ``gc.enabled=false`` (Iceberg's property): its files may be shared with another
    table, so ``expire_snapshots`` and ``remove_orphans`` delete nothing (as Iceberg Java refuses)."""

    help = (
        "Nothing was changed. If no other table uses this table's files, enable garbage collection with "
        "table.set_properties(**{'gc.enabled': 'true'}) and run it again."
    )


class ForeignFilesError(RowOpsError):
    """Orphan removal asked for files the lake cannot prove are its own (a table registered from
    another catalog: that catalog may still reference or be writing files in the location)."""

    help = (
        "Remove orphans of this location with the catalog that owns it (e.g. Iceberg's DeleteOrphanFiles "
        "action); lake.cleanup(dry_run=True) lists what rowops may remove in the tables it created. "
        "Nothing was deleted."
    )


class PutIfAbsentUnsupportedError(StorageAccessError):
    """An S3-compatible store that accepted a second conditional put (``If-None-Match: *``) of an
    existing key: two writers could both commit the same lake version, the later silently replacing
    the earlier."""

    help = (
        "Use a store that honours conditional writes (If-None-Match: *), such as AWS S3 or a current "
        "MinIO release, or keep the lake on a local or shared POSIX file system: "
        "rowops.Lakehouse('/path/to/lake'). Nothing was written but a probe key below _rowops/probe/."
    )


class NoSuchLakeError(InvalidInputError):
    """A lake opened without ``create=True`` (``rowops.Lakehouse(path, create=False)``, every ``rowops``
    command but ``init``) does not exist; nothing was created."""

    help = (
        "Check the path. To create a new lake there, run rowops --lake PATH init, or in Python "
        "rowops.Lakehouse(path) (which creates a missing lake)."
    )


class UnknownStorageOptionError(InvalidInputError):
    """A ``storage_options`` key (``-o KEY=VALUE``) that is not a pyiceberg FileIO property rowops knows."""

    help = (
        "Use pyiceberg FileIO property names: s3.endpoint, s3.region, s3.access-key-id, "
        "s3.secret-access-key, s3.session-token, s3.path-style-access (see pyiceberg's FileIO docs)."
    )
