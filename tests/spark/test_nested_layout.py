"""Partitioning and sorting by a primitive field of a struct (``s.c1``): created, evolved, written by
every scanning strategy, pruned by filters on the field, and read back by rowops, DuckDB, PyIceberg and
Iceberg's Java reader. Sources inside lists and maps are refused (Iceberg's rule)."""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq
import pytest

import rowops
from rowops.errors import InvalidPartitionSpecError, RowOpsError, UnsupportedStrategyError
from rowops.plan.predicates import candidates
from tests.spark.test_errors import assert_unchanged
from tests.spark.test_nested_types import N, Oracle, assert_readers_agree, frame, make_row

_INSIDE = "inside a list or a map"


def c1_of(row: Any) -> Any:
    return None if row[1] is None else row[1][0]


def add_1000(row: list[Any]) -> None:
    row[6] += 1000


def check_sorted_desc(table: Any, before: set[str]) -> None:
    """Every new data file is sorted by ``s.c1 DESC`` (NULLs last, Iceberg's default for DESC)."""
    new = [f for f in table.files().data if f.path not in before]
    assert new
    for f in new:
        values = [
            None if s is None else s["c1"] for s in pq.read_table(f.path, columns=["s"])["s"].to_pylist()
        ]
        present = [v for v in values if v is not None]
        assert present == sorted(present, reverse=True) and values[: len(present)] == present


@pytest.mark.parametrize("strategy", ["copy-on-write", "position-delete"])
def test_partition_and_sort_by_a_struct_field(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    rows = [make_row(k) for k in range(N)]
    table = lake.create_table(
        "db.nl",
        frame(lake.spark, rows),
        partition_by=["bucket(3, s.c1)"],
        sort_by=["s.c1 DESC"],
        identifier=["k"],
    )
    oracle = Oracle(rows)
    c1 = table.schema.find_field("s.c1").field_id
    assert [(f.name, f.source_id) for f in table.metadata.spec().fields] == [("s_c1_bucket", c1)]
    partitions = {f.partition for f in table.files().data}
    assert len(partitions) > 2 and (None,) in partitions  # NULL structs: a NULL partition value
    assert_readers_agree(table, oracle.rows.values(), java)

    before = {f.path for f in table.files().data}
    source = [make_row(k, 1) for k in (1, 2, 3, 30, 31)]
    rowops.merge(frame(lake.spark, source), table, on=["k"], strategy=strategy)
    oracle.upsert(source)
    check_sorted_desc(table, before)
    # a filter on the struct field prunes by the partition (bucket) and by the field's bounds
    kept, _ = candidates("s.c1 = 130", table.files().data, table.metadata)
    assert 0 < len(kept) < len(table.files().data)
    expected = sorted(r[0] for r in oracle.rows.values() if c1_of(r) == 130)
    assert sorted(r.k for r in table.to_df(where="s.c1 = 130").collect()) == expected == [13]
    rowops.update(table, set={"n": "n + 1000"}, where="s.c1 >= 150", strategy=strategy)
    oracle.change([k for k, r in oracle.rows.items() if (c1_of(r) or 0) >= 150], add_1000)
    rowops.delete(table, where="s.c1 < 40", strategy=strategy)
    oracle.delete([k for k, r in oracle.rows.items() if c1_of(r) is not None and c1_of(r) < 40])
    assert_readers_agree(table, oracle.rows.values(), java)

    # evolution: bucket -> truncate of the same field; an upsert over files of both specs
    table.replace_partition_field("bucket(3, s.c1)", "truncate(100, s.c1)")
    assert [f.name for f in table.metadata.spec().fields] == ["s_c1_trunc_100"]
    source = [make_row(k, 2) for k in (2, 5, 17, 40)]
    rowops.merge(frame(lake.spark, source), table, on=["k"], strategy=strategy)
    oracle.upsert(source)
    assert {f.spec_id for f in table.files().data} >= {1}
    new_spec = [f for f in table.files().data if f.spec_id == 1]
    assert {f.partition for f in new_spec} <= {(0,), (100,), (200,), (400,), (None,)}
    assert_readers_agree(table, oracle.rows.values(), java)


def test_struct_field_partitions_and_equality_deletes(lake) -> None:  # type: ignore[no-untyped-def]
    """A struct field is never a key, so a table partitioned by one has no equality-delete encoding
    (no unpartitioned spec for a global delete): a clear error, and `auto` scans."""
    rows = [make_row(k) for k in range(8)]
    table = lake.create_table("db.ne", frame(lake.spark, rows), partition_by=["s.c1"], identifier=["k"])
    source = frame(lake.spark, [make_row(1, 1)])
    assert_unchanged(
        lake,
        lambda: rowops.merge(source, table, on=["k"], strategy="equality-delete"),
        UnsupportedStrategyError,
        "partition columns ['s.c1']",
        "Help:",
    )
    assert rowops.merge(source, table, on=["k"]).strategy != "equality-delete"


@pytest.mark.parametrize(
    "action, error, needle",
    [
        (
            lambda lake, t: t.add_partition_field("bucket(2, ls.element.p)"),
            InvalidPartitionSpecError,
            _INSIDE,
        ),
        (lambda lake, t: t.add_partition_field("truncate(2, m.key)"), InvalidPartitionSpecError, _INSIDE),
        (lambda lake, t: t.replace_sort_order(["ms.value.v"]), RowOpsError, _INSIDE),
        (lambda lake, t: t.add_partition_field("s.inner"), InvalidPartitionSpecError, "nested type"),
        (
            lambda lake, t: lake.create_table("db.x", t.to_df(), partition_by=["a.element"]),
            InvalidPartitionSpecError,
            _INSIDE,
        ),
    ],
)
def test_sources_inside_lists_and_maps_are_refused(lake, action, error, needle) -> None:  # type: ignore[no-untyped-def]
    table = lake.create_table("db.nr", frame(lake.spark, [make_row(k) for k in range(4)]), identifier=["k"])
    assert_unchanged(lake, lambda: action(lake, table), error, needle, "Help:")
