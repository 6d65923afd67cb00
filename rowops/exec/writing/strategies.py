"""The encodings of a change: copy-on-write, position deletes, hybrid, equality deletes.

Each function writes files through Spark and returns what it wrote; nothing is committed here.
Copy-on-write and position deletes are built from the same parts, so hybrid encoding (rewrite densely
changed files, add position deletes to sparsely changed ones) is one split of the touched files.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from functools import partial

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from rowops.exec.changes.rows import RowChanges
from rowops.exec.reading.equality_deletes import equality_deleted_positions
from rowops.exec.reading.file_reads import FILE_COL, POS_COL, file_uris
from rowops.exec.reading.lineage import kept_lineage
from rowops.exec.reading.scan import position_deletes, scan
from rowops.exec.rewriting.arrow_deletes import Keys, tasks_key_deletes
from rowops.exec.rewriting.arrow_rewrite import (
    Rewritten,
    absorbs_updates,
    arrow_eligible,
    attach_small_files,
    rewrite_positions,
)
from rowops.exec.spark.compat import select_columns
from rowops.exec.spark.literal_frames import literal_frame
from rowops.exec.spark.parallel import run_together
from rowops.exec.writing.arrow_writes import arrow_writable, write_in_arrow
from rowops.exec.writing.context import (
    WriteContext,
    Written,
    deletes_only_for,
    file_changes,
    max_rows_per_file,
    single_file_target,
)
from rowops.exec.writing.position_deletes import write_position_deletes
from rowops.exec.writing.write import (
    data_schema,
    one_task,
    write_data,
)
from rowops.meta.delete_index import DeleteIndex, delete_index
from rowops.meta.files import LiveFile, TableFiles
from rowops.plan.cost import rewrite_is_cheaper, small_files_to_merge, worth_merging


def merge_candidates(files: TableFiles, touched: set[str], read_weight: float) -> set[str]:
    """Small untouched files of the touched partitions worth folding into this rewrite."""
    touched_partitions = {(f.spec_id, f.partition) for f in files.data if f.path in touched}
    untouched: dict[tuple[int, tuple[object, ...]], list[LiveFile]] = defaultdict(list)
    for f in files.data:
        if (f.spec_id, f.partition) in touched_partitions and f.path not in touched:
            untouched[(f.spec_id, f.partition)].append(f)
    chosen: set[str] = set()
    for others in untouched.values():
        others.sort(key=lambda f: f.size)
        count = small_files_to_merge([f.size for f in others], read_weight)
        chosen |= {f.path for f in others[:count]}
    return chosen


def _survivors(ctx: WriteContext, removed: DataFrame, targets: Sequence[LiveFile]) -> DataFrame:
    """The rows of ``targets`` that stay (deletes applied, removed positions dropped)."""
    columns = [c.name for c in ctx.metadata.schema().fields]
    rows = scan(ctx.spark, ctx.metadata.schema(), ctx.files, data_files=targets, row_ids=True)
    kept = [*columns, *kept_lineage(rows)]  # v3: the rows keep their ids and sequence numbers
    return select_columns(rows.join(removed, [FILE_COL, POS_COL], "left_anti"), kept)


def _replaced(ctx: WriteContext, paths: set[str]) -> Written:
    """The bookkeeping of replacing ``paths``: the files and their single-file delete files go."""
    return Written(
        removed_data=set(paths),
        removed_deletes={d.path for d in deletes_only_for(ctx.files, set(paths))},
        rewritten=set(paths),
    )


def rewrite_files(
    ctx: WriteContext,
    removed: DataFrame,
    paths: set[str],
    new_rows_at: DataFrame | None = None,
    into: Mapping[str, str] | None = None,
) -> Written:
    """Copy-on-write of ``paths``: their surviving rows, written where they were read (no shuffle).

    Files whose change is by position are rewritten one to one by pyarrow in Spark tasks
    (``exec/rewriting/arrow_rewrite.py``), or several into one (``into``: small files of :func:`attached`), with
    their updated rows (from ``new_rows_at``) in place of the old versions where the table allows
    (``Written.absorbed``: those rows are not new files), the rows their equality deletes remove
    dropped in the tasks (integer keys, ``exec/rewriting/arrow_deletes.py``) or resolved to positions first;
    the others (another partition spec, partition-scoped equality deletes) by Spark, their updated
    rows left to the new rows.
    """
    targets = [f for f in ctx.files.data if f.path in paths]
    if not targets:
        return Written()
    index = delete_index(ctx.files)
    in_arrow = arrow_eligible(ctx.metadata, index, targets)
    written = Written()
    if in_arrow:
        absorbed = {f.path for f in in_arrow} if _absorbs(ctx, new_rows_at) else set()
        updated = new_rows_at if absorbed else None
        data = _rewrite_in_arrow(ctx, removed, in_arrow, index, updated, into).files
        written = Written(data=data, absorbed=absorbed)
    arrow_paths = {f.path for f in in_arrow}
    by_spark = [f for f in targets if f.path not in arrow_paths]
    if by_spark:
        survivors = _survivors(ctx, removed, by_spark)
        rewritten = write_data(
            survivors,
            ctx.metadata,
            ctx.stage.next_dir("rewrite"),
            cluster=False,
            max_rows=max_rows_per_file(ctx),
        )
        written = written.merge(Written(data=rewritten))
    return written.merge(_replaced(ctx, paths))


def absorbed_paths(ctx: WriteContext, paths: Collection[str], new_rows_at: DataFrame | None) -> set[str]:
    """The files of ``paths`` whose rewrite (:func:`rewrite_files`) writes their updated rows in place
    of the old versions (rewritten in Arrow, in a table without a sort order): known before anything
    is written, so the new rows can be written at the same time, without those updated rows."""
    if not _absorbs(ctx, new_rows_at):
        return set()
    targets = [f for f in ctx.files.data if f.path in paths]
    return {f.path for f in arrow_eligible(ctx.metadata, delete_index(ctx.files), targets)}


def attached(ctx: WriteContext, rewritten: Collection[str], travelling: Collection[str]) -> dict[str, str]:
    """``rewritten`` files written into the Arrow rewrite of a larger one of their partition, and
    ``travelling`` (small) files into one of those rewrites (``arrow_rewrite.attach_small_files``): the
    same bytes in fewer files, and no Spark scan of the small files' survivors, no shuffle."""
    data, index = ctx.files.data, delete_index(ctx.files)
    hosts, small = [f for f in data if f.path in rewritten], [f for f in data if f.path in travelling]
    return attach_small_files(ctx.metadata, index, hosts, small, ctx.target_file_size)


