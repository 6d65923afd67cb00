"""Copy-on-write of files that only lose rows, rewritten by pyarrow inside Spark tasks.

Rewriting a data file whose change is "drop these positions" (the rows a MERGE, UPDATE or DELETE
removes, plus the file's own position deletes) needs no join and no shuffle: one task reads the file,
drops the positions and writes the survivors, in their order, to one new file of the same partition.
Spark's way (``strategies.rewrite_files``: scan with row ids, anti-join, the DataFrame writer) converts
every value to Spark's rows and back and writes through parquet-mr; here the file goes from Parquet to
Arrow batches and back to Parquet in pyarrow, on the executors (one row per file goes in, one row per
written file comes out: the driver sees paths and counts only).

Columns are matched by Iceberg field id and written under the current schema's names and types
(widened types cast, columns the file lacks written as NULL, dropped columns left out), with the
field ids, so the result is what Spark's rewrite writes. Files some equality delete applies to, or of
another partition spec than the current one, are left to Spark (they need a key join or a new
partition), as are files not written in the table's current sort order (rows keep their order here)
and tables with nested columns; so is everything when the table property
``rowops.rewrite.arrow.enabled`` is ``false``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.types import PrimitiveType
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from rowops.errors import WriteVerificationError
from rowops.exec.compat import default_parallelism
from rowops.exec.scan import FILE_COL, POS_COL, file_uris
from rowops.exec.write import read_footers
from rowops.meta.delete_index import DeleteIndex
from rowops.meta.fileio import filesystem, make_io
from rowops.meta.files import LiveFile, WrittenFile
from rowops.meta.paths import join

ENABLED_PROPERTY = "rowops.rewrite.arrow.enabled"
FIELD_ID = b"PARQUET:field_id"
DICTIONARY_PAGE_BYTES = 64 * 1024
ROW_GROUP_ROWS = 1 << 20  # rows buffered per written row group
_BATCH_ROWS = 1 << 17
_OUT_SCHEMA = "idx int, written string, rows long"
_OUT_ARROW = pa.schema([("idx", pa.int32()), ("written", pa.string()), ("rows", pa.int64())])


def arrow_eligible(metadata: TableMetadata, index: DeleteIndex, files: Sequence[LiveFile]) -> list[LiveFile]:
    """The files of ``files`` that can be rewritten in Arrow (see the module doc)."""
    if metadata.properties.get(ENABLED_PROPERTY, "true").lower() != "true":
        return []
    if not all(isinstance(f.field_type, PrimitiveType) for f in metadata.schema().fields):
        return []  # conform() matches top-level field ids only
    spec_id = metadata.default_spec_id
    order = metadata.default_sort_order_id if metadata.sort_order().fields else None
    return [
        f
        for f in files
        if f.spec_id == spec_id
        and not index.equality_deletes_on(f)
        and (order is None or f.data_file.sort_order_id == order)  # kept order: the table's order
    ]


def rewrite_dropping_positions(
    spark: SparkSession,
    metadata: TableMetadata,
    io: FileIO,
    targets: Sequence[LiveFile],
    dropped: DataFrame,
    directory: str,
) -> list[WrittenFile]:
    """Rewrite ``targets`` without the ``(_file, _pos)`` rows of ``dropped``; one file per target.

    Args:
        dropped: Spark's file name (``_file``) and row position (``_pos``) of every row to drop,
            including the rows the targets' position deletes already remove.
        directory: where the new files go (a staging directory).

    Returns:
        The written files, each with its target's partition; a target that loses every row has none.
    """
    uris = file_uris(spark, targets)
    names = spark.createDataFrame(
        [(uris[f.path], i, f.path) for i, f in enumerate(targets)], f"{FILE_COL} string, idx int, path string"
    )
    positions = dropped.join(F.broadcast(names.select(FILE_COL, "idx")), FILE_COL).groupBy("idx")
    per_file = names.join(positions.agg(F.collect_list(POS_COL).alias("positions")), "idx", "left")
    tasks = max(1, min(len(targets), 4 * default_parallelism(spark)))
    task = _rewrite_task(dict(io.properties), metadata, directory)
    out = per_file.select("idx", "path", "positions").repartition(tasks, "idx").mapInArrow(task, _OUT_SCHEMA)
    results = {int(r["idx"]): (r["written"], int(r["rows"])) for r in out.collect()}
    return _verified(targets, results, io)


def _verified(
    targets: Sequence[LiveFile], results: Mapping[int, tuple[str | None, int]], io: FileIO
) -> list[WrittenFile]:
    """The written files, after checking every target was rewritten and the driver reads, in the
    footers of the new files, every row the tasks wrote (as ``write.save`` checks Spark's writes);
    the footers travel with the files to their manifest entries (read once)."""
    missing = [f.path for i, f in enumerate(targets) if i not in results]
    if missing:
        raise WriteVerificationError(f"Spark returned no rewrite of {len(missing)} files, e.g. {missing[:3]}")
    written = {i: path for i, (path, _) in results.items() if path is not None}
    rows = sum(n for _, n in results.values())
    try:
        footers = read_footers(io, list(written.values()))
        on_disk = sum(int(footer.num_rows) for footer, _ in footers.values())
    except OSError:  # FileNotFoundError: written on an executor's own disk
        footers, on_disk = {}, -1
    if on_disk != rows:
        raise WriteVerificationError(
            f"The rewrite tasks wrote {rows} rows into {len(written)} files, but the driver reads "
            f"{max(on_disk, 0)} there: executors wrote where the driver cannot read"
        )
    return [
        WrittenFile(path, targets[i].partition, footer=footers[path]) for i, path in sorted(written.items())
    ]


def _rewrite_task(
    io_properties: dict[str, str], metadata: TableMetadata, directory: str
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function: each input row (idx, path, positions) becomes one output row."""
    schema = metadata.schema()
    options = writer_options(metadata.properties)

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        io = make_io(io_properties)
        target = _target_schema(schema)
        for batch in batches:
            out: dict[str, list[object]] = {"idx": [], "written": [], "rows": []}
            for idx, path, positions in zip(*(batch.column(c).to_pylist() for c in range(3)), strict=True):
                key = join(directory, f"part-arrow-{uuid.uuid4()}.parquet")
                rows = rewrite_file(
                    io, path, np.unique(np.asarray(positions or [], np.int64)), target, key, options
                )
                out["idx"].append(idx)
                out["written"].append(key if rows else None)
                out["rows"].append(rows)
            yield pa.RecordBatch.from_pydict(out, schema=_OUT_ARROW)

    return run


def writer_options(properties: Mapping[str, str]) -> dict[str, object]:
    """pyarrow ``ParquetWriter`` options from the table's write properties (codec, level).

    Without ``write.parquet.compression-level``, zstd is written at level 3, parquet-mr's default (the
    level Spark's writer uses). parquet-mr drops dictionary encoding for a column chunk whose dictionary
    does not pay; pyarrow keeps it until the dictionary page reaches its limit: a 64 KiB limit gives
    files within 2% of Spark's size (a store_sales file: 6.46 MB by Spark, 7.67 MB by pyarrow's
    default 1 MiB limit, 6.57 MB with 64 KiB).

    >>> writer_options({})["compression_level"]
    3
    >>> writer_options({"write.parquet.compression-codec": "snappy"})["compression_level"] is None
    True
    """
    codec = properties.get("write.parquet.compression-codec", "zstd").lower()
    level = properties.get("write.parquet.compression-level")
    return {
        "compression": "none" if codec == "uncompressed" else codec,
        "compression_level": int(level) if level else (3 if codec == "zstd" else None),
        "store_decimal_as_integer": True,  # int32/int64 for precision <= 9/18, as Spark writes them
        "dictionary_pagesize_limit": DICTIONARY_PAGE_BYTES,
    }


def _target_schema(schema: Schema) -> pa.Schema:
    return schema_to_pyarrow(schema, include_field_ids=True)


def conform(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """``batch``'s columns matched to ``target``'s fields by field id, cast to their types; NULL for
    a field the batch lacks.

    >>> fid = lambda i: {b"PARQUET:field_id": str(i).encode()}
    >>> src = pa.RecordBatch.from_arrays([pa.array([1, 2], pa.int32())], schema=pa.schema([pa.field("old", pa.int32(), metadata=fid(1))]))
    >>> out = conform(src, pa.schema([pa.field("k", pa.int64(), metadata=fid(1)), pa.field("v", pa.string(), metadata=fid(2))]))
    >>> out.to_pydict()
    {'k': [1, 2], 'v': [None, None]}
    """
    by_id = {
        field.metadata[FIELD_ID]: i
        for i, field in enumerate(batch.schema)
        if field.metadata and FIELD_ID in field.metadata
    }
    columns = []
    for field in target:
        i = by_id.get(field.metadata[FIELD_ID])
        if i is None:
            columns.append(pa.nulls(batch.num_rows, field.type))
        else:
            column = batch.column(i)
            columns.append(column if column.type == field.type else column.cast(field.type))
    return pa.RecordBatch.from_arrays(columns, schema=target)


def rewrite_file(
    io: FileIO, path: str, dropped: np.ndarray, target: pa.Schema, key: str, options: Mapping[str, object]
) -> int:
    """Write the rows of the Parquet file ``path`` but the (sorted, distinct) positions ``dropped`` to
    ``key``; returns the number of rows written (0: no file is written)."""
    in_fs, in_path = filesystem(io, path)
    out_fs, out_path = filesystem(io, key)
    writer: pq.ParquetWriter | None = None
    buffered: list[pa.RecordBatch] = []
    offset = written = 0

    def flush() -> None:
        nonlocal writer, written
        table = pa.Table.from_batches(buffered, schema=target)
        if writer is None:
            out_fs.create_dir(out_path.rsplit("/", 1)[0], recursive=True)
            writer = pq.ParquetWriter(out_path, target, filesystem=out_fs, **options)
        writer.write_table(table, row_group_size=max(table.num_rows, 1))
        written += table.num_rows
        buffered.clear()

    with in_fs.open_input_file(in_path) as handle:
        for batch in pq.ParquetFile(handle).iter_batches(batch_size=_BATCH_ROWS):
            rows = batch.num_rows
            lo, hi = np.searchsorted(dropped, [offset, offset + rows])
            if hi > lo:
                keep = np.ones(rows, dtype=bool)
                keep[dropped[lo:hi] - offset] = False
                batch = batch.filter(pa.array(keep))
            offset += rows
            if batch.num_rows:
                buffered.append(conform(batch, target))
            if sum(b.num_rows for b in buffered) >= ROW_GROUP_ROWS:
                flush()
    if buffered:
        flush()
    if writer is not None:
        writer.close()
    return written
