"""Upsert batches over TPC-DS ``store_sales`` for the paper's pipelines, built lazily in Spark.

Every batch has the schema of ``store_sales`` and two kinds of rows, with no key repeated:

* updates: existing rows (composite key ``(ss_ticket_number, ss_item_sk)`` unchanged) with
  ``ss_quantity + 1`` (NULL becomes 1) and ``ss_net_paid``, ``ss_net_paid_inc_tax``,
  ``ss_net_profit`` each ``+ 1.00`` (NULL stays NULL), cast back to their original types;
* inserts: copies of existing rows whose ``ss_ticket_number`` is shifted past the table's largest
  ticket (``+ max - min + 1``), so their keys are new.

Rows are chosen by a hash of ``(seed, kind, key)``, not by ``DataFrame.sample``: the same seed picks
the same rows however the table is split into files or partitions, and the picks are uniform over
all tickets and buckets. The only driver-side work is one aggregate (min/max ticket, row count).

A batch is lazy and reads ``store_sales`` again when evaluated: when ``store_sales`` is the MERGE
target, materialize the batch (write it out, or cache and count it) before merging, or it will be
recomputed from the new snapshot.

``iceberg_bucket`` reproduces Iceberg's ``bucket(N, col)`` transform in plain Spark SQL, so the
per-bucket cases match the table's partitions:

* Case 1 (streaming): ``streaming_batch`` - a few updates and inserts in every bucket;
* Case 2 (micro-batch): ``upsert_batch`` - e.g. 1% updates and very few inserts spread over all buckets;
* Case 3 (batch): ``batch_for_partitions`` - about 50% of the rows of a subset of buckets.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from decimal import Decimal
from typing import NamedTuple

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from rowops.exec.spark.transforms import murmur3_bucket

TICKET = "ss_ticket_number"
ITEM = "ss_item_sk"
KEY_COLUMNS = (TICKET, ITEM)
QUANTITY = "ss_quantity"
MONEY_UPDATE_COLUMNS = ("ss_net_paid", "ss_net_paid_inc_tax", "ss_net_profit")

_UNIT = 1 << 53  # hash values are reduced modulo 2**53, which a double holds exactly
_ONE = Decimal("1.00")
_BUCKET = "_tpcds_bucket"
_RANK = "_tpcds_rank"


class _TableStats(NamedTuple):
    rows: int
    min_ticket: int
    max_ticket: int

    @property
    def ticket_offset(self) -> int:
        """Shift that moves every existing ticket number past the largest one."""
        return self.max_ticket - self.min_ticket + 1


def iceberg_bucket(column: Column | str, num_buckets: int) -> Column:
    """Iceberg's ``bucket(num_buckets, column)`` partition transform for an integer column.

    Iceberg hashes ints and longs as 8-byte longs with murmur3_32 (seed 0) and takes
    ``(hash & Integer.MAX_VALUE) % num_buckets``.

    Args:
        column: An integer (int or long) column or its name.
        num_buckets: Number of buckets, > 0.

    Returns:
        An int column with the bucket number in ``[0, num_buckets)`` (NULL-input rows get a bucket too;
        store_sales keys are never NULL).
    """
    _check(num_buckets > 0, f"num_buckets must be > 0, got {num_buckets}")
    return murmur3_bucket(F.col(column) if isinstance(column, str) else column, num_buckets)


def upsert_batch(
    store_sales: DataFrame, update_fraction: float = 0.01, insert_fraction: float = 0.01, seed: int = 7
) -> DataFrame:
    """Updates of about ``update_fraction`` of the rows plus about ``insert_fraction`` new rows.

    Both kinds are spread uniformly over all tickets (hence over all buckets). Case 2 of the paper
    is ``update_fraction=0.01`` with ``insert_fraction`` around ``2.3e-6``.

    Args:
        store_sales: The current table (or a DataFrame with its rows); not collected.
        update_fraction: Expected fraction of existing rows to update, in ``[0, 1]``.
        insert_fraction: Expected number of new rows as a fraction of the table's rows, in ``[0, 1]``.
        seed: Selects the rows; the same seed gives the same batch for the same table content.

    Returns:
        A lazy DataFrame with the schema of ``store_sales`` and unique composite keys.
    """
    _check_fraction(update_fraction, "update_fraction")
    _check_fraction(insert_fraction, "insert_fraction")
    stats = _table_stats(store_sales)
    updates = _updated(_sample(store_sales, update_fraction, seed, "update"))
    inserts = _shifted(_sample(store_sales, insert_fraction, seed, "insert"), stats.ticket_offset)
    return _combine(store_sales, updates, inserts)


def streaming_batch(
    store_sales: DataFrame, rows_per_bucket: int = 25, num_buckets: int = 256, seed: int = 7
) -> DataFrame:
    """``rows_per_bucket`` updates and ``rows_per_bucket`` inserts in every bucket (Case 1).

    Buckets are Iceberg's ``bucket(num_buckets, ss_ticket_number)``; an insert is counted in the
    bucket of its new ticket number. A bucket holding fewer rows than asked gives all it can.

    Args:
        store_sales: The current table; not collected.
        rows_per_bucket: Updates (and, separately, inserts) per bucket, >= 0.
        num_buckets: Number of buckets of the table's ``bucket`` partitioning.
        seed: Selects the rows; the same seed gives the same batch for the same table content.

    Returns:
        A lazy DataFrame with the schema of ``store_sales`` and unique composite keys.
    """
    _check(rows_per_bucket >= 0, f"rows_per_bucket must be >= 0, got {rows_per_bucket}")
    stats = _table_stats(store_sales)
    fraction = _oversampling_fraction(rows_per_bucket, num_buckets, stats.rows)
    update_pool = _sample(store_sales, fraction, seed, "update")
    insert_pool = _shifted(_sample(store_sales, fraction, seed, "insert"), stats.ticket_offset)
    updates = _updated(_take_per_bucket(update_pool, rows_per_bucket, num_buckets, seed))
    inserts = _take_per_bucket(insert_pool, rows_per_bucket, num_buckets, seed)
    return _combine(store_sales, updates, inserts)


def batch_for_partitions(
    store_sales: DataFrame,
    buckets: int | Sequence[int] = 25,
    num_buckets: int = 256,
    update_fraction: float = 0.5,
    insert_fraction: float = 1e-4,
    seed: int = 7,
) -> DataFrame:
    """Updates of about ``update_fraction`` of the rows of some buckets, plus inserts there (Case 3).

    Args:
        store_sales: The current table; not collected.
        buckets: The bucket numbers to touch, or how many to pick at random (from ``seed``).
        num_buckets: Number of buckets of the table's ``bucket(num_buckets, ss_ticket_number)``.
        update_fraction: Expected fraction of the chosen buckets' rows to update, in ``[0, 1]``.
        insert_fraction: Expected new rows as a fraction of the chosen buckets' rows, in ``[0, 1]``.
        seed: Selects buckets and rows.

    Returns:
        A lazy DataFrame with the schema of ``store_sales``, unique keys, all in the chosen buckets.
    """
    _check_fraction(update_fraction, "update_fraction")
    _check_fraction(insert_fraction, "insert_fraction")
    chosen = choose_buckets(buckets, num_buckets, seed)
    in_chosen = iceberg_bucket(TICKET, num_buckets).isin(chosen)
    stats = _table_stats(store_sales)
    updates = _updated(_sample(store_sales.where(in_chosen), update_fraction, seed, "update"))
    inserts = _shifted(_sample(store_sales, insert_fraction, seed, "insert"), stats.ticket_offset)
    return _combine(store_sales, updates, inserts.where(in_chosen))


def choose_buckets(buckets: int | Sequence[int], num_buckets: int, seed: int = 7) -> list[int]:
    """The sorted bucket numbers a Case 3 batch touches.

    >>> choose_buckets([3, 1, 3], 8)
    [1, 3]
    >>> len(choose_buckets(25, 256, seed=1))
    25

    Args:
        buckets: Explicit bucket numbers, or how many distinct buckets to draw with ``seed``.
        num_buckets: Number of buckets in the table.
        seed: Seed of the draw when ``buckets`` is a count.

    Returns:
        Distinct bucket numbers in ``[0, num_buckets)``, sorted.
    """
    if isinstance(buckets, int):
        _check(0 <= buckets <= num_buckets, f"cannot choose {buckets} of {num_buckets} buckets")
        return sorted(random.Random(seed).sample(range(num_buckets), buckets))
    chosen = sorted(set(buckets))
    _check(all(0 <= b < num_buckets for b in chosen), f"buckets {chosen} not all in [0, {num_buckets})")
    return chosen


def _table_stats(store_sales: DataFrame) -> _TableStats:
    """Row count and ticket range of the table (one small aggregate on the driver)."""
    rows, low, high = store_sales.agg(F.count(F.lit(1)), F.min(TICKET), F.max(TICKET)).collect()[0]
    return _TableStats(int(rows), int(low or 0), int(high or 0))


def _unit_hash(seed: int, kind: str) -> Column:
    """A uniform value in ``[0, 1)`` from the row's key, ``seed`` and the batch part ``kind``."""
    digest = F.xxhash64(F.lit(seed), F.lit(kind), F.col(TICKET), F.col(ITEM))
    return F.pmod(digest, F.lit(_UNIT)) / F.lit(float(_UNIT))


