"""``exec/reading/sorted_ints.py`` against numpy's own ``np.unique`` (the oracle), on any int64 array."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from rowops.exec.reading.sorted_ints import has_repeats, sorted_distinct

INT64 = arrays(np.int64, st.integers(0, 300), elements=st.integers(-(2**63), 2**63 - 1))
SMALL = arrays(np.int64, st.integers(0, 300), elements=st.integers(-5, 5))  # many repeats


@given(st.one_of(INT64, SMALL))
def test_sorted_distinct_is_np_unique(values: np.ndarray) -> None:
    found = sorted_distinct(values)
    assert found.dtype == values.dtype
    assert np.array_equal(found, np.unique(values))


@given(st.one_of(INT64, SMALL))
def test_has_repeats_of_a_sorted_array(values: np.ndarray) -> None:
    ordered = np.sort(values)
    assert has_repeats(ordered) == (len(np.unique(values)) < len(values))
