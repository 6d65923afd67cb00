"""The source of an operation, evaluated exactly once.

An operation reads its source several times (key pre-scan, key checks, the join, the anti-join of
unmatched rows, equality-delete keys and rows). A source that is not a pure function of stored files
(``rand()``, a non-deterministic UDF, a landing directory receiving files, a shuffle whose order
varies) would be pruned with one version of its rows and joined with another. So the source is
evaluated once, into a *local checkpoint*: Spark stores the rows (memory, spilling to disk) and cuts
the lineage, so every later read sees the same rows, and a lost block fails the job instead of being
recomputed with different rows (a plain ``persist`` would silently recompute it).

The checkpoint is lazy: the operation's first job over the source (usually the key pre-scan) computes
and stores its rows as it reads them, instead of a job of its own that only stores them. Spark stores
every partition that job computed and, right after it, any partition it did not (``take``-like jobs);
every later job reads the stored rows.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from rowops.exec.spark.compat import release_checkpoint


def evaluate_once(source: DataFrame) -> DataFrame:
    """The rows of ``source``, stored by Spark as its first job over them computes them, detached
    from their lineage.

    Release them with :func:`release` when the operation ends (also on error).
    """
    return source.localCheckpoint(eager=False)


def release(evaluated: DataFrame | None) -> None:
    """Free the stored rows of a DataFrame returned by :func:`evaluate_once` (no-op for None).

    Classic PySpark has no public handle on a checkpoint's RDD: ``exec/spark/compat.py`` reaches for it.
    """
    if evaluated is not None:
        release_checkpoint(evaluated)
