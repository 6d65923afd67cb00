"""MERGE cardinality check with compressed bitmaps, per task, without a sort or an extra shuffle.

All matches of one target row are produced by the same task (the target row is streamed once by a
broadcast join, or hashed to one partition by a shuffle join), so each task can detect a target row
matched twice on its own: it keeps one Roaring bitmap of row positions per data file and looks for
positions it has seen before. Only duplicates (at most ``limit``) reach the driver.
"""

from __future__ import annotations

import array
from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from rowops.exec.reading.file_reads import FILE_COL, POS_COL

_OUT_SCHEMA = f"{FILE_COL} string, {POS_COL} long"


def position_bitmap(values: pa.Array) -> tuple[BitMap, np.ndarray]:
    """A bitmap of row positions and the positions themselves (repeats kept)."""
    pos = values.to_numpy(zero_copy_only=False)
    if pos.size and (pos.min() < 0 or pos.max() > 0xFFFFFFFF):
        raise ValueError("row positions beyond 2**32 are not supported by the bitmap check")
    return BitMap(array.array("I", pos.astype(np.uint32).tobytes())), pos


def find_repeated_positions(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: emit (file, pos) pairs seen more than once within this task."""
    seen: dict[str, BitMap] = {}
    for batch in batches:
        files, positions = batch.column(0), batch.column(1)
        dup_files: list[str] = []
        dup_pos: list[int] = []
        for path in pc.unique(files).to_pylist():
            bitmap, pos = position_bitmap(pc.filter(positions, pc.equal(files, path)))
            repeated: set[int] = set()
            if len(bitmap) < pos.size:
                values, counts = np.unique(pos, return_counts=True)
                repeated.update(int(v) for v in values[counts > 1])
            previous = seen.get(path)
            if previous is not None:
                repeated.update(previous & bitmap)
                previous |= bitmap
            else:
                seen[path] = bitmap
            dup_files += [path] * len(repeated)
            dup_pos += sorted(repeated)
        if dup_pos:
            yield pa.RecordBatch.from_arrays(
                [pa.array(dup_files, pa.string()), pa.array(dup_pos, pa.int64())], names=[FILE_COL, POS_COL]
            )


def repeated_matches_bitmap(matched: DataFrame, limit: int = 5) -> list[tuple[str, int]]:
    """Target rows (file, position) matched more than once, found per task with bitmaps."""
    pairs = matched.select(FILE_COL, POS_COL).mapInArrow(find_repeated_positions, _OUT_SCHEMA)
    return [(r[FILE_COL], int(r[POS_COL])) for r in pairs.limit(limit).collect()]


def repeated_matches_groupby(matched: DataFrame, limit: int = 5) -> list[tuple[str, int]]:
    """The same check as a group-by (a shuffle of the matched row ids); kept for comparison."""
    dups = matched.groupBy(FILE_COL, POS_COL).count().filter(F.col("count") > 1).limit(limit)
    return [(r[FILE_COL], int(r[POS_COL])) for r in dups.collect()]
