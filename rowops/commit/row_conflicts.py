"""Row-level conflicts: whether the delete files committed concurrently touch rows this delta changed.

``find_conflict`` (``commit/rebase.py``) asks this module about every *new* delete file (live now,
not live at the delta's base) that may apply to a data file the delta rewrote or deleted from. File
level, any such pair is a conflict. Row level, the pair is compared as far as the encodings allow:

* **position delete vs position delete**: the positions this delta deletes in data file F (its own
  ``added_deletes``, minus positions already deleted at its base) intersected with the positions the
  concurrent delete files delete in F, as Roaring bitmaps. Disjoint: the two deletes commute.
* **equality delete vs position delete**: the equality delete can only remove rows whose key lies in
  its key bounds (and among its actual keys, read when the file is small); the rows this delta changed
  have keys in its read set's key ranges (a MERGE on keys). Disjoint: no common row. A delta whose
  read set is the whole table (UPDATE / DELETE with a predicate) knows no key range: file level.
* **copy-on-write**: a rewritten file has no row mapping to the file it replaces, so a concurrent
  delete of rows of a rewritten file would be resurrected by the rewrite: always a conflict.

Delete files are read on the driver with pyarrow (filtered on ``file_path``) and only for pairs that
already conflict at file level. Lookups go through dictionaries by path and partition, so the cost
grows with the number of new delete files and their candidate data files, not files x deletes.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyiceberg.conversions import from_bytes
from pyiceberg.io import FileIO
from pyiceberg.manifest import DataFile, DataFileContent
from pyiceberg.schema import Schema
from pyiceberg.types import PrimitiveType
from pyroaring import BitMap64

from rowops.commit.read_set import ColumnBounds, ReadSet
from rowops.errors import ConflictKind
from rowops.meta.fileio import filesystem
from rowops.meta.files import DV_SEPARATOR, FILE_PATH_ID, LiveFile, TableFiles
from rowops.meta.paths import normalize_path
from rowops.meta.puffin import read_deletion_vector
from rowops.meta.v3 import content_range, is_deletion_vector, referenced_data_file
from rowops.plan.pruning import Bounds


class DeltaFiles(Protocol):
    """What a conflict check reads of a commit's delta (``commit/row_delta.py``'s ``RowDelta``; a Protocol,
    so that this module, which ``row_delta`` imports, does not import it back)."""

    @property
    def added_deletes(self) -> tuple[DataFile, ...]: ...

    @property
    def removed_data(self) -> frozenset[str]: ...

    @property
    def touched_data(self) -> frozenset[str]: ...

    @property
    def read_set(self) -> ReadSet: ...


# An equality delete file this small has its keys read when its bounds overlap the delta's key ranges.
SMALL_EQUALITY_DELETE_ROWS = 100_000
_SHOWN_POSITIONS = 5


@dataclass(frozen=True)
class Conflict:
    """Why a delta cannot be rebased."""

    kind: ConflictKind
    reason: str
    snapshot_id: int | None
    files: tuple[str, ...]


def referenced_bounds(data_file: DataFile) -> tuple[str, str] | None:
    """The (lowest, highest) data file path a position delete file names (local form), from its metrics.

    None when unknown (missing metrics, or bounds in different path forms that would not bound).
    """
    if is_deletion_vector(data_file):  # v3: a deletion vector names its one data file
        ref = referenced_data_file(data_file)
        return (normalize_path(ref), normalize_path(ref)) if ref is not None else None
    lower = (data_file.lower_bounds or {}).get(FILE_PATH_ID)
    upper = (data_file.upper_bounds or {}).get(FILE_PATH_ID)
    if lower is None or upper is None:
        return None
    low, high = lower.decode(), upper.decode()
    if len(low) - len(normalize_path(low)) != len(high) - len(normalize_path(high)):
        return None
    return normalize_path(low), normalize_path(high)


def _delete_path(d: DataFile) -> str:
    """``LiveFile.path`` of a delete file written by a delta (deletion vectors carry their data file)."""
    path = normalize_path(d.file_path)
    if is_deletion_vector(d):
        return f"{path}{DV_SEPARATOR}{normalize_path(referenced_data_file(d) or '')}"
    return path


class _ByReferencedPath:
    """Position delete files indexed by the data file path they name: exact, ranged or unknown."""

    def __init__(self, deletes: Iterable[tuple[str, DataFile]]) -> None:
        self.exact: dict[str, list[str]] = {}
        self.ranged: list[tuple[str, str, str]] = []
        self.unknown: list[str] = []
        for path, data_file in deletes:
            bounds = referenced_bounds(data_file)
            if bounds is None:
                self.unknown.append(path)
            elif bounds[0] == bounds[1]:
                self.exact.setdefault(bounds[0], []).append(path)
            else:
                self.ranged.append((bounds[0], bounds[1], path))

    def naming(self, data_path: str) -> list[str]:
        """Paths of the delete files that may name ``data_path``."""
        hits = self.exact.get(data_path, []) + self.unknown
        return hits + [p for lo, hi, p in self.ranged if lo <= data_path <= hi]


class _Touched:
    """The live data files a delta rewrites or deletes from, indexed for new delete files."""

    def __init__(self, files: Sequence[LiveFile]) -> None:
        self.by_path = {f.path: f for f in files}
        self.paths = sorted(self.by_path)
        self.by_partition: dict[tuple[int, tuple[object, ...]], list[LiveFile]] = {}
        for f in files:
            self.by_partition.setdefault((f.spec_id, f.partition), []).append(f)

    def hit_by(self, delete: LiveFile) -> list[LiveFile]:
        """The touched data files ``delete`` may apply to (``LiveFile.may_apply_to``, via the indexes)."""
        if delete.content == DataFileContent.POSITION_DELETES:
            bounds = delete.referenced_paths
            if bounds is None:
                return list(self.by_path.values())
            start = bisect.bisect_left(self.paths, bounds[0])
            stop = bisect.bisect_right(self.paths, bounds[1])
            return [self.by_path[p] for p in self.paths[start:stop]]
        scope = (
            self.by_path.values()
            if delete.is_global
            else self.by_partition.get((delete.spec_id, delete.partition), [])
        )
        return [f for f in scope if delete.may_apply_to(f)]


@dataclass
class _Rows:
    """Lazy, cached reads of delete files for the row-level comparisons of one ``find_conflict``."""

    delta: DeltaFiles
    base: TableFiles
    schema: Schema
    io: FileIO  # the lake's: delete files on an object store are read with its endpoint and credentials
    _positions: dict[tuple[str, str], BitMap64] = field(default_factory=dict)
    _base_index: _ByReferencedPath | None = None
    _own_index: _ByReferencedPath | None = None
    _vectors: dict[str, DataFile] = field(default_factory=dict)  # deletion vectors by (local) path

    def __post_init__(self) -> None:
        added = ((_delete_path(d), d) for d in self.delta.added_deletes)
        for path, d in [*added, *((f.path, f.data_file) for f in self.base.position_deletes)]:
            if is_deletion_vector(d):
                self._vectors[path] = d

    def note_vectors(self, deletes: Iterable[LiveFile]) -> None:
        self._vectors.update((d.path, d.data_file) for d in deletes if is_deletion_vector(d.data_file))

    def positions(self, delete_path: str, data: LiveFile) -> BitMap64:
        """Positions of ``data`` deleted by the position delete file at (local) ``delete_path``."""
        key = (delete_path, data.path)
        vector = self._vectors.get(delete_path)
        if key not in self._positions and vector is not None:
            where = content_range(vector) or (0, 0)
            fs, path = filesystem(self.io, vector.file_path)
            self._positions[key] = read_deletion_vector(fs, path, *where)
        if key not in self._positions:
            forms = sorted(data.names_in_deletes)
            fs, path = filesystem(self.io, delete_path)
            table = pq.read_table(path, columns=["pos"], filters=[("file_path", "in", forms)], filesystem=fs)
            self._positions[key] = BitMap64(table.column("pos").to_pylist())
        return self._positions[key]

    def union(self, delete_paths: Iterable[str], data: LiveFile) -> BitMap64:
        result = BitMap64()
        for path in delete_paths:
            result |= self.positions(path, data)
        return result

    def own_new_positions(self, data: LiveFile) -> BitMap64 | None:
        """Positions of ``data`` this delta deletes that were not deleted at its base (None: unknown)."""
        if self._own_index is None:
            pos = DataFileContent.POSITION_DELETES
            written = [(_delete_path(d), d) for d in self.delta.added_deletes if d.content == pos]
            self._own_index = _ByReferencedPath(written)
            self._base_index = _ByReferencedPath((d.path, d.data_file) for d in self.base.position_deletes)
        assert self._base_index is not None
        own = self.union(self._own_index.naming(data.path), data)
        if not own:
            return None  # referenced without readable positions: cannot compare rows
        return own - self.union(self._base_index.naming(data.path), data)

    def common_positions(self, data: LiveFile, concurrent: Sequence[LiveFile]) -> BitMap64 | None:
        """Positions of ``data`` deleted both by this delta and by ``concurrent`` (None: unknown)."""
        own = self.own_new_positions(data)
        if own is None:
            return None
        self.note_vectors(concurrent)
        return own & self.union((d.path for d in concurrent), data)

    def equality_delete_disjoint(self, delete: LiveFile) -> bool:
        """Whether no key of the equality delete ``delete`` can be a key of a row this delta changed."""
        read = self.delta.read_set
        names = {self.schema.find_column_name(i): i for i in delete.equality_ids}
        columns = [k for k in read.keys if k in names]
        ranges = None if read.is_everything or not columns else _ranges_for(read, delete)
        if ranges is None:
            return False
        bounds = _delete_bounds(delete, {c: names[c] for c in columns}, self.schema)
        overlapping = [r for r in ranges if all(_overlaps(bounds[c], r.get(c)) for c in columns)]
        if not overlapping:
            return True
        if delete.record_count > SMALL_EQUALITY_DELETE_ROWS:
            return False
        keys = _key_values(*filesystem(self.io, delete.path), {c: names[c] for c in columns})
        return keys is not None and not any(_any_in(keys, r) for r in overlapping)


def _ranges_for(read: ReadSet, delete: LiveFile) -> list[ColumnBounds] | None:
    """The delta's key ranges of the partitions ``delete`` applies to (None: not comparable)."""
    if read.by_partition is None:
        return [read.anywhere or {}]
    if delete.is_global:
        return list(read.by_partition.values())
    if delete.spec_id != read.spec_id:
        return None
    changed = read.by_partition.get(delete.partition)
    return [changed] if changed is not None else []


