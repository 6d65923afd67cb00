"""``MERGE INTO`` / ``UPDATE`` / ``DELETE FROM`` text (Spark 3.5/4 syntax) into the builder's specs.

sqlglot parses the text; each condition and value is turned back into Spark SQL text by sqlglot's
generator, with the target's alias (or name) rewritten to ``t`` and the source's to ``s`` in MERGE, and
to plain column names in UPDATE and DELETE, which is what ``MergeBuilder`` and ``table.update`` take.
WHEN clauses keep their written order (the first whose condition holds wins). ``ON t.a = s.a AND
t.b = s.b`` (only equalities of same-named columns) becomes key columns, exactly as ``on=["a", "b"]``;
any other ON condition is kept as a condition, as ``on="..."``.

>>> dml = parse_statement('''MERGE INTO db.t AS tgt USING db.u AS src ON tgt.k = src.k
...     WHEN MATCHED AND src.op = 'd' THEN DELETE
...     WHEN MATCHED THEN UPDATE SET tgt.n = src.n + 1
...     WHEN NOT MATCHED THEN INSERT *''')
>>> dml.target, dml.spec.on, dml.spec.on_columns
('db.t', 't.`k` = s.`k`', ('k',))
>>> [c.describe() for c in dml.spec.clauses]
["WHEN MATCHED AND s.op = 'd' THEN DELETE", 'WHEN MATCHED THEN UPDATE SET n = s.n + 1', 'WHEN NOT MATCHED THEN INSERT *']
>>> print(dml.source.sql(dialect="spark"))
SELECT * FROM db.u AS src
>>> parse_statement("UPDATE db.t AS a SET a.n = n + 1 WHERE a.k > 2").spec
UpdateSpec(assignments=(('n', 'n + 1'),), where='k > 2')
>>> parse_statement("INSERT OVERWRITE db.t SELECT * FROM db.u")
Traceback (most recent call last):
...
rowops.errors.UnsupportedSqlError: INSERT OVERWRITE is not supported by rowops.sql
Help: ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp

from rowops.errors import InvalidInputError, UnsupportedSqlError
from rowops.request.operations import (
    DEFAULT,
    DeleteSpec,
    MatchKind,
    MergeClause,
    MergeSpec,
    OperationSpec,
    UpdateSpec,
    key_condition,
)
from rowops.sqltext.alter import ALTER, Alter, parse_alter
from rowops.sqltext.tables import DIALECT, parse_query, table_name

_EXPLAIN = re.compile(r"^\s*EXPLAIN\s+", re.IGNORECASE)
_SUBQUERY_HELP = (
    "Give the rows as the MERGE source instead, e.g. MERGE INTO ns.t USING (SELECT ...) s ON t.k = s.k "
    "WHEN MATCHED THEN DELETE."
)
_ALLOWED_ARGS = {
    "merge": {"this", "using", "on", "whens", "with_", "with"},
    "update": {"this", "expressions", "where"},
    "delete": {"this", "where"},
}


@dataclass(frozen=True)
class Dml:
    """A MERGE, UPDATE or DELETE: the target table's name, the spec, the MERGE source as a query."""

    target: str
    spec: OperationSpec
    source: exp.Expr | None = None
    explain: bool = False


@dataclass(frozen=True)
class Query:
    """A query (``SELECT ...``) to run through Spark with the lake's tables resolved."""

    tree: exp.Expr


Statement = Dml | Query | Alter


def parse_statement(text: str) -> Statement:
    """Parse one statement of ``rowops.sql``.

    Raises:
        SqlSyntaxError: the text does not parse.
        UnsupportedSqlError: a statement or clause rowops does not run, named.
    """
    if not isinstance(text, str):
        raise InvalidInputError(f"SQL must be text, not {type(text).__qualname__}")
    explain = _EXPLAIN.match(text)
    body = text[explain.end() :] if explain else text
    if ALTER.match(body):  # Iceberg's extensions: partition and sort order evolution (sqltext/alter.py)
        if explain:
            raise UnsupportedSqlError("EXPLAIN of ALTER TABLE is not supported by rowops.sql")
        return parse_alter(body)
    tree = parse_query(body)
    if isinstance(tree, exp.Query):
        if explain:
            raise UnsupportedSqlError(
                "EXPLAIN of a query is not supported by rowops.sql",
                help="Run the query with lake.sql(text) and call .explain() on the DataFrame.",
            )
        return Query(tree)
    if isinstance(tree, exp.Merge):
        return _merge(tree, bool(explain))
    if isinstance(tree, exp.Update):
        return _update(tree, bool(explain))
    if isinstance(tree, exp.Delete):
        return _delete(tree, bool(explain))
    raise UnsupportedSqlError(f"{_statement_name(tree, body)} is not supported by rowops.sql")


