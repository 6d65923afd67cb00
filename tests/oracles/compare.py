"""Reader-independent row comparison: canonical Python values, sorted, diffed as multisets.

Readers disagree on representation, not content: DuckDB labels ``timestamptz`` as ``Etc/UTC``,
Spark as ``UTC``; nanosecond vs microsecond units; ``float32`` vs ``float``.  ``canonical_rows``
removes those differences so that equal tables compare equal:

>>> t = pa.table({"k": [2, None, 1], "ts": pa.array([0, 1000, 2000], pa.timestamp("ns", tz="Etc/UTC"))})
>>> canonical_rows(t, ["k", "ts"])[0]
(1, datetime.datetime(1970, 1, 1, 0, 0, 0, 2, tzinfo=datetime.timezone.utc))
>>> canonical_rows(t, ["k"])
[(1,), (2,), (None,)]
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

Row = tuple[Any, ...]
_NAN = math.nan  # one shared object: tuples compare items by identity first, so NaN == NaN in rows
_SHOWN = 5


def canonical_value(value: Any) -> Any:
    """Normalize one Python value: aware datetimes to UTC, NaN to one object, lists/structs to tuples."""
    if isinstance(value, float):
        return _NAN if math.isnan(value) else value
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.timezone.utc) if value.tzinfo is not None else value
    if isinstance(value, (list, tuple)):
        return tuple(canonical_value(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, canonical_value(v)) for k, v in value.items()))
    return value


def _to_micros(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Timestamps to microseconds (UTC-labelled when zoned); raises rather than truncate nanoseconds."""
    if pa.types.is_timestamp(column.type):
        return pc.cast(column, pa.timestamp("us", tz="UTC" if column.type.tz else None))
    return column


def _sort_key(value: Any) -> tuple[Any, ...]:
    if value is None:
        return (2,)
    if value is _NAN:
        return (1,)
    if isinstance(value, tuple):
        return (0, tuple(_sort_key(v) for v in value))
    return (0, value)


def sort_rows(rows: Iterable[Row]) -> list[Row]:
    """Sort rows with ``None`` last and NaN after numbers; fall back to ``repr`` for mixed types."""
    rows = list(rows)
    try:
        return sorted(rows, key=_sort_key)
    except TypeError:
        return sorted(rows, key=repr)


def canonical_rows(table: pa.Table, columns: Sequence[str]) -> list[Row]:
    """The rows of ``columns`` as sorted tuples of canonical Python values."""
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise KeyError(f"columns {missing} not in table columns {table.column_names}")
    values = [_to_micros(table.column(c)).to_pylist() for c in columns]
    return sort_rows(tuple(canonical_value(v) for v in row) for row in zip(*values, strict=True))


def _as_rows(rows: Iterable[Row] | pa.Table, columns: Sequence[str]) -> list[Row]:
    if isinstance(rows, pa.Table):
        return canonical_rows(rows, columns)
    return sort_rows(tuple(canonical_value(v) for v in row) for row in rows)


def assert_same_rows(
    expected: Iterable[Row] | pa.Table, actual: pa.Table, columns: Sequence[str], label: str
) -> None:
    """Assert ``actual`` holds exactly the ``expected`` rows (as a multiset) over ``columns``."""
    want, got = _as_rows(expected, columns), _as_rows(actual, columns)
    if want == got:
        return
    missing, extra = Counter(want) - Counter(got), Counter(got) - Counter(want)
    n_missing, n_extra = sum(missing.values()), sum(extra.values())
    lines = [
        f"{label}: rows differ over {list(columns)} "
        f"(expected {len(want)}, got {len(got)}; {n_missing} missing, {n_extra} extra)"
    ]
    for title, diff in (("missing", missing), ("extra", extra)):
        shown = sort_rows(diff.elements())[:_SHOWN]
        lines += [f"  {title} (first {len(shown)}):", *(f"    {row!r}" for row in shown)]
    raise AssertionError("\n".join(lines))
