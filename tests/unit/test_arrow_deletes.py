"""Equality deletes applied in a rewrite task (``exec/rewriting/arrow_deletes.py``), without Spark: packed keys
match exactly what a null-safe comparison of the key columns matches, across delete files."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rowops.exec.rewriting.arrow_deletes import DeletedKeys, KeyCodec, KeyDeletes, aligned_span, codec_over
from rowops.meta.fileio import make_io

FIELD_ID = b"PARQUET:field_id"


def _schema(kinds: tuple[pa.DataType, pa.DataType] = (pa.int32(), pa.int64())) -> pa.Schema:
    return pa.schema(
        [
            pa.field(n, k, metadata={FIELD_ID: str(i).encode()})
            for i, (n, k) in enumerate(zip("ab", kinds, strict=True), 1)
        ]
    )


def _write(path: Path, rows: list[tuple[int | None, int | None]], schema: pa.Schema) -> str:
    columns = [pa.array([r[i] for r in rows], schema.field(i).type) for i in range(2)]
    pq.write_table(pa.Table.from_arrays(columns, schema=schema), path)
    return str(path)


def _codec(deletes: list[tuple[int | None, int | None]]) -> KeyCodec:
    """The codec the driver builds from exact bounds (here: of the rows themselves), aligned as the
    driver aligns it (``codec_over``)."""
    spans = []
    for i in range(2):
        values = [r[i] for r in deletes if r[i] is not None]
        low = min(values, default=0)
        spans.append((low, max(values, default=low - 1)))
    codec = codec_over((1, 2), spans)
    assert codec is not None
    return codec


@settings(max_examples=300, deadline=None)
@given(low=st.integers(-(2**40), 2**40), size=st.integers(0, 2**40))
def test_an_aligned_span_holds_its_values_in_a_power_of_two_at_most_four_times_wider(low, size) -> None:  # type: ignore[no-untyped-def]
    high = low + size - 1  # size 0: an empty span
    start, width = aligned_span(low, high)
    if size == 0:
        assert (start, width) == (low, 1)
        return
    assert width & (width - 1) == 0 and width <= 4 * (size + 1)
    assert start <= low and high <= start + width - 2  # slots 1 .. width - 1 hold start .. high


keys = st.tuples(st.none() | st.integers(-5, 5), st.none() | st.integers(-(2**40), -(2**40) + 6))


@settings(max_examples=60, deadline=None)
@given(data=st.lists(keys, max_size=40), first=st.lists(keys, max_size=8), second=st.lists(keys, max_size=8))
def test_packed_lookup_matches_null_safe_equality(tmp_path_factory, data, first, second) -> None:  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("k")
    deletes = first + second
    paths = (_write(tmp / "d1.parquet", first, _schema()), _write(tmp / "d2.parquet", second, _schema()))
    batch = pa.Table.from_arrays(
        [pa.array([r[i] for r in data], _schema((pa.int64(), pa.int64())).field(i).type) for i in range(2)],
        schema=_schema((pa.int64(), pa.int64())),  # the data file stores the first key wider
    ).to_batches()
    mask = DeletedKeys(make_io()).mask(batch[0], [KeyDeletes(_codec(deletes), paths)]) if batch else None
    expected = [r in set(deletes) for r in data]  # Python's tuple equality: None == None, null-safe
    assert (mask.tolist() if mask is not None else [False] * len(data)) == expected


def test_a_delete_key_outside_its_bounds_is_an_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = _write(tmp_path / "d.parquet", [(1, 1), (9, 1)], _schema())
    batch = pa.Table.from_arrays([pa.array([1], pa.int32()), pa.array([1], pa.int64())], schema=_schema())
    wrong = KeyCodec((1, 2), (0, 0), (4, 4))  # bounds claim 0..2, the file holds 9
    with pytest.raises(ValueError, match="outside the bounds"):
        DeletedKeys(make_io()).mask(batch.to_batches()[0], [KeyDeletes(wrong, (path,))])


def test_codes_are_distinct_over_the_whole_key_space() -> None:
    codec = KeyCodec((1, 2), (-1, 3), (4, 3))  # -1..1 (+NULL) x 3..3 (+NULL)
    values = list(itertools.product([None, -1, 0, 1], [None, 3]))
    columns = [np.array([v[i] or 0 for v in values]) for i in range(2)]
    nulls = [np.array([v[i] is None for v in values]) for i in range(2)]
    codes = codec.encode(columns, nulls)
    assert len(set(codes.tolist())) == len(values) and (codes >= 0).all()
