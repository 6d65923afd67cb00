"""Which batches of which pipeline the lake has committed: the record and its index (no Spark here).

A pipeline run commits its tables in one lake transaction whose record carries
``"batch": {"app": <pipeline id>, "id": <batch id>}`` (:func:`batch_record`): the batch is committed
exactly when that lake version exists, atomically with the tables. The lake log is the truth; an index
below ``_rowops/batches/`` only makes the question "was this batch committed?" cheap::

    _rowops/batches/<sha(app)[:16]>/_indexed          hint: every batch of ``app`` in versions <= N is indexed
    _rowops/batches/<sha(app)[:16]>/<sha(batch)>.json {"version": V} (put-if-absent, verified against V)

:meth:`BatchIndex.find` reads the versions after the hint (committed since the pipeline's last
successful run, by anyone), then one index entry and the version it names; it writes nothing, so a
failed or skipped run leaves the lake as it was. The batch record is part of the lake state, as
Delta's transaction identifiers are part of a table's state: ``lake.rollback_to`` a version before
the batch's commit undoes the batch too, and it runs again. So a batch found committed is checked
against the rollbacks since its commit (:meth:`BatchIndex.in_state`, reading the versions after it). :meth:`BatchIndex.record` (after a commit) indexes and
moves the hint. A run therefore never reads the whole history; a lost index write (a crash right after
the commit) only means the next run reads a few more versions.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from typing import Any

from rowops.catalog.log import LakeLog, LakeVersion
from rowops.catalog.storage import AlreadyExists, OutcomeUnknown
from rowops.errors import BatchAlreadyCommittedError

PREFIX = "_rowops/batches/"


def batch_record(app: str, batch: str, source: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``batch`` field of a transaction record; ``source``: where a chained pipeline's source read
    up to (``{"table": name, "version": lake version}``), committed atomically with the batch."""
    return {"app": app, "id": batch, **({"source": dict(source)} if source is not None else {})}


def source_position(log: LakeLog, app: str, table: str, upto: LakeVersion) -> int:
    """The lake version up to which the newest batch of ``app`` in the lake state ``upto`` read the
    change feed of ``table`` (0: none did). A lake rollback's version stands for its target's state:
    batches it undid do not count (they run again, and read their changes again).

    Reads the versions back from ``upto`` to that batch: the versions since the pipeline's last run.
    """
    version = upto
    while version.version > 0:
        target = rollback_target(version)
        if target is not None:
            version = log.read(target)
            continue
        record: Any = (version.transaction or {}).get("batch")
        source = record.get("source") if isinstance(record, dict) and record.get("app") == app else None
        if isinstance(source, dict) and source.get("table") == table:
            return int(source["version"])
        version = log.read(version.version - 1)
    return 0


def committed_batch(version: LakeVersion) -> dict[str, str] | None:
    """The batch a version committed, if any."""
    record: Any = (version.transaction or {}).get("batch")
    if isinstance(record, dict) and "app" in record and "id" in record:
        return {"app": str(record["app"]), "id": str(record["id"])}
    return None


