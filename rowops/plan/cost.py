"""The cost model behind ``strategy="auto"`` and hybrid encoding.

Costs are in bytes-equivalents of scan work, the currency of row-level operations on a lake. An
encoding's cost is its write cost plus ``read_weight`` times the read overhead of the table state it
leaves behind (``rowops.read-weight``: how many reads follow each write; default 1). Counting the whole
overhead left behind, not only the part this write adds, is what makes ``auto`` compact on the way:
deletes pile up as long as reading them stays cheaper than rewriting, then a rewrite clears them.

* copy-on-write: the scanning join (which applies the candidates' deletes), then read and rewrite every
  touched file and every candidate file under deletes (Arrow, or Spark where Arrow cannot); they are
  clean afterwards.
* position-delete: the scanning join (key columns only) and one small delete file per touched file;
  reads anti-join the rows of each file that has position deletes.
* equality-delete: no target read at all; writes the new rows and the keys. Reads anti-join every older
  row of the touched partitions with the keys.

The constants were measured on TPC-DS store_sales SF 1 (103 MB, 2.9M rows) on the 2-core reference
machine, where a plain scan of the table takes ~0.7 s (see docs/ARCHITECTURE.md, "Planning: cost-based `auto`", and tpcds/results/HISTORY.md).

>>> est = Estimate(source_rows=1_000, source_bytes=100_000, candidate_bytes=50_000_000,
...                candidate_rows=500_000, candidate_files=10, key_fraction=0.1, partition_bytes=50_000_000)
>>> costs = strategy_costs(est, read_weight=1.0)
>>> min(costs, key=costs.get)
'equality-delete'
>>> heavy = Estimate(source_rows=1_000, source_bytes=100_000, candidate_bytes=50_000_000,
...                  candidate_rows=500_000, candidate_files=10, key_fraction=0.1,
...                  partition_bytes=50_000_000_000)
>>> min(strategy_costs(heavy, 1.0), key=strategy_costs(heavy, 1.0).get)
'position-delete'

Each upsert leaves equality deletes on every candidate file: a read anti-joins the 50 MB (80 MB of
debt) and opens 10 more delete files and 10 more small data files (40 MiB more per generation).
After six upserts reads have paid the debt 3.5 times over, still less than a copy-on-write (its join
pays one read's debt, its rewrite resolves the deletes to positions); after seven, 4 times: rewrite.

>>> from dataclasses import replace
>>> def after(g: int) -> Estimate:
...     return replace(est, debt_bytes=80_000_000 + g * 40 * MIB, debt_generations=g, eq_deleted_bytes=50_000_000,
...                    deleted_bytes=50_000_000)
>>> [min(strategy_costs(after(g), 1.0), key=strategy_costs(after(g), 1.0).get) for g in (6, 7)]
['equality-delete', 'copy-on-write']

Debt outside the candidates (partitions an earlier batch left deletes on, and this one does not
touch) counts once reads have paid for it more than its rewrite costs (``debt.outside_paydown``):
a copy-on-write then rewrites those partitions too, and wins where that rent outweighs its price.

>>> far = replace(est, outside_paid_bytes=2_000 * MIB, outside_rewrite_bytes=500 * MIB)
>>> min(strategy_costs(far, 1.0), key=strategy_costs(far, 1.0).get)
'copy-on-write'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MIB = 1024 * 1024
DELETE_ROW_BYTES = 16  # one (file_path, pos) row in a compressed position-delete file
FILE_OPEN_BYTES = 2 * MIB  # one more file in a read (open, footer, task): ~11 ms, measured at SF 1
FILE_OPEN_MS = 11  # the same in time, as reports state it (a fixed cost per file, whatever its size)
# The least a full read of any table costs (its Spark job, planning, a task's start), ~0.35 s at the
# rate of FILE_OPEN_BYTES (an estimate; warm reads of tiny tables take about that): overheads are
# stated as a share of a read no cheaper than this, not of a table's few kilobytes (``overhead_ratio``)
READ_FLOOR_BYTES = 64 * MIB
SCAN_JOIN_FIXED_BYTES = 448 * MIB  # the scanning encodings' extra jobs (join, summary, deletes): ~2.5 s
REWRITE_FACTOR = 8.0  # rewriting a file in Arrow (read all columns, encode, compress, write) vs scanning it
SPARK_REWRITE_FACTOR = 20.0  # the same through Spark's rewrite (scan, anti-join, parquet-mr): 15-28 s at SF 1
EQ_DELETE_READ_FACTOR = 1.6  # a read anti-joins rows older than equality deletes: +1.1-1.3 s on a 0.7 s scan
POS_DELETE_READ_FACTOR = 1.5  # a read anti-joins the rows of files with position deletes: +1.0-1.6 s
# each live delete row (key or position) in every read: its broadcast and the probes that meet it.
# Reads grew 2.4-4.6 us per delete row written per generation (SF 1 Cases 2-3, both kinds): ~512 B
DELETE_ROW_READ_BYTES = 512
# a rewrite by key's own job after the new rows' (the driver's planning of it, its tasks' start): a
# 10-row upsert into a 10,000-row table wrote in 1.28 s by key against 0.89 s by equality deletes
# (medians of ten), whose delete file it does not write
KEYED_REWRITE_FIXED_BYTES = 96 * MIB


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
        debt_bytes: read overhead the candidate files already carry (their live deletes).
        pos_deleted_bytes / eq_deleted_bytes: candidate (partition) bytes already under position
            (equality) deletes: more deletes of the same kind add little to their read cost.
        debt_generations: how many commits left the debt; reads have paid it while it grew.
        spark_rewrite_bytes: candidate bytes a copy-on-write would rewrite through Spark rather than
            in Arrow (``exec/rewriting/arrow_rewrite.py``: another partition spec, partition-scoped equality
            deletes, nested columns, out of the sort order, or the Arrow rewrite turned off).
        deleted_bytes: candidate bytes under any delete: a copy-on-write chosen by cost rewrites them
            too, touched or not, and so clears the debt of every candidate file.
        outside_paid_bytes / outside_rewrite_bytes: the read debt of partitions outside the
            candidates that reads have already paid for at least once over (``debt.outside_paydown``),
            and what rewriting them costs. A copy-on-write chosen by cost rewrites them too (it pays
            the rewrite); the other encodings leave that debt to the reads to come.
    """

    source_rows: int
    source_bytes: int
    candidate_bytes: int
    candidate_rows: int
    candidate_files: int
    key_fraction: float
    partition_bytes: int
    debt_bytes: float = 0.0
    pos_deleted_bytes: int = 0
    eq_deleted_bytes: int = 0
    debt_generations: int = 0
    spark_rewrite_bytes: int = 0
    deleted_bytes: int = 0
    outside_paid_bytes: float = 0.0
    outside_rewrite_bytes: float = 0.0


