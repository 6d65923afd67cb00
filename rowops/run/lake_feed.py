"""The change feeds of every table a range of lake versions changed (``lake.changes``, ``tx.changes``).

One range (lake versions or timestamps, start exclusive, end inclusive) is read for all tables at once:
the tables are those some version of the range committed to (its transaction record), or whose entry
differs between the range's ends; each table's feed is ``run/feed.table_changes`` over the same range,
so a lake transaction is one commit with the same ``_commit_version`` in every table it wrote. Tables
that do not exist at the end of the range (dropped in it) have no feed here; a table dropped and
created again in it is refused as ``table.changes`` refuses it (``InvalidInputError``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from rowops.catalog.history import changes_back_to
from rowops.catalog.tables import TableCatalog
from rowops.errors import InvalidInputError
from rowops.run.feed import Bound, lake_version, table_changes

if TYPE_CHECKING:
    from rowops.exec.spark.frames import DataFrame
    from rowops.run.target import TableTarget


def lake_changes(
    catalog: TableCatalog,
    table: Callable[[str], TableTarget],
    newest: int,
    start: Bound = None,
    end: Bound = None,
    net: bool = False,
    tables: Iterable[str] | None = None,
) -> dict[str, DataFrame]:
    """``{table name: its change feed}`` for each table changed in the range (``tables``: only these),
    in name order; ``newest`` is the newest version the caller sees (the default end)."""
    first, last = lake_version(catalog, start, 0, newest), lake_version(catalog, end, newest, newest)
    if first > last:
        raise InvalidInputError(
            f"changes(): start (lake version {first}) is after end (lake version {last})",
            help="Give start <= end (start is exclusive, end inclusive); nothing was read.",
        )
    at_end = catalog.log.read(last)
    names = changed_tables(catalog, first, last)
    if tables is not None:
        wanted = set(tables)
        unknown = sorted(wanted - set(at_end.names()))
        if unknown:
            raise InvalidInputError(
                f"changes(): no table {', '.join(unknown)} at lake version {last}",
                help="Name tables of the lake (lake.list_tables()); nothing was read.",
            )
        names = names & wanted
    return {
        name: table_changes(table(name), first, last, net=net)
        for name in sorted(names)
        if at_end.get(name) is not None
    }


def changed_tables(catalog: TableCatalog, first: int, last: int) -> set[str]:
    """Names of the tables some version in ``(first, last]`` committed to (linear in the versions)."""
    names: set[str] = set()
    for version in catalog.log.history(first + 1, last + 1):
        record = version.transaction or {}
        names.update(str(c["table"]) for c in record.get("commits", []) if c.get("table"))
    if first < last:  # versions written without a record of their tables
        names.update(changes_back_to(catalog.log.read(last), catalog.log.read(first)))
    return names
