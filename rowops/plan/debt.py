"""The read debt of candidate files: what their live deletes and small-file opens cost each read.

A pure function of the snapshot's metadata (``TableFiles``), feeding :class:`rowops.plan.cost.Estimate`.
Besides the bytes-equivalent overhead it counts the *generations* of live deletes (distinct commits
that left deletes on the files since they were last rewritten): reads have been paying a debt that grew
over those commits, which the cost model uses to decide when a rewrite has been earned (ski rental).
The same rule picks the partitions outside an operation's candidates whose debt a copy-on-write
should clear on the way (:func:`outside_paydown`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rowops.meta.delete_index import PartitionKey, delete_index, partition_key
from rowops.meta.files import LiveFile, TableFiles
from rowops.plan.cost import (
    DELETE_ROW_READ_BYTES,
    FILE_OPEN_BYTES,
    read_overhead,
    rewrite_cost,
    worth_merging,
)


@dataclass(frozen=True)
class Debt:
    """Read overhead carried by a set of data files.

    Attributes:
        bytes: per-read overhead in bytes-equivalents: anti-joins with their deletes, opens of their
            delete files, each live delete row, and opens of files small enough to be merged by a
            rewrite.
        pos_deleted_bytes / eq_deleted_bytes: bytes of the files under position / equality deletes.
        deleted_bytes: bytes of the files under any delete (what a rewrite that clears the debt reads).
        generations: distinct commits whose deletes are live on the files.
        newest: the data sequence number of the newest of those deletes (0: none).
        file_opens: the files each read opens for this debt (delete files, mergeable small files),
            each a fixed cost (``FILE_OPEN_BYTES`` of ``bytes``) whatever the table's size.
    """

    bytes: float = 0.0
    pos_deleted_bytes: int = 0
    eq_deleted_bytes: int = 0
    generations: int = 0
    deleted_bytes: int = 0
    newest: int = 0
    file_opens: int = 0


def read_debt(files: TableFiles, candidates: Sequence[LiveFile], read_weight: float) -> Debt:
    """The debt of ``candidates`` in the snapshot described by ``files`` (linear: one delete index)."""
    index = delete_index(files)
    pos = [bool(index.position_deletes_of(f)) for f in candidates]
    eq = [index.equality_deletes_on(f) > 0 for f in candidates]
    live = index.deletes_applying(candidates)
    eq_delete_files = sum(1 for d in live if d.equality_ids)
    total = sum(map(read_overhead, [f.size for f in candidates], pos, eq))
    merged = sum(worth_merging(f.size, read_weight) for f in candidates)
    total += FILE_OPEN_BYTES * (eq_delete_files + merged)
    opens = sum(pos) + eq_delete_files + merged  # read_overhead counts a delete file's open per pos
    total += DELETE_ROW_READ_BYTES * sum(d.record_count for d in live)
    return Debt(
        bytes=total,
        pos_deleted_bytes=sum(f.size for f, d in zip(candidates, pos, strict=True) if d),
        eq_deleted_bytes=sum(f.size for f, d in zip(candidates, eq, strict=True) if d),
        generations=len({d.seq for d in live}),
        deleted_bytes=sum(f.size for f, p, e in zip(candidates, pos, eq, strict=True) if p or e),
        newest=max((d.seq for d in live), default=0),
        file_opens=opens,
    )


@dataclass(frozen=True)
class Paydown:
    """Files outside an operation's candidates whose read debt reads have already paid for.

    Attributes:
        files: the data files to rewrite (their partitions' files that deletes apply to).
        paid_bytes: what reads have paid for their debt so far (the debt times the reads it met).
        rewrite_bytes: what rewriting them costs (``cost.rewrite_cost``).
    """

    files: tuple[LiveFile, ...] = ()
    paid_bytes: float = 0.0
    rewrite_bytes: float = 0.0


def paid_off(
    debt: float, newest_delete_seq: int, sequence_number: int, rewrite: float, read_weight: float
) -> float:
    """What reads have paid for a partition's debt when that is at least the cost of ``rewrite``ing
    it, else 0 (ski rental: keep paying until the rent paid reaches the price of buying).

    The debt has met a read after each commit since its newest delete (``read_weight`` reads per
    commit), up to the snapshot's ``sequence_number``; counting from the newest delete undercounts
    a debt that grew over several commits, so a partition is paid down late rather than early.

    >>> paid_off(100.0, newest_delete_seq=7, sequence_number=8, rewrite=250.0, read_weight=1.0)
    0.0
    >>> paid_off(100.0, newest_delete_seq=7, sequence_number=9, rewrite=250.0, read_weight=1.0)
    300.0
    """
    paid = debt * read_weight * (sequence_number - newest_delete_seq + 1)
    return paid if paid >= rewrite and debt > 0 else 0.0


def outside_paydown(
    files: TableFiles,
    candidates: Sequence[LiveFile],
    rewritable: Callable[[Sequence[LiveFile]], bool],
    read_weight: float,
) -> Paydown:
    """The partitions no candidate is in whose read debt :func:`paid_off` says to clear now.

    A copy-on-write chosen by cost can rewrite them in the same commit: a batch that touches other
    partitions than the last one (the paper's Case 3) otherwise leaves each batch's deletes on its
    partitions for every later read, out of the candidates' debt that ``auto`` prices. Only
    partitions whose files with deletes are ``rewritable`` (in Arrow; asked once per paid-off
    partition) are taken. Linear: one delete index, files grouped by partition, each file and each
    delete scoped to one partition or one file (what rowops writes) counted once. Global equality
    deletes (an unpartitioned spec's: other engines' tables) apply to every partition, so counting
    them per partition would not be linear: such tables are left to ``compact``.
    """
    if any(d.is_global for d in files.equality_deletes):
        return Paydown()
    index = delete_index(files)
    inside = {partition_key(f) for f in candidates}
    groups: dict[PartitionKey, list[LiveFile]] = defaultdict(list)
    for f in files.data:
        key = partition_key(f)
        if key not in inside and index.deletes_on(f):
            groups[key].append(f)
    chosen: list[LiveFile] = []
    paid = rewrite = 0.0
    for group in groups.values():
        debt = read_debt(files, group, read_weight)
        cost = rewrite_cost(debt.deleted_bytes, 0.0, debt.eq_deleted_bytes)
        amount = paid_off(debt.bytes, debt.newest, files.sequence_number, cost, read_weight)
        if amount and rewritable(group):
            chosen += group
            paid, rewrite = paid + amount, rewrite + cost
    return Paydown(tuple(chosen), paid, rewrite)