def read_overhead(size: int, pos_deleted: bool, eq_deleted: bool) -> float:
    """What the deletes on one data file add to each read (the anti-joins, the delete file's open).

    The data file's own open is not counted: every encoding leaves a file there.

    >>> read_overhead(100 * MIB, pos_deleted=False, eq_deleted=False)
    0.0
    """
    pos = POS_DELETE_READ_FACTOR * size + FILE_OPEN_BYTES if pos_deleted else 0.0
    return pos + (EQ_DELETE_READ_FACTOR * size if eq_deleted else 0.0)


def strategy_costs(est: Estimate, read_weight: float) -> dict[str, float]:
    """Total cost (write + read_weight * read overhead left on the candidate files) of each encoding."""
    matched_rows = min(est.source_rows, est.candidate_rows)
    touched_files = min(est.candidate_files, max(matched_rows, 0))
    touched = est.candidate_bytes * touched_files / est.candidate_files if est.candidate_files else 0.0
    new_files = FILE_OPEN_BYTES * max(touched_files, 1)  # new rows: about one file per touched partition
    # the scanning join reads the candidates with their deletes applied: it pays one read's debt
    join = SCAN_JOIN_FIXED_BYTES + est.key_fraction * est.candidate_bytes + est.debt_bytes
    new_rows = 2.0 * est.source_bytes
    # Deletes pos/eq leave in place; copy-on-write clears the touched share. A debt that grew over g
    # commits has been paid by reads about (g + 1) / 2 times over: counting that, a rewrite is chosen
    # once reads have paid about as much as it costs (ski rental), not only when one read would.
    kept = est.debt_bytes * max(1.0, (est.debt_generations + 1) / 2.0)
    # copy-on-write rewrites the touched files and every candidate file under deletes (its debt)
    rewritten = min(float(est.candidate_bytes), max(touched, float(est.deleted_bytes)))
    share = rewritten / est.candidate_bytes if est.candidate_bytes else 0.0
    rewrite = rewrite_cost(rewritten, share * est.spark_rewrite_bytes, share * est.eq_deleted_bytes)
    pos_new = (
        POS_DELETE_READ_FACTOR * max(touched - est.pos_deleted_bytes, 0)
        + FILE_OPEN_BYTES * touched_files
        + DELETE_ROW_READ_BYTES * matched_rows
    )
    eq_new = (
        EQ_DELETE_READ_FACTOR * max(est.partition_bytes - est.eq_deleted_bytes, 0)
        + new_files
        + DELETE_ROW_READ_BYTES * est.source_rows  # a key per source row
    )
    outside = est.outside_paid_bytes  # left by the encodings that rewrite nothing outside
    return {
        "copy-on-write": join + rewrite + est.outside_rewrite_bytes + new_rows
        + read_weight * (kept * (1.0 - share) + new_files),
        "position-delete": join + new_rows + matched_rows * DELETE_ROW_BYTES
        + read_weight * (kept + pos_new + new_files) + outside,
        "equality-delete": new_rows + read_weight * (kept + eq_new + new_files) + outside,
    }  # fmt: skip