def rollback_target(version: LakeVersion) -> int | None:
    """The version a ``lake.rollback_to`` version made the lake equal to, if it is one."""
    record: Any = version.transaction or {}
    if record.get("isolation") == "rollback" and "target-version" in record:
        return int(record["target-version"])
    return None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class BatchIndex:
    """The batches committed per pipeline, read from the lake log and indexed beside it."""

    def __init__(self, log: LakeLog) -> None:
        self.log = log
        self.storage = log.storage

    def _dir(self, app: str) -> str:
        return f"{PREFIX}{_digest(app)[:16]}/"

    def _entry_key(self, app: str, batch: str) -> str:
        return f"{self._dir(app)}{_digest(batch)}.json"

    def indexed_up_to(self, app: str) -> int:
        """The version up to which every batch of ``app`` is indexed (0: none)."""
        try:
            return max(0, int(self.storage.read(self._dir(app) + "_indexed").decode().strip() or 0))
        except (FileNotFoundError, ValueError):
            return 0

    def find(self, app: str, batch: str, upto: LakeVersion) -> int | None:
        """The lake version ≤ ``upto`` that committed ``batch`` of ``app``, or None (writes nothing).

        Reads the versions after the index hint (committed since the pipeline's last successful run),
        then one index entry and the version it names.
        """
        found = self.catch_up(app, upto.version, write=False)
        version = found[batch] if batch in found else self._lookup(app, batch, upto.version)
        return None if version is None else self.in_state(app, batch, version, upto.version)

    def in_state(self, app: str, batch: str, version: int, upto: int) -> int | None:
        """The commit of ``batch`` (``version`` or a later one) the lake state at ``upto`` holds, or
        None when a ``lake.rollback_to`` undid it.

        Walks back from ``upto``: a rollback's state is its target's, so the walk jumps there; a
        commit of the batch on the way is the one in the state. Landing below ``version``, an earlier
        commit of the batch (the index's entry) may still be in the state.
        """
        record = batch_record(app, batch)
        current = upto
        while current > version:
            lake_version = self.log.read(current)
            if committed_batch(lake_version) == record:
                return current
            target = rollback_target(lake_version)
            current = target if target is not None else current - 1
        if current == version:
            return version
        earlier = self._lookup(app, batch, current)
        return None if earlier is None or earlier >= version else self.in_state(app, batch, earlier, current)

    def _lookup(self, app: str, batch: str, upto: int) -> int | None:
        try:
            version = int(json.loads(self.storage.read(self._entry_key(app, batch)))["version"])
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            return None
        if not 0 < version <= upto:
            return None
        return version if committed_batch(self.log.read(version)) == batch_record(app, batch) else None

    def catch_up(self, app: str, upto: int, write: bool = True) -> dict[str, int]:
        """The batches of ``app`` committed in versions after the hint up to ``upto`` (batch → version).

        With ``write``, indexes them and moves the hint to ``upto``. Index writes are best effort:
        when one fails the hint stays where it was, so the next run reads those versions again.
        """
        start = self.indexed_up_to(app) + 1
        found: dict[str, int] = {}
        for version in self.log.history(start, upto + 1) if start <= upto else ():
            record = committed_batch(version)
            if record is not None and record["app"] == app:
                found.setdefault(record["id"], version.version)
        if write and start <= upto:
            with contextlib.suppress(OSError):
                for batch, version_number in found.items():
                    self._put_entry(app, batch, version_number)
                self.storage.put(self._dir(app) + "_indexed", str(upto).encode())
        return found

    def record(self, app: str, batch: str, version: int) -> None:
        """Index ``batch`` committed at ``version`` (best effort: the lake log stays the truth)."""
        with contextlib.suppress(OSError):
            self._put_entry(app, batch, version)
        self.catch_up(app, version)

    def _put_entry(self, app: str, batch: str, version: int) -> None:
        body = json.dumps({"app": app, "batch": batch, "version": version}).encode()
        with contextlib.suppress(AlreadyExists):  # indexed already (by an earlier catch-up)
            try:
                self.storage.put_if_absent(self._entry_key(app, batch), body)
            except OutcomeUnknown as exc:
                raise OSError(str(exc)) from exc


def same_batch_between(log: LakeLog, record: dict[str, Any], after: int, upto: int) -> LakeVersion | None:
    """The version in (``after``, ``upto``] that committed the batch ``record`` (its app and id), if any."""
    pair = {"app": str(record["app"]), "id": str(record["id"])}
    for version in log.history(after + 1, upto + 1):
        if committed_batch(version) == pair:
            return version
    return None


def refuse_committed_batch(log: LakeLog, record: dict[str, Any], after: int, upto: int, txn_id: str) -> None:
    """Raise when a version in (``after``, ``upto``] committed the batch ``record`` (a transaction's check)."""
    done = same_batch_between(log, record, after, upto)
    if done is not None:
        raise BatchAlreadyCommittedError(
            f"Batch {record['id']!r} of pipeline {record['app']!r} was committed by transaction "
            f"{done.transaction.get('id')} (lake version {done.version}) while transaction {txn_id} ran; "
            "nothing of this one was committed",
            version=done.version,
        )
