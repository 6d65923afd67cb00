"""Table references in SQL text: names, time travel, and queries with lake tables made replaceable.

A query given to ``lake.sql`` is Spark SQL; the lake's tables are not in Spark's catalog. Each
reference to a lake table is replaced by a placeholder field, so that PySpark's own
``spark.sql(text, **frames)`` substitutes a DataFrame of the table's snapshot for it (classic PySpark
registers a temporary view per DataFrame for the analysis of that one call and drops it; Spark
Connect sends the DataFrames' plans along). Other names (temporary views, Spark catalog tables, CTEs)
are left to Spark.

>>> tree = parse_query("SELECT t.k, u.n FROM db.t JOIN db.u AS u ON t.k = u.k WHERE u.s = '{x}'")
>>> template = lake_template(tree, lambda name: name in {"db.t", "db.u"})
>>> print(template.text)
SELECT t.k, u.n FROM {rowops_ref_0} AS t JOIN {rowops_ref_1} AS u ON t.k = u.k WHERE u.s = '{{x}}'
>>> [(use.field, use.name) for use in template.uses]
[('rowops_ref_0', 'db.t'), ('rowops_ref_1', 'db.u')]
>>> lake_template(parse_query("SELECT * FROM db.t VERSION AS OF 42"), lambda n: True).uses[0].travel
TimeTravel(kind='snapshot', value='42')
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import sqlglot
from pyiceberg.table.metadata import TableMetadata
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from rowops.errors import InvalidInputError, SqlSyntaxError, UnsupportedSqlError

log = logging.getLogger(__name__)
DIALECT = "spark"
_FIELD = "rowops_ref_{}"


@dataclass(frozen=True)
class TimeTravel:
    """``VERSION AS OF <snapshot id>`` (``snapshot``), ``VERSION AS OF '<branch or tag>'`` (``ref``) or
    ``TIMESTAMP AS OF <expression>`` (``timestamp``: the expression's Spark SQL text)."""

    kind: Literal["snapshot", "ref", "timestamp"]
    value: str


@dataclass(frozen=True)
class TableUse:
    """One reference to a lake table in a query: the placeholder field that stands for it."""

    field: str
    name: str
    travel: TimeTravel | None


@dataclass(frozen=True)
class Template:
    """A query's text for ``spark.sql(text, **frames)``: ``{field}`` per lake table (``{``/``}``
    of the query itself doubled); the plain query text when it uses no lake table."""

    text: str
    uses: tuple[TableUse, ...]


def parse_query(text: str) -> exp.Expr:
    """One statement of Spark SQL as a sqlglot tree; ``SqlSyntaxError`` when it does not parse."""
    try:
        statements = [s for s in sqlglot.parse(text, read=DIALECT) if s is not None]
    except ParseError as exc:
        log.debug("sqlglot cannot parse %r", text, exc_info=exc)
        raise SqlSyntaxError(f"SQL does not parse: {syntax_problem(exc)}") from exc
    except TokenError as exc:  # e.g. a string without its closing quote
        log.debug("sqlglot cannot tokenize %r", text, exc_info=exc)
        near = str(exc).removeprefix("Error tokenizing ")
        raise SqlSyntaxError(
            f"SQL does not parse: it cannot be read past {near} (an unterminated string, quoted name or comment?)"
        ) from exc
    if len(statements) != 1:
        raise SqlSyntaxError(f"Expected one SQL statement, got {len(statements)}")
    return statements[0]


def syntax_problem(exc: ParseError) -> str:
    """Where and why SQL text does not parse, without the parser's internals (its class names).

    >>> try:
    ...     sqlglot.parse("SELECT * FROM t WHERE id = = 1", read=DIALECT)
    ... except ParseError as exc:
    ...     print(syntax_problem(exc))
    unexpected or missing syntax at '=' (line 1, column 28): SELECT * FROM t WHERE id = >>=<< 1
    """
    if not exc.errors:
        return str(exc).splitlines()[0] if str(exc) else "syntax error"
    error = exc.errors[0]
    why = str(error.get("description") or "")
    if not why or "<class" in why or why.startswith("Required keyword"):
        why = "unexpected or missing syntax"
    near = str(error.get("highlight") or "")
    context = f"{error.get('start_context', '')}>>{near}<<{error.get('end_context', '')}".strip()
    return f"{why} at {near!r} (line {error.get('line')}, column {error.get('col')}): {context}"


def table_name(table: exp.Expr) -> str | None:
    """``ns.name`` of a plain table reference (None for a table function or a non-table).

    >>> table_name(parse_query("SELECT * FROM `db`.t").find(exp.Table))
    'db.t'
    """
    if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
        return None
    return ".".join(part.name for part in table.parts)


def time_travel(table: exp.Table) -> TimeTravel | None:
    """The ``VERSION AS OF`` / ``TIMESTAMP AS OF`` of a table reference, if any."""
    version = table.args.get("version")
    if version is None:
        return None
    kind, value = str(version.name).upper(), version.expression
    if str(version.args.get("kind", "")).upper() != "AS OF":
        raise UnsupportedSqlError(f"{kind} {version.args.get('kind')} is not supported; use {kind} AS OF")
    if kind == "TIMESTAMP":
        return TimeTravel("timestamp", value.sql(dialect=DIALECT))
    if isinstance(value, exp.Literal) and value.is_string:
        return TimeTravel("ref", value.name)
    if isinstance(value, exp.Literal) and value.name.lstrip("-").isdigit():
        return TimeTravel("snapshot", value.name)
    raise UnsupportedSqlError(
        f"VERSION AS OF {value.sql(dialect=DIALECT)} of {table_name(table)}: expected a snapshot id or a "
        "branch or tag name",
        help="List snapshot ids with table.snapshots().",
    )


def _alias(table: exp.Table) -> exp.TableAlias:
    alias = table.args.get("alias")
    return alias.copy() if alias is not None else exp.TableAlias(this=exp.to_identifier(table.name))


def _drop_namespaces(tree: exp.Expr, names: set[str]) -> None:
    """``db.t.c`` → ``t.c`` for the replaced tables named without an alias (their alias is ``t``)."""
    for column in tree.find_all(exp.Column):
        qualifier = ".".join(p.name for p in column.parts[:-1])
        if column.args.get("db") is not None and qualifier.lower() in names:
            column.set("catalog", None)
            column.set("db", None)


def lake_template(query: exp.Expr, is_lake: Callable[[str], bool]) -> Template:
    """``query`` with every reference to a lake table (``is_lake(name)``) replaced by a placeholder.

    A table keeps its alias, or gets its own name as alias (``FROM db.t`` → ``t.c`` still resolves).
    """
    tree = query.copy()
    uses: list[TableUse] = []
    unaliased: set[str] = set()
    for table in list(tree.find_all(exp.Table)):
        name = table_name(table)
        if name is None or "." not in name or not is_lake(name):
            continue
        field = _FIELD.format(len(uses))
        uses.append(TableUse(field, name, time_travel(table)))
        if table.args.get("alias") is None:
            unaliased.add(name.lower())
        table.replace(exp.Table(this=exp.to_identifier(f"__{field}__"), alias=_alias(table)))
    _drop_namespaces(tree, unaliased)
    text = tree.sql(dialect=DIALECT)
    if not uses:
        return Template(text, ())
    text = text.replace("{", "{{").replace("}", "}}")
    for use in uses:
        text = text.replace(f"__{use.field}__", "{" + use.field + "}")
    return Template(text, tuple(uses))


def snapshot_at(metadata: TableMetadata, millis: int, name: str) -> int:
    """The snapshot current at ``millis``: the last snapshot-log entry at or before it (Iceberg's rule).

    Raises:
        InvalidInputError: the table had no snapshot yet at that time.
    """
    entries = [e for e in metadata.snapshot_log if e.timestamp_ms <= millis]
    if not entries:
        raise InvalidInputError(
            f"Table {name} had no snapshot at or before {millis} ms since the epoch",
            help="List snapshots and their times with table.snapshots().",
        )
    return entries[-1].snapshot_id  # the log is in commit order


def snapshot_of(metadata: TableMetadata, travel: TimeTravel, name: str, millis: int | None) -> int:
    """The snapshot id a time-travel clause names (``millis``: the evaluated TIMESTAMP AS OF)."""
    if travel.kind == "snapshot":
        return int(travel.value)
    if travel.kind == "timestamp":
        assert millis is not None
        return snapshot_at(metadata, millis, name)
    ref = metadata.refs.get(travel.value)
    if ref is None:
        raise InvalidInputError(
            f"Table {name} has no branch or tag {travel.value!r} (VERSION AS OF)",
            help=f"Known references: {sorted(metadata.refs)}; or give a snapshot id.",
        )
    return ref.snapshot_id
