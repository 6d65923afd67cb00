"""New data and equality-delete files written by pyarrow inside Spark tasks, not by Spark's writer.

A MERGE's new files are many and small: one per partition of the batch, for its new rows and for its
equality-delete keys. Spark's Parquet writer pays ~35-45 ms per file whatever the rows (a Parquet
writer set up and closed, the commit protocol's task attempt directory and renames): the 16 key files
of a Case 2 micro-batch (57,394 keys, store_sales SF 1) took 0.5-0.7 s to write with the input
cached, whatever the codec or committer algorithm, where pyarrow writes the same 16 files in
13-17 ms; Case 1's 800 new rows took 0.97 s in one task for their 16 files. Here Spark stores the
rows as every writer does (``store_assignment.typed_rows``: casts, NOT NULL and range checks),
computes each row's partition value (``exec/transforms.partition_value``) and clusters the rows by
partition, and each ``mapInArrow`` task writes one file per partition (another past ``max_rows``)
through the lake's FileIO (local disk or S3), as the copy-on-write rewrite does
(``exec/rewriting/arrow_rewrite.py``); for an upsert by equality deletes the same tasks write each partition's
data file and key file (:func:`write_rows_and_keys`), so the source is read and shuffled once. The
driver reads the new files' footers for their manifest entries and checks they hold every row the
tasks wrote.

:func:`arrow_writable` says where this applies: top-level columns of types whose Arrow form Spark and
Iceberg agree on, a table without a sort order or range distribution, and a partitioned table or a
write of few rows; elsewhere (and with ``rowops.rewrite.arrow.enabled=false``) Spark's writer runs.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
)
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from rowops.errors import WriteVerificationError
from rowops.exec.checks.store_assignment import typed_rows
from rowops.exec.rewriting.arrow_files import ParquetSink, target_schema, writer_options
from rowops.exec.rewriting.arrow_rewrite import ENABLED_PROPERTY  # "false": Spark's writer too
from rowops.exec.spark.transforms import parse_value, partition_value
from rowops.exec.writing.write import StagedDir, distribution_mode, one_task, verified_footers
from rowops.meta.fileio import make_io
from rowops.meta.files import WrittenFile
from rowops.meta.paths import join

# types Spark hands to Arrow as Iceberg stores them (timestamps, binary, fixed, uuid: Spark's writer)
_TYPES = (BooleanType, IntegerType, LongType, FloatType, DoubleType, DecimalType, DateType, StringType)
_OUT_SCHEMA = "out int, key string, part string, rows long"
_OUT_ARROW = pa.schema(
    [("out", pa.int32()), ("key", pa.string()), ("part", pa.string()), ("rows", pa.int64())]
)


def arrow_writable(schema: Schema, metadata: TableMetadata, spec: PartitionSpec, rows: int | None) -> bool:
    """Whether :func:`write_in_arrow` can write ``rows`` rows (None: unknown) of ``schema``'s columns
    into this table, partitioned by ``spec`` (see the module)."""
    if metadata.properties.get(ENABLED_PROPERTY, "true").lower() != "true":
        return False
    if not all(isinstance(f.field_type, _TYPES) for f in schema.fields):
        return False
    if metadata.sort_order().fields or distribution_mode(metadata) == "range":
        return False
    return bool(spec.fields) or one_task(rows)


@dataclass(frozen=True)
class Output:
    """Files one write produces: where, named how, with which of the written columns."""

    directory: StagedDir
    prefix: str
    schema: Schema


Target = tuple[str, tuple[int, ...], pa.Schema]  # an output in a task: key prefix, column indexes, schema


def write_in_arrow(
    df: DataFrame,
    schema: Schema,
    metadata: TableMetadata,
    directory: StagedDir,
    spec: PartitionSpec,
    rows: int | None = None,
    single_task: bool = False,
    max_rows: int | None = None,
    prefix: str = "new",
) -> list[WrittenFile]:
    """The columns ``schema`` of ``df`` written as files partitioned by ``spec``, one per partition
    (another past ``max_rows``), named ``<prefix>-arrow-<uuid>.parquet``, where :func:`arrow_writable`.

    ``rows``: the exact row count, when known (checked against what was written); with
    ``single_task`` (or few ``rows``) one task writes every file, without a shuffle.
    """
    outputs = [Output(directory, prefix, schema)]
    return _write(df, schema, metadata, outputs, spec, rows, single_task, max_rows)[0]


def write_rows_and_keys(
    df: DataFrame,
    metadata: TableMetadata,
    directories: tuple[StagedDir, StagedDir],
    keys: Schema,
    rows: int | None = None,
    single_task: bool = False,
    max_rows: int | None = None,
) -> tuple[list[WrittenFile], list[WrittenFile]]:
    """The rows of ``df`` (the table's columns) as new data files in ``directories[0]`` and their
    ``keys`` columns as equality-delete files in ``directories[1]``, both partitioned by the table's
    spec and written by the same tasks, each partition's data and key files side by side (an upsert
    by equality deletes: one pass over the rows, where two writes read and shuffle them twice)."""
    schema = metadata.schema()
    outputs = [Output(directories[0], "new", schema), Output(directories[1], "eq", keys)]
    data, deletes = _write(df, schema, metadata, outputs, metadata.spec(), rows, single_task, max_rows)
    return data, deletes


def _write(
    df: DataFrame,
    schema: Schema,
    metadata: TableMetadata,
    outputs: Sequence[Output],
    spec: PartitionSpec,
    rows: int | None,
    single_task: bool,
    max_rows: int | None,
) -> list[list[WrittenFile]]:
    """The rows of ``df`` (columns ``schema``) written by one ``mapInArrow`` job into every output (its
    columns of them), one file per partition of ``spec`` and output; the verified files per output."""
    table = metadata.schema()
    parts = [f"_arrow_part{i}" for i in range(len(spec.fields))]
    typed = typed_rows(df, schema).select(
        *[F.col(f"`{f.name}`") for f in schema.fields],
        *[partition_value(f, table).alias(p) for f, p in zip(spec.fields, parts, strict=True)],
    )
    if single_task or one_task(rows):
        typed = typed.coalesce(1)
    elif parts and distribution_mode(metadata) != "none":
        typed = typed.repartition(*parts)
    order = [*parts, *identifier_order(table, schema)]
    clustered = typed.sortWithinPartitions(*order) if order else typed
    options = writer_options(metadata.properties)
    position = {f.field_id: i for i, f in enumerate(schema.fields)}
    tasks = [
        (
            join(o.directory.key, o.prefix),
            tuple(position[f.field_id] for f in o.schema.fields),
            target_schema(o.schema),
        )
        for o in outputs
    ]
    io = outputs[0].directory.io
    task = _write_task(dict(io.properties), tasks, len(schema.fields), options, max_rows)
    results: list[list[tuple[str, list[str | None], int]]] = [[] for _ in outputs]
    for r in clustered.mapInArrow(task, _OUT_SCHEMA).collect():
        results[int(r["out"])].append((r["key"], json.loads(r["part"]), int(r["rows"])))
    return [
        _verified(found, rows, o.directory, spec, table) for found, o in zip(results, outputs, strict=True)
    ]


def _write_task(
    io_properties: dict[str, str],
    outputs: Sequence[Target],
    width: int,
    options: Mapping[str, object],
    max_rows: int | None,
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function: rows (``width`` columns, then partition values) sorted by partition
    become, per output (key prefix, its columns' indexes, its Arrow schema), one file per partition
    (another past ``max_rows``), and one output row per file (output index, key, partition values as
    JSON, rows)."""
    limit = max(max_rows or 1 << 62, 1)

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        io = make_io(io_properties)
        sinks: list[ParquetSink] = []
        current: list[Any] | None = None
        in_sink = 0
        done: list[dict[str, Any]] = []

        def close() -> None:
            done.extend(
                {"out": i, "key": s.key, "part": json.dumps(current), "rows": s.close()}
                for i, s in enumerate(sinks)
            )

        for batch in batches:
            columns = [
                [batch.column(c).cast(target.field(j).type) for j, c in enumerate(indexes)]
                for _, indexes, target in outputs
            ]
            parts = [batch.column(i) for i in range(width, batch.num_columns)]
            for start, end in itertools.pairwise(runs(parts, batch.num_rows)):
                part = [c[start].as_py() for c in parts]
                at = start
                while at < end:
                    if not sinks or part != current or in_sink >= limit:
                        close()
                        sinks = [
                            ParquetSink(io, f"{prefix}-arrow-{uuid.uuid4()}.parquet", target, options)
                            for prefix, _, target in outputs
                        ]
                        current, in_sink = part, 0
                    stop = min(end, at + limit - in_sink)
                    for sink, cols, (_, _, target) in zip(sinks, columns, outputs, strict=True):
                        sink.add(pa.Table.from_arrays([c.slice(at, stop - at) for c in cols], schema=target))
                    in_sink += stop - at
                    at = stop
        close()
        if done:
            yield pa.RecordBatch.from_pylist(done, schema=_OUT_ARROW)

    return run


