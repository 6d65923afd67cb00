"""An operation's writes run together from driver threads (``rowops/exec/spark/parallel.py``): they really
overlap, a failure is raised only once every write has ended (the staging area is removed after),
each thread keeps the caller's Spark job properties, and session settings changed by overlapping
blocks are restored to the session's own value."""

from __future__ import annotations

import importlib
import threading

import pytest
from pyspark.sql import SparkSession

from rowops.exec.spark.parallel import CONCURRENT_CONF, run_together
from rowops.exec.spark.session import session_conf
from tpcds import bench_profile

KEY = "rowops.test.overlapping"


def test_overlapping_blocks_restore_the_sessions_value(spark: SparkSession) -> None:
    spark.conf.set(KEY, "mine")
    first, second = session_conf(spark, {KEY: "first"}), session_conf(spark, {KEY: "second"})
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # ends while the second still runs: the second's value stays
    assert spark.conf.get(KEY) == "second"
    second.__exit__(None, None, None)
    assert spark.conf.get(KEY) == "mine"
    with session_conf(spark, {KEY: "outer"}):
        with session_conf(spark, {KEY: "inner"}):
            assert spark.conf.get(KEY) == "inner"
        assert spark.conf.get(KEY) == "outer"
    assert spark.conf.get(KEY) == "mine"
    spark.conf.unset(KEY)
    with session_conf(spark, {KEY: "set"}):
        assert spark.conf.get(KEY) == "set"
    assert spark.conf.get(KEY, None) is None


def test_writes_overlap_and_a_failure_waits_for_every_write(spark: SparkSession) -> None:
    both_running = threading.Barrier(2, timeout=120)  # one after the other, the first would wait forever
    ended: list[int] = []

    def write() -> int:
        both_running.wait()
        total = int(spark.range(200_000).selectExpr("sum(id)").collect()[0][0])  # a Spark job
        ended.append(total)
        return total

    def failing() -> None:
        both_running.wait()
        raise ValueError("this write failed")

    assert run_together(spark, write, write) == [19_999_900_000, 19_999_900_000]
    ended.clear()
    with pytest.raises(ValueError, match="this write failed"):
        run_together(spark, failing, write)
    assert ended == [19_999_900_000]  # the other write had ended when the failure was raised


def test_writes_run_one_after_the_other_when_turned_off(spark: SparkSession) -> None:
    order: list[tuple[str, int]] = []
    spark.conf.set(CONCURRENT_CONF, "false")
    try:
        results = run_together(
            spark,
            lambda: order.append(("a", threading.get_ident())) or "a",
            lambda: order.append(("b", threading.get_ident())) or "b",
        )
    finally:
        spark.conf.unset(CONCURRENT_CONF)
    assert results == ["a", "b"]
    assert order == [("a", threading.get_ident()), ("b", threading.get_ident())]


def test_writes_keep_the_callers_job_properties(spark: SparkSession) -> None:
    context = spark.sparkContext
    context.setJobGroup("rowops-parallel", "writes of one operation")
    try:
        seen = run_together(
            spark,
            lambda: context.getLocalProperty("spark.jobGroup.id"),
            lambda: context.getLocalProperty("spark.job.description"),
        )
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        context.setJobDescription(None)  # type: ignore[arg-type]
    assert seen == ["rowops-parallel", "writes of one operation"]


def test_the_profiler_turns_the_same_setting_off() -> None:
    assert bench_profile.CONCURRENT_CONF == CONCURRENT_CONF


def test_every_function_the_profiler_times_exists() -> None:
    """A renamed or moved rowops function must not break ``make bench``'s profile phase."""
    for module, attr in bench_profile.PROFILE_TARGETS:
        owner: object = importlib.import_module(module)
        for part in attr.split("."):
            assert hasattr(owner, part), f"{module}.{attr}"
            owner = getattr(owner, part)
        assert callable(owner), f"{module}.{attr}"
