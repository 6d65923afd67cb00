"""Iceberg commits: RowDelta-style snapshots of added/removed data and delete files, with validation."""
