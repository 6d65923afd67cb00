"""``rowops.sql``: SQL text run against the lake (``lake.sql``, ``tx.sql``).

``MERGE INTO`` / ``UPDATE`` / ``DELETE FROM`` are parsed (``rowops/sqltext/parse.py``) into the same
specs the builder produces and run by ``operations.run`` (every strategy, ``auto``, ``EXPLAIN``,
transactions); a query runs through Spark SQL with the lake's tables replaced by DataFrames of their
snapshots (``rowops/sqltext/tables.py``, ``rowops/exec/spark/sql_query.py``). The MERGE source is such a
query too: ``SELECT * FROM <source>`` (a lake table, a temporary view, a subquery, ``VALUES``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from sqlglot import exp

from rowops.errors import InvalidIdentifierError, InvalidInputError, NoSuchNamespaceError, NoSuchTableError
from rowops.exec.spark.sql_query import check_spark_table, run_query, timestamp_millis
from rowops.meta.spec_evolution import spec_text
from rowops.request.inputs import checked_call, sql_text
from rowops.request.results import OperationResult
from rowops.run import row_level
from rowops.run.inspect import METADATA_TABLES
from rowops.sqltext.alter import Alter
from rowops.sqltext.parse import Dml, parse_statement
from rowops.sqltext.tables import TableUse, lake_template, snapshot_of, table_name
from rowops.table import Table

if TYPE_CHECKING:
    from rowops.exec.spark.frames import DataFrame, SparkSession


class SqlScope(Protocol):
    """What SQL runs against: a lakehouse, a transaction or a read-only lake version (``lake.at``)."""

    def table(self, name: str) -> Table: ...


def _spark(scope: SqlScope) -> SparkSession:
    spark: Any = getattr(scope, "spark", None)  # Lakehouse, CatalogLakehouse
    return spark if spark is not None else scope.lake.spark  # type: ignore[attr-defined]  # Transaction, LakeAt


METADATA_NAMES = frozenset((*METADATA_TABLES, "position_deletes"))


class _Tables:
    """The lake tables a statement names, opened once each through the scope; ``db.t.snapshots`` (a
    table's name and one of Iceberg's metadata tables) names that metadata table of ``db.t``, as in
    Iceberg's Spark SQL."""

    def __init__(self, scope: SqlScope) -> None:
        self.scope = scope
        self.opened: dict[str, Table | None] = {}
        self.metadata: dict[str, str] = {}  # "db.t.snapshots" -> "snapshots"

    def get(self, name: str) -> Table | None:
        if name not in self.opened:
            self.opened[name] = self._open(name)
            base, _, kind = name.rpartition(".")
            if self.opened[name] is None and kind.lower() in METADATA_NAMES and "." in base:
                self.opened[name] = self._open(base)
                if self.opened[name] is not None:
                    self.metadata[name] = kind.lower()
        return self.opened[name]

    def _open(self, name: str) -> Table | None:
        try:
            return self.scope.table(name)
        except (NoSuchTableError, NoSuchNamespaceError, InvalidIdentifierError):
            return None

    def is_lake(self, name: str) -> bool:
        return self.get(name) is not None


def _frame(spark: SparkSession, table: Table, use: TableUse, metadata_table: str | None) -> DataFrame:
    """The rows of one table reference: the current snapshot, or the one its time travel names; or
    the metadata table it names (as of a snapshot id with ``VERSION AS OF``, where Iceberg allows one)."""
    if metadata_table is not None:
        if use.travel is not None and use.travel.kind != "snapshot":
            raise InvalidInputError(
                f"{use.name}: a metadata table is read as of a snapshot id only",
                help=f"Write {use.name} VERSION AS OF <snapshot id>.",
            )
        snapshot = int(use.travel.value) if use.travel is not None else None
        return table.inspect.table(metadata_table, snapshot)
    if use.travel is None:
        return table.to_df()
    millis = timestamp_millis(spark, use.travel.value) if use.travel.kind == "timestamp" else None
    return table.to_df(snapshot_id=snapshot_of(table.metadata, use.travel, table.name, millis))


