"""Copy-on-write rewrites in pyarrow tasks (``exec/arrow_rewrite.py``): which files take that way,
and that what they write reads back as Spark's rewrite would, through every reader."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

import rowops
from tests.conftest import make_lake
from tests.readers import assert_readers_agree
from tests.spark.tables import COLUMNS, Layout, Oracle, frame, make_row

N = 60
BUCKET = Layout("bucket", ("bucket(4, k)",), ("k",))


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def lake(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """Executors write the rewritten files through pyarrow's file system: local disk and S3."""
    return make_lake(request.param, request)


def _create(lake, layout: Layout = BUCKET, format_version: int = 2):  # type: ignore[no-untyped-def]
    rows = [make_row(k) for k in range(N)]
    table = lake.create_table(
        "db.t",
        frame(lake.spark, rows),
        partition_by=list(layout.partition_by),
        identifier=list(layout.keys),
        format_version=format_version,
    )
    # read weight 0: small rewritten files are rewritten, not merged into the new rows' files
    table.set_properties(**{"rowops.read-weight": "0"})
    return table, Oracle(layout, rows)


def _arrow_written(table) -> set[str]:  # type: ignore[no-untyped-def]
    return {f.path for f in table.files().data if "/part-arrow-" in f.path}


@pytest.mark.parametrize("enabled", ["true", "false"])
def test_copy_on_write_rewrites_in_arrow_unless_disabled(lake, java, enabled) -> None:  # type: ignore[no-untyped-def]
    table, oracle = _create(lake)
    table.set_properties(**{"rowops.rewrite.arrow.enabled": enabled})
    before = {f.path: f for f in table.files().data}
    changes = [make_row(k, 1) for k in range(0, N, 5)] + [make_row(k, 1) for k in range(N, N + 3)]
    rowops.merge(frame(lake.spark, changes), table, on=["k"], strategy="copy-on-write")
    oracle.upsert(changes)
    arrow = _arrow_written(table)
    if enabled == "true":  # one new file per rewritten file, in its partition, survivors only
        rewritten = {p for p in before if p not in {f.path for f in table.files().data}}
        assert len(arrow) == len(rewritten) > 0
        by_path = {f.path: f for f in table.files().data}
        assert {by_path[p].partition for p in arrow} == {before[p].partition for p in rewritten}
        survivors = sum(before[p].record_count for p in rewritten) - len(range(0, N, 5))
        assert sum(by_path[p].record_count for p in arrow) == survivors
    else:
        assert not arrow
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


@pytest.mark.parametrize("format_version", [2, 3])  # position delete files; deletion vectors
def test_arrow_rewrite_drops_earlier_position_deletes(lake, java, format_version) -> None:  # type: ignore[no-untyped-def]
    table, oracle = _create(lake, format_version=format_version)
    gone = [make_row(k) for k in (1, 2, 3, 4)]
    rowops.merge(frame(lake.spark, gone), table, on=["k"], when_matched="delete", when_not_matched=None,
                 strategy="position-delete")  # fmt: skip
    oracle.delete_keys(gone)
    changes = [make_row(k, 2) for k in range(5, N, 2)]  # touches every file
    rowops.merge(frame(lake.spark, changes), table, on=["k"], strategy="copy-on-write")
    oracle.upsert(changes)
    files = table.files()
    assert _arrow_written(table)
    assert not any(d.referenced_file in {f.path for f in files.data} for d in files.position_deletes)
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_arrow_rewrite_writes_the_current_schema(lake, java) -> None:  # type: ignore[no-untyped-def]
    """Old files store a narrower type, an old name, a dropped column and lack an added one."""
    table, oracle = _create(lake)
    table.widen_column("n", "bigint")
    table.rename_column("s", "label")
    table.drop_column("flag")
    table.add_columns({"note": "string"})
    columns = ["k", "g", "label", "amt", "d", "ts", "x", "n", "note"]
    expected = {r[0]: (*r[:7], r[8], None) for r in oracle.values()}
    rowops.update(table, set={"n": "n + 10000000000"}, where="k % 7 = 0", strategy="copy-on-write")
    for k in range(0, N, 7):
        row = expected[k]
        expected[k] = (*row[:7], row[7] + 10_000_000_000, None)
    assert _arrow_written(table)
    assert table.to_df().schema["n"].dataType.simpleString() == "bigint"
    assert_readers_agree(table, expected.values(), columns, java)


def test_files_under_equality_deletes_are_rewritten_by_spark(lake, java) -> None:  # type: ignore[no-untyped-def]
    """The first upsert's equality deletes apply to the original files only: those are rewritten by
    Spark (a key join applies the deletes); the first upsert's own new file, which they do not
    apply to, is rewritten in Arrow."""
    table, oracle = _create(lake)
    first = [make_row(k, 1) for k in (1, 2, 3)]
    rowops.merge(frame(lake.spark, first), table, on=["k"], strategy="equality-delete")
    oracle.upsert(first)
    second = [make_row(k, 2) for k in range(0, N, 3)]
    rowops.merge(frame(lake.spark, second), table, on=["k"], strategy="copy-on-write")
    oracle.upsert(second)
    rewrites = [f.path for f in table.files().data if "/rewrite-" in f.path]
    assert [p for p in rewrites if "/part-arrow-" in p]
    assert [p for p in rewrites if "/part-arrow-" not in p]
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_sorted_table_rewrite_keeps_the_sort_order(lake, java) -> None:  # type: ignore[no-untyped-def]
    rows = [make_row(k) for k in range(N)]
    table = lake.create_table(
        "db.t", frame(lake.spark, rows), identifier=["k"], sort_by=["x DESC NULLS LAST"]
    )
    table.set_properties(**{"rowops.read-weight": "0"})
    oracle = Oracle(Layout("unpartitioned", (), ("k",)), rows)
    changes = [make_row(k, 3) for k in range(0, N, 6)]
    rowops.merge(frame(lake.spark, changes), table, on=["k"], strategy="copy-on-write")
    oracle.upsert(changes)
    arrow = [f for f in table.files().data if "/part-arrow-" in f.path]
    assert arrow and all(f.data_file.sort_order_id == table.metadata.default_sort_order_id for f in arrow)
    for f in arrow:
        xs = [
            v
            for v in pq.read_table(table.lake.catalog.io.new_input(f.path).open(), columns=["x"])[
                "x"
            ].to_pylist()
        ]
        assert xs == sorted(xs, key=lambda v: (v is None, -(v or 0)))
    assert_readers_agree(table, oracle.values(), COLUMNS, java)
