"""Position deletes read by the driver and applied to each row: a few as a filter on its key, more
as bit masks of 64-row blocks (``block_masks.py``). No Python tasks read them.

Otherwise a read of files under position deletes runs a Spark job whose Python tasks read the delete
files (``position_keys.deleted_keys``), then anti-joins every row with their keys. On the paper's Case 1
(SF 1, one streaming write: 400 positions over 16 files) that job, the broadcast and the join took
0.5-0.9 s of a 1.6-1.9 s read whose scan alone takes 0.7 s; after ten Case 2 micro-batches (300,645
positions in 160 files) the keys' job alone took 0.47-0.51 s.

Up to :data:`MAX_POSITIONS` positions in :data:`MAX_BYTES` of delete files (both counted in the
manifests, before anything is read) are read here instead, in a few threads through the lake's file
system: deletion vector blobs by their byte range, position delete files whole. Delete files never
change, so each one's rows are kept for the process, as masks of 64-row blocks (``delete_positions.py``,
``row_masks.py``): a read then only combines the masks of each data file, in time linear in blocks.
Those are the rows a broadcast brings to the driver anyway, bounded; the commit path reads deletion
vectors on the driver the same way (``commit/row_conflicts.py``). Then

* up to :data:`MAX_LISTED` positions, each row's key (``position_keys.row_key``) is filtered by
  ``NOT key IN (...)``: no job and no join. Spark keeps a list of more than ten values as a hash set
  passed to the generated code by reference (:data:`position_keys.IN_SET`), so the next read of a
  growing table reuses the compiled scan; it parses the list as SQL text, about 0.1 s for 400 keys and
  0.3 s for 4,000, hence the bound;
* more are anti-joined as block masks (``block_masks.py``).

The bound on positions is the driver's memory while a delete file is parsed (8 bytes a position,
masks at most 16 bytes a 64-row block). Time is not: after ten SF 10 Case 3 batches (18.0 million
positions) a first read of every delete file took 4.2 s and later reads 0.3-0.5 s to
build, their scan then 6.3-7.6 s (Iceberg's read: 6.5 s); past the bound, executors' keys took 36 s.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from pyiceberg.io import FileIO
from pyiceberg.schema import Schema
from pyspark.sql import Column, DataFrame, SparkSession

from rowops.exec.reading import block_masks, delete_positions, position_keys
from rowops.exec.reading.file_reads import read_as_stored
from rowops.exec.reading.position_keys import IN_SET, KEY, span_keys
from rowops.exec.reading.row_masks import RowMasks, clipped, combined, positions_of
from rowops.meta.delete_index import DeleteIndex
from rowops.meta.files import LiveFile
from rowops.meta.paths import normalize_path
from rowops.meta.v3 import content_range, is_deletion_vector

MAX_LISTED = 4096
MAX_POSITIONS = 1 << 25
MAX_BYTES = 256 << 20
READ_THREADS = 8
# data file path -> the masks of its deleted rows: within its rows, not empty
DeletedRows = dict[str, RowMasks]


def read_masks(
    io: FileIO | None, files: Sequence[LiveFile], index: DeleteIndex, deletes: Sequence[LiveFile]
) -> DeletedRows | None:
    """The rows ``deletes`` remove from ``files`` (under position deletes only); None without ``io``,
    or when the deletes hold more than :data:`MAX_POSITIONS` positions or :data:`MAX_BYTES` bytes."""
    if io is None or not deletes or sum(d.record_count for d in deletes) > MAX_POSITIONS:
        return None
    if sum(_bytes(d) for d in deletes) > MAX_BYTES:
        return None
    reads = [functools.partial(_masks_of, io, f, index.position_deletes_of(f)) for f in files]
    with ThreadPoolExecutor(min(READ_THREADS, max(1, len(reads)))) as pool:
        found = list(pool.map(lambda read: read(), reads))
    return {f.path: m for f, m in zip(files, found, strict=True) if len(m)}


def read_without(
    spark: SparkSession,
    schema: Schema,
    files: Sequence[LiveFile],
    deleted: DeletedRows,
    ids: Sequence[Column],
) -> DataFrame | None:
    """The rows of ``files`` (``schema``'s columns, then ``ids``) but those ``deleted``; None when the
    files' rows cannot be keyed."""
    listed = sum(len(m) for m in deleted.values()) <= MAX_LISTED  # at least a row per block
    if listed and sum(m.count() for m in deleted.values()) <= MAX_LISTED:
        plan = position_keys.plan_keys(files, min_files=1)
        if plan is None:
            return None
        positions = {path: positions_of(m) for path, m in deleted.items()}
        keys = [span_keys(positions[f.path], plan.span(f)) for f in plan.files if f.path in positions]
        rows = read_as_stored(spark, schema, plan.files, [*ids, position_keys.row_key(plan)])
        return drop_listed(rows, np.concatenate(keys) if keys else np.empty(0, np.int64))
    blocks = block_masks.plan_blocks(files)
    if blocks is None:
        return None
    rows = read_as_stored(spark, schema, blocks.files, [*ids, *block_masks.row_columns(blocks)])
    return block_masks.drop_masked(spark, rows, blocks, *block_masks.block_masks(blocks, deleted))


def drop_listed(rows: DataFrame, keys: np.ndarray) -> DataFrame:
    """``rows`` (with :data:`KEY`) without those whose key is in ``keys``, the key column dropped.

    The list is padded with negative values (never a key) to more than ten, so that Spark always
    compiles a hash set lookup: the same code whichever keys a read removes."""
    listed = [*map(str, keys.tolist()), *(str(-i) for i in range(1, IN_SET - len(keys) + 1))]
    return rows.where(f"NOT ({KEY} IN ({', '.join(listed)}))").drop(KEY)


def _bytes(d: LiveFile) -> int:
    """What reading ``d`` costs in bytes: a deletion vector's blob, else the whole file."""
    where = content_range(d.data_file) if is_deletion_vector(d.data_file) else None
    return where[1] if where is not None else d.size


def _masks_of(io: FileIO, f: LiveFile, deletes: Sequence[LiveFile]) -> RowMasks:
    """The rows ``deletes`` remove from the data file ``f``, within its rows."""
    aliases = {normalize_path(f.data_file.file_path), normalize_path(f.path)}
    found = []
    for d in deletes:
        if is_deletion_vector(d.data_file):
            offset, length = content_range(d.data_file) or (0, 0)  # a vector always has its range
            found.append(delete_positions.blob_masks(io, d.file_key, offset, length))
        else:
            named = delete_positions.file_masks(io, d.file_key, d.size)
            found += [named[a] for a in aliases if a in named]
    return clipped(combined(found), f.record_count)
