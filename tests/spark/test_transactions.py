"""Multi-statement, multi-table transactions: atomicity, pinned reads, rebase, isolation, history,
lake time travel, rollback_to and cleanup. Every committed table is read back through independent
readers (DuckDB, PyIceberg, Iceberg's Java reader)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

import rowops
from rowops.errors import (
    CommitConflictError,
    ConflictKind,
    InvalidInputError,
    NoSuchTableError,
    ReadOnlyError,
    TableAlreadyExistsError,
    TransactionClosedError,
)
from tests.readers import assert_readers_agree
from tests.spark.tables import fingerprint

ACCOUNTS = T.StructType([T.StructField("id", T.LongType()), T.StructField("balance", T.LongType())])
LEDGER = T.StructType(
    [
        T.StructField("tx", T.StringType()),
        T.StructField("src", T.LongType()),
        T.StructField("dst", T.LongType()),
        T.StructField("amount", T.LongType()),
    ]
)


def accounts(spark: SparkSession, rows: dict[int, int]) -> Any:
    return spark.createDataFrame(sorted(rows.items()), ACCOUNTS)


@pytest.fixture()
def bank(lake: rowops.Lakehouse) -> rowops.Lakehouse:
    """``db.accounts`` (ids 1..6, balance 100 each) and an empty ``db.ledger``."""
    lake.create_table("db.accounts", accounts(lake.spark, {i: 100 for i in range(1, 7)}), identifier=["id"])
    lake.create_table("db.ledger", LEDGER)
    return lake


def balances(table: rowops.Table) -> dict[int, int]:
    return {r["id"]: r["balance"] for r in table.to_df().collect()}


def transfer(tx: rowops.Transaction, src: int, dst: int, amount: int, strategy: str = "auto") -> None:
    """Move ``amount`` from ``src`` to ``dst`` and log it.

    Scanning encodings compute the new balances in the MERGE from the target; equality deletes cannot
    read the target, so the transaction reads the balances first and upserts the new values.
    """
    spark = tx.lake.spark
    if strategy == "equality-delete":
        now = balances(tx.table("db.accounts"))
        rows = {src: now[src] - amount, dst: now[dst] + amount}
        tx.merge(accounts(spark, rows), "db.accounts", on=["id"], strategy=strategy)
    else:
        change = spark.createDataFrame([(src, -amount), (dst, amount)], ACCOUNTS)
        tx.table("db.accounts").merge(change, on=["id"]).when_matched().update(
            {"balance": "t.balance + s.balance"}
        ).execute(strategy)
    tx.append("db.ledger", spark.createDataFrame([(tx.id, src, dst, amount)], LEDGER))


def test_two_table_transaction_commits_as_one_version(
    bank: rowops.Lakehouse, strategy: str, java: Any
) -> None:
    before = bank.version
    with bank.transaction() as tx:
        transfer(tx, 1, 2, 30, strategy)
        # the transaction reads its own writes; the lake does not see them yet
        assert balances(tx.table("db.accounts"))[1] == 70
        assert tx.table("db.ledger").to_df().count() == 1
        assert balances(bank.table("db.accounts"))[1] == 100
        assert bank.table("db.ledger").to_df().count() == 0
        assert bank.version == before
    assert bank.version == before + 1 == tx.version
    entry = bank.history()[-1]
    assert entry.transaction_id == tx.id and entry.isolation == "serializable"
    assert set(entry.tables) == {"db.accounts", "db.ledger"}
    if strategy != "equality-delete":  # an equality-delete upsert cannot tell updates from inserts
        assert entry.rows_inserted == 1 and entry.rows_updated == 2
    expected = {i: 100 for i in range(1, 7)} | {1: 70, 2: 130}
    assert_readers_agree(bank.table("db.accounts"), sorted(expected.items()), ["id", "balance"], java)
    assert_readers_agree(bank.table("db.ledger"), [(tx.id, 1, 2, 30)], ["tx", "src", "dst", "amount"], java)


def test_exception_rolls_back_and_leaves_the_lake_unchanged(bank: rowops.Lakehouse, tmp_path: Path) -> None:
    before, files = bank.version, fingerprint(bank.root)
    with pytest.raises(RuntimeError, match="boom"), bank.transaction() as tx:
        transfer(tx, 1, 2, 30, "position-delete")
        tx.create_table("db.audit", accounts(bank.spark, {1: 1}))
        raise RuntimeError("boom")
    assert tx.state == "rolled back"
    assert bank.version == before
    assert fingerprint(bank.root) == files  # staged data, manifests and metadata all removed
    with pytest.raises(TransactionClosedError):
        tx.table("db.accounts")


def test_begin_commit_and_explicit_rollback(bank: rowops.Lakehouse) -> None:
    tx = bank.begin(isolation="snapshot")
    tx.update("db.accounts", {"balance": "balance + 1"}, where="id = 3")
    tx.rollback()
    assert balances(bank.table("db.accounts"))[3] == 100
    tx = bank.begin(isolation="snapshot")
    tx.delete("db.accounts", where="id = 6")
    version = tx.commit()
    assert version == bank.version and 6 not in balances(bank.table("db.accounts"))
    assert bank.history()[-1].isolation == "snapshot"


def test_reads_are_pinned_at_begin(bank: rowops.Lakehouse) -> None:
    tx = bank.begin()
    assert balances(tx.table("db.accounts"))[4] == 100
    bank.table("db.accounts").update({"balance": "0"}, where="id = 4")  # commits outside tx
    assert balances(tx.table("db.accounts"))[4] == 100  # still the pinned version
    tx.rollback()


def test_rebase_over_a_concurrent_commit_to_another_table(bank: rowops.Lakehouse) -> None:
    bank.create_table("db.other", accounts(bank.spark, {1: 1}))
    tx = bank.begin(isolation="serializable")
    transfer(tx, 1, 2, 10)
    bank.table("db.other").append(accounts(bank.spark, {2: 2}))  # another transaction wins the race
    assert tx.commit() == bank.version
    assert balances(bank.table("db.accounts"))[1] == 90
    assert sorted(balances(bank.table("db.other")).items()) == [(1, 1), (2, 2)]


def test_disjoint_rows_of_one_file_rebase_without_rewriting(bank: rowops.Lakehouse) -> None:
    tx = bank.begin(isolation="snapshot")
    tx.update("db.accounts", {"balance": "balance + 5"}, where="id = 1", strategy="position-delete")
    written = {f.path for f in tx.table("db.accounts").files().deletes}
    bank.table("db.accounts").update({"balance": "balance + 7"}, where="id = 2", strategy="position-delete")
    tx.commit()
    final = bank.table("db.accounts")
    assert balances(final)[1] == 105 and balances(final)[2] == 107
    assert written <= {f.path for f in final.files().deletes}  # the same delete file, rebased


def test_lost_update_aborts_under_snapshot_isolation(bank: rowops.Lakehouse) -> None:
    tx = bank.begin(isolation="snapshot")
    tx.update("db.accounts", {"balance": "balance + 5"}, where="id = 1", strategy="position-delete")
    bank.table("db.accounts").update({"balance": "balance + 7"}, where="id = 1", strategy="position-delete")
    before = fingerprint(bank.root)
    with pytest.raises(CommitConflictError) as err:
        tx.commit()
    assert err.value.table == "db.accounts" and err.value.retry_safe
    assert err.value.other_transaction == bank.history()[-1].transaction_id
    after = fingerprint(bank.root)
    assert after.items() <= before.items()  # nothing new, nothing changed
    left = bank.cleanup(older_than=timedelta(0)).removed  # no file of it stays but Spark's sidecars
    assert all(Path(p).name == "_SUCCESS" or p.endswith(".crc") for p in left), left
    assert balances(bank.table("db.accounts"))[1] == 107


@pytest.mark.parametrize("isolation", ["serializable", "snapshot"])
def test_write_depending_on_a_read_of_another_table(bank: rowops.Lakehouse, isolation: str) -> None:
    """TrinityLake's admitted gap: a write to one table computed from a read of another that changed."""
    tx = bank.begin(isolation=isolation)
    total = sum(balances(tx.table("db.accounts")).values())
    tx.append("db.ledger", bank.spark.createDataFrame([("audit", 0, 0, total)], LEDGER))
    bank.table("db.accounts").update({"balance": "balance - 1"}, where="id = 1")
    if isolation == "snapshot":
        tx.commit()  # snapshot isolation allows this write skew
        return
    with pytest.raises(CommitConflictError) as err:
        tx.commit()
    assert err.value.kind == ConflictKind.READ_CHANGED and err.value.table == "db.accounts"
    assert bank.table("db.ledger").to_df().count() == 0


