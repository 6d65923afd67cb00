"""Small appends committed without Spark: one tiny Parquet file written by pyarrow per commit.

For tests and benchmarks of the metadata paths (manifest reading, merging, commit time) that need
hundreds or thousands of commits: each commit goes through the same ``RowDelta`` / ``commit_delta``
path as a Spark append, only the file is written by pyarrow (with Iceberg field ids) instead of Spark.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Operation

from rowops.commit.row_delta import RowDelta
from rowops.meta.files import WrittenFile, data_files_from_parquet, live_files
from rowops.meta.paths import join, local_path


def write_file(metadata: TableMetadata, rows: Sequence[dict[str, object]]) -> str:
    """Write ``rows`` (dicts by column name) as a new Parquet file of the table; its local path."""
    key = join(metadata.location, "data", f"direct-{uuid.uuid4().hex}.parquet")
    local = local_path(key)
    assert local is not None, "direct appends write local lakes only"
    local.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(list(rows), schema=schema_to_pyarrow(metadata.schema())), str(local))
    return str(local)


def append_rows(table: Any, rows: Sequence[dict[str, object]], partition: tuple[object, ...] = ()) -> None:
    """Commit ``rows`` (dicts by column name) as one new data file of ``partition`` (Iceberg values)."""
    loaded = table.load()
    metadata, io = loaded.metadata, table.lake.catalog.io
    added = data_files_from_parquet([WrittenFile(write_file(metadata, rows), partition)], metadata, io)
    delta = RowDelta(
        Operation.APPEND, added_data=tuple(added), blind=True, schema_id=metadata.current_schema_id
    )
    table.scope.commit_delta(loaded, live_files(metadata, io), delta)
