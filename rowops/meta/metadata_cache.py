"""Parsed ``metadata.json`` files by location, shared by every load of a table.

A table metadata file is never changed once written: each commit writes a new file under a new name
(``NNNNN-<uuid>.metadata.json``), and Iceberg readers rely on that too. So a parse can be kept for as
long as its location is asked for. Without it every ``load`` parses the file again, and pyiceberg's
parse grows with the table's history: measured 82 ms for a table of 336 snapshots (107 KB), about a
quarter of a millisecond per snapshot, paid by each MERGE's planning and again by each read.

The metadata a commit writes is kept under its new location too (:meth:`MetadataCache.keep_written`),
so the first load after the commit needs no parse either. That object is the one serialized, and a
parse of the written text gives an equal object (pydantic equality; checked on every write when
``ROWOPS_CHECK_METADATA_CACHE`` is set, as the test suite does).

Cached objects are shared: pyiceberg's metadata models are frozen, and rowops derives new metadata
with ``model_copy`` / ``update_table_metadata``, never by mutating one in place.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable

from pyiceberg.table.metadata import TableMetadata, TableMetadataUtil

CAPACITY = 16  # files: a lake's recently used tables, and a few versions back for time travel


class MetadataCacheMismatchError(AssertionError):
    """A written metadata object differs from the parse of its own text (checking mode only)."""


class MetadataCache:
    """A bounded, thread-safe map from metadata file location to its parsed :class:`TableMetadata`.

    >>> cache = MetadataCache(capacity=1)
    >>> parses = []
    >>> def parse(text):
    ...     parses.append(text)
    ...     return text.upper()
    >>> cache.get("a", lambda: parse("a")), cache.get("a", lambda: parse("a")), parses
    ('A', 'A', ['a'])
    >>> cache.get("b", lambda: parse("b")), "a" in cache, "b" in cache
    ('B', False, True)
    """

    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, TableMetadata] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, location: str) -> bool:
        with self._lock:
            return location in self._items

    def get(self, location: str, read: Callable[[], TableMetadata]) -> TableMetadata:
        """The metadata at ``location``: kept, else ``read()`` (outside the lock) and kept."""
        with self._lock:
            found = self._items.get(location)
            if found is not None:
                self._items.move_to_end(location)
                return found
        metadata = read()
        self._keep(location, metadata)
        return metadata

    def keep_written(self, location: str, metadata: TableMetadata, text: str) -> None:
        """Keep ``metadata``, just written to ``location`` as ``text``."""
        if os.environ.get("ROWOPS_CHECK_METADATA_CACHE") and TableMetadataUtil.parse_raw(text) != metadata:
            raise MetadataCacheMismatchError(f"{location}: the written metadata does not parse back equal")
        self._keep(location, metadata)

    def _keep(self, location: str, metadata: TableMetadata) -> None:
        with self._lock:
            self._items[location] = metadata
            self._items.move_to_end(location)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