def _overlaps(a: Bounds, b: Bounds) -> bool:
    if a is None or b is None:
        return True
    try:
        return not (a[1] < b[0] or b[1] < a[0])
    except TypeError:
        return True


def _delete_bounds(delete: LiveFile, columns: Mapping[str, int], schema: Schema) -> dict[str, Bounds]:
    """Decoded key bounds of an equality delete file (None where unknown or where it holds NULLs)."""
    df = delete.data_file
    lower, upper, nulls = df.lower_bounds or {}, df.upper_bounds or {}, df.null_value_counts or {}
    bounds: dict[str, Bounds] = {}
    for name, field_id in columns.items():
        lo, hi, field_type = lower.get(field_id), upper.get(field_id), schema.find_type(field_id)
        bounds[name] = None  # unknown; also with NULLs: a NULL key deletes NULL keys, no bound excludes it
        no_nulls = nulls.get(field_id, 1) == 0
        if lo is not None and hi is not None and isinstance(field_type, PrimitiveType) and no_nulls:
            bounds[name] = (from_bytes(field_type, lo), from_bytes(field_type, hi))
    return bounds


def _key_values(fs: pafs.FileSystem, path: str, columns: Mapping[str, int]) -> dict[str, list[Any]] | None:
    """The key columns of an equality delete file (by Parquet field id) in Iceberg's internal form
    (dates as days, timestamps as micros); None when a column is missing or of another kind."""
    schema = pq.read_schema(path, filesystem=fs)
    names: dict[str, str] = {}
    for name, field_id in columns.items():
        found = [f for f in schema if (f.metadata or {}).get(b"PARQUET:field_id") == str(field_id).encode()]
        if len(found) != 1:
            return None
        names[name] = found[0].name
    table = pq.read_table(path, columns=sorted(set(names.values())), filesystem=fs)
    values = {}
    for name, column_name in names.items():
        column = _internal(table.column(column_name))
        if column is None:
            return None
        values[name] = column
    return values