def _sample(rows: DataFrame, fraction: float, seed: int, kind: str) -> DataFrame:
    """Rows whose key hash falls below ``fraction`` (independent of file and partition layout)."""
    return rows.where(_unit_hash(seed, kind) < F.lit(fraction))


def _take_per_bucket(rows: DataFrame, per_bucket: int, num_buckets: int, seed: int) -> DataFrame:
    """At most ``per_bucket`` rows of each ticket bucket, the ones with the smallest key hash."""
    order = Window.partitionBy(_BUCKET).orderBy(_unit_hash(seed, "rank"), TICKET, ITEM)
    ranked = rows.withColumn(_BUCKET, iceberg_bucket(TICKET, num_buckets))
    ranked = ranked.withColumn(_RANK, F.row_number().over(order))
    return ranked.where(F.col(_RANK) <= per_bucket).drop(_BUCKET, _RANK)


def _oversampling_fraction(per_bucket: int, num_buckets: int, rows: int) -> float:
    """Sampling fraction that leaves every bucket well over ``per_bucket`` candidates.

    >>> round(_oversampling_fraction(25, 256, 2_880_404), 4)
    0.0124
    >>> _oversampling_fraction(25, 8, 1000)
    1.0
    """
    _check(num_buckets > 0, f"num_buckets must be > 0, got {num_buckets}")
    if rows == 0 or per_bucket == 0:
        return 0.0
    wanted_per_bucket = 4 * per_bucket + 40  # Poisson mean far above per_bucket
    return min(1.0, wanted_per_bucket * num_buckets / rows)


