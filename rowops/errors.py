"""The one exception hierarchy of rowops.

Every error rowops raises on purpose derives from :class:`RowOpsError`. Messages end with a
``Help:`` line that says what to do next. Conflict errors say whether retrying is safe.
"""

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

    help = "Check the arguments against the rowops API documentation in README.md."


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


class InvalidPartitionSpecError(InvalidInputError):
    """A partition_by entry is not a supported Iceberg transform of an existing column."""

    help = "Use column names, bucket(N, col), truncate(W, col), year(col), month(col), day(col) or hour(col)."


class InvalidSortOrderError(InvalidInputError):
    """A ``sort_by`` entry that is not a column with an optional direction and null order."""

    help = 'Sort by plain columns, e.g. sort_by=["event_date", "amount DESC"].'


class NoSuchNamespaceError(RowOpsError):
    """The namespace does not exist in the lakehouse."""

    help = "List existing tables with lake.list_tables(namespace) or create a table in that namespace."


class NoSuchTableError(RowOpsError):
    """The table does not exist in the lakehouse."""

    help = "Create it with lake.create_table(name, df_or_schema) or check the name with lake.list_tables()."


class TableAlreadyExistsError(RowOpsError):
    """create_table was called for a name that is taken."""

    help = "Open the existing table with lake.table(name), or drop it first with lake.drop_table(name)."


class NoSuchColumnError(InvalidInputError):
    """A column named by the caller is not part of the table schema."""


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


class CommitConflictError(RowOpsError):
    """A concurrent commit conflicts with this operation; nothing was committed.

    Attributes:
        retry_safe: True when nothing of this operation landed, so running it again is safe.
        conflicting_snapshot_id: the concurrent snapshot that caused the conflict, if known.
        conflicting_files: files of that snapshot that collide with this operation.
    """

    help = "Nothing was committed; run the operation again to apply it on top of the new table state."

    def __init__(
        self,
        message: str,
        conflicting_snapshot_id: int | None = None,
        conflicting_files: Sequence[str] = (),
        retry_safe: bool = True,
        help: str | None = None,
    ) -> None:
        self.conflicting_snapshot_id = conflicting_snapshot_id
        self.conflicting_files = list(conflicting_files)
        self.retry_safe = retry_safe
        super().__init__(message, help)


class CommitStateUnknownError(RowOpsError):
    """The commit outcome is unknown (e.g. storage failed after the write); do not clean up."""

    help = "Reload the table and check its current snapshot before retrying."


class SparkJobError(RowOpsError):
    """A Spark job of the operation failed for a reason rowops does not recognize; nothing was committed.

    The Spark exception is chained as ``__cause__``.
    """

    help = (
        "Nothing was committed. Read Spark's error (this exception's cause): fix the input that "
        "triggers it, or run the operation again if the cluster failed."
    )


class CorruptLakeError(RowOpsError):
    """The lakehouse log or table metadata is unreadable or inconsistent."""

    help = "Check the lakehouse directory; restore the files from backup if they were modified by hand."
