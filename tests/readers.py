"""Every table a test produces is checked against the expected rows through independent readers.

Readers: rowops' own ``to_df`` (Spark), DuckDB's ``iceberg_scan``, PyIceberg (skipped where the
snapshot has equality deletes, which it cannot apply) and Iceberg's Java reader (separate JVM).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from pyspark.sql import types as T

from tests.oracles.compare import assert_same_rows
from tests.oracles.duckdb_reader import read_duckdb
from tests.oracles.java_reader import JavaIcebergReader
from tests.oracles.pyiceberg_reader import EqualityDeletesUnsupportedError, read_pyiceberg

Row = tuple[Any, ...]


def rowops_rows(table: Any, snapshot_id: int | None = None) -> list[Row]:
    """rowops' own reader, via Spark (test-sized tables only); timestamps made UTC-aware."""
    return df_rows(table.to_df(snapshot_id=snapshot_id))


def df_rows(df: Any) -> list[Row]:
    """The rows of a (small) DataFrame; timestamps made UTC-aware."""
    zoned = [isinstance(f.dataType, T.TimestampType) for f in df.schema.fields]
    return [
        tuple(
            v.astimezone(dt.timezone.utc) if z and v is not None else v for v, z in zip(r, zoned, strict=True)
        )
        for r in df.collect()
    ]


def assert_readers_agree(
    table: Any,
    expected: Iterable[Row],
    columns: Sequence[str],
    java: JavaIcebergReader | None,
    snapshot_id: int | None = None,
) -> dict[str, str]:
    """Assert that every reader returns exactly ``expected``; returns which readers were checked."""
    expected = list(expected)
    location = table.metadata_location
    options = dict(table.lake.storage_options)
    checked = {}
    ours = rowops_rows(table, snapshot_id)
    names = table.to_df(snapshot_id=snapshot_id).columns  # a snapshot is read with its own schema
    assert_same_rows(expected, [tuple(r[names.index(c)] for c in columns) for r in ours], columns, "rowops")
    checked["rowops"] = "ok"
    assert_same_rows(expected, read_duckdb(location, snapshot_id, options), columns, "duckdb")
    checked["duckdb"] = "ok"
    try:
        assert_same_rows(expected, read_pyiceberg(location, snapshot_id, options), columns, "pyiceberg")
        checked["pyiceberg"] = "ok"
    except EqualityDeletesUnsupportedError:
        checked["pyiceberg"] = "skipped (equality deletes)"
    if java is not None:
        assert_same_rows(expected, java.read(location, snapshot_id, options), columns, "iceberg-java")
        checked["java"] = "ok"
    return checked
