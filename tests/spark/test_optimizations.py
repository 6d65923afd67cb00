"""Planner and execution optimizations: co-located join, runtime pruning, hybrid and auto choice."""

from __future__ import annotations

import re

import pytest
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import LongType
from pyspark.sql import functions as F

import rowops
from rowops.errors import CardinalityViolationError
from rowops.exec.changes.rows import matched_rows, merge_changes
from rowops.exec.changes.summary import summarize
from rowops.exec.checks.cardinality import repeated_matches_bitmap, repeated_matches_groupby
from rowops.exec.reading import key_codes
from rowops.exec.reading.scan import scan
from rowops.exec.spark.compat import explain_text
from rowops.meta.delete_index import delete_index
from rowops.request.operations import simple_merge_spec
from rowops.run import row_level as operations
from tests.conftest import make_lake
from tests.readers import assert_readers_agree
from tests.spark.spark_metrics import exchanges_above_scans_of, scans_of, shuffle_bytes_written
from tests.spark.tables import BIG_ROWS as ROWS
from tests.spark.tables import COLUMNS, frame, make_row, wide_source
from tests.spark.test_errors import assert_unchanged


@pytest.mark.parametrize("strategy", ["position-delete", "copy-on-write"])
def test_colocated_merge_never_shuffles_the_target(lake, big, strategy) -> None:  # type: ignore[no-untyped-def]
    spark = lake.spark
    source = wide_source(spark, 97).cache()
    source_rows = source.count()
    target_bytes = sum(f.size for f in big.files().data)
    before = shuffle_bytes_written(spark)
    result = rowops.merge(source, big, on=["k"], strategy=strategy)
    shuffled = shuffle_bytes_written(spark) - before
    # Parquet-compressed target vs. the rows of the source: the shuffle stays source-sized.
    source_bytes = source_rows * (8 + 8 + 2 + 2 + 8)
    assert "co-located join: yes" in result.explain
    assert shuffled <= 2 * source_bytes * 8, (shuffled, source_bytes)
    assert shuffled < target_bytes / 4, (shuffled, target_bytes)
    assert big.to_df().count() == ROWS + 2  # 2 new keys above ROWS


def test_shuffled_join_when_colocation_disabled(lake, big) -> None:  # type: ignore[no-untyped-def]
    # the join's plan: a blind upsert's position deletes are otherwise found by key (no join)
    big.set_properties(**{"rowops.colocated-join.enabled": "false", "rowops.rewrite.by-key.enabled": "false"})
    source = wide_source(lake.spark, 97)
    text = rowops.explain(source, big, on=["k"], strategy="position-delete")
    assert "co-located join: no (disabled by table property" in text
    assert "== Spark physical plan ==" in text and "ShuffledHashJoin" in text
    target = scan(lake.spark, big.schema, big.files(), row_ids=True)
    changes = merge_changes(
        target, source, simple_merge_spec(["k"]), big.schema.column_names, colocated=False
    )
    try:
        assert scans_of(changes.joined, big.metadata.location) >= 1
        assert exchanges_above_scans_of(changes.joined, big.metadata.location)
    finally:
        changes.release()


def test_colocated_plan_has_no_exchange_on_target(lake, big) -> None:  # type: ignore[no-untyped-def]
    big.set_properties(**{"rowops.rewrite.by-key.enabled": "false"})  # the join's plan, not the run by key
    source = wide_source(lake.spark, 97)
    target = scan(lake.spark, big.schema, big.files(), row_ids=True)
    changes = merge_changes(target, source, simple_merge_spec(["k"]), big.schema.column_names, colocated=True)
    try:
        assert scans_of(changes.joined, big.metadata.location) >= 1
        assert exchanges_above_scans_of(changes.joined, big.metadata.location) == []
        plan = changes.joined._jdf.queryExecution().executedPlan().toString()
        assert "BroadcastHashJoin" in plan
        assert "BroadcastHashJoin" in rowops.explain(source, big, on=["k"], strategy="position-delete")
    finally:
        changes.release()