def query(scope: SqlScope, tree: exp.Expr, context: str) -> DataFrame:
    """A query's DataFrame: lake tables resolved at their snapshots, other names left to Spark."""
    spark = _spark(scope)
    tables = _Tables(scope)
    template = lake_template(tree, tables.is_lake)
    for node in tree.find_all(exp.Table):  # a dotted name that is neither the lake's nor Spark's
        name = table_name(node)
        if name is not None and "." in name and not tables.is_lake(name):
            check_spark_table(spark, name)
    frames = {}
    for use in template.uses:
        table = tables.get(use.name)
        assert table is not None
        frames[use.field] = _frame(spark, table, use, tables.metadata.get(use.name))
    return run_query(spark, template.text, frames, context)


def _dml(scope: SqlScope, dml: Dml, strategy: str) -> OperationResult | str:
    target = scope.table(dml.target)  # NoSuchTableError for an unknown target
    source = query(scope, dml.source, "the MERGE source") if dml.source is not None else None
    if dml.explain:
        return row_level.explain(target, dml.spec, source, strategy)
    return row_level.run(target, dml.spec, source, strategy)


@checked_call
def sql(lake: SqlScope, text: str, strategy: str = "auto") -> OperationResult | DataFrame | str:
    """Run one SQL statement against ``lake`` (a Lakehouse, a transaction or ``lake.at(...)``).

    Args:
        lake: where table names resolve; inside a transaction the operation joins it.
        text: ``MERGE INTO ns.t [AS t] USING <table | view | (query)> [AS s] ON ... WHEN ...``,
            ``UPDATE ns.t SET c = expr, ... [WHERE ...]``, ``DELETE FROM ns.t [WHERE ...]`` (each
            optionally after ``EXPLAIN``), or a query (``SELECT ...``) in which ``ns.t``,
            ``ns.t VERSION AS OF <snapshot id | 'ref'>`` and ``ns.t TIMESTAMP AS OF <ts>`` read the
            lake's tables; or an ``ALTER TABLE ns.t ADD / DROP / REPLACE PARTITION FIELD ...`` or
            ``WRITE [LOCALLY] ORDERED BY ... / DISTRIBUTED BY PARTITION / UNORDERED`` (Iceberg's SQL
            extensions; ``rowops/sqltext/alter.py``).
        strategy: as in ``rowops.merge``: ``auto``, ``copy-on-write``, ``position-delete``,
            ``equality-delete``.

    Returns:
        The ``OperationResult`` of a MERGE/UPDATE/DELETE, the plan text of an ``EXPLAIN``, the
        query's DataFrame, or a one-line summary of an ``ALTER TABLE``.
    """
    statement = parse_statement(sql_text(text, "rowops.sql(text)"))
    if isinstance(statement, Dml):
        return _dml(lake, statement, strategy)
    if isinstance(statement, Alter):
        return _alter(lake, statement)
    return query(lake, statement.tree, "the query")


def _alter(scope: SqlScope, alter: Alter) -> str:
    """Run an ``ALTER TABLE`` of partition or sort order evolution (one commit); a short summary."""
    table = scope.table(alter.target)
    if alter.add or alter.drop:
        table.update_spec(add=list(alter.add), drop=list(alter.drop))
        return f"{alter.clause}: {alter.target} is partitioned by {spec_text(table.metadata)}"
    if alter.sort_by is not None:
        table.replace_sort_order(list(alter.sort_by), distribution_mode=alter.distribution)
    elif alter.distribution is not None:
        table.set_properties(**{"write.distribution-mode": alter.distribution})
    order = ", ".join(alter.sort_by) if alter.sort_by else "unordered"
    return f"{alter.clause}: {alter.target} is written {order} (distribution {alter.distribution})"
