"""The harness of the Hermitage suite (``test_hermitage.py``): rows x and y, transactions that
check every read against the pinned lake version plus their own writes, and the final checks.

Rows are named, not numbered: ``x`` is ``id = 1`` (value 10), ``y`` is ``id = 2`` (value 20) and ``z``
is ``id = 5`` (inserted by PMP). The single-table variant keeps them all in ``db.test``; the
multi-table variant puts ``x`` in ``db.a`` and ``y``, ``z`` in ``db.b``.

Layout: tables are partitioned by ``truncate(2, id)``, and ``x`` and ``y`` each share their data file
with a filler row no scenario writes (``fx``: id 0, ``fy``: id 3; values no predicate of the suite
matches). So x and y live in different files, and a conflict the suite sees is a conflict of rows
whatever the encoding's granularity (copy-on-write rewrites whole files), while position deletes
really are position deletes (rowops drops a data file instead when all its rows go).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from pyiceberg.manifest import DataFileContent
from pyspark.sql import types as T

import rowops
from rowops.errors import CommitConflictError, ConflictKind
from tests.readers import assert_readers_agree
from tests.spark.tables import fingerprint

SCHEMA = T.StructType([T.StructField("id", T.LongType()), T.StructField("value", T.LongType())])
IDS = {"x": 1, "y": 2, "z": 5, "fx": 0, "fy": 3}
FILLERS = {"fx": 1000, "fy": 1001}
INITIAL = {"x": 10, "y": 20} | FILLERS
PLACES = {
    "single": dict.fromkeys(IDS, "db.test"),
    "multi": {"x": "db.a", "fx": "db.a", "y": "db.b", "fy": "db.b", "z": "db.b"},
}
PARTITION_BY = ["truncate(2, id)"]  # {fx, x} and {y, fy} in two files; z in a third partition

ENCODED = {
    "position-delete": {DataFileContent.POSITION_DELETES},
    "equality-delete": {DataFileContent.EQUALITY_DELETES},
    "copy-on-write": set(),
}
State = dict[str, dict[int, int]]  # table -> id -> value


class Hermit:
    """One lake set up for one scenario: the rows' tables, the isolation level and the encoding."""

    def __init__(
        self, lake: rowops.Lakehouse, variant: str, isolation: str, encoding: str, java: Any
    ) -> None:
        self.lake, self.isolation, self.encoding, self.java = lake, isolation, encoding, java
        self.place = PLACES[variant]
        self.tables = sorted(set(self.place.values()))
        for table in self.tables:
            rows = [(IDS[r], v) for r, v in INITIAL.items() if self.place[r] == table]
            lake.create_table(
                table, lake.spark.createDataFrame(rows, SCHEMA), PARTITION_BY, identifier=["id"]
            )
        self.start = lake.version
        self._pinned: dict[tuple[int, str], dict[int, int]] = {}

    def table(self, row: str) -> str:
        return self.place[row]

    def pinned(self, version: int, table: str) -> dict[int, int]:
        """The table as of lake ``version``, read outside any transaction (versions never change)."""
        if (version, table) not in self._pinned:
            self._pinned[version, table] = rows_of(self.lake.at(version=version).table(table))
        return dict(self._pinned[version, table])

    def begin(self) -> Tx:
        return Tx(self)

    def assert_final(self, expected: dict[str, int], committed: Iterable[Tx]) -> None:
        """The committed state is ``expected`` (row -> value; fillers unchanged unless given) through
        every reader (DuckDB included), and the lake history since setup holds exactly the
        ``committed`` transactions, in order."""
        expected = FILLERS | expected
        for table in self.tables:
            rows = sorted((IDS[r], v) for r, v in expected.items() if self.place[r] == table)
            assert_readers_agree(self.lake.table(table), rows, ["id", "value"], self.java)
        ids = [c.transaction_id for c in self.lake.history(since=self.start + 1)]
        assert ids == [t.tx.id for t in committed]

    def assert_snapshots(self, row: str, states: list[dict[str, int]]) -> None:
        """The history of the table of ``row`` (its snapshot log, what time travel by timestamp reads)
        has exactly one entry per committed state, ``states`` oldest first, each a descendant of the
        one before, and every reader sees each state by time travel. (A transaction publishes each
        statement's snapshot, as Iceberg does, for incremental readers; only the last was ever the
        table's current state.)"""
        table = self.lake.table(self.table(row))
        metadata = table.metadata
        history = [e.snapshot_id for e in metadata.snapshot_log]
        assert len(history) == len(states), history
        parents = {s.snapshot_id: s.parent_snapshot_id for s in metadata.snapshots}
        for older, newer in itertools.pairwise(history):
            at: int | None = newer
            while at is not None and at != older:
                at = parents.get(at)
            assert at == older, f"snapshot {older} is not an ancestor of {newer}"
        for snapshot_id, state in zip(history, states, strict=True):
            rows = sorted((IDS[r], v) for r, v in (FILLERS | state).items() if self.place[r] == table.name)
            assert_readers_agree(table, rows, ["id", "value"], self.java, snapshot_id)


