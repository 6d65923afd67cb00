"""The changes of a copy-on-write commit, found in pyarrow inside Spark tasks: per partition, the files
the commit removed and the files it added are read once and their rows matched by identifier key;
only the rows that changed leave the task.

A copy-on-write rewrite copies most rows of the files it replaces. Cancelling those copies in Spark
(``exec/changes/feed.py``) shuffles and aggregates every row of both sides by every column; here a
task reads one partition's files (a copied row stays in its partition: the files have one spec),
joins the two sides by key in Arrow, and compares the other columns vectorized. The driver sees
file paths only.

Taken when the table has identifier columns, primitive columns only, no delete applies to the files
read, both sides have one partition spec, and no partition holds more than
:data:`MAX_GROUP_BYTES` of files; a partition whose keys repeat on a side is diffed as a multiset of
whole rows instead (still in Arrow). Otherwise the feed stays in Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
)
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from rowops.exec.rewriting.arrow_files import conform, target_schema
from rowops.exec.spark.compat import default_parallelism, to_arrow_schema
from rowops.exec.spark.literal_frames import literal_frame
from rowops.exec.spark.placement import groups_cost, task_keys
from rowops.exec.spark.types import to_spark_schema
from rowops.meta.defaults import initial_defaults
from rowops.meta.delete_index import delete_index
from rowops.meta.fileio import filesystem, make_io
from rowops.meta.files import LiveFile, TableFiles

MAX_GROUP_BYTES = 512 << 20  # a partition's files read into one Python worker's memory
_TYPES: tuple[type, ...] = (BooleanType, IntegerType, LongType, FloatType, DoubleType, DecimalType)
_TYPES += (DateType, TimestampType, TimestamptzType, StringType, BinaryType)
_GROUP, _SIDE, _PATH, _TASK = "_ad_group", "_ad_side", "_ad_path", "_ad_task"


def arrow_diff_groups(
    schema: Schema,
    before: TableFiles,
    after: TableFiles,
    removed: Sequence[LiveFile],
    added: Sequence[LiveFile],
    keys: Sequence[str],
) -> list[int] | None:
    """The partition group of each file of ``removed + added`` (in that order) when their changes can
    be diffed in Arrow; None when not (see the module docstring)."""
    if not removed or not keys or any(not isinstance(f.field_type, _TYPES) for f in schema.fields):
        return None
    files = [*removed, *added]
    if len({f.spec_id for f in files}) != 1:
        return None
    old, new = delete_index(before), delete_index(after)
    if any(old.deletes_on(f) for f in removed) or any(new.deletes_on(f) for f in added):
        return None
    ids: dict[Any, int] = {}
    groups = [ids.setdefault(f.partition, len(ids)) for f in files]
    if any(size > MAX_GROUP_BYTES for size in groups_cost(groups, [f.size for f in files]).values()):
        return None
    return groups


def rewritten_changes(
    spark: SparkSession,
    schema: Schema,
    io: FileIO,
    removed: Sequence[LiveFile],
    added: Sequence[LiveFile],
    groups: Sequence[int],
    keys: Sequence[str],
    sign: str,
) -> DataFrame:
    """The rows deleted (``sign`` -1) and inserted (+1) from ``removed`` to ``added`` files, copies
    cancelled, with the table's columns; ``groups`` from :func:`arrow_diff_groups`."""
    files = [*removed, *added]
    tasks = max(1, min(len(set(groups)), default_parallelism(spark)))
    placed = task_keys(groups_cost(groups, [f.size for f in files]), tasks)
    sides = [-1] * len(removed) + [1] * len(added)
    names = literal_frame(
        spark,
        [(g, s, f.path, placed[g]) for g, s, f in zip(groups, sides, files, strict=True)],
        [(_GROUP, "int"), (_SIDE, "int"), (_PATH, "string"), (_TASK, "int")],
    )
    struct = to_spark_schema(schema)
    out = T.StructType([*struct.fields, T.StructField(sign, T.IntegerType(), False)])
    task = _diff_task(dict(io.properties), schema, list(keys), to_arrow_schema(out))
    ordered = names.repartition(tasks, _TASK).sortWithinPartitions(_GROUP, _SIDE)
    return ordered.mapInArrow(task, out)