def _updated(rows: DataFrame) -> DataFrame:
    """Apply the deterministic update to non-key columns, keeping every column's type."""
    types = {field.name: field.dataType for field in rows.schema.fields}
    quantity = F.col(QUANTITY)
    changes = {QUANTITY: F.when(quantity.isNull(), F.lit(1)).otherwise(quantity + 1).cast(types[QUANTITY])}
    for name in MONEY_UPDATE_COLUMNS:
        changes[name] = (F.col(name) + F.lit(_ONE)).cast(types[name])
    return rows.withColumns(changes)


def _shifted(rows: DataFrame, offset: int) -> DataFrame:
    """Move ticket numbers up by ``offset`` so that the rows get keys absent from the table."""
    ticket_type = rows.schema[TICKET].dataType
    return rows.withColumn(TICKET, (F.col(TICKET) + F.lit(offset)).cast(ticket_type))


def _combine(store_sales: DataFrame, updates: DataFrame, inserts: DataFrame) -> DataFrame:
    """Union updates and inserts in the column order of ``store_sales``."""
    return updates.unionByName(inserts).select(*store_sales.columns)


def _check_fraction(value: float, name: str) -> None:
    """Reject fractions outside ``[0, 1]``."""
    _check(0.0 <= value <= 1.0, f"{name} must be in [0, 1], got {value}")


def _check(condition: bool, message: str) -> None:
    """Raise ``ValueError(message)`` unless ``condition``."""
    if not condition:
        raise ValueError(message)
