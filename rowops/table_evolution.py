"""Schema, partition spec and sort order evolution of a table: each change one commit (a mixin of
``rowops.table.Table``; the changes themselves are ``meta/evolution.py`` and ``meta/spec_evolution.py``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pyiceberg.table.metadata import TableMetadata

from rowops.catalog.tables import LoadedTable, TableScope
from rowops.meta import evolution, spec_evolution
from rowops.meta.evolution import SchemaChange
from rowops.request.inputs import checked_call


class TableEvolution:
    """The evolution methods of a table handle; ``load`` and ``scope`` are the handle's."""

    scope: TableScope

    def load(self) -> LoadedTable:
        raise NotImplementedError

    # -- schema evolution (one commit each; field ids preserved; see meta/evolution.py) ------------
    @checked_call
    def add_columns(self, columns: Mapping[str, str], defaults: Mapping[str, object] | None = None) -> None:
        """Add columns, e.g. ``{"discount": "decimal(12,2)"}`` (name -> Spark SQL type).

        Rows written before read NULL in them, or, on a format v3 table, the column's default:
        ``defaults={"discount": Decimal("0.00")}`` sets its Iceberg ``initial-default`` (what older rows
        read) and ``write-default`` (what writes that do not give the column store, and
        ``SET discount = DEFAULT``). A column with a default may be ``NOT NULL`` (``"int NOT NULL"``).
        Raises ``InvalidSchemaChangeError`` for a name the table has (ignoring case), an unknown type,
        or defaults on a v1/v2 table; the table is then unchanged.
        """
        self._evolve(lambda m: evolution.add_columns(m, columns, defaults))

    @checked_call
    def set_default(self, name: str, value: object) -> None:
        """Set (``None``: remove) the write-default of a column of a format v3 table: what writes that
        do not give the column store from now on. Its initial-default (what rows written before the
        column existed read) never changes, as the Iceberg spec requires."""
        self._evolve(lambda m: evolution.set_write_default(m, name, value))

    @checked_call
    def widen_column(self, name: str, new_type: str) -> None:
        """Promote a column's type: int -> bigint, float -> double, decimal(P,S) -> decimal(P2,S) with
        P2 > P (Iceberg's promotions); old files are read with their type and cast."""
        self._evolve(lambda m: evolution.widen_column(m, name, new_type))

    @checked_call
    def rename_column(self, old: str, new: str) -> None:
        """Rename a column; its field id, and so the values in every file, stay."""
        self._evolve(lambda m: evolution.rename_column(m, old, new))

    @checked_call
    def drop_column(self, name: str) -> None:
        """Drop a column that is not a key (identifier), partition source or sort column."""
        self._evolve(lambda m: evolution.drop_column(m, name))

    def _evolve(self, change: Callable[[TableMetadata], SchemaChange]) -> None:
        loaded = self.load()
        self.scope.evolve_schema(loaded, change(loaded.metadata))

    # -- partition and sort order evolution (one commit each; see meta/spec_evolution.py) ---------
    @checked_call
    def update_spec(
        self,
        add: Sequence[str | tuple[str, str | None]] = (),
        drop: Sequence[str] = (),
        rename: Mapping[str, str] | None = None,
    ) -> None:
        """Evolve the partition spec in one commit: drop fields (by name, or by transform such as
        ``"bucket(16, id)"``), rename fields, add ``"bucket(16, id)"`` / ``"day(ts)"`` / ``"col"`` terms
        (or ``(term, name)`` pairs). Files already written keep their spec; later writes use the new one.

        Raises:
            InvalidPartitionSpecError: unknown column or field, a transform the column's type does not
                allow, a duplicate (the table is then unchanged).
            CommitConflictError: ``spec-changed`` when another writer changed the spec meanwhile.
        """
        drops = [drop] if isinstance(drop, str) else list(drop)
        self._evolve(lambda m: spec_evolution.update_spec(m, add, drops, rename))

    def add_partition_field(self, term: str, name: str | None = None) -> None:
        """Add a partition field, e.g. ``"bucket(16, id)"``, ``"day(ts)"`` or ``"region"``."""
        self.update_spec(add=[(term, name) if name else term])

    def drop_partition_field(self, term: str) -> None:
        """Remove a partition field of the current spec (its name, or its transform)."""
        self.update_spec(drop=[term])

    def replace_partition_field(self, old: str, new: str, name: str | None = None) -> None:
        """Drop ``old`` and add ``new`` in one commit (e.g. ``"day(ts)"`` -> ``"hour(ts)"``)."""
        self.update_spec(add=[(new, name) if name else new], drop=[old])

    def rename_partition_field(self, old: str, new: str) -> None:
        """Rename a partition field of the current spec."""
        self.update_spec(rename={old: new})

    @checked_call
    def replace_sort_order(self, sort_by: Sequence[str], distribution_mode: str | None = None) -> None:
        """Set the table's sort order (``["ts DESC", "id"]``; ``[]``: unsorted); later writes are sorted
        by it, files already written keep theirs. ``distribution_mode`` (``none``, ``hash``, ``range``)
        also sets ``write.distribution-mode`` in the same commit."""
        self._evolve(lambda m: spec_evolution.replace_sort_order(m, sort_by, distribution_mode))
