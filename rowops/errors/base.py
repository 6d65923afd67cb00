"""The root of rowops' errors and the errors of bad input (arguments, SQL, schemas, values)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


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
