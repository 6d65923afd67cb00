"""Errors found while running: Spark jobs, missing or expired files, lake integrity, pipelines,
maintenance refusals and storage that cannot commit safely."""

from __future__ import annotations

from rowops.errors.base import InvalidInputError, RowOpsError, StorageAccessError


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
