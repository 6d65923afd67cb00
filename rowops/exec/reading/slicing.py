"""The source re-partitioned with the target's partition transform, and the join slices built on it.

``plan/colocation.py`` groups target partitions into slices whose source rows fit one broadcast.
Here each source row gets the index of its slice (its partition value, computed with the same Iceberg
transform as the target's files, looked up in a small literal map), the source is re-partitioned by
that index and persisted once (a source-sized shuffle), and every slice pairs a scan of its target
files with a filter of the persisted source. Filters on the slice index skip the cached batches of
other slices (Spark's in-memory partition pruning), so each broadcast reads about its own rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyiceberg.table.metadata import TableMetadata
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from rowops.exec.changes.rows import JoinSlice
from rowops.exec.reading.scan import scan
from rowops.exec.spark.compat import default_parallelism
from rowops.exec.spark.transforms import partition_value
from rowops.meta.files import LiveFile, TableFiles
from rowops.plan.colocation import JoinLayout, Partition

SLICE_COL = "_rowops_slice"
_UNSLICED = -1  # source rows of partitions without target files: they can only be inserted


def partition_key(texts: Sequence[str | None]) -> str:
    """One string per partition tuple, unambiguous (length-prefixed parts; NULL as ``-``).

    >>> partition_key(["v1", None]), partition_key(["va|b"])
    ('2:v1|-', '4:va|b')
    """
    return "|".join("-" if t is None else f"{len(t)}:{t}" for t in texts)


def _partition_key_column(texts: Sequence[Column]) -> Column:
    """:func:`partition_key` as a Spark column."""
    parts = [F.coalesce(F.concat(F.length(t).cast("string"), F.lit(":"), t), F.lit("-")) for t in texts]
    return F.concat_ws("|", *parts)


def slice_index(layout: JoinLayout, texts: Mapping[Partition, tuple[str | None, ...]]) -> dict[str, int]:
    """Partition key -> slice index; the partitions joined by a shuffle come last."""
    index = {partition_key(texts[p]): i for i, group in enumerate(layout.slices) for p in group if p in texts}
    index.update({partition_key(texts[p]): len(layout.slices) for p in layout.shuffled if p in texts})
    return index


def sliced_source(
    source: DataFrame, values: Sequence[Column], index: Mapping[str, int], slices: int
) -> DataFrame:
    """The source with its slice index, re-partitioned by it and persisted (release it after use).

    One partition per core, sorted by slice: a slice's filter then runs one short task per core and
    skips every cached batch of other slices (batch min/max pruning), instead of one task per slice.
    """
    lookup = F.create_map(*[F.lit(x) for key, i in sorted(index.items()) for x in (key, i)])
    slice_of = F.coalesce(lookup[_partition_key_column(values)], F.lit(_UNSLICED))
    tagged = source.withColumn(SLICE_COL, slice_of)
    parts = min(slices + 1, default_parallelism(source.sparkSession))
    clustered = tagged.repartition(parts, SLICE_COL).sortWithinPartitions(SLICE_COL)
    return clustered.persist(StorageLevel.MEMORY_AND_DISK)


def join_slices(
    spark: SparkSession,
    files: TableFiles,
    candidates: Sequence[LiveFile],
    layout: JoinLayout,
    source: DataFrame,
    texts: Mapping[Partition, tuple[str | None, ...]],
    metadata: TableMetadata,
) -> tuple[list[JoinSlice], DataFrame, DataFrame]:
    """The join slices of a ``partitioned`` layout and the persisted, sliced source they filter.

    Returns:
        The slices; every source row (read from the cache); the persisted DataFrame to release.
    """
    schema = metadata.schema()
    values = [partition_value(f, schema) for f in metadata.spec().fields]
    index = slice_index(layout, texts)
    tagged = sliced_source(source, values, index, len(layout.slices))
    tagged.count()  # materialize once: every slice then reads the cache (no per-slice cache stage)
    groups = [(set(g), True) for g in layout.slices] + (
        [(set(layout.shuffled), False)] if layout.shuffled else []
    )
    slices = []
    for i, (partitions, broadcast) in enumerate(groups):
        mine = [f for f in candidates if f.partition in partitions]
        target = scan(spark, schema, files, data_files=mine, row_ids=True)
        rows = tagged.filter(F.col(SLICE_COL) == i).drop(SLICE_COL)
        slices.append(JoinSlice(target, rows, broadcast))
    return slices, tagged.drop(SLICE_COL), tagged
