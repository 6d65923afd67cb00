"""The executor side of position deletes found by key (``keyed_deletes.py``): one task's files.

For each candidate data file a task reads the file's key columns (pyarrow, by field id), the
positions its deletes already remove, finds the live rows of the source's keys and writes the file's
one new delete file: a Parquet position delete file (v2) or a deletion vector in a Puffin file (v3),
holding the new positions and those of the file's previous rowops delete file. It emits one summary
row per file and, on a table with row lineage, one row per matched row: its key code and row id (the
updated row's new version keeps it).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyroaring import BitMap64

from rowops.exec.reading.position_keys import vector_positions
from rowops.exec.rewriting.arrow_deletes import DeletedKeys, KeyCodes, KeyDeletes, row_codes
from rowops.exec.rewriting.arrow_files import field_indexes
from rowops.meta.fileio import filesystem, make_io
from rowops.meta.files import POSITION_DELETE_SCHEMA
from rowops.meta.lineage import ROW_ID_FIELD_ID
from rowops.meta.paths import join
from rowops.meta.puffin import puffin_file, read_deletion_vector

SUMMARY, ROW_ID = 0, 1  # the kinds of output row
OUT = (
    "kind int, idx int, written string, matched long, deletes long, emptied boolean, "
    "offset long, length long, size long, code long, row_id long"
)
_OUT_ARROW = pa.schema(
    [
        ("kind", pa.int32()),
        ("idx", pa.int32()),
        ("written", pa.string()),
        ("matched", pa.int64()),
        ("deletes", pa.int64()),
        ("emptied", pa.bool_()),
        ("offset", pa.int64()),
        ("length", pa.int64()),
        ("size", pa.int64()),
        ("code", pa.int64()),
        ("row_id", pa.int64()),
    ]
)
FIELD_ID = b"PARQUET:field_id"
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
    first_row_id: int | None = None  # v3: row ids not stored in the file are this + position


@dataclass(frozen=True)
class Output:
    """Where a task writes and what: deletion vectors (v3) or Parquet files, with row ids or not."""

    directory: str
    parquet_options: dict[str, object]
    vectors: bool
    row_ids: bool


def task(io_properties: dict[str, str], targets: Sequence[Target], codes: KeyCodes, output: Output) -> Task:
    """The ``mapInArrow`` function: file indexes in, :data:`OUT` rows out."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        io = make_io(io_properties)
        keys, positions = DeletedKeys(io), _Positions(io)
        for batch in batches:
            for idx in batch.column(0).to_pylist():
                yield from _file(io, keys, positions, idx, targets[idx], codes, output)

    return run


def _file(
    io: FileIO,
    keys: DeletedKeys,
    positions: _Positions,
    idx: int,
    target: Target,
    codes: KeyCodes,
    output: Output,
) -> Iterator[pa.RecordBatch]:
    """The rows of one file: its summary, and the codes and ids of its matched rows (v3)."""
    ids = sorted({*codes.codec.field_ids, *(i for k in target.keyed for i in k.codec.field_ids)})
    columns = _columns(io, target.path, ids, target.rows, output.row_ids)
    carried = positions.union(target.carried, target.names)
    dead = _mask(target.rows, carried | positions.union(target.others, target.names))
    erased = keys.mask(columns, list(target.keyed)) if target.keyed else None
    dead = dead | erased if erased is not None else dead
    hit = keys.mask(columns, [codes])
    matched = np.flatnonzero(hit & ~dead) if hit is not None else np.zeros(0, np.int64)
    summary: dict[str, object] = {"kind": SUMMARY, "idx": idx, "matched": len(matched), "emptied": False}
    if len(matched) and int(dead.sum()) + len(matched) >= target.rows:
        summary["emptied"] = True
    elif len(matched):
        new = carried | BitMap64(matched.astype(np.uint64))
        summary.update(_write(io, target.names[0], new, output), deletes=len(new))
    summary.setdefault("deletes", 0)
    yield pa.RecordBatch.from_pylist([summary], schema=_OUT_ARROW)
    if output.row_ids and len(matched):
        yield _row_ids(columns, matched, codes, target)


