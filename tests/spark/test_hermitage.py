"""The Hermitage anomaly suite (https://github.com/ept/hermitage, LakeVilla's Table 3) for rowops
transactions, each anomaly single-table (x, y in ``db.test``) and multi-table (x in ``db.a``, y in
``db.b``), under ``serializable`` and ``snapshot`` isolation.

The interleavings are Hermitage's PostgreSQL scripts (``postgres.md``), run in one process. A rowops
transaction's writes are private until commit and never block, so a statement that blocks in
PostgreSQL runs at once here and the conflict surfaces at commit: the later committer aborts. Every
read inside a transaction is checked against ``lake.at(version=tx.begin_version)`` plus its own
writes; every scenario ends by reading the committed state through rowops, DuckDB, PyIceberg (and
Iceberg's Java reader) and checking the lake history holds exactly the transactions that committed.

Results (asserted below). "pinned" = every read saw the pinned version (+ own writes), so the
anomaly cannot show; "abort K" = the later committer got ``CommitConflictError`` of kind K naming
the other transaction, and the lake holds nothing of it. Same outcome single- and multi-table
(the error names the table of the row in conflict) unless a variant is given. delete-delete in
the write forms of PMP and G-single: the first committer replaced every row of y's data file, so
rowops dropped that file instead of writing position deletes.

============ ================================ ================================ =================
anomaly      serializable                     snapshot                         encodings
============ ================================ ================================ =================
G0           prevented: abort                 prevented: abort                 position-delete
             concurrent-delete-read (x)       concurrent-delete-read (x)
G1a          prevented: pinned                prevented: pinned                position-delete
G1b          prevented: pinned; one snapshot  prevented: pinned; one snapshot  position-delete
             per commit (no time travel to    per commit
             the intermediate 101)
G1c          prevented: pinned + abort        prevented: pinned (both commit)  position-delete
             read-changed (x)
OTV          prevented: pinned + abort        prevented: pinned + abort        position-delete
             concurrent-delete-read (x)       concurrent-delete-read (x)
PMP          prevented: pinned; write form    prevented: pinned; write form    position-delete
             abort: single delete-delete (y), abort delete-delete (y)
             multi read-changed (x)
P4           prevented: abort read-changed    prevented: abort (x): pos        all three
             (x), every encoding              concurrent-delete-read, cow
                                              delete-delete, eq write-write
G-single     prevented: pinned; write form    prevented: pinned; write form    position-delete
             abort read-changed (x)           abort delete-delete (y)
G2-item      prevented: abort read-changed    ALLOWED: both commit             all three
             (x)
G2 (write    prevented: abort read-changed    ALLOWED: both commit             position-delete
predicate)   (x)
============ ================================ ================================ =================

Fast subset
(unmarked, position deletes): P4 and G2-item single-table under both levels, G1b single-table and
the G2 predicate-write case multi-table serializable; the rest is ``slow`` (``make test-slow``).
"""

from __future__ import annotations

from typing import Any

import pytest

import rowops
from rowops.errors import ConflictKind
from tests.spark.hermitage import Hermit

LEVELS = ("serializable", "snapshot")
VARIANTS = ("single", "multi")
ENCODINGS = ("position-delete", "copy-on-write", "equality-delete")
POS = "position-delete"
FAST = {("P4", "single", level, POS) for level in LEVELS} | {
    ("G2-item", "single", "serializable", POS),
    ("G2-item", "single", "snapshot", POS),
    ("G1b", "single", "snapshot", POS),
    ("G2-predicate", "multi", "serializable", POS),
}


def matrix(anomaly: str, encodings: tuple[str, ...] = (POS,)) -> Any:
    """``variant, isolation, encoding`` for every combination; all but the fast subset are slow."""
    params = [
        pytest.param(
            variant,
            level,
            encoding,
            id=f"{variant}-{level}-{encoding}",
            marks=() if (anomaly, variant, level, encoding) in FAST else (pytest.mark.slow,),
        )
        for encoding in encodings
        for variant in VARIANTS
        for level in LEVELS
    ]
    return pytest.mark.parametrize(("variant", "isolation", "encoding"), params)


@pytest.fixture()
def hermit(lake: rowops.Lakehouse, variant: str, isolation: str, encoding: str, java: Any) -> Hermit:
    return Hermit(lake, variant, isolation, encoding, java)


@matrix("G0")
def test_g0_write_cycles(hermit: Hermit) -> None:
    t1, t2 = hermit.begin(), hermit.begin()
    t1.set("x", 11)
    t2.set("x", 12)  # blocks in PostgreSQL
    t1.set("y", 21)
    t1.commit()
    t2.set("y", 22)
    t2.commit_conflicts(ConflictKind.CONCURRENT_DELETE_READ, "x", t1)
    hermit.assert_final({"x": 11, "y": 21}, [t1])  # never x from one and y from the other