def test_colocated_merge_finds_unmatched_source_rows_without_a_shuffle(lake, big) -> None:  # type: ignore[no-untyped-def]
    """The source rows to insert come from an anti-join with the broadcast matched keys: no source row
    is shuffled or sorted (Spark cannot size the matched keys before they are cached)."""
    source = wide_source(lake.spark, 97)
    target = scan(lake.spark, big.schema, big.files(), row_ids=True)
    changes = merge_changes(target, source, simple_merge_spec(["k"]), big.schema.column_names, colocated=True)
    try:
        plan = explain_text(changes.joined, "formatted")
        assert "SortMergeJoin" not in plan
        assert re.search(r"(?<!Broadcast)Exchange", plan) is None  # no shuffle
        assert re.search(r"BroadcastHashJoin.*LeftAnti", plan)
        inserted = changes.joined.filter(~F.col("_t_present").eqNullSafe(True)).select("k")
        assert sorted(r.k for r in inserted.collect()) == sorted(
            r.k for r in source.join(big.to_df(), "k", "left_anti").select("k").collect()
        )
    finally:
        changes.release()


def test_runtime_pruning_skips_untouched_buckets(lake, big) -> None:  # type: ignore[no-untyped-def]
    rows = [(k, 7, "x", "y") for k in (3, 5)]
    source = lake.spark.createDataFrame(rows, big.to_df().schema)
    result = rowops.merge(source, big, on=["k"], strategy="position-delete")
    assert result.files_pruned > 0 and result.files_scanned + result.files_pruned == 8
    assert result.rows_updated == 2
    got = {r["k"]: r["g"] for r in big.to_df().filter("k in (3, 5, 6)").collect()}
    assert got == {3: 7, 5: 7, 6: 6}


def test_runtime_pruning_off_by_table_property(lake, big) -> None:  # type: ignore[no-untyped-def]
    big.set_properties(**{"rowops.runtime-filter.enabled": "false"})
    source = lake.spark.createDataFrame([(k, 7, "x", "y") for k in (3, 5)], big.to_df().schema)
    result = rowops.merge(source, big, on=["k"], strategy="position-delete")
    assert (result.files_pruned, result.files_scanned, result.rows_updated) == (0, 8, 2)
    assert {r["k"]: r["g"] for r in big.to_df().filter("k in (3, 5, 6)").collect()} == {3: 7, 5: 7, 6: 6}


def test_hybrid_rewrites_dense_files_and_deletes_in_sparse(lake) -> None:  # type: ignore[no-untyped-def]
    df = lake.spark.range(30_000).select(
        F.col("id").alias("k"),
        (F.col("id") % 3).alias("g"),
        F.sha2(F.col("id").cast("string"), 512).alias("p"),
    )
    table = lake.create_table("db.t", df.coalesce(1), partition_by=["g"], identifier=["g", "k"])
    dense = df.filter("g = 0").withColumn("p", F.lit("dense"))  # every row of partition g=0
    sparse = df.filter("k in (1, 2)").withColumn("p", F.lit("sparse"))  # one row each in g=1 and g=2
    result = rowops.merge(dense.unionByName(sparse), table, on=["g", "k"], strategy="hybrid")
    assert result.strategy == "hybrid"
    assert result.files_rewritten == 1 and result.delete_files_added == 2
    assert "copy-on-write    1 files, 10,000 of 10,000 rows changed" in result.explain
    assert "position-delete  2 files, 2 of 20,000 rows changed" in result.explain
    counts = {
        r["p"]: r["count"]
        for r in table.to_df().groupBy("p").count().collect()
        if r["p"] in ("dense", "sparse")
    }
    assert counts == {"dense": 10_000, "sparse": 2} and table.to_df().count() == 30_000