def _absorbs(ctx: WriteContext, new_rows_at: DataFrame | None) -> bool:
    """Whether rewrites in Arrow take the updated rows in place (``arrow_rewrite.absorbs_updates``)."""
    return new_rows_at is not None and absorbs_updates(ctx.metadata)


def _rewrite_in_arrow(
    ctx: WriteContext,
    removed: DataFrame | None,
    targets: list[LiveFile],
    index: DeleteIndex,
    updated: DataFrame | None,
    into: Mapping[str, str] | None,
    batch: Keys | None = None,
) -> Rewritten:
    """``targets`` rewritten without their removed rows (positions; or the rows of ``batch``'s keys,
    counted per target) and the rows their deletes drop, with the ``updated`` rows (if any) in place
    of their old versions; files of ``into`` go into their host's file."""
    dropped = [removed.select(FILE_COL, POS_COL)] if removed is not None else []
    old = position_deletes(ctx.spark, index.position_deletes_applying(targets), targets)
    in_task = tasks_key_deletes(ctx.metadata.schema(), index, targets)
    rest = [f for f in targets if f.path not in in_task]
    keyed = equality_deleted_positions(ctx.spark, ctx.metadata.schema(), index, rest)
    dropped += [d for d in (old, keyed) if d is not None]
    directory = ctx.stage.next_dir("rewrite")
    positions = (
        functools.reduce(DataFrame.unionByName, dropped)
        if dropped
        else literal_frame(ctx.spark, [], [(FILE_COL, "string"), (POS_COL, "bigint")])
    )
    return rewrite_positions(
        ctx.spark,
        ctx.metadata,
        directory.io,
        targets,
        positions,
        directory.key,
        updated,
        into,
        in_task,
        batch,
    )


def rewrite_by_key(
    ctx: WriteContext, paths: set[str], into: Mapping[str, str], batch: Keys | None
) -> Written:
    """``paths`` rewritten in Arrow without the rows of ``batch``'s keys and of their deletes
    (``exec/rewriting/keyed_rewrite.py``: every file ``arrow_eligible``); ``changed_rows``: the rows of
    ``batch``'s keys each file held (live ones: rows its deletes remove are not counted)."""
    targets = [f for f in ctx.files.data if f.path in paths]
    done = _rewrite_in_arrow(ctx, None, targets, delete_index(ctx.files), None, into, batch)
    changed = {path: n for path, n in done.replaced.items() if n}
    return Written(data=done.files, changed_rows=changed).merge(_replaced(ctx, paths))


