"""``exec/reading/row_masks.py`` against Python sets of positions (the oracle)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from rowops.exec.reading.row_masks import clipped, combined, masks_of, positions_of

POSITIONS = st.lists(st.integers(-100, 2_000), max_size=300)


def _set(values: list[int]) -> set[int]:
    return {v for v in values if v >= 0}


@given(POSITIONS)
def test_masks_hold_exactly_the_positions(values: list[int]) -> None:
    masks = masks_of(np.array(values, np.int64))
    assert positions_of(masks).tolist() == sorted(_set(values))
    assert masks.count() == len(_set(values))
    assert np.all(np.diff(masks.blocks) > 0) and np.all(masks.bits != 0)


@given(st.lists(POSITIONS, max_size=5))
def test_combined_masks_are_the_union(parts: list[list[int]]) -> None:
    masks = combined([masks_of(np.array(p, np.int64)) for p in parts])
    union = set().union(*map(_set, parts)) if parts else set()
    assert positions_of(masks).tolist() == sorted(union)
    assert np.all(np.diff(masks.blocks) > 0) and np.all(masks.bits != 0)


@given(POSITIONS, st.integers(0, 2_100))
def test_clipped_masks_keep_the_file_rows(values: list[int], rows: int) -> None:
    masks = clipped(masks_of(np.array(values, np.int64)), rows)
    assert positions_of(masks).tolist() == sorted(p for p in _set(values) if p < rows)
    assert np.all(masks.bits != 0)
