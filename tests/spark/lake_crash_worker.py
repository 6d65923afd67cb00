"""A writer or maintenance process of the lake crash suite (``test_lake_processes.py``).

Run as ``python -m tests.spark.lake_crash_worker '<json config>'``; ``config["role"]`` is ``writer`` or
``maintenance``. Both open the lake with their own local SparkSession and loop until killed, reporting
each step as a JSON line of their ``events`` file (``Events`` of ``transfer_worker.py``).

A **writer** runs transfer transactions over ``db.accounts`` (format v2) and ``db.savings`` (v3): each
moves an amount between two accounts and appends one ``db.ledger`` row named by the transaction id,
by MERGE (copy-on-write, position deletes or equality deletes), by UPDATE, or by DELETE and re-insert
of one account (copy-on-write or position deletes; amount 0). Every lake version is then a state where
the balances are the initial ones plus the ledger's transfers.

A **maintenance** process picks one action at a time: ``expire_snapshots`` (ages of seconds,
``retain_last`` 1-3), ``remove_orphans`` and ``lake.cleanup`` at their default (safe) age, compaction,
position-delete compaction, equality-delete conversion, manifest rewrite, ``table.rollback_to`` the
parent of a compaction snapshot that is still the head (same rows), and ``lake.rollback_to`` a recent
version. None of them changes what a lake version holds, so the writers' invariant survives them all.
Retry-safe conflicts, and rollbacks refused because an expiry removed the target, are reported, not
raised; anything else ends the process (the suite fails on it).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from datetime import timedelta
from typing import Any

import rowops
from rowops.errors import CommitConflictError, SnapshotExpiredError
from tests.spark.transfer_worker import (
    ACCOUNTS,
    LEDGER,
    STRATEGIES,
    Events,
    _StretchedPut,
    balances,
    initial_balances,
    session,
    table_of,
    transfer,
)

SCANNING = ("copy-on-write", "position-delete")  # UPDATE / DELETE by condition: no equality deletes
KINDS = ("merge", "merge", "update", "reinsert")
TABLES = ("db.accounts", "db.savings", "db.ledger")


def transfer_by_update(tx: rowops.Transaction, rng: random.Random, strategy: str) -> dict[str, Any]:
    """Move an amount with two UPDATEs (one per account) and log it."""
    src, dst = rng.sample(sorted(initial_balances()), 2)
    amount = min(rng.randint(1, 50), balances(tx.table(table_of(src)))[src])
    tx.update(table_of(src), {"balance": f"balance - {amount}"}, f"id = {src}", strategy)
    tx.update(table_of(dst), {"balance": f"balance + {amount}"}, f"id = {dst}", strategy)
    tx.append("db.ledger", tx.lake.spark.createDataFrame([(tx.id, src, dst, amount)], LEDGER))
    return {"src": src, "dst": dst, "amount": amount}


def reinsert(tx: rowops.Transaction, rng: random.Random, strategy: str) -> dict[str, Any]:
    """DELETE one account's row and append it again with its balance (a zero-amount ledger row)."""
    spark = tx.lake.spark
    account = rng.choice(sorted(initial_balances()))
    name = table_of(account)
    have = balances(tx.table(name))[account]
    tx.delete(name, f"id = {account}", strategy)
    tx.append(name, spark.createDataFrame([(account, have)], ACCOUNTS))
    tx.append("db.ledger", spark.createDataFrame([(tx.id, account, account, 0)], LEDGER))
    return {"src": account, "dst": account, "amount": 0}


def expired_read(exc: BaseException) -> bool:
    """A read of files a concurrent expire removed: rowops' SnapshotExpiredError, or (the defect the
    suite reports, see ``test_lake_processes.py``) Spark's raw ``PATH_NOT_FOUND``."""
    return isinstance(exc, SnapshotExpiredError) or "PATH_NOT_FOUND" in str(exc)


