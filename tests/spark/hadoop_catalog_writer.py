"""Creates a table with Iceberg's Java runtime in a Hadoop catalog directory (a test fixture process).

``python hadoop_catalog_writer.py WAREHOUSE ROWS NAME...`` starts a small local SparkSession with the
Iceberg Spark runtime (its own JVM: the test process's session has no Iceberg jars), creates each table
``h.db.NAME`` in the Hadoop catalog at ``WAREHOUSE`` (``file:/...``; metadata files ``vN.metadata.json``
+ ``version-hint.text``), writes rows ``k`` in ``range(ROWS)`` in two commits and prints each table's
current metadata file, one line per table, as the last lines of stdout.

``--v3-deletes`` first: the tables are format v3 (merge-on-read) and, after the inserts, Iceberg Java
deletes the rows with ``k % 5 = 0``, then those with ``k % 7 = 0``: its own deletion vectors, the
second merged with the first.
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession

from tests.jvm_options import spark_conf as jvm_conf
from tests.oracles.java_reader import default_jars


def main(warehouse: str, rows: int, names: list[str], v3_deletes: bool = False) -> None:
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
        .config(map=jvm_conf())
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    for name in names:
        table = f"h.db.{name}"
        props = "'format-version'='2'"
        if v3_deletes:
            modes = ("delete", "update", "merge")
            props = "'format-version'='3', " + ", ".join(f"'write.{m}.mode'='merge-on-read'" for m in modes)
        spark.sql(
            f"CREATE TABLE {table} (k bigint NOT NULL, v string, n int) USING iceberg "
            f"PARTITIONED BY (bucket(4, k)) TBLPROPERTIES ({props})"
        )
        spark.sql(f"ALTER TABLE {table} SET IDENTIFIER FIELDS k")
        half = rows // 2
        for lo, hi in ((0, half), (half, rows)):
            spark.sql(
                f"INSERT INTO {table} SELECT id, concat('v', id), CAST(id % 7 AS int) FROM range({lo}, {hi})"
            )
        if v3_deletes:
            spark.sql(f"DELETE FROM {table} WHERE k % 5 = 0")
            spark.sql(f"DELETE FROM {table} WHERE k % 7 = 0")
    for name in names:
        log = spark.sql(f"SELECT file FROM h.db.{name}.metadata_log_entries ORDER BY timestamp DESC LIMIT 1")
        print(log.collect()[0][0])
    spark.stop()


if __name__ == "__main__":
    args = sys.argv[1:]
    v3 = args[:1] == ["--v3-deletes"]
    args = args[1:] if v3 else args
    main(args[0], int(args[1]), args[2:], v3)
