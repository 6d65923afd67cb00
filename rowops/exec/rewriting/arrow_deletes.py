"""Equality deletes applied inside an Arrow rewrite task, without a Spark join.

A copy-on-write rewrite in Arrow (``exec/rewriting/arrow_rewrite.py``) reads every row of a file anyway; the rows
the file's equality deletes remove can be found there too, instead of by a key-only Spark scan of the
file semi-joined with every key (``equality_deletes.equality_deleted_positions``), which at SF 10 probed 29M rows
against a hash table of millions of keys. Here the task reads the delete files that apply to the file
(pyarrow, through the lake's FileIO), packs each key into one int64 code and looks the file's rows up
in the sorted codes (numpy ``searchsorted``: no per-batch hash table to rebuild).

Packing needs integer key columns (``int``/``long``) and bounds: the driver builds a :class:`KeyCodec`
per set of equality columns from the delete files' metrics (lower/upper bounds, which Iceberg keeps
exact for integers), one slot per value in range plus one for NULL (equality deletes match NULL to
NULL). Files whose deletes have other key types, no bounds, or a key space over 2^62 codes are left to
the Spark path. A delete value outside its file's bounds is an error, never a silently kept row.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.conversions import from_bytes
from pyiceberg.io import FileIO
from pyiceberg.schema import Schema
from pyiceberg.types import IntegerType, LongType

from rowops.exec.reading.sorted_ints import sorted_distinct
from rowops.exec.rewriting.arrow_files import field_indexes
from rowops.meta.delete_index import DeleteIndex
from rowops.meta.fileio import filesystem
from rowops.meta.files import LiveFile

MAX_CODES = 1 << 62
Columns = tuple[list[np.ndarray], list["np.ndarray | None"]]  # int64 values, NULL masks


@dataclass(frozen=True)
class KeyCodec:
    """Packs the values of integer key columns into one int64 per row.

    Attributes:
        field_ids: the equality columns, by field id.
        lows: the smallest non-NULL value of each column in the deletes.
        widths: slots per column: the values ``low..high`` plus one for NULL (slot 0).

    >>> codec = KeyCodec((1, 2), (10, 0), (4, 3))  # column 1: 10..12, column 2: 0..1
    >>> codec.encode([np.array([10, 12, 13]), np.array([1, 0, 0])], [None, np.array([False, False, True])])
    array([ 9,  7, -1])
    """

    field_ids: tuple[int, ...]
    lows: tuple[int, ...]
    widths: tuple[int, ...]

    def encode(self, values: Sequence[np.ndarray], nulls: Sequence[np.ndarray | None]) -> np.ndarray:
        """The code of each row (-1: a value outside the deletes' range, so no delete matches it)."""
        codes = np.zeros(len(values[0]), dtype=np.int64)
        valid = np.ones(len(values[0]), dtype=bool)
        scale = 1
        for v, null, low, width in zip(values, nulls, self.lows, self.widths, strict=True):
            slot = v.astype(np.int64) - low + 1
            valid &= (slot >= 1) & (slot < width) if null is None else null | ((slot >= 1) & (slot < width))
            if null is not None:
                slot = np.where(null, 0, slot)
            codes += slot * scale
            scale *= width
        return np.where(valid, codes, -1)


@dataclass(frozen=True)
class KeyDeletes:
    """The equality delete files with the same equality columns that apply to one data file."""

    codec: KeyCodec
    paths: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class KeyCodes:
    """Keys given as their codes (sorted, distinct), not as delete files: the source keys of a rewrite
    by key, collected before any file is written (``exec/rewriting/keyed_rewrite.py``)."""

    codec: KeyCodec
    codes: np.ndarray
    rows: int  # the keys collected, before deduplication (``exec/reading/key_codes.py``)


Keys = KeyDeletes | KeyCodes


def key_deletes(schema: Schema, deletes: Sequence[LiveFile]) -> list[KeyDeletes] | None:
    """The deletes of one data file as :class:`KeyDeletes` (one per set of equality columns), or None
    when some cannot be applied in a task (non-integer keys, missing bounds, too many codes)."""
    by_ids: dict[tuple[int, ...], list[LiveFile]] = {}
    for d in deletes:
        by_ids.setdefault(d.equality_ids, []).append(d)
    result = []
    for ids, files in sorted(by_ids.items()):
        codec = key_codec(schema, ids, files)
        if codec is None:
            return None
        result.append(KeyDeletes(codec, tuple(sorted(f.path for f in files))))
    return result


def tasks_key_deletes(
    schema: Schema, index: DeleteIndex, files: Sequence[LiveFile]
) -> dict[str, list[KeyDeletes]]:
    """The files of ``files`` under equality deletes that a rewrite task can apply itself, with them."""
    found = {}
    for f in files:
        keyed = key_deletes(schema, index.equality_deletes_of(f))
        if keyed:  # None: not packable; []: no equality delete applies
            found[f.path] = keyed
    return found


def key_codec(schema: Schema, ids: tuple[int, ...], files: Sequence[LiveFile]) -> KeyCodec | None:
    """The codec of the equality columns ``ids`` over the keys of delete ``files`` (None: a column is
    not an integer, a file lacks bounds, or the key space exceeds :data:`MAX_CODES`)."""
    spans = []
    for field_id in ids:
        if not integer_column(schema, field_id):
            return None
        known = []
        for d in files:
            lo = (d.data_file.lower_bounds or {}).get(field_id)
            hi = (d.data_file.upper_bounds or {}).get(field_id)
            if lo is not None and hi is not None:
                known.append((_integer(lo), _integer(hi)))
            elif (d.data_file.null_value_counts or {}).get(field_id) != d.record_count:
                return None  # no bounds, and not a column of NULLs only
        low = min((lo for lo, _ in known), default=0)
        spans.append((low, max((hi for _, hi in known), default=low - 1)))
    return codec_over(ids, spans)


def integer_column(schema: Schema, field: int | str) -> bool:
    """Whether the column ``field`` (a field id or a name) is an ``int`` or a ``long``."""
    return isinstance(schema.find_field(field).field_type, (IntegerType, LongType))


def codec_over(ids: tuple[int, ...], spans: Sequence[tuple[int, int]]) -> KeyCodec | None:
    """The codec of the columns ``ids`` whose non-NULL values lie in the inclusive ``spans``
    (None: the key space exceeds :data:`MAX_CODES`).

    Each span is widened to an aligned power of two (:func:`aligned_span`) where the key space
    allows: the codec is Spark SQL text in every read under equality deletes
    (``packed_keys.packed_key``), and Spark compiles generated code again for every new
    constant in it. The keys of later batches of a table mostly fall in the same aligned spans, so a
    read after a new batch reuses the code compiled for the one before (4 compilations less per read).

    >>> codec_over((1, 2), [(10, 12), (0, 1)])
    KeyCodec(field_ids=(1, 2), lows=(10, 0), widths=(4, 4))
    >>> codec_over((1, 2), [(6, 479_984), (1, 18_000)]) == codec_over((1, 2), [(3, 479_990), (2, 17_999)])
    True
    >>> codec_over((1,), [(0, 1 << 62)]) is None
    True
    >>> codec_over((1, 2), [(0, 1 << 41), (1, (1 << 20) - 1)]).widths  # aligned would exceed 2^62: exact
    (2199023255554, 1048576)
    """
    for candidate in (
        [aligned_span(low, high) for low, high in spans],
        [(lo, hi - lo + 2) for lo, hi in spans],
    ):
        if math.prod(width for _, width in candidate) <= MAX_CODES:
            return KeyCodec(ids, tuple(low for low, _ in candidate), tuple(w for _, w in candidate))
    return None


def aligned_span(low: int, high: int) -> tuple[int, int]:
    """``(start, width)`` of a codec column holding ``low .. high`` in its value slots ``start ..
    start + width - 2`` (slot 0 is NULL's): ``start`` is ``low`` rounded down to the largest power of
    two not above the span's size, ``width`` a power of two (at most 4x the exact width); an empty
    span (``high < low``) keeps its one NULL slot.

    >>> aligned_span(6, 479_984), aligned_span(3, 479_990), aligned_span(1, 18_000)
    ((0, 524288), (0, 524288), (0, 32768))
    >>> aligned_span(-3, 3), aligned_span(10, 12), aligned_span(5, 4)
    ((-4, 16), (10, 4), (5, 1))
    """
    if high < low:
        return low, high - low + 2
    grain = 1 << ((high - low + 1).bit_length() - 1)
    start = (low // grain) * grain
    return start, 1 << (high - start + 1).bit_length()


def _integer(raw: bytes) -> int:
    """An int or long bound (a file written before an int -> long promotion keeps 4-byte bounds)."""
    return int(from_bytes(IntegerType() if len(raw) == 4 else LongType(), raw))


class DeletedKeys:
    """Looks rows up in the keys of equality delete files. A task reads each delete file once (the
    files of one partition share most of their deletes) and sorts the codes of each set once."""

    def __init__(self, io: FileIO) -> None:
        self.io = io
        self.codes: dict[tuple[KeyCodec, tuple[str, ...]], np.ndarray] = {}
        self.keys: dict[tuple[str, tuple[int, ...]], Columns] = {}

    def mask(self, batch: pa.RecordBatch, deletes: Sequence[Keys]) -> np.ndarray | None:
        """Which rows of ``batch`` (columns with field ids) some delete of ``deletes`` removes."""
        hit: np.ndarray | None = None
        for d in deletes:
            codes = self._codes(d)
            if not len(codes):
                continue
            rows = d.codec.encode(*_columns(batch, d.codec.field_ids))
            at = np.minimum(np.searchsorted(codes, rows), len(codes) - 1)
            found = (codes[at] == rows) & (rows >= 0)
            hit = found if hit is None else hit | found
        return hit

    def _codes(self, deletes: Keys) -> np.ndarray:
        if isinstance(deletes, KeyCodes):
            return deletes.codes
        key = (deletes.codec, deletes.paths)
        if key not in self.codes:
            parts = [self._file_codes(path, deletes.codec) for path in deletes.paths]
            self.codes[key] = sorted_distinct(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
        return self.codes[key]

    def _file_codes(self, path: str, codec: KeyCodec) -> np.ndarray:
        if (path, codec.field_ids) not in self.keys:
            fs, local = filesystem(self.io, path)
            with fs.open_input_file(local) as handle:
                self.keys[(path, codec.field_ids)] = _columns(pq.read_table(handle), codec.field_ids)
        codes = codec.encode(*self.keys[(path, codec.field_ids)])
        if (codes < 0).any():
            raise ValueError(f"equality delete file {path} holds keys outside the bounds of its metrics")
        return codes


def row_codes(codec: KeyCodec, data: pa.RecordBatch | pa.Table) -> np.ndarray:
    """The code of each row of ``data`` (columns with field ids) under ``codec`` (-1: out of range)."""
    return codec.encode(*_columns(data, codec.field_ids))


def _columns(data: pa.RecordBatch | pa.Table, field_ids: Sequence[int]) -> Columns:
    """The columns with ``field_ids`` as int64 arrays (NULLs as 0) and their NULL masks."""
    by_id = field_indexes(data.schema)
    values, nulls = [], []
    for field_id in field_ids:
        column = data.column(by_id[field_id])
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        null = column.is_null().to_numpy(zero_copy_only=False) if column.null_count else None
        values.append(column.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64))
        nulls.append(null)
    return values, nulls