def write_one(lake: rowops.Lakehouse, rng: random.Random, events: Events) -> None:
    """One transaction, retried from the start while it loses retry-safe conflicts."""
    for attempt in range(1, 51):
        kind = rng.choice(KINDS)
        strategy = rng.choice(STRATEGIES if kind == "merge" else SCANNING)
        tx = lake.begin(isolation=rng.choice(["serializable", "snapshot"]))
        events("begin", tx=tx.id, attempt=attempt, kind=kind, strategy=strategy, isolation=tx.isolation)
        try:
            run = {"merge": transfer, "update": transfer_by_update, "reinsert": reinsert}[kind]
            what = run(tx, rng, strategy)
            events("commit", tx=tx.id, **what)
            version = tx.commit()
        except CommitConflictError as exc:
            events("abort", tx=tx.id, kind=exc.kind.value, retry_safe=exc.retry_safe, message=str(exc)[:300])
            if not exc.retry_safe:
                raise
            continue
        except BaseException as exc:
            tx.rollback()
            if not expired_read(exc):
                raise
            # a concurrent expire (ages of seconds) removed files of the version this transaction
            # reads: it must fail, and start again; SnapshotExpiredError is the clear way to say so
            clear = isinstance(exc, SnapshotExpiredError)
            events("expired-read", tx=tx.id, clear=clear, error=type(exc).__name__, message=str(exc)[:600])
            continue
        events("committed", tx=tx.id, version=version, attempt=attempt)
        return
    events("gave-up")


MAINTENANCE = (
    "expire",
    "expire",
    "remove-orphans",
    "cleanup",
    "compact",
    "compact-position-deletes",
    "convert-equality-deletes",
    "rewrite-manifests",
    "table-rollback",
    "lake-rollback",
)


def undo_compaction(table: rowops.Table) -> str:
    """Roll the table back to the parent of its head if the head is a ``replace`` (same rows)."""
    loaded = table.load()
    head = loaded.metadata.current_snapshot()
    if head is None or head.parent_snapshot_id is None or head.summary is None:
        return "no head"
    if head.summary.operation.value != "replace":
        return f"head is {head.summary.operation.value}"
    table.scope.set_current_snapshot(loaded, head.parent_snapshot_id)  # conflicts if the table moved
    return f"rolled back to {head.parent_snapshot_id}"


def maintain_one(lake: rowops.Lakehouse, rng: random.Random, events: Events, config: dict[str, Any]) -> None:
    action = rng.choice(MAINTENANCE)
    name = rng.choice(TABLES)
    table = lake.table(name)
    events("action", action=action, table=name)
    detail: Any = None
    try:
        if action == "expire":
            age = timedelta(seconds=rng.choice([0, 5, 30]))
            result = table.expire_snapshots(older_than=age, retain_last=rng.randint(1, 3))
            detail = str(result)[:200]
        elif action == "remove-orphans":
            detail = len(table.remove_orphans().paths)  # default age: in-flight writes keep their files
        elif action == "cleanup":
            detail = len(lake.cleanup().removed)
        elif action in (
            "compact",
            "compact-position-deletes",
            "convert-equality-deletes",
            "rewrite-manifests",
        ):
            detail = str(getattr(table, action.replace("-", "_"))())[:200]
            if rng.random() < config.get("undo", 0.3):
                events("action", action="table-rollback", table=name)
                detail = undo_compaction(lake.table(name))
        elif action == "table-rollback":
            detail = undo_compaction(table)
        else:
            target = max(1, lake.version - rng.randint(1, 3))  # a recent one: keep most commits
            detail = lake.rollback_to(target)
            events("lake-rollback", target=target, version=detail)
    except CommitConflictError as exc:
        events("conflict", action=action, retry_safe=exc.retry_safe, message=str(exc)[:300])
        if not exc.retry_safe:
            raise
        return
    except SnapshotExpiredError as exc:
        if action != "lake-rollback":
            raise
        events("refused", action=action, message=str(exc)[:300])
        return
    events("done-action", action=action, detail=detail)


def main(config: dict[str, Any]) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    events = Events(config["events"], config["name"])
    rng = random.Random(config.get("seed"))
    lake = rowops.Lakehouse(config["lake"], spark=session())
    _StretchedPut(lake.catalog.log, events, float(config.get("stretch", 0.0)), rng)
    events("ready", pid=os.getpid(), version=lake.version)
    while True:
        if config["role"] == "writer":
            write_one(lake, rng, events)
        else:
            maintain_one(lake, rng, events, config)
            time.sleep(rng.uniform(0, float(config.get("pause", 5.0))))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
