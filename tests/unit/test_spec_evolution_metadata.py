"""Partition spec and sort order changes as metadata (no Spark): spec ids, field ids,
``last-partition-id``, the v2 removal rule, conflicts, and the steps a transaction replays."""

from __future__ import annotations

import pytest
from pyiceberg.schema import Schema
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.sorting import NullOrder, SortDirection
from pyiceberg.table.update import AssertDefaultSortOrderId, AssertDefaultSpecId
from pyiceberg.transforms import BucketTransform, DayTransform, HourTransform, IdentityTransform
from pyiceberg.types import DateType, DoubleType, LongType, NestedField, StringType, TimestamptzType

from rowops.catalog.steps import SchemaStep, StepConflict
from rowops.commit.rebase import find_conflict
from rowops.commit.row_delta import RowDelta
from rowops.errors import (
    CommitConflictError,
    ConflictKind,
    InvalidPartitionSpecError,
    InvalidSortOrderError,
    NoSuchColumnError,
)
from rowops.meta import evolution
from rowops.meta.fileio import make_io
from rowops.meta.files import TableFiles
from rowops.meta.spec_evolution import replace_sort_order, spec_text, update_spec
from rowops.meta.tables import new_metadata
from rowops.request.partitioning import parse_partition_by

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "ts", TimestamptzType()),
    NestedField(3, "s", StringType()),
    NestedField(4, "d", DateType()),
    NestedField(5, "x", DoubleType()),
)
NO_FILES = TableFiles(None, 0, (), (), (), ())


def unpartitioned():  # type: ignore[no-untyped-def]
    return new_metadata(SCHEMA, [], ["id"], "/lake/t")


def test_evolution_sequence_assigns_spec_and_field_ids() -> None:
    m0 = unpartitioned()
    m1 = update_spec(m0, add=[("bucket(16, id)", None)]).apply(m0, None)
    assert (m1.default_spec_id, m1.last_partition_id) == (1, 1000)
    assert [(f.field_id, f.name, f.transform) for f in m1.spec().fields] == [
        (1000, "id_bucket_16", BucketTransform(16))
    ]
    m2 = update_spec(m1, add=[("days(ts)", "ts_day")]).apply(m1, None)
    assert (m2.default_spec_id, m2.last_partition_id) == (2, 1001)
    assert [f.name for f in m2.spec().fields] == ["id_bucket_16", "ts_day"]
    # format v2: a removed field is dropped from the new spec (v1 would keep it as void)
    m3 = update_spec(m2, drop=["bucket(16, id)"]).apply(m2, None)
    assert [(f.field_id, f.name, f.transform) for f in m3.spec().fields] == [(1001, "ts_day", DayTransform())]
    assert (m3.default_spec_id, m3.last_partition_id) == (3, 1001)
    # every spec stays in the metadata: old files keep theirs
    assert sorted(m3.specs()) == [0, 1, 2, 3]
    # back to unpartitioned: Iceberg reuses the identical spec 0
    m4 = update_spec(m3, drop=["ts_day"]).apply(m3, None)
    assert m4.default_spec_id == 0 and m4.spec().fields == ()
    # replace: one commit, old field out, new one in with a fresh id
    m5 = update_spec(m4, add=[("day(ts)", None)]).apply(m4, None)
    m6 = update_spec(m5, add=[("hour(ts)", None)], drop=["day(ts)"]).apply(m5, None)
    assert [(f.name, f.transform) for f in m6.spec().fields] == [("ts_hour", HourTransform())]
    assert m6.last_partition_id == m5.last_partition_id + 1
    # rename keeps the field id
    m7 = update_spec(m6, rename={"ts_hour": "hr"}).apply(m6, None)
    assert [(f.field_id, f.name) for f in m7.spec().fields] == [(m6.spec().fields[0].field_id, "hr")]
    assert spec_text(m7) == "hr=hour(ts)"


def test_identity_and_void_terms() -> None:
    m0 = unpartitioned()
    m1 = update_spec(m0, add=[("s", None), ("void(d)", "gone")]).apply(m0, None)
    assert [(f.name, str(f.transform)) for f in m1.spec().fields] == [("s", "identity"), ("gone", "void")]
    m2 = update_spec(m1, drop=["s"]).apply(m1, None)  # by name (identity: the column's name)
    assert [f.name for f in m2.spec().fields] == ["gone"]
    assert parse_partition_by(["void(d)"])[0].transform == "void"


