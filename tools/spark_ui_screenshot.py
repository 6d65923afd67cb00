"""Take the Spark UI screenshot of docs/guide/observability.md from a real run.

A local Spark session with its UI on, a scratch lake, a MERGE in each encoding, an UPDATE, a DELETE
and a compaction; then headless Chromium (Debian's ``chromium`` package) photographs the UI's job list,
where each job carries rowops' description (operation, table, encoding, step).

    .venv/bin/python tools/spark_ui_screenshot.py --out docs/guide/spark-ui-jobs.png
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession

import rowops


def run_operations(spark: SparkSession, root: Path) -> None:
    lake = rowops.Lakehouse(root / "lake", spark=spark)
    rows = spark.range(100_000).selectExpr("id", "id % 7 AS amount", "'open' AS status")
    orders = lake.create_table("db.orders", rows.repartition(8), identifier=["id"])
    for step, strategy in enumerate(("copy-on-write", "position-delete", "equality-delete")):
        source = spark.range(step * 1000, step * 1000 + 500).selectExpr(
            "id", "99 AS amount", "'paid' AS status"
        )
        rowops.merge(source, orders, on=["id"], strategy=strategy)
    rowops.update(orders, {"status": "'billed'"}, where="amount = 0")
    rowops.delete(orders, where="id < 100")
    orders.compact()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs/guide/spark-ui-jobs.png"))
    parser.add_argument("--port", type=int, default=4050)
    args = parser.parse_args(argv)
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("needs headless Chromium: apt-get install chromium")
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("rowops")
        .config("spark.ui.port", str(args.port))
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    try:
        with tempfile.TemporaryDirectory() as scratch:
            run_operations(spark, Path(scratch))
            url = f"{spark.sparkContext.uiWebUrl}/jobs/"
            args.out.parent.mkdir(parents=True, exist_ok=True)
            command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
            command += ["--window-size=1600,1300", f"--screenshot={args.out.resolve()}", url]
            subprocess.run(command, check=True, capture_output=True, timeout=120)
    finally:
        spark.stop()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
