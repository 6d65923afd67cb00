"""Equality-delete files written by pyarrow inside Spark tasks, not by Spark's Parquet writer.

An equality-delete file holds key columns only: few bytes per row, and one file per partition of the
batch. Spark's writer pays ~35-45 ms per file (a Parquet writer set up and closed, the commit
protocol's task attempt directory and renames): the 16 key files of a Case 2 micro-batch (57,394 keys,
store_sales SF 1) took 0.5-0.7 s to write with the input cached, whatever the codec or committer
algorithm, where pyarrow writes the same 16 files in 13-17 ms. Here Spark computes each key's
partition value (``exec/transforms.partition_value``), clusters the keys by partition, and each
``mapInArrow`` task writes one file per partition through the lake's FileIO (local disk or S3), as the
copy-on-write rewrite does (``exec/arrow_rewrite.py``). The driver reads the new files' footers for
their manifest entries and checks they hold every row the tasks wrote.

Key columns of other types than ``int``, ``long`` and ``string`` (whose Arrow form Spark and Iceberg
agree on) are left to Spark's writer (:func:`write_key_files` returns None).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.types import IntegerType, LongType, StringType
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from rowops.errors import WriteVerificationError
from rowops.exec.arrow_files import ParquetSink, target_schema, writer_options
from rowops.exec.store_assignment import typed_rows
from rowops.exec.transforms import parse_value, partition_value
from rowops.exec.write import StagedDir, one_task, read_footers
from rowops.meta.fileio import make_io
from rowops.meta.files import WrittenFile
from rowops.meta.paths import join

_KEY_TYPES = (IntegerType, LongType, StringType)
_OUT_SCHEMA = "key string, part string, rows long"
_OUT_ARROW = pa.schema([("key", pa.string()), ("part", pa.string()), ("rows", pa.int64())])


def write_key_files(
    df: DataFrame,
    keys: Schema,
    metadata: TableMetadata,
    directory: StagedDir,
    spec: PartitionSpec,
    rows: int | None = None,
    single_task: bool = False,
) -> list[WrittenFile] | None:
    """The key columns ``keys`` of ``df`` written as equality-delete files, one per partition of
    ``spec``; None (nothing written) when a key column is not an ``int``, ``long`` or ``string``.

    ``rows``: the exact row count, when known (checked against what was written); with
    ``single_task`` (or few ``rows``) one task writes every file, without a shuffle.
    """
    if not all(isinstance(f.field_type, _KEY_TYPES) for f in keys.fields):
        return None
    schema = metadata.schema()
    parts = [f"_key_part{i}" for i in range(len(spec.fields))]
    typed = typed_rows(df, keys).select(
        *[F.col(f"`{f.name}`") for f in keys.fields],
        *[partition_value(f, schema).alias(p) for f, p in zip(spec.fields, parts, strict=True)],
    )
    if single_task or one_task(rows):
        typed = typed.coalesce(1)
    elif parts:
        typed = typed.repartition(*parts)
    clustered = typed.sortWithinPartitions(*parts) if parts else typed
    task = _key_task(dict(directory.io.properties), directory.key, keys, writer_options(metadata.properties))
    results = [
        (r["key"], json.loads(r["part"]), int(r["rows"]))
        for r in clustered.mapInArrow(task, _OUT_SCHEMA).collect()
    ]
    return _verified(results, rows, directory, spec, schema)


def _key_task(
    io_properties: dict[str, str], directory: str, keys: Schema, options: Mapping[str, object]
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function: rows (keys, then partition values) sorted by partition become one
    file per partition, and one output row per file (its key, partition values as JSON, rows)."""
    target = target_schema(keys)
    width = len(keys.fields)

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        io = make_io(io_properties)
        sink: ParquetSink | None = None
        current: list[Any] | None = None
        done: list[tuple[str, str, int]] = []
        for batch in batches:
            if not batch.num_rows:
                continue
            parts = [batch.column(i).to_pylist() for i in range(width, batch.num_columns)]
            values = list(zip(*parts, strict=True)) if parts else [()] * batch.num_rows
            start = 0
            for end in [*(i for i in range(1, len(values)) if values[i] != values[i - 1]), len(values)]:
                part = list(values[start])
                if sink is None or part != current:
                    if sink is not None:
                        done.append((sink.key, json.dumps(current), sink.close()))
                    sink = ParquetSink(
                        io, join(directory, f"eq-arrow-{uuid.uuid4()}.parquet"), target, options
                    )
                    current = part
                columns = [
                    batch.column(i).slice(start, end - start).cast(target.field(i).type) for i in range(width)
                ]
                sink.add(pa.Table.from_arrays(columns, schema=target))
                start = end
        if sink is not None:
            done.append((sink.key, json.dumps(current), sink.close()))
        if done:
            yield pa.RecordBatch.from_pylist(
                [{"key": k, "part": p, "rows": n} for k, p, n in done], schema=_OUT_ARROW
            )

    return run


def _verified(
    results: list[tuple[str, list[str | None], int]],
    rows: int | None,
    directory: StagedDir,
    spec: PartitionSpec,
    schema: Schema,
) -> list[WrittenFile]:
    """The written files with their partitions, after checking that the driver reads, in their
    footers, every row the tasks wrote (and ``rows``, when known)."""
    written = sum(n for _, _, n in results)
    try:
        footers = read_footers(directory.io, [key for key, _, _ in results])
        on_disk = sum(int(footer.num_rows) for footer, _ in footers.values())
    except OSError:  # FileNotFoundError: written on an executor's own disk
        footers, on_disk = {}, -1
    if on_disk != written or (rows is not None and written != rows):
        raise WriteVerificationError(
            f"The equality-delete tasks wrote {written} rows into {len(results)} files (expected "
            f"{rows if rows is not None else written}), but the driver reads {max(on_disk, 0)} there: "
            "executors wrote where the driver cannot read"
        )
    types = [f.transform.result_type(schema.find_field(f.source_id).field_type) for f in spec.fields]
    return [
        WrittenFile(
            key,
            tuple(None if v is None else parse_value(v, t) for v, t in zip(part, types, strict=True)),
            spec_id=spec.spec_id,
            footer=footers[key],
        )
        for key, part, _ in results
    ]
