"""Self-test of the oracles: tables written by PyIceberg read back identically through all three.

PyIceberg writes data files (and copy-on-write deletes) but no delete files, so position- and
equality-delete files are written here by hand (Parquet + a ``content=deletes`` manifest + a new
snapshot), exactly as the Iceberg v2 spec lays them out.
"""

from __future__ import annotations

import datetime as dt
import os
import uuid
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import MetastoreCatalog
from pyiceberg.catalog.noop import NoopCatalog
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    write_manifest_list,
)
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate
from pyiceberg.transforms import BucketTransform, IdentityTransform
from pyiceberg.typedef import Identifier, Record
from pyiceberg.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestamptzType,
)

from rowops.commit.manifests import DeleteManifestWriterV2

from . import (
    EqualityDeletesUnsupportedError,
    JavaIcebergReader,
    JavaReadError,
    assert_same_rows,
    canonical_rows,
    read_duckdb,
    read_pyiceberg,
)
from .compare import Row, canonical_value

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "qty", IntegerType()),
    NestedField(3, "name", StringType()),
    NestedField(4, "price", DecimalType(10, 2)),
    NestedField(5, "day", DateType()),
    NestedField(6, "ts", TimestamptzType()),
    NestedField(7, "score", DoubleType()),
    NestedField(8, "flag", BooleanType()),
)
COLUMNS = [field.name for field in SCHEMA.fields]
ARROW_SCHEMA = SCHEMA.as_arrow()
ID_FIELD_ID = 1
ID_FIELD = pa.field("id", pa.int64(), False, {"PARQUET:field_id": str(ID_FIELD_ID)})
POS_DELETE_SCHEMA = pa.schema(
    [
        pa.field("file_path", pa.string(), False, {"PARQUET:field_id": "2147483546"}),
        pa.field("pos", pa.int64(), False, {"PARQUET:field_id": "2147483545"}),
    ]
)
PARTITIONED = PartitionSpec(
    PartitionField(source_id=5, field_id=1000, transform=IdentityTransform(), name="day"),
    PartitionField(source_id=1, field_id=1001, transform=BucketTransform(4), name="id_bucket"),
)


def make_rows(ids: range) -> list[Row]:
    """Deterministic rows covering nulls, negatives, NaN, pre-epoch dates and sub-second timestamps."""
    utc = dt.timezone.utc
    return [
        (
            i,
            None if i % 7 == 3 else i * 10 - 50,
            None if i % 5 == 4 else f"name-{i}-é",
            None if i % 6 == 5 else Decimal(i * 137 - 900).scaleb(-2),
            dt.date(1969, 12, 30) + dt.timedelta(days=i % 3),
            None
            if i % 8 == 6
            else dt.datetime(2024, 2, 29, 23, 59, tzinfo=utc) + dt.timedelta(microseconds=i * 1001),
            float("nan") if i == 9 else (None if i % 9 == 2 else i / 3),
            None if i % 4 == 1 else i % 2 == 0,
        )
        for i in ids
    ]


def to_arrow(rows: list[Row]) -> pa.Table:
    """Rows (in ``COLUMNS`` order) as an Arrow table with the Iceberg schema's Arrow types."""
    return pa.Table.from_pylist([dict(zip(COLUMNS, row, strict=True)) for row in rows], schema=ARROW_SCHEMA)


class LocalCatalog(MetastoreCatalog, NoopCatalog):
    """Smallest committing catalog: table pointers live in a dict, metadata files on local disk."""

    def __init__(self) -> None:
        super().__init__("oracle-test")
        self._pointers: dict[Identifier, str] = {}

    def create_table(  # type: ignore[override]
        self, identifier: str, location: str, spec: PartitionSpec = UNPARTITIONED_PARTITION_SPEC
    ) -> Table:
        staged = self._create_staged_table(identifier, SCHEMA, location, spec)
        self._write_metadata(staged.metadata, staged.io, staged.metadata_location)
        self._pointers[staged.name()] = staged.metadata_location
        return self.load_table(identifier)

    def load_table(self, identifier: str | Identifier) -> Table:
        ident = self.identifier_to_tuple(identifier)
        location = self._pointers[ident]
        io = self._load_file_io(location=location)
        return Table(ident, FromInputFile.table_metadata(io.new_input(location)), location, io, self)

    def commit_table(self, table: Table, requirements: Any, updates: Any) -> CommitTableResponse:
        staged = self._update_and_stage_table(
            self.load_table(table.name()), table.name(), requirements, updates
        )
        self._write_metadata(staged.metadata, staged.io, staged.metadata_location)
        self._pointers[staged.name()] = staged.metadata_location
        return CommitTableResponse(metadata=staged.metadata, metadata_location=staged.metadata_location)


DeleteManifestWriter = DeleteManifestWriterV2  # rowops' writer: the one place that writes delete manifests


