"""One file's copy-on-write in pyarrow (``exec/arrow_files.rewrite_file``), without Spark: dropped
positions leave, new versions take the places of their old rows, across read batches."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rowops.exec.rewriting import arrow_files
from rowops.exec.rewriting.arrow_files import NewRows, rewrite_file, writer_options
from rowops.exec.rewriting.arrow_rewrite import per_file
from rowops.meta.fileio import make_io


def _field(name: str, kind: pa.DataType, field_id: int) -> pa.Field:
    return pa.field(name, kind, metadata={b"PARQUET:field_id": str(field_id).encode()})


TARGET = pa.schema([_field("k", pa.int64(), 1), _field("v", pa.large_string(), 2)])


@pytest.fixture()
def source(tmp_path: Path) -> str:
    """A file of 10 rows ``k = 0..9, v = 'old<k>'``, stored with a narrower key type."""
    stored = pa.schema([_field("k", pa.int32(), 1), _field("v", pa.string(), 2)])
    keys = list(range(10))
    path = str(tmp_path / "in.parquet")
    pq.write_table(pa.table([pa.array(keys, pa.int32()), [f"old{k}" for k in keys]], schema=stored), path)
    return path


def _new(positions: list[int], values: list[str]) -> NewRows:
    rows = pa.table([pa.array(positions, pa.int64()), pa.array(values, pa.large_string())], schema=TARGET)
    return NewRows(np.asarray(positions, np.int64), rows)


@pytest.mark.parametrize("batch_rows", [3, 1 << 17])  # new rows in several read batches, or one
def test_new_versions_take_the_places_of_their_old_rows(source, tmp_path, monkeypatch, batch_rows) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(arrow_files, "_BATCH_ROWS", batch_rows)
    out = str(tmp_path / "out.parquet")
    new = _new([8, 2, 5], ["new8", "new2", "new5"])  # any order in, position order out
    dropped = np.asarray([2, 3, 5, 8, 9], np.int64)  # 2, 5, 8 replaced; 3 and 9 deleted
    rows = rewrite_file(make_io(), source, dropped, TARGET, out, writer_options({}), new)
    table = pq.read_table(out)
    assert rows == table.num_rows == 8
    assert table.column("k").to_pylist() == [0, 1, 2, 4, 5, 6, 7, 8]
    assert table.column("v").to_pylist() == ["old0", "old1", "new2", "old4", "new5", "old6", "old7", "new8"]
    assert table.schema.field("k").type == pa.int64()


def test_a_new_row_beyond_the_file_is_an_error(source, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="beyond"):
        rewrite_file(
            make_io(), source, np.asarray([12], np.int64), TARGET, str(tmp_path / "o.parquet"),
            writer_options({}), _new([12], ["x"]),
        )  # fmt: skip


def test_two_new_versions_of_one_row_are_an_error() -> None:
    with pytest.raises(ValueError, match="two new versions"):
        _new([4, 4], ["a", "b"])


def test_per_file_groups_runs_across_batches() -> None:
    def batch(ids: list[int]) -> pa.RecordBatch:
        return pa.RecordBatch.from_pydict({"i": pa.array(ids, pa.int32()), "p": list(range(len(ids)))})

    groups = [
        (i, t.column("p").to_pylist()) for i, t in per_file([batch([0, 0, 1]), batch([]), batch([1, 2])])
    ]
    assert groups == [(0, [0, 1]), (1, [2, 0]), (2, [1])]
