"""Reading manifests: a process-wide cache of parsed entries, parallel reads, partition-summary filters.

Manifests are immutable: a path names one content forever (rowops writes each manifest under a fresh
UUID name), so parsed entries are cached by ``(path, length, sequence number)`` — the sequence number is
part of the key because entries inherit it from the manifest list that assigned it. The cache is a
bounded LRU counted in *entries* (``ROWOPS_MANIFEST_CACHE_ENTRIES``, default 200,000; about 1-2 KB of
Python objects per entry with full column metrics), so a table of 10^5 files is planned from memory
after its first read and a 10^6-file table cannot exhaust the driver; a manifest with more entries than
the bound is read but never cached.

Complexity: reading the live entries of ``M`` manifests holding ``N`` entries costs O(N) parsing on a
cold cache (spread over threads; Avro decoding partly holds the GIL) and O(M) dictionary lookups on a
warm one. A partition filter evaluates each manifest's partition summaries first (O(M · fields)), so
manifests of untouched partitions are never opened.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.expressions.visitors import expression_evaluator, inclusive_projection, manifest_evaluator
from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestEntry, ManifestEntryStatus, ManifestFile
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.typedef import Record

from rowops.meta.v3 import read_manifest

READ_THREADS = 8
T = TypeVar("T")
_DEFAULT_CAPACITY = 200_000

CacheKey = tuple[str, int, int]


class ManifestCache:
    """A thread-safe LRU of parsed manifest entries (all entries, deleted ones included), bounded in
    entries.

    >>> cache, e = ManifestCache(capacity=3), ManifestEntry()
    >>> cache.put(("a", 1, 0), (e, e)); cache.put(("b", 1, 0), (e,)); len(cache.get(("a", 1, 0)))
    2
    >>> cache.put(("c", 1, 0), (e,)); cache.get(("b", 1, 0)) is None  # least recently used: evicted
    True
    >>> cache.put(("d", 1, 0), (e, e, e, e)); cache.get(("d", 1, 0)) is None  # larger than the bound
    True
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.size = 0
        self._items: OrderedDict[CacheKey, tuple[ManifestEntry, ...]] = OrderedDict()
        # per manifest, the live entries as a caller's objects (``meta/files.py``'s ``LiveFile``s):
        # built once, dropped with the entries (same key, same bound)
        self._live: dict[CacheKey, tuple[Any, ...]] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: CacheKey) -> tuple[ManifestEntry, ...] | None:
        with self._lock:
            value = self._items.get(key)
            if value is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: CacheKey, value: tuple[ManifestEntry, ...]) -> None:
        if len(value) > self.capacity:
            return
        with self._lock:
            old = self._items.pop(key, None)
            self.size -= len(old) if old is not None else 0
            self._items[key] = value
            self.size += len(value)
            while self.size > self.capacity:
                evicted_key, evicted = self._items.popitem(last=False)
                self._live.pop(evicted_key, None)
                self.size -= len(evicted)

    def get_live(self, key: CacheKey) -> tuple[Any, ...] | None:
        """The live entries of a cached manifest as built by :meth:`put_live` (a hit), else None."""
        with self._lock:
            value = self._live.get(key)
            if value is not None:
                self._items.move_to_end(key)
                self.hits += 1
            return value

    def put_live(self, key: CacheKey, value: tuple[Any, ...]) -> None:
        """Keep ``value`` (built from the live entries of the manifest ``key``) while its entries stay."""
        with self._lock:
            if key in self._items:
                self._live[key] = value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._live.clear()
            self.size = self.hits = self.misses = 0


def _capacity() -> int:
    raw = os.environ.get("ROWOPS_MANIFEST_CACHE_ENTRIES", "")
    return int(raw) if raw.strip().isdigit() else _DEFAULT_CAPACITY


CACHE = ManifestCache(_capacity())


def manifest_key(manifest: ManifestFile) -> CacheKey:
    return (manifest.manifest_path, int(manifest.manifest_length), int(manifest.sequence_number or 0))


