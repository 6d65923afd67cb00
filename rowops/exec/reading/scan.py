"""Reading an Iceberg snapshot with Spark: data files by field id, deletes applied.

Rows carry their identity as ``_file`` and ``_pos`` (``exec/reading/file_reads.py``). Deletes follow Iceberg's
sequence-number rules:
  * a position delete applies to rows of the file it names (it is always written after that file,
    so its data sequence number is >= the file's);
  * an equality delete applies to rows of older data files with the same key, in its partition
    (``exec/reading/equality_deletes.py``). Data files no equality delete applies to skip the join, and only
    the deletes that apply to some joined file are read.

Which deletes apply to which files is looked up in one :class:`rowops.meta.delete_index.DeleteIndex`
per snapshot (linear in files and deletes, never their product).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from pyiceberg.io import FileIO
from pyiceberg.schema import Schema
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from rowops.exec.reading import driver_deletes, position_keys
from rowops.exec.reading.equality_deletes import apply_equality_deletes
from rowops.exec.reading.file_reads import (
    FILE_COL,
    POS_COL,
    broadcast_if_fits,
    file_uris,
    read_as_stored,
    read_data_files,
    read_parquet,
)
from rowops.exec.reading.lineage import carries_lineage, resolve_lineage
from rowops.exec.spark.compat import select_columns
from rowops.exec.spark.listing import spark_name
from rowops.exec.spark.literal_frames import literal_frame
from rowops.exec.spark.types import to_spark_schema
from rowops.exec.writing.deletion_vectors import deletion_vector_positions
from rowops.meta.delete_index import DeleteIndex, delete_index
from rowops.meta.files import POSITION_DELETE_SCHEMA, LiveFile, TableFiles
from rowops.meta.lineage import with_lineage
from rowops.meta.paths import spark_uri
from rowops.meta.v3 import is_deletion_vector

_PATH = "_path"
_DEL_FILE, _DEL_POS = "_delete_file", "_delete_pos"


def position_deletes(
    spark: SparkSession, deletes: Sequence[LiveFile], data_files: Sequence[LiveFile]
) -> DataFrame | None:
    """The ``(_file, _pos)`` pairs of ``deletes``, for anti-joins with rows of ``data_files``.

    Deletion vectors (v3) are read on executors from their Puffin files (``exec/writing/deletion_vectors.py``),
    position delete files as Parquet.

    When every data file has a plain local path, Spark's name of a file is ``file:`` + path, computed
    per delete row; otherwise delete rows are joined with a table of Spark's names (measured about 2x
    slower on a read, as that join becomes a separate stage).
    """
    if not deletes or not data_files:
        return None
    vectors = [d for d in deletes if is_deletion_vector(d.data_file)]
    dv_rows = deletion_vector_positions(spark, vectors, data_files, FILE_COL, POS_COL)
    files = [d for d in deletes if not is_deletion_vector(d.data_file)]
    if not files:
        return dv_rows
    rows = _position_delete_files(spark, files, data_files)
    return rows if dv_rows is None else rows.unionByName(dv_rows)


def _position_delete_files(
    spark: SparkSession, deletes: Sequence[LiveFile], data_files: Sequence[LiveFile]
) -> DataFrame:
    """The ``(_file, _pos)`` pairs of position delete files (Parquet)."""
    uris = file_uris(spark, data_files)
    df = read_parquet(spark, to_spark_schema(POSITION_DELETE_SCHEMA), [f.path for f in deletes])
    key = F.regexp_replace(F.regexp_replace("file_path", r"^file:(//)?(?=/)", ""), r"^s3[an]?://", "s3://")
    rows = df.select(key.alias(_PATH), F.col("pos").alias(POS_COL))
    if all(uri == spark_uri(path) for path, uri in uris.items()):
        local = F.col(_PATH).startswith("/")
        name = F.when(local, F.concat(F.lit("file:"), F.col(_PATH))).otherwise(
            F.regexp_replace(_PATH, r"^s3://", "s3a://")
        )
        return rows.select(name.alias(FILE_COL), POS_COL)
    names = literal_frame(spark, list(uris.items()), [(_PATH, "string"), (FILE_COL, "string")])
    return rows.join(F.broadcast(names), _PATH, "inner").select(FILE_COL, POS_COL)


def _position_bytes(deletes: Sequence[LiveFile], data_files: Sequence[LiveFile]) -> int:
    """A generous in-memory size of position delete rows: the longest file name and a position each."""
    longest = max((len(spark_name(f.path).encode()) for f in data_files), default=0)
    return sum(d.record_count for d in deletes) * (32 + longest)


def scan(
    spark: SparkSession,
    schema: Schema,
    files: TableFiles,
    data_files: Sequence[LiveFile] | None = None,
    row_ids: bool = False,
    io: FileIO | None = None,
) -> DataFrame:
    """The live rows of a snapshot (or of a subset of its data files), deletes applied.

    Data files no delete applies to are read plainly (``_file``/``_pos`` only when ``row_ids``) and
    never meet a join; the others go through the equality and position deletes that apply to them.

    Args:
        spark: the session.
        schema: the table schema to read with.
        files: the live files of the snapshot.
        data_files: restrict the scan to these data files (default: all).
        row_ids: keep the ``_file`` and ``_pos`` columns; on a format v3 table also each row's
            ``_row_id`` and ``_last_updated_sequence_number`` (``exec/lineage.py``).
        io: the lake's file system, to read a few position deletes on the driver
            (``exec/reading/driver_deletes.py``); None: always on executors.
    """
    targets = list(files.data if data_files is None else data_files)
    lineage = row_ids and carries_lineage(targets)
    schema = with_lineage(schema) if lineage else schema
    index = delete_index(files)
    dirty = [f for f in targets if index.deletes_on(f)]
    touched = {f.path for f in dirty}
    clean = [f for f in targets if f.path not in touched]
    columns = [f.name for f in schema.fields] + ([FILE_COL, POS_COL] if row_ids else [])
    parts = []
    if clean or not dirty:
        plain = (
            read_data_files(spark, schema, clean)
            if row_ids or not clean
            else read_as_stored(spark, schema, clean)
        )
        parts.append(select_columns(plain, columns))
    if dirty:
        parts.append(select_columns(_deleted(spark, schema, index, dirty, row_ids, io), columns))
    rows = functools.reduce(DataFrame.unionByName, parts)
    return resolve_lineage(spark, rows, targets) if lineage else rows


def _deleted(
    spark: SparkSession,
    schema: Schema,
    index: DeleteIndex,
    dirty: Sequence[LiveFile],
    row_ids: bool,
    io: FileIO | None,
) -> DataFrame:
    """Rows of data files some delete applies to, those deletes applied; with ids when ``row_ids`` or
    position deletes need them. Files under position deletes only are filtered by a row key
    (``exec/reading/position_keys.py``), their keys read by the driver (``driver_deletes.py``) or, past
    its bounds, by executors; files under equality deletes are anti-joined by name and position."""
    keyed = [f for f in dirty if index.equality_deletes_on(f)]
    unkeyed = [f for f in dirty if not index.equality_deletes_on(f)]
    ids = [F.col("_metadata.file_path").alias(FILE_COL), F.col("_metadata.row_index").alias(POS_COL)]
    by_position = (
        _without_positions(spark, schema, index, unkeyed, ids if row_ids else [], io) if unkeyed else None
    )
    parts = [] if by_position is None else [by_position]
    if keyed or by_position is None:
        named = unkeyed if by_position is None else []
        parts.append(_deleted_by_name(spark, schema, index, keyed, named, row_ids))
    columns = [f.name for f in schema.fields] + ([FILE_COL, POS_COL] if row_ids else [])
    return functools.reduce(DataFrame.unionByName, [select_columns(p, columns) for p in parts])


def _without_positions(
    spark: SparkSession,
    schema: Schema,
    index: DeleteIndex,
    files: Sequence[LiveFile],
    ids: Sequence[Column],
    io: FileIO | None,
) -> DataFrame | None:
    """Rows of ``files`` (under position deletes only; ``schema``'s columns, then ``ids``) without those
    their deletes remove, read by the driver (``driver_deletes.py``) or, past its bounds, keyed by
    executors (``position_keys.py``); None when their rows cannot be keyed that way."""
    deletes = index.position_deletes_applying(files)
    deleted = driver_deletes.read_masks(io, files, index, deletes)
    rows = None if deleted is None else driver_deletes.read_without(spark, schema, files, deleted, ids)
    if rows is not None:
        return rows
    plan = position_keys.plan_keys(files, deleted=sum(d.record_count for d in deletes))
    if plan is None:
        return None
    keyed = read_as_stored(spark, schema, plan.files, [*ids, position_keys.row_key(plan)])
    return _drop_by_key(spark, index, plan, deletes, keyed)


def _drop_by_key(
    spark: SparkSession,
    index: DeleteIndex,
    plan: position_keys.KeyPlan,
    deletes: Sequence[LiveFile],
    rows: DataFrame,
) -> DataFrame:
    """``rows`` of the plan's files (with their key) without those ``deletes`` remove, anti-joined with
    the keys read on executors."""
    keys = position_keys.deleted_keys(spark, deletes, position_keys.delete_sources(plan, index))
    size = sum(d.record_count for d in deletes) * 16
    return position_keys.drop_deleted(rows, broadcast_if_fits(spark, keys, size))


def _deleted_by_name(
    spark: SparkSession,
    schema: Schema,
    index: DeleteIndex,
    keyed: Sequence[LiveFile],
    unkeyed: Sequence[LiveFile],
    row_ids: bool,
) -> DataFrame:
    """Rows of ``keyed`` (under equality deletes) and ``unkeyed`` files, deletes applied: position
    deletes by an anti-join on each row's file name and position."""
    dirty = [*keyed, *unkeyed]
    pos_deletes = index.position_deletes_applying(dirty)
    ids = row_ids or bool(pos_deletes)
    parts = []
    if keyed:  # only files some equality delete applies to are joined with (those) keys
        eq_deletes = index.equality_deletes_applying(keyed)
        parts.append(apply_equality_deletes(spark, schema, keyed, eq_deletes, ids))
    if unkeyed:
        parts.append(read_data_files(spark, schema, unkeyed))
    rows = functools.reduce(DataFrame.unionByName, parts)
    pos = position_deletes(spark, pos_deletes, dirty)
    return (
        rows
        if pos is None
        else drop_positions(
            rows, broadcast_if_fits(spark, pos, _position_bytes(pos_deletes, dirty)), len(dirty)
        )
    )


MAX_FILES_KEYED_BY_POSITION = 64


def drop_positions(rows: DataFrame, deletes: DataFrame, files: int) -> DataFrame:
    """``rows`` without the ``(_file, _pos)`` pairs of ``deletes`` (rows of ``files`` data files).

    With at most :data:`MAX_FILES_KEYED_BY_POSITION` files under deletes of any kind the anti-join hashes
    the row position alone (a long; a position matches at most one delete row per file) and compares
    the file names in its residual condition (``>=`` and ``<=``: an ``=`` would become a hash key
    again): on SF 1's 16 base files with one micro-batch of position deletes, 1.00 s against 1.22 s
    for hashing each row's (name, position) pair. With more files (ten micro-batches, 176 files) the
    chains of equal positions cost what the saved hashing does (2.24 s against 2.29 s) and hashing
    the name into the key was slower (2.42 s): the pair is hashed there.
    """
    if files > MAX_FILES_KEYED_BY_POSITION:
        return rows.join(deletes, [FILE_COL, POS_COL], "left_anti")
    deleted = deletes.select(F.col(FILE_COL).alias(_DEL_FILE), F.col(POS_COL).alias(_DEL_POS))
    cond = (
        (rows[POS_COL] == deleted[_DEL_POS])
        & (rows[FILE_COL] >= deleted[_DEL_FILE])
        & (rows[FILE_COL] <= deleted[_DEL_FILE])
    )
    return rows.join(deleted, cond, "left_anti")
