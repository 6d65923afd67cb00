"""Deletion vectors of format-v3 tables, written and read on executors (Puffin files, ``meta/puffin.py``).

Writing: the ``(_file, _pos)`` rows to delete are tagged with the index of their data file (a
broadcast of one row per target file), hash-partitioned by it (a data file's positions meet in one
task) and each task builds one Roaring bitmap per data file in ``mapInArrow`` and writes it as a Puffin
file of one blob through the lake's FileIO (pyarrow; S3 too). One Puffin file per vector (Iceberg Java
packs a task's vectors into one file, which rowops reads and replaces vector by vector: a vector is
named by its Puffin file and its data file, ``LiveFile.path``). Only one small row per vector
(file, offset, length, cardinality) reaches the driver, which builds the manifest entries from them:
table rows never pass through the driver. Bitmaps de-duplicate positions, so a new vector is simply
built from the union of the previous vector's positions and the new ones.

Reading: the Puffin files are read by Spark (``binaryFile``, Hadoop's file system, as data files
are); each task cuts the blobs it needs by offset and length and emits their positions as
``(_file, _pos)`` rows with Spark's name of the data file, for the scan's anti-join.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
from pyiceberg.io import FileIO
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.typedef import Record
from pyroaring import BitMap64
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from rowops.errors import WriteVerificationError
from rowops.exec.reading.position_keys import vector_positions
from rowops.exec.spark.compat import default_parallelism
from rowops.exec.spark.listing import DRIVER_LISTING, spark_name
from rowops.exec.spark.literal_frames import literal_frame
from rowops.exec.spark.session import session_conf
from rowops.meta.fileio import make_io
from rowops.meta.files import LiveFile, WrittenFile
from rowops.meta.paths import join, normalize_path, spark_uri, to_uri
from rowops.meta.puffin import deserialize_dv, puffin_file
from rowops.meta.v3 import V3, content_range

_INDEX = "_dv_file_index"
_WRITTEN = "file_index int, path string, offset long, length long, cardinality long, size long"
Task = Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def _write_task(directory: str, options: dict[str, str], paths: Sequence[str]) -> Task:
    """mapInArrow function: one DV per data file index met, each in its own Puffin file; one row per DV."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        vectors: dict[int, BitMap64] = defaultdict(BitMap64)
        for batch in batches:
            indexes = batch.column(0).to_numpy(zero_copy_only=False)
            positions = batch.column(1).to_numpy(zero_copy_only=False).astype(np.uint64)
            for i in np.unique(indexes):
                vectors[int(i)].update(positions[indexes == i])
        io, rows = make_io(options), []
        for i in sorted(vectors):
            data, (ref,) = puffin_file([(paths[i], vectors[i])])
            path = join(directory, f"dv-{uuid.uuid4().hex}.puffin")
            with io.new_output(path).create(overwrite=False) as out:
                out.write(data)
            rows.append((i, path, ref.offset, ref.length, ref.cardinality, len(data)))
        if rows:
            columns = list(zip(*rows, strict=True))
            yield pa.RecordBatch.from_arrays(
                [pa.array(columns[0], pa.int32()), pa.array(columns[1], pa.string())]
                + [pa.array(c, pa.int64()) for c in columns[2:]],
                ["file_index", "path", "offset", "length", "cardinality", "size"],
            )

    return run


def write_deletion_vectors(
    spark: SparkSession,
    deletes: DataFrame,
    data_files: Sequence[LiveFile],
    directory: str,
    io: FileIO,
    file_col: str,
    pos_col: str,
) -> list[tuple[WrittenFile, LiveFile]]:
    """Write the ``(file_col, pos_col)`` rows of ``deletes`` as one deletion vector per data file.

    Returns:
        Each written vector (a ``WrittenFile`` carrying its manifest entry) with its data file.
    """
    mapping = literal_frame(
        spark,
        [(spark_name(f.path), i) for i, f in enumerate(data_files)],
        [(file_col, "string"), (_INDEX, "int")],
    )
    rows = deletes.join(F.broadcast(mapping), file_col, "inner").select(_INDEX, F.col(pos_col).cast("long"))
    tasks = max(1, min(len(data_files), default_parallelism(spark)))
    paths = [f.data_file.file_path for f in data_files]
    task = _write_task(directory, dict(io.properties), paths)
    written = rows.repartition(tasks, _INDEX).mapInArrow(task, _WRITTEN).collect()
    targets = [data_files[int(r["file_index"])] for r in written]
    found = [
        (t, r["path"], r["offset"], r["length"], r["cardinality"], r["size"])
        for t, r in zip(targets, written, strict=True)
    ]
    return list(zip(verified_vectors(io, found), targets, strict=True))


