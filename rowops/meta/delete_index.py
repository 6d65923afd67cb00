"""Which live delete files apply to which data files: one index, never files x deletes.

Built once per snapshot in time linear in its files, as Iceberg's ``DeleteFileIndex``:

* a *file-scoped* position delete (it names one data file: its ``file_path`` bounds are equal, as in
  every delete file rowops writes) is found by that path, a dictionary lookup;
* any other position delete (a range of paths, or unknown bounds: files of other engines) is kept
  per (spec id, partition), or with the global ones when its spec is unpartitioned, sorted by sequence
  number; it applies to data files of that partition at most as new as it whose path its bounds admit;
* an equality delete is kept per (spec id, partition), or with the global ones when its spec is
  unpartitioned, sorted by sequence number: "the deletes newer than a data file" is a bisection.

The rules are those of :meth:`rowops.meta.files.LiveFile.may_apply_to` (the brute-force oracle of the
tests); looking up one data file costs O(log D) plus the deletes found (plus, for partition-scoped
position deletes only, those of its partition at least as new).
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict
from collections.abc import Iterable, Sequence
from functools import cached_property

from rowops.meta.files import LiveFile, TableFiles

PartitionKey = tuple[int, tuple[object, ...]]


def partition_key(f: LiveFile) -> PartitionKey:
    return (f.spec_id, f.partition)


class _BySeq:
    """Delete files sorted by sequence number, for "newer than" / "at least as new as" by bisection."""

    def __init__(self, files: Iterable[LiveFile]) -> None:
        self.files = sorted(files, key=lambda d: (d.seq, d.path))
        self.seqs = [d.seq for d in self.files]

    def newer_than(self, seq: int) -> list[LiveFile]:
        return self.files[bisect.bisect_right(self.seqs, seq) :]

    def count_newer_than(self, seq: int) -> int:
        return len(self.seqs) - bisect.bisect_right(self.seqs, seq)

    def at_least(self, seq: int) -> list[LiveFile]:
        return self.files[bisect.bisect_left(self.seqs, seq) :]


_EMPTY = _BySeq(())


def _by_partition(files: Iterable[LiveFile]) -> tuple[dict[PartitionKey, _BySeq], _BySeq]:
    """Delete files per (spec id, partition), and the global ones (unpartitioned spec)."""
    scoped: dict[PartitionKey, list[LiveFile]] = defaultdict(list)
    global_: list[LiveFile] = []
    for d in files:
        (global_ if d.is_global else scoped[partition_key(d)]).append(d)
    return {k: _BySeq(v) for k, v in scoped.items()}, _BySeq(global_)


class DeleteIndex:
    """Position and equality deletes of one snapshot, indexed by the data files they apply to."""

    def __init__(
        self,
        data: Sequence[LiveFile],
        position_deletes: Sequence[LiveFile],
        equality_deletes: Sequence[LiveFile],
    ) -> None:
        self.data = tuple(data)
        self.pos_by_path: dict[str, list[LiveFile]] = defaultdict(list)
        scoped = []
        for d in position_deletes:
            target = d.referenced_file
            if target is not None:
                self.pos_by_path[target].append(d)
            else:
                scoped.append(d)
        self.pos_by_partition, self.global_pos = _by_partition(scoped)
        self.eq_by_partition, self.global_eq = _by_partition(equality_deletes)

    @classmethod
    def of(cls, files: TableFiles) -> DeleteIndex:
        return cls(files.data, files.position_deletes, files.equality_deletes)

    def position_deletes_of(self, data: LiveFile) -> list[LiveFile]:
        """The position delete files that may remove rows of ``data``."""
        hits = list(self.pos_by_path.get(data.path, ()))
        for group in (self.pos_by_partition.get(partition_key(data), _EMPTY), self.global_pos):
            hits += [d for d in group.at_least(data.seq) if d.may_reference(data.path)]
        return hits

    def equality_deletes_of(self, data: LiveFile) -> list[LiveFile]:
        """The equality delete files that apply to ``data`` (newer, same partition or global)."""
        scoped = self.eq_by_partition.get(partition_key(data), _EMPTY)
        return scoped.newer_than(data.seq) + self.global_eq.newer_than(data.seq)

    def equality_deletes_on(self, data: LiveFile) -> int:
        """How many live equality delete files apply to ``data`` (O(log E))."""
        scoped = self.eq_by_partition.get(partition_key(data), _EMPTY)
        return scoped.count_newer_than(data.seq) + self.global_eq.count_newer_than(data.seq)

    def deletes_on(self, data: LiveFile) -> int:
        return len(self.position_deletes_of(data)) + self.equality_deletes_on(data)

    def deletes_applying(self, data_files: Sequence[LiveFile]) -> list[LiveFile]:
        """Every delete file that applies to at least one of ``data_files``, each once (linear)."""
        return self.position_deletes_applying(data_files) + self.equality_deletes_applying(data_files)

    def equality_deletes_applying(self, data_files: Iterable[LiveFile]) -> list[LiveFile]:
        """The equality delete files that apply to some of ``data_files``, each once.

        Linear in the files and the deletes found: the deletes of a partition that apply to some file
        are those newer than its oldest file (one slice), the global ones those newer than the oldest.
        """
        oldest: dict[PartitionKey, int] = {}
        for f in data_files:
            oldest[partition_key(f)] = min(f.seq, oldest.get(partition_key(f), f.seq))
        found = [
            d for key, seq in oldest.items() for d in self.eq_by_partition.get(key, _EMPTY).newer_than(seq)
        ]
        return found + (self.global_eq.newer_than(min(oldest.values())) if oldest else [])

    def position_deletes_applying(self, data_files: Iterable[LiveFile]) -> list[LiveFile]:
        """The position delete files that may remove rows of some of ``data_files``, each once."""
        found: dict[str, LiveFile] = {}
        for f in data_files:
            found.update((d.path, d) for d in self.position_deletes_of(f))
        return list(found.values())

    @cached_property
    def pos_by_data(self) -> dict[str, list[LiveFile]]:
        """Position delete files per data file path (data files without any are left out)."""
        out = {}
        for f in self.data:
            hits = self.position_deletes_of(f)
            if hits:
                out[f.path] = hits
        return out

    @cached_property
    def data_by_pos(self) -> dict[str, list[str]]:
        """The live data files each position delete file applies to, by delete file path."""
        out: dict[str, list[str]] = defaultdict(list)
        for path, deletes in self.pos_by_data.items():
            for d in deletes:
                out[d.path].append(path)
        return out


_RECENT: list[tuple[TableFiles, DeleteIndex]] = []  # the last few snapshots' indexes, newest last
_RECENT_SIZE = 4
_RECENT_LOCK = threading.Lock()


def delete_index(files: TableFiles) -> DeleteIndex:
    """The delete index of ``files``, built once for the last few ``TableFiles`` objects asked about
    (planning, scans and encodings of one operation share it; a few snapshots are held at most)."""
    with _RECENT_LOCK:
        for known, index in _RECENT:
            if known is files:
                return index
    index = DeleteIndex.of(files)
    with _RECENT_LOCK:
        _RECENT.append((files, index))
        del _RECENT[:-_RECENT_SIZE]
    return index


def dangling_equality_deletes(files: TableFiles, removed_data: set[str]) -> set[str]:
    """Equality delete files that apply to no data file once ``removed_data`` is gone (linear).

    An equality delete applies to older data files of its partition (any partition, for a global
    one): it dangles when no kept data file of its scope is older than it. Files a commit adds are
    always newer than every live delete.
    """
    oldest: dict[PartitionKey, int] = {}
    for f in files.data:
        if f.path not in removed_data:
            oldest[partition_key(f)] = min(f.seq, oldest.get(partition_key(f), f.seq))
    oldest_any = min(oldest.values(), default=None)
    dangling = set()
    for d in files.equality_deletes:
        first = oldest_any if d.is_global else oldest.get(partition_key(d))
        if first is None or first >= d.seq:
            dangling.add(d.path)
    return dangling
