"""TPC-DS store_sales generation and upsert batches, on a tiny (sf=0.01) dataset in local Spark."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import LongType as IcebergLong
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, LongType

from tpcds.batches import (
    KEY_COLUMNS,
    TICKET,
    batch_for_partitions,
    choose_buckets,
    iceberg_bucket,
    streaming_batch,
    upsert_batch,
)
from tpcds.datagen import SUCCESS_FILE, Manifest, generate_store_sales

SF = 0.01
SF_ROWS = 28_810  # store_sales rows at sf=0.01


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated sf=0.01 store_sales dataset."""
    return generate_store_sales(SF, tmp_path_factory.mktemp("tpcds") / "sf0.01", num_files=4)


@pytest.fixture(scope="module")
def store_sales(spark: SparkSession, data_dir: Path) -> DataFrame:
    """The generated store_sales, cached."""
    return spark.read.parquet(str(data_dir)).cache()


def _split(batch: DataFrame, store_sales: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(rows whose key exists in store_sales, rows whose key does not)."""
    keys = store_sales.select(*KEY_COLUMNS)
    return batch.join(keys, list(KEY_COLUMNS), "left_semi"), batch.join(keys, list(KEY_COLUMNS), "left_anti")


def _assert_unique_keys(batch: DataFrame) -> None:
    assert batch.select(*KEY_COLUMNS).distinct().count() == batch.count()


def _same_rows(left: DataFrame, right: DataFrame) -> bool:
    return left.exceptAll(right).isEmpty() and right.exceptAll(left).isEmpty()


def test_generation_writes_complete_dataset_and_reuses_it(data_dir: Path) -> None:
    manifest = Manifest.read(data_dir)
    assert manifest is not None
    assert manifest.rows == SF_ROWS
    assert sorted(p.name for p in data_dir.glob("part-*.parquet")) == sorted(manifest.files)
    assert len(manifest.files) == 4
    mtime = (data_dir / SUCCESS_FILE).stat().st_mtime_ns
    assert generate_store_sales(SF, data_dir, num_files=4) == data_dir
    assert (data_dir / SUCCESS_FILE).stat().st_mtime_ns == mtime


def test_generated_types_and_non_null_unique_keys(store_sales: DataFrame) -> None:
    types = {f.name: f.dataType for f in store_sales.schema.fields}
    assert types[TICKET] == LongType()
    assert types["ss_item_sk"] == LongType()
    assert types["ss_net_paid"] == DecimalType(7, 2)
    assert store_sales.count() == SF_ROWS
    assert store_sales.where(F.col(TICKET).isNull() | F.col("ss_item_sk").isNull()).isEmpty()
    _assert_unique_keys(store_sales)


def test_iceberg_bucket_matches_pyiceberg(spark: SparkSession) -> None:
    values = [0, 1, -1, 7, 240_000, 2**31, -(2**31) - 5, 2**62, -(2**63), 2**63 - 1, 123_456_789_012]
    frame = spark.createDataFrame([(v,) for v in values], "v long")
    got = [row.b for row in frame.select(iceberg_bucket("v", 256).alias("b")).collect()]
    expected = BucketTransform(256).transform(IcebergLong())
    assert got == [expected(v) for v in values]


def test_upsert_batch_updates_existing_and_inserts_new_keys(store_sales: DataFrame) -> None:
    batch = upsert_batch(store_sales, update_fraction=0.05, insert_fraction=0.03, seed=11).cache()
    assert batch.schema == store_sales.schema
    _assert_unique_keys(batch)
    updates, inserts = _split(batch, store_sales)
    n_updates, n_inserts = updates.count(), inserts.count()
    assert n_updates + n_inserts == batch.count()
    assert n_updates == pytest.approx(0.05 * SF_ROWS, rel=0.15)
    assert n_inserts == pytest.approx(0.03 * SF_ROWS, rel=0.15)
    max_ticket = store_sales.agg(F.max(TICKET)).collect()[0][0]
    assert inserts.where(F.col(TICKET) <= max_ticket).isEmpty()
    before = store_sales.select(
        *KEY_COLUMNS, F.col("ss_quantity").alias("q"), F.col("ss_net_paid").alias("p")
    )
    joined = updates.join(before, list(KEY_COLUMNS))
    assert joined.where(F.col("ss_quantity") != F.coalesce(F.col("q"), F.lit(0)) + 1).isEmpty()
    assert joined.where(F.col("ss_net_paid") != F.col("p") + F.lit(1)).isEmpty()


def test_upsert_batch_is_deterministic_and_seeded(store_sales: DataFrame) -> None:
    first = upsert_batch(store_sales, 0.01, 0.01, seed=3)
    assert _same_rows(first, upsert_batch(store_sales.repartition(3), 0.01, 0.01, seed=3))
    assert not _same_rows(first, upsert_batch(store_sales, 0.01, 0.01, seed=4))


def test_upsert_batch_spreads_over_all_buckets(store_sales: DataFrame) -> None:
    batch = upsert_batch(store_sales, update_fraction=0.02, insert_fraction=0.02)
    assert batch.select(iceberg_bucket(TICKET, 16)).distinct().count() == 16


def test_streaming_batch_has_fixed_rows_per_bucket(store_sales: DataFrame) -> None:
    batch = streaming_batch(store_sales, rows_per_bucket=5, num_buckets=8, seed=2).cache()
    assert batch.schema == store_sales.schema
    _assert_unique_keys(batch)
    updates, inserts = _split(batch, store_sales)
    for part in (updates, inserts):
        per_bucket = part.groupBy(iceberg_bucket(TICKET, 8).alias("b")).count().collect()
        assert sorted((row.b, row["count"]) for row in per_bucket) == [(b, 5) for b in range(8)]


def test_batch_for_partitions_stays_in_chosen_buckets(store_sales: DataFrame) -> None:
    chosen = choose_buckets(2, 8, seed=5)
    batch = batch_for_partitions(
        store_sales, chosen, num_buckets=8, update_fraction=0.5, insert_fraction=0.05
    )
    batch = batch.cache()
    assert batch.schema == store_sales.schema
    _assert_unique_keys(batch)
    assert batch.where(~iceberg_bucket(TICKET, 8).isin(chosen)).isEmpty()
    subset_rows = store_sales.where(iceberg_bucket(TICKET, 8).isin(chosen)).count()
    updates, inserts = _split(batch, store_sales)
    assert updates.count() == pytest.approx(0.5 * subset_rows, rel=0.05)
    assert inserts.count() == pytest.approx(0.05 * subset_rows, rel=0.3)


@pytest.mark.parametrize("fraction", [-0.1, 1.5])
def test_rejects_bad_fractions(store_sales: DataFrame, fraction: float) -> None:
    with pytest.raises(ValueError, match="fraction"):
        upsert_batch(store_sales, update_fraction=fraction)
