"""Reading what Spark did: shuffle bytes written (from its status store) and physical plan shape."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import unquote

from pyspark.sql import DataFrame, SparkSession

from rowops.meta.paths import normalize_path


def shuffle_bytes_written(spark: SparkSession) -> int:
    """Total shuffle bytes written by all stages so far in this application."""
    return sum(int(stage.shuffleWriteBytes()) for stage in _stages(spark))


def shuffle_records_written(spark: SparkSession) -> int:
    """Total rows written to shuffles by all stages so far (unlike bytes, the same in every Spark
    version: the shuffle row format and its compression do not count)."""
    return sum(int(stage.shuffleWriteRecords()) for stage in _stages(spark))


def _stages(spark: SparkSession) -> Iterator:  # type: ignore[type-arg]
    sc, jvm, gateway = spark.sparkContext._jsc.sc(), spark.sparkContext._jvm, spark.sparkContext._gateway
    assert jvm is not None and gateway is not None
    stages = sc.statusStore().stageList(
        jvm.java.util.ArrayList(), False, False, gateway.new_array(jvm.double, 0), jvm.java.util.ArrayList()
    )
    it = stages.iterator()
    while it.hasNext():
        yield it.next()


def _reads_under(scan, location: str) -> bool:  # type: ignore[no-untyped-def]
    """Whether a FileSourceScanExec reads files below ``location`` (Spark shows paths URL-encoded)."""
    below = normalize_path(location)
    return any(unquote(p.toUri().getPath()).startswith(below) for p in _root_paths(scan))


def exchanges_above_scans_of(df: DataFrame, location: str) -> list[str]:
    """Shuffle exchanges between a scan of files under ``location`` (the target) and the join above it."""
    plan = df._jdf.queryExecution().executedPlan()
    found: list[str] = []

    def walk(node, under_shuffle: str | None) -> None:  # type: ignore[no-untyped-def]
        name = node.getClass().getSimpleName()
        if name == "AdaptiveSparkPlanExec":  # AQE wraps the plan it will run
            return walk(node.executedPlan(), under_shuffle)
        if name == "InMemoryTableScanExec":  # a persisted DataFrame: look into the cached plan
            return walk(node.relation().cachedPlan(), under_shuffle)
        if name == "ShuffleExchangeExec":
            under_shuffle = node.simpleString(200)
        elif name.endswith("JoinExec"):
            under_shuffle = None  # an exchange above a join moves join output, not the scanned rows
        if name == "FileSourceScanExec" and under_shuffle and _reads_under(node, location):
            found.append(under_shuffle)
        children = node.children().iterator()
        while children.hasNext():
            walk(children.next(), under_shuffle)

    walk(plan, None)
    return found


def scans_of(df: DataFrame, location: str) -> int:
    """How many distinct file scans under ``location`` the physical plan has (a persisted DataFrame
    used twice shows its scans twice; they are counted once, by the files they read)."""
    plan = df._jdf.queryExecution().executedPlan()
    scans: set[frozenset[str]] = set()

    def walk(node) -> None:  # type: ignore[no-untyped-def]
        name = node.getClass().getSimpleName()
        if name == "AdaptiveSparkPlanExec":
            return walk(node.executedPlan())
        if name == "InMemoryTableScanExec":
            return walk(node.relation().cachedPlan())
        if name == "FileSourceScanExec" and _reads_under(node, location):
            scans.add(frozenset(str(p) for p in _root_paths(node)))
        children = node.children().iterator()
        while children.hasNext():
            walk(children.next())

    walk(plan)
    return len(scans)


def _root_paths(scan) -> list[object]:  # type: ignore[no-untyped-def]
    paths, it = [], scan.relation().location().rootPaths().iterator()
    while it.hasNext():
        paths.append(it.next())
    return paths


def stages_run(spark: SparkSession) -> int:
    """How many stages Spark has run (or started) so far in this application: unchanged when an
    operation started no Spark job."""
    return sum(1 for _ in _stages(spark))
