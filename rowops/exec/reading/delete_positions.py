"""The rows delete files delete, read by the driver and kept for the process as masks of 64-row blocks
(``row_masks.py``): delete files never change.

A read after each write of a merge-on-read table would otherwise read every delete file of the table
again (Case 2 at SF 1 after ten writes: 160 files, 300,645 positions); with their masks kept it
reads only the files written since the last read. Iceberg's Spark readers keep delete files the same
way, in the executors' cache (``spark.sql.iceberg.executor-cache.*``, on by default).

An entry is one Parquet position delete file (its path and size: masks per normalized data file
path) or one deletion vector blob (its path, offset and length: masks). At most :data:`CACHE_BLOCKS`
blocks are kept (16 bytes each), the least recently used dropped first; an entry larger than that is
read and not kept.

>>> cache = MaskCache(limit=3)
>>> cache.get(("a", 1), lambda: {"/d": masks_of(np.array([1, 2]))})["/d"].count()
2
>>> cache.get(("a", 1), lambda: {"/d": masks_of(np.array([9]))})["/d"].count()  # kept: not read again
2
>>> _ = cache.get(("b", 1), lambda: {"/d": masks_of(np.array([64, 128, 192]))})  # 4 blocks > 3: "a" goes
>>> sorted(cache.keys()), cache.blocks
([('b', 1)], 3)
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
from rowops.exec.reading.row_masks import RowMasks, masks_of
from rowops.meta.fileio import filesystem
from rowops.meta.paths import normalize_path
from rowops.meta.puffin import read_deletion_vector

CACHE_BLOCKS = 1 << 23  # 8 Mi blocks, 128 MiB of longs
Masks = dict[str, RowMasks]  # normalized data file path -> the masks of its deleted rows


class MaskCache:
    """A process-wide, thread-safe LRU of parsed delete files, bounded by their blocks."""

    def __init__(self, limit: int = CACHE_BLOCKS) -> None:
        self.limit = limit
        self.blocks = 0
        self._entries: OrderedDict[Hashable, Masks] = OrderedDict()
        self._lock = threading.Lock()

    def keys(self) -> list[Hashable]:
        with self._lock:
            return list(self._entries)

    def get(self, key: Hashable, read: Callable[[], Masks]) -> Masks:
        """The entry at ``key``, ``read`` (outside the lock, so that threads read side by side) when
        it is not kept."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        found = read()
        size = sum(len(m) for m in found.values())
        if size > self.limit:
            return found
        with self._lock:
            if key not in self._entries:
                self._entries[key] = found
                self.blocks += size
            while self.blocks > self.limit:
                _, dropped = self._entries.popitem(last=False)
                self.blocks -= sum(len(m) for m in dropped.values())
        return found


CACHE = MaskCache()


def file_masks(io: FileIO, key: str, size: int) -> Masks:
    """The rows the Parquet position delete file at ``key`` (of ``size`` bytes) deletes, per
    normalized data file path."""
    return CACHE.get(("file", key, size), lambda: _read_file(io, key))


def blob_masks(io: FileIO, key: str, offset: int, length: int) -> RowMasks:
    """The rows the deletion vector blob at ``offset``/``length`` of the Puffin file ``key`` deletes."""
    read = lambda: {"": masks_of(_read_blob(io, key, offset, length))}  # noqa: E731
    return CACHE.get(("blob", key, offset, length), read)[""]


def _read_blob(io: FileIO, key: str, offset: int, length: int) -> np.ndarray:
    fs, path = filesystem(io, key)
    return vector_positions(read_deletion_vector(fs, path, offset, length))


def _read_file(io: FileIO, key: str) -> Masks:
    """The file's masks; its paths read as a dictionary (a delete file names few data files, most often
    one: 1.8 million rows of one name were decoded to strings and encoded back in seconds)."""
    fs, path = filesystem(io, key)
    table = pq.read_table(path, filesystem=fs, columns=["file_path", "pos"], read_dictionary=["file_path"])
    return {name: masks_of(positions) for name, positions in grouped_positions(table).items()}


def grouped_positions(table: pa.Table) -> dict[str, np.ndarray]:
    """A position delete file's positions per normalized data file path (names of one file in
    different forms are merged), its paths plain or dictionary-encoded.

    >>> t = pa.table({"file_path": ["file:/d/a", "/d/b", "file:///d/a", "/d/a"], "pos": [1, 2, 3, 7]})
    >>> {k: v.tolist() for k, v in grouped_positions(t).items()}
    {'/d/a': [1, 3, 7], '/d/b': [2]}
    """
    column = table.column("file_path")
    if pa.types.is_dictionary(column.type):
        paths = column.unify_dictionaries().combine_chunks()
    else:
        paths = pc.dictionary_encode(column.combine_chunks())
    positions = table.column("pos").to_numpy()
    names = paths.dictionary.to_pylist()
    if len(names) == 1:  # most often: one data file
        return {normalize_path(names[0]): positions}
    codes = paths.indices.to_numpy(zero_copy_only=False)
    order = np.argsort(codes, kind="stable")
    groups = np.split(positions[order], np.cumsum(np.bincount(codes, minlength=len(names)))[:-1])
    grouped: dict[str, list[np.ndarray]] = {}
    for name, group in zip(names, groups, strict=True):
        grouped.setdefault(normalize_path(name), []).append(group)
    return {name: _merged(parts) for name, parts in grouped.items()}


def _merged(parts: Iterable[np.ndarray]) -> np.ndarray:
    arrays = list(parts)
    return arrays[0] if len(arrays) == 1 else np.sort(np.concatenate(arrays))