def _internal(column: pa.ChunkedArray) -> list[Any] | None:
    kind = column.type
    if pa.types.is_date32(kind):
        return column.cast(pa.int32()).to_pylist()
    if pa.types.is_timestamp(kind):
        return column.cast(pa.timestamp("us", tz=kind.tz)).cast(pa.int64()).to_pylist()
    simple = (pa.types.is_integer, pa.types.is_floating, pa.types.is_string, pa.types.is_large_string)
    if any(test(kind) for test in (*simple, pa.types.is_boolean, pa.types.is_decimal)):
        return column.to_pylist()
    return None


def _any_in(keys: Mapping[str, list[Any]], ranges: ColumnBounds) -> bool:
    """Whether some row of ``keys`` has every column inside ``ranges`` (NULL or incomparable: inside)."""
    rows = zip(*keys.values(), strict=True)
    names = list(keys)
    return any(all(_inside(v, ranges.get(n)) for n, v in zip(names, row, strict=True)) for row in rows)


def _inside(value: Any, bounds: Bounds) -> bool:
    if value is None or bounds is None:
        return True
    try:
        return bool(bounds[0] <= value <= bounds[1])
    except TypeError:
        return True


def delete_conflict(
    delta: DeltaFiles, base: TableFiles, current: TableFiles, schema: Schema, row_level: bool, io: FileIO
) -> Conflict | None:
    """The first concurrent delete file that removes rows this delta changed (see the module doc)."""
    base_deletes = {f.path for f in base.deletes}
    new = [f for f in current.deletes if f.path not in base_deletes]
    if not new:
        return None
    touched = _Touched([f for f in current.data if f.path in delta.touched_data])
    rows = _Rows(delta, base, schema, io)
    by_data: dict[str, list[LiveFile]] = {}
    own_vectors = {
        normalize_path(referenced_data_file(d) or "") for d in delta.added_deletes if is_deletion_vector(d)
    }
    for delete in new:
        hits = touched.hit_by(delete)
        if not hits:
            continue
        if is_deletion_vector(delete.data_file) and any(f.path in own_vectors for f in hits):
            return _vector_conflict(delete, current.snapshot_id)
        file_level = not row_level or any(f.path in delta.removed_data for f in hits)
        if file_level or (
            delete.content == DataFileContent.EQUALITY_DELETES and not rows.equality_delete_disjoint(delete)
        ):
            return _file_conflict(delete, hits, current.snapshot_id, rewritten=delta.removed_data)
        if delete.content == DataFileContent.POSITION_DELETES:
            for f in hits:
                by_data.setdefault(f.path, []).append(delete)
    for path in sorted(by_data):
        data = touched.by_path[path]
        common = rows.common_positions(data, by_data[path])
        if common is None or common:
            return _position_conflict(data, common, current.snapshot_id)
    return None