@matrix("G1a")
def test_g1a_aborted_reads(hermit: Hermit) -> None:
    t1, t2 = hermit.begin(), hermit.begin()
    t1.set("x", 101)
    assert t2.read("x", "y") == {"x": 10, "y": 20}
    t1.rollback()
    assert t2.read("x", "y") == {"x": 10, "y": 20}
    assert t2.commit() is None
    hermit.assert_final({"x": 10, "y": 20}, [])


@matrix("G1b")
def test_g1b_intermediate_reads(hermit: Hermit) -> None:
    t1, t2 = hermit.begin(), hermit.begin()
    t1.set("x", 101)
    assert t2.read("x", "y") == {"x": 10, "y": 20}
    assert t1.read("x") == {"x": 101}  # its own intermediate write
    t1.set("x", 11)
    t1.commit()
    assert t2.read("x", "y") == {"x": 10, "y": 20}  # pinned: neither 101 nor 11
    assert t2.commit() is None
    hermit.assert_final({"x": 11, "y": 20}, [t1])
    # no reader time-travelling by timestamp can see t1's intermediate x = 101: one history entry per
    # commit (the statement's snapshot is published for incremental readers, as Iceberg does)
    hermit.assert_snapshots("x", [{"x": 10, "y": 20}, {"x": 11, "y": 20}])


@matrix("G1c")
def test_g1c_circular_information_flow(hermit: Hermit, isolation: str) -> None:
    t1, t2 = hermit.begin(), hermit.begin()
    t1.set("x", 11)
    t2.set("y", 22)
    assert t1.read("y") == {"y": 20}
    assert t2.read("x") == {"x": 10}
    t1.commit()
    if isolation == "serializable":  # t2 read x, which t1 changed: t2 cannot be ordered after t1
        t2.commit_conflicts(ConflictKind.READ_CHANGED, "x", t1)
        hermit.assert_final({"x": 11, "y": 20}, [t1])
    else:  # each read the other's row before its write: no information flowed, both commit
        t2.commit()
        hermit.assert_final({"x": 11, "y": 22}, [t1, t2])


@matrix("OTV")
def test_otv_observed_transaction_vanishes(hermit: Hermit) -> None:
    t1, t2, t3 = hermit.begin(), hermit.begin(), hermit.begin()
    t1.set("x", 11)
    t1.set("y", 19)
    t2.set("x", 12)  # blocks in PostgreSQL
    t1.commit()
    late = hermit.begin()  # PostgreSQL takes t3's snapshot at its first statement: here
    assert t3.read("x") == {"x": 10} and late.read("x") == {"x": 11}
    t2.set("y", 18)
    assert t3.read("y") == {"y": 20} and late.read("y") == {"y": 19}
    t2.commit_conflicts(ConflictKind.CONCURRENT_DELETE_READ, "x", t1)
    assert t3.read("x", "y") == {"x": 10, "y": 20} and late.read("x", "y") == {"x": 11, "y": 19}
    assert t3.commit() is None and late.commit() is None
    hermit.assert_final({"x": 11, "y": 19}, [t1])


@matrix("PMP")
def test_pmp_predicate_many_preceders(hermit: Hermit, isolation: str) -> None:
    t1, t2 = hermit.begin(), hermit.begin()
    assert t1.select(lambda v: v == 30) == []
    t2.insert("z", 30)
    t2.commit()
    assert t1.select(lambda v: v % 3 == 0) == []  # still nothing: the insert came after t1 began
    assert t1.commit() is None
    # the write-predicate form (PostgreSQL's documentation example), on x=10, y=20, z=30
    t3, t4 = hermit.begin(), hermit.begin()
    t3.add_to_all(10)
    t4.delete_where(20)  # blocks in PostgreSQL; here it deletes y as of its snapshot
    t3.commit()
    if isolation == "serializable" and hermit.table("x") != hermit.table("y"):
        # multi-table: t4's delete matched nothing in x's table, but read it, and t3 changed it
        t4.commit_conflicts(ConflictKind.READ_CHANGED, "x", t3)
    else:  # t3 replaced every row of y's file, so it dropped that file: t4's delete names a gone file
        t4.commit_conflicts(ConflictKind.DELETE_DELETE, "y", t3)
    hermit.assert_final({"x": 20, "y": 30, "z": 40, "fx": 1010, "fy": 1011}, [t2, t3])


