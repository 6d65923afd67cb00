"""Field ids for list elements and map keys and values: one pyarrow pass over the files Spark wrote.

Spark's Parquet writer writes the id of every ``StructField`` (``parquet.field.id``), nested ones
included, but a list element or a map key or value is no ``StructField``: Spark writes no id there.
Iceberg Java reads a file that has any id by id (``ParquetSchemaUtil.hasIds``; the name mapping only
serves files without ids) and its ``PruneColumns`` drops a list or map whose element / key / value has
no id: a ``list<long>`` column would read as NULL. So each data file Spark writes for a table with a
list or map column is rewritten once on the executors by pyarrow, the same rows in the same order, its
schema annotated with the missing ids (pyarrow writes ``PARQUET:field_id`` at every level). The
table's name mapping (``meta/tables.py``) stays for readers of files written before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.schema import Schema
from pyiceberg.types import IcebergType, ListType, MapType, StructType
from pyspark.sql import SparkSession

from rowops.errors import WriteVerificationError
from rowops.exec.spark.compat import default_parallelism
from rowops.meta.fileio import filesystem, make_io, read_footer
from rowops.meta.files import WrittenFile
from rowops.meta.paths import join, parent

FIELD_ID = b"PARQUET:field_id"
IDS_PREFIX = "ids-"
_OUT_SCHEMA = "idx int, written string, rows long"
_OUT_ARROW = pa.schema([("idx", pa.int32()), ("written", pa.string()), ("rows", pa.int64())])


def _has_lists_or_maps(t: IcebergType) -> bool:
    if isinstance(t, ListType | MapType):
        return True
    return isinstance(t, StructType) and any(_has_lists_or_maps(f.field_type) for f in t.fields)


def needs_element_ids(schema: Schema) -> bool:
    """Whether Spark's files of ``schema`` lack ids (a list or a map at any level)."""
    return _has_lists_or_maps(schema.as_struct())


def _field(f: pa.Field, field_id: int, t: IcebergType) -> pa.Field:
    metadata = {**(f.metadata or {}), FIELD_ID: str(field_id).encode()}
    return pa.field(f.name, _type(f.type, t), f.nullable, metadata=metadata)


def _type(arrow: pa.DataType, t: IcebergType) -> pa.DataType:
    if isinstance(arrow, pa.StructType) and isinstance(t, StructType):
        by_name = {f.name: f for f in t.fields}
        children = [arrow.field(i) for i in range(arrow.num_fields)]
        return pa.struct([_field(c, by_name[c.name].field_id, by_name[c.name].field_type) for c in children])
    if isinstance(arrow, pa.MapType) and isinstance(t, MapType):
        key = _field(arrow.key_field, t.key_id, t.key_type)
        return pa.map_(key, _field(arrow.item_field, t.value_id, t.value_type), keys_sorted=arrow.keys_sorted)
    if isinstance(arrow, pa.ListType | pa.LargeListType) and isinstance(t, ListType):
        element = _field(arrow.value_field, t.element_id, t.element_type)
        return pa.large_list(element) if isinstance(arrow, pa.LargeListType) else pa.list_(element)
    return arrow


def with_ids(arrow: pa.Schema, schema: Schema) -> pa.Schema:
    """``arrow`` (a file Spark wrote, columns named as the table's) with every field's Iceberg id.

    >>> from pyiceberg.types import LongType, NestedField
    >>> table = Schema(NestedField(1, "a", ListType(2, LongType())))
    >>> out = with_ids(pa.schema([pa.field("a", pa.list_(pa.int64()))]), table)
    >>> out.field("a").metadata[FIELD_ID], out.field("a").type.value_field.metadata[FIELD_ID]
    (b'1', b'2')
    """
    fields = []
    for f in arrow:
        column = schema.find_field(f.name)
        fields.append(_field(f, column.field_id, column.field_type))
    return pa.schema(fields, metadata=arrow.metadata)


