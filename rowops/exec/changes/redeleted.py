"""The rows of data files whose deletes changed between two states of a table, found by position.

A data file live in both states keeps its rows; only which of its positions are deleted can differ
(position deletes, deletion vectors, equality deletes). So the rows that changed are those at the
positions deleted in one state and not in the other:
  * deleted ``after`` and not ``before``: the commit deleted them (sign -1);
  * deleted ``before`` and not ``after``: a rollback brought them back (sign +1).

The positions come from the delete files (and the key columns of the data files, for equality
deletes); the data files are then read once, without deletes, and only the rows at those positions
kept (a broadcast join when the positions fit). The first equality deletes on files nothing deleted
from before (an upsert's) skip the positions: the files are read once, whole, and probed with the
keys. Equality deletes scoped by partition
(``exec/reading/equality_deletes.needs_partition_scope``) are not turned into positions: files under
them are diffed by two scans instead (:func:`scanned_changes`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from pyiceberg.schema import Schema
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from rowops.exec.reading.equality_deletes import (
    equality_deleted_positions,
    equality_deleted_rows,
    needs_partition_scope,
)
from rowops.exec.reading.file_reads import FILE_COL, POS_COL, broadcast_if_fits, read_data_files
from rowops.exec.reading.lineage import carries_lineage, resolve_lineage
from rowops.exec.reading.scan import position_deletes, scan
from rowops.exec.spark.listing import spark_name
from rowops.meta.delete_index import DeleteIndex, delete_index
from rowops.meta.files import LiveFile, TableFiles
from rowops.meta.lineage import with_lineage

SIGN = "_feed_sign"


def redeleted_changes(
    spark: SparkSession,
    schema: Schema,
    before: TableFiles,
    after: TableFiles,
    files: Sequence[LiveFile],
    row_ids: bool = False,
) -> DataFrame | None:
    """The rows of ``files`` (data files live in both states) deleted or brought back from ``before``
    to ``after``, with ``SIGN`` (-1 / +1), ``_file`` and ``_pos`` (and v3 lineage when ``row_ids``);
    None when ``files`` is empty."""
    if not files:
        return None
    old, new = delete_index(before), delete_index(after)
    scoped = {f.path for f in files if _scoped(old, f) or _scoped(new, f)}
    by_position = [f for f in files if f.path not in scoped]
    if _scoped_together(old, by_position) or _scoped_together(new, by_position):  # mixed specs
        scoped, by_position = {f.path for f in files}, []
    parts = []
    if by_position:
        parts.append(_positioned_changes(spark, schema, old, new, by_position, row_ids))
    if scoped:
        parts.append(scanned_changes(spark, schema, before, after, [f for f in files if f.path in scoped]))
    return functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), parts)


def _scoped(index: DeleteIndex, f: LiveFile) -> bool:
    return needs_partition_scope([f], index.equality_deletes_of(f))


def _scoped_together(index: DeleteIndex, files: Sequence[LiveFile]) -> bool:
    return bool(files) and needs_partition_scope(files, index.equality_deletes_applying(files))


def _positioned_changes(
    spark: SparkSession,
    schema: Schema,
    old: DeleteIndex,
    new: DeleteIndex,
    files: Sequence[LiveFile],
    row_ids: bool,
) -> DataFrame:
    if not row_ids and _first_equality_deletes(old, new, files):
        return _equality_deleted(spark, schema, new, files)
    deleted_before = _deleted_positions(spark, schema, old, files)
    deleted_after = _deleted_positions(spark, schema, new, files)
    signed = []
    if deleted_after is not None:
        gone = deleted_after if deleted_before is None else deleted_after.subtract(deleted_before)
        signed.append(gone.distinct().withColumn(SIGN, F.lit(-1)))
    if deleted_before is not None:
        back = deleted_before if deleted_after is None else deleted_before.subtract(deleted_after)
        signed.append(back.distinct().withColumn(SIGN, F.lit(1)))
    positions = functools.reduce(DataFrame.unionByName, signed)
    lineage = row_ids and carries_lineage(files)
    rows = read_data_files(spark, with_lineage(schema) if lineage else schema, files)
    size = _position_bytes(old, new, files)
    changed = rows.join(broadcast_if_fits(spark, positions, size), [FILE_COL, POS_COL], "inner")
    return resolve_lineage(spark, changed, files) if lineage else changed


def _first_equality_deletes(old: DeleteIndex, new: DeleteIndex, files: Sequence[LiveFile]) -> bool:
    """No delete applied to ``files`` before, and only equality deletes do after (an upsert's)."""
    return not old.deletes_applying(files) and not new.position_deletes_applying(files)


def _equality_deleted(
    spark: SparkSession, schema: Schema, new: DeleteIndex, files: Sequence[LiveFile]
) -> DataFrame:
    """The rows the equality deletes of ``new`` remove from ``files`` (nothing deleted them before):
    the data files read once, whole, and probed with the keys; no positions, no second read."""
    rows = equality_deleted_rows(spark, schema, new, files, whole=True)
    assert rows is not None, "only files some equality delete applies to are re-deleted here"
    key_sets = {tuple(d.equality_ids) for d in new.equality_deletes_applying(files)}
    unique = rows if len(key_sets) == 1 else rows.dropDuplicates([FILE_COL, POS_COL])  # matched twice
    return unique.withColumn(SIGN, F.lit(-1))


def _deleted_positions(
    spark: SparkSession, schema: Schema, index: DeleteIndex, files: Sequence[LiveFile]
) -> DataFrame | None:
    """``(_file, _pos)`` of every row of ``files`` a delete of ``index`` removes (None: none do)."""
    parts = [
        position_deletes(spark, index.position_deletes_applying(files), files),
        equality_deleted_positions(spark, schema, index, files),
    ]
    found = [p for p in parts if p is not None]
    return functools.reduce(DataFrame.unionByName, found) if found else None


def _position_bytes(old: DeleteIndex, new: DeleteIndex, files: Sequence[LiveFile]) -> int:
    """A generous in-memory size of the changed positions: every delete row of both states."""
    longest = max((len(spark_name(f.path).encode()) for f in files), default=0)
    rows = sum(d.record_count for index in (old, new) for d in index.deletes_applying(files))
    return rows * (40 + longest)


def scanned_changes(
    spark: SparkSession, schema: Schema, before: TableFiles, after: TableFiles, files: Sequence[LiveFile]
) -> DataFrame:
    """The changed rows of ``files`` by two scans: rows live in one state and not in the other."""
    live_before = scan(spark, schema, before, files, row_ids=True)
    after_by_path = {f.path: f for f in after.data}
    live_after = scan(spark, schema, after, [after_by_path[f.path] for f in files], row_ids=True)
    ids = [FILE_COL, POS_COL]
    gone = live_before.join(live_after.select(*ids), ids, "left_anti").withColumn(SIGN, F.lit(-1))
    back = live_after.join(live_before.select(*ids), ids, "left_anti").withColumn(SIGN, F.lit(1))
    return gone.unionByName(back)
