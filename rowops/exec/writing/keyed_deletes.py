"""Position deletes (or deletion vectors) of a blind upsert, found by key in Arrow tasks: no join.

A position-delete MERGE normally scans every candidate file with row ids, joins it with the source,
counts the matched rows per file in a summary pass and then writes one delete file per touched data
file (``strategies.delete_positions``). For a blind upsert on unique integer keys (what
``keyed_rewrite.py`` rewrites by key) the rows to delete are exactly the live rows of the candidate
files whose key is a source key, so each task can find them itself::

    driver: one row per candidate file (index, task) ─► repartition by task ─► mapInArrow
    task, per file: read its key columns (pyarrow, by field id) and the positions its deletes already
        remove (its rowops delete file, other position delete files, equality deletes in the task)
        ─► matched = key in the source's sorted key codes and not deleted yet
        ─► one delete file: the matched positions plus those of its previous rowops delete file
           (Parquet on v2, a deletion vector on v3), which it replaces; a file left without live rows
           is removed instead
    driver: one small row per file (path, counts) ─► footers verified ─► the commit's entries

The new rows (every source row: updated and inserted) are written at the same time
(``parallel.run_together``). The tasks count the matched rows: those are the rows updated, the
other source rows are inserted (the keys are the table's identifier: at most one live row per key).
Files under equality deletes the task cannot apply (non-integer keys, partition scoping) leave the
operation to the join (None, nothing written). Not on format v3: an updated row keeps its row id,
which needs the matched row (``planning._may_rewrite_by_key``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyroaring import BitMap64
from pyspark.sql import DataFrame

from rowops.errors import WriteVerificationError
from rowops.exec.reading import key_codes
from rowops.exec.reading.equality_deletes import needs_partition_scope
from rowops.exec.rewriting.arrow_deletes import DeletedKeys, KeyCodec, KeyCodes, KeyDeletes, tasks_key_deletes
from rowops.exec.rewriting.arrow_files import field_indexes, writer_options
from rowops.exec.spark.compat import default_parallelism
from rowops.exec.spark.literal_frames import literal_frame
from rowops.exec.spark.parallel import run_together
from rowops.exec.spark.placement import groups_cost, task_keys
from rowops.exec.writing.context import WriteContext, Written, deletes_only_for, single_file_target
from rowops.exec.writing.strategies import write_new_rows
from rowops.exec.writing.write import verified_footers
from rowops.meta.delete_index import delete_index
from rowops.meta.fileio import filesystem, make_io
from rowops.meta.files import POSITION_DELETE_SCHEMA, LiveFile, WrittenFile
from rowops.meta.paths import join, to_uri
from rowops.meta.puffin import read_deletion_vector
from rowops.meta.v3 import V3, content_range, is_deletion_vector

_OUT = "idx int, written string, matched long, deletes long, emptied boolean"
_OUT_ARROW = pa.schema(
    [("idx", pa.int32()), ("written", pa.string()), ("matched", pa.int64()), ("deletes", pa.int64()),
     ("emptied", pa.bool_())]
)  # fmt: skip
Task = Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]


@dataclass(frozen=True)
class DeleteRef:
    """A delete file's positions of one data file: a Parquet position delete file (``span`` None)
    or a deletion vector (its blob's offset and length in the Puffin file)."""

    path: str
    span: tuple[int, int] | None = None


@dataclass(frozen=True)
class Target:
    """What a task needs of one candidate data file."""

    path: str  # the file as the lake's FileIO reads it (``LiveFile.path``)
    names: tuple[str, ...]  # how a position delete file may name it (the manifest's path first)
    rows: int
    carried: tuple[DeleteRef, ...]  # its rowops delete file: carried into the new one, then removed
    others: tuple[DeleteRef, ...]  # other position deletes that apply to it (they stay)
    keyed: tuple[KeyDeletes, ...]  # the equality deletes that apply to it


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
    if rows is None or ctx.metadata.format_version >= V3:
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
    new, deleted = run_together(
        ctx.spark,
        lambda: write_new_rows(ctx, source, rows, exact=True),
        lambda: _delete_by_key(ctx, candidates, targets, found),
    )
    return cast(Written, new).merge(cast(Written, deleted))


def _target(f: LiveFile, deletes: Sequence[LiveFile], keyed: Sequence[KeyDeletes]) -> Target:
    carried = [d for d in deletes if single_file_target(d) == f.path]
    others = [d for d in deletes if single_file_target(d) != f.path]
    names = tuple(dict.fromkeys([f.data_file.file_path, f.path, to_uri(f.path), "file://" + f.path]))
    return Target(f.path, names, f.record_count, _refs(carried), _refs(others), tuple(keyed))


def _refs(deletes: Sequence[LiveFile]) -> tuple[DeleteRef, ...]:
    return tuple(
        DeleteRef(d.file_key, content_range(d.data_file) if is_deletion_vector(d.data_file) else None)
        for d in deletes
    )


def _delete_by_key(
    ctx: WriteContext, candidates: Sequence[LiveFile], targets: Sequence[Target], codes: KeyCodes
) -> Written:
    """One task per core finds and writes the position deletes of ``codes``' keys in ``targets``."""
    if not targets:
        return Written()
    directory = ctx.stage.next_dir("deletes")
    tasks = max(1, min(len(targets), default_parallelism(ctx.spark)))
    keys = task_keys(groups_cost(list(range(len(targets))), [f.size for f in candidates]), tasks)
    jobs = literal_frame(
        ctx.spark, [(i, keys[i]) for i in range(len(targets))], [("idx", "int"), ("t", "int")]
    )
    options = writer_options(ctx.metadata.properties)
    task = _task(dict(directory.io.properties), targets, codes, directory.key, options)
    results = jobs.repartition(tasks, "t").select("idx").mapInArrow(task, _OUT).collect()
    return _written(ctx, candidates, results, directory.io)


def _written(
    ctx: WriteContext, candidates: Sequence[LiveFile], results: Sequence[Any], io: FileIO
) -> Written:
    """What the tasks wrote, as the commit's bookkeeping; every candidate must have reported."""
    by_idx = {int(r["idx"]): r for r in results}
    missing = [f.path for i, f in enumerate(candidates) if i not in by_idx]
    if missing:
        raise WriteVerificationError(
            f"Spark returned no position deletes for {len(missing)} files, e.g. {missing[:3]}"
        )
    written = {r["written"]: int(r["deletes"]) for r in results if r["written"] is not None}
    footers = verified_footers(io, list(written), sum(written.values()), "The position delete tasks")
    deletes, removed_data, replaced, changed = [], set(), set(), {}
    previous = {single_file_target(d): d for d in deletes_only_for(ctx.files, {f.path for f in candidates})}
    for i, f in enumerate(candidates):
        r = by_idx[i]
        if int(r["matched"]):
            changed[f.path] = int(r["matched"])
        if r["emptied"]:
            removed_data.add(f.path)
        if r["written"] is not None:
            deletes.append(
                WrittenFile(r["written"], f.partition, spec_id=f.spec_id, footer=footers[r["written"]])
            )
        if (r["emptied"] or r["written"] is not None) and f.path in previous:
            replaced.add(previous[f.path].path)
    return Written(
        position_deletes=deletes,
        removed_data=removed_data,
        removed_deletes=replaced,
        referenced_data={p for p in changed if p not in removed_data},
        changed_rows=changed,
    )


def _task(
    io_properties: dict[str, str],
    targets: Sequence[Target],
    codes: KeyCodes,
    directory: str,
    options: dict[str, object],
) -> Task:
    """The ``mapInArrow`` function: each file index in, one row out (:data:`_OUT`)."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        io = make_io(io_properties)
        keys = DeletedKeys(io)
        positions = _Positions(io)
        for batch in batches:
            for idx in batch.column(0).to_pylist():
                out = _delete_in_file(io, keys, positions, targets[idx], codes, directory, options)
                yield pa.RecordBatch.from_pylist([{"idx": idx, **out}], schema=_OUT_ARROW)

    return run


def _delete_in_file(
    io: FileIO,
    keys: DeletedKeys,
    positions: _Positions,
    target: Target,
    codes: KeyCodes,
    directory: str,
    options: dict[str, object],
) -> dict[str, object]:
    """Find the live rows of ``codes``' keys in one file and write its new delete file."""
    ids = sorted({*codes.codec.field_ids, *(i for k in target.keyed for i in k.codec.field_ids)})
    columns = _key_columns(io, target.path, ids, target.rows)
    carried = positions.union(target.carried, target.names)
    gone = carried | positions.union(target.others, target.names)
    dead = np.zeros(target.rows, dtype=bool)
    at = np.asarray(gone.to_array(), dtype=np.int64)
    dead[at[at < target.rows]] = True
    if target.keyed:
        erased = keys.mask(columns, list(target.keyed))
        dead |= erased if erased is not None else False
    hit = keys.mask(columns, [codes])
    matched = np.flatnonzero(hit & ~dead) if hit is not None else np.zeros(0, np.int64)
    out: dict[str, object] = {"written": None, "matched": len(matched), "deletes": 0, "emptied": False}
    if not len(matched):
        return out
    if int(dead.sum()) + len(matched) >= target.rows:
        return {**out, "emptied": True}
    new = carried | BitMap64(matched.astype(np.uint64))
    path = join(directory, f"delete-{uuid.uuid4().hex}.parquet")
    _write_position_deletes(io, path, target.names[0], np.asarray(new.to_array(), np.int64), options)
    return {**out, "written": path, "deletes": len(new)}


def _key_columns(io: FileIO, path: str, ids: Sequence[int], rows: int) -> pa.Table:
    """The columns ``ids`` of the data file at ``path`` (with their field ids); a column the file
    lacks reads as NULLs (a NULL key matches no source key)."""
    fs, local = filesystem(io, path)
    with fs.open_input_file(local) as handle:
        parquet = pq.ParquetFile(handle)
        by_id = field_indexes(parquet.schema_arrow)
        names = [parquet.schema_arrow.field(by_id[i]).name for i in ids if i in by_id]
        table = parquet.read(columns=names)
    for i in ids:
        if i not in by_id:
            field = pa.field(f"_absent_{i}", pa.int64(), metadata={b"PARQUET:field_id": str(i).encode()})
            table = table.append_column(field, pa.nulls(rows, pa.int64()))
    return table


class _Positions:
    """The positions delete files remove from a data file, each delete file read once per task."""

    def __init__(self, io: FileIO) -> None:
        self.io = io
        self.files: dict[str, pa.Table] = {}

    def union(self, refs: Sequence[DeleteRef], names: Sequence[str]) -> BitMap64:
        result = BitMap64()
        for ref in refs:
            fs, local = filesystem(self.io, ref.path)
            if ref.span is not None:
                result |= read_deletion_vector(fs, local, *ref.span)
                continue
            if ref.path not in self.files:
                self.files[ref.path] = pq.read_table(local, columns=["file_path", "pos"], filesystem=fs)
            table = self.files[ref.path]
            mine = pa.compute.is_in(table.column("file_path"), value_set=pa.array(list(names)))
            result.update(table.column("pos").filter(mine).to_numpy().astype(np.uint64))
        return result


def _write_position_deletes(
    io: FileIO, path: str, data_path: str, positions: np.ndarray, options: dict[str, object]
) -> None:
    """One position delete file (Iceberg's schema, sorted by position) for the data file ``data_path``."""
    path_field, pos_field = POSITION_DELETE_SCHEMA.fields
    schema = pa.schema(
        [
            pa.field(
                path_field.name, pa.string(), False, {b"PARQUET:field_id": str(path_field.field_id).encode()}
            ),
            pa.field(
                pos_field.name, pa.int64(), False, {b"PARQUET:field_id": str(pos_field.field_id).encode()}
            ),
        ]
    )
    table = pa.Table.from_arrays(
        [pa.array([data_path] * len(positions), pa.string()), pa.array(positions)], schema=schema
    )
    fs, local = filesystem(io, path)
    fs.create_dir(local.rsplit("/", 1)[0], recursive=True)
    pq.write_table(table, local, filesystem=fs, **options)