Vector = tuple[LiveFile, str, int, int, int, int]  # data file, Puffin file, offset, length, cardinality, size


def verified_vectors(io: FileIO, vectors: Sequence[Vector]) -> list[WrittenFile]:
    """The deletion vectors executors wrote, with their manifest entries, after checking that the
    driver reads each Puffin file at its written size (shared storage)."""
    sizes = {path: int(size) for _, path, _, _, _, size in vectors}
    for path, size in sizes.items():
        if len(io.new_input(path)) != size:
            raise WriteVerificationError(
                f"The deletion vector file {path} the executors wrote is not readable"
            )
    return [
        WrittenFile(
            normalize_path(path),
            target.partition,
            dv_entry(target, path, int(offset), int(length), int(cardinality), sizes),
        )
        for target, path, offset, length, cardinality, _ in vectors
    ]


def dv_entry(
    target: LiveFile, path: str, offset: int, length: int, cardinality: int, sizes: dict[str, int]
) -> DataFile:
    """The manifest entry of the deletion vector of ``target`` at ``offset``/``length`` in the Puffin
    file ``path`` (of ``sizes[path]`` bytes)."""
    entry = DataFile.from_args(
        _table_format_version=V3,
        content=DataFileContent.POSITION_DELETES,
        file_path=to_uri(path),
        file_format=FileFormat.PUFFIN,
        partition=Record(*target.partition),
        record_count=cardinality,
        file_size_in_bytes=sizes[path],
        referenced_data_file=target.data_file.file_path,
        content_offset=offset,
        content_size_in_bytes=length,
    )
    entry.spec_id = target.spec_id
    return entry


def _read_task(blobs: dict[str, list[tuple[int, int, str]]]) -> Task:
    """mapInArrow function over ``binaryFile`` rows: the positions of the blobs each file holds."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for name, content in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
                for offset, length, data_name in blobs.get(name, ()):
                    positions = vector_positions(deserialize_dv(content[offset : offset + length]))
                    yield pa.RecordBatch.from_arrays(
                        [pa.array([data_name] * len(positions), pa.string()), pa.array(positions)],
                        ["_file", "_pos"],
                    )

    return run


def deletion_vector_positions(
    spark: SparkSession, dvs: Sequence[LiveFile], data_files: Sequence[LiveFile], file_col: str, pos_col: str
) -> DataFrame | None:
    """The ``(file_col, pos_col)`` rows of the deletion vectors in ``dvs`` of ``data_files`` (Spark's
    names of the data files), read on executors."""
    wanted = {f.path for f in data_files}
    blobs: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for d in dvs:
        ref, where = d.referenced_file, content_range(d.data_file)
        if ref in wanted and where is not None:
            blobs[spark_name(d.file_key)].append((where[0], where[1], spark_name(ref)))
    if not blobs:
        return None
    keys = sorted({d.file_key for d in dvs if spark_name(d.file_key) in blobs})
    with session_conf(spark, DRIVER_LISTING):
        files = spark.read.format("binaryFile").load([spark_uri(k) for k in keys]).select("path", "content")
    rows = files.mapInArrow(_read_task(dict(blobs)), "_file string, _pos long")
    return rows.select(F.col("_file").alias(file_col), F.col("_pos").alias(pos_col))


def writes_deletion_vectors(format_version: int) -> bool:
    """Position deletes of a format-v3 table are deletion vectors (the spec forbids new position
    delete files there)."""
    return format_version >= V3