def read_entries(manifest: ManifestFile, io: FileIO, live_only: bool = True) -> list[ManifestEntry]:
    """The entries of one manifest (with inherited sequence numbers), from the cache when present.

    The entries returned are shared with the cache: callers must not mutate them.
    """
    key = manifest_key(manifest)
    cached = CACHE.get(key)
    if cached is None:
        entries = tuple(read_manifest(manifest, io))
        CACHE.put(key, entries)
    else:
        entries = cached
    if not live_only:
        return list(entries)
    return [e for e in entries if e.status != ManifestEntryStatus.DELETED]


def read_all(
    manifests: Sequence[ManifestFile], io: FileIO, live_only: bool = True
) -> list[list[ManifestEntry]]:
    """The entries of every manifest, in order, read in parallel threads (cached ones without I/O)."""
    if len(manifests) <= 1:
        return [read_entries(m, io, live_only) for m in manifests]
    with ThreadPoolExecutor(max_workers=min(READ_THREADS, len(manifests))) as pool:
        return list(pool.map(lambda m: read_entries(m, io, live_only), manifests))


def read_live(
    manifests: Sequence[ManifestFile], io: FileIO, build: Callable[[ManifestEntry], T]
) -> list[tuple[T, ...]]:
    """``build`` of every live entry, per manifest; kept in the cache next to the entries, so a warm
    listing is O(M) lookups with no per-entry work (only missing manifests are read, in parallel)."""
    keys = [manifest_key(m) for m in manifests]
    out: list[tuple[T, ...] | None] = [CACHE.get_live(k) for k in keys]
    missing = [i for i, value in enumerate(out) if value is None]
    for i, entries in zip(missing, read_all([manifests[i] for i in missing], io), strict=True):
        built = tuple(build(e) for e in entries)
        CACHE.put_live(keys[i], built)
        out[i] = built
    return [value or () for value in out]


class PartitionFilter:
    """A row filter on table columns (pyiceberg expression) projected inclusively onto every spec.

    ``manifest(m)`` is False when the manifest's partition summaries prove no file in it can hold a
    matching row; ``partition(spec_id, values)`` does the same for one file's partition tuple. The
    projection is inclusive, so both may keep files without matching rows but never drop one that has
    them. An unpartitioned spec projects to ``AlwaysTrue``: its files (among them global equality
    deletes) are always kept.
    """

    def __init__(self, metadata: TableMetadata, expression: BooleanExpression, case_sensitive: bool = True):
        self.expression = expression
        self._schema: Schema = metadata.schema()
        self._metadata = metadata
        self._case_sensitive = case_sensitive
        self._manifest: dict[int, Callable[[ManifestFile], bool]] = {}
        self._partition: dict[int, Callable[[Record], bool]] = {}

    def _projected(self, spec_id: int) -> tuple[BooleanExpression, Schema]:
        spec = self._metadata.specs()[spec_id]
        projected = inclusive_projection(self._schema, spec, self._case_sensitive)(self.expression)
        return projected, Schema(*spec.partition_type(self._schema).fields)

    def manifest(self, manifest: ManifestFile) -> bool:
        spec_id = manifest.partition_spec_id
        if spec_id not in self._manifest:
            spec = self._metadata.specs()[spec_id]
            projected, _ = self._projected(spec_id)
            self._manifest[spec_id] = manifest_evaluator(spec, self._schema, projected, self._case_sensitive)
        return self._manifest[spec_id](manifest)

    def partition(self, spec_id: int, values: tuple[object, ...]) -> bool:
        if spec_id not in self._partition:
            projected, partition_schema = self._projected(spec_id)
            if projected == AlwaysTrue():
                self._partition[spec_id] = lambda _: True
            else:
                self._partition[spec_id] = expression_evaluator(
                    partition_schema, projected, self._case_sensitive
                )
        return self._partition[spec_id](Record(*values))
