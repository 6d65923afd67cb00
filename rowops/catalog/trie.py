"""The table map of a lake version as a persistent (copy-on-write) hash trie of immutable nodes.

A node at depth ``d`` holding at most :data:`LEAF_MAX` tables is a :class:`Leaf` (name → entry); a
larger one is a :class:`Branch` of up to :data:`FANOUT` children chosen by the ``d``-th 5-bit digit
of ``sha256(name)``, each child stored with its table count. The shape is a function of the map
alone (a branch whose count drops to ``LEAF_MAX`` collapses back into a leaf), so equal maps give
equal nodes and identical nodes are shared between versions.

Every node but the root is a file named by the sha256 of its bytes (content addressing: a node is
immutable, can be cached forever and written with put-if-absent by anyone). Changing ``k`` tables
rewrites only the nodes on their paths: with 10,000 tables the trie is 3 levels deep.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

FANOUT_BITS = 5
FANOUT = 1 << FANOUT_BITS
LEAF_MAX = 64
MAX_DEPTH = 256 // FANOUT_BITS  # digits of a sha256; a leaf this deep never splits
CACHE_NODES = 4096


@dataclass(frozen=True)
class TableEntry:
    """A table as one lake version sees it."""

    metadata_location: str
    table_uuid: str

    def to_json(self) -> dict[str, str]:
        return {"metadata-location": self.metadata_location, "table-uuid": self.table_uuid}


@dataclass(frozen=True)
class Leaf:
    """Up to ``LEAF_MAX`` tables (more only in a format-1 root or below ``MAX_DEPTH``)."""

    entries: Mapping[str, TableEntry]

    @property
    def count(self) -> int:
        return len(self.entries)


@dataclass(frozen=True)
class Child:
    """A reference to a stored node and the number of tables below it."""

    node: str
    count: int


@dataclass(frozen=True)
class Branch:
    """Children by hash digit; together they hold more than ``LEAF_MAX`` tables."""

    children: Mapping[int, Child]

    @property
    def count(self) -> int:
        return sum(c.count for c in self.children.values())


Node = Leaf | Branch
NodeReader = Callable[[str], Node]
EMPTY_LEAF = Leaf({})


def name_hash(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest(), "big")


def digit(hashed: int, depth: int) -> int:
    """The ``depth``-th 5-bit digit of a name's hash (most significant first)."""
    return (hashed >> (256 - FANOUT_BITS * (depth + 1))) & (FANOUT - 1)


# -- encoding --------------------------------------------------------------------------------------
def node_body(node: Node) -> dict[str, Any]:
    """The JSON object of a node (a version file inlines its root's)."""
    if isinstance(node, Leaf):
        return {"tables": {name: e.to_json() for name, e in sorted(node.entries.items())}}
    return {
        "children": {str(d): {"node": c.node, "count": c.count} for d, c in sorted(node.children.items())}
    }


def node_from_body(body: Mapping[str, Any]) -> Node:
    """Parse :func:`node_body`'s output (``KeyError``/``TypeError``/``ValueError`` if malformed)."""
    if "children" in body:
        return Branch({int(d): Child(str(c["node"]), int(c["count"])) for d, c in body["children"].items()})
    return Leaf({n: TableEntry(t["metadata-location"], t["table-uuid"]) for n, t in body["tables"].items()})


