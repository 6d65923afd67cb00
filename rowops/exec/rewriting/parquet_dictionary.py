"""Which columns of a file pyarrow writes are dictionary-encoded: those where it pays, as parquet-mr
decides.

parquet-mr (Spark's and Iceberg's writer) starts every column chunk with a dictionary and falls back
to plain encoding when, at its first page, the dictionary plus the encoded indexes are not smaller
than the plain values (``DictionaryValuesWriter.isCompressionSatisfying``). pyarrow keeps the
dictionary until the dictionary page reaches its limit, so a small file of high-cardinality columns
(a MERGE's new rows: Case 2 writes ~3,600 rows per store_sales bucket) is dictionary-encoded where it
does not pay: such a file took 274 KB with every column dictionary-encoded, 198 KB with the columns
chosen here and 193 KB with none (Iceberg's files of the same rows: ~192 KB). The choice is made on
the first :data:`SAMPLE_ROWS` rows of a file, as parquet-mr's on its first page (pyarrow's 64 KiB
dictionary page, ``arrow_files.DICTIONARY_PAGE_BYTES``, holds 8,192 longs at most anyway).
"""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt

SAMPLE_ROWS = 1 << 12  # ~4 ms a file of store_sales' 23 columns (1 << 16: ~50 ms)


def dictionary_columns(table: pa.Table) -> list[str] | bool:
    """The top-level columns of ``table`` to dictionary-encode; True (pyarrow's default: every
    column) when some column is nested, whose leaves pyarrow names by path.

    >>> t = pa.table({"few": [1, 2] * 500, "many": list(range(1000)), "s": ["ab", "cd"] * 500})
    >>> dictionary_columns(t), dictionary_columns(pa.table({"n": [[1]]}))
    (['few', 's'], True)
    """
    if any(pt.is_nested(f.type) for f in table.schema):
        return True
    sample = table.slice(0, SAMPLE_ROWS)
    return [name for name, column in zip(sample.column_names, sample.columns, strict=True) if _pays(column)]


def _pays(column: pa.ChunkedArray) -> bool:
    """Whether the dictionary and the bit-packed indexes of ``column`` are smaller than its plain
    values (parquet-mr's criterion, on sizes before compression)."""
    values = pc.drop_null(column)
    count = len(values)
    if count == 0 or pt.is_boolean(values.type):
        return True
    distinct = pc.unique(values)
    width = _plain_width(values.type)
    if width is None:  # variable length: 4 bytes of length per value
        plain = pc.sum(pc.binary_length(values)).as_py() + 4 * count
        dictionary = pc.sum(pc.binary_length(distinct)).as_py() + 4 * len(distinct)
    else:
        plain, dictionary = width * count, width * len(distinct)
    return dictionary + count * max(len(distinct) - 1, 1).bit_length() / 8 < plain


def _plain_width(kind: pa.DataType) -> int | None:
    """Bytes of one plain-encoded value of ``kind`` (decimals stored as integers where they fit, as
    ``arrow_files.writer_options`` asks); None for variable-length values."""
    if pt.is_decimal(kind):
        precision = kind.precision
        return (
            4
            if precision <= 9
            else 8
            if precision <= 18
            else math.ceil(precision * math.log2(10) / 8 + 1 / 8)
        )
    if pt.is_string(kind) or pt.is_binary(kind) or pt.is_large_string(kind) or pt.is_large_binary(kind):
        return None
    if pt.is_fixed_size_binary(kind):
        return kind.byte_width
    return max(kind.bit_width // 8, 1)
