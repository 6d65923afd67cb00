"""Copy-on-write of a data file in one pass, rewritten by pyarrow inside Spark tasks.

A copy-on-write rewrite of a data file drops positions (the rows a MERGE, UPDATE or DELETE removes,
plus the file's own position deletes) and, for the rows a MERGE or UPDATE changes, puts each row's
new version where its old one was. That needs no join with the file's rows: the changes, keyed by
``(_file, _pos)`` (the row ids the operation's join carries), are shuffled by file and sorted by
position (one row per change; new versions carry their values), and one task per group of files
reads each file once and writes what stays, in its order, with the new versions in place, to one new
file of the same partition. A pure update leaves a file of the same number of rows, in the same
order; no second file of updated rows is written beside it, and a rewritten file never has more rows
than its original (no split needed). Small files a rewrite merges can go into the new file of a large
file of their partition, after its rows (:func:`attach_small_files`: the task writes a group of files
into one). Inserts are written by Spark as new files
(``strategies.write_new_rows``).

Spark's way (``strategies.rewrite_files``: scan with row ids, anti-join, the DataFrame writer, the
updated rows written apart) converts every value to Spark's rows and back and writes through
parquet-mr; here the file goes from Parquet to Arrow batches and back to Parquet in pyarrow, on the
executors (the driver sees paths and counts only). The new versions are typed by Spark as every
writer types them (``store_assignment.stored_sql``: store-assignment casts, NOT NULL and range checks,
raised in the job before any file is committed) and cast to the file's Arrow types in the task.

Columns are matched by Iceberg field id and written under the current schema's names and types
(widened types cast, columns the file lacks written as NULL or their initial-default, dropped columns left out), with the
field ids, so the result is what Spark's rewrite writes. The rows equality deletes remove from a file
are dropped by position too: the caller resolves them first (``equality_deletes.equality_deleted_positions``, a
key-only read of the file and a semi-join with the keys). Files of another partition spec than the
current one, or under equality deletes that need Iceberg's partition scoping (other engines' tables),
are left to Spark (they need a new partition or a scoped key join), as are files not written in the
table's current sort order (rows keep their order here)
and tables with nested columns; so is everything when the table property
``rowops.rewrite.arrow.enabled`` is ``false``. In a table with a sort order, files are rewritten here
without their changed rows, and the new versions go with the inserts (sorted by Spark): a new value
could break the file's order.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
from pyiceberg.io import FileIO
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.types import PrimitiveType
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from rowops.errors import WriteVerificationError
from rowops.exec.checks.store_assignment import stored_sql
from rowops.exec.reading.equality_deletes import needs_partition_scope
from rowops.exec.reading.file_reads import FILE_COL, POS_COL, file_uris
from rowops.exec.reading.lineage import carries_lineage, has_lineage
from rowops.exec.reading.sorted_ints import sorted_distinct
from rowops.exec.rewriting.arrow_deletes import DeletedKeys, KeyDeletes, Keys
from rowops.exec.rewriting.arrow_files import (
    Erase,
    Lineage,
    NewRows,
    ParquetSink,
    copy_file,
    target_schema,
    writer_options,
)
from rowops.exec.spark.compat import default_parallelism, select_columns, select_exprs
from rowops.exec.spark.literal_frames import literal_frame
from rowops.exec.spark.placement import groups_cost, task_keys
from rowops.exec.spark.types import to_spark_type
from rowops.exec.writing.write import verified_footers
from rowops.meta.defaults import initial_defaults
from rowops.meta.delete_index import DeleteIndex
from rowops.meta.fileio import make_io
from rowops.meta.files import LiveFile, WrittenFile
from rowops.meta.lineage import ROW_ID, with_lineage
from rowops.meta.paths import join
from rowops.meta.v3 import V3, first_row_id

ENABLED_PROPERTY = "rowops.rewrite.arrow.enabled"
_OUT_SCHEMA = "idx int, written string, rows long, replaced long"
# the rows of a rewrite: (file index, position, what to do there, path, values of the table's columns)
_IDX, _OP, _PATH, _GRP, _TASK = "_rw_idx", "_rw_op", "_rw_path", "_rw_group", "_rw_task"
_FILE, _DROP, _REPLACE = 0, 1, 2  # one row per file (position -1, its path); drop; new version
_OUT_ARROW = pa.schema(
    [("idx", pa.int32()), ("written", pa.string()), ("rows", pa.int64()), ("replaced", pa.int64())]
)


@dataclass(frozen=True)
class Rewritten:
    """What :func:`rewrite_positions` wrote, and the rows of its ``replacing`` keys removed per target."""

    files: list[WrittenFile]
    replaced: dict[str, int]


def arrow_eligible(metadata: TableMetadata, index: DeleteIndex, files: Sequence[LiveFile]) -> list[LiveFile]:
    """The files of ``files`` that can be rewritten in Arrow (see the module doc)."""
    if metadata.properties.get(ENABLED_PROPERTY, "true").lower() != "true":
        return []
    if not all(isinstance(f.field_type, PrimitiveType) for f in metadata.schema().fields):
        return []  # conform() matches top-level field ids only
    spec_id = metadata.default_spec_id
    order = metadata.default_sort_order_id if metadata.sort_order().fields else None
    return [
        f
        for f in files
        if f.spec_id == spec_id
        and not needs_partition_scope([f], index.equality_deletes_of(f))
        and (order is None or f.data_file.sort_order_id == order)  # kept order: the table's order
    ]


def absorbs_updates(metadata: TableMetadata) -> bool:
    """Whether a rewrite in Arrow writes a file's updated rows in place of their old versions: not in
    a table with a sort order (a new value could break the order the file is in; those updated rows
    are written with the inserts, sorted by Spark)."""
    return not metadata.sort_order().fields


def rewrite_positions(
    spark: SparkSession,
    metadata: TableMetadata,
    io: FileIO,
    targets: Sequence[LiveFile],
    dropped: DataFrame,
    directory: str,
    replaced: DataFrame | None = None,
    into: Mapping[str, str] | None = None,
    keyed: Mapping[str, Sequence[KeyDeletes]] | None = None,
    replacing: Keys | None = None,
) -> Rewritten:
    """Rewrite ``targets`` without the ``(_file, _pos)`` rows of ``dropped`` and with the rows of
    ``replaced`` in place of the rows they replace; one file per target, or per group (``into``).

    Args:
        dropped: Spark's file name (``_file``) and row position (``_pos``) of every row to drop,
            including the rows the targets' position deletes already remove.
        directory: where the new files go (a staging directory).
        replaced: ``_file``, ``_pos`` and the table's columns: the new version of the row at that
            position, written where the old one was (cast, NOT NULL and range checked as every writer
            does). Rows of other files than ``targets`` are ignored.
        into: path of a target -> path of the target whose new file it is written into, after that
            target's rows (files of one partition, :func:`attach_small_files`); the others get a file
            of their own.
        keyed: path of a target -> the equality deletes the task applies to it itself
            (``exec/rewriting/arrow_deletes.py``); the rows other equality deletes remove are in ``dropped``.
        replacing: the keys of a rewrite by key (``exec/rewriting/keyed_rewrite.py``): every target is
            rewritten without its rows of those keys, counted per target.

    Returns:
        The written files, each with its target's partition (a target or group left without rows
        has none), and the rows ``replacing`` removed from each target.
    """
    uris = file_uris(spark, targets)
    group = _groups(targets, into or {})
    # one task per core, the groups spread over them by bytes (``exec/spark/placement.py``): hashing group
    # ids left tasks of no file beside tasks of four, and each task costs ~0.2 s to start
    tasks = max(1, min(len(set(group)), default_parallelism(spark)))
    keys = task_keys(groups_cost(group, [f.size for f in targets]), tasks)
    names = literal_frame(
        spark,
        [(uris[f.path], i, f.path, group[i], keys[group[i]]) for i, f in enumerate(targets)],
        [(FILE_COL, "string"), (_IDX, "int"), (_PATH, "string"), (_GRP, "int"), (_TASK, "int")],
    )
    # SQL text in one piece (``compat.select_exprs``): the tables rewritten here have primitive columns
    lineage = _lineage(metadata, targets)  # v3: rows keep their lineage (``exec/lineage.py``)
    schema = with_lineage(metadata.schema()) if lineage else metadata.schema()
    types = [to_spark_type(f.field_type).simpleString() for f in schema.fields]
    nulls = [f"CAST(NULL AS {t}) AS _c{i}" for i, t in enumerate(types)]
    no_path, tail = f"CAST(NULL AS string) AS {_PATH}", [_GRP, _TASK]
    ids = F.broadcast(select_columns(names, [FILE_COL, _IDX, _GRP, _TASK]))
    head = [_IDX, f"CAST(-1 AS bigint) AS {POS_COL}", f"{_FILE} AS {_OP}", _PATH]
    rows = select_exprs(names, [*head, *nulls, *tail])
    drops = select_exprs(
        dropped.join(ids, FILE_COL), [_IDX, POS_COL, f"{_DROP} AS {_OP}", no_path, *nulls, *tail]
    )
    rows = rows.unionByName(drops)
    if replaced is not None:
        new = replaced.join(ids, FILE_COL)
        stored = stored_sql(new, metadata.schema())
        assert stored is not None, "arrow_eligible keeps tables of primitive columns only"
        if lineage:  # the new version keeps the old row's id, NULL sequence number: the new one
            kept = has_lineage(new)
            stored += [ROW_ID if kept else "CAST(NULL AS bigint)", "CAST(NULL AS bigint)"]
        values = [f"{e} AS _c{i}" for i, e in enumerate(stored)]
        rows = rows.unionByName(
            select_exprs(new, [_IDX, POS_COL, f"{_REPLACE} AS {_OP}", no_path, *values, *tail])
        )
    deletes = [list((keyed or {}).get(f.path, ())) for f in targets]
    task = _rewrite_task(dict(io.properties), metadata, directory, group, deletes, replacing, lineage)
    # a group's rows together, each file's in a run, by position
    grouped = rows.repartition(tasks, _TASK).sortWithinPartitions(_GRP, _IDX, POS_COL).drop(_GRP, _TASK)
    out = grouped.mapInArrow(task, _OUT_SCHEMA)
    results = {int(r["idx"]): (r["written"], int(r["rows"]), int(r["replaced"])) for r in out.collect()}
    by_target = {targets[i].path: n for i, (_, _, n) in results.items()}
    return Rewritten(_verified(targets, results, io), by_target)


def _lineage(metadata: TableMetadata, targets: Sequence[LiveFile]) -> list[Lineage] | None:
    """Each target's (first_row_id, data sequence number) on a format v3 table, else None."""
    if metadata.format_version < V3 or not carries_lineage(targets):
        return None
    return [(first_row_id(f.data_file), f.seq) for f in targets]