def _mask(rows: int, positions: BitMap64) -> np.ndarray:
    dead = np.zeros(rows, dtype=bool)
    at = vector_positions(positions)
    dead[at[at < rows]] = True
    return dead


def _row_ids(columns: pa.Table, matched: np.ndarray, codes: KeyCodes, target: Target) -> pa.RecordBatch:
    """The key code and row id of each matched row: the stored ``_row_id``, else the file's
    ``first_row_id`` plus the position (Iceberg's inheritance)."""
    inherited = (target.first_row_id or 0) + matched
    by_id = field_indexes(columns.schema)
    if ROW_ID_FIELD_ID in by_id:
        stored = columns.column(by_id[ROW_ID_FIELD_ID]).take(pa.array(matched))
        ids = pc.coalesce(stored, pa.array(inherited, pa.int64()))
    else:
        ids = pa.array(inherited, pa.int64())
    code = row_codes(codes.codec, columns)[matched]
    n = len(matched)
    arrays = [pa.nulls(n, f.type) for f in _OUT_ARROW]
    arrays[0] = pa.array(np.full(n, ROW_ID, np.int32))
    arrays[-2], arrays[-1] = pa.array(code, pa.int64()), pa.array(ids, pa.int64())
    return pa.RecordBatch.from_arrays(arrays, schema=_OUT_ARROW)


def _columns(io: FileIO, path: str, ids: Sequence[int], rows: int, row_ids: bool) -> pa.Table:
    """The columns ``ids`` (and the stored ``_row_id``, for ``row_ids``) of the data file at
    ``path``, with their field ids; a key column the file lacks reads as NULLs (a NULL key matches no
    source key)."""
    fs, local = filesystem(io, path)
    with fs.open_input_file(local) as handle:
        parquet = pq.ParquetFile(handle)
        by_id = field_indexes(parquet.schema_arrow)
        wanted = [*ids, ROW_ID_FIELD_ID] if row_ids else list(ids)
        table = parquet.read(
            columns=[parquet.schema_arrow.field(by_id[i]).name for i in wanted if i in by_id]
        )
    for i in ids:
        if i not in by_id:
            field = pa.field(f"_absent_{i}", pa.int64(), metadata={FIELD_ID: str(i).encode()})
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
            mine = pc.is_in(table.column("file_path"), value_set=pa.array(list(names)))
            result.update(table.column("pos").filter(mine).to_numpy().astype(np.uint64))
        return result


def _write(io: FileIO, data_path: str, positions: BitMap64, output: Output) -> dict[str, object]:
    """The new delete file of the data file ``data_path``: a deletion vector or a Parquet file."""
    if output.vectors:
        data, (ref,) = puffin_file([(data_path, positions)])
        path = join(output.directory, f"dv-{uuid.uuid4().hex}.puffin")
        with io.new_output(path).create(overwrite=False) as out:
            out.write(data)
        return {"written": path, "offset": ref.offset, "length": ref.length, "size": len(data)}
    path = join(output.directory, f"delete-{uuid.uuid4().hex}.parquet")
    _write_parquet(io, path, data_path, vector_positions(positions), output.parquet_options)
    return {"written": path}


def _write_parquet(
    io: FileIO, path: str, data_path: str, positions: np.ndarray, options: dict[str, object]
) -> None:
    """One position delete file (Iceberg's schema, sorted by position) for the data file ``data_path``."""
    path_field, pos_field = POSITION_DELETE_SCHEMA.fields
    schema = pa.schema(
        [
            pa.field(path_field.name, pa.string(), False, {FIELD_ID: str(path_field.field_id).encode()}),
            pa.field(pos_field.name, pa.int64(), False, {FIELD_ID: str(pos_field.field_id).encode()}),
        ]
    )
    paths = pa.array([data_path] * len(positions), pa.string())
    table = pa.Table.from_arrays([paths, pa.array(positions)], schema=schema)
    fs, local = filesystem(io, path)
    fs.create_dir(local.rsplit("/", 1)[0], recursive=True)
    pq.write_table(table, local, filesystem=fs, **options)
