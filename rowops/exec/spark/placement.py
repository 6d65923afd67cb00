"""Rows sent to a chosen Spark partition: balanced tasks for work whose cost is known per group.

``df.repartition(n, col)`` puts a row in partition ``pmod(hash(col), n)``: Spark's Murmur3 hash with
seed 42 (the SQL function ``hash``). Hashing a few group ids into ``n`` partitions leaves some empty
and others with several groups, so one task may do four times the work of another. Here the groups
are first assigned to tasks by their cost (:func:`balanced`), then each task gets an ``int`` key
that Spark's hash sends to exactly that partition (:func:`partition_keys`). Placement only decides
which task does the work, never the result: were Spark's hash ever different from the one computed
here, the rows would land in other partitions, still grouped, and the output would be the same.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Mapping, Sequence

import mmh3

_SEED = 42  # HashPartitioning's seed (Murmur3Hash)


def spark_hash_int(value: int, seed: int = _SEED) -> int:
    """Spark's ``Murmur3_x86_32.hashInt``: the SQL ``hash(value)`` of an ``int``, as a signed int.

    Spark hashes an ``int`` as its four little-endian bytes, which is what ``mmh3`` hashes here.

    >>> spark_hash_int(0), spark_hash_int(1), spark_hash_int(-7)
    (933211791, -559580957, -1618159745)
    """
    return int(mmh3.hash(struct.pack("<i", value), seed))


def partition_keys(n: int) -> list[int]:
    """For each partition ``t < n``, the smallest non-negative ``int`` that ``repartition(n, key)``
    sends to partition ``t`` (``pmod(hash(key), n) == t``).

    >>> partition_keys(2), [spark_hash_int(k) % 4 for k in partition_keys(4)]
    ([2, 0], [0, 1, 2, 3])
    """
    keys: dict[int, int] = {}
    candidate = 0
    while len(keys) < n:
        keys.setdefault(spark_hash_int(candidate) % n, candidate)  # Python's % is pmod
        candidate += 1
    return [keys[t] for t in range(n)]


def balanced(costs: Mapping[int, int], tasks: int) -> dict[int, int]:
    """Group -> task, the costliest group first to the least loaded task (longest processing time
    first: the busiest task does at most 4/3 of the optimum).

    >>> balanced({0: 60, 1: 50, 2: 40, 3: 30, 4: 10}, 2)
    {0: 0, 1: 1, 2: 1, 3: 0, 4: 0}
    """
    loads = [(0, t) for t in range(max(tasks, 1))]
    placed = {}
    for group in sorted(costs, key=lambda g: (-costs[g], g)):
        load, task = heapq.heappop(loads)
        placed[group] = task
        heapq.heappush(loads, (load + costs[group], task))
    return placed


def task_keys(costs: Mapping[int, int], tasks: int) -> dict[int, int]:
    """Group -> the ``int`` key to ``repartition(tasks, key)`` by so that the groups are spread over
    the tasks by cost (:func:`balanced`).

    >>> task_keys({7: 100, 8: 100, 9: 1}, 2)
    {7: 2, 8: 0, 9: 2}
    """
    keys = partition_keys(tasks)
    return {group: keys[task] for group, task in balanced(costs, tasks).items()}


def groups_cost(groups: Sequence[int], sizes: Sequence[int]) -> dict[int, int]:
    """The bytes of each group (``groups[i]``: the group of item ``i`` of size ``sizes[i]``).

    >>> groups_cost([0, 0, 2], [5, 6, 7])
    {0: 11, 2: 7}
    """
    costs: dict[int, int] = {}
    for group, size in zip(groups, sizes, strict=True):
        costs[group] = costs.get(group, 0) + size
    return costs
