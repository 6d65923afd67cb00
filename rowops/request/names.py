"""Column names of an operation resolved to the table's own names, as Spark resolves them.

Spark resolves names case-insensitively unless ``spark.sql.caseSensitive`` is true; rowops follows
the session. Names that resolve to nothing are left as given (the caller reports them).

>>> resolve("ID", ["id", "a"], case_sensitive=False), resolve("ID", ["id"], case_sensitive=True)
('id', 'ID')
>>> resolve_target("S.c1", ["k", "s"], case_sensitive=False)  # a nested field: its column resolved
's.c1'
>>> spec = MergeSpec("", (MergeClause("matched", "update", None, (("B", "s.b"),)),), ("Id",))
>>> resolved = resolve_spec(spec, ["id", "a", "b"], case_sensitive=False)
>>> resolved.on, resolved.on_columns, resolved.clauses[0].assignments
('t.`id` = s.`id`', ('id',), (('b', 's.b'),))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from rowops.errors import InvalidInputError
from rowops.request.operations import MergeClause, MergeSpec, OperationSpec, UpdateSpec, key_condition


def resolve(name: str, known: Sequence[str], case_sensitive: bool) -> str:
    """The known column ``name`` refers to, or ``name`` itself when none does."""
    if case_sensitive or name in known:
        return name
    matches = [k for k in known if k.lower() == name.lower()]
    return matches[0] if len(matches) == 1 else name


def resolve_target(name: str, known: Sequence[str], case_sensitive: bool) -> str:
    """An assignment target: a column, or ``column.field[.field...]`` (a field of a struct column),
    whose column is resolved as :func:`resolve` does (field names are checked against the schema later)."""
    resolved = resolve(name, known, case_sensitive)
    if resolved in known or "." not in name:
        return resolved
    head, rest = name.split(".", 1)
    return f"{resolve(head, known, case_sensitive)}.{rest}"


def _assignments(
    pairs: tuple[tuple[str, str], ...] | None, known: Sequence[str], case_sensitive: bool, context: str
) -> tuple[tuple[str, str], ...] | None:
    if pairs is None:
        return None
    resolved = tuple((resolve_target(c, known, case_sensitive), e) for c, e in pairs)
    names = [c for c, _ in resolved]
    repeated = sorted({c for c in names if names.count(c) > 1})
    if repeated:
        raise InvalidInputError(f"Column(s) {repeated} assigned more than once in {context}")
    overlapping = sorted({f"{a} and {b}" for a in names for b in names if b.startswith(a + ".") and a != b})
    if overlapping:
        raise InvalidInputError(
            f"Overlapping assignments {overlapping} in {context}",
            help="Assign either a whole struct column or fields inside it, not both.",
        )
    return resolved


def _clause(clause: MergeClause, known: Sequence[str], case_sensitive: bool) -> MergeClause:
    values = _assignments(clause.assignments, known, case_sensitive, clause.describe())
    return replace(clause, assignments=values)


def resolve_spec(spec: OperationSpec, known: Sequence[str], case_sensitive: bool) -> OperationSpec:
    """``spec`` with its column names (keys, assigned columns) spelled as the table spells them."""
    if isinstance(spec, UpdateSpec):
        values = _assignments(spec.assignments, known, case_sensitive, "set=")
        assert values is not None
        return replace(spec, assignments=values)
    if not isinstance(spec, MergeSpec):
        return spec
    clauses = tuple(_clause(c, known, case_sensitive) for c in spec.clauses)
    if spec.on_columns is None:
        return replace(spec, clauses=clauses)
    keys = tuple(resolve(c, known, case_sensitive) for c in spec.on_columns)
    return replace(spec, on=key_condition(keys), clauses=clauses, on_columns=keys)
