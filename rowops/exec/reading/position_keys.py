"""Position deletes applied through one long per row: no file names hashed, delete files read in Arrow.

A read of files under position deletes anti-joins their rows with the deleted ``(file, position)``
pairs. Keyed by Spark's name of the file, every row hashes a ~100-byte string and the delete side is
read by Spark's Parquet reader, which opens each small delete file as a split of its own: at SF 1 after
ten micro-batches (176 data files, 160 delete files, 300,645 positions) reading the delete side took
1.5-1.8 s of a 4-5 s read whose plain scan takes 1.3-2.2 s.

Here each row's key is one long built from constant metadata Spark fills per file at no cost::

    key = _metadata.file_size * stride + _metadata.row_index   (stride: a power of two above any file's rows)

and the delete side is one long per deleted position, built by Python tasks that read the delete files
whole (Spark's ``binaryFile`` source, as deletion vectors are read) with pyarrow: Parquet position
delete files filtered by the data files they name, and deletion vector blobs (v3), one ``mapInArrow``
pass. The anti-join then hashes a long on both sides.

A key names one row only if each file has its own range of keys and positions stay below their file's
row count: a file whose size another file shares is recognised by name instead (a string compared per
row of its own, never hashed) and given a range past the largest size; positions past a file's end
(which delete nothing) are dropped. The sizes come from the manifests; a file whose actual size differs
(a manifest that breaks the spec) fails the read with a clear error instead of keeping deleted rows:
each row's key checks that its file's size is one of those planned.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyroaring import BitMap64
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from rowops.exec.spark.compat import default_parallelism
from rowops.exec.spark.listing import DRIVER_LISTING, spark_name
from rowops.exec.spark.literal_frames import sql_string
from rowops.exec.spark.session import session_conf
from rowops.meta.delete_index import DeleteIndex
from rowops.meta.files import LiveFile
from rowops.meta.paths import normalize_path, spark_uri
from rowops.meta.puffin import deserialize_dv
from rowops.meta.v3 import content_range, is_deletion_vector

KEY = "_rowops_row_key"
_LIMIT = 1 << 62  # largest size * stride + position kept well inside a long
# Rows are read by key from 65 files under position deletes, or from MIN_DELETED_ROWS positions.
# Below both, the join by name hashes positions only (``scan.drop_positions``) and Spark reads the few
# delete files at ~10 ms each, less than starting the keys' Python tasks (~0.4 s): Case 1's read after
# ten streaming writes (16 files, ~4,000 positions) took 2.2-2.5 s by key against 1.5 s by name. Many
# positions in few files make that join's hash chains long (one entry per file holding a position):
# Case 3's read after ten batch writes (36 files, 20 under ~900,000 positions) took 7.2 s by name
# against 3.0 s by key, after one (2 files, ~180,000 positions) 3.2 s against 1.9 s. The bound lies
# between the two measured shapes, at about their geometric mean.
MIN_FILES = 65
MIN_DELETED_ROWS = 20_000
MAX_FILES = 4096  # files read by key in one scan: their sizes are checked by one IN list per row
IN_SET = 11  # more than spark.sql.optimizer.inSetConversionThreshold (10): a hash set, not inlined
MAX_NAMED = 64  # files of a shared size, recognised by name (a string compared per row of theirs)
FILES_PER_TASK = 128  # delete files per task reading them
SIZE_MISMATCH = (
    "A data file's size differs from its manifest's file_size_in_bytes, so its position deletes cannot "
    "be applied. Help: the table's metadata is corrupt; compare the file with its manifest entry "
    "(rowops inspect files)"
)
Task = Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]


@dataclass(frozen=True)
class Span:
    """A data file's key range: ``base`` = its size * stride; positions below ``rows`` are its rows."""

    base: int
    rows: int


@dataclass
class DeleteSources:
    """What the tasks read, by Spark's name of each delete file: the data files a Parquet position
    delete file may name (normalized path -> span), the blobs of a Puffin file (offset, length, span)."""

    named: dict[str, dict[str, Span]] = field(default_factory=lambda: defaultdict(dict))
    blobs: dict[str, list[tuple[int, int, Span]]] = field(default_factory=lambda: defaultdict(list))


