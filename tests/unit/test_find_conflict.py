"""Table-driven checks of ``find_conflict`` per isolation level and encoding, without Spark.

In the style of Iceberg's ``TestRowDelta`` validations: a base table state, one concurrent commit
(new data files, position deletes, equality deletes or removed files) and the delta of an operation
that read the base; each row states whether the commit conflicts and of which kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.conversions import to_bytes
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestEntry, ManifestEntryStatus
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata, new_table_metadata
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.transforms import BucketTransform
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

from rowops.commit.read_set import ReadSet
from rowops.commit.rebase import find_conflict
from rowops.commit.row_delta import RowDelta
from rowops.errors import ConflictKind, InvalidInputError
from rowops.meta.fileio import make_io
from rowops.meta.files import FILE_PATH_ID, LiveFile, TableFiles

SCHEMA = Schema(NestedField(1, "k", LongType(), required=True), NestedField(2, "v", StringType()))
SPEC = PartitionSpec(PartitionField(1, 1000, BucketTransform(4), "k_bucket"))


def _snapshot(snapshot_id: int, parent: int | None) -> Snapshot:
    return Snapshot(
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent,
        sequence_number=snapshot_id,
        timestamp_ms=snapshot_id,
        manifest_list=f"/lake/t/metadata/snap-{snapshot_id}.avro",
        summary=Summary(Operation.APPEND),
        schema_id=0,
    )


def _history(*parents: tuple[int, int | None]) -> TableMetadata:
    """``METADATA`` with snapshots (id, parent id); the rows below read only its ancestry."""
    snapshots = [_snapshot(i, p) for i, p in parents]
    return new_table_metadata(SCHEMA, SPEC, UNSORTED_SORT_ORDER, "/lake/t", {}).model_copy(
        update={"snapshots": snapshots}
    )


# 1 <- 2 (the base of most cases and the concurrent head); 3 <- 1 (a commit after a rollback to 1);
# 5 <- 4 <- (expired) (a head whose history was expired)
METADATA = _history((1, None), (2, 1), (3, 1), (5, 4))
IO = make_io()  # local files
K = SCHEMA.find_field("k")


def _live(
    path: str, content: DataFileContent, seq: int, partition: tuple[object, ...], **stats: object
) -> LiveFile:
    data_file = DataFile.from_args(
        content=content,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(*partition),
        record_count=10,
        file_size_in_bytes=100,
        spec_id=0,
        **stats,
    )
    entry = ManifestEntry.from_args(
        status=ManifestEntryStatus.ADDED, snapshot_id=seq, sequence_number=seq, data_file=data_file
    )
    return LiveFile(entry, path, content, seq, 0, partition)


def data(path: str, bucket: int, lo: int, hi: int, seq: int = 1) -> LiveFile:
    bounds = {
        "lower_bounds": {K.field_id: to_bytes(LongType(), lo)},
        "upper_bounds": {K.field_id: to_bytes(LongType(), hi)},
    }
    return _live(path, DataFileContent.DATA, seq, (bucket,), **bounds)


def pos_delete(path: str, target: str, bucket: int, seq: int = 2) -> LiveFile:
    bounds = {
        "lower_bounds": {FILE_PATH_ID: target.encode()},
        "upper_bounds": {FILE_PATH_ID: target.encode()},
    }
    return _live(path, DataFileContent.POSITION_DELETES, seq, (bucket,), **bounds)


def eq_delete(path: str, bucket: int, seq: int = 2) -> LiveFile:
    return _live(path, DataFileContent.EQUALITY_DELETES, seq, (bucket,), equality_ids=[1])


def files(*live: LiveFile, snapshot: int = 1) -> TableFiles:
    by = {c: tuple(f for f in live if f.content == c) for c in DataFileContent}
    return TableFiles(
        snapshot, snapshot, (), by[DataFileContent.DATA], by[DataFileContent.POSITION_DELETES],
        by[DataFileContent.EQUALITY_DELETES],
    )  # fmt: skip


A, B = data("/t/a.parquet", 0, 0, 9), data("/t/b.parquet", 1, 10, 19)
BASE = files(A, B)


@dataclass(frozen=True)
class Case:
    name: str
    delta: RowDelta
    concurrent: TableFiles
    snapshot: ConflictKind | None  # expected under snapshot isolation
    serializable: ConflictKind | None  # expected under serializable isolation


def rewrite(path: str, read: ReadSet | None = None) -> RowDelta:
    """Copy-on-write of one file."""
    return RowDelta(
        Operation.OVERWRITE, removed_data=frozenset({path}), read_set=read or ReadSet.everything()
    )


def delete_from(path: str, read: ReadSet | None = None) -> RowDelta:
    """Position deletes against one file."""
    return RowDelta(
        Operation.DELETE, referenced_data=frozenset({path}), read_set=read or ReadSet.everything()
    )


def keys_read(lo: int, hi: int, bucket: int) -> ReadSet:
    return ReadSet.of_keys(("k",), {(bucket,): {"k": (lo, hi)}}, spec_id=0, partition_follows_key=True)


NEW_IN_0 = data("/t/new0.parquet", 0, 100, 100, seq=2)
CASES = [
    Case("nothing changed", rewrite(A.path), BASE, None, None),
    Case("cow: rewritten file removed", rewrite(A.path), files(B, snapshot=2), ConflictKind.DELETE_DELETE, ConflictKind.DELETE_DELETE),
    Case("mor: referenced file removed", delete_from(A.path), files(B, snapshot=2), ConflictKind.DELETE_DELETE, ConflictKind.DELETE_DELETE),
    Case("cow: position deletes on the rewritten file", rewrite(A.path), files(A, B, pos_delete("/t/d.parquet", A.path, 0), snapshot=2), ConflictKind.CONCURRENT_DELETE_READ, ConflictKind.CONCURRENT_DELETE_READ),
    Case("mor: position deletes on another file", delete_from(A.path), files(A, B, pos_delete("/t/d.parquet", B.path, 1), snapshot=2), None, None),
    Case("mor: equality deletes in the touched partition", delete_from(A.path), files(A, B, eq_delete("/t/e.parquet", 0), snapshot=2), ConflictKind.CONCURRENT_DELETE_READ, ConflictKind.CONCURRENT_DELETE_READ),
    Case("mor: equality deletes in another partition", delete_from(A.path), files(A, B, eq_delete("/t/e.parquet", 1), snapshot=2), None, None),
    Case("append where the whole table was read", delete_from(A.path), files(A, B, NEW_IN_0, snapshot=2), None, ConflictKind.CONCURRENT_APPEND),
    Case("append of a key in the read range", delete_from(A.path, keys_read(95, 105, 0)), files(A, B, NEW_IN_0, snapshot=2), None, ConflictKind.CONCURRENT_APPEND),
    Case("append outside the read key range", delete_from(A.path, keys_read(0, 50, 0)), files(A, B, NEW_IN_0, snapshot=2), None, None),
    Case("append in a partition not read", delete_from(A.path, keys_read(95, 105, 3)), files(A, B, NEW_IN_0, snapshot=2), None, None),
    Case("insert-only read of a file-less partition", RowDelta(Operation.APPEND, read_set=keys_read(100, 100, 0)), files(A, B, NEW_IN_0, snapshot=2), None, ConflictKind.CONCURRENT_APPEND),
    Case("blind equality-delete upsert", replace(rewrite(A.path), blind=True), files(B, snapshot=2), None, None),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@pytest.mark.parametrize("isolation", ["snapshot", "serializable"])
def test_find_conflict(case: Case, isolation: str) -> None:
    delta = replace(case.delta, serializable=isolation == "serializable")
    conflict = find_conflict(delta, BASE, case.concurrent, METADATA, io=IO)
    expected = case.serializable if isolation == "serializable" else case.snapshot
    assert (conflict.kind if conflict else None) == expected, conflict
    if conflict is not None:
        assert conflict.snapshot_id == case.concurrent.snapshot_id and conflict.files


# ------------------------------------------------------------------------------------------------
# Row level: real Parquet delete files (pyarrow) in tmp_path, compared row by row.
# ------------------------------------------------------------------------------------------------


def _pos_file(path: Path, rows: list[tuple[str, int]]) -> None:
    pq.write_table(pa.table({"file_path": [r[0] for r in rows], "pos": [r[1] for r in rows]}), path)


def _bounds_of(rows: list[tuple[str, int]]) -> dict[str, object]:
    names = sorted(r[0] for r in rows)
    return {
        "lower_bounds": {FILE_PATH_ID: names[0].encode()},
        "upper_bounds": {FILE_PATH_ID: names[-1].encode()},
    }


def pos_delete_at(path: Path, rows: list[tuple[str, int]], seq: int = 2) -> LiveFile:
    """A live position delete file holding ``rows`` (file_path, pos)."""
    _pos_file(path, rows)
    return _live(str(path), DataFileContent.POSITION_DELETES, seq, (0,), **_bounds_of(rows))


def own_pos_delete(path: Path, rows: list[tuple[str, int]]) -> DataFile:
    """A position delete file this delta wrote (its manifest path a ``file:`` URI, as rowops writes)."""
    _pos_file(path, rows)
    return DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=f"file:{path}",
        file_format=FileFormat.PARQUET,
        partition=Record(0),
        record_count=len(rows),
        file_size_in_bytes=100,
        spec_id=0,
        **_bounds_of(rows),
    )


def eq_delete_at(path: Path, keys: list[int | None], bucket: int = 0, seq: int = 2) -> LiveFile:
    """A live equality delete file on ``k`` (Parquet field id 1) with its metrics."""
    field = pa.field("k", pa.int64(), metadata={"PARQUET:field_id": "1"})
    pq.write_table(pa.table({"k": pa.array(keys, pa.int64())}, schema=pa.schema([field])), path)
    present = [k for k in keys if k is not None]
    stats = {
        "lower_bounds": {K.field_id: to_bytes(LongType(), min(present))},
        "upper_bounds": {K.field_id: to_bytes(LongType(), max(present))},
        "null_value_counts": {K.field_id: len(keys) - len(present)},
    }
    return _live(str(path), DataFileContent.EQUALITY_DELETES, seq, (bucket,), equality_ids=[1], **stats)


@dataclass(frozen=True)
class RowCase:
    """A delta that deleted ``own`` positions of A (or rewrote A), a concurrent commit, both verdicts."""

    name: str
    own: tuple[int, ...] = ()
    base_positions: tuple[int, ...] = ()  # deleted at the base (carried by both new delete files)
    concurrent: tuple[tuple[str, int], ...] = ()  # concurrent position deletes (file_path, pos)
    eq_keys: tuple[int | None, ...] = ()  # concurrent equality deletes in A's partition
    read: ReadSet = field(default_factory=ReadSet.everything)
    rewrite: bool = False
    row: ConflictKind | None = None
    file: ConflictKind | None = ConflictKind.CONCURRENT_DELETE_READ


MERGE_5_TO_9 = keys_read(5, 9, 0)
DELETE_READ = ConflictKind.CONCURRENT_DELETE_READ
ROW_CASES = [
    RowCase("positions: different rows of one file", own=(3,), concurrent=((A.path, 4),)),
    RowCase("positions: the same row", own=(3, 8), concurrent=((A.path, 8),), row=DELETE_READ),
    RowCase("positions: only rows deleted at the base in common", own=(1, 2, 3), base_positions=(1, 2), concurrent=((A.path, 1), (A.path, 2), (A.path, 4))),
    RowCase("positions: a delete file naming two files", own=(5,), concurrent=((A.path, 7), (B.path, 5))),
    RowCase("positions: manifest path form in the delete rows", own=(5,), concurrent=((f"file:{A.path}", 5),), row=DELETE_READ),
    RowCase("copy-on-write: different rows of the rewritten file", rewrite=True, concurrent=((A.path, 4),), row=DELETE_READ),
    RowCase("copy-on-write: equality deletes outside the key range", rewrite=True, eq_keys=(100,), read=MERGE_5_TO_9, row=DELETE_READ),
    RowCase("equality: key bounds outside the read key range", own=(3,), eq_keys=(20, 30), read=MERGE_5_TO_9),
    RowCase("equality: bounds overlap, keys outside the range", own=(3,), eq_keys=(1, 12), read=MERGE_5_TO_9),
    RowCase("equality: a key inside the range", own=(3,), eq_keys=(1, 7, 12), read=MERGE_5_TO_9, row=DELETE_READ),
    RowCase("equality: a NULL key", own=(3,), eq_keys=(1, None, 12), read=MERGE_5_TO_9, row=DELETE_READ),
    RowCase("equality: the delta read the whole table", own=(3,), eq_keys=(100,), row=DELETE_READ),
    RowCase("equality: another partition", own=(3,), eq_keys=(7,), read=keys_read(5, 9, 2), row=None),
]  # fmt: skip


def _row_case_state(case: RowCase, tmp: Path) -> tuple[RowDelta, TableFiles, TableFiles]:
    base_files = [A, B]
    carried = [(A.path, p) for p in case.base_positions]
    if carried:
        base_files.append(pos_delete_at(tmp / "base-delete.parquet", carried, seq=1))
    concurrent = list(base_files)
    if case.concurrent:
        concurrent.append(pos_delete_at(tmp / "their-deletes.parquet", carried + list(case.concurrent)))
    if case.eq_keys:
        concurrent.append(eq_delete_at(tmp / "their-eq-deletes.parquet", list(case.eq_keys)))
    if case.rewrite:
        delta = rewrite(A.path, case.read)
    else:
        own = own_pos_delete(tmp / "own.parquet", [(A.data_file.file_path, p) for p in case.own])
        delta = replace(delete_from(A.path, case.read), added_deletes=(own,))
    return delta, files(*base_files), files(*concurrent, snapshot=2)


@pytest.mark.parametrize("case", ROW_CASES, ids=[c.name for c in ROW_CASES])
@pytest.mark.parametrize("row_level", [True, False], ids=["row", "file"])
def test_find_conflict_row_level(case: RowCase, row_level: bool, tmp_path: Path) -> None:
    delta, base, concurrent = _row_case_state(case, tmp_path)
    conflict = find_conflict(delta, base, concurrent, METADATA, row_level=row_level, io=IO)
    expected = case.row if row_level else case.file
    assert (conflict.kind if conflict else None) == expected, conflict
    if conflict is not None:
        assert conflict.files and conflict.snapshot_id == 2


def test_common_positions_are_named(tmp_path: Path) -> None:
    case = RowCase("overlap", own=(3, 8, 9), concurrent=((A.path, 8), (A.path, 9), (A.path, 10)))
    conflict = find_conflict(*_row_case_state(case, tmp_path), METADATA, io=IO)
    assert conflict is not None and conflict.files == (A.path,)
    assert "positions 8, 9 of /t/a.parquet" in conflict.reason


def test_table_property_chooses_the_granularity(tmp_path: Path) -> None:
    case = RowCase("disjoint", own=(3,), concurrent=((A.path, 4),))
    state = _row_case_state(case, tmp_path)
    assert find_conflict(*state, METADATA, io=IO) is None  # default: row
    file_level = METADATA.model_copy(update={"properties": {"rowops.conflict-detection": "file"}})
    conflict = find_conflict(*state, file_level, io=IO)
    assert conflict is not None and conflict.kind == DELETE_READ
    wrong = METADATA.model_copy(update={"properties": {"rowops.conflict-detection": "rows"}})
    with pytest.raises(InvalidInputError, match="conflict-detection"):
        find_conflict(*state, wrong, io=IO)


def test_delete_files_are_read_only_for_file_level_candidates(tmp_path: Path) -> None:
    """New delete files on other data files are never opened (their paths do not even exist)."""
    others = [data(f"/t/other-{i}.parquet", 0, 0, 9) for i in range(1000)]
    theirs = [pos_delete(f"/missing/d-{i}.parquet", f.path, 0) for i, f in enumerate(others)]
    own = own_pos_delete(tmp_path / "own.parquet", [(A.data_file.file_path, 3)])
    delta = replace(delete_from(A.path), added_deletes=(own,))
    base = files(A, B, *others)
    assert find_conflict(delta, base, files(A, B, *others, *theirs, snapshot=2), METADATA, io=IO) is None


# ------------------------------------------------------------------------------------------------
# The rebase rule: the base must be an ancestor of the head; deletes live at the base stay live.
# ------------------------------------------------------------------------------------------------

NOT_ANCESTOR = ConflictKind.BASE_NOT_ANCESTOR
D_A = pos_delete("/t/d-a.parquet", A.path, 0)
E_0 = eq_delete("/t/e-0.parquet", 0)


@dataclass(frozen=True)
class HistoryCase:
    name: str
    delta: RowDelta
    base: TableFiles
    current: TableFiles
    expected: ConflictKind | None


HISTORY_CASES = [
    HistoryCase("head descends from the base", delete_from(A.path), files(A, B), files(A, B, snapshot=2), None),
    HistoryCase("rolled back to the base's parent (mor)", delete_from(A.path), files(A, B, D_A, snapshot=2), files(A, B, snapshot=1), NOT_ANCESTOR),
    HistoryCase("rolled back to the base's parent (cow)", rewrite(A.path), files(A, B, D_A, snapshot=2), files(A, B, snapshot=1), NOT_ANCESTOR),
    HistoryCase("rolled back, then a new commit", delete_from(A.path), files(A, B, snapshot=2), files(A, B, snapshot=3), NOT_ANCESTOR),
    HistoryCase("rolled back, untouched files only", rewrite(B.path), files(A, B, D_A, snapshot=2), files(A, B, snapshot=1), NOT_ANCESTOR),
    HistoryCase("base expired, named as the head's parent", delete_from(A.path), files(A, B, snapshot=4), files(A, B, snapshot=5), None),
    HistoryCase("walk ends at an expired snapshot", delete_from(A.path), files(A, B, snapshot=1), files(A, B, snapshot=5), NOT_ANCESTOR),
    HistoryCase("base unknown to the table (lake rollback)", delete_from(A.path), files(A, B, snapshot=9), files(A, B, snapshot=2), NOT_ANCESTOR),
    HistoryCase("empty base: ancestor of any head", RowDelta(Operation.APPEND, read_set=keys_read(0, 1, 0)), files(snapshot=None), files(B, snapshot=1), None),  # type: ignore[arg-type]
    HistoryCase("blind write rebases over a rollback", replace(rewrite(A.path), blind=True), files(A, B, snapshot=2), files(A, B, snapshot=1), None),
    HistoryCase("position deletes of a touched file removed", delete_from(A.path), files(A, B, D_A, snapshot=1), files(A, B, snapshot=2), ConflictKind.DELETES_REMOVED),
    HistoryCase("equality deletes of a touched file removed", rewrite(A.path), files(A, B, E_0, snapshot=1), files(A, B, snapshot=2), ConflictKind.DELETES_REMOVED),
    HistoryCase("position deletes replaced by a merged file", delete_from(A.path), files(A, B, D_A, snapshot=1), files(A, B, pos_delete("/t/d-a2.parquet", A.path, 0, seq=3), snapshot=2), ConflictKind.CONCURRENT_DELETE_READ),
    HistoryCase("equality deletes converted", delete_from(B.path), files(A, B, eq_delete("/t/e-1.parquet", 1), snapshot=1), files(A, B, pos_delete("/t/d-b.parquet", B.path, 1, seq=3), snapshot=2), ConflictKind.CONCURRENT_DELETE_READ),
    HistoryCase("deletes of an untouched file removed", delete_from(B.path), files(A, B, D_A, snapshot=1), files(A, B, snapshot=2), None),
]  # fmt: skip


@pytest.mark.parametrize("case", HISTORY_CASES, ids=[c.name for c in HISTORY_CASES])
@pytest.mark.parametrize("isolation", ["snapshot", "serializable"])
def test_rebase_needs_the_base_in_the_heads_history(case: HistoryCase, isolation: str) -> None:
    """Iceberg's ``MergingSnapshotProducer.validationHistory``: a commit validated from a snapshot that
    is not an ancestor of the head (``SnapshotUtil.isAncestorOf``) must not rebase."""
    delta = replace(case.delta, serializable=isolation == "serializable")
    conflict = find_conflict(delta, case.base, case.current, METADATA, io=IO)
    assert (conflict.kind if conflict else None) == case.expected, conflict
    if conflict is not None:
        assert conflict.snapshot_id == case.current.snapshot_id
        if conflict.kind == ConflictKind.DELETES_REMOVED:
            assert conflict.files and all(f.startswith("/t/") for f in conflict.files)