def write_delete_file(
    table: Table, rows: pa.Table, like: DataFile | None, equality_ids: list[int]
) -> DataFile:
    """Write a position (no ``equality_ids``) or equality delete file in ``like``'s partition."""
    path = table.location_provider().new_data_location(f"{uuid.uuid4()}-deletes.parquet")
    pq.write_table(rows, path)
    data_file = DataFile.from_args(
        content=DataFileContent.EQUALITY_DELETES if equality_ids else DataFileContent.POSITION_DELETES,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=like.partition if like else Record(),
        record_count=rows.num_rows,
        file_size_in_bytes=os.path.getsize(path),
        equality_ids=equality_ids or None,
    )
    data_file.spec_id = like.spec_id if like else table.spec().spec_id
    return data_file


def commit_delete_file(catalog: LocalCatalog, table: Table, delete_file: DataFile) -> Table:
    """Commit one delete file as a new snapshot on ``main`` (what ``RowDelta`` does in Java)."""
    parent = table.current_snapshot()
    assert parent is not None
    snapshot_id = uuid.uuid4().int & ((1 << 63) - 1)
    io, provider = table.io, table.location_provider()
    manifest = io.new_output(provider.new_metadata_location(f"{uuid.uuid4()}-m0.avro"))
    spec = table.specs()[delete_file.spec_id]
    with DeleteManifestWriter(spec, table.schema(), manifest, snapshot_id, "deflate") as writer:
        writer.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, data_file=delete_file))
    sequence_number = table.metadata.next_sequence_number()
    list_path = provider.new_metadata_location(f"snap-{snapshot_id}-0-{uuid.uuid4()}.avro")
    list_file = io.new_output(list_path)
    with write_manifest_list(2, list_file, snapshot_id, parent.snapshot_id, sequence_number, "deflate") as lw:
        lw.add_manifests([*parent.manifests(io), writer.to_manifest_file()])
    snapshot = Snapshot(
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent.snapshot_id,
        sequence_number=sequence_number,
        manifest_list=list_path,
        summary=Summary(Operation.DELETE, **{"added-delete-files": "1"}),
        schema_id=table.schema().schema_id,
    )
    ref = SetSnapshotRefUpdate(  # type: ignore[call-arg]  # optional fields declared via Annotated
        ref_name="main", type=SnapshotRefType.BRANCH, snapshot_id=snapshot_id
    )
    requirement = AssertRefSnapshotId(ref="main", snapshot_id=parent.snapshot_id)
    catalog.commit_table(table, (requirement,), (AddSnapshotUpdate(snapshot=snapshot), ref))
    return catalog.load_table(table.name())


def largest_data_file(table: Table) -> DataFile:
    """The data file with the most rows (ties broken by path, so the choice is deterministic)."""
    return max((task.file for task in table.scan().plan_files()), key=lambda f: (f.record_count, f.file_path))


def delete_ids(catalog: LocalCatalog, table: Table, ids: list[int], like: DataFile | None) -> Table:
    """Equality-delete rows by ``id`` (field 1), in ``like``'s partition or unpartitioned."""
    rows = pa.table({"id": ids}, schema=pa.schema([ID_FIELD]))
    return commit_delete_file(catalog, table, write_delete_file(table, rows, like, [ID_FIELD_ID]))


def delete_positions(catalog: LocalCatalog, table: Table, positions: list[int]) -> tuple[Table, list[Row]]:
    """Position-delete ``positions`` of the table's largest data file; return the table and deleted rows."""
    data_file = largest_data_file(table)
    deleted = canonical_rows(pq.read_table(data_file.file_path).take(positions), COLUMNS)
    paths = [data_file.file_path] * len(positions)
    rows = pa.table({"file_path": paths, "pos": positions}, schema=POS_DELETE_SCHEMA)
    return commit_delete_file(catalog, table, write_delete_file(table, rows, data_file, [])), deleted


def minus(rows: list[Row], removed: list[Row]) -> list[Row]:
    """Multiset difference of canonical rows."""
    return list((Counter(canon(rows)) - Counter(canon(removed))).elements())


def canon(rows: list[Row]) -> list[Row]:
    """Rows with canonical values (one NaN object, UTC datetimes) so they hash and compare stably."""
    return [tuple(canonical_value(v) for v in row) for row in rows]


@dataclass(frozen=True)
class Case:
    """One table state an oracle must read back: where, which snapshot, and the expected rows."""

    metadata_location: str
    expected: list[Row]
    snapshot_id: int | None = None
    equality_deletes: bool = False