def rows_of(table: rowops.Table) -> dict[int, int]:
    rows = [(r["id"], r["value"]) for r in table.to_df().collect()]
    found = dict(rows)
    assert len(found) == len(rows), f"duplicate ids in {table.name}: {sorted(rows)}"
    return found


class Tx:
    """A transaction of the scenario; every read is checked against ``lake.at(begin_version)`` plus
    the writes this transaction made (replayed in plain Python)."""

    def __init__(self, hermit: Hermit) -> None:
        self.h = hermit
        self.tx = hermit.lake.begin(isolation=hermit.isolation)
        self.own: list[Callable[[State], None]] = []

    # -- reads -----------------------------------------------------------------------------------
    def expected(self) -> State:
        state = {t: self.h.pinned(self.tx.begin_version, t) for t in self.h.tables}
        for write in self.own:
            write(state)
        return state

    def _read(self, tables: Iterable[str]) -> State:
        expected = self.expected()
        seen = {t: rows_of(self.tx.table(t)) for t in sorted(set(tables))}
        assert seen == {t: expected[t] for t in seen}, "a read is not the pinned version plus own writes"
        return seen

    def read(self, *rows: str) -> dict[str, int | None]:
        """``select * from test where id in (...)``: the values of ``rows`` (None: no such row)."""
        seen = self._read(self.h.table(r) for r in rows)
        return {r: seen[self.h.table(r)].get(IDS[r]) for r in rows}

    def select(self, predicate: Callable[[int], bool]) -> list[int]:
        """``select * from test where <predicate on value>`` over every table: the values found."""
        seen = self._read(self.h.tables)
        return sorted(v for rows in seen.values() for v in rows.values() if predicate(v))

    # -- writes ----------------------------------------------------------------------------------
    def set(self, row: str, value: int) -> None:
        """``update test set value = <value> where id = <row>`` in the scenario's encoding."""
        table, key = self.h.table(row), IDS[row]
        if self.h.encoding == "equality-delete":  # an upsert of the new value: nothing to scan
            source = self.h.lake.spark.createDataFrame([(key, value)], SCHEMA)
            self.tx.merge(source, table, on=["id"], strategy=self.h.encoding)
        else:
            self.tx.update(table, {"value": str(value)}, where=f"id = {key}", strategy=self.h.encoding)
        self.own.append(lambda s: s[table].__setitem__(key, value))
        contents = {f.content for f in self.tx.table(table).files().deletes}
        assert contents == ENCODED[self.h.encoding], contents  # the encoding really wrote what it says

    def insert(self, row: str, value: int) -> None:
        table, key = self.h.table(row), IDS[row]
        self.tx.append(table, self.h.lake.spark.createDataFrame([(key, value)], SCHEMA))
        self.own.append(lambda s: s[table].__setitem__(key, value))

    def add_to_all(self, amount: int) -> None:
        """``update test set value = value + <amount>`` (every table of the variant)."""
        for table in self.h.tables:
            self.tx.update(table, {"value": f"value + {amount}"}, strategy=self.h.encoding)

        def write(state: State) -> None:
            for rows in state.values():
                rows.update({k: v + amount for k, v in rows.items()})

        self.own.append(write)

    def delete_where(self, value: int) -> None:
        """``delete from test where value = <value>`` (every table of the variant)."""
        for table in self.h.tables:
            self.tx.delete(table, where=f"value = {value}", strategy=self.h.encoding)

        def write(state: State) -> None:
            for rows in state.values():
                for k in [k for k, v in rows.items() if v == value]:
                    del rows[k]

        self.own.append(write)

    # -- ending ----------------------------------------------------------------------------------
    def commit(self) -> int | None:
        version = self.tx.commit()
        assert self.tx.state == "committed"
        assert version is None if not self.own else version == self.h.lake.version
        return version

    def rollback(self) -> None:
        self.tx.rollback()
        assert self.tx.state == "rolled back"

    def commit_conflicts(self, kind: ConflictKind, row: str, other: Tx) -> CommitConflictError:
        """Commit fails with ``kind`` on the table of ``row``, naming ``other``; the lake is unchanged."""
        lake = self.h.lake
        version, files = lake.version, fingerprint(lake.root)
        with pytest.raises(CommitConflictError) as caught:
            self.tx.commit()
        error = caught.value
        assert (error.kind, error.table) == (kind, self.h.table(row)), str(error)
        assert error.other_transaction == other.tx.id and error.retry_safe, str(error)
        assert "Help:" in str(error)
        assert self.tx.state == "failed" and lake.version == version
        assert fingerprint(lake.root).items() <= files.items()  # nothing added or changed
        return error
