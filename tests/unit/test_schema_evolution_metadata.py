"""Schema changes as metadata (no Spark): field ids, ``last-column-id``, the schemas list, conflicts."""

from __future__ import annotations

import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import DecimalType, IntegerType, LongType, NestedField, StringType

from rowops.commit.rebase import find_conflict
from rowops.commit.row_delta import RowDelta
from rowops.errors import CommitConflictError, ConflictKind, InvalidSchemaChangeError
from rowops.meta import evolution, stored_schema
from rowops.meta.fileio import make_io
from rowops.meta.files import TableFiles

SCHEMA = Schema(
    NestedField(1, "k", LongType(), required=True),
    NestedField(2, "n", IntegerType()),
    NestedField(3, "amt", DecimalType(10, 2)),
    NestedField(4, "s", StringType()),
    identifier_field_ids=[1],
)
SPEC = PartitionSpec(PartitionField(1, 1000, BucketTransform(4), "k_bucket"))
METADATA = new_table_metadata(SCHEMA, SPEC, UNSORTED_SORT_ORDER, "/lake/t", {})
NO_FILES = TableFiles(None, 0, (), (), (), ())


def test_changes_follow_the_v2_spec() -> None:
    added = evolution.add_columns(METADATA, {"note": "string", "score": "decimal(12,2)"})
    m1 = added.apply(METADATA, None)
    assert [f.field_id for f in m1.schema().fields] == [1, 2, 3, 4, 5, 6]
    assert (m1.last_column_id, m1.current_schema_id, [s.schema_id for s in m1.schemas]) == (6, 1, [0, 1])
    assert not m1.schema().find_field("note").required
    m2 = evolution.rename_column(m1, "s", "label").apply(m1, None)
    assert m2.schema().find_field("label").field_id == 4
    m3 = evolution.widen_column(m2, "n", "bigint").apply(m2, None)
    m3 = evolution.widen_column(m3, "amt", "decimal(14,2)").apply(m3, None)
    assert stored_schema.promoted_ids(m3) == frozenset({2, 3})
    m4 = evolution.drop_column(m3, "note").apply(m3, None)
    assert m4.schema().column_names == ["k", "n", "amt", "label", "score"]
    assert m4.last_column_id == 6  # ids are never reused
    m5 = evolution.add_columns(m4, {"note": "int"}).apply(m4, None)
    assert m5.schema().find_field("note").field_id == 7
    assert m5.schema().identifier_field_ids == [1]


def test_a_change_applies_only_on_its_schema() -> None:
    first = evolution.add_columns(METADATA, {"a": "int"})
    second = evolution.add_columns(METADATA, {"b": "int"})  # computed on the same schema
    after_first = first.apply(METADATA, None)
    with pytest.raises(CommitConflictError) as caught:
        second.apply(after_first, None, "db.t")
    assert caught.value.kind == ConflictKind.SCHEMA_CHANGED and "db.t" in str(caught.value)


def test_a_write_planned_on_an_old_schema_conflicts_even_when_blind() -> None:
    evolved = evolution.add_columns(METADATA, {"a": "int"}).apply(METADATA, None)
    for blind in (True, False):
        delta = RowDelta(Operation.APPEND, blind=blind, schema_id=METADATA.current_schema_id)
        conflict = find_conflict(delta, NO_FILES, NO_FILES, evolved, io=make_io())
        assert conflict is not None and conflict.kind == ConflictKind.SCHEMA_CHANGED
        same = RowDelta(Operation.APPEND, blind=blind, schema_id=evolved.current_schema_id)
        assert find_conflict(same, NO_FILES, NO_FILES, evolved, io=make_io()) is None


@pytest.mark.parametrize(
    ("old", "new", "allowed"),
    [
        ("n", "bigint", True),
        ("amt", "decimal(11,2)", True),
        ("amt", "decimal(12,3)", False),  # pyiceberg 0.12's promote would allow it
        ("amt", "decimal(9,2)", False),
        ("k", "int", False),
        ("s", "binary", False),
    ],
)
def test_only_iceberg_promotions(old: str, new: str, allowed: bool) -> None:
    if allowed:
        evolution.widen_column(METADATA, old, new)
    else:
        with pytest.raises(InvalidSchemaChangeError, match="Cannot widen"):
            evolution.widen_column(METADATA, old, new)


def test_drop_of_partition_source_is_refused_even_when_not_a_key() -> None:
    meta = new_table_metadata(
        Schema(NestedField(1, "k", LongType()), NestedField(2, "p", IntegerType())),
        PartitionSpec(PartitionField(2, 1000, BucketTransform(4), "p_bucket")),
        UNSORTED_SORT_ORDER,
        "/lake/p",
        {},
    )
    with pytest.raises(InvalidSchemaChangeError, match="partition field"):
        evolution.drop_column(meta, "p")
