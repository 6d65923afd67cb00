"""Equality-delete keys kept in Spark's cache between the reads of a session.

Every read of a table under equality deletes (and every MERGE, UPDATE or DELETE that scans it) reads
the key columns of its live equality-delete files and broadcasts them. Those files never change once
written, and one write adds one group of them (one sequence number) while the earlier groups stay live,
so the next read would decode the same small files again: after ten SF 1 micro-batches, 160 files and
0.65 s of a 2.8 s read. Here the keys of each group of delete files are persisted
(``MEMORY_AND_DISK``) the first time a read needs them and served from Spark's cache afterwards; on the
``tools/bench_reads`` SF 1 tables (medians of four, interleaved) reads took 1.00 s instead of 1.11 s after
one micro-batch and 2.48 s instead of 2.84 s after ten. Iceberg's Spark runtime keeps delete files in an
executor cache for the same reason.

The cache is keyed by the session, the key columns (field ids and types) and the delete files' paths,
and bounded by the Spark conf :data:`MAX_ROWS_CONF` (key rows, least recently used evicted and
unpersisted; a read under a lower bound evicts down to it, so 0 turns the cache off and frees it: Spark
substitutes a persisted plan for every equal one, so a read "as before" would still scan a cached
group). A group larger than the bound is read as before.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyiceberg.schema import Schema
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from rowops.exec.compat import session_key
from rowops.exec.session import int_conf
from rowops.meta.files import LiveFile

MAX_ROWS_CONF = "rowops.scan.delete-cache.max-rows"
MAX_ROWS = 20_000_000  # key rows: a few hundred MB of cached columns at most

Key = tuple[int, str, tuple[tuple[int, str], ...], tuple[str, ...]]


@dataclass(frozen=True)
class _Entry:
    keys: DataFrame
    rows: int


_LOCK = threading.Lock()
_ENTRIES: OrderedDict[Key, _Entry] = OrderedDict()


def cached_keys(
    spark: SparkSession, keys: Schema, deletes: Sequence[LiveFile], read: Callable[[], DataFrame]
) -> DataFrame:
    """The key columns ``keys`` of the equality-delete files ``deletes``: ``read()``, persisted on first
    use and served from Spark's cache while it stays among the most recently used."""
    limit = int_conf(spark, MAX_ROWS_CONF, MAX_ROWS)
    rows = sum(d.record_count for d in deletes)
    if rows > limit:  # a lowered bound (0: off) frees what it no longer holds
        with _LOCK:
            evicted = _evict(limit)
        _unpersist(evicted)
        return read()
    key: Key = (
        id(spark),
        session_key(spark),
        tuple((f.field_id, str(f.field_type)) for f in keys.fields),
        tuple(sorted(d.path for d in deletes)),
    )
    with _LOCK:
        entry = _ENTRIES.get(key)
        if entry is not None:
            _ENTRIES.move_to_end(key)
            return entry.keys
    persisted = read().persist(StorageLevel.MEMORY_AND_DISK)
    with _LOCK:
        entry = _ENTRIES.setdefault(key, _Entry(persisted, rows))  # another thread may have been first
        _ENTRIES.move_to_end(key)
        evicted = _evict(limit)
    if entry.keys is not persisted:
        evicted.append(_Entry(persisted, rows))
    _unpersist(evicted)
    return entry.keys


def _unpersist(entries: list[_Entry]) -> None:
    """Free the cached keys of ``entries`` (Spark also stops substituting them for the same reads)."""
    for entry in entries:
        entry.keys.unpersist()


def _evict(limit: int) -> list[_Entry]:
    """Drop the least recently used entries until the cached rows fit ``limit`` (lock held)."""
    evicted = []
    total = sum(e.rows for e in _ENTRIES.values())
    while total > limit and _ENTRIES:
        _, old = _ENTRIES.popitem(last=False)
        total -= old.rows
        evicted.append(old)
    return evicted


def cached_groups() -> int:
    """How many groups of delete files have their keys cached (all sessions)."""
    with _LOCK:
        return len(_ENTRIES)
