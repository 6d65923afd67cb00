"""Writing data files and equality-delete files with Spark's Parquet writer (position deletes:
``position_deletes.py``).

Every write goes to a fresh staging directory under the table's ``data/`` folder; the caller commits
the listed files or removes the directory. Files carry Iceberg field ids; partitioned writes are
clustered by partition (hash, or range of the table's sort order) so that each partition is written by
one task, and data files are sorted by the table's sort order.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.sorting import NullOrder, SortDirection
from pyspark.sql import Column, DataFrame, DataFrameWriter, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from rowops import faults
from rowops.errors import WriteVerificationError, is_cleanable
from rowops.exec.checks.store_assignment import typed_rows
from rowops.exec.reading.lineage import has_lineage
from rowops.exec.spark.listing import DRIVER_LISTING
from rowops.exec.spark.session import session_conf
from rowops.exec.spark.stats import UNKNOWN_SIZE, plan_bytes
from rowops.exec.spark.transforms import hidden_names, parse_partition_dirs, partition_value, source_column
from rowops.exec.writing.nested_ids import add_element_ids, needs_element_ids
from rowops.meta.fileio import read_footer, remove_tree
from rowops.meta.files import WrittenFile
from rowops.meta.lineage import with_lineage
from rowops.meta.paths import from_hadoop_uri, join, normalize_path, parent, relative, spark_uri

DEFAULT_TARGET_FILE_SIZE = 128 * 1024 * 1024
# Coalescing never adds partitions, so a small write is coalesced to its estimated file count without
# asking for the current count (no public API on Spark Connect); a huge estimate (an unknown size
# multiplied by the optimizer) is no estimate.
_MAX_COALESCE = 1 << 16
# A write of at most this many rows (a count the driver knows) runs as one task: no shuffle job to
# cluster the rows by partition (the one task writes one file per partition, Spark sorts by partition).
SMALL_WRITE_ROWS = 10_000
Footer = tuple[pq.FileMetaData, int]  # a Parquet footer and its file's size in bytes


def one_task(rows: int | None) -> bool:
    """Whether a write of ``rows`` rows (None: unknown) is small enough for one task."""
    return rows is not None and rows <= SMALL_WRITE_ROWS


@dataclass(frozen=True)
class StagedDir:
    """One directory of a staging area (its key) and the FileIO that reads what Spark writes there."""

    key: str
    io: FileIO


class Staging:
    """A fresh directory for the files of one operation; removed unless a commit may reference them.

    It is the commit's listener (``catalog.tables.CommitListener``): from the moment a lake version
    that references these files is attempted, :meth:`discard` does nothing, unless the attempt is
    known to have lost.
    """

    def __init__(self, table_location: str, io: FileIO) -> None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.root = join(
            normalize_path(table_location).rstrip("/"), "data", f"{stamp}-{uuid.uuid4().hex[:8]}"
        )
        self.io = io
        self._count = itertools.count(1)  # next() is atomic: writes may run in driver threads
        self.referenced = False

    def next_dir(self, kind: str) -> StagedDir:
        return StagedDir(join(self.root, f"{kind}-{next(self._count)}"), self.io)

    def attempting(self) -> None:
        self.referenced = True

    def lost(self) -> None:
        self.referenced = False

    def discard(self) -> None:
        if not self.referenced:
            with contextlib.suppress(OSError):
                remove_tree(self.io, self.root)


@contextmanager
def staging(table_location: str, io: FileIO) -> Iterator[Staging]:
    """Yield a staging area; remove its files if the block raises before any commit may use them."""
    area = Staging(table_location, io)
    try:
        yield area
    except BaseException as exc:
        if is_cleanable(exc):
            area.discard()
        raise


def list_written(spark: SparkSession, directory: str) -> list[tuple[str, str]]:
    """(key, partition dir relative to ``directory``) of every Parquet file written there.

    Listed through Spark's file index, i.e. by the Hadoop file system Spark wrote with (not by the
    driver's own view of its disk).
    """
    reader = spark.read.schema(T.StructType([])).option("recursiveFileLookup", "true")
    with session_conf(spark, DRIVER_LISTING):  # many partition directories: no listing job
        uris = reader.parquet(spark_uri(directory)).inputFiles()
    found = []
    for uri in uris:
        path = from_hadoop_uri(uri)
        if path.endswith(".parquet"):
            found.append((path, relative(parent(path), directory) if parent(path) != directory else "."))
    if faults.active("hide-written-file"):  # a file the driver cannot see (tests)
        found = sorted(found)[1:]
    return sorted(found)


def verified_footers(io: FileIO, paths: Sequence[str], rows: int, writers: str) -> dict[str, Footer]:
    """The footers of the files at ``paths``, after checking that the driver reads in them the
    ``rows`` rows ``writers`` (e.g. "The rewrite tasks") wrote there (:class:`WriteVerificationError`
    otherwise, e.g. executors that wrote on a disk of their own)."""
    try:
        footers = read_footers(io, paths)
        on_disk = sum(int(footer.num_rows) for footer, _ in footers.values())
    except OSError:  # FileNotFoundError: written on an executor's own disk
        footers, on_disk = {}, -1
    if on_disk != rows:
        raise WriteVerificationError(
            f"{writers} wrote {rows} rows into {len(paths)} files, but the driver reads "
            f"{max(on_disk, 0)} there: executors wrote where the driver cannot read"
        )
    return footers


def read_footers(io: FileIO, paths: Sequence[str]) -> dict[str, Footer]:
    """The footer and size of each Parquet file at ``paths`` (read in parallel threads)."""
    if len(paths) <= 1:
        return {p: read_footer(io, p) for p in paths}
    with ThreadPoolExecutor(max_workers=8) as pool:
        return dict(zip(paths, pool.map(lambda p: read_footer(io, p), paths), strict=True))


def counted(df: DataFrame, rows: int | None = None) -> tuple[DataFrame, Observation | int]:
    """``df`` with its rows counted as a write runs, or ``rows`` when the caller knows the count.

    Observe after any re-distribution (a range repartition samples its input in a separate job, which
    would count rows twice) and below the final sort (which the writer's required ordering must see).
    A count the driver already knows needs no observation, whose result travels through Spark's
    listener bus after the write (up to ~0.25 s per write measured on a loaded machine).
    """
    if rows is not None:
        return df, rows
    observation = Observation()
    return df.observe(observation, F.count(F.lit(1)).alias("rows")), observation


def save(
    df: DataFrame,
    count: Observation | int,
    configure: Callable[[DataFrameWriter], DataFrameWriter],
    directory: StagedDir,
) -> list[tuple[str, str, Footer]]:
    """Write ``df`` as Parquet into ``directory``; list the files and check they hold every row.

    ``count`` (from :func:`counted`) is the number of rows Spark wrote: observed during the write, or
    known to the driver before it (the operation's one summary job counted them). The footers of the
    files found must add up to it, or :class:`WriteVerificationError` is raised before anything is
    committed (executors that wrote where the driver cannot read, e.g. workers without a shared disk).

    Returns:
        (key, partition directory, (footer, size)) of every file: the manifest entries are built from
        these footers (``meta/files.py``), so the driver reads each new file's footer once.
    """
    configure(df.write).parquet(spark_uri(directory.key))
    written = count if isinstance(count, int) else int(count.get.get("rows", 0))
    found = list_written(df.sparkSession, directory.key)
    footers = read_footers(directory.io, [path for path, _ in found])
    on_disk = sum(int(footer.num_rows) for footer, _ in footers.values())
    if on_disk != written:
        raise WriteVerificationError(
            f"Spark wrote {written} rows into {spark_uri(directory.key)}, but the {len(found)} files the "
            f"driver finds there hold {on_disk}: executors wrote where the driver cannot read"
        )
    return [(path, rel, footers[path]) for path, rel in found]


def _target_size(metadata: TableMetadata) -> int:
    return int(metadata.properties.get("write.target-file-size-bytes", DEFAULT_TARGET_FILE_SIZE))


def codec(metadata: TableMetadata) -> str:
    return metadata.properties.get("write.parquet.compression-codec", "zstd")


def write_rows(
    df: DataFrame,
    schema: Schema,
    metadata: TableMetadata,
    directory: StagedDir,
    cluster: bool = True,
    files: int | None = None,
    max_rows: int | None = None,
    sort: Sequence[Column] = (),
    rows: int | None = None,
    single_task: bool = False,
    spec: PartitionSpec | None = None,
) -> list[WrittenFile]:
    """Write rows with ``schema``'s columns, partitioned by the table's spec; list the files.

    Args:
        cluster: distribute rows by partition first (hash, or by range of the sort order when the
            table's ``write.distribution-mode`` is ``range``), so each partition is written by one
            task. Off for rewrites, whose tasks already read one partition.
        files: for unpartitioned writes, the number of files to produce.
        max_rows: split files beyond this many rows (the target file size in rows).
        sort: the order of rows within each file (the table's sort order for data files).
        rows: the exact number of rows of ``df``, when the driver knows it: the written files are
            checked against it (no count during the write), and up to :data:`SMALL_WRITE_ROWS` rows
            are written by one task, without a shuffle (one file per partition all the same).
        single_task: write in one task anyway (the caller estimates few rows).
        spec: the partition spec to write with (default: the table's current one); every source
            column of its fields must be among ``schema``'s columns.
    """
    spec = spec if spec is not None else metadata.spec()
    typed = typed_rows(df, schema)
    hidden = hidden_names(spec, metadata.schema())
    order = list(sort)
    writer_df = typed
    if hidden:
        values = [
            partition_value(f, metadata.schema()).alias(h) for f, h in zip(spec.fields, hidden, strict=True)
        ]
        writer_df = typed.select("*", *values)
    if single_task or one_task(rows):
        writer_df = writer_df.coalesce(1)
    else:
        writer_df = _distributed(writer_df, df, metadata, hidden, order, cluster, files)
    writer_df, count = counted(writer_df, rows)
    if order:  # the table's sort order within every file (partition columns first, as the writer needs)
        writer_df = writer_df.sortWithinPartitions(*[F.col(h) for h in hidden], *order)

    def configure(writer: DataFrameWriter) -> DataFrameWriter:
        writer = writer.option("compression", codec(metadata))
        if max_rows is not None:
            writer = writer.option("maxRecordsPerFile", max_rows)
        return writer.partitionBy(*hidden) if hidden else writer

    written = [
        WrittenFile(
            path,
            parse_partition_dirs(rel, spec, metadata.schema()) if hidden else (),
            spec_id=spec.spec_id,
            footer=footer,
        )
        for path, rel, footer in save(writer_df, count, configure, directory)
    ]
    if needs_element_ids(schema):  # Spark writes no ids for list elements, map keys and values
        return add_element_ids(df.sparkSession, schema, metadata.properties, directory.io, written)
    return written


def _distributed(
    writer_df: DataFrame,
    df: DataFrame,
    metadata: TableMetadata,
    hidden: Sequence[str],
    order: Sequence[Column],
    cluster: bool,
    files: int | None,
) -> DataFrame:
    """``writer_df`` distributed for the write (see :func:`write_rows`): clustered by partition, or
    cut into ``files`` (or as many as its estimated size needs) when the table is unpartitioned."""
    ranged = bool(order) and distribution_mode(metadata) == "range"
    if hidden:
        if cluster and ranged:
            return writer_df.repartitionByRange(*[F.col(h) for h in hidden], *order)
        if cluster and distribution_mode(metadata) != "none":
            return writer_df.repartition(*hidden)
        return writer_df
    if files is not None:
        return writer_df.repartitionByRange(files, *order) if ranged else writer_df.repartition(files)
    size = plan_bytes(df)
    estimate = max(1, math.ceil(size / _target_size(metadata))) if size < UNKNOWN_SIZE else None
    if cluster and ranged:  # unknown size: Spark's shuffle partitions, coalesced by AQE
        ranges = writer_df.repartitionByRange
        return ranges(estimate, *order) if estimate else ranges(*order)
    if estimate is not None and estimate <= _MAX_COALESCE:  # no tiny files from a small write
        return writer_df.coalesce(estimate)
    return writer_df


def write_data(
    df: DataFrame,
    metadata: TableMetadata,
    directory: StagedDir,
    cluster: bool = True,
    files: int | None = None,
    max_rows: int | None = None,
    rows: int | None = None,
    single_task: bool = False,
) -> list[WrittenFile]:
    """Write table rows (columns matched by name) as data files, sorted by the table's sort order;
    on a format v3 table with the rows' lineage when ``df`` has it (:func:`data_schema`).

    ``rows``, ``single_task``: see :func:`write_rows`.
    """
    sort = sort_columns(metadata)
    schema = data_schema(df, metadata)
    return write_rows(df, schema, metadata, directory, cluster, files, max_rows, sort, rows, single_task)


def data_schema(df: DataFrame, metadata: TableMetadata) -> Schema:
    """The columns data files of ``df``'s rows store: the table's, and on a format v3 table the row
    lineage columns when ``df`` carries them (rows moved or updated, ``exec/lineage.py``)."""
    if metadata.format_version >= 3 and has_lineage(df):
        return with_lineage(metadata.schema())
    return metadata.schema()


def distribution_mode(metadata: TableMetadata) -> str:
    """Iceberg's ``write.distribution-mode``: ``hash`` (default), ``range`` or ``none``."""
    return metadata.properties.get("write.distribution-mode", "hash").lower()


def sort_columns(metadata: TableMetadata) -> list[Column]:
    """The table's sort order as Spark sort expressions (identity transforms of columns and struct
    fields)."""
    columns = []
    for field in metadata.sort_order().fields:
        col = source_column(metadata.schema(), field.source_id)
        if field.direction == SortDirection.DESC:
            col = (
                col.desc_nulls_first() if field.null_order == NullOrder.NULLS_FIRST else col.desc_nulls_last()
            )
        else:
            col = col.asc_nulls_first() if field.null_order == NullOrder.NULLS_FIRST else col.asc_nulls_last()
        columns.append(col)
    return columns


def write_equality_deletes(
    df: DataFrame,
    key_names: Sequence[str],
    metadata: TableMetadata,
    directory: StagedDir,
    rows: int | None = None,
    single_task: bool = False,
    spec_id: int | None = None,
) -> list[WrittenFile]:
    """Write the key columns of ``df`` as equality-delete files, partitioned by the spec ``spec_id``
    (default: the current one) computed from the keys.

    ``rows``, ``single_task``: see :func:`write_rows`.
    """
    keys = metadata.schema().select(*key_names)
    spec = metadata.specs()[spec_id] if spec_id is not None else metadata.spec()
    return write_rows(df, keys, metadata, directory, rows=rows, single_task=single_task, spec=spec)
