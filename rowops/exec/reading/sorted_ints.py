"""Sorted distinct values of integer arrays (key codes, row positions), found by sorting.

numpy 2.3+ finds ``np.unique``'s values with a hash table, then sorts them. On arrays of mostly
distinct 64-bit codes that is an order of magnitude slower than a sort: 1.3-1.7 s for the 1.8M keys of
one Case 3 batch at SF 10 (numpy 2.4, this machine), against 0.1 s for ``np.sort`` and one comparison
of neighbours. Key codes are collected on the driver for every keyed MERGE (``exec/reading/key_codes.py``)
and loaded from delete files in every rewrite task (``exec/rewriting/arrow_deletes.py``).
"""

from __future__ import annotations

import numpy as np


def sorted_distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of ``values``, ascending (what ``np.unique(values)`` returns).

    >>> sorted_distinct(np.array([3, 1, 3, 2, 1])).tolist()
    [1, 2, 3]
    >>> sorted_distinct(np.array([], dtype=np.int64)).dtype
    dtype('int64')
    """
    ordered = np.sort(values)
    if ordered.size < 2:
        return ordered
    keep = np.empty(ordered.size, dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def has_repeats(ordered: np.ndarray) -> bool:
    """Whether the sorted array ``ordered`` holds some value twice.

    >>> has_repeats(np.array([1, 2, 2, 5])), has_repeats(np.array([1, 2, 5])), has_repeats(np.array([]))
    (True, False, False)
    """
    return bool(ordered.size > 1 and np.any(ordered[1:] == ordered[:-1]))
