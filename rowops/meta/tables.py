"""New table metadata: validated schema, partition spec, sort order and default properties (format v2,
or v3 on request: row lineage starts at ``next-row-id`` 0, position deletes become deletion vectors)."""

from __future__ import annotations

from collections.abc import Sequence

from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata, new_table_metadata
from pyiceberg.table.name_mapping import create_mapping_from_schema
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, NullOrder, SortDirection, SortField, SortOrder
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    VoidTransform,
    YearTransform,
)
from pyiceberg.types import (
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)

from rowops.errors import InvalidInputError, InvalidPartitionSpecError, NoSuchColumnError, RowOpsError
from rowops.request.partitioning import PartitionFieldSpec
from rowops.request.sorting import SortFieldSpec

FIRST_PARTITION_FIELD_ID = 1000
NAME_MAPPING = "schema.name-mapping.default"
FORMAT_VERSIONS = (2, 3)
DEFAULT_PROPERTIES = {
    "write.parquet.compression-codec": "zstd",
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
}

_TEMPORAL = (DateType, TimestampType, TimestamptzType)
_SOURCE_TYPES: dict[str, tuple[type[IcebergType], ...]] = {
    "bucket": (
        IntegerType,
        LongType,
        DecimalType,
        DateType,
        TimestampType,
        TimestamptzType,
        StringType,
        BinaryType,
    ),
    "truncate": (IntegerType, LongType, DecimalType, StringType, BinaryType),
    "year": _TEMPORAL,
    "month": _TEMPORAL,
    "day": _TEMPORAL,
    "hour": (TimestampType, TimestamptzType),
}


def iceberg_transform(field: PartitionFieldSpec) -> Transform:
    """The pyiceberg transform object for a parsed partition field."""
    simple: dict[str, Transform] = {
        "identity": IdentityTransform(),
        "year": YearTransform(),
        "month": MonthTransform(),
        "day": DayTransform(),
        "hour": HourTransform(),
        "void": VoidTransform(),
    }
    if field.transform == "bucket":
        return BucketTransform(num_buckets=field.param or 0)
    if field.transform == "truncate":
        return TruncateTransform(width=field.param or 0)
    return simple[field.transform]


def struct_path(schema: Schema, field_id: int) -> tuple[str, ...] | None:
    """The names leading to field ``field_id`` through the table's columns and their structs
    (``("s", "c1")``); None when the field sits inside a list or a map, or does not exist.

    >>> from pyiceberg.types import ListType
    >>> schema = Schema(NestedField(1, "s", StructType(NestedField(2, "c1", LongType()))),
    ...                 NestedField(3, "l", ListType(4, StructType(NestedField(5, "x", LongType())))))
    >>> struct_path(schema, 2), struct_path(schema, 5), struct_path(schema, 3)
    (('s', 'c1'), None, ('l',))
    """

    def walk(struct: StructType, prefix: tuple[str, ...]) -> tuple[str, ...] | None:
        for f in struct.fields:
            if f.field_id == field_id:
                return (*prefix, f.name)
            if isinstance(f.field_type, StructType):
                found = walk(f.field_type, (*prefix, f.name))
                if found is not None:
                    return found
        return None

    return walk(schema.as_struct(), ())


def layout_source(
    schema: Schema, name: str, what: str, missing: type[RowOpsError], invalid: type[RowOpsError]
) -> NestedField:
    """The column or struct field ``name`` (``s.c1``) that a partition or sort field takes its values
    from: a primitive reached through structs only (Iceberg allows no source inside a list or map).

    Raises:
        missing: no such column. invalid: a source inside a list or a map, or of a nested type. Each
            message begins with ``what``.
    """
    try:
        source = schema.find_field(name, case_sensitive=True)
    except ValueError:
        raise missing(
            f"{what}: no column {name!r} in the schema ({', '.join(schema.column_names)})"
        ) from None
    if struct_path(schema, source.field_id) is None:
        raise invalid(
            f"{what}: {name!r} is inside a list or a map; Iceberg takes partition and sort values from "
            "columns and fields of structs only"
        )
    if not source.field_type.is_primitive:
        raise invalid(f"{what}: {name!r} has the nested type {source.field_type}; a primitive is needed")
    return source


