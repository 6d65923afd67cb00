"""Partition evolution and sort order changes, on pyiceberg's ``UpdateSpec`` and ``UpdateSortOrder``.

As :mod:`rowops.meta.evolution` does for schemas, a change is computed on one table state and becomes a
:class:`LayoutChange`: pyiceberg's metadata updates (``AddPartitionSpecUpdate`` with a new spec id and
fresh partition field ids after ``last-partition-id``, or a spec id reused when an identical spec
exists; ``SetDefaultSpecUpdate``; ``AddSortOrderUpdate`` / ``SetDefaultSortOrderUpdate``) plus the ids
it was computed on. It applies to any newer state whose default spec (or sort order) and schema are
still those: a data commit in between is fine, a concurrent spec or sort order change is a
``spec-changed`` conflict, a concurrent schema change ``schema-changed``.

Files keep the spec they were written with (format v2: a removed field is simply absent from the new
spec; v1 would keep it as ``void``). Writes after the change use the new default spec and sort order.

>>> from pyiceberg.schema import Schema
>>> from pyiceberg.types import LongType, NestedField, TimestamptzType
>>> from rowops.meta.tables import new_metadata
>>> schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "ts", TimestamptzType()))
>>> m = new_metadata(schema, [], [], "/tmp/t")
>>> change = update_spec(m, add=[("bucket(16, id)", None)])
>>> m2 = change.apply(m, None)
>>> m2.default_spec_id, [(f.name, f.field_id) for f in m2.spec().fields], m2.last_partition_id
(1, [('id_bucket_16', 1000)], 1000)
>>> m3 = update_spec(m2, add=[("day(ts)", "day")], drop=["id_bucket_16"]).apply(m2, None)
>>> m3.default_spec_id, [(f.name, f.field_id) for f in m3.spec().fields], m3.last_partition_id
(2, [('day', 1001)], 1001)
>>> change.conflict(m3) is not None, change.conflict_kind(m3).value
(True, 'spec-changed')
>>> m4 = replace_sort_order(m3, ["ts DESC", "id"]).apply(m3, None)
>>> m4.default_sort_order_id, [str(f) for f in m4.sort_order().fields]
(1, ['2 DESC NULLS LAST', '1 ASC NULLS FIRST'])
>>> replace_sort_order(m4, []).apply(m4, None).default_sort_order_id
0
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyiceberg.partitioning import (
    PartitionField,
    PartitionSpec,
    _PartitionNameGenerator,
    _visit_partition_field,
)
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.sorting import NullOrder
from pyiceberg.table.update import (
    AssertDefaultSortOrderId,
    AssertDefaultSpecId,
    AssertLastAssignedPartitionId,
    SetPropertiesUpdate,
    TableRequirement,
    TableUpdate,
)
from pyiceberg.table.update.sorting import UpdateSortOrder
from pyiceberg.table.update.spec import UpdateSpec
from pyiceberg.transforms import IdentityTransform, Transform

from rowops.errors import (
    CommitConflictError,
    ConflictKind,
    InvalidPartitionSpecError,
    InvalidSortOrderError,
)
from rowops.meta.evolution import SchemaChange, schema_changed
from rowops.meta.tables import build_partition_spec, build_sort_order
from rowops.request.partitioning import parse_partition_field
from rowops.request.sorting import parse_sort_by

SPEC, SORT_ORDER = "partition spec", "sort order"
DISTRIBUTION_MODES = ("none", "hash", "range")
_SPEC_HELP = (
    "Add a transform of an existing column (bucket(N, col), truncate(W, col), year/month/day/hour(col), "
    "identity col, void(col)); drop or rename a field of the current spec by its name or its transform "
    "(table.metadata.spec()). Nothing was changed."
)


@dataclass(frozen=True)
class LayoutChange(SchemaChange):
    """A partition spec or sort order change, computed on ``base_layout_id`` (the default spec id, or
    the default sort order id) and the schema ``base_schema_id``."""

    layout: str = SPEC
    base_layout_id: int = 0
    base_last_partition_id: int | None = None

    def _moved(self, metadata: TableMetadata) -> str | None:
        if self.layout == SPEC:
            now = metadata.default_spec_id
            moved = now != self.base_layout_id or metadata.last_partition_id != self.base_last_partition_id
        else:
            now = metadata.default_sort_order_id
            moved = now != self.base_layout_id
        if not moved:
            return None
        return (
            f"its {self.layout} changed concurrently ({self.layout} {self.base_layout_id} -> {now}) "
            f"while applying: {self.description}"
        )

    def conflict(self, metadata: TableMetadata) -> str | None:
        return self._moved(metadata) or super().conflict(metadata)

    def conflict_kind(self, metadata: TableMetadata) -> ConflictKind:
        return ConflictKind.SPEC_CHANGED if self._moved(metadata) else ConflictKind.SCHEMA_CHANGED

    def conflict_error(self, reason: str, metadata: TableMetadata, table: str | None) -> CommitConflictError:
        if not self._moved(metadata):
            return schema_changed(reason, table)
        return CommitConflictError(
            f"Table {table or '(this table)'}: {reason}",
            kind=ConflictKind.SPEC_CHANGED,
            table=table,
            help="Nothing was committed. Reload the table (table.metadata.spec(), "
            "table.metadata.sort_order()) and apply the change again if it is still wanted.",
        )

    def requirements(self) -> tuple[TableRequirement, ...]:
        if self.layout == SPEC:
            return (
                AssertDefaultSpecId(default_spec_id=self.base_layout_id),
                AssertLastAssignedPartitionId(last_assigned_partition_id=self.base_last_partition_id),
            )
        return (AssertDefaultSortOrderId(default_sort_order_id=self.base_layout_id),)


class _Base:
    """The one thing pyiceberg's ``UpdateSpec`` / ``UpdateSortOrder`` need of a transaction."""

    def __init__(self, metadata: TableMetadata) -> None:
        self.table_metadata = metadata


