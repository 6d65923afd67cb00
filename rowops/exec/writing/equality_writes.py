"""The equality-delete encoding of a blind by-key change: the target is not read at all.

An upsert writes its rows as new data files and their keys as equality deletes; a delete by key
writes its keys only. Where ``arrow_writes.arrow_writable`` allows, an upsert's rows and keys are
written by the same tasks in one pass over the source (``arrow_writes.write_rows_and_keys``): two
writes read and shuffled the source twice, and on SF 1's Case 2 micro-batch the keys' own job took
about as long as its 16 small files. Otherwise (keys for several specs after partition evolution, a
table pyarrow does not write) the keys and the rows are two writes, run together
(``parallel.run_together``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from rowops.exec.spark.parallel import run_together
from rowops.exec.writing.arrow_writes import arrow_writable, write_in_arrow, write_rows_and_keys
from rowops.exec.writing.context import WriteContext, Written, max_rows_per_file
from rowops.exec.writing.strategies import write_new_rows
from rowops.exec.writing.write import one_task, write_equality_deletes
from rowops.meta.files import WrittenFile


def equality_delete(
    ctx: WriteContext,
    source: DataFrame,
    keys: Sequence[str],
    upsert: bool,
    spec_ids: Sequence[int],
    rows: int | None = None,
) -> Written:
    """Blind by-key change: an equality delete of the source keys (+ the source rows for an upsert).

    The target is not read at all. Rows inserted in the same commit share its sequence number, so
    the new equality deletes do not apply to them. A delete by key writes each key once (its source
    may repeat keys); an upsert's keys are unique (checked before). The keys are written once per
    spec of ``spec_ids`` (``plan.strategy.equality_delete_specs``: after partition evolution, one per
    spec with live data files, each partitioned by that spec). ``rows``: the source's row count, when
    the pre-scan counted it.
    """
    if upsert and _paired(ctx, spec_ids, rows):
        return _write_rows_and_keys(ctx, source, keys, rows)
    key_rows = source.select(*[F.col(f"`{k}`") for k in keys])
    key_rows = key_rows if upsert else key_rows.distinct()
    exact = rows if upsert else None  # a delete by key writes its distinct keys: at most ``rows``
    write_keys = partial(_write_keys, ctx, key_rows, keys, spec_ids, exact, one_task(rows))
    if not upsert:
        return write_keys()
    deleted, new_rows = run_together(
        ctx.spark, write_keys, partial(write_new_rows, ctx, source, rows, exact=rows is not None)
    )
    return new_rows.merge(deleted)


def _paired(ctx: WriteContext, spec_ids: Sequence[int], rows: int | None) -> bool:
    """Whether an upsert's rows and keys are written by the same tasks (``arrow_writes.write_rows_and_keys``):
    keys for the current spec only, and a table ``arrow_writable`` for these rows."""
    spec = ctx.metadata.spec()
    return list(spec_ids) == [spec.spec_id] and arrow_writable(
        ctx.metadata.schema(), ctx.metadata, spec, rows
    )


def _write_rows_and_keys(
    ctx: WriteContext, source: DataFrame, keys: Sequence[str], rows: int | None
) -> Written:
    """An upsert's rows as new data files and their keys as equality deletes, in one pass."""
    if rows == 0:
        return Written()
    directories = (ctx.stage.next_dir("data"), ctx.stage.next_dir("eq-deletes"))
    data, deletes = write_rows_and_keys(
        source,
        ctx.metadata,
        directories,
        ctx.metadata.schema().select(*keys),
        rows,
        one_task(rows),
        max_rows_per_file(ctx),
    )
    return Written(data=data, equality_deletes=deletes)


def _write_keys(
    ctx: WriteContext,
    key_rows: DataFrame,
    keys: Sequence[str],
    spec_ids: Sequence[int],
    rows: int | None,
    single_task: bool,
) -> Written:
    """Equality deletes of ``key_rows``, once per partition spec of ``spec_ids``: written by pyarrow
    in Spark tasks where ``arrow_writes.arrow_writable``, else by Spark."""
    written: list[WrittenFile] = []
    schema = ctx.metadata.schema().select(*keys)
    for spec_id in spec_ids:
        directory, spec = ctx.stage.next_dir("eq-deletes"), ctx.metadata.specs()[spec_id]
        if arrow_writable(schema, ctx.metadata, spec, rows):
            written += write_in_arrow(
                key_rows, schema, ctx.metadata, directory, spec, rows, single_task, prefix="eq"
            )
        else:
            written += write_equality_deletes(
                key_rows, keys, ctx.metadata, directory, rows, single_task, spec_id
            )
    return Written(equality_deletes=written)
