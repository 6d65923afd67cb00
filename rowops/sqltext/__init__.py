"""SQL text for rowops: ``MERGE INTO`` / ``UPDATE`` / ``DELETE FROM`` parsed into the builder's specs, and
queries whose lake tables are replaced by their snapshots (pure: sqlglot, no Spark; run by
``rowops/statements.py``)."""
