"""rowops: MERGE, UPDATE, DELETE and upsert on Apache Iceberg tables with PySpark.

>>> import rowops
>>> sorted(rowops.__all__)[:4]
['CardinalityViolationError', 'CommitConflictError', 'Lakehouse', 'MergeBuilder']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from rowops import errors
from rowops.errors import (
    CardinalityViolationError,
    CommitConflictError,
    RowOpsError,
    SchemaMismatchError,
    UnsupportedStrategyError,
)
from rowops.lakehouse import Lakehouse
from rowops.operations import explain as _explain
from rowops.operations import run
from rowops.spec.operations import DeleteSpec, UpdateSpec, normalize_assignments, simple_merge_spec
from rowops.spec.results import OperationResult
from rowops.table import MergeBuilder, Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "CardinalityViolationError",
    "CommitConflictError",
    "Lakehouse",
    "MergeBuilder",
    "OperationResult",
    "RowOpsError",
    "SchemaMismatchError",
    "Table",
    "UnsupportedStrategyError",
    "delete",
    "errors",
    "explain",
    "merge",
    "update",
]


def merge(
    source: DataFrame,
    target: Table,
    on: Sequence[str] | str,
    when_matched: str | None = "update",
    when_not_matched: str | None = "insert",
    when_not_matched_by_source: str | None = None,
    strategy: str = "auto",
) -> OperationResult:
    """MERGE ``source`` into ``target`` on key columns; by default an upsert.

    Args:
        source: the change rows; for update/insert its columns must match the table.
        target: the table.
        on: key column(s) equal in source and target (SQL `=`: a NULL key matches nothing).
        when_matched: "update" (all columns), "delete" or None.
        when_not_matched: "insert" (all columns) or None.
        when_not_matched_by_source: "delete" or None.
        strategy: "auto", "copy-on-write", "position-delete" or "equality-delete".
    """
    spec = simple_merge_spec(on, when_matched, when_not_matched, when_not_matched_by_source)
    return run(target, spec, source, strategy)


def update(
    target: Table, set: Mapping[str, str], where: str | None = None, strategy: str = "auto"
) -> OperationResult:
    """UPDATE ``target`` SET col = expr ... WHERE ``where`` (Spark SQL)."""
    return run(target, UpdateSpec(normalize_assignments(set), where), None, strategy)


def delete(target: Table, where: str | None = None, strategy: str = "auto") -> OperationResult:
    """DELETE FROM ``target`` WHERE ``where`` (Spark SQL)."""
    return run(target, DeleteSpec(where), None, strategy)


def explain(
    source: DataFrame | None,
    target: Table,
    on: Sequence[str] | str | None = None,
    when_matched: str | None = "update",
    when_not_matched: str | None = "insert",
    when_not_matched_by_source: str | None = None,
    strategy: str = "auto",
    update_set: Mapping[str, str] | None = None,
    where: str | None = None,
) -> str:
    """Explain a MERGE (``source`` and ``on`` given), an UPDATE (``update_set``) or a DELETE, without running it.

    Shows the chosen encoding with the cost numbers behind it, the files scanned and pruned, whether
    the co-located join applies (and why not), and Spark's physical plan of the join.
    """
    if source is not None and on is not None:
        spec = simple_merge_spec(on, when_matched, when_not_matched, when_not_matched_by_source)
        return _explain(target, spec, source, strategy)
    if update_set is not None:
        return _explain(target, UpdateSpec(normalize_assignments(update_set), where), None, strategy)
    return _explain(target, DeleteSpec(where), None, strategy)