def _diff_task(
    io_properties: dict[str, str], schema: Schema, keys: list[str], out: pa.Schema
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    target = target_schema(schema)
    defaults = initial_defaults(schema)

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        io = make_io(io_properties)
        paths: dict[int, dict[int, list[str]]] = {}  # group -> side -> paths, in one pass
        for batch in batches:
            for r in batch.to_pylist():
                paths.setdefault(r[_GROUP], {-1: [], 1: []})[r[_SIDE]].append(r[_PATH])
        for group in sorted(paths):
            old = _read(io, paths[group][-1], target, defaults)
            new = _read(io, paths[group][1], target, defaults)
            changed = diff_tables(old, new, keys, out.names[-1])
            if changed.num_rows:
                yield from changed.cast(out).to_batches()

    return run


def _read(io: FileIO, paths: Sequence[str], target: pa.Schema, defaults: dict[int, Any]) -> pa.Table:
    """The rows of ``paths`` under ``target`` (matched by field id), field ids dropped."""
    batches: list[pa.RecordBatch] = []
    for path in paths:
        fs, key = filesystem(io, path)
        with fs.open_input_file(key) as handle:
            batches.extend(conform(b, target, defaults) for b in pq.ParquetFile(handle).iter_batches())
    plain = pa.schema([pa.field(f.name, f.type) for f in target])
    return pa.Table.from_batches(
        [pa.RecordBatch.from_arrays(b.columns, schema=plain) for b in batches], plain
    )


def diff_tables(old: pa.Table, new: pa.Table, keys: Sequence[str], sign: str) -> pa.Table:
    """The rows of ``old`` (``sign`` -1) and ``new`` (+1) that are not copies of each other.

    >>> old = pa.table({"k": [1, 2, 3], "v": ["a", None, "c"]})
    >>> new = pa.table({"k": [1, 2, 4], "v": ["a", None, "d"]})
    >>> diff_tables(old, new, ["k"], "s").sort_by("k").to_pydict()
    {'k': [3, 4], 'v': ['c', 'd'], 's': [-1, 1]}
    >>> twice = pa.table({"k": [1, 1], "v": ["a", "a"]})  # a key repeats: rows diffed as multisets
    >>> diff_tables(twice, pa.table({"k": [1], "v": ["a"]}), ["k"], "s").to_pydict()
    {'k': [1], 'v': ['a'], 's': [-1]}
    """
    if _unique(old, keys) and _unique(new, keys):
        return _diff_by_key(old, new, keys, sign)
    return _diff_as_multisets(old, new, sign)


def _unique(table: pa.Table, keys: Sequence[str]) -> bool:
    return table.group_by(list(keys), use_threads=False).aggregate([]).num_rows == table.num_rows


def _diff_by_key(old: pa.Table, new: pa.Table, keys: Sequence[str], sign: str) -> pa.Table:
    left = old.select(list(keys)).append_column("_old_i", pa.array(np.arange(old.num_rows)))
    right = new.select(list(keys)).append_column("_new_i", pa.array(np.arange(new.num_rows)))
    pairs = left.join(right, list(keys), join_type="full outer", use_threads=False)
    i, j = pairs.column("_old_i"), pairs.column("_new_i")
    both = pc.and_(pc.is_valid(i), pc.is_valid(j))
    matched_i, matched_j = pc.filter(i, both), pc.filter(j, both)
    same = np.ones(len(matched_i), dtype=bool)
    for name in old.column_names:
        if name not in keys:
            same &= _equal(old.column(name).take(matched_i), new.column(name).take(matched_j))
    differ = ~same
    gone = np.concatenate([pc.filter(i, pc.is_null(j)).to_numpy(), matched_i.to_numpy()[differ]])
    came = np.concatenate([pc.filter(j, pc.is_null(i)).to_numpy(), matched_j.to_numpy()[differ]])
    return _signed(old.take(np.sort(gone).astype(np.int64)), new.take(np.sort(came).astype(np.int64)), sign)


def _equal(a: pa.ChunkedArray, b: pa.ChunkedArray) -> np.ndarray:
    """Element-wise equality, NULLs (and NaNs) equal to each other."""
    eq = pc.fill_null(pc.equal(a, b), False)
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    out = pc.or_(eq, both_null)
    if pa.types.is_floating(a.type):
        out = pc.or_(out, pc.fill_null(pc.and_(pc.is_nan(a), pc.is_nan(b)), False))
    return np.asarray(out.to_numpy(zero_copy_only=False), dtype=bool)


def _diff_as_multisets(old: pa.Table, new: pa.Table, sign: str) -> pa.Table:
    """Rows of equal values deleted ``d`` and inserted ``i`` times come out ``|d - i|`` times."""
    columns = old.column_names
    both = pa.concat_tables(
        [
            old.append_column(sign, pa.array(np.full(old.num_rows, -1, np.int32))),
            new.append_column(sign, pa.array(np.full(new.num_rows, 1, np.int32))),
        ]
    )
    net = both.group_by(columns, use_threads=False).aggregate([(sign, "sum")])
    counts = net.column(f"{sign}_sum").to_numpy()
    keep = np.nonzero(counts)[0]
    net = net.take(keep)
    counts = counts[keep]
    repeated = net.select(columns).take(np.repeat(np.arange(net.num_rows), np.abs(counts)))
    signs = np.repeat(np.sign(counts), np.abs(counts)).astype(np.int32)
    return repeated.append_column(sign, pa.array(signs))


def _signed(gone: pa.Table, came: pa.Table, sign: str) -> pa.Table:
    return pa.concat_tables(
        [
            gone.append_column(sign, pa.array(np.full(gone.num_rows, -1, np.int32))),
            came.append_column(sign, pa.array(np.full(came.num_rows, 1, np.int32))),
        ]
    )
