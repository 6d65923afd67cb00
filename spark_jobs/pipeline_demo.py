"""``make pipeline-demo``: the example pipeline run over TPC-DS store_sales change batches.

Creates ``db.store_sales`` (SF 0.1 by default, ``bucket(16, ss_ticket_number)``) in the demo lake,
writes change batches (updates, inserts, deletes, some events delivered twice) where
``conf/store_sales_pipeline.toml`` reads them, then runs the ``rowops`` command line: batch 1, batch 1
again (a no-op: the batch is recorded in the lake log), the chained gold pipeline
(``conf/store_sales_gold.toml``: the change feed of ``db.store_sales`` into ``db.store_sales_gold``),
batch 2, gold again, ``describe`` (files and debt after maintenance), ``history`` and the gold table's
change feed; it checks that gold holds exactly silver's rows. Every command is the one a scheduler would run; here they share one
Spark application to save start-ups.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import click
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

import rowops
from rowops.cli import app
from rowops.pipeline import load_config
from tpcds.batches import ITEM, KEY_COLUMNS, TICKET, upsert_batch
from tpcds.datagen import generate_store_sales

GOLD = "db.store_sales_gold"
GOLD_COLUMNS = (TICKET, ITEM, "ss_quantity", "ss_net_paid")


def change_batch(store_sales: DataFrame, number: int) -> DataFrame:
    """Batch ``number``: ~1% updates, new rows, ~0.2% deletes, 100 events twice; ``op`` and ``change_seq``."""
    max_ticket = store_sales.agg(F.max(TICKET)).first()[0]  # type: ignore[index]
    upserts = upsert_batch(store_sales, update_fraction=0.01, insert_fraction=0.002, seed=number)
    upserts = upserts.withColumn("op", F.when(F.col(TICKET) > F.lit(max_ticket), "I").otherwise("U"))
    picked = F.abs(F.hash(F.col(TICKET), F.col(ITEM), F.lit(number))) % 500 == 0
    deletes = store_sales.where(picked).withColumn("op", F.lit("D"))
    events = upserts.unionByName(deletes).withColumn("change_seq", F.lit(number * 10).cast("long"))
    return events.unionByName(events.where(F.col("op") == "U").limit(100))  # delivered twice


def run_cli(args: list[str]) -> int:
    print(f"\n$ rowops {' '.join(args)}", flush=True)
    try:
        code = app(args, prog_name="rowops", standalone_mode=False)
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    return int(code or 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lake", default="lake-pipeline")
    parser.add_argument("--sf", type=float, default=0.1)
    parser.add_argument("--data", default="data/tpcds")
    parser.add_argument("--config", default="conf/store_sales_pipeline.toml")
    parser.add_argument("--gold", default="conf/store_sales_gold.toml")
    args = parser.parse_args(argv)

    config = load_config(args.config)
    source_dir = generate_store_sales(args.sf, Path(args.data) / f"sf{args.sf:g}")
    lake = rowops.Lakehouse(args.lake)
    store_sales = lake.spark.read.parquet(str(source_dir))
    if "db.store_sales" not in lake.catalog.log.latest():
        print(f"creating db.store_sales from {source_dir}", flush=True)
        lake.create_table(
            "db.store_sales",
            store_sales,
            partition_by=[f"bucket(16, {TICKET})"],
            identifier=list(KEY_COLUMNS),
        )
    batches = ["batch-0001", "batch-0002"]
    for number, batch in enumerate(batches, start=1):
        path = config.source.path_for(batch)
        assert path is not None
        if not Path(path).exists():  # resolved here: the JVM's working directory may differ from Python's
            change_batch(store_sales, number).write.parquet(str(Path(path).resolve()))
    if GOLD not in lake.catalog.log.latest():
        columns = [f for f in store_sales.schema.fields if f.name in GOLD_COLUMNS]
        lake.create_table(GOLD, StructType(columns), identifier=list(KEY_COLUMNS))
    lake_args = ["--lake", args.lake]
    codes = [run_cli([*lake_args, "tables"])]
    for batch in (batches[0], batches[0]):  # batch 1 twice: the second run is a no-op
        codes.append(run_cli([*lake_args, "pipeline", "run", args.config, "--batch-id", batch]))
    codes.append(run_cli([*lake_args, "pipeline", "run", args.gold, "--batch-id", "gold-0001"]))
    codes.append(run_cli([*lake_args, "pipeline", "run", args.config, "--batch-id", batches[1]]))
    codes.append(run_cli([*lake_args, "pipeline", "run", args.gold, "--batch-id", "gold-0002"]))
    codes.append(run_cli([*lake_args, "describe", "db.store_sales"]))
    codes.append(run_cli([*lake_args, "history"]))
    lake = rowops.Lakehouse(args.lake)
    feed = lake.table(GOLD).changes(start=lake.version - 1).groupBy("_change_type").count().collect()
    print(f"\nthe change feed of {GOLD}'s last batch: {sorted((r[0], r[1]) for r in feed)}", flush=True)
    silver = lake.table("db.store_sales").to_df().select(*GOLD_COLUMNS)
    gold = lake.table(GOLD).to_df().select(*GOLD_COLUMNS)
    differ = silver.exceptAll(gold).count() + gold.exceptAll(silver).count()
    print(f"\ngold {GOLD} vs silver db.store_sales: {differ} rows differ", flush=True)
    return max([*codes, 1 if differ else 0])


if __name__ == "__main__":
    sys.exit(main())
