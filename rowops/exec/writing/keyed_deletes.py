"""Position deletes (or deletion vectors) of a blind upsert, found by key in Arrow tasks: no join.

A position-delete MERGE normally scans every candidate file with row ids, joins it with the source,
counts the matched rows per file in a summary pass and then writes one delete file per touched data
file (``strategies.delete_positions``). For a blind upsert on unique integer keys (what
``keyed_rewrite.py`` rewrites by key) the rows to delete are exactly the live rows of the candidate
files whose key is a source key, so each task can find them itself::

    driver: one row per candidate file (index, task) ─► repartition by task ─► mapInArrow
    task, per file (``keyed_delete_task.py``): its key columns and the positions its deletes already
        remove ─► matched = key in the source's sorted key codes and not deleted yet ─► one delete
        file: the matched positions plus those of its previous rowops delete file, which it replaces
        (Parquet on v2, a deletion vector on v3); a file left without live rows is removed instead
    driver: one small row per file (path, counts) ─► files verified ─► the commit's entries

The new rows (every source row: updated and inserted) are written at the same time
(``parallel.run_together``); on a table with row lineage (v3) after the tasks, which also emit each
matched row's key code and row id: the source is joined with those by code, so an updated row keeps
its id (as through the join). The tasks count the matched rows: those are the rows updated, the
other source rows are inserted (the keys are the table's identifier: at most one live row per key).
Files under equality deletes the task cannot apply (non-integer keys, partition scoping) leave the
operation to the join (None, nothing written).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from rowops.errors import WriteVerificationError
from rowops.exec.reading import key_codes
from rowops.exec.reading.equality_deletes import needs_partition_scope
from rowops.exec.reading.lineage import carries_lineage
from rowops.exec.reading.packed_keys import packed_key
from rowops.exec.rewriting.arrow_deletes import KeyCodec, KeyCodes, KeyDeletes, tasks_key_deletes
from rowops.exec.rewriting.arrow_files import writer_options
from rowops.exec.spark.compat import default_parallelism
from rowops.exec.spark.literal_frames import literal_frame
from rowops.exec.spark.parallel import run_together
from rowops.exec.spark.placement import groups_cost, task_keys
from rowops.exec.writing import keyed_delete_task as tasks
from rowops.exec.writing.context import WriteContext, Written, deletes_only_for, single_file_target
from rowops.exec.writing.deletion_vectors import verified_vectors, writes_deletion_vectors
from rowops.exec.writing.keyed_delete_task import DeleteRef, Output, Target
from rowops.exec.writing.strategies import write_new_rows
from rowops.exec.writing.write import StagedDir, verified_footers
from rowops.meta.delete_index import delete_index
from rowops.meta.files import LiveFile, WrittenFile
from rowops.meta.lineage import LAST_UPDATED, ROW_ID
from rowops.meta.v3 import content_range, first_row_id, is_deletion_vector

_CODE = "_rowops_key_code"


def keyed_position_delete(
    ctx: WriteContext,
    source: DataFrame,
    rows: int | None,
    codec: KeyCodec,
    candidates: Sequence[LiveFile],
    codes: KeyCodes | None = None,
) -> Written | None:
    """The upsert of ``source`` (``rows`` rows, when known) as new data files plus position deletes
    of the live rows of its keys in ``candidates``; None, with nothing written, when the keys are
    too many to collect or some candidate's equality deletes cannot be applied in a task."""
    if rows is None:
        return None
    index = delete_index(ctx.files)
    in_task = tasks_key_deletes(ctx.metadata.schema(), index, candidates)
    for f in candidates:
        eq = index.equality_deletes_of(f)
        if eq and (f.path not in in_task or needs_partition_scope([f], eq)):
            return None
    if (codes is None or codes.codec != codec) and key_codes.collectable(rows):
        codes = key_codes.collect_codes(source, ctx.metadata.schema(), codec)
    if codes is None or codes.codec != codec:
        return None
    found = codes
    targets = [_target(f, index.position_deletes_of(f), in_task.get(f.path, ())) for f in candidates]
    if carries_lineage(candidates):  # the new versions need the ids the tasks find
        deleted, ids = _delete_by_key(ctx, candidates, targets, found, row_ids=True)
        try:
            return deleted.merge(
                write_new_rows(ctx, _with_row_ids(ctx, source, ids, codec), rows, exact=True)
            )
        finally:
            ids.unpersist()
    new, deleted = run_together(
        ctx.spark,
        lambda: write_new_rows(ctx, source, rows, exact=True),
        lambda: _delete_by_key(ctx, candidates, targets, found)[0],
    )
    return cast(Written, new).merge(cast(Written, deleted))


def _target(f: LiveFile, deletes: Sequence[LiveFile], keyed: Sequence[KeyDeletes]) -> Target:
    carried = [d for d in deletes if single_file_target(d) == f.path]
    others = [d for d in deletes if single_file_target(d) != f.path]
    rows, first = f.record_count, first_row_id(f.data_file)
    return Target(f.path, f.names_in_deletes, rows, _refs(carried), _refs(others), tuple(keyed), first)