def _groups(targets: Sequence[LiveFile], into: Mapping[str, str]) -> list[int]:
    """The group of each target: the index of the target whose file it is written into (its own)."""
    index = {f.path: i for i, f in enumerate(targets)}
    return [index[into.get(f.path, f.path)] for f in targets]


def attach_small_files(
    metadata: TableMetadata,
    index: DeleteIndex,
    rewritten: Sequence[LiveFile],
    small: Sequence[LiveFile],
    capacity: int,
) -> dict[str, str]:
    """Which files to rewrite into the new file of another of their partition: path -> path of its
    host, while each host's group stays under ``capacity`` bytes.

    ``rewritten`` files (rewritten anyway) are packed among themselves first, largest first, each into
    the first host with room or else hosting a group of its own; then the ``small`` files (those a
    rewrite merges) go into the first group with room. Only files :func:`arrow_eligible` keeps; a
    member's rows go after its host's, so not in a table with a sort order (they would break the
    file's order). The rest is a pure bin packing:

    >>> from types import SimpleNamespace as F
    >>> big = [F(path=p, partition=(1,), spec_id=0, size=60) for p in ("b", "c")]
    >>> tiny = [F(path=p, partition=(k,), spec_id=0, size=20) for p, k in [("s", 1), ("t", 1), ("u", 2)]]
    >>> _pack(big[:1], tiny, capacity=100), _pack(big[:1], tiny, capacity=90)
    ({'s': 'b', 't': 'b'}, {'s': 'b'})
    >>> _pack(big, tiny, capacity=90), _pack(big, tiny, capacity=120)
    ({'s': 'b', 't': 'c'}, {'c': 'b'})
    """
    if metadata.sort_order().fields:
        return {}
    return _pack(arrow_eligible(metadata, index, rewritten), arrow_eligible(metadata, index, small), capacity)


