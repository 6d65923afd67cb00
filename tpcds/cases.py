"""The paper's four evaluation cases (§5, Figures 9-15) over TPC-DS ``store_sales``: what each case
changes, which engines run it, and the batch generators.

The table is ``store_sales`` partitioned by ``bucket(16, ss_ticket_number)`` (``NUM_BUCKETS``). Each
case is ``ITERATIONS`` consecutive MERGEs; iteration ``i`` merges the batch of seed ``i``, built from
the *base* table (the source Parquet), so every engine merges exactly the same rows in the same order.

====  ==============  ================================================================================
case  name            batch of one iteration
====  ==============  ================================================================================
1     streaming       per bucket ``streaming_rows_per_bucket`` updates + as many inserts (paper: 25 +
                      25 per partition; fewer when a bucket holds < 2,500 rows: 1% of its rows)
2     micro-batch     ``upsert_batch(0.01, 0.01)``: ~1% of the rows updated across all buckets + ~1% new
3     batch           ~50% of the rows of 2 of the 16 buckets (~10% of the partitions, drawn per seed)
                      updated, plus inserts of ~0.1% of those buckets' rows
4     runtime-filter  ``CASE4_ROWS`` updates confined to the buckets whose files make up at most 25% of
                      the table's data files (``choose_file_buckets``); the MERGE has no static predicate
====  ==============  ================================================================================

Pure functions here (the sizes, the bucket choice, the engine lists) need no Spark; the generators take
a DataFrame and stay lazy.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame

from tpcds.batches import (
    ITEM,
    TICKET,
    _combine,
    _sample,
    _shifted,
    _table_stats,
    _unit_hash,
    _updated,
    batch_for_partitions,
    choose_buckets,
    iceberg_bucket,
    streaming_batch,
    upsert_batch,
)

NUM_BUCKETS = 16
ITERATIONS = 10
CASE_NAMES = {1: "streaming", 2: "micro-batch", 3: "batch", 4: "runtime-filter"}
STREAMING_ROWS = 25  # paper: 25 updates + 25 inserts per partition
CASE3_BUCKETS = 2  # ~10% of the 16 partitions
CASE3_UPDATE_FRACTION = 0.5
CASE3_INSERT_FRACTION = 1e-3
CASE4_ROWS = 100
CASE4_FILE_FRACTION = 0.25
TINY_ROWS = 10_000
TINY_BATCH_ROWS = 10  # 5 updates + 5 inserts

FIXED = ("copy-on-write", "position-delete", "equality-delete")
# rowops series on a format v3 table (``db.store_sales_v3``: position deletes are deletion vectors), by
# mode: the strategy they request
ROWOPS_V3 = {"deletion-vectors": "position-delete", "auto-v3": "auto"}
ICEBERG_MODES = ("copy-on-write", "merge-on-read", "deletion-vectors")
NO_FILTER = "no-runtime-filter"  # suffix of a series that runs with runtime file filtering off


@dataclass(frozen=True)
class Series:
    """One engine configuration of a case: ``rowops <strategy>`` or ``iceberg <mode>``, optionally with
    runtime file filtering off (Case 4)."""

    engine: str  # "rowops" | "iceberg"
    mode: str  # a rowops strategy or an Iceberg mode
    runtime_filter: bool = True

    @property
    def name(self) -> str:
        return f"{self.engine} {self.mode}" + ("" if self.runtime_filter else f" {NO_FILTER}")

    @classmethod
    def parse(cls, name: str) -> Series:
        """``"rowops copy-on-write no-runtime-filter"`` -> ``Series("rowops", "copy-on-write", False)``.

        >>> Series.parse("iceberg merge-on-read")
        Series(engine='iceberg', mode='merge-on-read', runtime_filter=True)
        >>> Series.parse("rowops copy-on-write no-runtime-filter").name
        'rowops copy-on-write no-runtime-filter'
        """
        engine, mode, *rest = name.split()
        return cls(engine, mode, rest != [NO_FILTER])

    @property
    def format_version(self) -> int:
        """The table format a rowops series writes: 3 for ``ROWOPS_V3`` modes, else 2.

        >>> Series("rowops", "deletion-vectors").format_version, Series("rowops", "auto").format_version
        (3, 2)
        """
        return 3 if self.engine == "rowops" and self.mode in ROWOPS_V3 else 2

    @property
    def strategy(self) -> str:
        """The strategy a rowops series requests (``deletion-vectors`` -> ``position-delete`` on v3)."""
        return ROWOPS_V3.get(self.mode, self.mode)


def case_series(case: int, subset: bool = False, best_iceberg: str | None = None) -> list[Series]:
    """The engine configurations a case runs.

    Full run: every rowops strategy + ``auto`` on v2, position deletes and ``auto`` on v3 (deletion
    vectors), and every Iceberg mode (Cases 1-3); Case 4 is rowops and Iceberg copy-on-write with
    runtime filtering on and off. ``subset`` (the SF 10 mode) keeps what the SF 10 ratios need: ``auto``
    and the best Iceberg mode (``best_iceberg``, e.g. from the SF 1 result), plus equality deletes in
    Case 1 (its SF 10 / SF 1 write ratio at the same changed rows); Case 4 keeps both copy-on-writes with
    runtime filtering on.

    >>> [s.name for s in case_series(1, subset=True, best_iceberg="merge-on-read")]
    ['rowops auto', 'rowops equality-delete', 'iceberg merge-on-read']
    >>> [s.name for s in case_series(4, subset=True)]
    ['rowops copy-on-write', 'iceberg copy-on-write']
    >>> [s.name for s in case_series(2)][3:6]
    ['rowops auto', 'rowops deletion-vectors', 'rowops auto-v3']
    >>> len(case_series(2))
    9
    """
    if case == 4:
        full = [
            Series("rowops", "copy-on-write"),
            Series("rowops", "copy-on-write", runtime_filter=False),
            Series("iceberg", "copy-on-write"),
            Series("iceberg", "copy-on-write", runtime_filter=False),
        ]
        return [s for s in full if s.runtime_filter] if subset else full
    if not subset:
        return [
            *(Series("rowops", s) for s in (*FIXED, "auto", *ROWOPS_V3)),
            *(Series("iceberg", m) for m in ICEBERG_MODES),
        ]
    chosen = [Series("rowops", "auto")]
    if case == 1:
        chosen.append(Series("rowops", "equality-delete"))
    return [*chosen, Series("iceberg", best_iceberg or DEFAULT_BEST_ICEBERG[case])]


# The best Iceberg write mode per case when no SF 1 result says otherwise (the paper's findings:
# merge-on-read for sparse changes, copy-on-write for dense ones).
DEFAULT_BEST_ICEBERG = {1: "merge-on-read", 2: "merge-on-read", 3: "copy-on-write", 4: "copy-on-write"}


def streaming_rows_per_bucket(
    table_rows: int, num_buckets: int = NUM_BUCKETS, wanted: int = STREAMING_ROWS
) -> int:
    """Updates (and inserts) per bucket of a Case 1 batch: ``wanted``, or 1% of a bucket's rows when a
    bucket holds fewer than ``100 * wanted`` rows (tiny scale factors), at least 1.

    >>> streaming_rows_per_bucket(2_880_404)
    25
    >>> streaming_rows_per_bucket(28_810)
    18
    >>> streaming_rows_per_bucket(100)
    1
    """
    per_bucket = table_rows // num_buckets
    return max(1, min(wanted, per_bucket // 100))


def choose_file_buckets(
    files_per_bucket: Mapping[int, int], fraction: float = CASE4_FILE_FRACTION, seed: int = 4
) -> list[int]:
    """Buckets holding together at most ``fraction`` of the data files (at least one bucket).

    Buckets are taken in a seeded random order and kept while the files they hold stay within
    ``floor(fraction * total files)``; a bucket that would exceed it is skipped.

    >>> choose_file_buckets({b: 1 for b in range(16)}, 0.25, seed=4)
    [5, 9, 10, 12]
    >>> sum({0: 3, 1: 1, 2: 1, 3: 1}[b] for b in choose_file_buckets({0: 3, 1: 1, 2: 1, 3: 1}, 0.5))
    3
    """
    total = sum(files_per_bucket.values())
    limit = max(1, math.floor(fraction * total))
    order = sorted(files_per_bucket)
    random.Random(seed).shuffle(order)
    chosen, files = [], 0
    for bucket in order:
        if files + files_per_bucket[bucket] <= limit:
            chosen.append(bucket)
            files += files_per_bucket[bucket]
    return sorted(chosen or order[:1])


def runtime_filter_batch(
    store_sales: DataFrame, buckets: Sequence[int], rows: int = CASE4_ROWS, seed: int = 7
) -> DataFrame:
    """``rows`` updates of rows of the given buckets (Case 4): the rows with the smallest key hash."""
    in_chosen = iceberg_bucket(TICKET, NUM_BUCKETS).isin(list(buckets))
    picked = (
        store_sales.where(in_chosen)
        .withColumn("_case4_rank", _unit_hash(seed, "case4"))
        .orderBy("_case4_rank", TICKET, ITEM)
        .limit(rows)
        .drop("_case4_rank")
    )
    return _updated(picked).select(*store_sales.columns)


def case_batch(
    case: int, store_sales: DataFrame, seed: int, table_rows: int, case4_buckets: Sequence[int] = ()
) -> DataFrame:
    """The batch of ``case`` for iteration seed ``seed`` (lazy; ``store_sales`` is the base table)."""
    if case == 1:
        per_bucket = streaming_rows_per_bucket(table_rows)
        return streaming_batch(store_sales, per_bucket, NUM_BUCKETS, seed=seed)
    if case == 2:
        return upsert_batch(store_sales, 0.01, 0.01, seed=seed)
    if case == 3:
        return batch_for_partitions(
            store_sales,
            case3_buckets(seed),
            NUM_BUCKETS,
            CASE3_UPDATE_FRACTION,
            CASE3_INSERT_FRACTION,
            seed=seed,
        )
    if case == 4:
        if not case4_buckets:
            raise ValueError("Case 4 needs the buckets chosen from the table's files")
        return runtime_filter_batch(store_sales, case4_buckets, CASE4_ROWS, seed)
    raise ValueError(f"no case {case}; expected one of {sorted(CASE_NAMES)}")


def case3_buckets(seed: int) -> list[int]:
    """The 2 buckets a Case 3 batch of ``seed`` touches.

    >>> case3_buckets(1) == case3_buckets(1) and len(case3_buckets(1)) == 2
    True
    """
    return choose_buckets(CASE3_BUCKETS, NUM_BUCKETS, seed)


def tiny_batch(tiny: DataFrame, rows: int = TINY_BATCH_ROWS, seed: int = 7) -> DataFrame:
    """``rows // 2`` updates and ``rows - rows // 2`` inserts of a small table (the latency point)."""
    stats = _table_stats(tiny)
    ranked = tiny.withColumn("_tiny_rank", _unit_hash(seed, "tiny")).orderBy("_tiny_rank", TICKET, ITEM)
    updates = _updated(ranked.limit(rows // 2).drop("_tiny_rank"))
    pool = _sample(tiny, 1.0, seed, "tiny-insert").withColumn("_tiny_rank", _unit_hash(seed, "tiny-insert"))
    inserts = _shifted(
        pool.orderBy("_tiny_rank", TICKET, ITEM).limit(rows - rows // 2).drop("_tiny_rank"),
        stats.ticket_offset,
    )
    return _combine(tiny, updates, inserts)


def tiny_table(store_sales: DataFrame, rows: int = TINY_ROWS) -> DataFrame:
    """The first ``rows`` rows of ``store_sales`` in key order (deterministic)."""
    return store_sales.orderBy(TICKET, ITEM).limit(rows)


__all__ = [
    "CASE_NAMES",
    "Series",
    "case_batch",
    "case_series",
    "choose_file_buckets",
    "runtime_filter_batch",
    "streaming_rows_per_bucket",
    "tiny_batch",
    "tiny_table",
]
