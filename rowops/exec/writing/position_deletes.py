"""Writing position-delete files (v2) or deletion vectors (v3) for ``(_file, _pos)`` rows through Spark.

The rows are tagged with the index of the data file they delete from (literal maps for a few files, a
broadcast for more), written one sorted Parquet file per data file, each taking that file's partition.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyiceberg.table.metadata import TableMetadata
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from rowops.exec.reading.file_reads import FILE_COL, POS_COL, file_uris
from rowops.exec.spark.types import FIELD_ID_KEY
from rowops.exec.writing.deletion_vectors import write_deletion_vectors, writes_deletion_vectors
from rowops.exec.writing.write import StagedDir, codec, counted, one_task, save
from rowops.meta.files import POSITION_DELETE_SCHEMA, LiveFile, WrittenFile

_FILE_INDEX = "data_file_index"
_LITERAL_FILES = 32  # position deletes of up to this many data files find their file in literal maps


def write_position_deletes(
    spark: SparkSession,
    deletes: DataFrame,
    data_files: Sequence[LiveFile],
    metadata: TableMetadata,
    directory: StagedDir,
    rows: int | None = None,
) -> list[tuple[WrittenFile, LiveFile]]:
    """Write ``(_file, _pos)`` rows as position-delete files: one sorted file per data file.

    ``file_path`` is written exactly as the data file's path is recorded in its manifest, and each
    delete file takes the partition (and partition spec) of the one data file it references.

    On a format-v3 table they are deletion vectors instead (``exec/writing/deletion_vectors.py``): one per
    data file, in Puffin files written by the executors.

    Args:
        rows: the exact number of ``deletes`` rows that reference ``data_files``, when known: checked
            against the files written, and up to ``write.SMALL_WRITE_ROWS`` are written by one task.

    Returns:
        Each written delete file with the data file it references.
    """
    if writes_deletion_vectors(metadata.format_version):
        return write_deletion_vectors(
            spark, deletes, data_files, directory.key, directory.io, FILE_COL, POS_COL
        )
    path_field, pos_field = POSITION_DELETE_SCHEMA.fields
    tagged = _tagged(spark, deletes, data_files)
    selected = tagged.select(
        F.coalesce("manifest_path", F.lit("")).alias(
            path_field.name, metadata={FIELD_ID_KEY: path_field.field_id}
        ),
        F.coalesce(POS_COL, F.lit(-1)).alias(pos_field.name, metadata={FIELD_ID_KEY: pos_field.field_id}),
        F.col(_FILE_INDEX),
    )
    placed = selected.coalesce(1) if one_task(rows) else selected.repartition(_FILE_INDEX)
    distributed, count = counted(placed, rows)
    sorted_rows = distributed.sortWithinPartitions(_FILE_INDEX, "pos")
    configure = lambda w: w.option("compression", codec(metadata)).partitionBy(_FILE_INDEX)  # noqa: E731
    written = []
    for path, rel, footer in save(sorted_rows, count, configure, directory):
        data_file = data_files[int(rel.split("=", 1)[1])]
        written.append(
            (WrittenFile(path, data_file.partition, spec_id=data_file.spec_id, footer=footer), data_file)
        )
    return written


def _tagged(spark: SparkSession, deletes: DataFrame, data_files: Sequence[LiveFile]) -> DataFrame:
    """The ``deletes`` rows of ``data_files`` with their file's index and manifest path.

    Up to :data:`_LITERAL_FILES` files are looked up in literal maps (no job); more in a broadcast
    of one row per file (a job that ships it).
    """
    uris = file_uris(spark, data_files)
    if len(data_files) > _LITERAL_FILES:
        mapping = spark.createDataFrame(
            [(uris[f.path], f.data_file.file_path, i) for i, f in enumerate(data_files)],
            f"{FILE_COL} string, manifest_path string, {_FILE_INDEX} int",
        )
        return deletes.join(F.broadcast(mapping), FILE_COL, "inner")
    pairs = [c for i, f in enumerate(data_files) for c in (F.lit(uris[f.path]), F.lit(i))]
    index = F.create_map(*pairs)[F.col(FILE_COL)]
    paths = F.array(*[F.lit(f.data_file.file_path) for f in data_files])
    tagged = deletes.select(POS_COL, index.alias(_FILE_INDEX)).filter(F.col(_FILE_INDEX).isNotNull())
    return tagged.select(POS_COL, _FILE_INDEX, paths[F.col(_FILE_INDEX)].alias("manifest_path"))
