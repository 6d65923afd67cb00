"""The lake log: a totally ordered sequence of versions of the whole lakehouse.

Layout (keys below the lake root, all through :class:`~rowops.catalog.storage.Storage`)::

    _rowops/log/00000000000000000001.json   version 1 (put-if-absent; immutable): header + root node
    _rowops/log/_latest                     best-effort hint of the newest version
    _rowops/nodes/ab/ab12….json             immutable trie nodes named by the sha256 of their bytes

A version file holds the transaction that produced it, its timestamp, the table count and the root
of a persistent hash trie of the table map (:mod:`rowops.catalog.trie`): a leaf inline while the
lake has at most 64 tables, else the root's children (node ids). A commit writes the nodes on the
paths of the changed tables first (put-if-absent, so they are durable), then the version file, so
its cost does not grow with the number of tables or versions. Readers find the newest version from
the hint, probing upward until a version is missing (TrinityLake's protocol), and read one table in
``depth`` further node reads, cached per process. Format-1 files (``rowops-lake/1``: the whole map
inline) are read as versions whose root is one big leaf; the next commit splits it.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rowops import faults
from rowops.catalog import trie
from rowops.catalog.storage import AlreadyExists, LocalStorage, OutcomeUnknown, Storage
from rowops.catalog.trie import EMPTY_LEAF, Node, TableEntry
from rowops.errors import CommitStateUnknownError, CorruptLakeError

__all__ = ["EMPTY", "FORMAT", "LakeLog", "LakeVersion", "TableEntry", "VersionTaken"]

FORMAT = "rowops-lake/2"
READABLE_FORMATS = ("rowops-lake/1", FORMAT)
LOG_PREFIX = "_rowops/log/"
HINT_KEY = LOG_PREFIX + "_latest"


class VersionTaken(Exception):
    """Another writer committed this version first."""


def _no_nodes(node_id: str) -> Node:
    raise CorruptLakeError(f"Lake version references node {node_id} but has no storage to read it from")


@dataclass(frozen=True, eq=False)
class LakeVersion:
    """One committed version of the lake; table entries are read from its trie on demand."""

    version: int
    timestamp_ms: int = 0
    transaction: dict[str, Any] = field(default_factory=dict)
    root: Node = EMPTY_LEAF
    _load: trie.NodeReader = field(default=_no_nodes, repr=False)

    @property
    def table_count(self) -> int:
        return self.root.count

    def get(self, name: str) -> TableEntry | None:
        """The entry of table ``name`` in this version, or None (reads ``depth`` nodes, cached)."""
        return trie.lookup(self.root, name, self._load)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def items(self) -> Iterator[tuple[str, TableEntry]]:
        """Every (name, entry) of this version, in no particular order (reads the whole trie)."""
        return trie.items(self.root, self._load)

    def names(self) -> list[str]:
        """Every table name of this version, sorted (reads the whole trie)."""
        return sorted(name for name, _ in self.items())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LakeVersion):
            return NotImplemented
        mine = (self.version, self.timestamp_ms, self.transaction, self.root)
        return mine == (other.version, other.timestamp_ms, other.transaction, other.root)

    def __hash__(self) -> int:
        return hash((self.version, self.timestamp_ms))

    def to_bytes(self) -> bytes:
        body = {
            "format": FORMAT,
            "version": self.version,
            "parent-version": self.version - 1 if self.version > 0 else None,
            "timestamp-ms": self.timestamp_ms,
            "transaction": self.transaction,
            "table-count": self.table_count,
            **trie.node_body(self.root),
        }
        return json.dumps(body, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes, where: str, load: trie.NodeReader = _no_nodes) -> LakeVersion:
        try:
            body = json.loads(data)
            if body.get("format") not in READABLE_FORMATS:
                raise ValueError(f"unknown format {body.get('format')!r}")
            root = trie.node_from_body(body)
            return cls(
                int(body["version"]), int(body["timestamp-ms"]), body.get("transaction", {}), root, load
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptLakeError(f"Lake log file {where} is unreadable: {exc}") from exc


EMPTY = LakeVersion(0)


def version_key(version: int) -> str:
    return f"{LOG_PREFIX}{version:020d}.json"


class LakeLog:
    """Reads and appends versions of the lake log of the lakehouse at ``root``."""

    def __init__(self, root: Path | str, storage: Storage | None = None) -> None:
        """Args:
        root: the lake root: a local directory, or (with ``storage``) any location.
        storage: where the log lives; by default a :class:`LocalStorage` on ``root``.
        """
        self.dir = Path(root) / "_rowops" / "log"  # the log's directory when the storage is local
        if storage is None:
            storage = LocalStorage(Path(root))
            self.dir.mkdir(parents=True, exist_ok=True)
        self.storage = storage

    def _path(self, version: int) -> Path:
        return self.dir / f"{version:020d}.json"

    # -- reading ---------------------------------------------------------------------------------
    def read(self, version: int) -> LakeVersion:
        """Version ``version`` (0 is the empty lake); ``FileNotFoundError`` if it does not exist."""
        if version == 0:
            return EMPTY
        key = version_key(version)
        return LakeVersion.from_bytes(self.storage.read(key), key, self._load_node)

    def _try_read(self, version: int) -> LakeVersion | None:
        try:
            return self.read(version)
        except FileNotFoundError:
            return None

    def _load_node(self, node_id: str) -> Node:
        node = trie.cached(node_id)
        if node is not None:
            return node
        key = trie.node_key(node_id)
        try:
            data = self.storage.read(key)
            if trie.encode(node := trie.node_from_body(json.loads(data)))[0] != node_id:
                raise ValueError("its content does not match its name")
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptLakeError(f"Lake node {key} is unreadable: {exc}") from exc
        trie.remember(node_id, node)
        return node

    def latest(self) -> LakeVersion:
        """The newest committed version (the empty lake if none): the hint, its version, one probe."""
        try:
            version = max(0, int(self.storage.read(HINT_KEY).decode().strip() or 0))
        except (FileNotFoundError, ValueError):
            version = 0
        current = self._try_read(version)
        while current is None:  # a hint is never ahead of the log, but be safe with hand-edited files
            version -= 1
            current = self._try_read(version)
        return self._probe_up(current)

    def _probe_up(self, current: LakeVersion) -> LakeVersion:
        """The newest version at or after ``current`` (versions are contiguous): gallop, then bisect."""
        step = 1
        while (found := self._try_read(current.version + step)) is not None:
            current, step = found, step * 2
        low, high = current.version, current.version + step  # low exists, high does not
        while high - low > 1:
            middle = (low + high) // 2
            found = self._try_read(middle)
            if found is None:
                high = middle
            else:
                low, current = middle, found
        return current

    def versions(self) -> list[int]:
        """All committed version numbers, ascending (lists the log)."""
        names = (key[len(LOG_PREFIX) :] for key in self.storage.list(LOG_PREFIX))
        return sorted(int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit())

    def history(self, start: int = 1, stop: int | None = None) -> Iterator[LakeVersion]:
        """Versions ``start`` ≤ v < ``stop`` (default: up to the newest), ascending."""
        if stop is None:
            stop = self.latest().version + 1
        for version in range(start, stop):
            yield self.read(version)

    def version_at(self, timestamp_ms: int) -> LakeVersion:
        """The newest version committed at or before ``timestamp_ms`` (the empty lake if none).

        Version timestamps increase strictly, so this is a binary search: O(log versions) reads.
        """
        newest = self.latest()
        if newest.timestamp_ms <= timestamp_ms:
            return newest
        low, high, found = 0, newest.version, EMPTY  # timestamp(low) <= t < timestamp(high)
        while high - low > 1:
            middle = (low + high) // 2
            version = self.read(middle)
            if version.timestamp_ms <= timestamp_ms:
                low, found = middle, version
            else:
                high = middle
        return found

    def referenced_entries(self) -> Iterator[TableEntry]:
        """Every distinct table entry any version ever held, each immutable node read once."""
        seen_nodes: set[str] = set()
        seen: set[TableEntry] = set()
        for version in self.history():
            for entry in self._entries_below(version.root, seen_nodes):
                if entry not in seen:
                    seen.add(entry)
                    yield entry

    def named_entries(self) -> Iterator[tuple[str, TableEntry]]:
        """Every distinct (table name, entry) pair any version held, each immutable node read once."""
        seen_nodes: set[str] = set()
        seen: set[tuple[str, TableEntry]] = set()
        for version in self.history():
            for pair in self._pairs_below(version.root, seen_nodes):
                if pair not in seen:
                    seen.add(pair)
                    yield pair

    def _pairs_below(self, node: Node, seen_nodes: set[str]) -> Iterator[tuple[str, TableEntry]]:
        if isinstance(node, trie.Leaf):
            yield from node.entries.items()
            return
        for child in node.children.values():
            if child.node not in seen_nodes:
                seen_nodes.add(child.node)
                yield from self._pairs_below(self._load_node(child.node), seen_nodes)

    def new_entries(self, version: LakeVersion, seen_nodes: set[str]) -> Iterator[TableEntry]:
        """The entries of ``version``'s trie below nodes not in ``seen_nodes`` (which this updates): a
        caller that keeps ``seen_nodes`` between calls reads each immutable node once."""
        return self._entries_below(version.root, seen_nodes)

    def _entries_below(self, node: Node, seen_nodes: set[str]) -> Iterator[TableEntry]:
        return (entry for _, entry in self._pairs_below(node, seen_nodes))

    # -- writing ---------------------------------------------------------------------------------
    def commit(
        self, base: LakeVersion, changes: Mapping[str, TableEntry | None], transaction: dict[str, Any]
    ) -> LakeVersion:
        """Commit the next version after ``base``: its tables with ``changes`` applied (None drops).

        Writes the new trie nodes first (durable before the version references them), then the
        version with put-if-absent. Nodes of a lost attempt stay: they are immutable and may be
        shared. ``transaction["id"]`` identifies the writer: when the version exists already and
        carries this id, it is this writer's own (a retried link reported as a conflict) and counts
        as committed. Timestamps increase strictly: ``max(now, base + 1 ms)``.

        Raises:
            VersionTaken: another writer committed this version (this attempt certainly lost).
            CommitStateUnknownError: storage failed during or after the put; the version may exist.
            OSError: writing a node failed; the version was not attempted, nothing was committed.
        """
        builder = trie.Builder(self._load_node)
        root = builder.apply(base.root, changes)
        timestamp = max(int(time.time() * 1000), base.timestamp_ms + 1)
        new = LakeVersion(base.version + 1, timestamp, transaction, root, self._load_node)
        self._put_nodes(builder.written)
        try:
            self._put_version(new)
        except AlreadyExists:
            self._make_durable(version_key(new.version))  # its writer may have died before syncing
            mine = transaction.get("id")
            existing = self._read_after_conflict(new.version)
            if mine is None or existing.transaction.get("id") != mine:
                raise VersionTaken(new.version) from None
            new = existing
        except OutcomeUnknown as exc:
            raise CommitStateUnknownError(
                f"The commit of lake version {new.version} (transaction {transaction.get('id')}) may or may "
                f"not have landed: {exc}"
            ) from exc
        with contextlib.suppress(OSError):  # the hint is only an optimization; the version is committed
            self.storage.put(HINT_KEY, str(new.version).encode())
        return new

    def _put_nodes(self, nodes: Mapping[str, bytes]) -> None:
        """Put the new nodes, in parallel (their fsyncs or PUTs overlap); all are durable on return.

        A storage without durability (``LocalStorage(durable=False)``, benchmark builds) has nothing
        to overlap: its puts run in this thread.
        """
        if len(nodes) <= 1 or not getattr(self.storage, "durable", True):
            for item in nodes.items():
                self._put_node(item)
            return
        with ThreadPoolExecutor(max_workers=min(8, len(nodes)), thread_name_prefix="rowops-nodes") as pool:
            list(pool.map(self._put_node, nodes.items()))

    def _put_node(self, item: tuple[str, bytes]) -> None:
        node_id, data = item
        try:
            self.storage.put_if_absent(trie.node_key(node_id), data)
        except AlreadyExists:  # the identical node (same content, same name) is there already, linked
            self._make_durable(trie.node_key(node_id))  # by a writer that may have died before its sync
        except OutcomeUnknown as exc:
            raise OSError(f"Writing lake node {node_id} failed; nothing was committed: {exc}") from exc

    def _make_durable(self, key: str) -> None:
        try:
            self.storage.make_durable(key)
        except OSError as exc:
            raise OSError(f"Syncing existing lake file {key} failed; nothing was committed: {exc}") from exc

    def _put_version(self, new: LakeVersion) -> None:
        self.storage.put_if_absent(version_key(new.version), new.to_bytes())
        try:
            faults.check_os("commit-unknown")  # as if the directory sync after the link failed
        except OSError as exc:
            raise OutcomeUnknown(
                f"lake version {new.version} was linked, then storage failed: {exc}"
            ) from exc

    def _read_after_conflict(self, version: int) -> LakeVersion:
        try:
            return self.read(version)
        except (OSError, CorruptLakeError) as exc:
            raise CommitStateUnknownError(
                f"Lake version {version} exists but cannot be read to tell whose it is: {exc}"
            ) from exc
