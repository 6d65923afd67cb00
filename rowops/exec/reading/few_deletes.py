"""A few position deletes, read by the driver and applied as a filter on each row's key: no job, no join.

Otherwise a read of files under position deletes runs a Spark job that reads the deletes (Python
tasks for deletion vectors and row keys), then anti-joins every row with them. On the paper's Case 1
(SF 1, one streaming write: 400 positions over 16 files) that job, the broadcast and the join took
0.5-0.9 s of a 1.6-1.9 s read whose scan alone takes 0.7 s.

Up to :data:`MAX_POSITIONS` positions in :data:`MAX_BYTES` of delete files (both counted in the
manifests, before anything is read) are read here instead: deletion vector blobs by their byte range,
position delete files whole, in a few threads through the lake's file system. Those are the rows a
broadcast would have brought to the driver anyway, bounded; the commit path reads deletion vectors on
the driver the same way (``commit/row_conflicts.py``). Each row's key (``position_keys.row_key``) is then
filtered by ``NOT key IN (...)``: Spark keeps a list of more than ten values as a hash set passed to the
generated code by reference (:data:`position_keys.IN_SET`), so the next read of a growing table reuses
the compiled scan. Spark parses the list as SQL text, about 0.1 s for 400 keys and 0.3 s for 4,000:
the bound keeps that below the job and join it replaces.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyspark.sql import DataFrame

from rowops.exec.reading import position_keys
from rowops.exec.reading.position_keys import IN_SET, KEY, KeyPlan, Span, parquet_keys, vector_keys
from rowops.exec.spark.listing import spark_name
from rowops.meta.delete_index import DeleteIndex
from rowops.meta.fileio import filesystem
from rowops.meta.files import LiveFile
from rowops.meta.puffin import read_deletion_vector
from rowops.meta.v3 import content_range, is_deletion_vector

MAX_POSITIONS = 4096
MAX_BYTES = 1 << 20
READ_THREADS = 8


def read_few(
    io: FileIO | None, files: Sequence[LiveFile], index: DeleteIndex, deletes: Sequence[LiveFile]
) -> tuple[KeyPlan, np.ndarray] | None:
    """The key plan of ``files`` (under position deletes only) and the sorted keys ``deletes`` remove
    from them; None without ``io``, or when the deletes hold more than :data:`MAX_POSITIONS`
    positions or :data:`MAX_BYTES` bytes, or the files' rows cannot be keyed."""
    if io is None or not deletes or sum(d.record_count for d in deletes) > MAX_POSITIONS:
        return None
    if sum(_bytes(d) for d in deletes) > MAX_BYTES:
        return None
    plan = position_keys.plan_keys(files, min_files=1)
    if plan is None:
        return None
    sources = position_keys.delete_sources(plan, index)
    keys_of = {spark_name(d.file_key): d.file_key for d in deletes}
    reads = [
        functools.partial(_blob_keys, io, keys_of[name], offset, length, span)
        for name, blobs in sources.blobs.items()
        for offset, length, span in blobs
    ]
    reads += [
        functools.partial(_delete_file_keys, io, keys_of[name], named)
        for name, named in sources.named.items()
    ]
    with ThreadPoolExecutor(min(READ_THREADS, max(1, len(reads)))) as pool:
        found = list(pool.map(lambda read: read(), reads))
    return plan, np.unique(np.concatenate(found)) if found else np.empty(0, np.int64)


def drop_listed(rows: DataFrame, keys: np.ndarray) -> DataFrame:
    """``rows`` (with :data:`KEY`) without those whose key is in ``keys``, the key column dropped.

    The list is padded with negative values (never a key) to more than ten, so that Spark always
    compiles a hash set lookup: the same code whichever keys a read removes."""
    listed = [*map(str, keys.tolist()), *(str(-i) for i in range(1, IN_SET - len(keys) + 1))]
    return rows.where(f"NOT ({KEY} IN ({', '.join(listed)}))").drop(KEY)


def _bytes(d: LiveFile) -> int:
    """What reading ``d`` costs in bytes: a deletion vector's blob, else the whole file."""
    where = content_range(d.data_file) if is_deletion_vector(d.data_file) else None
    return where[1] if where is not None else d.size


def _blob_keys(io: FileIO, key: str, offset: int, length: int, span: Span) -> np.ndarray:
    """The keys of the deletion vector blob at ``offset``/``length`` of the Puffin file at ``key``."""
    fs, path = filesystem(io, key)
    return vector_keys(read_deletion_vector(fs, path, offset, length), span)


def _delete_file_keys(io: FileIO, key: str, named: dict[str, Span]) -> np.ndarray:
    """The keys of the position delete file at ``key`` (``named``: the data files it may name, by
    normalized path)."""
    fs, path = filesystem(io, key)
    return parquet_keys(pq.read_table(path, filesystem=fs, columns=["file_path", "pos"]), named)
