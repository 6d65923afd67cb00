"""Fixed per-operation costs of a tiny MERGE: its Spark jobs (pinned per strategy as upper bounds) and
the driver's footer reads of the files it writes.

Job counts are deterministic, unlike times: a change that adds a job to every operation shows here.
The shape is the benchmark's tiny-table point (``tools/profile_tiny.py``): a 10-row upsert (5 updates,
5 inserts) read from one Parquet file, into a table partitioned by a bucket of its key.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import rowops
from rowops import errors
from rowops.exec.reading.prescan import scan_source_keys
from rowops.exec.spark.stats import is_small, measured_bytes
from rowops.exec.writing import write
from rowops.meta import files as meta_files
from rowops.table import Table
from tests.spark.tables import fingerprint

# The jobs of one tiny MERGE after the fixed-cost cut (tpcds/results/HISTORY.md, "Fixed costs of one MERGE");
# before it (tools/profile_tiny.py on the benchmark's tiny table): auto 8, copy-on-write 16,
# position deletes 18, equality deletes 8.
MAX_JOBS = {"auto": 3, "copy-on-write": 10, "position-delete": 10, "equality-delete": 3}


def spark_jobs(spark: SparkSession) -> int:
    """Spark jobs started so far in this application (job ids are consecutive)."""
    ids = spark.sparkContext.statusTracker().getJobIdsForGroup(None)
    return max(ids) + 1 if ids else 0


@pytest.fixture
def tiny(lake, tmp_path) -> tuple[Table, DataFrame, int]:  # type: ignore[no-untyped-def]
    """A 400-row table in 4 buckets, its base snapshot, and a 10-row upsert batch (keys 395..404)."""
    spark = lake.spark
    rows = spark.range(400).select(
        F.col("id").alias("k"),
        (F.col("id") % 7).alias("g"),
        F.concat(F.lit("v"), F.col("id").cast("string")).alias("s"),
    )
    table = lake.create_table("db.tiny", rows, partition_by=["bucket(4, k)"], identifier=["k"])
    batch = spark.range(395, 405).select(
        F.col("id").alias("k"), F.lit(99).cast("long").alias("g"), F.lit("new").alias("s")
    )
    batch.coalesce(1).write.parquet(str(tmp_path / "batch"))
    base = table.current_snapshot_id
    assert base is not None
    return table, spark.read.parquet(str(tmp_path / "batch")), base


def _check(table: Table) -> None:
    got = {r["k"]: (r["g"], r["s"]) for r in table.to_df().collect()}
    assert len(got) == 405
    assert all(got[k] == (99, "new") for k in range(395, 405))
    assert got[394] == (394 % 7, "v394")


@pytest.mark.parametrize("strategy", list(MAX_JOBS))
def test_tiny_merge_runs_few_spark_jobs(tiny, strategy) -> None:  # type: ignore[no-untyped-def]
    table, batch, base = tiny
    spark = table.lake.spark
    rowops.merge(batch, table, on=["k"], strategy=strategy)  # warm-up: once-per-application jobs
    table.rollback_to(base)
    before = spark_jobs(spark)
    result = rowops.merge(batch, table, on=["k"], strategy=strategy)
    jobs = spark_jobs(spark) - before
    _check(table)
    if result.strategy != "equality-delete" and "rewritten by key" not in result.explain:
        assert (result.rows_updated, result.rows_inserted) == (5, 5)
    assert jobs <= MAX_JOBS[strategy], f"{strategy} ({result.strategy}) ran {jobs} Spark jobs"


@pytest.mark.parametrize("strategy", ["copy-on-write", "position-delete", "equality-delete"])
def test_new_files_footers_read_once(tiny, strategy, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The footer the write check reads builds the manifest entry too: one read per new file."""
    table, batch, _ = tiny
    reads: Counter[str] = Counter()
    original = write.read_footer

    def counting(io: Any, key: str) -> Any:
        reads[key] += 1
        return original(io, key)

    monkeypatch.setattr(write, "read_footer", counting)
    monkeypatch.setattr(meta_files, "read_footer", counting)
    rowops.merge(batch, table, on=["k"], strategy=strategy)
    _check(table)
    new = [k for k in reads if "/data/" in k]
    assert new, "the new files' footers were read"
    assert all(reads[k] == 1 for k in new), dict(reads)


def _parquet(spark: SparkSession, df: DataFrame, path: str) -> DataFrame:
    """``df`` written to and read back from Parquet: a source Spark estimates small (its file sizes)."""
    df.coalesce(1).write.parquet(path)
    return spark.read.parquet(path)


@pytest.mark.parametrize(
    ("strategy", "error"),
    [("equality-delete", errors.DuplicateKeyError), ("copy-on-write", errors.CardinalityViolationError)],
)
def test_small_source_keys_are_still_checked(tiny, tmp_path, strategy, error) -> None:  # type: ignore[no-untyped-def]
    """The one-task pre-scan of a small source counts distinct keys: repeated keys are still an error
    (named), and the lake is unchanged."""
    table, _, _ = tiny
    spark = table.lake.spark
    rows = spark.range(3).select(
        F.lit(5).cast("long").alias("k"), F.col("id").alias("g"), F.lit("dup").alias("s")
    )
    source = _parquet(spark, rows, str(tmp_path / "dups"))
    assert is_small(source)
    before = fingerprint(table.lake)
    with pytest.raises(error, match=r"\(5,\)"):
        rowops.merge(source, table, on=["k"], strategy=strategy)
    assert fingerprint(table.lake) == before


def test_small_source_is_measured_like_a_sample(tiny, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The pre-scan's Arrow bytes of a small source's rows agree with the sampled measurement."""
    table, _, _ = tiny
    spark = table.lake.spark
    wide = spark.range(200).select(F.col("id").alias("k"), F.repeat(F.lit("x"), 2000).alias("s"))
    source = _parquet(spark, wide, str(tmp_path / "wide"))
    assert is_small(source)  # on disk the repeated strings compress: Spark estimates a few KiB
    keys = scan_source_keys(source, ["k"], table.metadata, [], single_task=True, measure=True)
    assert keys.rows == 200 and keys.bytes is not None
    sampled = measured_bytes(source, 200)
    assert abs(keys.bytes / 200 - sampled.per_row) < 0.01 * sampled.per_row, (keys.bytes, sampled)
    assert measured_bytes(source, 200, measured=keys.bytes).per_row == keys.bytes / 200
