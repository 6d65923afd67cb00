"""Creates a table with Iceberg's Java runtime in a Hadoop catalog directory (a test fixture process).

``python hadoop_catalog_writer.py WAREHOUSE ROWS NAME...`` starts a small local SparkSession with the
Iceberg Spark runtime (its own JVM: the test process's session has no Iceberg jars), creates each table
``h.db.NAME`` in the Hadoop catalog at ``WAREHOUSE`` (``file:/...``; metadata files ``vN.metadata.json``
+ ``version-hint.text``), writes rows ``k`` in ``range(ROWS)`` in two commits and prints each table's
current metadata file, one line per table, as the last lines of stdout.
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession

from tests.oracles.java_reader import default_jars


def main(warehouse: str, rows: int, names: list[str]) -> None:
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("rowops-hadoop-catalog-writer")
        .config("spark.jars", ",".join(default_jars()))
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config("spark.sql.catalog.h", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.h.type", "hadoop")
        .config("spark.sql.catalog.h.warehouse", warehouse)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    for name in names:
        table = f"h.db.{name}"
        spark.sql(
            f"CREATE TABLE {table} (k bigint NOT NULL, v string, n int) USING iceberg "
            "PARTITIONED BY (bucket(4, k)) TBLPROPERTIES ('format-version'='2')"
        )
        spark.sql(f"ALTER TABLE {table} SET IDENTIFIER FIELDS k")
        half = rows // 2
        for lo, hi in ((0, half), (half, rows)):
            spark.sql(
                f"INSERT INTO {table} SELECT id, concat('v', id), CAST(id % 7 AS int) FROM range({lo}, {hi})"
            )
    for name in names:
        log = spark.sql(f"SELECT file FROM h.db.{name}.metadata_log_entries ORDER BY timestamp DESC LIMIT 1")
        print(log.collect()[0][0])
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