def _refs(deletes: Sequence[LiveFile]) -> tuple[DeleteRef, ...]:
    return tuple(
        DeleteRef(d.file_key, content_range(d.data_file) if is_deletion_vector(d.data_file) else None)
        for d in deletes
    )


def _delete_by_key(
    ctx: WriteContext,
    candidates: Sequence[LiveFile],
    targets: Sequence[Target],
    codes: KeyCodes,
    row_ids: bool = False,
) -> tuple[Written, DataFrame]:
    """One task per core finds and writes the position deletes of ``codes``' keys in ``targets``;
    with ``row_ids``, also the (persisted) key codes and row ids of the matched rows."""
    directory = ctx.stage.next_dir("deletes")
    spark = ctx.spark
    vectors = writes_deletion_vectors(ctx.metadata.format_version)
    output = Output(directory.key, writer_options(ctx.metadata.properties), vectors, row_ids)
    count = max(1, min(len(targets), default_parallelism(spark)))
    keys = task_keys(groups_cost(list(range(len(targets))), [f.size for f in candidates]), count)
    jobs = literal_frame(spark, [(i, keys[i]) for i in range(len(targets))], [("idx", "int"), ("t", "int")])
    run = tasks.task(dict(directory.io.properties), targets, codes, output)
    out = jobs.repartition(count, "t").select("idx").mapInArrow(run, tasks.OUT)
    if row_ids:
        out = out.persist(StorageLevel.MEMORY_AND_DISK)
    ids = out.filter(F.col("kind") == tasks.ROW_ID).select(
        F.col("code").alias(_CODE), F.col("row_id").alias(ROW_ID)
    )
    try:
        summary = out.filter(F.col("kind") == tasks.SUMMARY).collect() if targets else []
        return _written(ctx, candidates, summary, directory), ids
    except BaseException:
        out.unpersist()  # the caller releases it only once the new rows are written
        raise


def _with_row_ids(ctx: WriteContext, source: DataFrame, ids: DataFrame, codec: KeyCodec) -> DataFrame:
    """The source with the lineage of new versions: a matched key's row id (NULL for an insert) and a
    NULL sequence number (the commit's)."""
    schema = ctx.metadata.schema()
    names = [schema.find_column_name(i) or "" for i in codec.field_ids]
    coded = source.withColumn(_CODE, packed_key(codec, names, strict=True))
    columns = [f.name for f in schema.fields]
    joined = coded.join(F.broadcast(ids), _CODE, "left")
    return joined.select(*columns, ROW_ID, F.lit(None).cast("bigint").alias(LAST_UPDATED))


def _written(
    ctx: WriteContext, candidates: Sequence[LiveFile], summary: Sequence[Any], directory: StagedDir
) -> Written:
    """What the tasks wrote, as the commit's bookkeeping; every candidate must have reported."""
    by_idx = {int(r["idx"]): r for r in summary}
    missing = [f.path for i, f in enumerate(candidates) if i not in by_idx]
    if missing:
        raise WriteVerificationError(
            f"Spark returned no position deletes for {len(missing)} files, e.g. {missing[:3]}"
        )
    files = _verified(ctx, candidates, [r for r in summary if r["written"] is not None], directory)
    previous = {single_file_target(d): d for d in deletes_only_for(ctx.files, {f.path for f in candidates})}
    removed_data, replaced, changed = set(), set(), {}
    for i, f in enumerate(candidates):
        r = by_idx[i]
        if int(r["matched"]):
            changed[f.path] = int(r["matched"])
        if r["emptied"]:
            removed_data.add(f.path)
        if (r["emptied"] or r["written"] is not None) and f.path in previous:
            replaced.add(previous[f.path].path)
    return Written(
        position_deletes=files,
        removed_data=removed_data,
        removed_deletes=replaced,
        referenced_data={p for p in changed if p not in removed_data},
        changed_rows=changed,
    )


def _verified(
    ctx: WriteContext, candidates: Sequence[LiveFile], rows: Sequence[Any], directory: StagedDir
) -> list[WrittenFile]:
    """The written delete files, after checking the driver reads what the executors wrote."""
    io = directory.io
    if writes_deletion_vectors(ctx.metadata.format_version):
        found = [
            (candidates[int(r["idx"])], r["written"], r["offset"], r["length"], r["deletes"], r["size"])
            for r in rows
        ]
        return verified_vectors(io, found)
    paths = [r["written"] for r in rows]
    footers = verified_footers(io, paths, sum(int(r["deletes"]) for r in rows), "The position delete tasks")
    return [
        WrittenFile(
            r["written"],
            candidates[int(r["idx"])].partition,
            spec_id=candidates[int(r["idx"])].spec_id,
            footer=footers[r["written"]],
        )
        for r in rows
    ]