@matrix("P4", ENCODINGS)
def test_p4_lost_update(hermit: Hermit, isolation: str, encoding: str) -> None:
    t1, t2 = hermit.begin(), hermit.begin()
    seen1 = t1.read("x")["x"]
    seen2 = t2.read("x")["x"]
    assert seen1 == seen2 == 10
    t1.set("x", seen1 + 1)
    t2.set("x", seen2 + 1)  # blocks in PostgreSQL
    t1.commit()
    kind = {
        "copy-on-write": ConflictKind.DELETE_DELETE,  # t1 rewrote x's file away
        "position-delete": ConflictKind.CONCURRENT_DELETE_READ,  # t1's delete file covers x's file
        "equality-delete": ConflictKind.WRITE_WRITE,  # t1 wrote key 1, which t2 writes
    }[encoding]
    if isolation == "serializable":  # checked first: t2 read x's table, which t1 changed
        kind = ConflictKind.READ_CHANGED
    t2.commit_conflicts(kind, "x", t1)
    hermit.assert_final({"x": 11, "y": 20}, [t1])  # 11 from t1 alone: t2's increment is not lost, it aborted


@matrix("G-single")
def test_g_single_read_skew(hermit: Hermit, isolation: str) -> None:
    t1, t2 = hermit.begin(), hermit.begin()
    assert t1.read("x") == {"x": 10}
    assert t2.read("x") == {"x": 10} and t2.read("y") == {"y": 20}
    t2.set("x", 12)
    t2.set("y", 18)
    t2.commit()
    assert t1.read("y") == {"y": 20}  # x + y = 30 as t1 saw it: no read skew
    assert t1.commit() is None
    # the write-predicate form, on x=12, y=18 (x + y stays 30)
    t3, t4 = hermit.begin(), hermit.begin()
    assert t3.read("x") == {"x": 12}
    assert t4.read("x", "y") == {"x": 12, "y": 18}
    t4.set("x", 13)
    t4.set("y", 17)
    t4.commit()
    t3.delete_where(18)  # PostgreSQL: could not serialize access due to concurrent update
    if isolation == "serializable":
        t3.commit_conflicts(ConflictKind.READ_CHANGED, "x", t4)
    else:  # y = 18 was alone in the file t2 wrote; t4 replaced it, so it dropped that file
        t3.commit_conflicts(ConflictKind.DELETE_DELETE, "y", t4)
    hermit.assert_final({"x": 13, "y": 17}, [t2, t4])


@matrix("G2-item", ENCODINGS)
def test_g2_item_write_skew(hermit: Hermit, isolation: str) -> None:
    t1, t2 = hermit.begin(), hermit.begin()
    assert t1.read("x", "y") == {"x": 10, "y": 20}
    assert t2.read("x", "y") == {"x": 10, "y": 20}
    t1.set("x", 11)
    t2.set("y", 21)
    t1.commit()
    assert t2.read("x", "y") == {"x": 10, "y": 21}  # still its pinned x (not t1's 11) + its own y
    if isolation == "serializable":  # PostgreSQL: read/write dependencies among transactions
        t2.commit_conflicts(ConflictKind.READ_CHANGED, "x", t1)
        hermit.assert_final({"x": 11, "y": 20}, [t1])
    else:  # snapshot isolation allows write skew: disjoint writes, both commit
        t2.commit()
        hermit.assert_final({"x": 11, "y": 21}, [t1, t2])


@matrix("G2-predicate")
def test_g2_predicate_write_that_matched_nothing(hermit: Hermit, isolation: str) -> None:
    """Hermitage's G2 (anti-dependency cycle) with a write predicate: t1's delete matches nothing
    in its snapshot, so it writes nothing, but t2 then commits a row it would have matched; t2's
    write depends on y, which t1 writes. Serializable must abort t1 even though its delete changed
    no file (the delete still read its tables); snapshot isolation lets both commit."""
    t1, t2 = hermit.begin(), hermit.begin()
    t1.delete_where(25)  # nothing has value 25 yet
    seen = t2.read("y")["y"]
    assert seen == 20
    t2.set("x", seen + 5)  # x = 25: would have been deleted had t1 run after t2
    t1.set("y", 21)  # t2 read y = 20: t2 must come before t1, so t1 must see x = 25
    t2.commit()
    if isolation == "serializable":
        t1.commit_conflicts(ConflictKind.READ_CHANGED, "x", t2)
        hermit.assert_final({"x": 25, "y": 20}, [t2])
    else:  # write skew: neither serial order gives x = 25 with y = 21
        t1.commit()
        hermit.assert_final({"x": 25, "y": 21}, [t2, t1])
