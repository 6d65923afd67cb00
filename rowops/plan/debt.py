"""The read debt of candidate files: what their live deletes and small-file opens cost each read.

A pure function of the snapshot's metadata (``TableFiles``), feeding :class:`rowops.plan.cost.Estimate`.
Besides the bytes-equivalent overhead it counts the *generations* of live deletes (distinct commits
that left deletes on the files since they were last rewritten): reads have been paying a debt that grew
over those commits, which the cost model uses to decide when a rewrite has been earned (ski rental).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rowops.meta.delete_index import delete_index
from rowops.meta.files import LiveFile, TableFiles
from rowops.plan.cost import DELETE_ROW_READ_BYTES, FILE_OPEN_BYTES, read_overhead, worth_merging


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
    """

    bytes: float = 0.0
    pos_deleted_bytes: int = 0
    eq_deleted_bytes: int = 0
    generations: int = 0
    deleted_bytes: int = 0


def read_debt(files: TableFiles, candidates: Sequence[LiveFile], read_weight: float) -> Debt:
    """The debt of ``candidates`` in the snapshot described by ``files`` (linear: one delete index)."""
    index = delete_index(files)
    pos = [bool(index.position_deletes_of(f)) for f in candidates]
    eq = [index.equality_deletes_on(f) > 0 for f in candidates]
    live = index.deletes_applying(candidates)
    eq_delete_files = sum(1 for d in live if d.equality_ids)
    total = sum(map(read_overhead, [f.size for f in candidates], pos, eq))
    total += FILE_OPEN_BYTES * (eq_delete_files + sum(worth_merging(f.size, read_weight) for f in candidates))
    total += DELETE_ROW_READ_BYTES * sum(d.record_count for d in live)
    return Debt(
        bytes=total,
        pos_deleted_bytes=sum(f.size for f, d in zip(candidates, pos, strict=True) if d),
        eq_deleted_bytes=sum(f.size for f, d in zip(candidates, eq, strict=True) if d),
        generations=len({d.seq for d in live}),
        deleted_bytes=sum(f.size for f, p, e in zip(candidates, pos, eq, strict=True) if p or e),
    )