def build_cases(root: Path) -> dict[str, Case]:
    """Write every table state once; cases are read by all oracles."""
    catalog, rows = LocalCatalog(), make_rows(range(40))
    cases: dict[str, Case] = {}

    plain = catalog.create_table("db.plain", str(root / "plain"))
    plain.append(to_arrow(rows[:25]))
    plain.append(to_arrow(rows[25:]))
    cases["two_appends"] = Case(plain.metadata_location, rows)

    part = catalog.create_table("db.part", str(root / "part"), PARTITIONED)
    part.append(to_arrow(rows))
    cases["identity_bucket_partitions"] = Case(part.metadata_location, rows)

    cow = catalog.create_table("db.cow", str(root / "cow"))
    cow.append(to_arrow(rows))
    before = cow.current_snapshot()
    assert before is not None
    cow.delete("id < 10")
    cases["copy_on_write_delete"] = Case(cow.metadata_location, [r for r in rows if r[0] >= 10])
    cases["time_travel"] = Case(cow.metadata_location, rows, snapshot_id=before.snapshot_id)

    plain, deleted = delete_positions(catalog, plain, [0, 3, 4, 24])
    cases["position_deletes"] = Case(plain.metadata_location, minus(rows, deleted))

    part, deleted = delete_positions(catalog, part, [0, 1])
    cases["position_deletes_partitioned"] = Case(part.metadata_location, minus(rows, deleted))

    eq = catalog.create_table("db.eq", str(root / "eq"))
    eq.append(to_arrow(rows))
    eq = delete_ids(catalog, eq, [1, 2, 30, 999], None)
    reinserted = make_rows(range(1, 3))  # newer sequence number: the equality delete must not apply
    eq.append(to_arrow(reinserted))
    survivors = [r for r in rows if r[0] not in (1, 2, 30)] + reinserted
    cases["equality_deletes"] = Case(eq.metadata_location, survivors, equality_deletes=True)

    peq = catalog.create_table("db.peq", str(root / "peq"), PARTITIONED)
    peq.append(to_arrow(rows))
    target = largest_data_file(peq)
    inside = canonical_rows(pq.read_table(target.file_path), COLUMNS)[0][0]
    outside = next(r[0] for r in rows if r[0] not in pq.read_table(target.file_path)["id"].to_pylist())
    peq = delete_ids(catalog, peq, [inside, outside], target)  # scoped to target's partition
    survivors = [r for r in rows if r[0] != inside]
    cases["equality_deletes_partitioned"] = Case(peq.metadata_location, survivors, equality_deletes=True)
    return cases


CASE_NAMES = [
    "two_appends",
    "identity_bucket_partitions",
    "copy_on_write_delete",
    "time_travel",
    "position_deletes",
    "position_deletes_partitioned",
    "equality_deletes",
    "equality_deletes_partitioned",
]
# Known oracle bugs, kept strict so that a fixed reader turns the xfail into a failure to clean up.
KNOWN_BUGS = {
    ("duckdb", "equality_deletes_partitioned"): pytest.mark.xfail(
        strict=True,
        reason="duckdb-iceberg 1.5.5 applies a partitioned equality-delete file to every partition "
        "(spec: only to data files of the delete file's own partition)",
    ),
}


def params(reader: str) -> list[Any]:
    """``CASE_NAMES`` as pytest params, with ``reader``'s known bugs marked."""
    return [pytest.param(name, marks=KNOWN_BUGS.get((reader, name), ())) for name in CASE_NAMES]


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Case]:
    return build_cases(tmp_path_factory.mktemp("oracle-tables"))


@pytest.fixture()
def java_reader(java: JavaIcebergReader | None) -> JavaIcebergReader:
    """The session's Java reader (tests/conftest.py): one JVM per test process, not one more here."""
    if java is None:
        pytest.skip("Iceberg's Java oracle is off (ROWOPS_SKIP_JAVA or pyspark 4.x)")
    return java


@pytest.mark.parametrize("name", params("duckdb"))
def test_duckdb_reads_back(cases: dict[str, Case], name: str) -> None:
    case = cases[name]
    table = read_duckdb(case.metadata_location, case.snapshot_id)
    assert_same_rows(case.expected, table, COLUMNS, f"duckdb/{name}")


@pytest.mark.parametrize("name", params("pyiceberg"))
def test_pyiceberg_reads_back(cases: dict[str, Case], name: str) -> None:
    case = cases[name]
    if case.equality_deletes:
        with pytest.raises(EqualityDeletesUnsupportedError):
            read_pyiceberg(case.metadata_location, case.snapshot_id)
        return
    table = read_pyiceberg(case.metadata_location, case.snapshot_id)
    assert_same_rows(case.expected, table, COLUMNS, f"pyiceberg/{name}")


@pytest.mark.java
@pytest.mark.parametrize("name", params("java"))
def test_java_reads_back(cases: dict[str, Case], java_reader: JavaIcebergReader, name: str) -> None:
    case = cases[name]
    table = java_reader.read(case.metadata_location, case.snapshot_id)
    assert_same_rows(case.expected, table, COLUMNS, f"java/{name}")


@pytest.mark.java
def test_java_error_keeps_worker_usable(
    cases: dict[str, Case], java_reader: JavaIcebergReader, tmp_path: Path
) -> None:
    with pytest.raises(JavaReadError, match="NotFoundException"):
        java_reader.read(str(tmp_path / "missing.metadata.json"))
    assert java_reader.read(cases["two_appends"].metadata_location).num_rows == 40


def test_assert_same_rows_shows_missing_and_extra_rows() -> None:
    actual = pa.table({"k": [1, 2, 2], "v": ["a", "b", None]})
    with pytest.raises(AssertionError) as info:
        assert_same_rows([(1, "a"), (2, "b"), (3, "c")], actual, ["k", "v"], "demo")
    message = str(info.value)
    assert "demo: rows differ" in message and "1 missing, 1 extra" in message
    assert "(3, 'c')" in message and "(2, None)" in message
