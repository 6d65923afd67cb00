"""Write-write conflicts of equality-delete writes inside a transaction (snapshot isolation's rule).

A single blind upsert may land after a concurrent write of the same key: it replaces that row, as
an upsert should. Inside a transaction the rows written may depend on what the transaction read
before, so two transactions writing the same key concurrently is a lost update: the first committer
wins and the later one must abort. An equality-delete write names its keys only by value, so the
check is by key range: any concurrent change (new data file, new delete file, removed data file) that
may hold a row whose key lies in the range of this write's equality deletes is a conflict.

>>> overlaps({"k": (1, 5)}, {"k": (5, 9)}), overlaps({"k": (1, 5)}, {"k": (6, 9)}), overlaps({"k": (1, 5)}, {})
(True, False, True)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import DataFile, DataFileContent
from pyiceberg.schema import Schema
from pyiceberg.types import PrimitiveType

from rowops.commit.row_conflicts import Conflict
from rowops.commit.row_delta import RowDelta
from rowops.errors import ConflictKind
from rowops.meta.delete_index import DeleteIndex
from rowops.meta.files import LiveFile, TableFiles

Bounds = tuple[object, object]


def overlaps(ours: Mapping[str, Bounds], theirs: Mapping[str, Bounds | None]) -> bool:
    """Whether two key ranges may share a key (a column without bounds may hold anything)."""
    for column, (low, high) in ours.items():
        other = theirs.get(column)
        if other is None:
            continue
        try:
            if other[1] < low or high < other[0]:  # type: ignore[operator]
                return False
        except TypeError:
            continue
    return True


def _bounds(data_file: DataFile, field_ids: Iterable[int], schema: Schema) -> dict[str, Bounds | None]:
    lower, upper = data_file.lower_bounds or {}, data_file.upper_bounds or {}
    found: dict[str, Bounds | None] = {}
    for field_id in field_ids:
        column = schema.find_field(field_id)
        lo, hi = lower.get(field_id), upper.get(field_id)
        if lo is None or hi is None or not isinstance(column.field_type, PrimitiveType):
            found[column.name] = None
        else:
            found[column.name] = (from_bytes(column.field_type, lo), from_bytes(column.field_type, hi))
    return found


def _least(a: Any, b: Any, reverse: bool = False) -> Any:
    return (b if b > a else a) if reverse else (b if b < a else a)


def written_keys(delta: RowDelta, schema: Schema) -> tuple[tuple[int, ...], dict[str, Bounds]] | None:
    """The equality field ids and the key range this delta's equality deletes cover (None: none)."""
    eq = [f for f in delta.added_deletes if f.content == DataFileContent.EQUALITY_DELETES]
    if not eq:
        return None
    ids = tuple(eq[0].equality_ids or ())
    merged: dict[str, Bounds] = {}
    for data_file in eq:
        for column, bounds in _bounds(data_file, ids, schema).items():
            if bounds is None:
                return ids, {}  # unknown bounds: the write may cover any key
            low, high = merged.get(column, bounds)
            merged[column] = (_least(low, bounds[0]), _least(bounds[1], high, reverse=True))
    return ids, merged


def find_write_conflict(
    delta: RowDelta, base: TableFiles, current: TableFiles, schema: Schema
) -> Conflict | None:
    """A concurrent change between ``base`` and ``current`` that may touch keys ``delta`` writes."""
    keys = written_keys(delta, schema)
    if keys is None:
        return None
    ids, ours = keys
    base_data = {f.path: f for f in base.data}
    base_deletes = {f.path for f in base.deletes}
    live = {f.path for f in current.data}
    changed: list[LiveFile] = [f for f in current.data if f.path not in base_data]
    changed += [f for f in base.data if f.path not in live]
    new_deletes = [f for f in current.deletes if f.path not in base_deletes]
    changed += [f for f in new_deletes if f.content == DataFileContent.EQUALITY_DELETES]
    new_pos = [f for f in new_deletes if f.content == DataFileContent.POSITION_DELETES]
    named = DeleteIndex(base.data, new_pos, ()).pos_by_data  # base files the new position deletes name
    changed += [f for f in base.data if f.path in named]
    for file in changed:
        if overlaps(ours, _bounds(file.data_file, ids, schema)):
            reason = "a concurrent transaction wrote rows with keys this transaction writes"
            return Conflict(ConflictKind.WRITE_WRITE, reason, current.snapshot_id, (file.path,))
    return None
