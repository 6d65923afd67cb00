"""The per-task bitmap duplicate finder on plain Arrow batches (no Spark)."""

from __future__ import annotations

import pyarrow as pa

from rowops.exec.cardinality import find_repeated_positions


def _batch(files: list[str], positions: list[int]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array(files), pa.array(positions, pa.int64())], names=["_file", "_pos"]
    )


def test_repeats_within_and_across_batches() -> None:
    batches = [_batch(["a", "a", "b", "a"], [1, 2, 1, 1]), _batch(["b", "c", "a"], [1, 5, 2])]
    out = [
        (f, p) for b in find_repeated_positions(batches) for f, p in zip(*b.to_pydict().values(), strict=True)
    ]
    assert sorted(out) == [("a", 1), ("a", 2), ("b", 1)]


def test_no_repeats() -> None:
    assert list(find_repeated_positions([_batch(["a", "b"], [1, 1]), _batch(["a"], [2])])) == []
