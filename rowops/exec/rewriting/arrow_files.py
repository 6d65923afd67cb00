"""One Parquet file's rows rewritten in pyarrow (no Spark): what stays of it, in its order, with new
versions of rows in place, written under the table's current schema by field id.

``exec/rewriting/arrow_rewrite.py`` runs these inside Spark tasks (``mapInArrow``); the functions here see one
file at a time, and a :class:`ParquetSink` can take the rows of several files (a group of small files
written into one).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema

from rowops.exec.reading.sorted_ints import has_repeats
from rowops.exec.rewriting.parquet_dictionary import dictionary_columns
from rowops.meta.fileio import filesystem
from rowops.meta.lineage import LAST_UPDATED_FIELD_ID, ROW_ID_FIELD_ID

FIELD_ID = b"PARQUET:field_id"
DICTIONARY_PAGE_BYTES = 64 * 1024
ROW_GROUP_ROWS = 1 << 20  # rows buffered per written row group
_BATCH_ROWS = 1 << 17
Erase = Callable[[pa.RecordBatch], "np.ndarray | None"]  # rows of a conformed batch its deletes remove
Lineage = tuple["int | None", int]  # a v3 data file's first_row_id (None: none) and data sequence number


def writer_options(properties: Mapping[str, str]) -> dict[str, object]:
    """pyarrow ``ParquetWriter`` options from the table's write properties (codec, level).

    Without ``write.parquet.compression-level``, zstd is written at level 3, parquet-mr's default (the
    level Spark's writer uses). parquet-mr drops dictionary encoding for a column chunk whose dictionary
    does not pay; pyarrow keeps it until the dictionary page reaches its limit: a 64 KiB limit gives
    files within 2% of Spark's size (a store_sales file: 6.46 MB by Spark, 7.67 MB by pyarrow's
    default 1 MiB limit, 6.57 MB with 64 KiB). pyarrow's copy of the Arrow schema in the footer
    (``ARROW:schema``) is not written: readers take the types from the Parquet schema and Iceberg's
    metadata, and for store_sales' 23 columns it is 4 KB, a third of a 50-row file (Case 1 writes 16
    such files per MERGE).

    >>> writer_options({})["compression_level"]
    3
    >>> writer_options({"write.parquet.compression-codec": "snappy"})["compression_level"] is None
    True
    """
    codec = properties.get("write.parquet.compression-codec", "zstd").lower()
    level = properties.get("write.parquet.compression-level")
    return {
        "compression": "none" if codec == "uncompressed" else codec,
        "compression_level": int(level) if level else (3 if codec == "zstd" else None),
        "store_decimal_as_integer": True,  # int32/int64 for precision <= 9/18, as Spark writes them
        "dictionary_pagesize_limit": DICTIONARY_PAGE_BYTES,
        "store_schema": False,
    }


def target_schema(schema: Schema) -> pa.Schema:
    return schema_to_pyarrow(schema, include_field_ids=True)


def field_indexes(schema: pa.Schema) -> dict[int, int]:
    """The position of each field of ``schema`` that carries an Iceberg field id, by that id."""
    return {
        int(field.metadata[FIELD_ID]): i
        for i, field in enumerate(schema)
        if field.metadata and FIELD_ID in field.metadata
    }


def conform(
    batch: pa.RecordBatch, target: pa.Schema, defaults: Mapping[int, Any] | None = None
) -> pa.RecordBatch:
    """``batch``'s columns matched to ``target``'s fields by field id, cast to their types; for a
    field the batch lacks its initial-default (``defaults``, by field id; format v3), else NULL.

    >>> fid = lambda i: {b"PARQUET:field_id": str(i).encode()}
    >>> src = pa.RecordBatch.from_arrays([pa.array([1, 2], pa.int32())], schema=pa.schema([pa.field("old", pa.int32(), metadata=fid(1))]))
    >>> out = conform(src, pa.schema([pa.field("k", pa.int64(), metadata=fid(1)), pa.field("v", pa.string(), metadata=fid(2))]))
    >>> out.to_pydict()
    {'k': [1, 2], 'v': [None, None]}
    """
    by_id = field_indexes(batch.schema)
    columns = []
    for field in target:
        i = by_id.get(int(field.metadata[FIELD_ID]))
        default = (defaults or {}).get(int(field.metadata[FIELD_ID]))
        if i is None and default is not None:
            columns.append(pa.repeat(pa.scalar(default, type=field.type), batch.num_rows))
        elif i is None:
            columns.append(pa.nulls(batch.num_rows, field.type))
        else:
            column = batch.column(i)
            columns.append(column if column.type == field.type else column.cast(field.type))
    return pa.RecordBatch.from_arrays(columns, schema=target)


@dataclass
class NewRows:
    """New versions of some rows of a file, each to be written at the position of its old version.

    Attributes:
        positions: the positions, distinct.
        rows: the rows (the written file's schema), in the order of ``positions``.
    """

    positions: np.ndarray
    rows: pa.Table
    placed: int = 0

    def __post_init__(self) -> None:
        order = np.argsort(self.positions, kind="stable")
        self.positions, self.rows = self.positions[order], self.rows.take(pa.array(order))
        if has_repeats(self.positions):
            raise ValueError("two new versions of one row reached a rewrite")

    def placed_in(self, kept: pa.Table, offset: int, rows: int, keep: np.ndarray | None) -> pa.Table:
        """``kept`` (what stays of the file's rows ``offset`` to ``offset + rows``; ``keep``: which
        of them, all if None) with the new rows of that range put in their positions."""
        lo, hi = np.searchsorted(self.positions, [offset, offset + rows])
        if hi == lo:
            return kept
        self.placed += int(hi - lo)
        at = np.arange(offset, offset + rows) if keep is None else np.flatnonzero(keep) + offset
        order = np.argsort(np.concatenate([at, self.positions[lo:hi]]), kind="stable")
        return pa.concat_tables([kept, self.rows.slice(lo, hi - lo)]).take(pa.array(order))


class ParquetSink:
    """A Parquet file written in row groups of up to :data:`ROW_GROUP_ROWS` rows, opened at its
    first row (no rows: no file)."""

    def __init__(self, io: FileIO, key: str, target: pa.Schema, options: Mapping[str, object]) -> None:
        self.key, self.target, self.options = key, target, options
        self.fs, self.path = filesystem(io, key)
        self.writer: pq.ParquetWriter | None = None
        self.buffered: list[pa.Table] = []
        self.written = 0

    def add(self, table: pa.Table) -> None:
        if table.num_rows:
            self.buffered.append(table)
        if sum(t.num_rows for t in self.buffered) >= ROW_GROUP_ROWS:
            self._flush()

    def close(self) -> int:
        """Write what is buffered and close; the number of rows written."""
        if self.buffered:
            self._flush()
        if self.writer is not None:
            self.writer.close()
        return self.written

    def _flush(self) -> None:
        table = pa.concat_tables(self.buffered)
        if self.writer is None:
            self.fs.create_dir(self.path.rsplit("/", 1)[0], recursive=True)
            options = {"use_dictionary": dictionary_columns(table), **self.options}
            self.writer = pq.ParquetWriter(self.path, self.target, filesystem=self.fs, **options)
        self.writer.write_table(table, row_group_size=max(table.num_rows, 1))
        self.written += table.num_rows
        self.buffered.clear()


def rewrite_file(
    io: FileIO,
    path: str,
    dropped: np.ndarray,
    target: pa.Schema,
    key: str,
    options: Mapping[str, object],
    new: NewRows | None = None,
    defaults: Mapping[int, Any] | None = None,
) -> int:
    """Write the rows of the Parquet file ``path`` but the (sorted, distinct) positions ``dropped``,
    and the ``new`` rows at their positions, to ``key``; returns the number of rows written (0: no
    file is written). Columns the file lacks get their initial-default (``defaults``) or NULL."""
    sink = ParquetSink(io, key, target, options)
    copy_file(io, path, dropped, target, sink, new, defaults)
    return sink.close()


def copy_file(
    io: FileIO,
    path: str,
    dropped: np.ndarray,
    target: pa.Schema,
    sink: ParquetSink,
    new: NewRows | None = None,
    defaults: Mapping[int, Any] | None = None,
    erase: Erase | None = None,
    replacing: Erase | None = None,
    lineage: Lineage | None = None,
) -> tuple[int, int]:
    """Add the rows of ``path`` but ``dropped``, those ``erase`` marks (rows equality deletes remove)
    and those ``replacing`` marks (rows whose key a rewrite by key replaces), with the ``new`` rows in
    place, to ``sink`` (:func:`rewrite_file`); returns the number of rows added and the number of
    rows ``replacing`` removed of those the others keep.

    ``lineage``: the file's (format v3), whose rows keep their ``_row_id`` and
    ``_last_updated_sequence_number`` (fields of ``target``): materialized, else inherited
    (:func:`with_lineage`)."""
    in_fs, in_path = filesystem(io, path)
    offset = added = replaced = 0
    with in_fs.open_input_file(in_path) as handle:
        for batch in pq.ParquetFile(handle).iter_batches(batch_size=_BATCH_ROWS):
            rows = batch.num_rows
            lo, hi = np.searchsorted(dropped, [offset, offset + rows])
            keep = None
            if hi > lo:
                keep = np.ones(rows, dtype=bool)
                keep[dropped[lo:hi] - offset] = False
            batch = conform(batch, target, defaults)  # keys the file lacks: their default, as reads see them
            if lineage is not None:
                batch = with_lineage(batch, lineage, offset)
            erased = erase(batch) if erase is not None else None
            if erased is not None and erased.any():
                keep = ~erased if keep is None else keep & ~erased
            hit = replacing(batch) if replacing is not None else None
            if hit is not None and hit.any():
                hit = hit if keep is None else hit & keep
                replaced += int(hit.sum())
                keep = ~hit if keep is None else keep & ~hit
            if keep is not None:
                batch = batch.filter(pa.array(keep))
            kept = pa.Table.from_batches([batch])
            if new is not None:
                kept = new.placed_in(kept, offset, rows, keep)
            offset += rows
            added += kept.num_rows
            sink.add(kept)
    if new is not None and new.placed != len(new.positions):
        raise ValueError(f"{len(new.positions) - new.placed} new rows have positions beyond {path}")
    return added, replaced


def with_lineage(batch: pa.RecordBatch, lineage: Lineage, offset: int) -> pa.RecordBatch:
    """``batch`` (conformed, rows ``offset`` on of a file of ``lineage``) with every row's lineage as
    Iceberg reads it: a NULL ``_row_id`` inherits first_row_id + position, a NULL
    ``_last_updated_sequence_number`` the file's data sequence number.

    >>> fid = lambda i: {b"PARQUET:field_id": str(i).encode()}
    >>> s = pa.schema([pa.field("_row_id", pa.int64(), metadata=fid(2147483540)),
    ...                pa.field("_last_updated_sequence_number", pa.int64(), metadata=fid(2147483539))])
    >>> b = pa.RecordBatch.from_arrays([pa.array([None, 7]), pa.array([None, 2])], schema=s)
    >>> with_lineage(b, (10, 5), offset=3).to_pydict()
    {'_row_id': [13, 7], '_last_updated_sequence_number': [5, 2]}
    """
    first, seq = lineage
    by_id = field_indexes(batch.schema)
    columns = batch.columns
    if first is not None:  # files of an upgraded v2 table have none: their rows have no id
        at = by_id[ROW_ID_FIELD_ID]
        inherited = pa.array(np.arange(first + offset, first + offset + batch.num_rows, dtype=np.int64))
        columns[at] = pc.coalesce(columns[at], inherited)
    at = by_id[LAST_UPDATED_FIELD_ID]
    columns[at] = pc.coalesce(columns[at], pa.scalar(seq, pa.int64()))
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)
