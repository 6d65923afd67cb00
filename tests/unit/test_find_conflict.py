"""Table-driven checks of ``find_conflict`` per isolation level and encoding, without Spark.

In the style of Iceberg's ``TestRowDelta`` validations: a base table state, one concurrent commit
(new data files, position deletes, equality deletes or removed files) and the delta of an operation
that read the base; each row states whether the commit conflicts and of which kind.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from pyiceberg.conversions import to_bytes
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestEntry, ManifestEntryStatus
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.transforms import BucketTransform
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

from rowops.commit.read_set import ReadSet
from rowops.commit.row_delta import RowDelta, find_conflict
from rowops.errors import ConflictKind
from rowops.meta.files import FILE_PATH_ID, LiveFile, TableFiles

SCHEMA = Schema(NestedField(1, "k", LongType(), required=True), NestedField(2, "v", StringType()))
SPEC = PartitionSpec(PartitionField(1, 1000, BucketTransform(4), "k_bucket"))
METADATA = new_table_metadata(SCHEMA, SPEC, UNSORTED_SORT_ORDER, "/lake/t", {})
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
    conflict = find_conflict(delta, BASE, case.concurrent, METADATA)
    expected = case.serializable if isolation == "serializable" else case.snapshot
    assert (conflict.kind if conflict else None) == expected, conflict
    if conflict is not None:
        assert conflict.snapshot_id == case.concurrent.snapshot_id and conflict.files
