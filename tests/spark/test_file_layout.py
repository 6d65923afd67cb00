"""What rowops leaves on disk: delete files scoped to one data file, no dangling deletes, sorted files."""

from __future__ import annotations

import itertools
from collections import Counter

import pyarrow.parquet as pq
import pytest
from pyiceberg.table import StaticTable

import rowops
from rowops import errors
from tests.readers import assert_readers_agree
from tests.spark.tables import COLUMNS, Layout, Oracle, frame, make_row


def live_delete_files_per_data_file(table) -> Counter[str]:  # type: ignore[no-untyped-def]
    files = table.files()
    counts: Counter[str] = Counter()
    for delete in files.position_deletes:
        bounds = delete.referenced_paths
        assert bounds is not None and bounds[0] == bounds[1], (
            "a position delete file spans several data files"
        )
        counts[bounds[0]] += 1
    return counts


def test_one_position_delete_file_per_data_file(lake, java) -> None:  # type: ignore[no-untyped-def]
    layout = Layout("bucket", ("bucket(4, k)",), ("k",))
    rows = [make_row(k) for k in range(80)]
    table = lake.create_table(
        "db.t", frame(lake.spark, rows), partition_by=["bucket(4, k)"], identifier=["k"]
    )
    oracle = Oracle(layout, rows)
    data_before = {f.path for f in table.files().data}
    for version, keys in enumerate([range(0, 80, 5), range(1, 80, 7), range(2, 80, 3)], start=1):
        changes = [make_row(k, version) for k in keys]
        rowops.merge(frame(lake.spark, changes), table, on=["k"], strategy="position-delete")
        oracle.upsert(changes)
        counts = live_delete_files_per_data_file(table)
        assert counts and max(counts.values()) == 1
    # the original files were hit three times, yet each has one delete file holding all its positions
    original = {path: n for path, n in live_delete_files_per_data_file(table).items() if path in data_before}
    assert set(original) == data_before
    assert_readers_agree(table, oracle.values(), COLUMNS, java)

    # copy-on-write of every file removes the delete files that pointed at the rewritten files
    deletes_before = len(table.files().position_deletes)
    result = rowops.update(table, set={"n": "n + 100"}, where="true", strategy="copy-on-write")
    assert result.delete_files_removed == deletes_before > 0
    assert not table.files().position_deletes
    expected = [(*r[:-1], r[-1] + 100) for r in oracle.values()]
    assert_readers_agree(table, expected, COLUMNS, java)


def test_equality_deletes_dropped_once_they_apply_to_nothing(lake, java) -> None:  # type: ignore[no-untyped-def]
    layout = Layout("bucket", ("bucket(4, k)",), ("k",))
    rows = [make_row(k) for k in range(40)]
    table = lake.create_table(
        "db.t", frame(lake.spark, rows), partition_by=["bucket(4, k)"], identifier=["k"]
    )
    oracle = Oracle(layout, rows)
    changes = [make_row(k, 1) for k in range(0, 40, 3)]
    rowops.merge(frame(lake.spark, changes), table, on=["k"], strategy="equality-delete")
    oracle.upsert(changes)
    assert table.files().equality_deletes
    # rewriting every older data file leaves the equality deletes with nothing to apply to
    result = rowops.update(table, set={"n": "n + 1"}, where="true", strategy="copy-on-write")
    assert not table.files().equality_deletes
    assert result.delete_files_removed >= 4
    assert_readers_agree(table, [(*r[:-1], r[-1] + 1) for r in oracle.values()], COLUMNS, java)


