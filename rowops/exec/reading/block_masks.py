"""Deleted positions as bit masks of 64-row blocks, anti-joined on a dense block number.

Anti-joined on one long per deleted position (``position_keys``), a read probes a hash table of every
position at random: after one Case 2 micro-batch at SF 10 (289,108 positions in 16 files of 28.8
million rows) the probe took 4.7 s over a 1.1 s scan, growing with the table (10 keys +0.4 s, 10,000
+0.6 s, 100,000 +1.7 s): cache misses. Iceberg's readers test a bitmap per file, in row order.

Here the driver numbers the 64-row blocks of the files one after the other (a file's first block is
its ``base``) and sends one row per block holding a deletion: its number and a 64-bit mask of the
deleted rows. Spark keeps such keys in a dense array when they are not much sparser than their range
(``LongToUnsafeRowMap``), so the probe reads it in row order. Each row's block is its file's base,
found through a broadcast table of file sizes (a few entries: cached), plus ``row_index >> 6``; the
anti-join drops the row when its block's mask has the row's bit set. The same read: 2.6-3.3 s.

As with row keys, a file is recognised by its size (``_metadata.file_size``, checked against the
manifests: a file of another size fails the read) or, when files share a size, by name.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from rowops.exec.reading.file_reads import broadcast_if_fits
from rowops.exec.reading.position_keys import SIZE_MISMATCH
from rowops.exec.reading.row_masks import BLOCK_BITS, RowMasks
from rowops.exec.spark.arrow_frames import frame_of_longs
from rowops.exec.spark.compat import select_columns, select_exprs
from rowops.exec.spark.listing import spark_name
from rowops.exec.spark.literal_frames import MAX_LITERAL_ROWS, literal_frame, sql_identifier, sql_string
from rowops.meta.files import LiveFile

MAX_NAMED = 64  # files sharing a size, recognised by name (a string compared per row of theirs)
_SIZE, _ROW, _PATH = "_rowops_file_size", "_rowops_row_index", "_rowops_file_path"
_SIZES, _BASE = "_rowops_sizes_size", "_rowops_sizes_base"
_BLOCK, _BIT, _MASKED, _MASK = "_rowops_block", "_rowops_bit", "_rowops_masked_block", "_rowops_mask"


@dataclass(frozen=True)
class BlockPlan:
    """The first block number of each file (by path); ``sized``: size -> base of files whose size no
    other file has, ``named``: Spark's name -> base of the others."""

    files: tuple[LiveFile, ...]
    bases: dict[str, int]
    sized: dict[int, int]
    named: dict[str, int]


def plan_blocks(files: Sequence[LiveFile]) -> BlockPlan | None:
    """The blocks of ``files``; None when more than :data:`MAX_NAMED` of them share a size.

    >>> from types import SimpleNamespace as F
    >>> a, b = F(path="/a", size=100, record_count=64), F(path="/b", size=100, record_count=65)
    >>> plan = plan_blocks([a, b, F(path="/c", size=120, record_count=3)])
    >>> plan.bases, plan.sized, plan.named
    ({'/a': 0, '/b': 1, '/c': 3}, {120: 3}, {'file:/a': 0, 'file:/b': 1})
    """
    counts = Counter(f.size for f in files)
    if sum(1 for f in files if counts[f.size] > 1) > MAX_NAMED:
        return None
    bases, start = {}, 0
    for f in files:
        bases[f.path] = start
        start += -(-f.record_count >> BLOCK_BITS) or 1
    sized = {f.size: bases[f.path] for f in files if counts[f.size] == 1}
    named = {spark_name(f.path): bases[f.path] for f in files if counts[f.size] > 1}
    return BlockPlan(tuple(files), bases, sized, named)


def block_masks(plan: BlockPlan, deleted: Mapping[str, RowMasks]) -> tuple[np.ndarray, np.ndarray]:
    """The blocks holding ``deleted`` rows (data file path -> masks within its rows), numbered as in
    the plan, and their masks, blocks ascending.

    >>> from types import SimpleNamespace as F
    >>> from rowops.exec.reading.row_masks import masks_of
    >>> plan = plan_blocks([F(path="/a", size=1, record_count=100), F(path="/b", size=2, record_count=9)])
    >>> blocks, masks = block_masks(plan, {"/a": masks_of(np.array([0, 3, 64])), "/b": masks_of(np.array([63]))})
    >>> blocks.tolist(), [hex(m) for m in masks.view(np.uint64).tolist()]
    ([0, 1, 2], ['0x9', '0x1', '0x8000000000000000'])
    """
    parts = [(plan.bases[f.path], deleted[f.path]) for f in plan.files if f.path in deleted]
    if not parts:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    blocks = np.concatenate([m.blocks + base for base, m in parts])
    return blocks, np.concatenate([m.bits for _, m in parts])


def row_columns(plan: BlockPlan) -> list[Column]:
    """The columns each row needs to find its block: its file's size and name, its position."""
    columns = [F.col("_metadata.file_size").alias(_SIZE), F.col("_metadata.row_index").alias(_ROW)]
    return columns + ([F.col("_metadata.file_path").alias(_PATH)] if plan.named else [])


def drop_masked(
    spark: SparkSession, rows: DataFrame, plan: BlockPlan, blocks: np.ndarray, masks: np.ndarray
) -> DataFrame:
    """``rows`` (with :func:`row_columns`) without those whose bit is set in their block's mask, the
    helper columns dropped. Columns and conditions go to Spark as SQL text, a round trip each
    (``Column`` objects cost two or three per column on classic PySpark)."""
    columns = [c for c in rows.columns if c not in (_SIZE, _ROW, _PATH)]
    sizes = _sizes_frame(spark, plan.sized)
    based = rows.join(F.broadcast(sizes), F.expr(f"{_SIZE} = {_SIZES}"), "left")
    block = f"coalesce({_BASE}, {_named_base(plan)}) + shiftright({_ROW}, {BLOCK_BITS}) AS {_BLOCK}"
    bit = f"CAST({_ROW} & 63 AS INT) AS {_BIT}"
    keyed = select_exprs(based, [*map(sql_identifier, columns), block, bit])
    masked = frame_of_longs(spark, {_MASKED: blocks, _MASK: masks})
    hit = F.expr(f"{_BLOCK} = {_MASKED} AND (shiftright({_MASK}, {_BIT}) & 1) = 1")
    dropped = keyed.join(broadcast_if_fits(spark, masked, len(blocks) * 32), hit, "left_anti")
    return select_columns(dropped, columns)


def _sizes_frame(spark: SparkSession, sized: Mapping[int, int]) -> DataFrame:
    """File size -> first block, as a ``VALUES`` clause when short (no job reads it), else from Arrow."""
    if len(sized) <= MAX_LITERAL_ROWS:
        return literal_frame(spark, list(sized.items()), [(_SIZES, "bigint"), (_BASE, "bigint")])
    return frame_of_longs(
        spark, {_SIZES: np.fromiter(sized, np.int64), _BASE: np.fromiter(sized.values(), np.int64)}
    )


def _named_base(plan: BlockPlan) -> str:
    """SQL: the base of a row's file by its name, else the size check's error."""
    error = f"raise_error({sql_string(SIZE_MISMATCH)})"
    if not plan.named:
        return error
    cases = " ".join(f"WHEN {_PATH} = {sql_string(n)} THEN {b}" for n, b in sorted(plan.named.items()))
    return f"CASE {cases} ELSE {error} END"
