"""rowops from a thin Spark Connect client (no JVM, no Py4J, rowops not installed on the server):
MERGE with every strategy, UPDATE and DELETE, checked by DuckDB and PyIceberg (same local disk); the
change feed on S3."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import rowops
import rowops.exec.spark.session as rowops_session
from rowops.errors import ExecutorEnvironmentError, InvalidExpressionError
from rowops.exec.reading import driver_deletes
from tests.connect.conftest import server_env, server_python
from tests.oracles.s3_server import S3Server
from tests.readers import assert_readers_agree
from tests.sql_smoke import sql_smoke

pytestmark = pytest.mark.connect
COLUMNS = ["k", "s"]
STRATEGIES = ["copy-on-write", "position-delete", "equality-delete"]


def test_smoke_merge_update_delete_from_connect_client(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert type(spark).__module__.startswith("pyspark.sql.connect.")
    lake = rowops.Lakehouse(tmp_path / "lake", spark=spark)
    initial = spark.range(20).selectExpr("id AS k", "CAST(id AS STRING) AS s")
    table = lake.create_table("db.t", initial, partition_by=["bucket(4, k)"], identifier=["k"])
    expected = {k: (k, str(k)) for k in range(20)}
    for i, strategy in enumerate(STRATEGIES):
        keys = range(10 + 5 * i, 25 + 5 * i)
        source = spark.range(keys.start, keys.stop).selectExpr("id AS k", f"CONCAT('{strategy}', id) AS s")
        result = rowops.merge(source, table, on=["k"], strategy=strategy)
        assert result.strategy == strategy
        expected.update({k: (k, f"{strategy}{k}") for k in keys})
        checked = assert_readers_agree(table, expected.values(), COLUMNS, None)
        assert checked["pyiceberg"] == (
            "ok" if strategy != "equality-delete" else "skipped (equality deletes)"
        )
    for strategy in ("copy-on-write", "position-delete"):
        rowops.update(table, {"s": f"CONCAT(s, '+{strategy}')"}, where="k % 4 = 0", strategy=strategy)
        expected.update({k: (k, f"{s}+{strategy}") for k, s in expected.values() if k % 4 == 0})
    rowops.delete(table, where="k >= 30", strategy="position-delete")
    rowops.delete(table, where="k < 3", strategy="copy-on-write")
    with pytest.raises(InvalidExpressionError, match="k = 6 bogus"):  # not `k = 6 AS bogus` (issue 43)
        rowops.delete(table, where="k = 6 bogus")
    rowops.delete(table, where="NULL")  # never true: deletes nothing
    expected = {k: row for k, row in expected.items() if 3 <= k < 30}
    checked = assert_readers_agree(table, expected.values(), COLUMNS, None)
    assert checked["duckdb"] == "ok"
    monkeypatch.setattr(driver_deletes, "MAX_LISTED", 0)  # position deletes as block masks from Arrow
    assert sorted(tuple(r) for r in table.to_df().select(*COLUMNS).collect()) == sorted(expected.values())
    table.set_properties(
        **{"rowops.rewrite.by-key.enabled": "false"}
    )  # the join's Spark plan, not a run by key
    assert "Join" in rowops.explain(
        spark.range(5).selectExpr("id AS k", "'x' AS s"), table, on=["k"], strategy="position-delete"
    )


def test_smoke_s3_lake_from_connect_client(spark: SparkSession, s3: S3Server) -> None:
    """A lake on S3 with nothing shared but the bucket: the client commits (conditional puts, pyarrow),
    the server's executors write the data files through S3A."""
    lake = rowops.Lakehouse(f"s3://{s3.new_bucket()}/lake", spark=spark, storage_options=s3.options)
    initial = spark.range(12).selectExpr("id AS k", "CAST(id AS STRING) AS s")
    table = lake.create_table("db.t", initial, partition_by=["bucket(2, k)"], identifier=["k"])
    expected = {k: (k, str(k)) for k in range(12)}
    for i, strategy in enumerate(STRATEGIES):
        keys = range(4 * i, 4 * i + 6)
        source = spark.range(keys.start, keys.stop).selectExpr("id AS k", f"'{strategy}' AS s")
        rowops.merge(source, table, on=["k"], strategy=strategy)
        expected.update({k: (k, strategy) for k in keys})
    rowops.delete(lake.table("db.t"), where="k % 5 = 0", strategy="position-delete")
    expected = {k: row for k, row in expected.items() if k % 5}
    checked = assert_readers_agree(lake.table("db.t"), expected.values(), COLUMNS, None)
    assert checked["duckdb"] == "ok" and len(lake.history()) == 5
    bucket_keys = s3.keys(table.metadata_location.split("/")[2])
    assert any("/data/" in key and key.endswith(".parquet") for key in bucket_keys)  # written by S3A
    # the change feed (issue 45) over Connect on S3: net, from the created table to the end
    initial = {k: str(k) for k in range(12)}
    final = {k: s for k, (_, s) in expected.items()}
    want = Counter(
        [("delete", k, initial[k]) for k in initial if k not in final]
        + [("insert", k, final[k]) for k in final if k not in initial]
        + [
            (t, k, v)
            for k in initial.keys() & final.keys()
            if initial[k] != final[k]
            for t, v in (("update_preimage", initial[k]), ("update_postimage", final[k]))
        ]
    )
    net = lake.table("db.t").changes(start=1, net=True).collect()
    assert Counter((r["_change_type"], r["k"], r["s"]) for r in net) == want
    per_commit = lake.table("db.t").changes(start=1).select("_commit_version").distinct().collect()
    assert sorted(r[0] for r in per_commit) == [2, 3, 4, 5]


