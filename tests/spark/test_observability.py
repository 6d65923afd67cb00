"""What a user sees of rowops in Spark and in the logs (issue 46): named, grouped and tagged Spark jobs,
an operation cancelled through its tag, one log line per operation.

The jobs' descriptions, groups and tags are read from Spark's own status store (what the Spark UI and
History Server show), not from rowops.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

import rowops
from rowops.errors import RowOpsError
from tests.spark.tables import stalled

SCHEMA = T.StructType([T.StructField("k", T.LongType(), False), T.StructField("v", T.StringType())])


def _jobs(spark: SparkSession) -> dict[int, tuple[str, str, frozenset[str]]]:
    """Every job of the application so far: id -> (description, job group, tags), from the status store."""
    store = spark.sparkContext._jsc.sc().statusStore()
    found = store.jobsList(None)
    jobs = {}
    for i in range(found.size()):
        job = found.apply(i)
        tags = job.jobTags()
        jobs[job.jobId()] = (
            _option(job.description()),
            _option(job.jobGroup()),
            frozenset(tags.apply(j) for j in range(tags.size())),
        )
    return jobs


def _option(value: Any) -> str:
    return str(value.get()) if value.isDefined() else ""


def _table(lake: Any, rows: int = 40) -> Any:
    spark = lake.spark
    data = spark.createDataFrame([(k, f"v{k}") for k in range(rows)], SCHEMA).repartition(2)
    return lake.create_table("db.t", data, identifier=["k"])


def test_an_operations_jobs_are_named_grouped_tagged_and_the_callers_restored(lake) -> None:  # type: ignore[no-untyped-def]
    spark, sc = lake.spark, lake.spark.sparkContext
    table = _table(lake)
    table.set_properties(**{"rowops.rewrite.by-key.enabled": "false"})  # all four steps: scan, then write
    sc.setJobGroup("callers-group", "the caller's job")
    sc.addJobTag("callers-tag")
    try:
        before = set(_jobs(spark))
        source = spark.createDataFrame([(k, "new") for k in range(30, 50)], SCHEMA)
        rowops.merge(source, table, on=["k"], strategy="position-delete")
        ours = {i: job for i, job in _jobs(spark).items() if i not in before}
        assert sc.getLocalProperty("spark.job.description") == "the caller's job"
        assert sc.getLocalProperty("spark.jobGroup.id") == "callers-group"
        assert set(sc.getJobTags()) == {"callers-tag"}
    finally:
        for key in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
            sc.setLocalProperty(key, None)  # type: ignore[arg-type]
        sc.clearJobTags()
    assert ours, "the merge ran no Spark job"
    descriptions = [d for d, _, _ in ours.values()]
    assert all(d.startswith("rowops MERGE db.t") for d in descriptions), descriptions
    steps = {m.group(1) for d in descriptions if (m := re.search(r" (\d/4): ", d))}
    assert {"1/4", "2/4", "3/4"} <= steps, descriptions
    assert any(d.startswith("rowops MERGE db.t [position-delete] 2/4: scan ") for d in descriptions)
    groups = {g for _, g, _ in ours.values()}
    assert len(groups) == 1 and groups.pop().startswith("rowops-merge-")  # one group per operation
    tags = {t for _, _, ts in ours.values() for t in ts}
    operation_tags = {t for t in tags if t.startswith("rowops-merge-db.t-")}
    assert len(operation_tags) == 1 and {"rowops", "callers-tag"} <= tags
    odd = {i: j for i, j in ours.items() if not {"rowops", "callers-tag", *operation_tags} <= j[2]}
    assert not odd, odd


def test_each_statement_of_a_transaction_describes_its_jobs(lake) -> None:  # type: ignore[no-untyped-def]
    """A transaction's statements describe their own jobs."""
    spark = lake.spark
    table = _table(lake)
    before = set(_jobs(spark))
    with lake.transaction() as tx:
        tx.table("db.t").delete("k < 5")
        tx.table("db.t").update({"v": "'u'"}, "k = 7")
    ours = [job for i, job in _jobs(spark).items() if i not in before]
    assert {d.split(" ", 2)[1] for d, _, _ in ours} == {"DELETE", "UPDATE"}
    assert table.to_df().count() == 35


def test_cancelling_the_tag_stops_the_operation_and_changes_nothing(lake) -> None:  # type: ignore[no-untyped-def]
    spark, sc = lake.spark, lake.spark.sparkContext
    table = _table(lake)
    snapshot = table.metadata.current_snapshot_id
    source = stalled(spark.createDataFrame([(k, "new") for k in range(30, 50)], SCHEMA))
    failures: list[BaseException] = []

    def run() -> None:
        try:
            rowops.merge(source, table, on=["k"], strategy="copy-on-write")
        except BaseException as exc:
            failures.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    deadline = time.monotonic() + 60
    while not sc.statusTracker().getActiveJobsIds() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1)  # the job's tasks are inside the stall by now
    sc.cancelJobsWithTag("rowops")
    worker.join(60)  # its source sleeps 600 s: ending within this wait means the cancellation ended it
    assert not worker.is_alive()
    assert len(failures) == 1 and isinstance(failures[0], RowOpsError), failures
    assert lake.table("db.t").metadata.current_snapshot_id == snapshot
    assert lake.table("db.t").to_df().count() == 40
    time.sleep(5)  # past Spark's kill of the stalled worker (a 2 s poll plus the 2 s kill timeout)
    for _ in range(6):  # later Python tasks get sound workers from the pool
        assert spark.createDataFrame([(k, "x") for k in range(8)], SCHEMA).repartition(2).count() == 8


def test_one_info_line_per_operation_and_debug_lines_per_phase(
    lake, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    table = _table(lake)
    spark = lake.spark
    with caplog.at_level(logging.DEBUG, logger="rowops"):
        rowops.merge(spark.createDataFrame([(3, "x")], SCHEMA), table, on=["k"], strategy="position-delete")
        table.delete("k = 4")
        deleted = table.metadata.current_snapshot_id
        table.compact()  # its files are few and small enough: nothing to do, and it says so
    lines = [r.getMessage() for r in caplog.records if r.name == "rowops.operations"]
    assert len(lines) == 3, lines
    assert lines[0].startswith("MERGE db.t: position-delete") and "rows +0 ~1 -0" in lines[0]
    assert lines[1].startswith("DELETE db.t: ") and "-1;" in lines[1]
    assert lines[2].startswith("compact db.t: read ")
    assert (
        str(deleted) in lines[1] and lines[2].endswith(" s") and "snapshot none (nothing to do)" in lines[2]
    )
    assert table.metadata.current_snapshot_id == deleted
    assert logging.getLogger("rowops").handlers  # the package's NullHandler: silent by default
    phases = [r.getMessage() for r in caplog.records if r.name == "rowops.phases"]
    merge = [p.split(": ", 1)[1] for p in phases if p.startswith("MERGE db.t: ")]
    timed = r"(start|\d/4: [^;]+) took \d+\.\d\d s; (next: (\d/4: .+)|done in \d+\.\d\d s)"
    assert all(re.fullmatch(timed, m) for m in merge), merge
    assert [m.split(" took ")[0].split(":")[0] for m in merge] == ["start", "1/4", "2/4", "3/4", "4/4"]
    assert merge[-1].split(";")[1].startswith(" done in ")
