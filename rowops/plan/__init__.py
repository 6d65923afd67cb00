"""Planning: pure functions over the operation spec and table metadata (no Spark, no I/O)."""