def _vector_conflict(delete: LiveFile, snapshot: int | None) -> Conflict:
    """v3: a data file has at most one deletion vector; this delta's would be a second one (as Iceberg
    Java's ``validateAddedDVs``), whatever the positions."""
    target = delete.referenced_file or delete.path
    reason = "a deletion vector was concurrently added for a data file this operation adds one for"
    return Conflict(ConflictKind.CONCURRENT_DELETE_READ, reason, snapshot, (target,))


def _file_conflict(
    delete: LiveFile, hits: Sequence[LiveFile], snapshot: int | None, rewritten: frozenset[str]
) -> Conflict:
    kind = "equality" if delete.content == DataFileContent.EQUALITY_DELETES else "position"
    reason = f"concurrent {kind} deletes on data files this operation changes"
    if any(f.path in rewritten for f in hits):
        reason += " (a rewritten file would resurrect the deleted rows)"
    paths = tuple(sorted(f.path for f in hits)[:5])
    return Conflict(ConflictKind.CONCURRENT_DELETE_READ, reason, snapshot, paths)


def _position_conflict(data: LiveFile, common: BitMap64 | None, snapshot: int | None) -> Conflict:
    if common is None:
        reason = "concurrent position deletes on a data file whose deleted positions could not be compared"
    else:
        shown = ", ".join(str(p) for p in itertools.islice(common, _SHOWN_POSITIONS))
        more = f" and {len(common) - _SHOWN_POSITIONS} more" if len(common) > _SHOWN_POSITIONS else ""
        reason = f"concurrent position deletes of the same rows (positions {shown}{more} of {data.path})"
    return Conflict(ConflictKind.CONCURRENT_DELETE_READ, reason, snapshot, (data.path,))