def _statement_name(tree: exp.Expr, body: str) -> str:
    if isinstance(tree, exp.Insert):
        return "INSERT OVERWRITE" if tree.args.get("overwrite") else "INSERT INTO"
    words = body.split()
    return " ".join(words[:2]).upper() if words else "An empty statement"


def _check_args(tree: exp.Expr, kind: str) -> None:
    extra = sorted(
        k for k, v in tree.args.items() if v not in (None, False, []) and k not in _ALLOWED_ARGS[kind]
    )
    if extra:
        names = ", ".join(k.strip("_").upper() for k in extra)
        raise UnsupportedSqlError(f"{names} in {kind.upper()} is not supported by rowops.sql")


def _target(tree: exp.Expr, statement: str) -> tuple[str, set[str]]:
    """The target table's name and the qualifiers that refer to it (its alias, else its names)."""
    table = tree.this
    name = table_name(table)
    if name is None or "." not in name:
        raise UnsupportedSqlError(
            f"The target of {statement} must be a table of the lake named namespace.table, not "
            f"{table.sql(dialect=DIALECT)!r}"
        )
    if table.args.get("version") is not None:
        raise UnsupportedSqlError(f"Time travel on the target of {statement} is not supported")
    return name, _qualifiers(table)


def _qualifiers(node: exp.Expr) -> set[str]:
    if node.alias:
        return {node.alias.lower()}
    name = table_name(node)
    if name is None:
        return set()
    parts = name.lower().split(".")
    return {".".join(parts[i:]) for i in range(len(parts))}


def _qualifier(column: exp.Column) -> str | None:
    parts = column.parts[:-1]
    return ".".join(p.name for p in parts).lower() if parts else None


def _no_subquery(node: exp.Expr, where: str) -> None:
    if node.find(exp.Select, exp.Subquery, exp.Exists) is not None:
        raise UnsupportedSqlError(
            f"Subqueries in {where} are not supported: {node.sql(dialect=DIALECT)}", help=_SUBQUERY_HELP
        )


def _requalify(node: exp.Expr, aliases: dict[str, str | None], where: str) -> str:
    """Spark SQL text of ``node`` with qualifiers in ``aliases`` replaced (None: unqualified)."""
    _no_subquery(node, where)
    node = node.copy()
    for column in list(node.find_all(exp.Column)):
        qualifiers = column.parts[:-1]
        names = [p.name.lower() for p in qualifiers]
        # the longest leading qualifier naming a table; the rest are struct fields (t.s.c1)
        cut = next((i for i in range(len(names), 0, -1) if ".".join(names[:i]) in aliases), 0)
        if not cut:
            continue
        new = aliases[".".join(names[:cut])]
        kept: list[exp.Expr] = [exp.to_identifier(new)] if new else []
        kept += [q.copy() for q in qualifiers[cut:]]
        for arg, part in zip(("table", "db", "catalog"), [*reversed(kept), None, None, None], strict=False):
            column.set(arg, part)
    return node.sql(dialect=DIALECT)


def _value(node: exp.Expr, aliases: dict[str, str | None], where: str) -> str:
    """An assigned value; the ``DEFAULT`` keyword (sqlglot: a bare column, or a ``Var`` in ``VALUES``)
    becomes :data:`DEFAULT`, the column's write-default."""
    bare = isinstance(node, exp.Column) and not node.table and not node.this.quoted
    if (bare or isinstance(node, exp.Var)) and node.name.upper() == DEFAULT:
        return DEFAULT
    return _requalify(node, aliases, where)


def _assigned(column: exp.Expr, target: set[str], where: str) -> str:
    """The column an assignment sets: ``c``, ``<target alias>.c``, or a field of a struct column
    (``s.c1``, ``<target alias>.s.c1``) as the dotted path ``s.c1``."""
    if not isinstance(column, exp.Column | exp.Dot):
        raise UnsupportedSqlError(f"Cannot assign to {column.sql(dialect=DIALECT)} in {where}")
    names = [p.name for p in column.parts]
    for cut in range(len(names) - 1, 0, -1):  # the longest qualifier naming the target
        if ".".join(names[:cut]).lower() in target:
            return ".".join(names[cut:])
    return ".".join(names)


def _assignments(
    pairs: list[exp.Expr], target: set[str], aliases: dict[str, str | None], where: str
) -> tuple[tuple[str, str], ...]:
    result = []
    for pair in pairs:
        if not isinstance(pair, exp.EQ):
            raise UnsupportedSqlError(f"Expected column = value in {where}, got {pair.sql(dialect=DIALECT)}")
        result.append((_assigned(pair.this, target, where), _value(pair.expression, aliases, where)))
    return tuple(result)


def _where(tree: exp.Expr, aliases: dict[str, str | None], statement: str) -> str | None:
    where = tree.args.get("where")
    return None if where is None else _requalify(where.this, aliases, f"the WHERE of {statement}")