def _options(properties: Mapping[str, str]) -> dict[str, object]:
    """pyarrow writer options matching Spark's files: the table's codec (zstd level 3 by default),
    decimals as integers, small dictionary pages (as ``exec/rewriting/arrow_rewrite.py``)."""
    codec = properties.get("write.parquet.compression-codec", "zstd").lower()
    level = properties.get("write.parquet.compression-level")
    return {
        "compression": "none" if codec == "uncompressed" else codec,
        "compression_level": int(level) if level else (3 if codec == "zstd" else None),
        "store_decimal_as_integer": True,
        "dictionary_pagesize_limit": 64 * 1024,
    }


def annotate_file(io: FileIO, path: str, schema: Schema, options: Mapping[str, object]) -> tuple[str, int]:
    """Write the rows of ``path`` next to it as ``ids-<name>`` with every field id; remove ``path``.
    A retried task finds the new file in place of ``path`` and keeps it.

    Returns:
        The new file's key and its number of rows.
    """
    key = join(parent(path), IDS_PREFIX + path.rsplit("/", 1)[-1])
    in_fs, in_path = filesystem(io, path)
    out_fs, out_path = filesystem(io, key)
    if in_fs.get_file_info(in_path).type == pafs.FileType.NotFound:  # done by an earlier attempt
        return key, int(read_footer(io, key)[0].num_rows)
    rows = 0
    with in_fs.open_input_file(in_path) as handle:
        source = pq.ParquetFile(handle)
        target = with_ids(source.schema_arrow, schema)
        with pq.ParquetWriter(out_path, target, filesystem=out_fs, **options) as writer:
            for group in range(source.num_row_groups):  # Spark's row groups kept
                table = source.read_row_group(group)
                writer.write_table(pa.Table.from_arrays(table.columns, schema=target))
                rows += table.num_rows
    io.delete(path)
    return key, rows


def _task(
    io_properties: dict[str, str], schema: Schema, options: dict[str, object]
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        io = make_io(io_properties)
        for batch in batches:
            out: dict[str, list[object]] = {"idx": [], "written": [], "rows": []}
            for idx, path in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
                key, rows = annotate_file(io, path, schema, options)
                out["idx"].append(idx)
                out["written"].append(key)
                out["rows"].append(rows)
            yield pa.RecordBatch.from_pydict(out, schema=_OUT_ARROW)

    return run


def add_element_ids(
    spark: SparkSession,
    schema: Schema,
    properties: Mapping[str, str],
    io: FileIO,
    files: Sequence[WrittenFile],
) -> list[WrittenFile]:
    """``files`` rewritten with the ids of list elements and map keys and values, on the executors
    (a few files per task, at most four tasks per core); the driver checks every file was rewritten
    and reads, in the new files' footers, the rows the tasks wrote (as ``write.save`` checks Spark's)."""
    if not files:
        return []
    paths = spark.createDataFrame([(i, f.path) for i, f in enumerate(files)], "idx int, path string")
    task = _task(dict(io.properties), schema, _options(properties))
    tasks = max(1, min(len(files), 4 * default_parallelism(spark)))
    out = paths.repartition(tasks).mapInArrow(task, _OUT_SCHEMA).collect()
    written = {int(r["idx"]): str(r["written"]) for r in out}
    rows = sum(int(r["rows"]) for r in out)
    with ThreadPoolExecutor(max_workers=8) as pool:
        on_disk = sum(pool.map(lambda key: int(read_footer(io, key)[0].num_rows), written.values()))
    if len(written) != len(files) or on_disk != rows:
        raise WriteVerificationError(
            f"Adding nested field ids rewrote {len(written)} of {len(files)} files; the tasks wrote {rows} "
            f"rows, the driver reads {on_disk}"
        )
    return [WrittenFile(written[i], f.partition, f.entry) for i, f in enumerate(files)]
