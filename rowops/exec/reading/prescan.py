"""Key-only pre-scan of the source: per target partition, the range of each key column.

It reads only the key columns of the source and returns one small row per partition the source
touches (never the rows themselves); the planner uses it to prune target files at run time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce

from pyiceberg.conversions import from_bytes
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.types import IcebergType, PrimitiveType
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from rowops.exec.reading import key_codes
from rowops.exec.reading.key_codes import batch_codec, integral_keys
from rowops.exec.rewriting.arrow_deletes import KeyCodes
from rowops.exec.spark.stats import arrow_row_bytes
from rowops.exec.spark.transforms import epoch_value, parse_value, partition_value
from rowops.meta.files import LiveFile
from rowops.plan.pruning import Bounds, FileKeys, KeyRanges


@dataclass(frozen=True)
class SourceKeys:
    """Result of the pre-scan.

    ``rows_by_partition`` counts source rows per target partition and ``texts`` holds each such
    partition's values as :func:`partition_value` computes them; both are None when the partition
    is not a function of the keys. ``keys_unique``: no source key is NULL or repeated (None when
    not checked), what an equality-delete write requires. ``bytes``: the Arrow bytes of all source rows
    (:func:`rowops.exec.spark.stats.arrow_row_bytes`), when measured. ``codes``: the source's keys packed
    and collected when the check used them (``exec/reading/key_codes.py``), for a rewrite by key.
    """

    rows: int
    ranges: KeyRanges
    rows_by_partition: Mapping[tuple[object, ...], int] | None = None
    texts: Mapping[tuple[object, ...], tuple[str | None, ...]] | None = None
    keys_unique: bool | None = None
    bytes: int | None = None
    codes: KeyCodes | None = None


def scan_source_keys(
    source: DataFrame,
    keys: Sequence[str],
    metadata: TableMetadata,
    target_partitions: Sequence[tuple[object, ...]],
    check_unique: bool = False,
    single_task: bool = False,
    measure: bool = False,
) -> SourceKeys:
    """Ranges of the source keys per target partition (partition derived from the keys when possible).

    Args:
        check_unique: also check that no key is NULL or repeated (``keys_unique``). NULL keys are
            counted in the same job. With integer keys and a source of several tasks, the keys are
            then packed and collected (``key_codes.collect_codes``, a job without a shuffle) and
            counted distinct on the driver; otherwise (and past ``key_codes.MAX_COLLECTED_KEYS``
            rows) Spark counts them distinct (in the same job, or in one more when the codes were
            not collectable).
        single_task: aggregate in one task (a small source): one job, where grouping by partition
            (and counting distinct keys) would shuffle, i.e. run a job per stage.
        measure: also sum the Arrow bytes of the source rows (``bytes``), so sizing the source for a
            broadcast needs no job of its own (all rows measured: meant for small sources).
    """
    schema, spec = metadata.schema(), metadata.spec()
    key_types = [schema.find_field(k).field_type for k in keys]
    derivable = all(schema.find_column_name(f.source_id) in keys for f in spec.fields)
    part_cols = (
        [partition_value(f, schema).alias(f"_p{i}") for i, f in enumerate(spec.fields)] if derivable else []
    )
    aggs = [F.count(F.lit(1)).alias("_rows")]
    for i, (k, t) in enumerate(zip(keys, key_types, strict=True)):  # bounds in Iceberg's internal form
        value = epoch_value(F.col(f"`{k}`"), t)
        aggs += [F.min(value).alias(f"_lo{i}"), F.max(value).alias(f"_hi{i}")]
    by_codes = check_unique and not single_task and integral_keys(source, keys)
    if check_unique:  # countDistinct skips tuples with a NULL: those are counted apart
        any_null = reduce(lambda a, b: a | b, [F.col(f"`{k}`").isNull() for k in keys])
        aggs.append(F.count(F.when(any_null, F.lit(1))).alias("_nulls"))
    if check_unique and not by_codes:
        aggs.append(F.countDistinct(*[F.col(f"`{k}`") for k in keys]).alias("_distinct"))
    rows_in = source.coalesce(1) if single_task else source  # one partition: no exchange is planned
    size = arrow_row_bytes(source.schema) if measure else None
    extra = [F.expr(size).alias("_size")] if size else []
    aggs += [F.sum("_size").alias("_bytes")] if size else []
    grouped = rows_in.select(*[F.col(f"`{k}`") for k in keys], *part_cols, *extra)
    result = (grouped.groupBy(*[f"_p{i}" for i in range(len(part_cols))]) if part_cols else grouped).agg(
        *aggs
    )
    by_partition: dict[tuple[object, ...], dict[str, Bounds]] = {}
    counts: dict[tuple[object, ...], int] = {}
    texts: dict[tuple[object, ...], tuple[str | None, ...]] = {}
    rows = nulls = distinct = measured = 0
    for row in result.collect():
        rows += int(row["_rows"])
        measured += int(row["_bytes"] or 0) if size else 0
        if check_unique:  # the partition is a function of the key: distinct counts add up
            nulls += int(row["_nulls"])
            distinct += 0 if by_codes else int(row["_distinct"])
        bounds: dict[str, Bounds] = {
            k: (row[f"_lo{i}"], row[f"_hi{i}"]) if row[f"_lo{i}"] is not None else None
            for i, k in enumerate(keys)
        }
        if derivable:
            part = _partition(row, spec, schema)
            by_partition[part], counts[part] = bounds, int(row["_rows"])
            texts[part] = tuple(row[f"_p{i}"] for i in range(len(part_cols)))
        else:
            by_partition = {p: bounds for p in target_partitions}
    ranges = KeyRanges(by_partition, spec.spec_id) if derivable else KeyRanges(by_partition)
    codes = None
    if by_codes:
        distinct, codes = _distinct_keys(source, keys, schema, ranges, rows, nulls)
    unique = (nulls == 0 and distinct == rows) if check_unique else None
    total = measured if size else None
    if not derivable:
        return SourceKeys(rows, ranges, keys_unique=unique, bytes=total, codes=codes)
    return SourceKeys(rows, ranges, counts, texts, unique, total, codes)


def _distinct_keys(
    source: DataFrame, keys: Sequence[str], schema: Schema, ranges: KeyRanges, rows: int, nulls: int
) -> tuple[int, KeyCodes | None]:
    """The number of distinct keys of a source of ``rows`` rows, ``nulls`` of them with a NULL key
    (then the count is moot: -1), from their collected codes where ``key_codes.collectable``, else
    counted by Spark; and the codes, when collected."""
    if nulls or not rows:
        return (-1 if nulls else 0), None
    codec = batch_codec(schema, keys, ranges) if key_codes.collectable(rows) else None
    if codec is None:
        return int(source.agg(F.countDistinct(*[F.col(f"`{k}`") for k in keys])).collect()[0][0]), None
    codes = key_codes.collect_codes(source, schema, codec)
    return (len(codes.codes) if codes.rows == rows else -1), codes


def _partition(row: Row, spec: PartitionSpec, schema: Schema) -> tuple[object, ...]:
    values = []
    for i, f in enumerate(spec.fields):
        text = row[f"_p{i}"]
        result_type = f.transform.result_type(schema.find_field(f.source_id).field_type)
        values.append(None if text is None else parse_value(text, result_type))
    return tuple(values)


def file_keys(files: Sequence[LiveFile], keys: Sequence[str], schema: Schema) -> list[FileKeys]:
    """Partition and decoded key bounds of data files, from manifest metrics."""
    fields = [schema.find_field(k) for k in keys]
    result = []
    for f in files:
        lower, upper = f.data_file.lower_bounds or {}, f.data_file.upper_bounds or {}
        bounds: dict[str, Bounds] = {}
        for field in fields:
            lo, hi = lower.get(field.field_id), upper.get(field.field_id)
            bounds[field.name] = (
                (from_bytes(_primitive(field.field_type), lo), from_bytes(_primitive(field.field_type), hi))
                if lo is not None and hi is not None
                else None
            )
        result.append(FileKeys(f.path, f.partition, bounds, f.spec_id))
    return result


def _primitive(t: IcebergType) -> PrimitiveType:
    assert isinstance(t, PrimitiveType), f"key column of nested type {t}"
    return t