def keyed_rewrite_cost(est: Estimate, read_weight: float) -> float:
    """A copy-on-write of a blind upsert rewritten by key (``exec/rewriting/keyed_rewrite.py``): no join, every
    candidate file rewritten in Arrow without the source's keys, the source written as new rows; all
    of the candidates' debt cleared. Infinite when some candidate would need Spark's rewrite.

    Dense batches confined to a few partitions (the paper's Case 3: half the rows of two buckets of
    store_sales SF 1) touch every candidate anyway: rewriting them by key (4.3 s, against 2.9 s for
    equality deletes) leaves reads at 0.7-1.2 s instead of 1.6-3.0 s. With one read per write the
    equality deletes are cheaper; from two reads per write, the rewrite.

    >>> est = Estimate(source_rows=180_000, source_bytes=9_000_000, candidate_bytes=13_000_000,
    ...                candidate_rows=360_000, candidate_files=2, key_fraction=0.1, partition_bytes=13_000_000)
    >>> [keyed_rewrite_cost(est, w) < min(strategy_costs(est, w).values()) for w in (1.0, 2.0)]
    [False, True]
    >>> from dataclasses import replace
    >>> keyed_rewrite_cost(replace(est, spark_rewrite_bytes=1), 1.0)
    inf
    """
    if est.spark_rewrite_bytes:
        return float("inf")
    new_files = FILE_OPEN_BYTES * max(min(est.candidate_files, est.source_rows), 1)
    rewrite = KEYED_REWRITE_FIXED_BYTES + rewrite_cost(est.candidate_bytes, 0.0, est.eq_deleted_bytes)
    return rewrite + est.outside_rewrite_bytes + 2.0 * est.source_bytes + read_weight * new_files


def keyed_position_cost(est: Estimate, read_weight: float) -> float:
    """Position deletes (deletion vectors on v3) of a blind upsert found by key
    (``exec/writing/keyed_deletes.py``): no join, the candidates' key columns read in Arrow tasks
    (with :data:`KEYED_REWRITE_FIXED_BYTES` for their job), one delete file per touched file; the read
    overhead left is the join's position deletes'.

    Case 2 at SF 1 (58,000 keys over 16 files): cheaper than the position deletes through the join,
    dearer than equality deletes at one read per write, as reads of position deletes still cost more.

    >>> est = Estimate(source_rows=58_000, source_bytes=2_900_000, candidate_bytes=103_000_000,
    ...                candidate_rows=2_880_000, candidate_files=16, key_fraction=0.1, partition_bytes=103_000_000)
    >>> costs = strategy_costs(est, 1.0)
    >>> costs["equality-delete"] < keyed_position_cost(est, 1.0) < costs["position-delete"]
    True
    """
    join_cost = SCAN_JOIN_FIXED_BYTES + est.key_fraction * est.candidate_bytes + est.debt_bytes
    keys = KEYED_REWRITE_FIXED_BYTES + est.key_fraction * est.candidate_bytes
    return strategy_costs(est, read_weight)["position-delete"] - join_cost + keys


