"""Reading Iceberg data files with Spark, with position, equality and deletion-vector deletes applied (a MERGE's target scan)."""