def test_hybrid_merges_small_rewritten_files_with_the_new_rows(lake) -> None:  # type: ignore[no-untyped-def]
    """A small, densely changed file is not rewritten one to one: its survivors join the new rows."""
    df = lake.spark.range(60).select(
        F.col("id").alias("k"), (F.col("id") % 3).alias("g"), F.lit("a").alias("p")
    )
    table = lake.create_table("db.t", df.coalesce(1), partition_by=["g"], identifier=["g", "k"])
    changed = df.filter("g = 0 and k < 45").withColumn("p", F.lit("b"))  # 15 of g=0's 20 rows
    inserted = lake.spark.createDataFrame([(300, 0, "c")], df.schema)
    result = rowops.merge(changed.unionByName(inserted), table, on=["g", "k"], strategy="hybrid")
    assert (result.files_rewritten, result.delete_files_added, result.data_files_added) == (1, 0, 1)
    g0 = [f for f in table.files().data if f.partition == (0,)]
    assert len(g0) == 1 and g0[0].record_count == 21
    got = {(r["k"], r["p"]) for r in table.to_df().filter("g = 0").collect()}
    assert got == {(k, "b" if k < 45 else "a") for k in range(0, 60, 3)} | {(300, "c")}


def test_auto_follows_the_read_weight_and_pins(lake) -> None:  # type: ignore[no-untyped-def]
    rows = [make_row(k) for k in range(200)]
    table = lake.create_table(
        "db.t", frame(lake.spark, rows), partition_by=["bucket(4, k)"], identifier=["k"]
    )
    source = frame(lake.spark, [make_row(k, 1) for k in range(0, 200, 50)])
    table.set_properties(**{"rowops.read-weight": "0"})  # nobody reads: never scan the target
    assert "strategy: equality-delete (requested auto: cheapest" in rowops.explain(source, table, on=["k"])
    table.set_properties(**{"rowops.read-weight": "1000"})  # read-heavy: keep reads free of deletes
    assert "strategy: copy-on-write (requested auto: cheapest" in rowops.explain(source, table, on=["k"])
    table.set_properties(**{"rowops.strategy": "copy-on-write"})
    assert rowops.merge(source, table, on=["k"]).strategy == "copy-on-write"


def test_bitmap_and_groupby_cardinality_checks_agree(lake, big) -> None:  # type: ignore[no-untyped-def]
    spark = lake.spark
    source = wide_source(spark, 1000).union(wide_source(spark, 3000))  # keys 0, 3000, ... appear twice
    target = scan(spark, big.schema, big.files(), row_ids=True)
    changes = merge_changes(target, source, simple_merge_spec(["k"]), big.schema.column_names, colocated=True)
    try:
        matched = matched_rows(changes)
        bitmap = set(repeated_matches_bitmap(matched, limit=1000))
        grouped = set(repeated_matches_groupby(matched, limit=1000))
        assert bitmap == grouped and len(bitmap) == len(range(0, ROWS, 3000))
    finally:
        changes.release()


