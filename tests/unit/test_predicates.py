"""Spark SQL predicates → pyiceberg expressions for UPDATE/DELETE pruning (``plan/predicates.py``)."""

from __future__ import annotations

import pytest
from pyiceberg.conversions import to_bytes
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestEntry, ManifestEntryStatus
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.typedef import Record
from pyiceberg.types import (
    DateType,
    DoubleType,
    IntegerType,
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
)

from rowops.meta.files import LiveFile
from rowops.plan.predicates import selector, translate

SCHEMA = Schema(
    NestedField(1, "k", LongType()),
    NestedField(2, "s", StringType()),
    NestedField(3, "x", DoubleType()),
    NestedField(4, "d", DateType()),
    NestedField(5, "i", IntegerType()),
)


@pytest.mark.parametrize(
    "where, complete",
    [
        ("k = 1 AND s = 'a' AND d >= '2024-01-01' AND i IN (1, 2)", True),
        ("k <> 1 AND s IS NOT NULL AND k <=> 2 AND 5 >= k", True),
        ("s = 'it''s'", False),  # Spark joins adjacent literals: not translated
        ('s = "x"', False),
        ("x < 1", False),  # double: NaN ordering differs
        ("i = 3000000000", False),  # out of the column's range
        ("k % 2 = 0 AND k < 3", False),
        ("d = '2024-1-1'", False),
    ],
)
def test_translation_is_complete_only_for_simple_comparisons(where: str, complete: bool) -> None:
    assert translate(where, SCHEMA).complete is complete


def test_an_or_at_the_top_translates_nothing() -> None:
    assert str(translate("k = 1 AND s = 'a' OR k = 2", SCHEMA).expression) == "AlwaysTrue()"


def _file(lower: int, upper: int, nulls: int) -> LiveFile:
    df = DataFile.from_args(
        content=DataFileContent.DATA, file_path="file:/t/a.parquet", file_format=FileFormat.PARQUET,
        partition=Record(), record_count=10, file_size_in_bytes=100,
        value_counts={1: 10}, null_value_counts={1: nulls},
        lower_bounds={1: to_bytes(LongType(), lower)}, upper_bounds={1: to_bytes(LongType(), upper)}, spec_id=0,
    )  # fmt: skip
    entry = ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, data_file=df)
    return LiveFile(entry, "/t/a.parquet", DataFileContent.DATA, 1, 0, ())


@pytest.mark.parametrize(
    "where, nulls, may, every",
    [
        ("k >= 0", 0, True, True),
        ("k >= 0", 1, True, False),  # a NULL k does not match: the file is not removed whole
        ("k <> 100", 0, True, True),
        ("k <> 100", 1, True, False),  # SQL: NULL <> 100 is not true
        ("k > 9", 0, False, False),
        ("k IS NULL", 0, False, False),
        ("k IS NOT NULL", 0, True, True),
        ("k < 5 AND k % 2 = 0", 0, True, False),  # part of it untranslated: never removed whole
    ],
)
def test_files_by_metrics(where: str, nulls: int, may: bool, every: bool) -> None:
    metadata = new_table_metadata(SCHEMA, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, "file:/t")
    select = selector(translate(where, metadata.schema()), metadata)
    f = _file(0, 9, nulls)
    assert (select.may_match(f), select.all_match(f)) == (may, every)


NESTED = Schema(
    NestedField(1, "k", LongType()),
    NestedField(2, "st", StructType(NestedField(3, "c1", LongType()), NestedField(4, "c2", StringType()))),
    NestedField(5, "l", ListType(6, StructType(NestedField(7, "p", LongType())))),
)


@pytest.mark.parametrize(
    "where, expression, complete",
    [
        ("st.c1 = 3", "EqualTo(term=Reference(name='st.c1'), literal=LongLiteral(3))", True),
        ("`st`.c2 IS NULL AND k > 1", "And(left=IsNull(term=Reference(name='st.c2')), ", True),
        ("st.c9 = 3", "AlwaysTrue()", False),  # no such field
        ("l.element.p = 3", "AlwaysTrue()", False),  # inside a list: not a value per row
        ("st = 3", "AlwaysTrue()", False),  # a struct
    ],
)
def test_fields_of_structs_translate(where: str, expression: str, complete: bool) -> None:
    translated = translate(where, NESTED)
    assert str(translated.expression).startswith(expression) and translated.complete is complete


def test_struct_field_files_by_metrics() -> None:
    """Inclusive metrics prune by a struct field's bounds; strict metrics, which pyiceberg 0.12 only
    evaluates on top-level columns, never claim every row matches."""
    metadata = new_table_metadata(NESTED, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, "file:/t")
    c1 = metadata.schema().find_field("st.c1").field_id
    df = DataFile.from_args(
        content=DataFileContent.DATA, file_path="file:/t/a.parquet", file_format=FileFormat.PARQUET,
        partition=Record(), record_count=10, file_size_in_bytes=100,
        value_counts={c1: 10}, null_value_counts={c1: 0},
        lower_bounds={c1: to_bytes(LongType(), 5)}, upper_bounds={c1: to_bytes(LongType(), 5)}, spec_id=0,
    )  # fmt: skip
    f = LiveFile(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, data_file=df), "/t/a.parquet",
                 DataFileContent.DATA, 1, 0, ())  # fmt: skip
    for where, may in [("st.c1 = 5", True), ("st.c1 = 6", False), ("st.c1 > 5", False)]:
        select = selector(translate(where, metadata.schema()), metadata)
        assert (select.may_match(f), select.all_match(f)) == (may, False)
