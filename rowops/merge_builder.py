"""The MERGE builder: ``table.merge(source, on=...).when_matched(...).update_all()...execute()``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from rowops.request.inputs import assignment_map, checked_call, merge_on, optional_sql
from rowops.request.operations import MergeClause, MergeSpec, key_condition, normalize_assignments
from rowops.request.results import OperationResult
from rowops.run import row_level
from rowops.run.target import TableTarget

if TYPE_CHECKING:
    from rowops.exec.spark.frames import DataFrame


class MergeBuilder:
    """Fluent MERGE: ``t.merge(s, on=...).when_matched(...).update_all().when_not_matched().insert_all()``."""

    def __init__(self, table: TableTarget, source: DataFrame, on: str | list[str]) -> None:
        self._table = table
        self._source = source
        checked = merge_on(on)
        if isinstance(checked, str) and ("." in checked or "=" in checked):
            self._on, self._on_columns = checked, None
        else:
            cols = [checked] if isinstance(checked, str) else list(checked)
            self._on, self._on_columns = key_condition(cols), tuple(cols)
        self._clauses: list[MergeClause] = []

    @checked_call
    def when_matched(self, condition: str | None = None) -> _ClauseBuilder:
        return _ClauseBuilder(self, "matched", optional_sql(condition, "when_matched(condition)"))

    @checked_call
    def when_not_matched(self, condition: str | None = None) -> _ClauseBuilder:
        return _ClauseBuilder(self, "not_matched", optional_sql(condition, "when_not_matched(condition)"))

    @checked_call
    def when_not_matched_by_source(self, condition: str | None = None) -> _ClauseBuilder:
        return _ClauseBuilder(
            self, "not_matched_by_source", optional_sql(condition, "when_not_matched_by_source(condition)")
        )

    def _add(self, clause: MergeClause) -> MergeBuilder:
        self._clauses.append(clause)
        return self

    def spec(self) -> MergeSpec:
        return MergeSpec(on=self._on, clauses=tuple(self._clauses), on_columns=self._on_columns)

    @checked_call
    def execute(self, strategy: str = "auto") -> OperationResult:
        return row_level.run(self._table, self.spec(), self._source, strategy)

    @checked_call
    def explain(self, strategy: str = "auto") -> str:
        """The plan of this MERGE (nothing is written)."""
        return row_level.explain(self._table, self.spec(), self._source, strategy)


class _ClauseBuilder:
    def __init__(self, parent: MergeBuilder, match: str, condition: str | None) -> None:
        self._parent, self._match, self._condition = parent, match, condition

    def _clause(self, action: str, assignments: Mapping[str, str] | None) -> MergeBuilder:
        what = f"{self._match}().{action}()"
        values = normalize_assignments(assignment_map(assignments, what)) if assignments is not None else None
        return self._parent._add(MergeClause(self._match, action, self._condition, values))  # type: ignore[arg-type]

    @checked_call
    def update(self, assignments: Mapping[str, str]) -> MergeBuilder:
        return self._clause("update", assignments)

    def update_all(self) -> MergeBuilder:
        return self._clause("update", None)

    def delete(self) -> MergeBuilder:
        return self._clause("delete", None)

    @checked_call
    def insert(self, values: Mapping[str, str]) -> MergeBuilder:
        return self._clause("insert", values)

    def insert_all(self) -> MergeBuilder:
        return self._clause("insert", None)
