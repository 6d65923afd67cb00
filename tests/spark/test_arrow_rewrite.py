"""Copy-on-write rewrites in pyarrow tasks (``exec/rewriting/arrow_rewrite.py``): which files take that way,
and that what they write reads back as Spark's rewrite would, through every reader.

These tests are about the rewrite of the positions the MERGE join found: their tables turn the rewrite
by key off (``rowops.rewrite.by-key.enabled``; ``test_optimizations`` tests that one)."""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq
import pytest

import rowops
from rowops.errors import CardinalityViolationError, NullValueError
from rowops.exec.writing import strategies
from rowops.faults import InjectedFault
from tests.conftest import make_lake
from tests.readers import assert_readers_agree
from tests.spark.tables import COLUMNS, Layout, Oracle, frame, make_row
from tests.spark.test_errors import assert_unchanged
from tests.spark.test_nullability import STRICT

JOINED = {"rowops.rewrite.by-key.enabled": "false"}  # a copy-on-write through the MERGE join

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
    table.set_properties(**{"rowops.read-weight": "0"}, **JOINED)
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
    if enabled == "true":  # one new file per rewritten file, in its partition, updated rows in place
        rewritten = {p for p in before if p not in {f.path for f in table.files().data}}
        assert len(arrow) == len(rewritten) > 0
        by_path = {f.path: f for f in table.files().data}
        assert {by_path[p].partition for p in arrow} == {before[p].partition for p in rewritten}
        assert sum(by_path[p].record_count for p in arrow) == sum(before[p].record_count for p in rewritten)
        added = set(by_path) - set(before) - arrow  # the inserts only
        assert sum(by_path[p].record_count for p in added) == 3
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
    count = len(table.files().data)
    rowops.merge(frame(lake.spark, changes), table, on=["k"], strategy="copy-on-write")
    oracle.upsert(changes)
    files = table.files()
    assert _arrow_written(table) and len(files.data) == count  # updated rows among the survivors
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


def test_files_under_equality_deletes_are_rewritten_in_arrow(lake, java) -> None:  # type: ignore[no-untyped-def]
    """Three generations of equality deletes (upserts and a delete by key; key 1 updated twice, so the
    second delete also removes the first upsert's row of key 1): a copy-on-write over every file
    resolves them to positions and rewrites every touched file in Arrow, none by Spark."""
    table, oracle = _create(lake)
    steps = [([make_row(k, 1) for k in (1, 2, 3)], {}), ([make_row(k) for k in (4, 5)], {"when_matched": "delete",
             "when_not_matched": None}), ([make_row(1, 2)], {})]  # fmt: skip
    for rows, clauses in steps:
        rowops.merge(frame(lake.spark, rows), table, on=["k"], strategy="equality-delete", **clauses)
        oracle.delete_keys(rows) if clauses else oracle.upsert(rows)
    assert len(table.files().equality_deletes) >= 3
    changes = [make_row(k, 3) for k in range(0, N, 3)] + [make_row(N + 1, 3)]
    rowops.merge(frame(lake.spark, changes), table, on=["k"], strategy="copy-on-write")
    oracle.upsert(changes)
    rewrites = [f.path for f in table.files().data if "/rewrite-" in f.path]
    assert rewrites and all("/part-arrow-" in p for p in rewrites)
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_sorted_table_rewrite_keeps_the_sort_order(lake, java) -> None:  # type: ignore[no-untyped-def]
    rows = [make_row(k) for k in range(N)]
    table = lake.create_table(
        "db.t", frame(lake.spark, rows), identifier=["k"], sort_by=["x DESC NULLS LAST"]
    )
    table.set_properties(**{"rowops.read-weight": "0"})
    oracle = Oracle(Layout("unpartitioned", (), ("k",)), rows)
    changes = [make_row(k, 3) for k in range(0, N, 6)]
    before = {f.path: f.record_count for f in table.files().data}
    rowops.merge(frame(lake.spark, changes), table, on=["k"], strategy="copy-on-write")
    oracle.upsert(changes)
    arrow = [f for f in table.files().data if "/part-arrow-" in f.path]
    assert arrow and all(f.data_file.sort_order_id == table.metadata.default_sort_order_id for f in arrow)
    # a new value could break a file's order: the updated rows are written apart, sorted by Spark
    gone = set(before) - {f.path for f in table.files().data}
    assert sum(f.record_count for f in arrow) == sum(before[p] for p in gone) - len(changes)
    for f in arrow:
        xs = [
            v
            for v in pq.read_table(table.lake.catalog.io.new_input(f.path).open(), columns=["x"])[
                "x"
            ].to_pylist()
        ]
        assert xs == sorted(xs, key=lambda v: (v is None, -(v or 0)))
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def _column(table, path: str, name: str) -> list[Any]:  # type: ignore[no-untyped-def]
    with table.lake.catalog.io.new_input(path).open() as stream:
        return pq.read_table(stream, columns=[name])[name].to_pylist()  # type: ignore[no-any-return]


