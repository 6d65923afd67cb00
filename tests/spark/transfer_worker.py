"""A writer process for the multi-process transaction suites (``test_transaction_processes.py``).

Run as ``python -m tests.spark.transfer_worker '<json config>'``. The process opens the lake with its
own local SparkSession (``local[1]``) and runs transfer transactions: each one reads the source
balance, moves an amount between two accounts of ``db.accounts`` and/or ``db.savings`` with MERGEs,
and appends one row to ``db.ledger`` whose ``tx`` is the transaction id. A transaction that loses a
conflict (``CommitConflictError`` with ``retry_safe``) is run again from the start, as a new
transaction.

The worker reports what it does as JSON lines appended to its ``events`` file, one unbuffered
``write`` per line (``O_APPEND``), so that whoever kills the process knows the last phase it reached:
``ready``, ``begin``, ``commit`` (``tx.commit()`` called), ``put`` (the put-if-absent of a lake
version is about to be called), ``put-ok`` / ``put-lost``, ``committed``, ``abort``, ``done``.
``stretch`` (seconds) makes the worker sleep a random time up to it right before and right after
each put-if-absent, which widens the commit window for crash injection; the put itself is unchanged.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import types as T

import rowops
from rowops.catalog.log import LakeLog, VersionTaken
from rowops.exec.spark.session import configure

ACCOUNTS = T.StructType([T.StructField("id", T.LongType()), T.StructField("balance", T.LongType())])
LEDGER = T.StructType(
    [
        T.StructField("tx", T.StringType()),
        T.StructField("src", T.LongType()),
        T.StructField("dst", T.LongType()),
        T.StructField("amount", T.LongType()),
    ]
)
# account ids are unique across both balance tables, so the ledger names an account by id alone
TABLE_IDS = {"db.accounts": list(range(1, 9)), "db.savings": list(range(101, 109))}
INITIAL = 1000
STRATEGIES = ("position-delete", "copy-on-write", "equality-delete")


def table_of(account: int) -> str:
    return next(name for name, ids in TABLE_IDS.items() if account in ids)


def initial_balances() -> dict[int, int]:
    return {i: INITIAL for ids in TABLE_IDS.values() for i in ids}


class Events:
    """Appends one JSON line per event with a single ``write`` (visible at once, even after a kill)."""

    def __init__(self, path: str, worker: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.worker = worker

    def __call__(self, event: str, **fields: Any) -> None:
        line = {"e": event, "w": self.worker, "t": time.time(), **fields}
        os.write(self.fd, (json.dumps(line) + "\n").encode())


class _StretchedPut:
    """Wraps this process's ``LakeLog.commit``: reports the put and sleeps around it."""

    def __init__(self, log: LakeLog, events: Events, stretch: float, rng: random.Random) -> None:
        self.commit = log.commit
        self.events, self.stretch, self.rng = events, stretch, rng
        log.commit = self  # type: ignore[method-assign]  # instance attribute, this process only

    def __call__(self, base: Any, changes: Any, transaction: dict[str, Any]) -> Any:
        tx = transaction.get("id")
        self.events("put", tx=tx, version=base.version + 1)
        self._sleep()
        try:
            version = self.commit(base, changes, transaction)
        except VersionTaken:
            self.events("put-lost", tx=tx, version=base.version + 1)
            raise
        self.events("put-ok", tx=tx, version=version.version)
        self._sleep()
        return version

    def _sleep(self) -> None:
        if self.stretch > 0:
            time.sleep(self.rng.uniform(0, self.stretch))


def balances(table: rowops.Table) -> dict[int, int]:
    return {r["id"]: r["balance"] for r in table.to_df().collect()}


def transfer(tx: rowops.Transaction, rng: random.Random, strategy: str) -> dict[str, Any]:
    """Move a random amount between two random accounts (of one or both tables) and log it."""
    spark = tx.lake.spark
    src, dst = rng.sample(sorted(initial_balances()), 2)
    # the transaction depends on a read: it never overdraws the source account
    have = balances(tx.table(table_of(src)))[src]
    amount = min(rng.randint(1, 50), have)
    changes: dict[str, dict[int, int]] = {}
    for account, delta in ((src, -amount), (dst, amount)):
        changes.setdefault(table_of(account), {})[account] = delta
    for name, deltas in sorted(changes.items()):
        if strategy == "equality-delete":  # cannot read the target in the MERGE: upsert new values
            now = balances(tx.table(name))
            rows = [(i, now[i] + d) for i, d in sorted(deltas.items())]
            tx.merge(spark.createDataFrame(rows, ACCOUNTS), name, on=["id"], strategy=strategy)
        else:
            change = spark.createDataFrame(sorted(deltas.items()), ACCOUNTS)
            tx.table(name).merge(change, on=["id"]).when_matched().update(
                {"balance": "t.balance + s.balance"}
            ).execute(strategy)
    tx.append("db.ledger", spark.createDataFrame([(tx.id, src, dst, amount)], LEDGER))
    return {"src": src, "dst": dst, "amount": amount}


def run_one(lake: rowops.Lakehouse, config: dict[str, Any], rng: random.Random, events: Events) -> None:
    """One transfer, retried as a whole transaction while it loses retry-safe conflicts."""
    strategy = config["strategy"]
    for attempt in range(1, int(config.get("max_attempts", 50)) + 1):
        chosen = rng.choice(STRATEGIES) if strategy == "mix" else strategy
        tx = lake.begin(isolation=config["isolation"])
        events("begin", tx=tx.id, attempt=attempt, strategy=chosen, isolation=tx.isolation)
        try:
            what = transfer(tx, rng, chosen)
            events("commit", tx=tx.id, **what)
            version = tx.commit()
        except rowops.CommitConflictError as exc:
            events(
                "abort",
                tx=tx.id,
                kind=exc.kind.value,
                retry_safe=exc.retry_safe,
                table=exc.table,
                other=exc.other_transaction,
                message=str(exc)[:500],
            )
            if not exc.retry_safe:
                raise
            continue
        except BaseException:
            tx.rollback()
            raise
        events("committed", tx=tx.id, version=version, attempt=attempt)
        return
    events("gave-up", attempts=attempt)


def session() -> SparkSession:
    spark = (
        SparkSession.builder.master("local[1]")
        .appName(f"rowops-transfer-{os.getpid()}")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "768m")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return configure(spark)


def main(config: dict[str, Any]) -> None:
    """Run ``config["count"]`` transfers (0: until killed)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    events = Events(config["events"], config["name"])
    rng = random.Random(config.get("seed"))
    lake = rowops.Lakehouse(config["lake"], spark=session())
    _StretchedPut(lake.catalog.log, events, float(config.get("stretch", 0.0)), rng)
    events("ready", pid=os.getpid())
    go = config.get("go")
    while go and not Path(go).exists():
        time.sleep(0.01)
    count = int(config.get("count", 0))
    done = 0
    while count == 0 or done < count:
        run_one(lake, config, rng, events)
        done += 1
    events("done")
    lake.spark.stop()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
