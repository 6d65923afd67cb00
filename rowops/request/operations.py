"""Row-level operations as plain data: MERGE clauses, UPDATE and DELETE.

Conditions and expressions are Spark SQL strings. In MERGE the target is aliased ``t`` and the
source ``s``; UPDATE and DELETE refer to columns by their plain names.

>>> spec = simple_merge_spec(["k"])
>>> spec.on
't.`k` = s.`k`'
>>> [c.describe() for c in spec.clauses]
['WHEN MATCHED THEN UPDATE SET *', 'WHEN NOT MATCHED THEN INSERT *']
>>> spec.key_upsert_or_delete
'upsert'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from rowops.errors import InvalidInputError

MatchKind = Literal["matched", "not_matched", "not_matched_by_source"]
ActionKind = Literal["update", "delete", "insert"]
STRATEGIES = ("auto", "copy-on-write", "position-delete", "equality-delete", "hybrid")
DEFAULT = "DEFAULT"  # an assigned value: the column's write-default (``rowops.DEFAULT``, SQL's DEFAULT)


def is_default(expression: str) -> bool:
    """Whether an assigned expression is SQL's ``DEFAULT`` keyword (a column named ``default`` is
    written quoted: `` `default` ``).

    >>> is_default(" default "), is_default("`default`"), is_default("s.default")
    (True, False, False)
    """
    return expression.strip().upper() == DEFAULT


_ALLOWED_ACTIONS: dict[str, tuple[str, ...]] = {
    "matched": ("update", "delete"),
    "not_matched": ("insert",),
    "not_matched_by_source": ("update", "delete"),
}


@dataclass(frozen=True)
class MergeClause:
    """One WHEN clause. ``assignments is None`` means all columns (``UPDATE SET *`` / ``INSERT *``)."""

    match: MatchKind
    action: ActionKind
    condition: str | None = None
    assignments: tuple[tuple[str, str], ...] | None = None

    def __post_init__(self) -> None:
        if self.action not in _ALLOWED_ACTIONS[self.match]:
            raise InvalidInputError(f"WHEN {self.match.upper()} clauses cannot {self.action.upper()}")
        if self.match == "not_matched_by_source" and self.action == "update" and self.assignments is None:
            raise InvalidInputError(
                "WHEN NOT MATCHED BY SOURCE cannot UPDATE SET *: there is no source row to copy from",
                help="Name the columns to set, e.g. .update({'active': 'false'}).",
            )

    def describe(self) -> str:
        """SQL-like text of the clause."""
        head = "WHEN " + self.match.upper().replace("_", " ")
        if self.condition:
            head += f" AND {self.condition}"
        if self.action == "delete":
            return f"{head} THEN DELETE"
        verb = "UPDATE SET" if self.action == "update" else "INSERT"
        body = "*" if self.assignments is None else ", ".join(f"{c} = {e}" for c, e in self.assignments)
        return f"{head} THEN {verb} {body}"


@dataclass(frozen=True)
class MergeSpec:
    """A MERGE: join condition, optional key columns (when given as a list) and ordered clauses."""

    on: str
    clauses: tuple[MergeClause, ...]
    on_columns: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not self.clauses:
            raise InvalidInputError("MERGE needs at least one WHEN clause")
        for kind in _ALLOWED_ACTIONS:
            group = [c for c in self.clauses if c.match == kind]
            if any(c.condition is None for c in group[:-1]):
                raise InvalidInputError(
                    f"Only the last WHEN {kind.upper()} clause may omit its condition",
                    help="Add a condition to the earlier clauses or reorder them.",
                )

    def of(self, kind: MatchKind) -> tuple[MergeClause, ...]:
        """The clauses of one match kind, in order."""
        return tuple(c for c in self.clauses if c.match == kind)

    @property
    def checks_cardinality(self) -> bool:
        """Whether a target row matched by several source rows is an error (SQL's MERGE rule).

        It is not when the outcome cannot depend on which source row is used: no WHEN MATCHED
        clause at all, or a single unconditional WHEN MATCHED THEN DELETE (as Spark and Iceberg).

        >>> simple_merge_spec(["k"], when_matched="delete", when_not_matched=None).checks_cardinality
        False
        >>> simple_merge_spec(["k"]).checks_cardinality
        True
        """
        matched = self.of("matched")
        return not (
            not matched
            or (len(matched) == 1 and matched[0].action == "delete" and matched[0].condition is None)
        )

    @property
    def key_upsert_or_delete(self) -> Literal["upsert", "delete"] | None:
        """'upsert' or 'delete' when this MERGE is a blind by-key operation (encodable by equality deletes).

        Blind means: joined on key columns only, no conditions, and either
        ``UPDATE SET * / INSERT *`` (upsert) or ``DELETE`` alone (delete by key).
        """
        if self.on_columns is None or any(c.condition for c in self.clauses):
            return None
        shape = tuple((c.match, c.action, c.assignments is None) for c in self.clauses)
        if shape == (("matched", "update", True), ("not_matched", "insert", True)):
            return "upsert"
        if shape == (("matched", "delete", True),):
            return "delete"
        return None


@dataclass(frozen=True)
class UpdateSpec:
    """UPDATE t SET col = expr, ... WHERE where."""

    assignments: tuple[tuple[str, str], ...]
    where: str | None = None


@dataclass(frozen=True)
class DeleteSpec:
    """DELETE FROM t WHERE where."""

    where: str | None = None


OperationSpec = MergeSpec | UpdateSpec | DeleteSpec


def key_condition(columns: Sequence[str]) -> str:
    """Equality of key columns between target ``t`` and source ``s``, SQL's ``=``: a NULL key
    matches nothing (ask for NULL-safe matching with a condition: ``on="t.k <=> s.k"``).

    >>> key_condition(["a", "b"])
    't.`a` = s.`a` AND t.`b` = s.`b`'
    """
    if not columns:
        raise InvalidInputError("on= needs at least one column")
    return " AND ".join(f"t.`{c}` = s.`{c}`" for c in columns)


def simple_merge_spec(
    on: Sequence[str] | str,
    when_matched: str | None = "update",
    when_not_matched: str | None = "insert",
    when_not_matched_by_source: str | None = None,
) -> MergeSpec:
    """Build the MergeSpec of ``rowops.merge(df, t, on=..., when_matched=..., ...)``."""
    on_columns = (on,) if isinstance(on, str) else tuple(on)
    clauses: list[MergeClause] = []
    for match, action, allowed in (
        ("matched", when_matched, ("update", "delete")),
        ("not_matched", when_not_matched, ("insert",)),
        ("not_matched_by_source", when_not_matched_by_source, ("delete",)),
    ):
        if action is None:
            continue
        if action not in allowed:
            raise InvalidInputError(f"when_{match}={action!r} is not one of {allowed} or None")
        clauses.append(MergeClause(match, action))  # type: ignore[arg-type]
    return MergeSpec(on=key_condition(on_columns), clauses=tuple(clauses), on_columns=on_columns)


def normalize_assignments(assignments: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """Validate an assignment mapping ``{"col": "sql expr"}`` into a tuple of pairs."""
    if not isinstance(assignments, Mapping) or not assignments:
        raise InvalidInputError("Assignments must be a non-empty mapping of column name to SQL expression")
    pairs = tuple((str(k), str(v)) for k, v in assignments.items())
    return pairs


def verb(spec: OperationSpec) -> str:
    """The operation's SQL verb: ``MERGE``, ``UPDATE`` or ``DELETE``."""
    return "MERGE" if isinstance(spec, MergeSpec) else "UPDATE" if isinstance(spec, UpdateSpec) else "DELETE"


def describe(spec: OperationSpec) -> str:
    """The operation as one line of SQL-like text (plan reports and error messages)."""
    if isinstance(spec, MergeSpec):
        return f"MERGE ON {spec.on} " + " ".join(c.describe() for c in spec.clauses)
    if isinstance(spec, UpdateSpec):
        assignments = ", ".join(f"{c} = {e}" for c, e in spec.assignments)
        return f"UPDATE SET {assignments}" + (f" WHERE {spec.where}" if spec.where else "")
    return "DELETE" + (f" WHERE {spec.where}" if spec.where else "")