@dataclass(frozen=True)
class KeyPlan:
    """How rows of a scan's files are keyed: ``slots`` (path -> slot) give each file its key range
    ``slot * stride``; a file's slot is its size when no other file has that size, else one past the
    largest size (such a file is recognised by name, ``named``: Spark's name -> slot)."""

    files: tuple[LiveFile, ...]
    stride: int
    slots: dict[str, int]
    named: dict[str, int]

    def span(self, f: LiveFile) -> Span:
        return Span(self.slots[f.path] * self.stride, f.record_count)


def plan_keys(files: Sequence[LiveFile], min_files: int | None = None, deleted: int = 0) -> KeyPlan | None:
    """The keys of ``files``' rows; None when they do not fit in a long, or the files are fewer than
    ``min_files`` (:data:`MIN_FILES`) and their ``deleted`` positions fewer than :data:`MIN_DELETED_ROWS`,
    or the files are more than :data:`MAX_FILES`, or more than :data:`MAX_NAMED` share a size.

    >>> from types import SimpleNamespace as F
    >>> a, b = F(path="/a", size=100, record_count=9), F(path="/b", size=100, record_count=5)
    >>> plan = plan_keys([a, b, F(path="/c", size=120, record_count=3)], min_files=1)
    >>> plan.stride, plan.slots, plan.named
    (16, {'/c': 120, '/a': 121, '/b': 122}, {'file:/a': 121, 'file:/b': 122})
    >>> plan_keys([F(path="/d", size=1 << 40, record_count=1 << 30)], min_files=1) is None
    True
    >>> plan_keys([a], deleted=5) is None, plan_keys([a], deleted=MIN_DELETED_ROWS) is None
    (True, False)
    """
    many = len(files) >= (MIN_FILES if min_files is None else min_files) or deleted >= MIN_DELETED_ROWS
    if not files or not many or len(files) > MAX_FILES:
        return None
    stride = 1 << max(f.record_count for f in files).bit_length()  # > every position; rarely changes
    counts = Counter(f.size for f in files)
    shared = [f for f in files if counts[f.size] > 1]
    top = max(f.size for f in files)
    if len(shared) > MAX_NAMED or (top + len(shared) + 1) * stride >= _LIMIT:
        return None
    slots = {f.path: f.size for f in files if counts[f.size] == 1}
    slots.update((f.path, top + 1 + i) for i, f in enumerate(shared))
    named = {spark_name(f.path): slots[f.path] for f in shared}
    return KeyPlan(tuple(files), stride, slots, named)


def row_key(plan: KeyPlan) -> Column:
    """Each row's key (:func:`row_key_sql`)."""
    return F.expr(row_key_sql(plan)).alias(KEY)


def row_key_sql(plan: KeyPlan) -> str:
    """Each row's key, as SQL: a file of a distinct size by its size (checked against the
    manifests'), the others by name.

    Spark compiles the generated code of each new read, and inlines the literals of a short ``IN``
    list and of arithmetic (Janino, a few hundred ms): the sizes are always a long enough list for
    Spark's hash set (padded with negative sizes), which it passes by reference, and the stride is a
    power of two, so the next read of a growing table reuses the compiled scan.

    >>> from types import SimpleNamespace as F
    >>> key = row_key_sql(plan_keys([F(path="/c", size=120, record_count=3)], min_files=1))
    >>> "IN (120, -1, -2, -3, -4, -5, -6, -7, -8, -9, -10)" in key, "* 4 +" in key
    (True, True)
    """
    unique = sorted(f.size for f in plan.files if plan.slots[f.path] == f.size)  # the others: by name
    unique += [-i for i in range(1, IN_SET - len(unique) + 1)]  # never a size: see above
    by_name = " ".join(
        f"WHEN _metadata.file_path = {sql_string(name)} THEN {slot * plan.stride} + _metadata.row_index"
        for name, slot in sorted(plan.named.items())
    )
    by_size = (
        f"WHEN _metadata.file_size IN ({', '.join(map(str, unique))}) "
        f"THEN _metadata.file_size * {plan.stride} + _metadata.row_index"
        if unique
        else ""
    )
    return f"CASE {by_size} {by_name} ELSE raise_error({sql_string(SIZE_MISMATCH)}) END"


