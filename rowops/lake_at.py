"""A read-only view of every table of a lake as of one lake version (``lake.at(...)``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rowops import statements
from rowops.catalog.views import PinnedView
from rowops.request.identifiers import TableIdentifier
from rowops.request.inputs import checked_call
from rowops.request.results import OperationResult
from rowops.run.target import TableLake
from rowops.table import Table

if TYPE_CHECKING:
    from rowops.exec.spark.frames import DataFrame


class LakeAt:
    """A read-only view of every table as of one lake version (``lake.at(...)``)."""

    def __init__(self, lake: TableLake, view: PinnedView) -> None:
        self.lake = lake
        self.lake_version = view.version
        self._view = view

    def __repr__(self) -> str:
        return f"LakeAt({self.lake.location!r}, version={self.version})"

    def __enter__(self) -> LakeAt:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Let expiries remove what this view reads (done too when it is garbage-collected): while it
        is open, ``expire_snapshots`` in any process keeps the snapshots of this lake version."""
        self._view.close()

    @property
    def version(self) -> int:
        return self.lake_version.version

    @property
    def timestamp_ms(self) -> int:
        return self.lake_version.timestamp_ms

    def table(self, name: str) -> Table:
        """The table as of this version (reads only; writes raise ReadOnlyError)."""
        ident = TableIdentifier.parse(name)
        self._view.load(ident)
        return Table(self.lake, ident, self._view)

    @checked_call
    def sql(self, text: str, strategy: str = "auto") -> OperationResult | DataFrame | str:
        """Run one SQL statement on this lake version (queries only; writes raise ReadOnlyError) (:func:`rowops.sql`): ``MERGE INTO`` / ``UPDATE`` /
        ``DELETE FROM`` (an ``OperationResult``; after ``EXPLAIN`` the plan text), or a query whose lake
        tables read their snapshots as of this version (a DataFrame)."""
        return statements.sql(self, text, strategy)

    def list_tables(self, namespace: str | None = None) -> list[str]:
        """Names of the tables of a namespace at this version (every table without one)."""
        if namespace is None:
            return sorted(self.lake_version.names())
        prefix = f"{namespace}."
        return [n for n in self.lake_version.names() if n.startswith(prefix) and "." not in n[len(prefix) :]]