def delete_positions(ctx: WriteContext, removed: DataFrame, counts: dict[str, int]) -> Written:
    """Position deletes for the files in ``counts``: one sorted delete file per data file.

    Each new delete file also carries the positions of that data file's previous single-file delete
    file, which is removed: a data file never has more than one live position delete file written by
    rowops. A data file whose rows would all be deleted is removed from the table instead.
    """
    previous = {single_file_target(d): d for d in deletes_only_for(ctx.files, set(counts))}
    emptied = {
        f.path
        for f in ctx.files.data
        if f.path in counts
        and counts[f.path] + (previous[f.path].record_count if f.path in previous else 0) >= f.record_count
    }
    targets = [f for f in ctx.files.data if f.path in counts and f.path not in emptied]
    old = position_deletes(ctx.spark, list(previous.values()), targets)
    rows = removed.unionByName(old) if old is not None else removed
    count = sum(
        counts[f.path] + (previous[f.path].record_count if f.path in previous else 0) for f in targets
    )
    deletes = []
    if targets:
        directory = ctx.stage.next_dir("deletes")
        written = write_position_deletes(ctx.spark, rows, targets, ctx.metadata, directory, rows=count)
        deletes = [w for w, _ in written]
    return Written(
        position_deletes=deletes,
        removed_data=emptied,
        removed_deletes={d.path for d in previous.values()},
        referenced_data={f.path for f in targets},
    )


def write_new_rows(ctx: WriteContext, new_rows: DataFrame, count: int | None, exact: bool = False) -> Written:
    """Updated and inserted rows as new data files, clustered by partition, sized to the target.

    Args:
        count: the number of rows (None: unknown; few rows are written by one task).
        exact: ``count`` is their exact count (from the operation's summary), so the write is
            checked against it and skipped when it is 0.
    """
    if exact and count == 0:
        return Written()
    max_rows = max_rows_per_file(ctx)
    rows, directory, spec = count if exact else None, ctx.stage.next_dir("data"), ctx.metadata.spec()
    schema, single = data_schema(new_rows, ctx.metadata), one_task(count)
    if arrow_writable(schema, ctx.metadata, spec, count):  # ``exec/arrow_writes.py``
        return Written(
            data=write_in_arrow(new_rows, schema, ctx.metadata, directory, spec, rows, single, max_rows)
        )
    files = None
    if count is not None and not spec.fields:
        files = max(1, math.ceil(count * ctx.bytes_per_row / ctx.target_file_size))
    return Written(
        data=write_data(
            new_rows, ctx.metadata, directory, files=files, max_rows=max_rows, rows=rows, single_task=single
        )
    )


def copy_on_write(
    ctx: WriteContext,
    changes: RowChanges,
    counts: dict[str, int],
    new_count: int | None,
    read_weight: float,
    clear: Sequence[LiveFile] = (),
) -> Written:
    """Rewrite every data file that holds a removed row; add the new rows.

    Small rewritten files travel with the new rows (see :func:`hybrid`) instead of staying small; the
    other rewritten files of a partition go into fewer, larger files while under the target file
    size (:func:`attached`). ``clear`` (the candidate files, when ``auto`` chose a rewrite to pay the
    read debt down) adds the files of ``clear`` that deletes apply to, touched or not, and the small
    untouched files of the touched partitions (:func:`merge_candidates`): afterwards no delete applies to a candidate file, so
    reads of them skip the anti-join, and equality deletes left applying to no file are dropped.
    """
    sizes = {f.path: f.size for f in ctx.files.data}
    index = delete_index(ctx.files)
    indebted = {f.path for f in clear if index.deletes_on(f)} - set(counts)
    merged = merge_candidates(ctx.files, set(counts), read_weight) if clear else set()
    rewrite = set(counts) | indebted | merged
    travelling = {p for p in rewrite if worth_merging(sizes[p], read_weight)}
    into = attached(ctx, rewrite - travelling, travelling)
    travelling -= into.keys()
    rewritten = rewrite - travelling
    absorbed = absorbed_paths(ctx, rewritten, changes.new_rows_at)
    written, new_rows = run_together(
        ctx.spark,
        partial(rewrite_files, ctx, changes.removed, rewritten, changes.new_rows_at, into),
        partial(_write_new_rows_with, ctx, changes, counts, new_count, travelling, absorbed),
    )
    return written.merge(new_rows)


