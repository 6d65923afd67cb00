"""A copy-on-write of a blind upsert that needs no join: the rewrite drops the rows of the batch's keys.

A copy-on-write normally joins the target with the source to find the position of every row the
MERGE replaces, then rewrites the files holding those positions (``exec/arrow_rewrite.py``). When
``auto`` pays a read debt down (``Decision.clears_debt``) it rewrites the candidate files anyway. For
a blind upsert on unique keys (``UPDATE SET * / INSERT *``, what an equality delete encodes) the rows
to replace are exactly the rows of the candidate files whose key is a source key, and the rewrite
task can find them itself: every rewrite task looks its rows' keys up in the source's keys (packed
into one ``long`` per key and looked up in sorted codes, as equality deletes are), besides the
table's own deletes. A small source's codes are collected first (:class:`~rowops.exec.arrow_deletes.KeyCodes`)
and the new rows and the rewrite are written together; a large source's rows are written as new
data files first and the tasks read the keys from them (:class:`~rowops.exec.arrow_deletes.KeyDeletes`). No join, no summary pass,
no shuffle of changed rows; no delete file is written: every file a source key can be in (the
candidates: the touched partitions' files whose key bounds overlap the source's) is rewritten in the
same commit, with the small files of the touched partitions.

The planner prices it (``cost.keyed_rewrite_cost``; ``Decision.by_key``) where the MERGE allows
(:func:`rewrite_codec`): a blind upsert, source keys known unique, integer key columns whose range
fits a packed code. It rewrites every candidate, touched or not: a large candidate holding no source
key is rewritten for nothing, which the price counts. Dense batches confined to a few partitions
(the paper's Case 3) touch every candidate anyway and need no join to find their rows. Where a file
to rewrite cannot be rewritten in Arrow, :func:`keyed_copy_on_write` returns None, having written
nothing, and the caller joins. The tasks count the live rows of the source's keys they drop: those are
the rows updated, the other source rows are inserted (the keys are the table's identifier, so a key
has at most one live row, as equality deletes assume).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np
from pyiceberg.schema import Schema
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from rowops.exec.arrow_deletes import KeyCodec, KeyCodes, KeyDeletes, codec_over, integer_column
from rowops.exec.arrow_rewrite import arrow_eligible
from rowops.exec.compat import collect_arrow, select_columns
from rowops.exec.equality_deletes import packed_key
from rowops.exec.parallel import run_together
from rowops.exec.prescan import SourceKeys
from rowops.exec.strategies import (
    WriteContext,
    Written,
    attached,
    merge_candidates,
    rewrite_by_key,
    write_new_rows,
)
from rowops.meta.delete_index import delete_index
from rowops.meta.files import LiveFile
from rowops.plan.cost import worth_merging
from rowops.plan.pruning import KeyRanges
from rowops.spec.operations import MergeSpec, OperationSpec


def batch_codec(schema: Schema, keys: Sequence[str], ranges: KeyRanges) -> KeyCodec | None:
    """The codec of the source keys over their overall range (None: a key column is not an integer,
    a range is unknown, or the key space exceeds :data:`~rowops.exec.arrow_deletes.MAX_CODES`).

    >>> from pyiceberg.schema import NestedField
    >>> from pyiceberg.types import IntegerType, LongType
    >>> schema = Schema(NestedField(1, "a", LongType()), NestedField(2, "b", IntegerType()))
    >>> ranges = KeyRanges({(0,): {"a": (5, 9), "b": (0, 1)}, (1,): {"a": (2, 3), "b": (1, 1)}})
    >>> batch_codec(schema, ["a", "b"], ranges)
    KeyCodec(field_ids=(1, 2), lows=(0, 0), widths=(16, 4))
    """
    overall = ranges.overall or {}
    bounds = [overall.get(k) for k in keys]
    spans = [(int(b[0]), int(b[1])) for b in bounds if b is not None]
    if len(spans) < len(keys) or not all(integer_column(schema, k) for k in keys):
        return None
    return codec_over(tuple(schema.find_field(k).field_id for k in keys), spans)


BY_KEY_PROPERTY = "rowops.rewrite.by-key.enabled"  # "false": a copy-on-write always joins
_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


def rewrite_codec(
    spec: OperationSpec, schema: Schema, source: DataFrame | None, source_keys: SourceKeys | None
) -> KeyCodec | None:
    """The codec a rewrite by key of ``spec`` looks the source's keys up with; None: ``spec`` is not
    a blind upsert on unique integer keys in a packable range (the planner prices no such rewrite).

    The source's key columns must be integers as they are: a key cast on the way in could fall
    outside the codec, taken from the source's values."""
    if not (isinstance(spec, MergeSpec) and spec.key_upsert_or_delete == "upsert" and spec.on_columns):
        return None
    if source is None or source_keys is None or not source_keys.keys_unique:
        return None
    keys = list(spec.on_columns)
    if not all(isinstance(f.dataType, _INTEGRAL) for f in select_columns(source, keys).schema.fields):
        return None
    return batch_codec(schema, keys, source_keys.ranges)