def encode(node: Node) -> tuple[str, bytes]:
    """The id (sha256 of the bytes) and canonical bytes of a stored node."""
    data = json.dumps(node_body(node), sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(data).hexdigest(), data


def node_key(node_id: str) -> str:
    """The storage key of a node (sharded by its first two hex digits, as git does)."""
    return f"_rowops/nodes/{node_id[:2]}/{node_id}.json"


# -- the process-wide cache (nodes are immutable and named by content, so any lake may share it) ---
_cache: OrderedDict[str, Node] = OrderedDict()
_cache_lock = threading.Lock()


def cached(node_id: str) -> Node | None:
    with _cache_lock:
        node = _cache.get(node_id)
        if node is not None:
            _cache.move_to_end(node_id)
        return node


def remember(node_id: str, node: Node) -> None:
    with _cache_lock:
        _cache[node_id] = node
        _cache.move_to_end(node_id)
        while len(_cache) > CACHE_NODES:
            _cache.popitem(last=False)


def clear_cache() -> None:
    """Forget every cached node (benchmarks measure cold reads with it)."""
    with _cache_lock:
        _cache.clear()


# -- reading ---------------------------------------------------------------------------------------
def lookup(root: Node, name: str, load: NodeReader) -> TableEntry | None:
    """The entry of ``name``: one node read per level below the root."""
    hashed, node, depth = name_hash(name), root, 0
    while isinstance(node, Branch):
        child = node.children.get(digit(hashed, depth))
        if child is None:
            return None
        node, depth = load(child.node), depth + 1
    return node.entries.get(name)


def items(node: Node, load: NodeReader) -> Iterator[tuple[str, TableEntry]]:
    """Every (name, entry) below ``node`` (reads the whole subtree)."""
    if isinstance(node, Leaf):
        yield from node.entries.items()
        return
    for child in node.children.values():
        yield from items(load(child.node), load)


# -- writing ---------------------------------------------------------------------------------------
class Builder:
    """Applies changes to a trie copy-on-write; ``written`` collects the new nodes (id → bytes).

    A node returned by ``_apply``/``_make`` is in memory only; its descendants are in ``written``.
    The caller stores them, then the root goes into the version file.
    """

    def __init__(self, load: NodeReader) -> None:
        self.load = load
        self.written: dict[str, bytes] = {}

    def apply(self, root: Node, changes: Mapping[str, TableEntry | None]) -> Node:
        """The new root: ``root``'s map with ``changes`` applied (None removes a name)."""
        if not changes:
            return root
        hashed = {name: (name_hash(name), entry) for name, entry in changes.items()}
        return self._apply(root, hashed, 0)

    def _apply(self, node: Node, changes: dict[str, tuple[int, TableEntry | None]], depth: int) -> Node:
        if isinstance(node, Leaf):
            entries = dict(node.entries)
            for name, (_, entry) in changes.items():
                if entry is None:
                    entries.pop(name, None)
                else:
                    entries[name] = entry
            return self._make(entries, depth)
        groups: dict[int, dict[str, tuple[int, TableEntry | None]]] = {}
        for name, change in changes.items():
            groups.setdefault(digit(change[0], depth), {})[name] = change
        new = {d: self._apply(self._child(node, d), group, depth + 1) for d, group in sorted(groups.items())}
        kept = {d: c for d, c in node.children.items() if d not in new}
        if sum(c.count for c in kept.values()) + sum(n.count for n in new.values()) <= LEAF_MAX:
            entries = dict(kv for c in kept.values() for kv in items(self.load(c.node), self.load))
            for n in new.values():
                entries.update(items(n, self.load))
            return Leaf(entries)
        children = dict(kept)
        children.update({d: self._store(n) for d, n in new.items() if n.count})
        return Branch(dict(sorted(children.items())))

    def _child(self, node: Branch, d: int) -> Node:
        child = node.children.get(d)
        return self.load(child.node) if child is not None else EMPTY_LEAF

    def _make(self, entries: dict[str, TableEntry], depth: int) -> Node:
        """The canonical node for ``entries`` at ``depth`` (splits a leaf that grew too large)."""
        if len(entries) <= LEAF_MAX or depth >= MAX_DEPTH:
            return Leaf(entries)
        groups: dict[int, dict[str, TableEntry]] = {}
        for name, entry in entries.items():
            groups.setdefault(digit(name_hash(name), depth), {})[name] = entry
        return Branch({d: self._store(self._make(sub, depth + 1)) for d, sub in sorted(groups.items())})

    def _store(self, node: Node) -> Child:
        node_id, data = encode(node)
        self.written[node_id] = data
        remember(node_id, node)
        return Child(node_id, node.count)
