"""Runtime file pruning for key-based MERGE: skip data files that cannot hold a source key.

A cheap key-only pre-scan of the source yields, per target partition the source touches, the
minimum and maximum of each key column (:class:`KeyRanges`). A data file is kept when its partition
is touched and, for every key column, its ``[lower, upper]`` bounds overlap the source range.

>>> files = [FileKeys("a", (0,), {"k": (0, 9)}), FileKeys("b", (1,), {"k": (10, 19)}),
...          FileKeys("c", (1,), {"k": (20, 29)}), FileKeys("d", (2,), {"k": None})]
>>> ranges = KeyRanges({(1,): {"k": (12, 15)}, (2,): {"k": (40, 41)}})
>>> [f.path for f in prune_files(files, ranges).kept]
['b', 'd']
>>> prune_files(files, None).pruned
()
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Bounds = tuple[Any, Any] | None


@dataclass(frozen=True)
class FileKeys:
    """A data file's partition and key-column bounds (None when the file has no bounds for a column)."""

    path: str
    partition: tuple[object, ...]
    bounds: Mapping[str, Bounds]


@dataclass(frozen=True)
class KeyRanges:
    """Source key ranges per target partition (partition tuple -> column -> (min, max))."""

    by_partition: Mapping[tuple[object, ...], Mapping[str, Bounds]]


@dataclass(frozen=True)
class Pruned:
    kept: tuple[FileKeys, ...]
    pruned: tuple[FileKeys, ...]


def _overlaps(file_bounds: Bounds, source: Bounds) -> bool:
    if file_bounds is None or source is None:
        return True  # unknown bounds (or NULL-only keys): keep, never prune unsafely
    try:
        return not (file_bounds[1] < source[0] or source[1] < file_bounds[0])
    except TypeError:
        return True


def may_match(file: FileKeys, ranges: KeyRanges) -> bool:
    """Whether ``file`` can contain a row whose key is in the source."""
    source = ranges.by_partition.get(file.partition)
    if source is None:
        return False
    return all(_overlaps(file.bounds.get(column), bounds) for column, bounds in source.items())


def prune_files(files: Sequence[FileKeys], ranges: KeyRanges | None) -> Pruned:
    """Split files into those that may hold a source key and those that cannot (None: keep all)."""
    if ranges is None:
        return Pruned(tuple(files), ())
    kept = tuple(f for f in files if may_match(f, ranges))
    return Pruned(kept, tuple(f for f in files if not may_match(f, ranges)))