def build_partition_spec(schema: Schema, fields: Sequence[PartitionFieldSpec]) -> PartitionSpec:
    """Validate parsed partition fields against the schema and build the PartitionSpec.

    A source is a primitive column or a primitive field of a struct (``s.c1``), never inside a list or
    a map (Iceberg's rule).
    """
    partition_fields = []
    for index, field in enumerate(fields):
        what = f"Invalid partition field {field.transform}({field.source})"
        error = InvalidPartitionSpecError
        source = layout_source(schema, field.source, what, error, error)
        allowed = _SOURCE_TYPES.get(field.transform)
        if allowed is not None and not isinstance(source.field_type, allowed):
            raise InvalidPartitionSpecError(
                f"Invalid partition field {field.transform}({field.source}): cannot apply "
                f"{field.transform} to a column of type {source.field_type}"
            )
        if field.transform == "identity" and isinstance(source.field_type, FloatType | DoubleType):
            raise InvalidPartitionSpecError(
                f"Invalid partition field {field.source}: floating point identity"
            )
        partition_fields.append(
            PartitionField(
                source_id=source.field_id,
                field_id=FIRST_PARTITION_FIELD_ID + index,
                transform=iceberg_transform(field),
                name=field.field_name,
            )
        )
    return PartitionSpec(*partition_fields, spec_id=0)


def with_identifier(schema: Schema, identifier: Sequence[str]) -> Schema:
    """Return the schema with identifier fields set; identifier columns become required."""
    ids = []
    top_level = {f.name: f for f in schema.fields}
    for name in identifier:
        if name not in top_level:
            raise NoSuchColumnError(
                f"Identifier column {name!r} is not in the schema ({', '.join(schema.column_names)})",
                help="Key columns are top-level columns of the table; a nested field cannot be a key.",
            )
        check_key_type(name, top_level[name].field_type, "Identifier")
        ids.append(top_level[name].field_id)
    fields = []
    for f in schema.fields:
        if f.field_id in ids:
            if isinstance(f.field_type, FloatType | DoubleType):
                raise InvalidInputError(f"Identifier column {f.name!r} cannot be floating point")
            f = NestedField(f.field_id, f.name, f.field_type, required=True, doc=f.doc)
        fields.append(f)
    return Schema(*fields, schema_id=schema.schema_id, identifier_field_ids=ids)


def check_key_type(name: str, field_type: IcebergType, what: str = "Key") -> None:
    """Raise :class:`InvalidInputError` when a key column is a struct, list or map (Iceberg's
    identifier fields, equality deletes and rowops' key ranges need primitive values)."""
    if not field_type.is_primitive:
        raise InvalidInputError(
            f"{what} column {name!r} has the nested type {field_type}; key columns must be primitive",
            help="Use primitive top-level columns as keys (e.g. copy the nested field into its own column).",
        )


def build_sort_order(schema: Schema, fields: Sequence[SortFieldSpec]) -> SortOrder:
    """The table's sort order (identity transforms of columns and struct fields); unsorted when
    ``fields`` is empty."""
    if not fields:
        return UNSORTED_SORT_ORDER
    sort_fields = []
    for f in fields:
        source = layout_source(
            schema, f.column, f"Sort column {f.column!r}", NoSuchColumnError, InvalidInputError
        )
        sort_fields.append(
            SortField(
                source_id=source.field_id,
                transform=IdentityTransform(),
                direction=SortDirection.DESC if f.descending else SortDirection.ASC,
                null_order=NullOrder.NULLS_FIRST if f.nulls_first else NullOrder.NULLS_LAST,
            )
        )
    return SortOrder(*sort_fields, order_id=1)


def new_metadata(
    schema: Schema,
    partition_fields: Sequence[PartitionFieldSpec],
    identifier: Sequence[str],
    location: str,
    properties: dict[str, str] | None = None,
    sort_fields: Sequence[SortFieldSpec] = (),
    format_version: int = 2,
) -> TableMetadata:
    """Fresh table metadata of format version 2 (default) or 3 (no snapshot yet)."""
    if format_version not in FORMAT_VERSIONS or isinstance(format_version, bool):
        raise InvalidInputError(
            f"format_version must be one of {list(FORMAT_VERSIONS)}, not {format_version!r}",
            help="Create the table with format_version=2 (the default) or format_version=3 (deletion vectors).",
        )
    schema = with_identifier(schema, identifier)
    spec = build_partition_spec(schema, partition_fields)
    order = build_sort_order(schema, sort_fields)
    props = {**DEFAULT_PROPERTIES, **(properties or {}), "format-version": str(format_version)}
    metadata = new_table_metadata(schema, spec, order, location, props)
    if any(not f.field_type.is_primitive for f in metadata.schema().fields):
        mapping = create_mapping_from_schema(metadata.schema()).model_dump_json()
        metadata = metadata.model_copy(update={"properties": {**metadata.properties, NAME_MAPPING: mapping}})
    if format_version >= 3:  # v3 requires next-row-id; pyiceberg leaves it unset
        metadata = metadata.model_copy(update={"next_row_id": 0})
    return metadata
