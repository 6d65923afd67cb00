"""Iceberg schema evolution: add, widen, rename and drop columns, on pyiceberg's ``UpdateSchema``.

A change is computed on one table state (its current schema) and becomes a :class:`SchemaChange`:
pyiceberg's metadata updates (``AddSchemaUpdate`` with fresh field ids from ``last-column-id``,
``SetCurrentSchemaUpdate``, and the name mapping property when the table has one) plus the schema id
it was computed on. It applies to any newer state whose current schema is still that one (a data
commit in between is fine); after a concurrent schema change it is a ``schema-changed`` conflict.

Reading files written with older schemas: ``meta/stored_schema.py``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from pyiceberg.exceptions import ResolveError, ValidationError
from pyiceberg.schema import Schema, promote
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import TableRequirement, TableUpdate, update_table_metadata
from pyiceberg.table.update.schema import UpdateSchema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
)

from rowops.errors import (
    CommitConflictError,
    ConflictKind,
    InvalidSchemaChangeError,
    NoSuchColumnError,
)
from rowops.meta.defaults import check_columns, check_version, normalize

_SIMPLE: dict[str, IcebergType] = {
    "boolean": BooleanType(),
    "tinyint": IntegerType(),
    "byte": IntegerType(),
    "smallint": IntegerType(),
    "short": IntegerType(),
    "int": IntegerType(),
    "integer": IntegerType(),
    "bigint": LongType(),
    "long": LongType(),
    "float": FloatType(),
    "real": FloatType(),
    "double": DoubleType(),
    "string": StringType(),
    "binary": BinaryType(),
    "date": DateType(),
    "timestamp": TimestamptzType(),
    "timestamp_ltz": TimestamptzType(),
    "timestamp_ntz": TimestampType(),
}
_DECIMAL = re.compile(r"^(?:decimal|dec|numeric)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?$")
_TYPES_HELP = (
    "Use a Spark SQL type: boolean, int, bigint, float, double, decimal(P,S), string, binary, date, "
    "timestamp or timestamp_ntz."
)


_NOT_NULL = re.compile(r"\bnot\s+null\s*$", re.IGNORECASE)


def parse_type(text: object) -> IcebergType:
    """The Iceberg type of a Spark SQL type string (``"bigint"``, ``"decimal(12,2)"``).

    >>> parse_type("BIGINT"), parse_type(" decimal(12, 2) "), parse_type("decimal")
    (LongType(), DecimalType(precision=12, scale=2), DecimalType(precision=10, scale=0))
    """
    if not isinstance(text, str):
        raise InvalidSchemaChangeError(f"A column type must be a string, got {text!r}", help=_TYPES_HELP)
    spelled = text.strip().lower()
    if spelled in _SIMPLE:
        return _SIMPLE[spelled]
    match = _DECIMAL.match(spelled)
    if match is not None:
        precision = int(match.group(1) or 10)
        scale = int(match.group(2) or 0)
        if 1 <= precision <= 38 and scale <= precision:
            return DecimalType(precision, scale)
    raise InvalidSchemaChangeError(f"Unknown or unsupported column type {text!r}", help=_TYPES_HELP)


@dataclass(frozen=True)
class SchemaChange:
    """Metadata updates of one schema change, computed on the schema ``base_schema_id``."""

    operation: str  # add-columns, widen-column, rename-column, drop-column
    description: str
    base_schema_id: int
    updates: tuple[TableUpdate, ...]
    schema: Schema

    def conflict(self, metadata: TableMetadata) -> str | None:
        """Why the change cannot apply on ``metadata`` (a newer state of the table), or None."""
        if metadata.current_schema_id == self.base_schema_id:
            return None
        return (
            f"its schema changed concurrently (schema {self.base_schema_id} -> "
            f"{metadata.current_schema_id}) while applying: {self.description}"
        )

    def conflict_kind(self, metadata: TableMetadata) -> ConflictKind:
        """The kind of the conflict :meth:`conflict` reports on ``metadata``."""
        return ConflictKind.SCHEMA_CHANGED

    def conflict_error(self, reason: str, metadata: TableMetadata, table: str | None) -> CommitConflictError:
        """The error of the conflict :meth:`conflict` found on ``metadata``."""
        return schema_changed(reason, table)

    def requirements(self) -> tuple[TableRequirement, ...]:
        """What a pyiceberg catalog must check besides the table and its current schema (none here)."""
        return ()

    def apply(self, metadata: TableMetadata, location: str | None, table: str | None = None) -> TableMetadata:
        """The change applied on ``metadata``; ``CommitConflictError`` (``schema-changed``) when the
        current schema is no longer the one the change was computed on."""
        reason = self.conflict(metadata)
        if reason is not None:
            raise self.conflict_error(reason, metadata, table)
        return update_table_metadata(metadata, self.updates, metadata_location=location)


def schema_changed(what: str, table: str | None = None) -> CommitConflictError:
    """The conflict of a change computed on one schema meeting a table with another."""
    return CommitConflictError(
        f"Table {table or '(this table)'}: {what}",
        kind=ConflictKind.SCHEMA_CHANGED,
        table=table,
        help="Nothing was committed. Reload the table (table.schema) and run the operation again "
        "against the new schema.",
    )


class _Base:
    """The one thing pyiceberg's ``UpdateSchema`` needs of a transaction: the table's metadata."""

    def __init__(self, metadata: TableMetadata) -> None:
        self.table_metadata = metadata


def _update(metadata: TableMetadata) -> UpdateSchema:
    mapping = metadata.name_mapping()
    return UpdateSchema(_Base(metadata), case_sensitive=True, name_mapping=mapping)  # type: ignore[arg-type]


def _finish(metadata: TableMetadata, update: UpdateSchema, description: str) -> SchemaChange:
    try:
        updates, _ = update._commit()
        schema = update._apply()
    except (ValueError, ValidationError) as exc:
        raise InvalidSchemaChangeError(f"Cannot {description}: {exc}") from None
    operation = "-".join(description.split()[:2])  # add-columns, widen-column, ...
    return SchemaChange(operation, description, metadata.current_schema_id, tuple(updates), schema)


def _field(metadata: TableMetadata, name: object, what: str) -> str:
    schema = metadata.schema()
    if not isinstance(name, str) or name not in schema.column_names:
        raise NoSuchColumnError(
            f"Cannot {what}: no column {name!r} in the table (columns: {', '.join(schema.column_names)})",
            help="Name an existing column exactly as the table spells it (table.schema).",
        )
    return name


def _check_new_name(metadata: TableMetadata, name: object, what: str) -> str:
    if not isinstance(name, str) or not name.strip() or "." in name:
        raise InvalidSchemaChangeError(
            f"Cannot {what}: {name!r} is not a valid top-level column name",
            help="Use a non-empty name without dots (nested columns are not supported).",
        )
    taken = [c for c in metadata.schema().column_names if c.lower() == name.lower()]
    if taken:
        raise InvalidSchemaChangeError(
            f"Cannot {what}: the table already has a column {taken[0]!r}",
            help="Choose a name no column has (names are compared ignoring case, as Spark resolves them).",
        )
    return name


def _required(name: str, type_text: object, has_default: bool) -> bool:
    """Whether a new column is NOT NULL. Only with a default (format v3): the rows already written
    read its initial-default; without one they would have no value for it."""
    if not (isinstance(type_text, str) and _NOT_NULL.search(type_text)):
        return False
    if not has_default:
        raise InvalidSchemaChangeError(
            f"Cannot add column {name!r} as NOT NULL without a default: the rows already in the table "
            "have no value for it (Iceberg needs an initial default)",
            help='Add it nullable (e.g. "int"), then fill it with an UPDATE; or, on a format v3 table, '
            'give it a default (add_columns({...}, defaults={"c": value})). Nothing was changed.',
        )
    return True


def add_columns(
    metadata: TableMetadata, columns: Mapping[str, str], defaults: Mapping[str, object] | None = None
) -> SchemaChange:
    """New columns (name -> Spark SQL type, ``NOT NULL`` only with a default), with fresh field ids
    after ``last-column-id``; ``defaults`` (format v3) become their initial- and write-default."""
    if not isinstance(columns, Mapping) or not columns:
        raise InvalidSchemaChangeError(
            f"add_columns takes a non-empty mapping of column name to type, got {columns!r}",
            help='Pass e.g. {"discount": "decimal(12,2)"}.',
        )
    defaults = dict(defaults or {})
    if defaults:
        check_version(metadata.format_version, "add columns with defaults")
        unknown = [n for n in defaults if n not in columns]
        if unknown:
            raise InvalidSchemaChangeError(
                f"Cannot add columns: defaults for {unknown}, which are not among the new columns {list(columns)}"
            )
    update = _update(metadata)
    seen: set[str] = set()
    for name, type_text in columns.items():
        _check_new_name(metadata, name, "add column")
        if name.lower() in seen:
            raise InvalidSchemaChangeError(f"Cannot add column {name!r} twice")
        seen.add(name.lower())
        required = _required(name, type_text, name in defaults)
        field_type = parse_type(_NOT_NULL.sub("", type_text) if required else type_text)
        value = normalize(name, field_type, defaults[name]) if name in defaults else None
        update.add_column(name, field_type, required=required, default_value=value)
    return _finish(metadata, update, "add columns " + ", ".join(columns))


def set_write_default(metadata: TableMetadata, name: str, value: object) -> SchemaChange:
    """Change (or, with ``None``, remove) the write-default of a column (format v3); its
    initial-default, which rows of older files read, never changes."""
    check_version(metadata.format_version, "set a column default")
    _field(metadata, name, "set a column default")
    check_columns(metadata.schema(), {name: value}, "set a column default")
    field = metadata.schema().find_field(name)
    if value is None and field.required:
        raise InvalidSchemaChangeError(
            f"Cannot remove the write-default of the required column {name!r}",
            help="A NOT NULL column keeps a write-default so that writers without the column can fill it.",
        )
    normalized = None if value is None else normalize(name, field.field_type, value)
    update = _update(metadata)
    update._set_column_default_value(name, normalized)  # pyiceberg 0.12: no public setter
    return _finish(metadata, update, f"set default of column {name}")


def widen_column(metadata: TableMetadata, name: str, new_type: str) -> SchemaChange:
    """Promote a column's type (Iceberg's allowed promotions only)."""
    _field(metadata, name, "widen column")
    field = metadata.schema().find_field(name)
    target = parse_type(new_type)
    try:
        promote(field.field_type, target)
        if not _is_promotion(field.field_type, target):
            raise ResolveError(f"{field.field_type} -> {target}")
    except ResolveError:
        raise InvalidSchemaChangeError(
            f"Cannot widen column {name!r} from {field.field_type} to {target}",
            help="Iceberg allows int -> bigint, float -> double and decimal(P,S) -> decimal(P2,S) with P2 > P; "
            "anything else needs a new column (add_columns) filled by an UPDATE.",
        ) from None
    update = _update(metadata)
    update.update_column(name, field_type=target)
    return _finish(metadata, update, f"widen column {name} to {target}")


def _is_promotion(old: IcebergType, new: IcebergType) -> bool:
    """Iceberg v2's promotions exactly; pyiceberg 0.12's ``promote`` also lets a decimal change its
    scale (it compares the old scale with itself), which would reinterpret every stored value.

    >>> _is_promotion(DecimalType(10, 2), DecimalType(12, 2)), _is_promotion(DecimalType(10, 2), DecimalType(12, 3))
    (True, False)
    """
    if isinstance(old, DecimalType) and isinstance(new, DecimalType):
        return new.scale == old.scale and new.precision > old.precision
    return (isinstance(old, IntegerType) and isinstance(new, LongType)) or (
        isinstance(old, FloatType) and isinstance(new, DoubleType)
    )


def rename_column(metadata: TableMetadata, old: str, new: str) -> SchemaChange:
    """Rename a column; its field id (and so every file's values) stays."""
    _field(metadata, old, "rename column")
    if not (isinstance(new, str) and new.lower() == old.lower() and new != old):
        _check_new_name(metadata, new, f"rename column {old!r}")
    update = _update(metadata)
    update.rename_column(old, new)
    return _finish(metadata, update, f"rename column {old} to {new}")


def drop_column(metadata: TableMetadata, name: str) -> SchemaChange:
    """Drop a column that is neither an identifier (key) column nor a partition or sort source."""
    _field(metadata, name, "drop column")
    schema = metadata.schema()
    field_id = schema.find_field(name).field_id
    uses = []
    if field_id in schema.identifier_field_ids:
        uses.append("an identifier (key) column")
    if any(f.source_id == field_id for spec in metadata.partition_specs for f in spec.fields):
        uses.append("the source of a partition field")
    if any(f.source_id == field_id for order in metadata.sort_orders for f in order.fields):
        uses.append("a sort order column")
    if uses:
        raise InvalidSchemaChangeError(
            f"Cannot drop column {name!r}: it is {' and '.join(uses)}",
            help="Only plain columns can be dropped; keys, partition and sort columns define the table.",
        )
    if len(schema.fields) == 1:
        raise InvalidSchemaChangeError(f"Cannot drop column {name!r}: it is the table's only column")
    update = _update(metadata)
    update.delete_column(name)
    return _finish(metadata, update, f"drop column {name}")
