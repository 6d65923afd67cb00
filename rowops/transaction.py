"""Multi-statement, multi-table transactions: the user-facing API.

>>> # with lake.transaction(isolation="serializable") as tx:
>>> #     tx.merge(changes, "db.accounts", on=["id"])
>>> #     tx.append("db.ledger", entries)
>>> # leaving the block commits both tables as one lake version; an exception rolls back

Reads inside a transaction (``tx.table(name).to_df()``) see the lake version pinned at begin plus
the transaction's own writes. The protocol is in ``rowops/catalog/transactions.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from rowops import functions, statements
from rowops.catalog.batches import batch_record
from rowops.catalog.branches import BranchScope
from rowops.catalog.tables import TableCatalog
from rowops.catalog.transactions import DEFAULT_ISOLATION, LakeTransaction
from rowops.errors import InvalidArgumentError
from rowops.request.identifiers import TableIdentifier
from rowops.request.inputs import checked_call
from rowops.request.results import OperationResult
from rowops.run.lake_feed import lake_changes
from rowops.run.target import TableLake
from rowops.table import Table

if TYPE_CHECKING:
    from rowops.exec.spark.frames import DataFrame, T


class TransactionLake(TableLake, Protocol):
    """What a transaction needs of its lakehouse (``rowops.Lakehouse``; a Protocol, so that
    ``transaction.py`` and ``lakehouse.py``, which creates transactions, do not import each other)."""

    @property
    def catalog(self) -> TableCatalog: ...

    def create_in(
        self,
        tx: LakeTransaction | None,
        name: str,
        data: DataFrame | T.StructType,
        partition_by: Sequence[str] | None = None,
        identifier: Sequence[str] | None = None,
        properties: dict[str, str] | None = None,
        sort_by: Sequence[str] | None = None,
        format_version: int = 2,
        defaults: Mapping[str, object] | None = None,
    ) -> TableIdentifier: ...


class Transaction:
    """A transaction over every table of one lakehouse.

    Use it as a context manager (``with lake.transaction() as tx``: commit on leaving the block,
    rollback on an exception) or explicitly (``tx = lake.begin(); ...; tx.commit()`` / ``tx.rollback()``).

    Attributes:
        id: the transaction id recorded in the lake history.
        isolation: ``"serializable"`` (default) or ``"snapshot"``.
        begin_version: the lake version its reads are pinned to.
        version: the lake version it committed (None before commit, or if it changed nothing).
    """

    def __init__(self, lake: TransactionLake, isolation: str = DEFAULT_ISOLATION) -> None:
        self.lake = lake
        self._tx = LakeTransaction(lake.catalog, isolation)

    def __repr__(self) -> str:
        return f"Transaction({self.id!r}, {self.isolation}, begin_version={self.begin_version}, {self.state})"

    @property
    def id(self) -> str:
        return self._tx.id

    @property
    def isolation(self) -> str:
        return self._tx.isolation

    @property
    def begin_version(self) -> int:
        return self._tx.pinned.version

    @property
    def state(self) -> str:
        """``open``, ``committed``, ``rolled back`` or ``failed``."""
        return self._tx.state

    @property
    def version(self) -> int | None:
        return self._tx.version.version if self._tx.version else None

    # -- tables ----------------------------------------------------------------------------------
    def table(self, name: str) -> Table:
        """A table as this transaction sees it; its operations join the transaction."""
        ident = TableIdentifier.parse(name)
        self._tx.load(ident)  # raises NoSuchTableError
        return Table(self.lake, ident, self._tx)

    @checked_call
    def changes(
        self,
        start: int | datetime | None = None,
        end: int | datetime | None = None,
        *,
        net: bool = False,
        tables: Sequence[str] | None = None,
    ) -> dict[str, DataFrame]:
        """``lake.changes`` as this transaction reads: up to its pinned version at most (its own
        statements are not committed, so not in any feed)."""
        return lake_changes(self.lake.catalog, self.table, self.begin_version, start, end, net, tables)

    @checked_call
    def sql(self, text: str, strategy: str = "auto") -> OperationResult | DataFrame | str:
        """Run one SQL statement inside this transaction (:func:`rowops.sql`): ``MERGE INTO`` / ``UPDATE`` /
        ``DELETE FROM`` (an ``OperationResult``; after ``EXPLAIN`` the plan text), or a query whose lake
        tables read their states in this transaction (a DataFrame)."""
        return statements.sql(self, text, strategy)

    def _target(self, target: str | Table) -> Table:
        if isinstance(target, str):
            return self.table(target)
        if isinstance(target, Table):
            scope = target.scope
            mine = self.table(target.name)
            return mine.branch(scope.branch) if isinstance(scope, BranchScope) else mine
        raise InvalidArgumentError(
            f"target must be a table name or a rowops Table, not {type(target).__qualname__}",
            help='Pass the table\'s name, e.g. tx.merge(df, "db.accounts", on=["id"]).',
        )

    def list_tables(self, namespace: str | None = None) -> list[str]:
        """Tables of a namespace (every table without one) at the pinned version, with this
        transaction's creates and drops."""
        prefix = f"{namespace}." if namespace is not None else ""
        names = {n for n in self._tx.pinned.names() if n.startswith(prefix)}
        for name, work in self._tx.work.items():
            if name.startswith(prefix):
                (names.discard if work.dropped else names.add)(name)
        return sorted(n for n in names if namespace is None or "." not in n[len(prefix) :])

    # -- operations (same arguments as the top-level functions) -----------------------------------
    @checked_call
    def merge(
        self,
        source: DataFrame,
        target: str | Table,
        on: Sequence[str] | str,
        when_matched: str | None = "update",
        when_not_matched: str | None = "insert",
        when_not_matched_by_source: str | None = None,
        strategy: str = "auto",
    ) -> OperationResult:
        """:func:`rowops.merge` inside this transaction."""
        table = self._target(target)
        return functions.merge(
            source, table, on, when_matched, when_not_matched, when_not_matched_by_source, strategy
        )

    @checked_call
    def update(
        self, target: str | Table, set: Mapping[str, str], where: str | None = None, strategy: str = "auto"
    ) -> OperationResult:
        """:func:`rowops.update` inside this transaction."""
        return functions.update(self._target(target), set, where, strategy)

    @checked_call
    def delete(
        self, target: str | Table, where: str | None = None, strategy: str = "auto"
    ) -> OperationResult:
        """:func:`rowops.delete` inside this transaction."""
        return functions.delete(self._target(target), where, strategy)

    @checked_call
    def append(self, target: str | Table, df: DataFrame) -> OperationResult:
        """Append rows to a table inside this transaction."""
        return self._target(target).append(df)

    @checked_call
    def create_table(
        self,
        name: str,
        data: DataFrame | T.StructType,
        partition_by: Sequence[str] | None = None,
        identifier: Sequence[str] | None = None,
        properties: dict[str, str] | None = None,
        sort_by: Sequence[str] | None = None,
        format_version: int = 2,
        defaults: Mapping[str, object] | None = None,
    ) -> Table:
        """:meth:`Lakehouse.create_table` inside this transaction (visible to others at commit)."""
        ident = self.lake.create_in(
            self._tx, name, data, partition_by, identifier, properties, sort_by, format_version, defaults
        )
        return Table(self.lake, ident, self._tx)

    def drop_table(self, name: str) -> None:
        """Drop a table when this transaction commits."""
        self._tx.drop(TableIdentifier.parse(name))

    def mark_batch(self, app: str, batch: str, source: dict[str, Any] | None = None) -> None:
        """Record that this transaction applies ``batch`` of pipeline ``app`` (``rowops.pipeline``).

        The pair (and ``source``: how far a chained pipeline read its source's change feed) is written
        into the lake version's transaction record, atomically with the tables; the commit fails with
        ``BatchAlreadyCommittedError`` (nothing committed) when a version committed after this
        transaction began carries the same pair.
        """
        self._tx.batch = batch_record(app, batch, source)

    # -- ending ----------------------------------------------------------------------------------
    def commit(self) -> int | None:
        """Publish all changes atomically; returns the new lake version (None if nothing changed).

        Raises:
            CommitConflictError: a transaction that committed after this one began conflicts with
                it (nothing of this one is committed; ``retry_safe`` says whether running the whole
                transaction again can succeed).
        """
        version = self._tx.commit()
        return version.version if version else None

    def rollback(self) -> None:
        """Discard everything this transaction wrote (nothing was visible to anyone)."""
        self._tx.rollback()

    def __enter__(self) -> Transaction:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is not None:
            self.rollback()
        elif self.state == "open":
            self.commit()