def test_create_fill_and_drop_inside_transactions(bank: rowops.Lakehouse, java: Any) -> None:
    with bank.transaction() as tx:
        t = tx.create_table("db.fresh", accounts(bank.spark, {1: 10}), identifier=["id"])
        t.merge(
            accounts(bank.spark, {1: 11, 2: 20}), on=["id"]
        ).when_matched().update_all().when_not_matched().insert_all().execute()
        assert "db.fresh" in tx.list_tables("db") and "db.fresh" not in bank.list_tables("db")
    created = bank.version
    assert_readers_agree(bank.table("db.fresh"), [(1, 11), (2, 20)], ["id", "balance"], java)
    with bank.transaction() as tx:
        tx.drop_table("db.fresh")
        transfer(tx, 3, 4, 1)
    assert "db.fresh" not in bank.list_tables("db")
    assert sorted(balances(bank.at(version=created).table("db.fresh")).items()) == [(1, 11), (2, 20)]


def test_time_travel_and_rollback_to_across_tables(bank: rowops.Lakehouse) -> None:
    start = bank.version
    with bank.transaction() as tx:
        transfer(tx, 1, 2, 50)
    bank.create_table("db.later", accounts(bank.spark, {9: 9}))
    old = bank.at(version=start)
    assert balances(old.table("db.accounts"))[1] == 100 and old.table("db.ledger").to_df().count() == 0
    assert bank.at(timestamp=bank.history()[-1].timestamp_ms).version == bank.version
    with pytest.raises(ReadOnlyError):
        old.table("db.accounts").update({"balance": "0"})
    new = bank.rollback_to(start)
    assert new == bank.version == start + 3
    assert balances(bank.table("db.accounts"))[1] == 100
    assert bank.table("db.ledger").to_df().count() == 0 and "db.later" not in bank.list_tables("db")
    assert len(bank.history()) == new  # history is kept
    bank.rollback_to(start + 2)  # and the rollback itself can be rolled back
    assert "db.later" in bank.list_tables("db") and balances(bank.table("db.accounts"))[1] == 50


