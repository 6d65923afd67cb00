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

After partition evolution the ranges are per partition of the spec the source keys were mapped with
(``spec_id``); a file of another spec is compared with the source's overall key range instead (its
partition tuple means something else), never pruned by a partition it cannot be matched against:

>>> old = FileKeys("old", (9,), {"k": (14, 30)}, spec_id=0)
>>> ranges = KeyRanges({(1,): {"k": (12, 15)}, (2,): {"k": (40, 41)}}, spec_id=1)
>>> may_match(old, ranges), may_match(FileKeys("old2", (9,), {"k": (42, 50)}, spec_id=0), ranges)
(True, False)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

Bounds = tuple[Any, Any] | None


@dataclass(frozen=True)
class FileKeys:
    """A data file's partition and key-column bounds (None when the file has no bounds for a column)."""

    path: str
    partition: tuple[object, ...]
    bounds: Mapping[str, Bounds]
    spec_id: int | None = None  # the partition spec of ``partition`` (None: unknown)


@dataclass(frozen=True)
class KeyRanges:
    """Source key ranges per target partition (partition tuple -> column -> (min, max)).

    ``spec_id``: the partition spec the partitions belong to (None: they are the target files' own
    partitions, whatever their spec).
    """

    by_partition: Mapping[tuple[object, ...], Mapping[str, Bounds]]
    spec_id: int | None = None

    @cached_property
    def overall(self) -> Mapping[str, Bounds] | None:
        """The source's key range over every partition (None: no source row)."""
        merged: dict[str, Bounds] = {}
        for i, ranges in enumerate(self.by_partition.values()):
            for column, bounds in ranges.items():
                merged[column] = bounds if i == 0 else _union(merged.get(column), bounds)
        return merged if self.by_partition else None


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


def _union(a: Bounds, b: Bounds) -> Bounds:
    if a is None or b is None:
        return None  # unknown somewhere: unknown overall (never prunes)
    try:
        return (min(a[0], b[0]), max(a[1], b[1]))
    except TypeError:
        return None


def may_match(file: FileKeys, ranges: KeyRanges) -> bool:
    """Whether ``file`` can contain a row whose key is in the source."""
    other_spec = None not in (ranges.spec_id, file.spec_id) and ranges.spec_id != file.spec_id
    source = ranges.overall if other_spec else ranges.by_partition.get(file.partition)
    if source is None:
        return False
    return all(_overlaps(file.bounds.get(column), bounds) for column, bounds in source.items())


def prune_files(files: Sequence[FileKeys], ranges: KeyRanges | None) -> Pruned:
    """Split files into those that may hold a source key and those that cannot (None: keep all)."""
    if ranges is None:
        return Pruned(tuple(files), ())
    kept = tuple(f for f in files if may_match(f, ranges))
    return Pruned(kept, tuple(f for f in files if not may_match(f, ranges)))
