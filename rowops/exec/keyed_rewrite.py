"""A copy-on-write of a blind upsert that needs no join: the rewrite drops the rows of the batch's keys.

A copy-on-write normally joins the target with the source to find the position of every row the
MERGE replaces, then rewrites the files holding those positions (``exec/arrow_rewrite.py``). When
``auto`` pays a read debt down (``Decision.clears_debt``) it rewrites the candidate files anyway. For
a blind upsert on unique keys (``UPDATE SET * / INSERT *``, what an equality delete encodes) the rows
to replace are exactly the rows of the candidate files whose key is a source key, and the rewrite
task can find them itself: the source rows are written as new data files first, and every rewrite
task looks its rows' keys up in the keys of those new files (one more
:class:`~rowops.exec.arrow_deletes.KeyDeletes`, packed into one ``long`` per key and looked up in
sorted codes, as equality deletes are), besides the table's own deletes. No join, no summary pass,
no shuffle of changed rows; no delete file is written: every file a source key can be in (the
candidates: the touched partitions' files whose key bounds overlap the source's) is rewritten in the
same commit, with the small files of the touched partitions.

Only where all of that holds (:func:`keyed_copy_on_write` returns None otherwise, having written
nothing, and the caller joins): a MERGE that is a blind upsert, source keys known unique, integer key
columns whose range fits a packed code, every file to rewrite rewritable in Arrow, and no large
candidate file without deletes (it may hold no source key at all: the join would leave it alone,
this rewrite cannot tell). The rows updated and inserted are not counted (as for equality deletes).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyiceberg.schema import Schema
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from rowops.exec.arrow_deletes import KeyCodec, KeyDeletes, codec_over, integer_column
from rowops.exec.arrow_rewrite import arrow_eligible
from rowops.exec.compat import select_columns
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
    KeyCodec(field_ids=(1, 2), lows=(2, 0), widths=(9, 3))
    """
    overall = ranges.overall or {}
    bounds = [overall.get(k) for k in keys]
    spans = [(int(b[0]), int(b[1])) for b in bounds if b is not None]
    if len(spans) < len(keys) or not all(integer_column(schema, k) for k in keys):
        return None
    return codec_over(tuple(schema.find_field(k).field_id for k in keys), spans)


_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


def keyed_copy_on_write(
    ctx: WriteContext,
    spec: OperationSpec,
    source: DataFrame | None,
    source_keys: SourceKeys | None,
    candidates: Sequence[LiveFile],
    read_weight: float,
) -> Written | None:
    """``spec``'s upsert of ``source`` as new data files, and every file of ``candidates`` (and the
    small files of their partitions) rewritten without the rows of the source's keys and without the
    rows their deletes remove; None, with nothing written, where that is not the MERGE's result or
    not cheaper than the join (see the module's docstring)."""
    if not (isinstance(spec, MergeSpec) and spec.key_upsert_or_delete == "upsert" and spec.on_columns):
        return None
    if source is None or source_keys is None or not source_keys.keys_unique:
        return None
    keys = spec.on_columns
    codec = batch_codec(ctx.metadata.schema(), keys, source_keys.ranges)
    if codec is None or not _integral_as_given(source, keys):
        return None
    index = delete_index(ctx.files)
    if any(not index.deletes_on(f) and not worth_merging(f.size, read_weight) for f in candidates):
        return None
    paths = {f.path for f in candidates}
    rewrite = paths | merge_candidates(ctx.files, paths, read_weight)
    targets = [f for f in ctx.files.data if f.path in rewrite]
    if not targets or len(arrow_eligible(ctx.metadata, index, targets)) < len(targets):
        return None
    small = {f.path for f in targets if worth_merging(f.size, read_weight)}
    into = attached(ctx, rewrite - small, small)
    new = write_new_rows(ctx, source, source_keys.rows, exact=source_keys.rows is not None)
    batch = KeyDeletes(codec, tuple(sorted(f.path for f in new.data))) if new.data else None
    return new.merge(rewrite_by_key(ctx, rewrite, into, batch))


def _integral_as_given(source: DataFrame, keys: Sequence[str]) -> bool:
    """Whether the source's key columns are integers as they are (a key cast on the way in could fall
    outside the codec, taken from the source's values)."""
    return all(isinstance(f.dataType, _INTEGRAL) for f in select_columns(source, list(keys)).schema.fields)