def _pack(rewritten: Sequence[LiveFile], small: Sequence[LiveFile], capacity: int) -> dict[str, str]:
    room: dict[tuple[int, tuple[object, ...]], list[tuple[str, int]]] = {}
    attached: dict[str, str] = {}

    def place(f: LiveFile, host_if_none: bool) -> None:
        spaces = room.setdefault((f.spec_id, f.partition), [])
        fits = next((i for i, (_, free) in enumerate(spaces) if free >= f.size), None)
        if fits is not None:
            host, free = spaces[fits]
            spaces[fits] = (host, free - f.size)
            attached[f.path] = host
        elif host_if_none:
            spaces.append((f.path, capacity - f.size))

    for f in sorted(rewritten, key=lambda f: -f.size):  # first-fit decreasing
        place(f, host_if_none=True)
    for f in sorted(small, key=lambda f: f.size):
        place(f, host_if_none=False)
    return attached


def _verified(
    targets: Sequence[LiveFile], results: Mapping[int, tuple[str | None, int, int]], io: FileIO
) -> list[WrittenFile]:
    """The written files, after checking every target was rewritten and the driver reads, in the
    footers of the new files, every row the tasks wrote (as ``write.save`` checks Spark's writes);
    the footers travel with the files to their manifest entries (read once)."""
    missing = [f.path for i, f in enumerate(targets) if i not in results]
    if missing:
        raise WriteVerificationError(f"Spark returned no rewrite of {len(missing)} files, e.g. {missing[:3]}")
    written: dict[str, int] = {}  # path -> a target written into it (the files of a group share one)
    for i, (path, _, _) in sorted(results.items()):
        if path is not None:
            written.setdefault(path, i)
    rows = sum(n for _, n, _ in results.values())
    footers = verified_footers(io, list(written), rows, "The rewrite tasks")
    return [WrittenFile(path, targets[i].partition, footer=footers[path]) for path, i in written.items()]