def _indebted(lake):  # type: ignore[no-untyped-def]
    """A table whose original files and first upsert's files two equality-delete upserts left deletes
    on, with a read weight that makes ``auto`` pay the debt down; and its expected rows."""
    expected = {k: make_row(k) for k in range(200)}
    table = lake.create_table(
        "db.t", frame(lake.spark, list(expected.values())), partition_by=["bucket(4, k)"], identifier=["k"]
    )
    for version, start in ((1, 1), (2, 3)):
        rows = [make_row(k, version) for k in range(start, 200, 20)]
        rowops.merge(frame(lake.spark, rows), table, on=["k"], strategy="equality-delete")
        expected.update({r[0]: r for r in rows})
    assert table.files().equality_deletes
    table.set_properties(**{"rowops.read-weight": "1000"})
    return table, expected


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def any_lake(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """A local lake, and a lake on the S3 server (``make test-s3``): the Arrow rewrite tasks read and
    write through the lake's FileIO."""
    return make_lake(request.param, request)


@pytest.mark.parametrize("blind", [True, False], ids=["upsert-by-key", "conditional"])
def test_auto_paydown_clears_the_read_debt_of_every_candidate(any_lake, java, monkeypatch, blind) -> None:  # type: ignore[no-untyped-def]
    """A read-heavy ``auto`` MERGE that touches only original files rewrites the first upsert's files
    too (and folds the small ones into its new files): afterwards no delete applies to any data file,
    the dangling equality deletes are gone, and the rows are the upserted ones.

    A blind upsert on unique integer keys is rewritten by key (``exec/rewriting/keyed_rewrite.py``): no MERGE
    join, so no summary pass (its tasks count the live rows they replace); a conditional MERGE joins."""
    table, expected = _indebted(any_lake)
    joined = []
    monkeypatch.setattr(operations, "summarize", lambda *a, **k: joined.append(1) or summarize(*a, **k))
    rows = [make_row(k, 3) for k in (*range(0, 200, 10), 500, 501)]  # matches original files only
    condition = None if blind else "s.g >= 0"
    merge = table.merge(frame(any_lake.spark, rows), on=["k"]).when_matched(condition).update_all()
    result = merge.when_not_matched().insert_all().execute()
    expected.update({r[0]: r for r in rows})
    assert result.strategy == "copy-on-write"
    assert bool(joined) != blind
    assert (result.rows_updated, result.rows_inserted) == (20, 2)
    files = table.files()
    index = delete_index(files)
    assert not files.deletes and not any(index.deletes_on(f) for f in files.data)
    assert_readers_agree(table, expected.values(), COLUMNS, java)


@pytest.mark.parametrize("blind", [True, False], ids=["upsert-by-key", "conditional"])
def test_auto_copy_on_write_clears_paid_off_debt_of_partitions_it_does_not_touch(lake, java, blind) -> None:  # type: ignore[no-untyped-def]
    """The paper's Case 3 pattern: a batch left equality deletes on one bucket, the next batch
    touches another. On a read-heavy table ``auto``'s copy-on-write of the second batch also
    rewrites the first bucket's file those deletes apply to (reads have paid for that debt more
    than its rewrite costs): no delete is left, the untouched buckets' files are kept, and the rows
    are the upserted ones."""
    expected = {k: make_row(k) for k in range(200)}
    table = lake.create_table(
        "db.t", frame(lake.spark, list(expected.values())), partition_by=["bucket(4, k)"], identifier=["k"]
    )
    bucket = BucketTransform(4).transform(LongType())
    first = [make_row(k, 1) for k in range(200) if bucket(k) == 0][:10]
    rowops.merge(frame(lake.spark, first), table, on=["k"], strategy="equality-delete")
    expected.update({r[0]: r for r in first})
    before = table.files()
    indebted = {f.path for f in before.data if delete_index(before).deletes_on(f)}
    table.set_properties(**{"rowops.read-weight": "1000"})
    untouched = {f.path for f in table.files().data if f.partition[0] in (2, 3)}
    rows = [make_row(k, 2) for k in range(400) if bucket(k) == 1]  # 0..199 updated, 200..399 new
    merge = table.merge(frame(lake.spark, rows), on=["k"]).when_matched(None if blind else "s.g >= 0")
    result = merge.update_all().when_not_matched().insert_all().execute()
    expected.update({r[0]: r for r in rows})
    assert result.strategy == "copy-on-write"
    assert "also clears the read debt of 1 files in 1 partitions it does not touch" in result.explain
    files = table.files()
    assert len(indebted) == 1 and not indebted & {f.path for f in files.data}
    assert not files.deletes and untouched <= {f.path for f in files.data}
    assert_readers_agree(table, expected.values(), COLUMNS, java)


def test_dense_upsert_in_one_partition_is_rewritten_by_key(lake, java, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The paper's Case 3 in small: every row of one bucket upserted, with inserts, on a table read
    more often than written. Rewriting that bucket's file by key costs less than the equality deletes'
    anti-join on the hundred reads to come, and needs no join: ``auto`` rewrites it by key (no summary pass,
    no delete file, the other buckets' files kept), and the rows are the upserted ones."""
    expected = {k: make_row(k) for k in range(200)}
    table = lake.create_table(
        "db.t", frame(lake.spark, list(expected.values())), partition_by=["bucket(4, k)"], identifier=["k"]
    )
    table.set_properties(**{"rowops.read-weight": "100"})
    bucket = BucketTransform(4).transform(LongType())
    before = {f.path for f in table.files().data}
    joined = []
    monkeypatch.setattr(operations, "summarize", lambda *a, **k: joined.append(1) or summarize(*a, **k))
    rows = [make_row(k, 1) for k in range(400) if bucket(k) == 0]  # 0..199 updated, 200..399 new
    result = rowops.merge(frame(lake.spark, rows), table, on=["k"])
    expected.update({r[0]: r for r in rows})
    assert result.strategy == "copy-on-write" and "rewritten by key" in result.explain
    updated = sum(1 for r in rows if r[0] < 200)
    assert not joined and (result.rows_updated, result.rows_inserted) == (updated, len(rows) - updated)
    files = table.files()
    assert not files.deletes and len(before - {f.path for f in files.data}) == 1
    assert_readers_agree(table, expected.values(), COLUMNS, java)


@pytest.mark.parametrize("how", ["by-key", "by-key-from-files", "property-off", "no-identifier"])
def test_requested_copy_on_write_of_an_upsert_is_rewritten_by_key(lake, java, monkeypatch, how) -> None:  # type: ignore[no-untyped-def]
    """A requested copy-on-write of a blind upsert on the table's identifier skips the MERGE join
    where rewriting the candidate files by key is cheaper (a small table: always): no summary pass,
    row counts from the rewrite tasks, no delete file, the rows read back through every reader. The
    source's keys go to the rewrite collected (a small source: the writes run together) or, past
    ``MAX_COLLECTED_KEYS``, read from the new files. The table property
    ``rowops.rewrite.by-key.enabled=false`` keeps the join, and so does a table whose ``on`` columns
    are not its identifier (its keys could repeat in the target)."""
    if how == "by-key-from-files":
        monkeypatch.setattr(key_codes, "MAX_COLLECTED_KEYS", 1)
    collected = []
    collect = key_codes.collect_codes
    monkeypatch.setattr(key_codes, "collect_codes", lambda *a: collected.append(1) or collect(*a))
    expected = {k: make_row(k) for k in range(200)}
    identifier = [] if how == "no-identifier" else ["k"]
    table = lake.create_table(
        "db.t",
        frame(lake.spark, list(expected.values())),
        partition_by=["bucket(4, k)"],
        identifier=identifier,
    )
    if how == "property-off":
        table.set_properties(**{"rowops.rewrite.by-key.enabled": "false"})
    joined = []
    monkeypatch.setattr(operations, "summarize", lambda *a, **k: joined.append(1) or summarize(*a, **k))
    rows = [make_row(k, 1) for k in (*range(0, 200, 7), 300, 301)]
    result = rowops.merge(frame(lake.spark, rows), table, on=["k"], strategy="copy-on-write")
    expected.update({r[0]: r for r in rows})
    by_key = how.startswith("by-key")
    assert result.strategy == "copy-on-write" and bool(joined) != by_key
    assert ("rewritten by key" in result.explain) == by_key
    if by_key:  # collected by the pre-scan's uniqueness check or for the rewrite, below the cap only
        assert bool(collected) == (how == "by-key")
    assert (result.rows_updated, result.rows_inserted, result.rows_deleted) == (len(rows) - 2, 2, 0)
    assert not table.files().deletes
    assert_readers_agree(table, expected.values(), COLUMNS, java)


def test_requested_copy_on_write_with_repeated_source_keys_joins_and_fails(lake) -> None:  # type: ignore[no-untyped-def]
    """Source keys that repeat are not rewritten by key: the MERGE joins, and a target row matched
    twice is the cardinality violation it always was; nothing is written."""
    table = lake.create_table(
        "db.t",
        frame(lake.spark, [make_row(k) for k in range(50)]),
        partition_by=["bucket(4, k)"],
        identifier=["k"],
    )
    rows = [make_row(3, 1), make_row(3, 2), make_row(60, 1)]
    assert_unchanged(
        lake,
        lambda: rowops.merge(frame(lake.spark, rows), table, on=["k"], strategy="copy-on-write"),
        CardinalityViolationError,
        "[(3,)]",
    )
