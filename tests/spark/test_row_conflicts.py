"""Row-level conflicts: a writer that lost the race rebases unless the other writer changed its rows.

Each test reproduces a lost race in-process with real Spark and real files: operation A is planned
and executed against a pinned table state (a handle whose ``load()`` returns the state captured
before operation B), B commits in between, so A's commit finds the table moved and must rebase
(``catalog/tables.py`` → ``find_conflict``). The table has a single data file, so both operations
always touch the same file; whether they conflict depends on the rows.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO

import rowops
from rowops.catalog.tables import LoadedTable
from rowops.errors import CommitConflictError, ConflictKind
from rowops.meta.files import live_files
from rowops.table import Table
from tests.readers import assert_readers_agree
from tests.spark.tables import COLUMNS, LAYOUTS, Oracle, fingerprint, frame, make_row

N = 20
KEYED = LAYOUTS[0]  # unpartitioned, key k


class Pinned(Table):
    """A handle on ``table`` that keeps reading the state it was created with (a stale reader)."""

    def __init__(self, table: Table) -> None:
        super().__init__(table.lake, table.identifier)
        self._loaded = table.load()

    def load(self) -> LoadedTable:
        return self._loaded


@pytest.fixture()
def table(lake):  # type: ignore[no-untyped-def]
    rows = frame(lake.spark, [make_row(k) for k in range(N)]).coalesce(1)
    t = lake.create_table("db.t", rows, identifier=["k"])
    assert len(live_files(t.metadata, PyArrowFileIO()).data) == 1  # every operation hits this file
    return t


def _merge(table: Table, keys: list[int], version: int, strategy: str) -> list[Any]:
    rows = [make_row(k, version) for k in keys]
    rowops.merge(frame(table.lake.spark, rows), table, on=["k"], strategy=strategy)
    return rows


def _assert_rebased(table: Table) -> None:
    """The last snapshot was planned before the previous one and re-applied on top of it."""
    snapshots = table.snapshots()
    assert len(snapshots) == 3 and snapshots[2]["parent_id"] == snapshots[1]["snapshot_id"]


def _assert_conflict(table: Table, caught: CommitConflictError, kind: ConflictKind) -> None:
    assert caught.kind == kind and "Help:" in str(caught)
    assert len(table.snapshots()) == 2  # A committed nothing


def test_disjoint_rows_of_one_file(lake, table, strategy, java) -> None:  # type: ignore[no-untyped-def]
    """Two MERGEs of different keys of the one data file, serializable (the default).

    Position deletes: the deleted positions are disjoint, so both commit. Equality deletes: blind
    upserts always rebase. Copy-on-write: both rewrote the file; the rewrite has no row mapping to
    the old file, so this stays a file-level conflict (documented).
    """
    oracle = Oracle(KEYED, [make_row(k) for k in range(N)])
    stale = Pinned(table)
    oracle.upsert(_merge(table, [10, 11], 1, strategy))
    before = fingerprint(lake.root)
    if strategy == "copy-on-write":
        with pytest.raises(CommitConflictError) as caught:
            _merge(stale, [2, 3], 2, strategy)
        _assert_conflict(table, caught.value, ConflictKind.DELETE_DELETE)
        assert fingerprint(lake.root) == before
    else:
        oracle.upsert(_merge(stale, [2, 3], 2, strategy))
        _assert_rebased(table)
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_same_rows_of_one_file(lake, table, strategy, java) -> None:  # type: ignore[no-untyped-def]
    """Two MERGEs that both change key 4: a write-write conflict, except for blind equality deletes
    (the later upsert replaces the key; no read was invalidated)."""
    oracle = Oracle(KEYED, [make_row(k) for k in range(N)])
    (data,) = live_files(table.metadata, PyArrowFileIO()).data
    stale = Pinned(table)
    oracle.upsert(_merge(table, [4, 5], 1, strategy))
    before = fingerprint(lake.root)
    if strategy == "equality-delete":
        oracle.upsert(_merge(stale, [3, 4], 2, strategy))
        _assert_rebased(table)
    else:
        with pytest.raises(CommitConflictError) as caught:
            _merge(stale, [3, 4], 2, strategy)
        kind = (
            ConflictKind.DELETE_DELETE if strategy == "copy-on-write" else ConflictKind.CONCURRENT_DELETE_READ
        )
        _assert_conflict(table, caught.value, kind)
        if strategy == "position-delete":  # names the file and the common position (key 4 is row 4)
            assert f"positions 4 of {data.path}" in str(caught.value)
        assert fingerprint(lake.root) == before
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


@pytest.mark.parametrize("detection", ["row", "file"])
def test_disjoint_updates_with_position_deletes(lake, table, detection, java) -> None:  # type: ignore[no-untyped-def]
    """UPDATEs of different rows of one file (snapshot isolation: an UPDATE read the whole table, so
    under serializable the other's new data file conflicts anyway). Row level: both commit; file
    level (``rowops.conflict-detection=file``): the second conflicts."""
    table.set_properties(**{"rowops.isolation-level": "snapshot", "rowops.conflict-detection": detection})
    stale = Pinned(table)
    rowops.update(table, {"n": "100"}, where="k = 7", strategy="position-delete")
    before = fingerprint(lake.root)
    expected = {k: make_row(k) for k in range(N)}
    expected[7] = (*make_row(7)[:-1], 100)
    if detection == "file":
        with pytest.raises(CommitConflictError) as caught:
            rowops.update(stale, {"n": "200"}, where="k = 12", strategy="position-delete")
        assert caught.value.kind == ConflictKind.CONCURRENT_DELETE_READ
        assert fingerprint(lake.root) == before
    else:
        rowops.update(stale, {"n": "200"}, where="k = 12", strategy="position-delete")
        expected[12] = (*make_row(12)[:-1], 200)
    assert_readers_agree(table, expected.values(), COLUMNS, java)


@pytest.mark.parametrize("keys", [[15, 16], [3]], ids=["disjoint keys", "a common key"])
def test_position_deletes_vs_concurrent_equality_deletes(lake, table, keys, java) -> None:  # type: ignore[no-untyped-def]
    """A position-delete MERGE of keys 2..3 lost the race to an equality-delete upsert: it conflicts
    only if the equality delete's keys can be among its rows (its read set's key range)."""
    oracle = Oracle(KEYED, [make_row(k) for k in range(N)])
    stale = Pinned(table)
    oracle.upsert(_merge(table, keys, 1, "equality-delete"))
    before = fingerprint(lake.root)
    if 3 in keys:
        with pytest.raises(CommitConflictError) as caught:
            _merge(stale, [2, 3], 2, "position-delete")
        _assert_conflict(table, caught.value, ConflictKind.CONCURRENT_DELETE_READ)
        assert "equality deletes" in str(caught.value)
        assert fingerprint(lake.root) == before
    else:
        oracle.upsert(_merge(stale, [2, 3], 2, "position-delete"))
        _assert_rebased(table)
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_copy_on_write_vs_concurrent_position_deletes_stays_file_level(lake, table, java) -> None:  # type: ignore[no-untyped-def]
    """Copy-on-write of the file lost the race to position deletes of *other* rows of it: the
    rewrite would resurrect those rows, so it conflicts although the rows differ."""
    oracle = Oracle(KEYED, [make_row(k) for k in range(N)])
    stale = Pinned(table)
    oracle.upsert(_merge(table, [10], 1, "position-delete"))
    before = fingerprint(lake.root)
    with pytest.raises(CommitConflictError) as caught:
        _merge(stale, [2], 2, "copy-on-write")
    _assert_conflict(table, caught.value, ConflictKind.CONCURRENT_DELETE_READ)
    assert "resurrect" in str(caught.value)
    assert fingerprint(lake.root) == before
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_rebased_position_deletes_stack_on_earlier_deletes(lake, table, java) -> None:  # type: ignore[no-untyped-def]
    """The file already has deletes at the base (both racers carry those positions into their new
    delete files): only the new positions are compared, both commit, the file then has two live
    delete files with common positions, and later operations on the file still read and write right."""
    oracle = Oracle(KEYED, [make_row(k) for k in range(N)])
    oracle.upsert(_merge(table, [1, 17], 1, "position-delete"))
    stale = Pinned(table)
    oracle.upsert(_merge(table, [10, 11], 2, "position-delete"))
    oracle.upsert(_merge(stale, [2, 3], 3, "position-delete"))
    files = live_files(table.metadata, PyArrowFileIO())
    assert len(files.position_deletes) == 2  # one per racer, each with the positions of keys 1 and 17
    rowops.delete(table, where="k IN (3, 4, 11)", strategy="position-delete")
    oracle.delete_keys([make_row(k) for k in (3, 4, 11)])
    oracle.upsert(_merge(table, [2, 5, 10], 4, "position-delete"))
    assert_readers_agree(table, oracle.values(), COLUMNS, java)
