"""One pass over the joined rows of an operation: row counts, removed rows per file, cardinality.

The driver needs three small facts before it can encode a change: how many rows each action produced,
how many rows each touched data file loses (for the hybrid choice and the delete files), and whether
some target row matched more than one source row. All three come from one Spark job: each task folds
its rows into per-action counts, per-file counts and per-file Roaring bitmaps of matched positions
(see :mod:`rowops.exec.checks.cardinality` for why a task can check its rows on its own), and sends only
those aggregates, plus at most ``limit`` repeated row ids, to the driver.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap

from rowops.exec.changes.rows import ACTION, RowChanges, matched_flag
from rowops.exec.checks.cardinality import find_repeated_positions, position_bitmap
from rowops.exec.reading.file_reads import FILE_COL, POS_COL
from rowops.exec.spark.compat import default_parallelism

_KIND, _N = "kind", "n"
_OUT_SCHEMA = f"{_KIND} string, {FILE_COL} string, {POS_COL} long, {_N} long"
_ACTION, _REMOVED, _REPEATED = "action", "removed", "repeated"


@dataclass(frozen=True)
class ChangeSummary:
    """What one pass over the joined rows found.

    Attributes:
        actions: rows per action index (-1: no clause applied).
        removed: removed target rows per data file, keyed by Spark's name of the file.
        repeated: some target row ids ``(file, pos)`` matched by more than one source row.
    """

    actions: dict[int, int] = field(default_factory=dict)
    removed: dict[str, int] = field(default_factory=dict)
    repeated: list[tuple[str, int]] = field(default_factory=list)


def _rows(
    kind: str, files: list[str | None], positions: list[int | None], counts: list[int]
) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [
            pa.array([kind] * len(counts), pa.string()),
            pa.array(files, pa.string()),
            pa.array(positions, pa.int64()),
            pa.array(counts, pa.int64()),
        ],
        names=[_KIND, FILE_COL, POS_COL, _N],
    )


def summarize_batches(
    batches: Iterable[pa.RecordBatch], removing: Sequence[int], limit: int, distinct: bool = False
) -> Iterator[pa.RecordBatch]:
    """Fold one task's ``(_file, _pos, _action, _matched)`` batches into its summary rows.

    Batches stream through: the counters are updated as the bitmap check consumes the matched rows.

    Args:
        distinct: count removed rows once however many joined rows remove them (a MERGE whose only
            WHEN MATCHED clause deletes may match a target row several times), with a bitmap of
            removed positions per file: all joined rows of one target row meet in one task.
    """
    actions: Counter[int] = Counter()
    removed: Counter[str] = Counter()
    removed_at: dict[str, BitMap] = {}
    removing_set = pa.array(list(removing), pa.int32())

    def count_removed(gone: pa.RecordBatch) -> None:
        if not distinct:
            for item in pc.value_counts(gone.column(0)).to_pylist():
                removed[item["values"]] += int(item["counts"])
            return
        files, positions = gone.column(0), gone.column(1)
        for path in pc.unique(files).to_pylist():
            bitmap, _ = position_bitmap(pc.filter(positions, pc.equal(files, path)))
            removed_at.setdefault(path, BitMap()).update(bitmap)

    def matched_ids() -> Iterator[pa.RecordBatch]:
        for batch in batches:
            action = batch.column(2)
            for item in pc.value_counts(action).to_pylist():
                actions[int(item["values"])] += int(item["counts"])
            count_removed(batch.filter(pc.is_in(action, value_set=removing_set)))
            yield batch.filter(batch.column(3)).select([0, 1])

    repeated: list[tuple[str, int]] = []
    for found in find_repeated_positions(matched_ids()):
        repeated += zip(found.column(0).to_pylist(), found.column(1).to_pylist(), strict=True)
    removed.update({path: len(bitmap) for path, bitmap in removed_at.items()})
    if actions:
        yield _rows(_ACTION, [None] * len(actions), list(actions), list(actions.values()))
    if removed:
        yield _rows(_REMOVED, list(removed), [None] * len(removed), list(removed.values()))
    if repeated:
        repeated = repeated[:limit]
        yield _rows(_REPEATED, [f for f, _ in repeated], [p for _, p in repeated], [1] * len(repeated))


def summarize(changes: RowChanges, limit: int = 5, distinct_removed: bool = False) -> ChangeSummary:
    """Summarize the joined rows of ``changes`` in one Spark job.

    Args:
        changes: the operation's row changes; target rows that met a source row are checked for
            repeats (MERGE cardinality), the others are only counted.
        limit: at most this many repeated row ids per task reach the driver.
        distinct_removed: count each removed target row once (see :func:`summarize_batches`).
    """
    removing = tuple(changes.removing)
    rows = changes.joined.select(FILE_COL, POS_COL, ACTION, matched_flag(changes))
    # Python tasks cost ~0.07 s each to start: one per core. Coalescing merges whole partitions, so
    # all matches of a target row still meet in one task.
    rows = rows.coalesce(default_parallelism(rows.sparkSession))
    out = rows.mapInArrow(
        lambda batches: summarize_batches(batches, removing, limit, distinct_removed), _OUT_SCHEMA
    )
    actions: Counter[int] = Counter()
    removed: Counter[str] = Counter()
    repeated: list[tuple[str, int]] = []
    for row in out.collect():
        if row[_KIND] == _ACTION:
            actions[int(row[POS_COL])] += int(row[_N])
        elif row[_KIND] == _REMOVED:
            removed[row[FILE_COL]] += int(row[_N])
        elif len(repeated) < limit:
            repeated.append((row[FILE_COL], int(row[POS_COL])))
    return ChangeSummary(dict(actions), dict(removed), repeated)
