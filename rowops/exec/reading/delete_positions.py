"""The positions delete files hold, read by the driver and kept for the process: delete files never change.

A read after each write of a merge-on-read table would otherwise read every delete file of the table
again (Case 2 at SF 1 after ten writes: 160 files, 300,645 positions); with their positions kept it
reads only the files written since the last read. Iceberg's Spark readers keep delete files the same
way, in the executors' cache (``spark.sql.iceberg.executor-cache.*``, on by default).

An entry is one Parquet position delete file (its path and size: positions per normalized data file
path) or one deletion vector blob (its path, offset and length: positions). At most
:data:`CACHE_POSITIONS` positions are kept, the least recently used dropped first; an entry larger than
that is read and not kept.

>>> cache = PositionCache(limit=3)
>>> cache.get(("a", 1), lambda: {"/d": np.array([1, 2])})["/d"].tolist()
[1, 2]
>>> cache.get(("a", 1), lambda: {"/d": np.array([9])})["/d"].tolist()  # kept: not read again
[1, 2]
>>> _ = cache.get(("b", 1), lambda: {"/d": np.array([5, 6])})  # 4 positions > 3: "a" is dropped
>>> sorted(cache.keys()), cache.positions
([('b', 1)], 2)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io import FileIO

from rowops.exec.reading.position_keys import vector_positions
from rowops.meta.fileio import filesystem
from rowops.meta.paths import normalize_path
from rowops.meta.puffin import read_deletion_vector

CACHE_POSITIONS = 1 << 24  # 16 Mi positions, 128 MiB of longs
Positions = dict[str, np.ndarray]  # normalized data file path -> its deleted positions


class PositionCache:
    """A process-wide, thread-safe LRU of parsed delete files, bounded by their positions."""

    def __init__(self, limit: int = CACHE_POSITIONS) -> None:
        self.limit = limit
        self.positions = 0
        self._entries: OrderedDict[Hashable, Positions] = OrderedDict()
        self._lock = threading.Lock()

    def keys(self) -> list[Hashable]:
        with self._lock:
            return list(self._entries)

    def get(self, key: Hashable, read: Callable[[], Positions]) -> Positions:
        """The entry at ``key``, ``read`` (outside the lock, so that threads read side by side) when
        it is not kept."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        found = read()
        size = sum(len(p) for p in found.values())
        if size > self.limit:
            return found
        with self._lock:
            if key not in self._entries:
                self._entries[key] = found
                self.positions += size
            while self.positions > self.limit:
                _, dropped = self._entries.popitem(last=False)
                self.positions -= sum(len(p) for p in dropped.values())
        return found


CACHE = PositionCache()


def file_positions(io: FileIO, key: str, size: int) -> Positions:
    """The positions the Parquet position delete file at ``key`` (of ``size`` bytes) deletes, per
    normalized data file path."""
    return CACHE.get(("file", key, size), lambda: _read_file(io, key))


def blob_positions(io: FileIO, key: str, offset: int, length: int) -> np.ndarray:
    """The positions of the deletion vector blob at ``offset``/``length`` of the Puffin file ``key``."""
    return CACHE.get(("blob", key, offset, length), lambda: {"": _read_blob(io, key, offset, length)})[""]


def _read_blob(io: FileIO, key: str, offset: int, length: int) -> np.ndarray:
    fs, path = filesystem(io, key)
    return vector_positions(read_deletion_vector(fs, path, offset, length))


def _read_file(io: FileIO, key: str) -> Positions:
    fs, path = filesystem(io, key)
    return grouped_positions(pq.read_table(path, filesystem=fs, columns=["file_path", "pos"]))


def grouped_positions(table: pa.Table) -> Positions:
    """A position delete file's positions per normalized data file path (names of one file in
    different forms are merged).

    >>> t = pa.table({"file_path": ["file:/d/a", "/d/b", "file:///d/a", "/d/a"], "pos": [1, 2, 3, 7]})
    >>> {k: v.tolist() for k, v in grouped_positions(t).items()}
    {'/d/a': [1, 3, 7], '/d/b': [2]}
    """
    paths = pc.dictionary_encode(table.column("file_path").combine_chunks())
    codes = paths.indices.to_numpy(zero_copy_only=False)
    positions = table.column("pos").to_numpy()
    names = paths.dictionary.to_pylist()
    order = np.argsort(codes, kind="stable")
    groups = np.split(positions[order], np.cumsum(np.bincount(codes, minlength=len(names)))[:-1])
    grouped: dict[str, list[np.ndarray]] = {}
    for name, group in zip(names, groups, strict=True):
        grouped.setdefault(normalize_path(name), []).append(group)
    return {name: _merged(parts) for name, parts in grouped.items()}


def _merged(parts: Iterable[np.ndarray]) -> np.ndarray:
    arrays = list(parts)
    return arrays[0] if len(arrays) == 1 else np.sort(np.concatenate(arrays))
