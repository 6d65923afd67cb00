"""The lake log: a totally ordered sequence of versions of the whole lakehouse.

Layout (below the lake root)::

    _rowops/log/00000000000000000001.json   version 1 (put-if-absent; immutable)
    _rowops/log/00000000000000000002.json   version 2 ...
    _rowops/log/_latest                     best-effort hint of the newest version

Each version is self-contained: it maps every table to its current Iceberg ``metadata.json`` and
records the transaction that produced it (one or more table commits). A multi-table transaction is
one version touching several tables, so it needs no format change. Readers find the newest version
by starting at the hint and probing upward until a version is missing (TrinityLake's protocol).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rowops.catalog.storage import AlreadyExists, OutcomeUnknown, put_if_absent, write_hint
from rowops.errors import CommitStateUnknownError, CorruptLakeError

FORMAT = "rowops-lake/1"


class VersionTaken(Exception):
    """Another writer committed this version first."""


@dataclass(frozen=True)
class TableEntry:
    """A table as one lake version sees it."""

    metadata_location: str
    table_uuid: str

    def to_json(self) -> dict[str, str]:
        return {"metadata-location": self.metadata_location, "table-uuid": self.table_uuid}


@dataclass(frozen=True)
class LakeVersion:
    """One committed version of the lake."""

    version: int
    tables: dict[str, TableEntry]
    timestamp_ms: int = 0
    transaction: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str) -> TableEntry | None:
        """The entry of table ``name`` in this version, or None."""
        return self.tables.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self.tables

    def names(self) -> list[str]:
        """Every table name of this version, sorted (reads the whole table map)."""
        return sorted(self.tables)

    def to_bytes(self) -> bytes:
        body = {
            "format": FORMAT,
            "version": self.version,
            "parent-version": self.version - 1 if self.version > 0 else None,
            "timestamp-ms": self.timestamp_ms,
            "tables": {name: entry.to_json() for name, entry in sorted(self.tables.items())},
            "transaction": self.transaction,
        }
        return json.dumps(body, indent=1).encode()

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> LakeVersion:
        try:
            body = json.loads(data)
            if body.get("format") != FORMAT:
                raise ValueError(f"unknown format {body.get('format')!r}")
            tables = {
                name: TableEntry(t["metadata-location"], t["table-uuid"])
                for name, t in body["tables"].items()
            }
            return cls(int(body["version"]), tables, int(body["timestamp-ms"]), body.get("transaction", {}))
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptLakeError(f"Lake log file {where} is unreadable: {exc}") from exc


EMPTY = LakeVersion(0, {})


class LakeLog:
    """Reads and appends versions of the lake log under ``root/_rowops/log``."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "_rowops" / "log"
        self.dir.mkdir(parents=True, exist_ok=True)

    def _path(self, version: int) -> Path:
        return self.dir / f"{version:020d}.json"

    def read(self, version: int) -> LakeVersion:
        if version == 0:
            return EMPTY
        path = self._path(version)
        return LakeVersion.from_bytes(path.read_bytes(), str(path))

    def latest(self) -> LakeVersion:
        """The newest committed version (the empty lake if none)."""
        hint = self.dir / "_latest"
        try:
            version = int(hint.read_text().strip() or 0)
        except (FileNotFoundError, ValueError):
            version = 0
        while version > 0 and not self._path(version).exists():
            version -= 1  # a hint can never be ahead of the log, but be safe with hand-edited files
        while self._path(version + 1).exists():
            version += 1
        return self.read(version)

    def versions(self) -> list[int]:
        """All committed version numbers, ascending."""
        return sorted(int(p.stem) for p in self.dir.glob("*.json"))

    def commit(
        self, base: LakeVersion, changes: Mapping[str, TableEntry | None], transaction: dict[str, Any]
    ) -> LakeVersion:
        """Commit the next version after ``base``: its tables with ``changes`` applied (None drops).

        ``transaction["id"]`` identifies the writer: when the version exists already and carries this
        id, it is this writer's own (a retried link reported as a conflict) and counts as committed.

        Raises:
            VersionTaken: another writer committed this version (this attempt certainly lost).
            CommitStateUnknownError: storage failed during or after the put; the version may exist.
        """
        tables = {**base.tables, **{k: v for k, v in changes.items() if v is not None}}
        for name in (k for k, v in changes.items() if v is None):
            tables.pop(name, None)
        new = LakeVersion(base.version + 1, tables, int(time.time() * 1000), transaction)
        try:
            put_if_absent(self._path(new.version), new.to_bytes())
        except AlreadyExists:
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
            write_hint(self.dir / "_latest", str(new.version).encode())
        return new

    def _read_after_conflict(self, version: int) -> LakeVersion:
        try:
            return self.read(version)
        except (OSError, CorruptLakeError) as exc:
            raise CommitStateUnknownError(
                f"Lake version {version} exists but cannot be read to tell whose it is: {exc}"
            ) from exc

    def history(self, start: int = 1, stop: int | None = None) -> Iterator[LakeVersion]:
        """Versions ``start`` .. ``stop`` (default: the newest), ascending."""
        last = self.latest().version if stop is None else stop
        for number in range(max(start, 1), last + 1):
            yield self.read(number)

    def version_at(self, timestamp_ms: int) -> LakeVersion:
        """The newest version committed at or before ``timestamp_ms`` (the empty lake if none)."""
        found = EMPTY
        for version in self.history():
            if version.timestamp_ms > timestamp_ms:
                break
            found = version
        return found