def test_cleanup_removes_orphans_and_keeps_committed_files(bank: rowops.Lakehouse) -> None:
    kept = fingerprint(bank.root)
    transfer_tx = bank.begin()
    transfer(transfer_tx, 1, 2, 5, "copy-on-write")
    bank.create_table("db.kept", accounts(bank.spark, {1: 1}))
    # a transaction that dies without rollback: its staged files stay behind as orphans
    crashed = bank.begin()
    transfer(crashed, 3, 4, 5, "position-delete")
    del crashed
    transfer_tx.rollback()
    assert bank.cleanup().orphans_removed == 0  # young orphans are kept by default
    result = bank.cleanup(older_than=timedelta(0))
    assert result.orphans_removed > 0
    after = fingerprint(bank.root)
    sidecars = {p for p in kept if Path(p).name == "_SUCCESS" or p.endswith(".crc")}
    assert set(kept) - sidecars <= set(after)
    assert balances(bank.table("db.accounts")) == {i: 100 for i in range(1, 7)}
    assert balances(bank.table("db.kept")) == {1: 1}
    # every remaining table file is referenced by some version
    assert bank.cleanup(older_than=timedelta(0)).removed == ()


@pytest.mark.parametrize(
    ("isolation", "strategy", "both_commit"),
    [
        ("serializable", "position-delete", False),
        ("serializable", "equality-delete", False),
        ("snapshot", "equality-delete", False),
        ("snapshot", "position-delete", True),
    ],
)
def test_two_transactions_inserting_the_same_new_key(
    bank: rowops.Lakehouse, isolation: str, strategy: str, both_commit: bool
) -> None:
    """Serializable: exactly one commits. Snapshot: equality deletes make it a write-write conflict;
    scanning encodings see no common row, so both commit and the key is there twice (documented)."""
    first, second = bank.begin(isolation=isolation), bank.begin(isolation=isolation)
    first.merge(accounts(bank.spark, {99: 1}), "db.accounts", on=["id"], strategy=strategy)
    second.merge(accounts(bank.spark, {99: 2}), "db.accounts", on=["id"], strategy=strategy)
    first.commit()
    if both_commit:
        second.commit()
        rows = [r["balance"] for r in bank.table("db.accounts").to_df().filter("id = 99").collect()]
        assert sorted(rows) == [1, 2]
        return
    with pytest.raises(CommitConflictError) as err:
        second.commit()
    assert err.value.other_transaction == first.id and err.value.retry_safe
    assert balances(bank.table("db.accounts"))[99] == 1


