"""The main job (`make run`): TPC-DS store_sales upserted once with each rowops strategy.

Generates store_sales with DuckDB's tpcds extension (cached under ``data/``), creates
``db.store_sales`` partitioned by ``bucket(16, ss_ticket_number)`` with identifier
``(ss_ticket_number, ss_item_sk)``, builds one upsert batch (~1% updates spread over all buckets and as
many new rows), then for each strategy restores the table to its first snapshot, runs the MERGE, reads
the table back and prints what happened. Every strategy must produce the same table contents.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import rowops
from rowops.table import Table
from tpcds.batches import KEY_COLUMNS, TICKET, upsert_batch
from tpcds.datagen import generate_store_sales

STRATEGIES = ("copy-on-write", "position-delete", "equality-delete", "auto")


def read_query(table: Table) -> tuple[float, tuple[object, ...]]:
    """The paper's scan-sensitive aggregate; returns (seconds, result)."""
    started = time.perf_counter()
    row = (
        table.to_df()
        .agg(F.count("*"), F.sum("ss_net_paid"), F.sum("ss_quantity"), F.countDistinct(TICKET))
        .collect()[0]
    )
    return time.perf_counter() - started, tuple(row)


def materialize(df: DataFrame, path: Path) -> DataFrame:
    """Write the batch once so every strategy merges exactly the same rows."""
    df.write.mode("overwrite").parquet(str(path))
    return df.sparkSession.read.parquet(str(path))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lake", default="lake")
    parser.add_argument("--sf", type=float, default=0.1)
    parser.add_argument("--data", default="data/tpcds")
    parser.add_argument("--out", default=None, help="results JSON (default: <lake>/upsert_demo.json)")
    args = parser.parse_args(argv)

    source_dir = generate_store_sales(args.sf, Path(args.data) / f"sf{args.sf:g}")
    lake = rowops.Lakehouse(args.lake)
    spark = lake.spark
    if "db.store_sales" in lake.catalog.log.latest():
        lake.drop_table("db.store_sales")
    store_sales = spark.read.parquet(str(source_dir))
    started = time.perf_counter()
    table = lake.create_table(
        "db.store_sales", store_sales, partition_by=[f"bucket(16, {TICKET})"], identifier=list(KEY_COLUMNS)
    )
    print(f"created db.store_sales in {time.perf_counter() - started:.1f}s: {table.metadata_location}")
    base = table.current_snapshot_id
    assert base is not None
    batch = materialize(upsert_batch(store_sales), Path(args.data) / f"batch-sf{args.sf:g}")
    print(f"upsert batch: {batch.count()} rows")
    base_read, base_result = read_query(table)
    rows = []
    results = set()
    for strategy in STRATEGIES:
        table.rollback_to(base)
        result = rowops.merge(batch, table, on=list(KEY_COLUMNS), strategy=strategy)
        read_s, answer = read_query(table)
        results.add(answer)
        rows.append(
            {
                "strategy": strategy,
                "chosen": result.strategy,
                "rows_updated": result.rows_updated,
                "rows_inserted": result.rows_inserted,
                "data_files_added": result.data_files_added,
                "delete_files_added": result.delete_files_added,
                "write_s": round(result.duration_s, 2),
                "read_s": round(read_s, 2),
                "row_count": answer[0],
            }
        )
    print_table(rows, base_read)
    consistent = len(results) == 1
    print(f"read query before any upsert: {base_read:.2f}s; all strategies give the same table: {consistent}")
    Path(args.out or Path(args.lake) / "upsert_demo.json").write_text(
        json.dumps({"sf": args.sf, "base_read_s": base_read, "runs": rows}, indent=1)
    )
    return 0 if consistent and base_result != next(iter(results)) else 1


def print_table(rows: list[dict[str, object]], base_read: float) -> None:
    headers = [
        "strategy",
        "rows_updated",
        "rows_inserted",
        "data_files_added",
        "delete_files_added",
        "write_s",
        "read_s",
    ]
    labelled = [
        {**r, "strategy": r["strategy"] + (f" ({r['chosen']})" if r["strategy"] == "auto" else "")}
        for r in rows
    ]
    widths = [max(len(h), *(len(str(r[h])) for r in labelled)) for h in headers]
    print(" | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for r in labelled:
        print(" | ".join(str(r[h]).ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())


if __name__ == "__main__":
    sys.exit(main())