def rewrite_cost(size: float, by_spark: float = 0.0, eq_deleted: float = 0.0) -> float:
    """Copy-on-write of ``size`` bytes of data files, as the path that will run: in Arrow, except
    ``by_spark`` bytes through Spark's rewrite; the rows equality deletes remove from ``eq_deleted``
    bytes are first resolved to positions (a key-only read and a semi-join, priced as one read's
    anti-join of those files).

    >>> rewrite_cost(100 * MIB) / MIB, rewrite_cost(100 * MIB, by_spark=100 * MIB) / MIB
    (800.0, 2000.0)
    >>> rewrite_cost(100 * MIB, eq_deleted=100 * MIB) / MIB
    960.0
    """
    by_spark = min(by_spark, size)
    return (
        REWRITE_FACTOR * (size - by_spark)
        + SPARK_REWRITE_FACTOR * by_spark
        + EQ_DELETE_READ_FACTOR * min(eq_deleted, size - by_spark)
    )


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

    The scan is already paid for; rewriting costs reading and rewriting the file's surviving rows and
    leaves a clean file, while deletes cost their write plus ``read_weight`` times what each later
    read spends on the file's deletes (old and new; equality deletes too, when they apply to it).

    >>> rewrite_is_cheaper(FileChange("f", rows=1_000, size=1_000_000, changed_rows=10), read_weight=1)
    False
    >>> rewrite_is_cheaper(FileChange("f", rows=1_000, size=1_000_000, changed_rows=900), read_weight=1)
    True
    """
    if change.rows <= 0:
        return False
    deleted = change.changed_rows + change.existing_deletes
    survive = max(change.rows - deleted, 0) / change.rows
    rewrite = change.size * survive * REWRITE_FACTOR
    # the delete file's open plus the anti-joins (the data file is opened either way)
    deletes_read = read_overhead(change.size, pos_deleted=True, eq_deleted=change.equality_deleted)
    deletes_read += deleted * (DELETE_ROW_READ_BYTES + change.size / change.rows)  # deleted rows still read
    return rewrite < change.changed_rows * DELETE_ROW_BYTES + read_weight * deletes_read


def small_files_to_merge(sizes: Sequence[int], read_weight: float) -> int:
    """How many of a partition's smallest untouched files to fold into a rewrite of that partition.

    Merging ``n`` files into the partition's rewrite costs reading and writing them once and saves
    ``n`` file opens on every later read. Files are taken smallest first while that pays off.

    >>> small_files_to_merge([50_000, 100_000, 900_000_000], read_weight=1.0)
    2
    >>> small_files_to_merge([200_000, 150_000], read_weight=0.0)
    0
    """
    count = 0
    for size in sorted(sizes):
        if not worth_merging(size, read_weight):
            break
        count += 1
    return count


def overhead_ratio(overhead: float, data_bytes: int) -> float:
    """A read overhead as a share of a full read: of the data's bytes, never less than
    ``READ_FLOOR_BYTES`` (a read's fixed cost), so that fixed per-file costs on a tiny table are not
    expressed as a multiple of its size.

    >>> round(overhead_ratio(12 * FILE_OPEN_BYTES, 30_000), 3)  # twelve files' opens, a 30 KB table
    0.375
    >>> overhead_ratio(256 * MIB, 1024 * MIB)
    0.25
    """
    return overhead / max(data_bytes, READ_FLOOR_BYTES)


def worth_merging(size: int, read_weight: float) -> bool:
    """Whether rewriting a file into a bigger one costs less than its open on the reads to come.

    >>> worth_merging(50_000, read_weight=1.0), worth_merging(50_000_000, read_weight=1.0)
    (True, False)
    """
    return REWRITE_FACTOR * size < read_weight * FILE_OPEN_BYTES


def choose_cheapest(costs: Mapping[str, float], allowed: set[str]) -> str:
    """The cheapest allowed strategy (ties break toward reads: copy-on-write, then position deletes).

    >>> choose_cheapest({"copy-on-write": 5, "position-delete": 5, "equality-delete": 1}, {"copy-on-write", "position-delete"})
    'copy-on-write'
    """
    order = [
        s for s in ("copy-on-write", "position-delete", "equality-delete") if s in allowed and s in costs
    ]
    return min(order, key=lambda s: (costs[s], order.index(s)))