def test_orphans_are_removed_automatically(spark: SparkSession, tmp_path: Path) -> None:
    lake = rowops.Lakehouse(tmp_path / "lake", spark=spark, cleanup_age=timedelta(0), cleanup_every=3)
    lake.create_table("db.accounts", accounts(spark, {1: 1}))  # version 1
    abandoned = lake.begin()
    abandoned.append("db.accounts", accounts(spark, {2: 2}))  # staged, never committed
    committed = {f.path for f in lake.table("db.accounts").files().data}
    staged = {f.path for f in abandoned.table("db.accounts").files().data} - committed
    assert staged
    del abandoned
    lake.table("db.accounts").append(accounts(spark, {3: 3}))  # version 2: no cleanup yet
    assert all(Path(p.removeprefix("file:")).exists() for p in staged)
    lake.table("db.accounts").append(accounts(spark, {4: 4}))  # version 3: cleanup starts, off the write
    assert lake.background_cleanup.wait(timeout=120) is not None
    assert not any(Path(p.removeprefix("file:")).exists() for p in staged)
    assert sorted(balances(lake.table("db.accounts"))) == [1, 3, 4]


def test_bad_transaction_input_is_a_clear_error_and_changes_nothing(bank: rowops.Lakehouse) -> None:
    before, files = bank.version, fingerprint(bank.root)
    with pytest.raises(InvalidInputError, match="isolation"):
        bank.transaction(isolation="read-committed")
    with pytest.raises(InvalidInputError, match="versions are 0 to"):
        bank.at(version=bank.version + 1)
    with pytest.raises(InvalidInputError, match="exactly one"):
        bank.at(version=1, timestamp=0)
    with pytest.raises(InvalidInputError, match="versions are 0 to"):
        bank.rollback_to(-1)
    tx = bank.begin()
    with pytest.raises(TableAlreadyExistsError):
        tx.create_table("db.accounts", ACCOUNTS)
    with pytest.raises(NoSuchTableError):
        tx.drop_table("db.missing")
    tx.commit()
    assert tx.version is None  # nothing changed: no version
    assert bank.version == before and fingerprint(bank.root) == files
