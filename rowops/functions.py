"""The top-level operations: ``rowops.merge``, ``rowops.update``, ``rowops.delete``, ``rowops.explain``.

A transaction (``rowops/transaction.py``) offers the same functions with the same arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from rowops.errors import InvalidArgumentError
from rowops.exec.checks.validation import require_dataframe
from rowops.request.inputs import assignment_map, checked_call, merge_on, optional_sql
from rowops.request.operations import DeleteSpec, UpdateSpec, normalize_assignments, simple_merge_spec
from rowops.request.results import OperationResult
from rowops.run.row_level import explain as _explain
from rowops.run.row_level import run
from rowops.table import Table

if TYPE_CHECKING:
    from rowops.exec.spark.frames import DataFrame


def _table(target: object) -> Table:
    """``target`` if it is a rowops Table (a name or a DataFrame is a common slip)."""
    if isinstance(target, Table):
        return target
    raise InvalidArgumentError(
        f"target must be a rowops Table, not {type(target).__module__}.{type(target).__qualname__}",
        help="Open the table first: t = lake.table(name) (its name as lake.list_tables() lists it), then pass t.",
    )


@checked_call
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
    spec = simple_merge_spec(merge_on(on), when_matched, when_not_matched, when_not_matched_by_source)
    return run(_table(target), spec, require_dataframe(source, "the MERGE source"), strategy)


@checked_call
def update(
    target: Table, set: Mapping[str, str], where: str | None = None, strategy: str = "auto"
) -> OperationResult:
    """UPDATE ``target`` SET col = expr ... WHERE ``where`` (Spark SQL)."""
    spec = UpdateSpec(normalize_assignments(assignment_map(set, "set=")), optional_sql(where, "where="))
    return run(_table(target), spec, None, strategy)


@checked_call
def delete(target: Table, where: str | None = None, strategy: str = "auto") -> OperationResult:
    """DELETE FROM ``target`` WHERE ``where`` (Spark SQL)."""
    return run(_table(target), DeleteSpec(optional_sql(where, "where=")), None, strategy)


@checked_call
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
    target = _table(target)
    if source is not None and on is not None:
        spec = simple_merge_spec(merge_on(on), when_matched, when_not_matched, when_not_matched_by_source)
        return _explain(target, spec, require_dataframe(source, "the MERGE source"), strategy)
    condition = optional_sql(where, "where=")
    if update_set is not None:
        assignments = normalize_assignments(assignment_map(update_set, "update_set="))
        return _explain(target, UpdateSpec(assignments, condition), None, strategy)
    return _explain(target, DeleteSpec(condition), None, strategy)