def identifier_order(table: Schema, written: Schema) -> list[str]:
    """The table's identifier columns (in their declared order) among the ``written`` ones: rows are
    ordered by them within a partition, as Iceberg's leave its sort-merge join (a MERGE's source
    arrives in no order; sorted, Case 3's new files of store_sales SF 1 took 77.0 MB against 94.2 MB).

    >>> from pyiceberg.types import NestedField as N, LongType as L
    >>> t = Schema(N(1, "k", L(), required=True), N(2, "v", L()), N(3, "j", L(), required=True), identifier_field_ids=[3, 1])
    >>> identifier_order(t, t), identifier_order(t, t.select("v", "k"))
    (['j', 'k'], ['k'])
    """
    names = {f.field_id: f.name for f in written.fields}
    return [names[i] for i in table.identifier_field_ids if i in names]


def runs(parts: list[pa.Array], rows: int) -> list[int]:
    """The bounds of the runs of equal values (NULL equal to NULL) in the string columns ``parts``.

    >>> runs([pa.array(["v1", "v1", None, None, "v2"])], 5), runs([], 3), runs([pa.array([], pa.string())], 0)
    ([0, 2, 4, 5], [0, 3], [0])
    """
    if rows == 0:
        return [0]
    changed = np.zeros(rows - 1, dtype=bool)
    for column in parts:
        filled = column.fill_null("\0")  # partition values start with "v": never this
        changed |= pc.not_equal(filled.slice(1), filled.slice(0, rows - 1)).to_numpy(zero_copy_only=False)
    return [0, *(np.flatnonzero(changed) + 1).tolist(), rows]


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
    if rows is not None and written != rows:
        raise WriteVerificationError(f"The write tasks wrote {written} rows where {rows} were to be written")
    footers = verified_footers(directory.io, [key for key, _, _ in results], written, "The write tasks")
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