def position_delete(
    ctx: WriteContext, changes: RowChanges, counts: dict[str, int], new_count: int | None
) -> Written:
    """Position deletes for removed rows; the new rows as data files (both written together)."""
    written, new_rows = run_together(
        ctx.spark,
        partial(delete_positions, ctx, changes.removed, counts),
        partial(write_new_rows, ctx, changes.new_rows, new_count, exact=True),
    )
    return written.merge(new_rows).merge(Written(changed_rows=counts))


def hybrid(
    ctx: WriteContext, changes: RowChanges, counts: dict[str, int], new_count: int | None, read_weight: float
) -> Written:
    """Rewrite the files where that is cheaper, add position deletes to the others, in one change.

    Small files are merged on the way: the survivors of small rewritten files, and small untouched
    files of the touched partitions when the file opens they cost later reads outweigh rewriting them,
    travel with the new rows (clustered: one file per partition) instead of being rewritten one to one.
    """
    sizes = {f.path: f.size for f in ctx.files.data}
    dense = {c.path for c in file_changes(counts, ctx.files) if rewrite_is_cheaper(c, read_weight)}
    small_dense = {p for p in dense if worth_merging(sizes[p], read_weight)}
    travelling = small_dense | merge_candidates(ctx.files, set(counts), read_weight)
    sparse = {p: n for p, n in counts.items() if p not in dense}
    into = attached(ctx, dense - small_dense, travelling)
    travelling -= into.keys()
    rewritten = (dense - small_dense) | into.keys()
    absorbed = absorbed_paths(ctx, rewritten, changes.new_rows_at)
    written, deleted, new_rows = run_together(
        ctx.spark,
        partial(rewrite_files, ctx, changes.removed, rewritten, changes.new_rows_at, into),
        partial(delete_positions, ctx, changes.removed, sparse),
        partial(_write_new_rows_with, ctx, changes, counts, new_count, travelling, absorbed),
    )
    return written.merge(deleted).merge(new_rows)


def _write_new_rows_with(
    ctx: WriteContext,
    changes: RowChanges,
    counts: dict[str, int],
    new_count: int | None,
    travelling: set[str],
    absorbed: Collection[str] = (),
) -> Written:
    """The new rows, plus the surviving rows of the ``travelling`` files, which are replaced; without
    the updated rows of the ``absorbed`` files (their rewrites hold them)."""
    written = Written(changed_rows=counts)
    new_rows, new_count = _new_rows_elsewhere(ctx, changes, counts, new_count, absorbed)
    if travelling:
        files = [f for f in ctx.files.data if f.path in travelling]
        new_rows = new_rows.unionByName(_survivors(ctx, changes.removed, files))
        written = written.merge(_replaced(ctx, travelling))
        if new_count is not None:  # an estimate: the files' own deletes are not subtracted
            new_count += sum(f.record_count - counts.get(f.path, 0) for f in files)
    # exact unless survivors travel along, or absorbed updates leave an upper bound (delete clauses)
    exact = not travelling and (not absorbed or "delete" not in changes.kinds.values())
    return written.merge(write_new_rows(ctx, new_rows, new_count, exact=exact))


def _new_rows_elsewhere(
    ctx: WriteContext,
    changes: RowChanges,
    counts: dict[str, int],
    new_count: int | None,
    absorbed: Collection[str],
) -> tuple[DataFrame, int | None]:
    """The new rows but the updated rows of the ``absorbed`` files, and how many (at most) they are.

    Without delete clauses every removed row of a file is an updated one, so the count is exact;
    otherwise it stays an upper bound (it only sizes files).
    """
    if not absorbed or changes.new_rows_at is None:
        return changes.new_rows, new_count
    uris = file_uris(ctx.spark, [f for f in ctx.files.data if f.path in absorbed])
    names = literal_frame(ctx.spark, [(u,) for u in uris.values()], [(FILE_COL, "string")])
    columns = [f.name for f in ctx.metadata.schema().fields] + kept_lineage(changes.new_rows_at)
    rest = select_columns(changes.new_rows_at.join(F.broadcast(names), FILE_COL, "left_anti"), columns)
    if new_count is not None and "delete" not in changes.kinds.values():
        new_count -= sum(counts.get(p, 0) for p in absorbed)
    return rest, new_count