def keyed_copy_on_write(
    ctx: WriteContext,
    source: DataFrame,
    rows: int | None,
    codec: KeyCodec,
    candidates: Sequence[LiveFile],
    read_weight: float,
) -> Written | None:
    """The upsert of ``source`` (``rows`` rows, when known) as new data files, and every file of
    ``candidates`` (and the small files of their partitions) rewritten without the rows of the
    source's keys (packed by ``codec``) and without the rows their deletes remove; None, with nothing
    written, when some of those files cannot be rewritten in Arrow.

    With at most :data:`MAX_COLLECTED_KEYS` source rows, their key codes are collected first
    (:func:`source_codes`) and the new rows and the rewrite are written together
    (``parallel.run_together``); otherwise the rewrite looks the keys up in the new files.
    """
    paths = {f.path for f in candidates}
    rewrite = paths | merge_candidates(ctx.files, paths, read_weight)
    targets = [f for f in ctx.files.data if f.path in rewrite]
    index = delete_index(ctx.files)
    if not targets or len(arrow_eligible(ctx.metadata, index, targets)) < len(targets):
        return None
    small = {f.path for f in targets if worth_merging(f.size, read_weight)}
    into = attached(ctx, rewrite - small, small)
    if rows is not None and 0 < rows <= MAX_COLLECTED_KEYS:
        codes = source_codes(source, ctx.metadata.schema(), codec)
        new, rewritten = run_together(
            ctx.spark,
            lambda: write_new_rows(ctx, source, rows, exact=True),
            lambda: rewrite_by_key(ctx, rewrite, into, codes),
        )
        return cast(Written, new).merge(cast(Written, rewritten))
    new = write_new_rows(ctx, source, rows, exact=rows is not None)
    batch = KeyDeletes(codec, tuple(sorted(f.path for f in new.data))) if new.data else None
    return new.merge(rewrite_by_key(ctx, rewrite, into, batch))


# Source keys collected on the driver for a rewrite by key, at most (8 bytes each: 16 MiB, below what
# Spark broadcasts for a join by default; the rewrite tasks get them with their function, which
# PySpark broadcasts past 1 MiB). Measured on Case 3 (SF 1, 181K keys): the two writes together
# instead of one after the other.
MAX_COLLECTED_KEYS = 1 << 21


def source_codes(source: DataFrame, schema: Schema, codec: KeyCodec) -> KeyCodes:
    """The source's keys packed by ``codec`` (every key in its range: the codec is the source's),
    sorted and distinct, computed by Spark (``equality_deletes.packed_key``, strict) and collected
    as one Arrow column."""
    names = [schema.find_column_name(i) or "" for i in codec.field_ids]
    column = collect_arrow(source.select(packed_key(codec, names, strict=True).alias("_code"))).column(0)
    return KeyCodes(codec, np.unique(column.to_numpy(zero_copy_only=False).astype(np.int64)))