def _update(tree: exp.Update, explain: bool) -> Dml:
    _check_args(tree, "update")
    name, target = _target(tree, "UPDATE")
    plain: dict[str, str | None] = dict.fromkeys(target)
    assignments = _assignments(tree.expressions, target, plain, "UPDATE SET")
    return Dml(name, UpdateSpec(assignments, _where(tree, plain, "UPDATE")), None, explain)


def _delete(tree: exp.Delete, explain: bool) -> Dml:
    _check_args(tree, "delete")
    name, target = _target(tree, "DELETE")
    return Dml(name, DeleteSpec(_where(tree, dict.fromkeys(target), "DELETE")), None, explain)


def _merge(tree: exp.Merge, explain: bool) -> Dml:
    _check_args(tree, "merge")
    name, target = _target(tree, "MERGE INTO")
    using = tree.args["using"]
    source = _qualifiers(using)
    if source & target:
        raise UnsupportedSqlError(
            f"The MERGE target and source are both called {sorted(source & target)[0]!r}",
            help="Give them different aliases: MERGE INTO ns.t AS t USING ... AS s.",
        )
    aliases: dict[str, str | None] = {**dict.fromkeys(target, "t"), **dict.fromkeys(source, "s")}
    on, on_columns = _on(tree.args["on"], aliases)
    clauses = tuple(_clause(when, target, aliases) for when in tree.args["whens"].expressions)
    query = exp.select("*").from_(using.copy())
    cte = tree.args.get("with_") or tree.args.get("with")
    if cte is not None:
        query.set("with_", cte.copy())
    return Dml(name, MergeSpec(on=on, clauses=clauses, on_columns=on_columns), query, explain)


def _key_column(conjunct: exp.Expr, aliases: dict[str, str | None]) -> str | None:
    """``c`` when ``conjunct`` is ``t.c = s.c`` (either order; same name ignoring case), else None."""
    conjunct = conjunct.unnest()
    if not isinstance(conjunct, exp.EQ):
        return None
    left, right = conjunct.this, conjunct.expression
    if not isinstance(left, exp.Column) or not isinstance(right, exp.Column):
        return None
    sides = {aliases.get(_qualifier(left) or ""), aliases.get(_qualifier(right) or "")}
    if sides != {"t", "s"} or left.name.lower() != right.name.lower():
        return None
    return left.name if aliases.get(_qualifier(left) or "") == "t" else right.name


def _on(condition: exp.Expr, aliases: dict[str, str | None]) -> tuple[str, tuple[str, ...] | None]:
    """The ON condition: key columns when it is only ``t.c = s.c`` equalities, else its text."""
    conjuncts = list(condition.unnest().flatten()) if isinstance(condition.unnest(), exp.And) else [condition]
    keys = [_key_column(c, aliases) for c in conjuncts]
    if all(keys):
        columns = tuple(dict.fromkeys(k for k in keys if k))
        return key_condition(columns), columns
    return _requalify(condition.unnest(), aliases, "the ON condition of MERGE"), None


def _kind(when: exp.When) -> MatchKind:
    if when.args.get("matched"):
        return "matched"
    return "not_matched_by_source" if when.args.get("source") else "not_matched"


def _clause(when: exp.When, target: set[str], aliases: dict[str, str | None]) -> MergeClause:
    kind = _kind(when)
    label = "WHEN " + kind.upper().replace("_", " ")
    condition = when.args.get("condition")
    text = _requalify(condition, aliases, label) if condition is not None else None
    then = when.args.get("then")
    if isinstance(then, exp.Var) and then.name.upper() == "DELETE":
        return MergeClause(kind, "delete", text)
    if isinstance(then, exp.Update):
        star = len(then.expressions) == 1 and isinstance(then.expressions[0], exp.Star)
        values = None if star else _assignments(then.expressions, target, aliases, f"{label} UPDATE SET")
        return MergeClause(kind, "update", text, values)
    if isinstance(then, exp.Insert):
        return MergeClause(kind, "insert", text, _insert(then, aliases, f"{label} INSERT"))
    action = then.sql(dialect=DIALECT) if isinstance(then, exp.Expr) else str(then)
    raise UnsupportedSqlError(f"{label} THEN {action} is not supported by rowops.sql")


def _insert(
    then: exp.Insert, aliases: dict[str, str | None], where: str
) -> tuple[tuple[str, str], ...] | None:
    if isinstance(then.this, exp.Star):
        return None
    columns = then.this.expressions if isinstance(then.this, exp.Tuple) else []
    values = then.expression.expressions if isinstance(then.expression, exp.Tuple) else []
    if not columns or len(columns) != len(values):
        raise UnsupportedSqlError(
            f"{where} needs as many values as columns (got {len(columns)} columns, {len(values)} values)"
        )
    return tuple((c.name, _value(v, aliases, where)) for c, v in zip(columns, values, strict=True))