@pytest.mark.parametrize(
    ("kwargs", "error", "needle"),
    [
        ({"add": [("bucket(4, nope)", None)]}, InvalidPartitionSpecError, "no column 'nope'"),
        ({"add": [("hour(d)", None)]}, InvalidPartitionSpecError, "cannot apply hour"),
        ({"add": [("x", None)]}, InvalidPartitionSpecError, "floating point"),
        ({"add": [("bucket(0, id)", None)]}, InvalidPartitionSpecError, "needs (N, column)"),
        ({"add": [("frobnicate(id)", None)]}, InvalidPartitionSpecError, "unknown transform"),
        (
            {"add": [("bucket(4, id)", None), ("bucket(4, id)", None)]},
            InvalidPartitionSpecError,
            "Already added",
        ),
        ({"drop": ["id_bucket"]}, InvalidPartitionSpecError, "has no field 'id_bucket'"),
        ({"rename": {"nope": "x2"}}, InvalidPartitionSpecError, "has no field 'nope'"),
        ({}, InvalidPartitionSpecError, "needs a field"),
    ],
)
def test_bad_spec_changes(kwargs: dict, error: type[Exception], needle: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(error) as caught:
        update_spec(unpartitioned(), **kwargs)
    assert needle in str(caught.value) and "Help:" in str(caught.value)


def test_adding_an_existing_field_or_name_is_refused() -> None:
    m0 = unpartitioned()
    m1 = update_spec(m0, add=[("bucket(4, id)", None), ("day(ts)", None)]).apply(m0, None)
    with pytest.raises(InvalidPartitionSpecError, match="Duplicate partition field"):
        update_spec(m1, add=[("bucket(4, id)", None)])
    with pytest.raises(InvalidPartitionSpecError, match="must be unique"):
        update_spec(m1, rename={"ts_day": "id_bucket_4"})
    with pytest.raises(InvalidPartitionSpecError, match="exists in schema"):
        update_spec(m1, add=[("bucket(8, id)", "s")])


def test_a_spec_change_conflicts_with_a_concurrent_spec_change_only() -> None:
    m0 = unpartitioned()
    first = update_spec(m0, add=[("bucket(4, id)", None)])
    second = update_spec(m0, add=[("day(ts)", None)])
    m1 = first.apply(m0, None)
    with pytest.raises(CommitConflictError) as caught:
        second.apply(m1, None, "db.t")
    assert caught.value.kind == ConflictKind.SPEC_CHANGED and "Help:" in str(caught.value)
    # a sort order change rebases over the spec change; a schema change makes it schema-changed
    order = replace_sort_order(m0, ["ts DESC"])
    assert order.conflict(m1) is None
    renamed = evolution.add_columns(m1, {"n": "int"}).apply(m1, None)
    late = update_spec(m1, add=[("day(ts)", None)])
    assert late.conflict_kind(renamed) == ConflictKind.SCHEMA_CHANGED
    with pytest.raises(CommitConflictError) as caught:
        late.apply(renamed, None, "db.t")
    assert caught.value.kind == ConflictKind.SCHEMA_CHANGED
    # what a pyiceberg catalog checks
    assert AssertDefaultSpecId(default_spec_id=0) in first.requirements()
    assert order.requirements() == (AssertDefaultSortOrderId(default_sort_order_id=0),)


def test_a_transaction_step_replays_as_a_spec_conflict() -> None:
    m0 = unpartitioned()
    step = SchemaStep(update_spec(m0, add=[("bucket(4, id)", None)]))
    moved = update_spec(m0, add=[("day(ts)", None)]).apply(m0, None)
    with pytest.raises(StepConflict) as caught:
        step.replay(moved, None, None)  # type: ignore[arg-type]
    assert caught.value.conflict.kind == ConflictKind.SPEC_CHANGED
    assert step.operation == "update-spec"


def test_a_write_planned_on_an_old_spec_conflicts() -> None:
    m0 = unpartitioned()
    m1 = update_spec(m0, add=[("bucket(4, id)", None)]).apply(m0, None)
    for blind in (True, False):
        delta = RowDelta(Operation.APPEND, blind=blind, spec_id=m0.default_spec_id)
        conflict = find_conflict(delta, NO_FILES, NO_FILES, m1, io=make_io())
        assert conflict is not None and conflict.kind == ConflictKind.SPEC_CHANGED
        same = RowDelta(Operation.APPEND, blind=blind, spec_id=m1.default_spec_id)
        assert find_conflict(same, NO_FILES, NO_FILES, m1, io=make_io()) is None


def test_sort_order_changes() -> None:
    m0 = unpartitioned()
    m1 = replace_sort_order(m0, ["ts DESC", "s NULLS LAST"]).apply(m0, None)
    order = m1.sort_order()
    assert m1.default_sort_order_id == 1
    assert [(f.source_id, f.direction, f.null_order) for f in order.fields] == [
        (2, SortDirection.DESC, NullOrder.NULLS_LAST),
        (3, SortDirection.ASC, NullOrder.NULLS_LAST),
    ]
    assert all(f.transform == IdentityTransform() for f in order.fields)
    m2 = replace_sort_order(m1, ["id"], distribution_mode="range").apply(m1, None)
    assert m2.default_sort_order_id == 2 and m2.properties["write.distribution-mode"] == "range"
    m3 = replace_sort_order(m2, ["ts DESC", "s NULLS LAST"]).apply(m2, None)
    assert m3.default_sort_order_id == 1  # an identical order is reused
    m4 = replace_sort_order(m3, []).apply(m3, None)
    assert m4.default_sort_order_id == 0 and not m4.sort_order().fields
    with pytest.raises(NoSuchColumnError):
        replace_sort_order(m0, ["nope"])
    with pytest.raises(InvalidSortOrderError):
        replace_sort_order(m0, ["id", "id DESC"])
    with pytest.raises(InvalidSortOrderError):
        replace_sort_order(m0, "id")  # type: ignore[arg-type]
