"""Oracle 2: DuckDB's ``iceberg_scan`` over a ``*.metadata.json`` path.

The ``iceberg`` and ``avro`` extensions are loaded from the ``duckdb-extension-iceberg`` /
``duckdb-extension-avro`` wheels (``<package>/extensions/v<duckdb version>/<name>.duckdb_extension``);
auto-install and auto-load are switched off, so nothing is ever downloaded.  The session time zone
is UTC, so ``timestamptz`` columns come back as ``timestamp[us, tz=UTC]``.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import duckdb
import pyarrow as pa

EXTENSIONS = ("avro", "iceberg", "httpfs")  # avro first: iceberg reads manifests through it


def extension_path(name: str) -> Path:
    """Path of the ``name`` extension binary shipped by the ``duckdb_extension_<name>`` wheel."""
    spec = importlib.util.find_spec(f"duckdb_extension_{name}")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"duckdb-extension-{name} is not installed")
    root = Path(next(iter(spec.submodule_search_locations))) / "extensions"
    exact = root / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    if exact.is_file():
        return exact
    found = sorted(root.glob(f"*/{name}.duckdb_extension"))
    raise FileNotFoundError(f"no {exact} for duckdb {duckdb.__version__}; the wheel has {found}")


@functools.lru_cache(maxsize=1)
def _base_connection() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(
        ":memory:", config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    )
    for name in EXTENSIONS:
        con.execute(f"LOAD '{extension_path(name)}'")
    return con


def connect() -> duckdb.DuckDBPyConnection:
    """A fresh cursor (own session, ``TimeZone = UTC``) on a shared database with both extensions loaded."""
    con = _base_connection().cursor()
    con.execute("SET TimeZone = 'UTC'")
    return con


def _use_s3(con: duckdb.DuckDBPyConnection, options: dict[str, str]) -> None:
    """A session secret for the S3 server in ``options`` (pyiceberg FileIO property names)."""
    endpoint = options["s3.endpoint"]
    host = endpoint.split("://", 1)[-1]
    con.execute(
        "CREATE OR REPLACE SECRET s3_lake (TYPE s3, KEY_ID ?, SECRET ?, REGION ?, ENDPOINT ?, "
        "URL_STYLE 'path', USE_SSL ?)",
        [
            options["s3.access-key-id"],
            options["s3.secret-access-key"],
            options.get("s3.region", "us-east-1"),
            host,
            endpoint.startswith("https://"),
        ],
    )


def read_duckdb(
    metadata_location: str, snapshot_id: int | None = None, options: dict[str, str] | None = None
) -> pa.Table:
    """Read a table (optionally at ``snapshot_id``) with ``iceberg_scan``; ``options`` for S3."""
    con = connect()
    try:
        if options and "s3.endpoint" in options:
            _use_s3(con, options)
        if snapshot_id is None:
            return con.execute("SELECT * FROM iceberg_scan(?)", [str(metadata_location)]).to_arrow_table()
        query = "SELECT * FROM iceberg_scan(?, snapshot_from_id => ?::UBIGINT)"
        return con.execute(query, [str(metadata_location), snapshot_id]).to_arrow_table()
    finally:
        con.close()