def test_server_python_cannot_import_rowops(tmp_path: Path) -> None:
    """The premise of these tests: rowops reaches the server's Python workers only by shipping itself
    (they run in the server's directory, without the client's PYTHONPATH)."""
    command = [str(server_python()), "-c", "import rowops"]
    done = subprocess.run(command, env=server_env(), cwd=tmp_path, capture_output=True)
    assert done.returncode != 0 and b"No module named 'rowops'" in done.stderr


def test_missing_executor_module_fails_up_front(
    connect_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rowops_session, "EXECUTOR_MODULES", (*rowops_session.EXECUTOR_MODULES, "no_such_dep"))
    session = SparkSession.builder.remote(connect_url).create()  # a new session: probed again
    try:
        with pytest.raises(ExecutorEnvironmentError, match="cannot import modules rowops needs: no_such_dep"):
            rowops.Lakehouse(tmp_path / "lake", spark=session)
        assert not (tmp_path / "lake").exists() or not any((tmp_path / "lake").rglob("*.json"))
    finally:
        session.stop()


def test_smoke_sql_from_connect_client(spark: SparkSession, tmp_path: Path) -> None:
    """``rowops.sql`` text (MERGE / UPDATE / DELETE / EXPLAIN / ALTER TABLE, queries over lake tables,
    time travel) from a thin client: ``tests/sql_smoke.py``."""
    lake = rowops.Lakehouse(tmp_path / "lake", spark=spark)
    checked = sql_smoke(lake)
    assert checked["duckdb"] == "ok"


def test_smoke_jobs_tagged_from_connect_client(spark: SparkSession, tmp_path: Path) -> None:
    """A Connect client cannot name a job, but it can tag it (issue 46): the operation's jobs carry
    ``rowops`` and the operation's tag, and the client's own tags are as before afterwards."""
    lake = rowops.Lakehouse(tmp_path / "lake", spark=spark)
    table = lake.create_table("db.t", spark.range(10).selectExpr("id AS k", "'a' AS s"), identifier=["k"])
    seen = tmp_path / "seen"
    seen.mkdir()

    def record(batches):  # type: ignore[no-untyped-def]
        from pyspark import TaskContext

        context = TaskContext.get()
        tags = (context.getLocalProperty("spark.job.tags") or "") if context else ""
        (seen / f"{context.partitionId() if context else 0}.txt").write_text(tags)
        yield from batches

    spark.addTag("client-tag")
    try:
        source = spark.range(5, 15).selectExpr("id AS k", "'b' AS s").mapInArrow(record, "k long, s string")
        rowops.merge(source, table, on=["k"], strategy="position-delete")
        assert spark.getTags() == {"client-tag"}
    finally:
        spark.clearTags()
    tags = {t for f in seen.iterdir() for t in f.read_text().split(",") if t}
    assert any(t.endswith("rowops") for t in tags), tags
    assert any("rowops-merge-db.t-" in t for t in tags), tags
    assert any(t.endswith("client-tag") for t in tags), tags
