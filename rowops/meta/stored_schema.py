"""Reading files written with older schemas of a table (no Spark here).

Files keep the types they were written with: a widened column (int -> long, float -> double,
decimal(P,S) -> decimal(P',S)) is stored narrower in older files. :func:`promoted_ids` names such
columns of a table and :func:`stored_types` reads, from a data file's Parquet footer (cached: files are
immutable), the type it holds for each, so readers can read it as stored and cast.
"""

from __future__ import annotations

import pyarrow as pa
from pyiceberg.io import FileIO
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.types import DecimalType, DoubleType, FloatType, IntegerType, LongType, PrimitiveType

from rowops.meta.fileio import read_footer


def schema_of(metadata: TableMetadata, snapshot_id: int | None) -> Schema:
    """The schema to read a snapshot with: the one it was committed with (time travel reads the
    columns as they were then), the current schema for the current state."""
    snapshot = metadata.snapshot_by_id(snapshot_id) if snapshot_id is not None else None
    if snapshot is None or snapshot.schema_id is None:
        return metadata.schema()
    return metadata.schema_by_id(snapshot.schema_id) or metadata.schema()


def promoted_ids(metadata: TableMetadata) -> frozenset[int]:
    """Field ids whose type differs between schemas of the table (widened at some point)."""
    types: dict[int, set[str]] = {}
    for schema in metadata.schemas:
        for field in schema.fields:
            types.setdefault(field.field_id, set()).add(str(field.field_type))
    return frozenset(i for i, seen in types.items() if len(seen) > 1)


def defaulted_ids(metadata: TableMetadata) -> frozenset[int]:
    """Top-level field ids that have an ``initial-default`` in some schema of the table (format v3):
    files without them read the default, not NULL."""
    return frozenset(
        f.field_id for schema in metadata.schemas for f in schema.fields if f.initial_default is not None
    )


def stored_types(io: FileIO, path: str, ids: frozenset[int]) -> tuple[tuple[int, PrimitiveType], ...]:
    """The Iceberg types a Parquet file stores for the top-level field ``ids`` it has (from its footer)."""
    return tuple((i, t) for i, t in _footer_types(io, path)[0] if i in ids)


def absent_ids(io: FileIO, path: str, ids: frozenset[int]) -> frozenset[int]:
    """Which of the top-level field ``ids`` a Parquet file does not store (from its footer)."""
    return ids - _footer_types(io, path)[1]


_FooterTypes = tuple[tuple[tuple[int, PrimitiveType], ...], frozenset[int]]
_FOOTER_TYPES: dict[str, _FooterTypes] = {}  # files are immutable
_FOOTER_CACHE_SIZE = 65536


def _footer_types(io: FileIO, path: str) -> _FooterTypes:
    """(field id, Iceberg type) of the file's top-level primitive columns, and every top-level id."""
    cached = _FOOTER_TYPES.get(path)
    if cached is not None:
        return cached
    footer, _ = read_footer(io, path)
    out, ids = [], set()
    for field in footer.schema.to_arrow_schema():
        raw = (field.metadata or {}).get(b"PARQUET:field_id")
        stored = _from_arrow(field.type)
        if raw is not None:
            ids.add(int(raw))
        if raw is not None and stored is not None:
            out.append((int(raw), stored))
    if len(_FOOTER_TYPES) >= _FOOTER_CACHE_SIZE:
        _FOOTER_TYPES.clear()
    _FOOTER_TYPES[path] = (tuple(out), frozenset(ids))
    return _FOOTER_TYPES[path]


def _from_arrow(t: pa.DataType) -> PrimitiveType | None:
    if pa.types.is_int32(t) or pa.types.is_int16(t) or pa.types.is_int8(t):
        return IntegerType()
    if pa.types.is_int64(t):
        return LongType()
    if pa.types.is_float32(t):
        return FloatType()
    if pa.types.is_float64(t):
        return DoubleType()
    if pa.types.is_decimal(t):
        return DecimalType(t.precision, t.scale)
    return None
