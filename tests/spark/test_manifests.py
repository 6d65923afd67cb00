"""Manifests: merged on commit (Iceberg's ``commit.manifest*`` properties), cached, filtered by partition.

Most commits here are small appends committed without Spark (``tools/direct_appends.py``: one
pyarrow file per commit through the same ``RowDelta`` path), so that hundreds of commits stay cheap;
row-level operations run through Spark for every strategy. Results are read back through every
independent reader (rowops, DuckDB, PyIceberg, Iceberg Java).
"""

from __future__ import annotations

from typing import Any

import pytest
from pyiceberg.expressions import EqualTo, In
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import LongType
from pyspark.sql import types as T

from rowops.faults import InjectedFault
from rowops.meta.files import LiveFile, live_files
from rowops.meta.manifests import CACHE, PartitionFilter
from tests.readers import assert_readers_agree
from tests.spark.tables import fingerprint
from tools.direct_appends import append_rows

SCHEMA = T.StructType(
    [
        T.StructField("k", T.LongType()),
        T.StructField("g", T.IntegerType()),
        T.StructField("v", T.StringType()),
    ]
)
COLUMNS = ["k", "g", "v"]
MIN_COUNT = "commit.manifest.min-count-to-merge"


def _row(k: int, v: str = "a") -> dict[str, object]:
    return {"k": k, "g": k % 3, "v": v}


def _tuples(rows: dict[int, str]) -> list[tuple[object, ...]]:
    return [(k, k % 3, v) for k, v in rows.items()]


def _entries_by_path(table: Any) -> dict[str, Any]:
    """Every live entry of the current snapshot read from disk by pyiceberg (no rowops cache)."""
    io = table.lake.catalog.io
    snapshot = table.metadata.current_snapshot()
    return {
        e.data_file.file_path: e
        for m in snapshot.manifests(io)
        for e in m.fetch_manifest_entry(io, discard_deleted=True)
    }


def test_manifest_count_stays_bounded_over_150_commits(lake, java) -> None:  # type: ignore[no-untyped-def]
    """Iceberg's defaults (merge enabled, 100 manifests minimum, 8 MB target): the 100th commit merges
    every manifest into one; each file keeps the data and file sequence numbers of its commit."""
    table = lake.create_table("db.t", SCHEMA, partition_by=["g"])
    counts, added_at = [], {}
    for k in range(150):
        append_rows(table, [_row(k)], (k % 3,))
        snapshot = table.metadata.current_snapshot()
        counts.append(len(snapshot.manifests(table.lake.catalog.io)))
        added_at[k] = int(snapshot.sequence_number)
    assert max(counts) <= 100
    assert counts[98] == 99 and counts[99] == 1 and counts[-1] == 51
    entries = _entries_by_path(table)
    assert len(entries) == 150
    seqs = sorted((int(e.sequence_number), int(e.file_sequence_number)) for e in entries.values())
    assert seqs == [(added_at[k], added_at[k]) for k in range(150)]
    assert_readers_agree(table, _tuples(dict.fromkeys(range(150), "a")), COLUMNS, java)


def test_merge_can_be_disabled(lake) -> None:  # type: ignore[no-untyped-def]
    props = {"commit.manifest-merge.enabled": "false", MIN_COUNT: "2"}
    table = lake.create_table("db.t", SCHEMA, properties=props)
    for k in range(5):
        append_rows(table, [_row(k)])
    assert len(table.files().manifests) == 5


