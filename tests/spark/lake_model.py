"""The plain-Python model of a lake for the stateful test (``test_lake_model.py``, issue 42).

It knows nothing of Iceberg: each table is a set of rows ``(k, v[, w])`` keyed by ``k``; the model
remembers the rows of every snapshot a step produced (snapshot ids are observed from the lake after
each commit, rows never are), the refs of every table at every lake version, and which snapshots an
expiry removed. Everything the lake then serves is compared with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

Row = tuple[int | None, ...]
Rows = tuple[Row, ...]
KEYS = range(1, 9)
BASE_COLUMNS = ("k", "v")
WIDE_COLUMNS = ("k", "v", "w")


def rows_of(rows: Iterable[Row]) -> Rows:
    return tuple(sorted(rows, key=lambda r: tuple((x is None, x or 0) for x in r)))


def widen(rows: Iterable[Row], width: int) -> Rows:
    """Rows as a table of ``width`` columns reads them (an added column reads NULL in older files)."""
    return rows_of(tuple(r[:width]) + (None,) * (width - len(r)) for r in rows)


def new_row(key: int, value: int, width: int) -> Row:
    return (key, value, value * 10)[:width]


def upsert(rows: Rows, keys: Iterable[int], value: int, width: int) -> Rows:
    wanted = set(keys)
    return rows_of(
        [r for r in rows if r[0] not in wanted] + [new_row(k, value, width) for k in sorted(wanted)]
    )


def delete_keys(rows: Rows, keys: Iterable[int]) -> Rows:
    gone = set(keys)
    return rows_of(r for r in rows if r[0] not in gone)


def increment(rows: Rows, key: int) -> Rows:
    """``UPDATE SET v = v + 1 WHERE k = key``."""
    return rows_of((r[0], r[1] + 1, *r[2:]) if r[0] == key and r[1] is not None else r for r in rows)


def append(rows: Rows, keys: Iterable[int], value: int, width: int) -> Rows:
    return rows_of([*rows, *(new_row(k, value, width) for k in keys)])


def absent_keys(rows: Rows) -> list[int]:
    present = {r[0] for r in rows}
    return [k for k in KEYS if k not in present]


@dataclass(frozen=True)
class TableState:
    """One table as a lake version holds it: its columns, main's snapshot, and the other refs."""

    columns: tuple[str, ...]
    head: int | None
    refs: tuple[tuple[str, int], ...] = ()  # (name, snapshot id) of branches and tags other than main

    def ref(self, name: str) -> int | None:
        return dict(self.refs).get(name)


@dataclass
class Window:
    """An incremental-read window: appends committed since ``start`` (a snapshot of main)."""

    start: int | None
    rows: list[Row] = field(default_factory=list)
    squashed: bool = False  # an append of a multi-statement transaction is in it (issue 42 item 2)


@dataclass
class LakeModel:
    """Expected rows of every table at every lake version and ref."""

    tables: dict[str, TableState] = field(default_factory=dict)
    snapshots: dict[str, dict[int, Rows]] = field(default_factory=dict)  # table -> snapshot -> rows
    versions: dict[int, dict[str, TableState]] = field(default_factory=dict)
    expired: dict[str, set[int]] = field(default_factory=dict)
    windows: dict[str, Window] = field(default_factory=dict)
    batches: dict[int, frozenset[str]] = field(
        default_factory=dict
    )  # version -> pipeline batches in its state
    parents: dict[str, dict[int, int | None]] = field(default_factory=dict)  # as recorded when committed
    version: int = 0
    lake_rollbacks: int = 0

    # -- reading the model ----------------------------------------------------------------------
    def rows(self, name: str, snapshot: int | None = None) -> Rows:
        state = self.tables[name]
        return self.rows_at(name, state, state.head if snapshot is None else snapshot)

    def rows_at(self, name: str, state: TableState, snapshot: int | None) -> Rows:
        if snapshot is None:
            return ()
        return widen(self.snapshots[name][snapshot], len(state.columns))

    def width(self, name: str) -> int:
        return len(self.tables[name].columns)

    def is_expired(self, name: str, snapshot: int | None) -> bool:
        return snapshot is not None and snapshot in self.expired.get(name, set())

    def offered(self, version: int) -> bool:
        """Whether every table state of ``version`` is still readable (none was expired)."""
        return not any(self.is_expired(n, s.head) for n, s in self.versions[version].items())

    # -- recording what a step committed ---------------------------------------------------------
    def committed(
        self, version: int, observed: Mapping[str, TableState], rows: Mapping[str, Mapping[int, Rows]]
    ) -> None:
        """Record lake version ``version`` (the newest): the observed snapshot ids and refs of each
        table, and the rows the model expects at the snapshots the step created.

        Versions between the previous newest and ``version`` (several commits in one step) are not
        modelled and not checked.
        """
        for name, by_snapshot in rows.items():
            self.snapshots.setdefault(name, {}).update(by_snapshot)
        self.tables = dict(observed)
        self.versions[version] = dict(observed)
        self.batches[version] = self.batches.get(self.version, frozenset())  # a batch or rollback changes it
        self.version = version

    def expire(self, name: str, before: Iterable[int], after: Iterable[int]) -> None:
        self.expired.setdefault(name, set()).update(set(before) - set(after))

    def open_window(self, name: str) -> None:
        self.windows[name] = Window(self.tables[name].head)

    def note_append(self, name: str, rows: Iterable[Row], squashed: bool = False) -> None:
        window = self.windows.setdefault(name, Window(None))
        window.rows.extend(rows)
        window.squashed |= squashed


def with_head(state: TableState, head: int | None) -> TableState:
    return replace(state, head=head)
