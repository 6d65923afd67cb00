"""The shapes of the cases benchmark's batches (``tpcds.cases``) on a tiny (sf=0.01) store_sales:
Case 1 touches every bucket with the same counts, Case 3 only its chosen buckets, Case 4 at most a
quarter of the table's data files (checked through a rowops copy-on-write MERGE's rewritten files)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import rowops
from tpcds.batches import KEY_COLUMNS, TICKET, iceberg_bucket
from tpcds.cases import (
    CASE3_UPDATE_FRACTION,
    CASE4_ROWS,
    NUM_BUCKETS,
    case3_buckets,
    case_batch,
    choose_file_buckets,
    streaming_rows_per_bucket,
    tiny_batch,
)
from tpcds.cases_rowops import files_per_bucket
from tpcds.datagen import generate_store_sales

SF_ROWS = 28_810  # store_sales rows at sf=0.01


@pytest.fixture(scope="module")
def store_sales(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> DataFrame:
    data = generate_store_sales(0.01, tmp_path_factory.mktemp("tpcds-cases") / "sf0.01", num_files=4)
    return spark.read.parquet(str(data)).cache()


def _per_bucket(rows: DataFrame) -> dict[int, int]:
    counts = rows.groupBy(iceberg_bucket(TICKET, NUM_BUCKETS).alias("b")).count().collect()
    return {int(r["b"]): int(r["count"]) for r in counts}


def _split(batch: DataFrame, store_sales: DataFrame) -> tuple[DataFrame, DataFrame]:
    keys = store_sales.select(*KEY_COLUMNS)
    return batch.join(keys, list(KEY_COLUMNS), "left_semi"), batch.join(keys, list(KEY_COLUMNS), "left_anti")


def test_case1_touches_every_bucket_with_the_same_counts(store_sales: DataFrame) -> None:
    batch = case_batch(1, store_sales, seed=1, table_rows=SF_ROWS).cache()
    updates, inserts = _split(batch, store_sales)
    per_bucket = streaming_rows_per_bucket(SF_ROWS)
    assert _per_bucket(updates) == dict.fromkeys(range(NUM_BUCKETS), per_bucket)
    assert _per_bucket(inserts) == dict.fromkeys(range(NUM_BUCKETS), per_bucket)
    assert batch.select(*KEY_COLUMNS).distinct().count() == batch.count()


def test_case3_touches_only_its_chosen_buckets(store_sales: DataFrame) -> None:
    for seed in (1, 2):
        chosen = case3_buckets(seed)
        batch = case_batch(3, store_sales, seed=seed, table_rows=SF_ROWS).cache()
        updates, inserts = _split(batch, store_sales)
        assert set(_per_bucket(batch)) <= set(chosen)
        in_chosen = store_sales.where(iceberg_bucket(TICKET, NUM_BUCKETS).isin(chosen)).count()
        assert abs(updates.count() / in_chosen - CASE3_UPDATE_FRACTION) < 0.05
        assert 0 < inserts.count() < updates.count() / 10


def test_case4_touches_at_most_a_quarter_of_the_files(
    spark: SparkSession, store_sales: DataFrame, tmp_path: Path
) -> None:
    lake = rowops.Lakehouse(tmp_path / "lake", spark=spark)
    thirds = [store_sales.where(F.col(TICKET) % 3 == i) for i in range(3)]
    table = lake.create_table(
        "db.t", thirds[0], partition_by=[f"bucket({NUM_BUCKETS}, {TICKET})"], identifier=list(KEY_COLUMNS)
    )
    for rows in thirds[1:]:  # three files per bucket
        table.append(rows)
    layout = files_per_bucket(table)
    total = sum(layout.values())
    assert total > NUM_BUCKETS
    buckets = choose_file_buckets(layout)
    batch = case_batch(4, store_sales, seed=1, table_rows=SF_ROWS, case4_buckets=buckets).cache()
    updates, inserts = _split(batch, store_sales)
    assert updates.count() == CASE4_ROWS and inserts.count() == 0
    result = rowops.merge(batch, table, on=list(KEY_COLUMNS), strategy="copy-on-write")
    assert result.rows_updated == CASE4_ROWS
    assert 0 < result.data_files_removed <= total // 4


def test_tiny_batch_is_five_updates_and_five_inserts(store_sales: DataFrame) -> None:
    tiny = store_sales.orderBy(*KEY_COLUMNS).limit(1000).cache()
    batch = tiny_batch(tiny, seed=7)
    updates, inserts = _split(batch, tiny)
    assert (updates.count(), inserts.count()) == (5, 5)
    assert inserts.where(F.col(TICKET) <= tiny.agg(F.max(TICKET)).first()[0]).count() == 0  # type: ignore[index]
