"""Leases: the lake versions running transactions and pinned views read, in any process, kept from expiry.

A transaction (when it begins) and a pinned view (``lake.at(v)``) each write a lease into the lake's
storage, ``_rowops/leases/<uuid>.json``: the lake version they read and when the lease lapses
(``LEASE_TTL_MS`` after it was written or last renewed). Every table load through the holder renews
it once half that time has passed; it is deleted when the transaction ends, or when the view is
closed or garbage-collected. A process that dies leaves its lease to lapse.

``expire_snapshots`` does not remove a snapshot that a live lease's version still reads (the table's
state there: its current snapshot, branches and tags); a later expiry, once the lease is gone,
removes it. Lapsed leases older than ``SWEEP_AFTER_MS`` are deleted by expiries. Leases are read
before each expiry attempt commits: a transaction that begins after that reads the newest version,
whose current snapshots no expiry removes.

>>> Lease.parse(b'{"version": 7, "expires-ms": 2000}').version
7
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from pyiceberg.table.metadata import TableMetadata

from rowops.catalog.expired import ref_snapshots
from rowops.catalog.log import LakeLog, LakeVersion

LEASE_PREFIX = "_rowops/leases/"
LEASE_TTL_MS = 60 * 60 * 1000  # one hour without a table load lets a lease lapse
SWEEP_AFTER_MS = 24 * 60 * 60 * 1000


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class Lease:
    """One lease as stored: the lake version it keeps readable and when it lapses."""

    version: int
    expires_ms: int

    @staticmethod
    def parse(data: bytes) -> Lease:
        body = json.loads(data)
        return Lease(int(body["version"]), int(body["expires-ms"]))

    def to_bytes(self) -> bytes:
        return json.dumps({"version": self.version, "expires-ms": self.expires_ms}).encode()


class Holder:
    """The lease of one transaction or pinned view: taken at creation, renewed by ``touch``, released once."""

    def __init__(self, log: LakeLog, version: int, ttl_ms: int = LEASE_TTL_MS) -> None:
        self.log = log
        self.version = version
        self.ttl_ms = ttl_ms
        self.key = f"{LEASE_PREFIX}{uuid.uuid4().hex}.json"
        self.written_ms = 0
        self.released = False
        self._lock = threading.Lock()
        self._write(_now_ms())

    def move(self, version: int) -> None:
        """Hold ``version`` instead (a newer one: see ``pin_newest``)."""
        self.version = version
        self._write(_now_ms())

    def touch(self) -> None:
        """Renew the lease when half its time has passed (a no-op after release)."""
        now = _now_ms()
        if not self.released and now - self.written_ms >= self.ttl_ms // 2:
            self._write(now)

    def release(self) -> None:
        """Delete the lease (idempotent; a failure leaves it to lapse)."""
        with self._lock:
            if self.released:
                return
            self.released = True
        with contextlib.suppress(OSError):
            self.log.storage.delete(self.key)

    def _write(self, now: int) -> None:
        with self._lock:
            if self.released:
                return
            self.log.storage.put(self.key, Lease(self.version, now + self.ttl_ms).to_bytes())
            self.written_ms = now


def pin_newest(log: LakeLog) -> tuple[LakeVersion, Holder]:
    """The newest lake version, held by a lease written before the version was last confirmed newest.

    An expiry can remove a snapshot only once a newer version stopped pointing at it; if that happened
    before the expiry read the leases, this reader saw the newer version after writing its lease and
    moved to it; if after, the expiry saw the lease. So what the returned version reads stays.
    """
    version = log.latest()
    holder = Holder(log, version.version)
    while (newest := log.latest()).version != holder.version:
        version = newest
        holder.move(newest.version)
    return version, holder


@dataclass(frozen=True)
class LiveLeases:
    """The versions live leases keep, and the keys of leases lapsed long enough to delete."""

    versions: frozenset[int]
    lapsed: tuple[str, ...]


def live_leases(log: LakeLog, now_ms: int | None = None) -> LiveLeases:
    """Read every lease once (a lease deleted meanwhile, or unreadable, keeps nothing)."""
    now = _now_ms() if now_ms is None else now_ms
    versions: set[int] = set()
    lapsed: list[str] = []
    for key in log.storage.list(LEASE_PREFIX):
        try:
            lease = Lease.parse(log.storage.read(key))
        except (OSError, ValueError, KeyError):
            continue
        if lease.expires_ms >= now:
            versions.add(lease.version)
        elif now - lease.expires_ms >= SWEEP_AFTER_MS:
            lapsed.append(key)
    return LiveLeases(frozenset(versions), tuple(lapsed))


def leased_snapshots(
    log: LakeLog, read: Callable[[str], TableMetadata], name: str, table_uuid: str, leases: LiveLeases
) -> set[int]:
    """Snapshot ids of table ``name`` (this ``table_uuid``) that a live lease's lake version reads."""
    kept: set[int] = set()
    for version in sorted(leases.versions):
        entry = log.read(version).get(name)  # a read error raises: the expiry then commits nothing
        if entry is None:
            continue
        metadata = read(entry.metadata_location)
        if str(metadata.table_uuid) == table_uuid:
            kept.update(ref_snapshots(metadata).values())
    return kept


def sweep(log: LakeLog, leases: LiveLeases) -> None:
    """Delete leases that lapsed long ago (their holders died)."""
    for key in leases.lapsed:
        with contextlib.suppress(OSError):
            log.storage.delete(key)
