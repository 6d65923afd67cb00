"""Independent Iceberg readers ("oracles") that tests use to prove a table reads back the same.

- ``JavaIcebergReader``: Iceberg's Java reader via Spark 3.5 in a long-lived worker process.
- ``read_duckdb``: DuckDB ``iceberg_scan``.
- ``read_pyiceberg``: PyIceberg ``StaticTable`` scan; raises ``EqualityDeletesUnsupportedError``.
- ``canonical_rows`` / ``assert_same_rows``: reader-independent comparison.
"""

from .compare import assert_same_rows, canonical_rows
from .duckdb_reader import read_duckdb
from .java_reader import JavaIcebergReader, JavaReaderError, JavaReadError
from .pyiceberg_reader import EqualityDeletesUnsupportedError, read_pyiceberg

__all__ = [
    "EqualityDeletesUnsupportedError",
    "JavaIcebergReader",
    "JavaReadError",
    "JavaReaderError",
    "assert_same_rows",
    "canonical_rows",
    "read_duckdb",
    "read_pyiceberg",
]