def test_merged_manifests_keep_sequence_numbers_of_deletes(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    """Deletes apply by sequence number: a merge that re-stamped old entries with the new manifest's
    sequence number would make old rows newer than the deletes (resurrected) or hide re-inserted keys.
    Merging every 3 manifests, updates and deletes of each strategy, then re-inserts of deleted keys."""
    table = lake.create_table("db.t", SCHEMA, identifier=["k"], properties={MIN_COUNT: "3"})
    expected = {}
    for k in range(8):
        append_rows(table, [_row(k)])
        expected[k] = "a"
    spark = lake.spark
    source = spark.createDataFrame([(1, 1, "b"), (2, 2, "b"), (20, 2, "b")], SCHEMA)
    table.merge(source, on=["k"]).when_matched().update_all().when_not_matched().insert_all().execute(
        strategy
    )
    expected.update({1: "b", 2: "b", 20: "b"})
    gone = spark.createDataFrame([(3, 0, "x"), (4, 1, "x")], SCHEMA)
    table.merge(gone, on=["k"]).when_matched().delete().execute(strategy)
    del expected[3], expected[4]
    for k in (3, 30, 31):  # key 3 comes back, newer than its delete
        append_rows(table, [_row(k, "c")])
        expected[k] = "c"
    manifests = table.files().manifests
    for content in {m.content for m in manifests}:  # data and delete manifests merge separately
        assert len([m for m in manifests if m.content == content]) < 3, "no merge happened"
    assert any(m.existing_files_count for m in manifests), "no merged manifest"
    assert_readers_agree(table, _tuples(expected), COLUMNS, java)


@pytest.mark.parametrize("point", ["manifests-merged", "before-commit"])
def test_crash_after_merging_leaves_lake_unchanged(lake, monkeypatch, point) -> None:  # type: ignore[no-untyped-def]
    """Merged manifests written for a commit that never lands are removed; the manifests they merged
    (referenced by the current snapshot) are never touched."""
    table = lake.create_table("db.t", SCHEMA, properties={MIN_COUNT: "3"})
    append_rows(table, [_row(1)])
    append_rows(table, [_row(2)])
    before = fingerprint(lake)
    monkeypatch.setenv("ROWOPS_FAULT", point)
    with pytest.raises(InjectedFault):
        table.append(lake.spark.createDataFrame([(3, 0, "a")], SCHEMA))
    assert fingerprint(lake) == before
    monkeypatch.delenv("ROWOPS_FAULT")
    table.append(lake.spark.createDataFrame([(3, 0, "a")], SCHEMA))
    assert len(table.files().manifests) == 1
    assert sorted(r[0] for r in table.to_df().collect()) == [1, 2, 3]


def _partitioned_with_deletes(lake: Any, strategy: str) -> Any:
    """Identity-partitioned by g, one manifest per partition and commit, deletes in two partitions."""
    table = lake.create_table(
        "db.t", SCHEMA, partition_by=["g"], identifier=["g", "k"], properties={MIN_COUNT: "1000"}
    )
    for k in range(12):
        append_rows(table, [_row(k), _row(k + 99)], (k % 3,))  # two rows: a delete keeps the file
    source = lake.spark.createDataFrame([(1, 1, "b"), (2, 2, "b")], SCHEMA)
    table.merge(source, on=["g", "k"]).when_matched().update_all().when_not_matched().insert_all().execute(
        strategy
    )
    return table


def _paths(files: tuple[LiveFile, ...]) -> set[str]:
    return {f.path for f in files}


def test_partition_filter_lists_touched_partitions_and_their_deletes(lake, strategy) -> None:  # type: ignore[no-untyped-def]
    table = _partitioned_with_deletes(lake, strategy)
    metadata, io = table.metadata, table.lake.catalog.io
    full = live_files(metadata, io)
    assert full.deletes or strategy == "copy-on-write"
    CACHE.clear()
    only = live_files(metadata, io, partition_filter=EqualTo("g", 1))
    opened = CACHE.misses
    assert _paths(only.data) == {f.path for f in full.data if f.partition == (1,)}
    assert _paths(only.deletes) == {f.path for f in full.deletes if f.partition == (1,)}
    assert only.manifests == full.manifests  # every manifest is still known (commits rewrite from them)
    # manifests of other partitions were never opened (their summaries exclude g = 1)
    summaries_match = [m for m in full.manifests if PartitionFilter(metadata, EqualTo("g", 1)).manifest(m)]
    assert opened == len(summaries_match) < len(full.manifests)
    two = live_files(metadata, io, partition_filter=In("g", [0, 2]))
    assert _paths(two.data) == {f.path for f in full.data if f.partition != (1,)}
    assert _paths(two.deletes) == {f.path for f in full.deletes if f.partition != (1,)}


def test_partition_filter_keeps_global_equality_deletes(lake) -> None:  # type: ignore[no-untyped-def]
    """An unpartitioned spec projects any filter to true: its equality deletes apply everywhere."""
    table = lake.create_table("db.t", SCHEMA, identifier=["k"])
    for k in range(4):
        append_rows(table, [_row(k)])
    gone = lake.spark.createDataFrame([(1, 1, "x")], SCHEMA)
    table.merge(gone, on=["k"]).when_matched().delete().execute("equality-delete")
    full = live_files(table.metadata, table.lake.catalog.io)
    only = live_files(table.metadata, table.lake.catalog.io, partition_filter=EqualTo("k", 2))
    assert len(full.equality_deletes) == 1
    assert only.equality_deletes == full.equality_deletes and only.data == full.data


def test_partition_filter_on_bucket_is_inclusive(lake) -> None:  # type: ignore[no-untyped-def]
    """A filter on a column is projected onto its bucket transform: only the key's bucket is listed."""
    rows = [(k, k % 3, "a") for k in range(40)]
    table = lake.create_table("db.t", lake.spark.createDataFrame(rows, SCHEMA), partition_by=["bucket(4, k)"])
    full = live_files(table.metadata, table.lake.catalog.io)
    only = live_files(table.metadata, table.lake.catalog.io, partition_filter=EqualTo("k", 7))
    bucket = BucketTransform(4).transform(LongType())(7)
    assert {f.partition for f in full.data} == {(b,) for b in range(4)}
    assert _paths(only.data) == {f.path for f in full.data if f.partition == (bucket,)}


def test_manifest_reads_are_cached(lake) -> None:  # type: ignore[no-untyped-def]
    """A manifest is parsed once per process: later listings and the commit's rewrite read none."""
    table = lake.create_table("db.t", SCHEMA, properties={MIN_COUNT: "1000"})
    for k in range(5):
        append_rows(table, [_row(k)])
    CACHE.clear()
    live_files(table.metadata, table.lake.catalog.io)
    assert CACHE.misses == 5
    live_files(table.metadata, table.lake.catalog.io)
    append_rows(table, [_row(9)])  # lists and commits on top of the 5 cached manifests
    assert CACHE.misses == 5 and CACHE.hits >= 15


def test_rewrite_manifests_merges_every_small_manifest(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    """Maintenance: with merging off on commit, 13 commits leave 8 or more manifests; ``rewrite_manifests``
    merges them into one per content (rows, sequence numbers and deletes unchanged), then has nothing
    left to do."""
    # a copy-on-write rewritten by key would fold the ten small files into one: keep the join's rewrite
    props = {"commit.manifest-merge.enabled": "false", "rowops.rewrite.by-key.enabled": "false"}
    table = lake.create_table("db.t", SCHEMA, identifier=["k"], properties=props)
    expected = {}
    for k in range(10):
        append_rows(table, [_row(k)])
        expected[k] = "a"
    spark = lake.spark
    source = spark.createDataFrame([(1, 1, "b"), (2, 2, "b")], SCHEMA)
    table.merge(source, on=["k"]).when_matched().update_all().when_not_matched().insert_all().execute(
        strategy
    )
    table.merge(spark.createDataFrame([(3, 0, "x")], SCHEMA), on=["k"]).when_matched().delete().execute(
        strategy
    )
    expected.update({1: "b", 2: "b"})
    del expected[3]
    append_rows(table, [_row(3, "c")])  # newer than its delete: must stay visible after the rewrite
    expected[3] = "c"
    before_entries = {
        p: (int(e.sequence_number), int(e.file_sequence_number)) for p, e in _entries_by_path(table).items()
    }
    before = table.files().manifests
    assert len(before) >= 8
    result = table.rewrite_manifests()
    after = table.files().manifests
    assert result.snapshot_id == table.current_snapshot_id
    assert result.files_read == len(before) and result.files_written == len(after)
    assert len(after) == len({m.content for m in before})  # one data (+ one delete) manifest
    assert table.metadata.current_snapshot().summary.operation.value == "replace"
    entries = {
        p: (int(e.sequence_number), int(e.file_sequence_number)) for p, e in _entries_by_path(table).items()
    }
    assert entries == before_entries
    assert_readers_agree(table, _tuples(expected), COLUMNS, java)
    again = table.rewrite_manifests()
    assert again.snapshot_id is None and table.files().manifests == after