def _rewrite_task(
    io_properties: dict[str, str],
    metadata: TableMetadata,
    directory: str,
    group: Sequence[int],
    deletes: Sequence[Sequence[KeyDeletes]],
    replacing: Keys | None = None,
    lineage: Sequence[Lineage] | None = None,
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function: the change rows of each file (sorted by group, file, position)
    become one output row per file (idx, written file, rows written, rows of ``replacing``'s keys
    removed); the files of a group (``group``: by file index) are written into one new file, without
    the rows of ``deletes`` (by file index) and of ``replacing``; with their rows' ``lineage`` (by
    file index, format v3)."""
    schema = with_lineage(metadata.schema()) if lineage else metadata.schema()
    options = writer_options(metadata.properties)
    defaults = initial_defaults(schema)

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        io = make_io(io_properties)
        target = target_schema(schema)
        keys = DeletedKeys(io)
        replace = partial(keys.mask, deletes=[replacing]) if replacing is not None else None
        sink: ParquetSink | None = None
        members: list[tuple[int, int, int]] = []  # (file index, rows written, replaced) of the open group
        for idx, changes in per_file(batches):
            if sink is not None and group[idx] != group[members[0][0]]:
                yield _group_written(sink, members)
                sink, members = None, []
            if sink is None:
                sink = ParquetSink(io, join(directory, f"part-arrow-{uuid.uuid4()}.parquet"), target, options)
            erase = partial(keys.mask, deletes=deletes[idx]) if deletes[idx] else None
            of = lineage[idx] if lineage else None
            members.append((idx, *_rewrite_changed(io, changes, target, sink, defaults, erase, replace, of)))
        if sink is not None:
            yield _group_written(sink, members)

    return run


def _group_written(sink: ParquetSink, members: Sequence[tuple[int, int, int]]) -> pa.RecordBatch:
    """Close ``sink``; one output row per file written into it."""
    key = sink.key if sink.close() else None
    out = {
        "idx": [i for i, _, _ in members],
        "written": [key] * len(members),
        "rows": [n for _, n, _ in members],
        "replaced": [r for _, _, r in members],
    }
    return pa.RecordBatch.from_pydict(out, schema=_OUT_ARROW)


def per_file(batches: Iterable[pa.RecordBatch]) -> Iterator[tuple[int, pa.Table]]:
    """Runs of rows with the same first column (a file's index), as one table each.

    >>> b = pa.RecordBatch.from_pydict({"i": pa.array([0, 0, 1], pa.int32())})
    >>> [(i, t.num_rows) for i, t in per_file([b, b])]
    [(0, 2), (1, 1), (0, 2), (1, 1)]
    """
    current: int | None = None
    pending: list[pa.RecordBatch] = []
    for batch in batches:
        if not batch.num_rows:
            continue
        idx = batch.column(0).to_numpy(zero_copy_only=False)
        cuts = [0, *(np.flatnonzero(np.diff(idx)) + 1).tolist(), batch.num_rows]
        for start, end in itertools.pairwise(cuts):
            at = int(idx[start])
            if current is not None and at != current:
                yield current, pa.Table.from_batches(pending)
                pending = []
            current = at
            pending.append(batch.slice(start, end - start))
    if current is not None:
        yield current, pa.Table.from_batches(pending)


def _rewrite_changed(
    io: FileIO,
    changes: pa.Table,
    target: pa.Schema,
    sink: ParquetSink,
    defaults: Mapping[int, Any],
    erase: Erase | None = None,
    replacing: Erase | None = None,
    lineage: Lineage | None = None,
) -> tuple[int, int]:
    """Rewrite one file from its change rows (idx, pos, op, path, values...) into ``sink``; returns
    the rows written and the rows ``replacing`` removed (``arrow_files.copy_file``)."""
    changes = changes.combine_chunks()
    op = changes.column(2).to_numpy(zero_copy_only=False)
    pos = changes.column(1).to_numpy(zero_copy_only=False)
    path = changes.column(3).filter(pa.array(op == _FILE))[0].as_py()
    is_new = op == _REPLACE
    new = None
    if is_new.any():
        mask = pa.array(is_new)
        values = [changes.column(4 + i).filter(mask).cast(f.type) for i, f in enumerate(target)]
        new = NewRows(pos[is_new], pa.Table.from_arrays(values, schema=target))
    dropped = sorted_distinct(pos[op != _FILE])  # a replaced row is dropped, its new version put in its place
    return copy_file(io, path, dropped, target, sink, new, defaults, erase, replacing, lineage)