@pytest.mark.parametrize("operation", ["merge", "update"])
def test_updated_rows_replace_their_old_versions_in_the_rewritten_file(lake, java, operation) -> None:  # type: ignore[no-untyped-def]
    """A pure update keeps the number of data files: each rewritten file holds its updated rows, at
    the positions of their old versions, and no file of updated rows is written beside it."""
    table, oracle = _create(lake)
    before = {f.path: f for f in table.files().data}
    keys = list(range(0, N, 5))
    if operation == "merge":
        result = rowops.merge(frame(lake.spark, [make_row(k, 1) for k in keys]), table, on=["k"],
                              strategy="copy-on-write")  # fmt: skip
        oracle.upsert(make_row(k, 1) for k in keys)
    else:
        result = rowops.update(table, set={"n": "n + 100", "s": "concat(s, '!')"}, where="k % 5 = 0",
                               strategy="copy-on-write")  # fmt: skip
        for k in keys:
            row = oracle.rows[(k,)]
            oracle.rows[(k,)] = (*row[:2], None if row[2] is None else row[2] + "!", *row[3:8], row[8] + 100)
    assert result.rows_updated == len(keys) and result.rows_inserted == 0
    after = {f.path: f for f in table.files().data}
    summary = table.snapshots()[-1]["summary"]  # as many rows added as removed, counted by the commit
    rewritten_rows = str(sum(f.record_count for p, f in before.items() if p not in after))
    assert summary["added-records"] == summary["deleted-records"] == rewritten_rows
    assert len(after) == len(before), "a file of updated rows was written beside the rewrites"
    gone, arrow = set(before) - set(after), _arrow_written(table)
    assert arrow == set(after) - set(before) and len(arrow) == len(gone) == result.data_files_added > 0
    old_by_partition = {before[p].partition: p for p in gone}
    assert len(old_by_partition) == len(gone)
    expected = {r[0]: r[COLUMNS.index("n")] for r in oracle.values()}
    for path in arrow:
        old = old_by_partition[after[path].partition]
        assert _column(table, path, "k") == _column(table, old, "k")  # same rows, same order
        assert _column(table, path, "n") == [expected[k] for k in _column(table, path, "k")]
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_delete_update_and_insert_in_one_merge(lake, java) -> None:  # type: ignore[no-untyped-def]
    """Deleted rows leave the rewritten files, updated ones (matched, and not matched by source) stay
    in them, inserts are new files."""
    table, oracle = _create(lake)
    before = {f.path for f in table.files().data}
    keys = [*range(0, N, 4), N, N + 1]
    (
        table.merge(frame(lake.spark, [make_row(k, 4) for k in keys]), on=["k"])
        .when_matched("t.k % 8 = 0").delete()
        .when_matched().update_all()
        .when_not_matched().insert_all()
        .when_not_matched_by_source("t.k % 10 = 3").update({"n": "-7"})
        .execute(strategy="copy-on-write")
    )  # fmt: skip
    deleted = [k for k in range(0, N, 4) if k % 8 == 0]
    oracle.upsert(make_row(k, 4) for k in keys)
    oracle.delete_keys(make_row(k) for k in deleted)
    for k in range(3, N, 10):
        oracle.rows[(k,)] = (*oracle.rows[(k,)][:8], -7)
    after = {f.path: f for f in table.files().data}
    arrow = _arrow_written(table)
    assert sum(after[p].record_count for p in arrow) == N - len(deleted)
    assert sum(after[p].record_count for p in set(after) - before - arrow) == 2
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_null_in_an_updated_required_column_fails_and_changes_nothing(lake) -> None:  # type: ignore[no-untyped-def]
    """The updated rows a rewrite takes in are checked as every write checks them."""
    rows = [make_row(k) for k in range(N)]
    table = lake.create_table(
        "db.t", lake.spark.createDataFrame(rows, STRICT), partition_by=["bucket(4, k)"], identifier=["k"]
    )
    table.set_properties(**{"rowops.read-weight": "0"})
    assert_unchanged(
        lake,
        lambda: rowops.update(
            table, set={"n": "CASE WHEN k = 4 THEN NULL ELSE n END"}, strategy="copy-on-write"
        ),
        NullValueError,
        "column n is declared NOT NULL",
        "offending row: k=4",
        "Help:",
    )
    rowops.update(table, set={"n": "n + 1"}, where="k = 4", strategy="copy-on-write")
    assert _arrow_written(table)  # the same rewrite, without the NULL, goes through Arrow