def test_hybrid_folds_small_files_of_touched_partitions(lake, java) -> None:  # type: ignore[no-untyped-def]
    layout = Layout("identity", ("g",), ("g", "k"))
    rows = [make_row(k) for k in range(30)]
    table = lake.create_table("db.t", frame(lake.spark, rows), partition_by=["g"], identifier=["g", "k"])
    oracle = Oracle(layout, rows)
    for batch in range(3):  # three small appends: more small files in every partition
        more = [make_row(k) for k in range(100 + 10 * batch, 110 + 10 * batch)]
        table.append(frame(lake.spark, more))
        oracle.upsert(more)
    files_before = len(table.files().data)
    changes = [make_row(k, 1) for k in (0, 1, 2)]  # touches every partition g = 0, 1, 2
    result = rowops.merge(frame(lake.spark, changes), table, on=["g", "k"], strategy="hybrid")
    oracle.upsert(changes)
    assert result.files_rewritten > 3  # the touched files and the small ones beside them
    assert len(table.files().data) < files_before
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def _file_rows(path: str, columns: list[str]) -> list[tuple[object, ...]]:
    table = pq.read_table(path, columns=columns)
    return list(zip(*[table.column(c).to_pylist() for c in columns], strict=True))


def _sort_key(row: tuple[object, ...]) -> tuple[object, ...]:
    """``g ASC NULLS FIRST, s DESC NULLS LAST`` as a Python key (g is never NULL here)."""
    g, s = row
    return (g, s is None, tuple(-ord(c) for c in s) if s is not None else ())


@pytest.mark.parametrize("strategy", ["copy-on-write", "position-delete"])
def test_data_files_follow_the_table_sort_order(lake, java, strategy) -> None:  # type: ignore[no-untyped-def]
    layout = Layout("bucket", ("bucket(2, k)",), ("k",))
    rows = [make_row(k) for k in range(90)]
    table = lake.create_table(
        "db.t",
        frame(lake.spark, rows),
        partition_by=["bucket(2, k)"],
        identifier=["k"],
        sort_by=["g", "s DESC"],
    )
    order = StaticTable.from_metadata(table.metadata_location).sort_order()
    assert [(f.direction.name, f.null_order.name) for f in order.fields] == [
        ("ASC", "NULLS_FIRST"),
        ("DESC", "NULLS_LAST"),
    ]
    oracle = Oracle(layout, rows)
    changes = [make_row(k, 1) for k in range(0, 120, 4)]
    rowops.merge(frame(lake.spark, changes), table, on=["k"], strategy=strategy)
    oracle.upsert(changes)
    data = table.files().data
    assert all(f.data_file.sort_order_id == order.order_id for f in data)
    for f in data:
        got = _file_rows(f.path, ["g", "s"])
        assert got == sorted(got, key=_sort_key), f"{f.path} is not sorted by g, s DESC"
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_range_distribution_writes_disjoint_key_ranges(lake) -> None:  # type: ignore[no-untyped-def]
    # a Range keeps its size known to Spark (a DataFrame of Python rows does not): scrambled keys
    rows = lake.spark.range(2_000).selectExpr("(id * 7919) % 2000 AS k", "repeat('x', 40) AS s")
    table = lake.create_table(
        "db.t",
        rows,
        identifier=["k"],
        sort_by=["k"],
        properties={"write.distribution-mode": "range", "write.target-file-size-bytes": "20000"},
    )
    ranges = sorted((min(r[0] for r in _file_rows(f.path, ["k"])), max(r[0] for r in _file_rows(f.path, ["k"]))) for f in table.files().data)  # fmt: skip
    assert len(ranges) > 1
    assert all(upper < lower for (_, upper), (lower, _) in itertools.pairwise(ranges))
    assert table.to_df().count() == 2_000


@pytest.mark.parametrize(
    ("sort_by", "error"),
    [(["nope"], errors.NoSuchColumnError), (["bucket(4, k)"], errors.InvalidSortOrderError), (["k", "k DESC"], errors.InvalidSortOrderError)],
)  # fmt: skip
def test_bad_sort_order_is_rejected_and_creates_nothing(lake, sort_by, error) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error):
        lake.create_table("db.t", frame(lake.spark, [make_row(1)]), identifier=["k"], sort_by=sort_by)
    assert "db.t" not in lake.catalog.log.latest()
