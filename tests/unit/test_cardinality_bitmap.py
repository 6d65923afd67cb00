"""The per-task bitmap duplicate finder on plain Arrow batches (no Spark)."""

from __future__ import annotations

import pyarrow as pa

from rowops.exec.changes.summary import summarize_batches
from rowops.exec.checks.cardinality import find_repeated_positions


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


def _joined(files: list[str | None], positions: list[int | None], actions: list[int], matched: list[bool]):  # type: ignore[no-untyped-def]
    return pa.RecordBatch.from_arrays(
        [pa.array(files, pa.string()), pa.array(positions, pa.int64()), pa.array(actions, pa.int32()),
         pa.array(matched)],
        names=["_file", "_pos", "_action", "_matched"],
    )  # fmt: skip


def test_summary_counts_actions_removed_rows_and_repeats() -> None:
    """Action 0 updates (removes its target row), 1 inserts; file a's position 3 is matched twice."""
    batches = [
        _joined(["a", "a", None, "b"], [3, 4, None, 7], [0, 0, 1, -1], [True, True, False, False]),
        _joined(["a", None], [3, None], [0, 1], [True, False]),
    ]
    rows = pa.Table.from_batches(list(summarize_batches(batches, removing=(0,), limit=5))).to_pylist()
    by_kind = {(r["kind"], r["_file"], r["_pos"]): r["n"] for r in rows}
    assert by_kind == {
        ("action", None, 0): 3,
        ("action", None, 1): 2,
        ("action", None, -1): 1,
        ("removed", "a", None): 3,
        ("repeated", "a", 3): 1,
    }


def test_summary_without_repeats_sends_only_counts() -> None:
    batches = [_joined(["a", "b"], [1, 1], [0, 0], [True, True])]
    kinds = [r["kind"] for b in summarize_batches(batches, removing=(0,), limit=5) for r in b.to_pylist()]
    assert sorted(kinds) == ["action", "removed", "removed"]


def test_summary_counts_removed_rows_once_when_asked() -> None:
    """A delete-only MERGE may match a target row twice: it is removed once (file a: 2 rows, not 3)."""
    batches = [
        _joined(["a", "a", "b"], [3, 4, 7], [0, 0, 0], [True, True, True]),
        _joined(["a"], [3], [0], [True]),
    ]
    out = pa.Table.from_batches(list(summarize_batches(batches, removing=(0,), limit=5, distinct=True)))
    removed = {r["_file"]: r["n"] for r in out.to_pylist() if r["kind"] == "removed"}
    assert removed == {"a": 2, "b": 1}