def _transform(metadata: TableMetadata, term: str, what: str) -> tuple[str, Transform[Any, Any]]:
    """The source column and transform of a partition term (validated against the schema)."""
    parsed = parse_partition_field(term)
    try:
        built = build_partition_spec(metadata.schema(), [parsed])
    except InvalidPartitionSpecError as exc:
        message = str(exc).split("\nHelp:")[0]
        raise InvalidPartitionSpecError(f"Cannot {what}: {message}", help=_SPEC_HELP) from None
    return parsed.source, built.fields[0].transform


def _nested_name(metadata: TableMetadata, source: str, transform: Transform[Any, Any]) -> str | None:
    """pyiceberg's default name of a new field, with a struct field source's dots as underscores
    (``s.c1_bucket_4`` -> ``s_c1_bucket_4``: partition names are Avro field names); None (pyiceberg's
    own name) for a column."""
    if "." not in source:
        return None
    probe = PartitionField(metadata.schema().find_field(source).field_id, 0, transform, "probe")
    return _visit_partition_field(metadata.schema(), probe, _PartitionNameGenerator()).replace(".", "_")


def _field_of(metadata: TableMetadata, term: str, what: str) -> PartitionField:
    """The field of the current spec that ``term`` names: by its name first, else by its transform."""
    spec = metadata.spec()
    for field in spec.fields:
        if field.name == term:
            return field
    try:
        source, transform = _transform(metadata, term, what)
    except InvalidPartitionSpecError:
        pass  # not a transform of a column either
    else:
        source_id = metadata.schema().find_field(source).field_id
        for field in spec.fields:
            if field.source_id == source_id and field.transform == transform:
                return field
    raise InvalidPartitionSpecError(
        f"Cannot {what}: the current partition spec has no field {term!r} (fields: {spec_text(metadata)})",
        help=_SPEC_HELP,
    )


def update_spec(
    metadata: TableMetadata,
    add: Sequence[str | tuple[str, str | None]] = (),
    drop: Sequence[str] = (),
    rename: Mapping[str, str] | None = None,
) -> LayoutChange:
    """A new default partition spec: fields of the current one dropped (by name or transform) and
    renamed, then ``add`` terms (``(term, name or None)``) appended.

    Raises:
        InvalidPartitionSpecError: an unknown column or field, a transform the column's type does not
            allow, a duplicate field or name, or nothing to change.
    """
    rename = dict(rename or {})
    if not (add or drop or rename):
        raise InvalidPartitionSpecError("update_spec needs a field to add, drop or rename", help=_SPEC_HELP)
    update = UpdateSpec(_Base(metadata), case_sensitive=True)  # type: ignore[arg-type]
    described = []
    try:
        for term in drop:
            field = _field_of(metadata, term, f"drop partition field {term!r}")
            update.remove_field(field.name)
            described.append(f"drop {field.name}")
        for old, new in rename.items():
            field = _field_of(metadata, old, f"rename partition field {old!r}")
            update.rename_field(field.name, new)
            described.append(f"rename {field.name} to {new}")
        for term, name in _terms(add):
            source, transform = _transform(metadata, term, f"add partition field {term!r}")
            update.add_field(source, transform, name or _nested_name(metadata, source, transform))
            described.append(f"add {term}" + (f" as {name}" if name else ""))
        names = [f.name for f in update._apply().fields]
        taken = sorted({n for n in names if names.count(n) > 1})
        if taken:  # pyiceberg checks names against columns, not against each other after a rename
            raise ValueError(f"partition field names must be unique, {taken} would repeat")
        updates, _ = update._commit()
    except ValueError as exc:
        what = ", ".join(described) or "change the partition spec"
        raise InvalidPartitionSpecError(f"Cannot {what}: {exc}", help=_SPEC_HELP) from None
    return LayoutChange(
        "update-spec",
        "partition spec: " + ", ".join(described),
        metadata.current_schema_id,
        tuple(updates),
        metadata.schema(),
        layout=SPEC,
        base_layout_id=metadata.default_spec_id,
        base_last_partition_id=metadata.last_partition_id,
    )


