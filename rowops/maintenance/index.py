"""Which live delete files apply to which data files, through dictionaries (never files x deletes).

A rowops position-delete file names one data file (its ``file_path`` bounds are equal): it is found by
path. Files of other engines may name a range of paths: those are matched by bisection over the sorted
data paths. An equality delete applies to older data files of its partition (or of every partition
when its spec is unpartitioned): per partition, the sorted sequence numbers of its deletes answer
"how many apply to a file of sequence number s" by bisection.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field

from rowops.meta.files import LiveFile, TableFiles

PartitionKey = tuple[int, tuple[object, ...]]


def partition_key(f: LiveFile) -> PartitionKey:
    return (f.spec_id, f.partition)


@dataclass
class DeleteIndex:
    """Position and equality deletes of one snapshot, indexed by the data files they apply to."""

    files: TableFiles
    pos_by_data: dict[str, list[LiveFile]] = field(default_factory=lambda: defaultdict(list))
    data_by_pos: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    eq_seqs: dict[PartitionKey, list[int]] = field(default_factory=dict)
    global_eq_seqs: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, files: TableFiles) -> DeleteIndex:
        index = cls(files)
        paths = sorted(f.path for f in files.data)
        for d in files.position_deletes:
            bounds = d.referenced_paths
            if bounds is None:
                named = paths
            elif bounds[0] == bounds[1]:
                named = [bounds[0]]
            else:
                named = paths[bisect.bisect_left(paths, bounds[0]) : bisect.bisect_right(paths, bounds[1])]
            for path in named:
                index.pos_by_data[path].append(d)
                index.data_by_pos[d.path].append(path)
        by_partition: dict[PartitionKey, list[int]] = defaultdict(list)
        for d in files.equality_deletes:
            (index.global_eq_seqs if d.is_global else by_partition[partition_key(d)]).append(d.seq)
        index.eq_seqs = {k: sorted(v) for k, v in by_partition.items()}
        index.global_eq_seqs.sort()
        return index

    def position_deletes_of(self, data: LiveFile) -> list[LiveFile]:
        return self.pos_by_data.get(data.path, [])

    def equality_deletes_on(self, data: LiveFile) -> int:
        """How many live equality delete files apply to ``data`` (newer, same partition or global)."""
        newer = 0
        for seqs in (self.eq_seqs.get(partition_key(data), []), self.global_eq_seqs):
            newer += len(seqs) - bisect.bisect_right(seqs, data.seq)
        return newer

    def deletes_on(self, data: LiveFile) -> int:
        return len(self.position_deletes_of(data)) + self.equality_deletes_on(data)


def dangling_deletes(files: TableFiles, removed_data: set[str]) -> set[str]:
    """Delete files that apply to no data file once ``removed_data`` is gone (linear).

    A position delete dangles when no kept data file is among those it may name; an equality delete
    when no kept data file of its partition (any partition, for a global one) is older than it.
    """
    kept = [f for f in files.data if f.path not in removed_data]
    kept_paths = sorted(f.path for f in kept)
    kept_set = set(kept_paths)
    dangling = set()
    for d in files.position_deletes:
        bounds = d.referenced_paths
        if bounds is None:
            named = bool(kept_paths)
        elif bounds[0] == bounds[1]:
            named = bounds[0] in kept_set
        else:
            at = bisect.bisect_left(kept_paths, bounds[0])
            named = at < len(kept_paths) and kept_paths[at] <= bounds[1]
        if not named:
            dangling.add(d.path)
    oldest: dict[PartitionKey, int] = {}
    for f in kept:
        oldest[partition_key(f)] = min(f.seq, oldest.get(partition_key(f), f.seq))
    oldest_any = min(oldest.values(), default=None)
    for d in files.equality_deletes:
        first = oldest_any if d.is_global else oldest.get(partition_key(d))
        if first is None or first >= d.seq:
            dangling.add(d.path)
    return dangling


def covered_targets(index: DeleteIndex, start: set[str]) -> tuple[set[str], set[str]]:
    """The data files to give one new position-delete file each, and the position-delete files that
    those new files replace.

    Starting from ``start``, every position-delete file that applies to a target is replaced, so every
    data file it names becomes a target too (its new file must carry those positions): a closure.
    """
    targets, replaced = set(), set()
    todo = list(start)
    while todo:
        path = todo.pop()
        if path in targets:
            continue
        targets.add(path)
        for d in index.pos_by_data.get(path, []):
            if d.path not in replaced:
                replaced.add(d.path)
                todo.extend(p for p in index.data_by_pos[d.path] if p not in targets)
    return targets, replaced