def test_a_row_matched_twice_fails_before_anything_is_written(lake) -> None:  # type: ignore[no-untyped-def]
    table, _ = _create(lake)
    source = frame(lake.spark, [make_row(5, 1), make_row(5, 2), make_row(6, 1)])
    assert_unchanged(
        lake,
        lambda: rowops.merge(source, table, on=["k"], strategy="copy-on-write"),
        CardinalityViolationError,
        "(5,)",
    )


def test_a_crash_after_the_rewrites_leaves_no_trace(lake, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    table, _ = _create(lake)
    source = frame(lake.spark, [make_row(k, 1) for k in range(0, N, 3)])
    monkeypatch.setenv("ROWOPS_FAULT", "before-commit")
    assert_unchanged(
        lake,
        lambda: rowops.merge(source, table, on=["k"], strategy="copy-on-write"),
        InjectedFault,
        "before-commit",
    )
    monkeypatch.delenv("ROWOPS_FAULT")
    rowops.merge(source, table, on=["k"], strategy="copy-on-write")
    assert _arrow_written(table)


def test_small_files_go_into_the_rewrite_of_their_partition(lake, java) -> None:  # type: ignore[no-untyped-def]
    """A copy-on-write that rewrites a partition's big file and small files beside it writes one file
    per partition in Arrow: the small files' survivors (equality deletes applied by position, updated
    rows in place) follow the big file's, no survivor goes through Spark with the new rows."""
    layout = Layout("identity", ("g",), ("g", "k"))
    rows = [make_row(k) for k in range(3000)]
    table = lake.create_table("db.t", frame(lake.spark, rows), partition_by=["g"], identifier=["g", "k"])
    oracle = Oracle(layout, rows)
    for start in (5000, 5100):  # two small appends: a small file per partition each
        more = [make_row(k) for k in range(start, start + 12)]
        table.append(frame(lake.spark, more))
        oracle.upsert(more)
    updated = [make_row(k, 1) for k in (4, 5001, 5102)]  # equality deletes on the base and a small file
    rowops.merge(frame(lake.spark, updated), table, on=["g", "k"], strategy="equality-delete")
    oracle.upsert(updated)
    sizes = sorted(f.size for f in table.files().data)
    weight = 4 * sizes[-4] / (256 * 1024)  # merge threshold (``cost.worth_merging``) above the small files
    assert weight * 256 * 1024 < sizes[-3], "the base files must stay above the merge threshold"
    table.set_properties(**{"rowops.read-weight": f"{weight:.6f}"}, **JOINED)
    before = {f.path for f in table.files().data}
    # g = k % 3: every base file; the first append's files of g 1 and 2 (5002, 5000); the new file of
    # g 0 the equality-delete merge wrote (5001); and one insert
    changes = [make_row(k, 2) for k in (0, 1, 2, 5000, 5001, 5002)] + [make_row(9000, 2)]
    rowops.merge(frame(lake.spark, changes), table, on=["g", "k"], strategy="copy-on-write")
    oracle.upsert(changes)
    after = {f.path: f for f in table.files().data}
    arrow = _arrow_written(table)
    assert len(arrow) == 3  # one per partition, holding its base file's and its small files' rows
    assert len(before - set(after)) == 3 + 3  # the base files and the three touched small files
    # base rows but the one its equality delete removes (k = 4), two small files of 4 rows, one of 1
    assert sum(after[p].record_count for p in arrow) == 2999 + 4 + 4 + 1
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_rewritten_files_of_a_partition_go_into_its_largest(lake, java) -> None:  # type: ignore[no-untyped-def]
    """Files a copy-on-write rewrites anyway, too big to travel with the new rows (read weight 0: no
    file is worth merging for its own sake), are written into the rewrite of their partition's
    largest file while it stays under the target size: the same bytes, one file per partition."""
    layout = Layout("identity", ("g",), ("g", "k"))
    rows = [make_row(k) for k in range(3000)]
    table = lake.create_table("db.t", frame(lake.spark, rows), partition_by=["g"], identifier=["g", "k"])
    oracle = Oracle(layout, rows)
    for start in (5000, 6000):  # two appends: a file per partition each
        more = [make_row(k) for k in range(start, start + 300)]
        table.append(frame(lake.spark, more))
        oracle.upsert(more)
    table.set_properties(**{"rowops.read-weight": "0"}, **JOINED)
    before = {f.path for f in table.files().data}
    assert len(before) == 9
    changes = [make_row(k, 1) for k in (0, 1, 2, 5000, 5001, 5002, 6000, 6001, 6002)]
    rowops.merge(frame(lake.spark, changes), table, on=["g", "k"], strategy="copy-on-write")
    oracle.upsert(changes)
    after = {f.path: f for f in table.files().data}
    assert before.isdisjoint(after)  # every file held a changed row
    arrow = _arrow_written(table)
    assert len(arrow) == 3  # one per partition (nine, one per rewritten file, before)
    assert sum(after[p].record_count for p in arrow) == 3600
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


@pytest.mark.parametrize("lake", ["local"], indirect=True)
@pytest.mark.parametrize(("kind", "in_task"), [("int", True), ("string", False)])
def test_equality_deletes_of_integer_keys_apply_inside_the_rewrite(
    lake, java, monkeypatch, kind, in_task
) -> None:  # type: ignore[no-untyped-def]
    """A rewrite drops the rows equality deletes remove: in its own tasks for integer keys (packed
    codes, ``exec/rewriting/arrow_deletes.py``), by a Spark semi-join for others; both read back the same."""
    spark = lake.spark
    cast = str if kind == "string" else int
    rows = [(i, i % 2, f"v{i}") for i in range(40)]

    def df(data):  # type: ignore[no-untyped-def]
        return spark.createDataFrame([(cast(i), g, v) for i, g, v in data], f"id {kind}, grp int, v string")

    table = lake.create_table("db.t", df(rows), partition_by=["bucket(2, id)"], identifier=["id"])
    table.set_properties(**{"rowops.read-weight": "0"})
    current = {i: (i, g, v) for i, g, v in rows}
    for version, keys in enumerate([range(0, 40, 3), range(1, 40, 5)], start=1):
        batch = [(i, i % 2, f"v{i}-{version}") for i in keys]
        rowops.merge(df(batch), table, on=["id"], strategy="equality-delete")
        current.update({i: (i, g, v) for i, g, v in batch})
    seen: list[int] = []
    spark_path = strategies.equality_deleted_positions

    def recorded(spark, schema, index, files):  # type: ignore[no-untyped-def]
        seen.extend(1 for f in files if index.equality_deletes_on(f))
        return spark_path(spark, schema, index, files)

    monkeypatch.setattr(strategies, "equality_deleted_positions", recorded)
    rowops.update(table, set={"v": "concat(v, '!')"}, where="true", strategy="copy-on-write")
    assert not table.files().equality_deletes  # every file they applied to was rewritten
    assert (not seen) == in_task  # which path resolved the deleted rows
    expected = [(cast(i), g, f"{v}!") for i, g, v in current.values()]
    assert_readers_agree(table, expected, ["id", "grp", "v"], java)
