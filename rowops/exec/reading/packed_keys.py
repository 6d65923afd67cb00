"""Integer equality keys packed into one long in Spark SQL, and the prefix probe in front of them.

:func:`packed_key` is :class:`~rowops.exec.rewriting.arrow_deletes.KeyCodec`'s ``encode`` as one Spark SQL
expression: Spark's hash joins look a single long up faster than a row of columns.

A probe of a large key set costs a cache miss per row: Spark hashes the long into a table of two
longs per slot (16 MiB of slots, plus the rows, for the 579K keys of one Case 2 micro-batch at
SF 10), and a packed key scatters rows that share a column over the whole table. Tables are often
clustered by their leading key column (the rows of one ticket, one order, one account sit
together), so rows first probe the distinct values of the widest key column (:func:`prefix_index`),
a lookup consecutive rows repeat, and only rows whose value some delete has probe the packed keys
(a NULL join key skips the lookup).
Measured on a read of the SF 10 table after one micro-batch of equality deletes (29M rows; no
distinct count, medians of three): 4.3 s -> 3.0 s, against 1.0 s without deletes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from rowops.exec.rewriting.arrow_deletes import KeyCodec

_OUTSIDE = "an equality delete key lies outside the bounds in its file metrics"
PREFIX_MIN_KEYS = 1 << 18  # below, the key table stays in cache and every probe is cheap
PREFIX_MIN_ROWS_PER_KEY = 16  # below, building the prefix costs more than the probes it saves


def packed_key(codec: KeyCodec, names: Sequence[str], strict: bool) -> Column:
    """``codec.encode`` of the columns ``names`` as one Spark SQL expression: the key packed into one
    long (a single-long hash key, which Spark's hash joins look up faster than a row of columns). A
    value outside the codec's range gives NULL (it matches no delete), or an error when ``strict`` (a
    delete key outside its file's bounds). One ``F.expr``: built from Column calls, the expression cost
    ~40 JVM round trips per key set and join, a quarter of building a read after ten generations.
    """
    terms, scale = [], 1
    for name, low, width in zip(names, codec.lows, codec.widths, strict=True):
        value = f"CAST(`{name.replace('`', '``')}` AS BIGINT)"
        outside = f"CAST(raise_error('{_OUTSIDE}') AS BIGINT)" if strict else "NULL"
        slot = (
            f"CASE WHEN {value} IS NULL THEN 0 WHEN {value} BETWEEN ({low}) AND ({low + width - 2})"
            f" THEN {value} - ({low}) + 1 ELSE {outside} END"
        )
        terms.append(f"({slot}) * {scale}")
        scale *= width
    return F.expr(f"CAST({' + '.join(terms)} AS BIGINT)")


def prefix_index(codec: KeyCodec | None, keys: int, rows: int) -> int | None:
    """The key column ``rows`` probe first (the widest: its hits filter most), or None when a probe of
    the ``keys`` is cheap already (one column, fewer than :data:`PREFIX_MIN_KEYS` keys) or too few
    rows probe for the prefix's own broadcast to pay (fewer than :data:`PREFIX_MIN_ROWS_PER_KEY` per
    key). Measured reads of the SF 10 table (29M rows; no distinct count, medians of three; without
    -> with a prefix) after one, three, five and ten micro-batches (579K keys each; 50, 17, 10 and 5
    rows per key): 4.3 -> 3.0, 6.2 -> 5.5, 7.2 -> 7.7, 10.7 -> 12.0 s; at SF 1 after three (174K
    keys, 17 rows per key) 1.2 -> 1.3 s warm and 3.6-3.8 -> 4.1 s for the first read, after ten
    (580K keys, 5 rows per key) 1.8 -> 2.2 s.

    >>> wide = KeyCodec((1, 2), (0, 0), (1 << 25, 1 << 17))
    >>> prefix_index(wide, 600_000, 29_000_000)
    0
    >>> prefix_index(wide, 60_000, 29_000_000), prefix_index(wide, 6_000_000, 29_000_000)
    (None, None)
    >>> prefix_index(KeyCodec((1,), (0,), (1 << 25,)), 600_000, 29_000_000) is None
    True
    """
    if (
        codec is None
        or len(codec.widths) < 2
        or keys < PREFIX_MIN_KEYS
        or rows < PREFIX_MIN_ROWS_PER_KEY * keys
    ):
        return None
    return max(range(len(codec.widths)), key=lambda i: codec.widths[i])


def prefix_of_code(codec: KeyCodec, index: int, code: str) -> Column:
    """Column ``index``'s slot in the packed code held by the column ``code`` (NULL stays NULL): the
    slot :func:`prefix_slot` computes from the column itself."""
    scale = math.prod(codec.widths[:index])
    return F.expr(f"`{code}` div {scale} % {codec.widths[index]}")


def prefix_slot(codec: KeyCodec, names: Sequence[str], index: int) -> Column:
    """Column ``index``'s slot of a row: 0 for NULL, NULL outside the codec's range (no delete has it)."""
    column = KeyCodec((codec.field_ids[index],), (codec.lows[index],), (codec.widths[index],))
    return packed_key(column, [names[index]], strict=False)
