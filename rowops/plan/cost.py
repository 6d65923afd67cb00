"""The cost model behind ``strategy="auto"`` and hybrid encoding.

Costs are in bytes moved (read + written), the currency that dominates row-level operations on a lake.
A write strategy's total cost is its write cost plus ``read_weight`` times the extra cost it adds to
each later read of the table (``rowops.read-weight``: how many reads follow each write; default 1).

* copy-on-write: read and rewrite every touched file in full; adds nothing to reads.
* position-delete: read the key columns of the candidate files, write the new rows and a small delete
  file per touched file; each read then loads those deletes and filters the positions.
* equality-delete: no target read at all; writes the new rows and the keys. Each later read joins every
  older row of the touched partitions against the delete keys, the expensive part.

>>> est = Estimate(source_rows=1_000, source_bytes=100_000, candidate_bytes=50_000_000,
...                candidate_rows=500_000, candidate_files=10, key_fraction=0.1, partition_bytes=50_000_000)
>>> costs = strategy_costs(est, read_weight=1.0)
>>> min(costs, key=costs.get)
'position-delete'
>>> min(strategy_costs(est, read_weight=0.0), key=strategy_costs(est, read_weight=0.0).get)
'equality-delete'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

DELETE_ROW_BYTES = 16  # one (file_path, pos) row in a compressed position-delete file
FILE_OPEN_BYTES = 1024 * 1024  # fixed cost of one more file in a read (task, footer, open), in bytes
EQ_DELETE_READ_FACTOR = 4.0  # a read joins every older row with the delete keys: measured ~4-8x a plain scan
POS_DELETE_READ_FACTOR = 4.0  # read amplification per position delete row (decode + anti-join)


@dataclass(frozen=True)
class Estimate:
    """What the planner knows before writing: from metadata and a key-only pre-scan of the source.

    Attributes:
        source_rows / source_bytes: size of the change set.
        candidate_rows / candidate_bytes / candidate_files: data files that may hold a source key
            (after partition and key-bound pruning).
        key_fraction: share of the candidate bytes in the key columns (from column-size metrics).
        partition_bytes: bytes of all data in the partitions the source touches (what later reads must
            join with new equality deletes).
    """

    source_rows: int
    source_bytes: int
    candidate_bytes: int
    candidate_rows: int
    candidate_files: int
    key_fraction: float
    partition_bytes: int


def strategy_costs(est: Estimate, read_weight: float) -> dict[str, float]:
    """Total cost (write + read_weight * added read cost) of each encoding."""
    matched_rows = min(est.source_rows, est.candidate_rows)
    touched_files = min(est.candidate_files, max(matched_rows, 0))
    cow_write = 2.0 * est.candidate_bytes + est.source_bytes
    pos_write = (
        est.key_fraction * est.candidate_bytes + 2.0 * est.source_bytes + matched_rows * DELETE_ROW_BYTES
    )
    pos_read = matched_rows * DELETE_ROW_BYTES * POS_DELETE_READ_FACTOR + touched_files * FILE_OPEN_BYTES
    eq_write = 2.0 * est.source_bytes
    eq_read = EQ_DELETE_READ_FACTOR * est.partition_bytes + est.source_bytes
    return {
        "copy-on-write": cow_write,
        "position-delete": pos_write + read_weight * pos_read,
        "equality-delete": eq_write + read_weight * eq_read,
    }


@dataclass(frozen=True)
class FileChange:
    """A touched data file at run time: its size and how many of its rows change."""

    path: str
    rows: int
    size: int
    changed_rows: int
    existing_deletes: int = 0
    equality_deleted: bool = False


def rewrite_is_cheaper(change: FileChange, read_weight: float) -> bool:
    """Hybrid encoding: rewrite this file (copy-on-write) rather than add position deletes to it?

    The scan is already paid for; rewriting costs reading and writing the file's surviving rows, while
    deletes cost their write plus ``read_weight`` times what each later read spends applying them (all
    of the file's deletes, old and new).

    >>> rewrite_is_cheaper(FileChange("f", rows=1_000, size=1_000_000, changed_rows=10), read_weight=1)
    False
    >>> rewrite_is_cheaper(FileChange("f", rows=1_000, size=1_000_000, changed_rows=900), read_weight=1)
    True
    """
    if change.rows <= 0:
        return False
    deleted = change.changed_rows + change.existing_deletes
    survive = max(change.rows - deleted, 0) / change.rows
    rewrite = change.size * survive * 2.0
    per_row = change.size / change.rows
    deletes_read = deleted * (DELETE_ROW_BYTES * POS_DELETE_READ_FACTOR + per_row) + FILE_OPEN_BYTES
    if change.equality_deleted:  # older than live equality deletes: every read joins it with them
        deletes_read += EQ_DELETE_READ_FACTOR * change.size
    return rewrite < change.changed_rows * DELETE_ROW_BYTES + read_weight * deletes_read


def small_files_to_merge(sizes: Sequence[int], read_weight: float) -> int:
    """How many of a partition's smallest untouched files to fold into a rewrite of that partition.

    Merging ``n`` files into the partition's rewrite costs reading and writing them once and saves
    ``n`` file opens on every later read. Files are taken smallest first while that pays off.

    >>> small_files_to_merge([200_000, 150_000, 900_000_000], read_weight=1.0)
    2
    >>> small_files_to_merge([200_000, 150_000], read_weight=0.0)
    0
    """
    count = 0
    for size in sorted(sizes):
        if 2.0 * size >= read_weight * FILE_OPEN_BYTES:
            break
        count += 1
    return count


def choose_cheapest(costs: Mapping[str, float], allowed: set[str]) -> str:
    """The cheapest allowed strategy (ties break toward reads: copy-on-write, then position deletes).

    >>> choose_cheapest({"copy-on-write": 5, "position-delete": 5, "equality-delete": 1}, {"copy-on-write", "position-delete"})
    'copy-on-write'
    """
    order = [
        s for s in ("copy-on-write", "position-delete", "equality-delete") if s in allowed and s in costs
    ]
    return min(order, key=lambda s: (costs[s], order.index(s)))