def delete_sources(plan: KeyPlan, index: DeleteIndex) -> DeleteSources:
    """Which delete file holds positions of which of the plan's files, and their key spans."""
    sources = DeleteSources()
    for f in plan.files:
        span = plan.span(f)
        for d in index.position_deletes_of(f):
            name = spark_name(d.file_key)
            if is_deletion_vector(d.data_file):
                offset, length = content_range(d.data_file) or (0, 0)  # a vector always has its range
                sources.blobs[name].append((offset, length, span))
            else:
                for alias in {normalize_path(f.data_file.file_path), normalize_path(f.path)}:
                    sources.named[name][alias] = span
    return sources


def deleted_keys(spark: SparkSession, deletes: Sequence[LiveFile], sources: DeleteSources) -> DataFrame:
    """One :data:`KEY` row per deleted position of the files ``sources`` names, read on executors in
    a few tasks (each Python task costs ~0.2 s to start; a delete file ~1 ms to parse)."""
    names = {*sources.named, *sources.blobs}
    keys = sorted({d.file_key for d in deletes if spark_name(d.file_key) in names})
    with session_conf(spark, DRIVER_LISTING):
        files = spark.read.format("binaryFile").load([spark_uri(k) for k in keys]).select("path", "content")
    tasks = max(1, min(default_parallelism(spark), -(-len(keys) // FILES_PER_TASK)))
    task = _keys_task(dict(sources.named), dict(sources.blobs))
    return files.coalesce(tasks).mapInArrow(task, f"{KEY} long")


def drop_deleted(rows: DataFrame, keys: DataFrame) -> DataFrame:
    """``rows`` (with :data:`KEY`) without the deleted ones, the key column dropped."""
    return rows.join(keys, KEY, "left_anti").drop(KEY)


def _keys_task(named: dict[str, dict[str, Span]], blobs: dict[str, list[tuple[int, int, Span]]]) -> Task:
    """mapInArrow function over ``binaryFile`` rows: the keys of the positions each file deletes."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for name, content in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
                for keys in _file_keys(content, named.get(name), blobs.get(name, ())):
                    yield pa.RecordBatch.from_arrays([pa.array(keys, pa.int64())], [KEY])

    return run


def _file_keys(
    content: bytes, named: dict[str, Span] | None, blobs: Sequence[tuple[int, int, Span]]
) -> Iterator[np.ndarray]:
    """The keys of one delete file: a Parquet file's rows of the data files in ``named``, or the
    positions of its deletion vector ``blobs``."""
    for offset, length, span in blobs:
        yield vector_keys(deserialize_dv(content[offset : offset + length]), span)
    if named:
        yield parquet_keys(pq.read_table(pa.BufferReader(content), columns=["file_path", "pos"]), named)


def parquet_keys(table: pa.Table, named: dict[str, Span]) -> np.ndarray:
    """The keys of a position delete file's rows that name one of the files in ``named`` (by
    normalized path), below that file's row count.

    >>> t = pa.table({"file_path": ["file:/d/a", "/d/b", "file:///d/a", "/d/a"], "pos": [1, 2, 3, 7]})
    >>> parquet_keys(t, {"/d/a": Span(100, 5)}).tolist()
    [101, 103]
    """
    paths = pc.dictionary_encode(table.column("file_path").combine_chunks())
    spans = [named.get(normalize_path(p)) for p in paths.dictionary.to_pylist()]
    bases = np.array([s.base if s else -1 for s in spans], np.int64)
    limits = np.array([s.rows if s else 0 for s in spans], np.int64)
    codes = paths.indices.to_numpy(zero_copy_only=False)
    positions = table.column("pos").to_numpy()
    keep = (bases[codes] >= 0) & (positions >= 0) & (positions < limits[codes])
    return bases[codes][keep] + positions[keep]


def vector_keys(vector: BitMap64, span: Span) -> np.ndarray:
    """The keys of a deletion vector's positions that lie within its data file's rows."""
    return span_keys(vector_positions(vector), span)


def vector_positions(vector: BitMap64) -> np.ndarray:
    """A deletion vector's positions as longs, ascending."""
    return np.frombuffer(vector.to_array(), np.uint64).astype(np.int64)


def span_keys(positions: np.ndarray, span: Span) -> np.ndarray:
    """The keys of one data file's ``positions`` that lie within its rows."""
    keep = (positions >= 0) & (positions < span.rows)
    return span.base + positions[keep]
