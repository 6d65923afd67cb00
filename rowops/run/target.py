"""What running an operation needs of a table: its lakehouse, identifier and scope (Protocols).

The conductors in ``rowops/run/`` receive a table through :class:`TableTarget`, which the user-facing
``rowops.table.Table`` satisfies; they never import ``Table`` (it imports them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from pyiceberg.io import FileIO
from pyiceberg.table.metadata import TableMetadata

from rowops.catalog.tables import LoadedTable, TableScope
from rowops.request.identifiers import TableIdentifier

if TYPE_CHECKING:
    from rowops.exec.spark.frames import SparkSession


class LakeScope(TableScope, Protocol):
    """A lakehouse's own scope: the newest committed table states, and the FileIO reading their files."""

    @property
    def io(self) -> FileIO: ...


class TableLake(Protocol):
    """What a table handle needs of its lakehouse: ``rowops.Lakehouse`` (its lake log) or a
    catalog-backed one (``Lakehouse.from_catalog``)."""

    @property
    def spark(self) -> SparkSession: ...

    @property
    def catalog(self) -> LakeScope: ...

    @property
    def location(self) -> str: ...


class TableTarget(Protocol):
    """A table as an operation runs on it: its lakehouse, identifier, scope, and its state in that scope."""

    @property
    def lake(self) -> TableLake: ...

    @property
    def identifier(self) -> TableIdentifier: ...

    @property
    def scope(self) -> TableScope: ...

    @property
    def name(self) -> str: ...

    def load(self) -> LoadedTable: ...

    @property
    def metadata(self) -> TableMetadata: ...