def _terms(add: Sequence[str | tuple[str, str | None]]) -> list[tuple[str, str | None]]:
    """``add`` entries as ``(term, name or None)``."""
    if isinstance(add, str):
        add = [add]
    out: list[tuple[str, str | None]] = []
    for entry in add:
        if isinstance(entry, str):
            out.append((entry, None))
        elif isinstance(entry, tuple) and len(entry) == 2 and all(isinstance(v, str | None) for v in entry):
            out.append((entry[0], entry[1]))
        else:
            raise InvalidPartitionSpecError(
                f"Cannot add partition field {entry!r}: expected a term or a (term, name) pair",
                help=_SPEC_HELP,
            )
    return out


def replace_sort_order(
    metadata: TableMetadata, sort_by: Sequence[str], distribution_mode: str | None = None
) -> LayoutChange:
    """A new default sort order (``[]``: unsorted) from ``sort_by`` entries (``"col [ASC|DESC] [NULLS
    FIRST|LAST]"``); with ``distribution_mode``, ``write.distribution-mode`` set in the same commit (as
    Iceberg's ``WRITE ORDERED BY`` / ``LOCALLY ORDERED BY`` / ``UNORDERED`` do).

    Raises:
        InvalidSortOrderError: an entry that does not parse, a repeated column.
        NoSuchColumnError: an unknown column.
    """
    if isinstance(sort_by, str) or not isinstance(sort_by, Sequence):
        raise InvalidSortOrderError(f"sort_by must be a list of entries, not {sort_by!r}")
    fields = parse_sort_by(list(sort_by))
    build_sort_order(metadata.schema(), fields)  # unknown columns -> NoSuchColumnError
    update = UpdateSortOrder(_Base(metadata), case_sensitive=True)  # type: ignore[arg-type]
    for f in fields:
        nulls = NullOrder.NULLS_FIRST if f.nulls_first else NullOrder.NULLS_LAST
        add = update.desc if f.descending else update.asc
        add(f.column, IdentityTransform(), nulls)
    updates: tuple[TableUpdate, ...] = tuple(update._commit()[0])
    if distribution_mode is not None:
        if distribution_mode not in DISTRIBUTION_MODES:
            raise InvalidSortOrderError(f"Unknown write.distribution-mode {distribution_mode!r}")
        updates += (SetPropertiesUpdate(updates={"write.distribution-mode": distribution_mode}),)
    text = ", ".join(sort_by) if fields else "unordered"
    return LayoutChange(
        "replace-sort-order",
        f"sort order: {text}",
        metadata.current_schema_id,
        updates,
        metadata.schema(),
        layout=SORT_ORDER,
        base_layout_id=metadata.default_sort_order_id,
    )


def spec_text(metadata: TableMetadata, spec: PartitionSpec | None = None) -> str:
    """A spec as ``name=transform(column)`` fields (``unpartitioned`` when it has none).

    >>> from pyiceberg.schema import Schema
    >>> from pyiceberg.types import LongType, NestedField
    >>> from rowops.meta.tables import new_metadata
    >>> spec_text(new_metadata(Schema(NestedField(1, "id", LongType())), [], [], "/tmp/t"))
    'unpartitioned'
    """
    spec = spec if spec is not None else metadata.spec()
    schema = metadata.schema()
    fields = [f"{f.name}={f.transform}({schema.find_column_name(f.source_id)})" for f in spec.fields]
    return ", ".join(fields) or "unpartitioned"
