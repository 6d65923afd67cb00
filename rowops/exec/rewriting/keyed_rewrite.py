"""A copy-on-write of a blind upsert that needs no join: the rewrite drops the rows of the batch's keys.

A copy-on-write normally joins the target with the source to find the position of every row the
MERGE replaces, then rewrites the files holding those positions (``exec/rewriting/arrow_rewrite.py``). When
``auto`` pays a read debt down (``Decision.clears_debt``) it rewrites the candidate files anyway. For
a blind upsert on unique keys (``UPDATE SET * / INSERT *``, what an equality delete encodes) the rows
to replace are exactly the rows of the candidate files whose key is a source key, and the rewrite
task can find them itself: every rewrite task looks its rows' keys up in the source's keys (packed
into one ``long`` per key and looked up in sorted codes, as equality deletes are), besides the
table's own deletes. A small source's codes are collected first (:class:`~rowops.exec.rewriting.arrow_deletes.KeyCodes`)
and the new rows and the rewrite are written together; a large source's rows are written as new
data files first and the tasks read the keys from them (:class:`~rowops.exec.rewriting.arrow_deletes.KeyDeletes`). No join, no summary pass,
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

from pyiceberg.schema import Schema
from pyspark.sql import DataFrame

from rowops.exec.reading import key_codes
from rowops.exec.reading.key_codes import batch_codec, integral_keys
from rowops.exec.reading.prescan import SourceKeys
from rowops.exec.rewriting.arrow_deletes import KeyCodec, KeyCodes, KeyDeletes
from rowops.exec.rewriting.arrow_rewrite import arrow_eligible
from rowops.exec.spark.parallel import run_together
from rowops.exec.writing.context import WriteContext, Written
from rowops.exec.writing.strategies import (
    attached,
    merge_candidates,
    rewrite_by_key,
    write_new_rows,
)
from rowops.meta.delete_index import delete_index
from rowops.meta.files import LiveFile
from rowops.plan.cost import worth_merging
from rowops.request.operations import MergeSpec, OperationSpec

BY_KEY_PROPERTY = "rowops.rewrite.by-key.enabled"  # "false": a copy-on-write always joins


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
    return batch_codec(schema, keys, source_keys.ranges) if integral_keys(source, keys) else None


def keyed_copy_on_write(
    ctx: WriteContext,
    source: DataFrame,
    rows: int | None,
    codec: KeyCodec,
    candidates: Sequence[LiveFile],
    read_weight: float,
    codes: KeyCodes | None = None,
) -> Written | None:
    """The upsert of ``source`` (``rows`` rows, when known) as new data files, and every file of
    ``candidates`` (and the small files of their partitions) rewritten without the rows of the
    source's keys (packed by ``codec``) and without the rows their deletes remove; None, with nothing
    written, when some of those files cannot be rewritten in Arrow.

    A small source's key ``codes`` (collected by the pre-scan, else here: ``exec/reading/key_codes.py``) let
    the new rows and the rewrite be written together (``parallel.run_together``); past
    ``key_codes.MAX_COLLECTED_KEYS`` rows the rewrite looks the keys up in the new files.
    """
    paths = {f.path for f in candidates}
    rewrite = paths | merge_candidates(ctx.files, paths, read_weight)
    targets = [f for f in ctx.files.data if f.path in rewrite]
    index = delete_index(ctx.files)
    if not targets or len(arrow_eligible(ctx.metadata, index, targets)) < len(targets):
        return None
    small = {f.path for f in targets if worth_merging(f.size, read_weight)}
    into = attached(ctx, rewrite - small, small)
    if (codes is None or codes.codec != codec) and key_codes.collectable(rows):
        codes = key_codes.collect_codes(source, ctx.metadata.schema(), codec)
    if codes is not None and codes.codec == codec:
        collected = codes
        new, rewritten = run_together(
            ctx.spark,
            lambda: write_new_rows(ctx, source, rows, exact=True),
            lambda: rewrite_by_key(ctx, rewrite, into, collected),
        )
        return cast(Written, new).merge(cast(Written, rewritten))
    new = write_new_rows(ctx, source, rows, exact=rows is not None)
    batch = KeyDeletes(codec, tuple(sorted(f.path for f in new.data))) if new.data else None
    return new.merge(rewrite_by_key(ctx, rewrite, into, batch))
