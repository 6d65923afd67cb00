"""The co-located join: how source rows meet target rows without moving the target.

Stock Spark cannot be told that a file scan is already partitioned by an Iceberg transform (that
needs DataSource V2 in the JVM), so rowops co-locates by broadcast: every task that scans target
files receives the source rows that can match them, and target rows never leave their task.

* A source up to ``limit`` bytes is broadcast whole (``broadcast``).
* A larger source is re-partitioned on the fly with the target's own partition transform and cut
  into **slices**: groups of target partitions whose source rows fit the limit, packed first-fit
  decreasing. Each slice's source rows are broadcast to the scans of that slice's files only and
  the joins are united (``partitioned``). This needs every partition field to be a transform of a
  join key, so that a key match implies a partition match.
* Skew: target-side skew needs nothing (target splits are file splits, each with its slice: the
  paper's partially clustered distribution). A partition whose source rows alone exceed the limit
  is joined by a shuffle, for that partition's files only (``shuffled``).
* Otherwise (disabled, not derivable, nothing to co-locate) a shuffle join (``shuffle``).

>>> sizes = {(0,): 60, (1,): 50, (2,): 40, (3,): 10, (4,): 300}
>>> layout = plan_join(460, sizes, [(0,), (1,), (2,), (3,), (4,), (5,)], limit=100)
>>> layout.kind, layout.slices, layout.shuffled
('partitioned', (((0,), (2,)), ((1,), (3,), (5,))), ((4,),))
>>> plan_join(90, sizes, [(0,), (1,)], limit=100).kind
'broadcast'
>>> plan_join(460, sizes, [], limit=100).kind
'shuffle'
>>> plan_join(3 * 2**20, None, [(0,), (1,)], limit=2**20).reason
'source ~3.0 MiB > 1 MiB and the partitioning is not derived from the join keys: shuffle join'

Slices need every target file the join reads to be of the table's current partition spec (the one
the source is re-partitioned with); after partition evolution, files of older specs mean a shuffle:

>>> plan_join(3 * 2**20, {(0,): 2**20}, [(0,)], limit=2**20, other_spec_files=3).reason
'source ~3.0 MiB > 1 MiB and 3 target file(s) of older partition specs: shuffle join'
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

Partition = tuple[object, ...]
JoinKind = Literal["broadcast", "partitioned", "shuffle"]
DISABLED = "disabled by table property rowops.colocated-join.enabled"


def _mib(size: float) -> str:
    return f"{size / 2**20:,.1f}"


def _cap(limit: int) -> str:
    return f"{limit / 2**20:,.0f} MiB" if limit >= 2**20 else f"{limit / 2**10:,.0f} KiB"


@dataclass(frozen=True)
class JoinLayout:
    """How the MERGE join runs; ``slices`` and ``shuffled`` are target partitions (``partitioned``)."""

    kind: JoinKind
    reason: str
    slices: tuple[tuple[Partition, ...], ...] = ()
    shuffled: tuple[Partition, ...] = ()

    @property
    def colocated(self) -> bool:
        """Whether target rows stay where they are read (all of them, or all but skewed partitions)."""
        return self.kind != "shuffle"


def pack(sizes: Mapping[Partition, int], limit: int) -> list[list[Partition]]:
    """First-fit decreasing: partitions into bins of at most ``limit`` bytes (each at most ``limit``).

    Partitions without source bytes go to the lightest bin (or a bin of their own).

    >>> pack({("a",): 5, ("b",): 4, ("c",): 3, ("d",): 0}, limit=8)
    [[('a',), ('c',)], [('b',), ('d',)]]
    """
    bins: list[list[Partition]] = []
    loads: list[int] = []
    ordered = sorted(sizes, key=lambda p: (-sizes[p], repr(p)))
    for part in (p for p in ordered if sizes[p] > 0):
        fit = next((i for i, load in enumerate(loads) if load + sizes[part] <= limit), None)
        if fit is None:
            bins.append([])
            loads.append(0)
            fit = len(bins) - 1
        bins[fit].append(part)
        loads[fit] += sizes[part]
    empty = [p for p in ordered if sizes[p] <= 0]
    if empty and not bins:
        bins.append([])
        loads.append(0)
    for part in empty:
        lightest = min(range(len(bins)), key=lambda i: loads[i])
        bins[lightest].append(part)
    return bins


def plan_join(
    source_bytes: int,
    by_partition: Mapping[Partition, int] | None,
    target_partitions: Iterable[Partition],
    limit: int,
    enabled: bool = True,
    basis: str = "",
    other_spec_files: int = 0,
) -> JoinLayout:
    """Choose the join layout.

    Args:
        source_bytes: estimated in-memory size of the source rows.
        by_partition: source bytes per target partition (the transform of the source keys), or
            None when the partitioning is not derived from the join keys.
        target_partitions: partitions of the target files the join reads.
        limit: the most source bytes broadcast at once (``rowops.colocated-join.max-bytes``, at most
            ``rowops.broadcast.max-bytes``).
        basis: where ``source_bytes`` came from, shown in the reason (e.g. measured bytes per row).
        other_spec_files: target files the join reads that were written under another partition spec
            than the current one (partition evolution): their partitions cannot be sliced.
    """
    if not enabled:
        return JoinLayout("shuffle", DISABLED)
    size, cap = f"source ~{_mib(source_bytes)} MiB" + (f" ({basis})" if basis else ""), _cap(limit)
    if source_bytes <= limit:
        return JoinLayout("broadcast", f"{size} <= {cap}: broadcast to the target's scan tasks")
    if other_spec_files:
        older = f"{other_spec_files} target file(s) of older partition specs"
        return JoinLayout("shuffle", f"{size} > {cap} and {older}: shuffle join")
    if by_partition is None:
        return JoinLayout(
            "shuffle", f"{size} > {cap} and the partitioning is not derived from the join keys: shuffle join"
        )
    partitions = set(target_partitions)
    if not partitions:
        return JoinLayout("shuffle", f"{size} > {cap} and no target file can match: shuffle join")
    sizes = {p: by_partition.get(p, 0) for p in partitions}
    skewed = tuple(sorted((p for p in partitions if sizes[p] > limit), key=repr))
    slices = tuple(
        tuple(sorted(b, key=repr)) for b in pack({p: sizes[p] for p in partitions - set(skewed)}, limit)
    )
    if not slices:
        return JoinLayout("shuffle", f"{size} > {cap} in every partition the join reads: shuffle join")
    reason = (
        f"{size} > {cap}: re-partitioned by the target's partition transform, {len(slices)} broadcast slices"
    )
    if skewed:
        heavy = sum(sizes[p] for p in skewed)
        reason += (
            f"; {len(skewed)} partition(s) with more source rows (~{_mib(heavy)} MiB) joined by a shuffle"
        )
    return JoinLayout("partitioned", reason, slices, skewed)
