"""Fixtures of the cluster suite: Spark standalone clusters on loopback and sessions on them.

One pytest process can hold one SparkContext at a time: :class:`Sessions` keeps the current one and
replaces it when a test asks for a session on another cluster. Sessions are created the way a user
creates them: a ``spark-defaults.conf`` naming the master, read by ``rowops.exec.spark.session.create_session``
(which also ships rowops to the executors and checks their imports). Executors run the Python of
:func:`isolated_python`, which cannot import rowops by itself.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pyspark import SparkContext
from pyspark.sql import SparkSession

import rowops
from rowops.exec.spark.session import create_session
from rowops.meta.fileio import s3a_conf
from tests.cluster.standalone import StandaloneCluster, isolated_python
from tests.oracles.s3_server import S3Server, s3_server
from tools import s3_jars

WORKERS = 2
# Settings of every test session on a cluster (written to its spark-defaults.conf).
SESSION_CONF = {
    "spark.app.name": "rowops-cluster-tests",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.memory": "1g",
    "spark.executor.cores": "1",
    "spark.executor.memory": "512m",
    "spark.cores.max": str(WORKERS),
    # the first job waits until every executor registered, so tasks run in both executor JVMs
    "spark.scheduler.minRegisteredResourcesRatio": "1.0",
    "spark.scheduler.maxRegisteredResourcesWaitingTime": "180s",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
}


@dataclass(frozen=True)
class LakeTarget:
    """Where a test's lake lives: its URI and the storage options to open it with (none for a local lake)."""

    uri: str
    storage_options: dict[str, str] = field(default_factory=dict)

    def open(self, spark: SparkSession) -> rowops.Lakehouse:
        return rowops.Lakehouse(self.uri, spark=spark, storage_options=self.storage_options)


class Sessions:
    """The one SparkSession of this process, on whichever cluster the running test asked for."""

    def __init__(self, root: Path, executor_python: Path, extra: dict[str, str] | None = None) -> None:
        self.root = root
        self.executor_python = executor_python
        self.extra = extra or {}
        self.current: tuple[str, SparkSession] | None = None

    def use(self, cluster: StandaloneCluster, **extra: str) -> SparkSession:
        """A session on ``cluster`` (the current one if it is already there), created by rowops."""
        if self.current is not None and self.current[0] == cluster.url:
            return self.current[1]
        self.stop()
        conf = self.root / f"spark-defaults-{cluster.port}.conf"
        settings = {**SESSION_CONF, **self.extra, "spark.master": cluster.url, **extra}
        conf.write_text("".join(f"{key} {value}\n" for key, value in settings.items()))
        session = create_session(conf)
        self.current = (cluster.url, session)
        return session

    def release(self, cluster: StandaloneCluster) -> None:
        """Stop the current session if it runs on ``cluster`` (before the cluster goes away)."""
        if self.current is not None and self.current[0] == cluster.url:
            self.stop()

    def stop(self) -> None:
        if self.current is not None:
            self.current[1].stop()
            self.current = None


@pytest.fixture(scope="package")
def executor_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The executors' interpreter: the driver's packages, but no rowops of its own."""
    return isolated_python(tmp_path_factory.mktemp("executor-python"))


@pytest.fixture(scope="package")
def cluster_s3() -> Iterator[S3Server]:
    """An S3 server on loopback (moto) for lakes without any shared disk."""
    with s3_server() as server:
        yield server


@pytest.fixture(scope="package")
def sessions(
    tmp_path_factory: pytest.TempPathFactory, executor_python: Path, cluster_s3: S3Server
) -> Iterator[Sessions]:
    """The session switcher; executors start :func:`executor_python` (PySpark reads ``PYSPARK_PYTHON``
    in the driver when the SparkContext starts). Every session can reach :func:`cluster_s3`: the
    test-only S3A jars on ``spark.jars`` (shipped to the executors by Spark) and the matching
    ``spark.hadoop.fs.s3a.*`` settings in its ``spark-defaults.conf``."""
    if SparkContext._active_spark_context is not None:
        pytest.skip(
            "another SparkContext runs in this process; run the cluster suite alone (make test-cluster)"
        )
    previous = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = str(executor_python)
    extra = {**s3a_conf(cluster_s3.options), "spark.jars": ",".join(s3_jars.s3_jars())}
    switcher = Sessions(tmp_path_factory.mktemp("sessions"), executor_python, extra)
    try:
        yield switcher
    finally:
        switcher.stop()
        if previous is None:
            os.environ.pop("PYSPARK_PYTHON", None)
        else:
            os.environ["PYSPARK_PYTHON"] = previous


@pytest.fixture(scope="package")
def shared_cluster(
    tmp_path_factory: pytest.TempPathFactory, sessions: Sessions
) -> Iterator[StandaloneCluster]:
    """A master and two one-core workers sharing the driver's file system."""
    cluster = StandaloneCluster(tmp_path_factory.mktemp("cluster"))
    try:
        cluster.start_master()
        for _ in range(WORKERS):
            cluster.start_worker()
        cluster.wait_for_workers()
        yield cluster
    finally:
        sessions.release(cluster)
        cluster.stop()


@pytest.fixture()
def cluster_spark(sessions: Sessions, shared_cluster: StandaloneCluster) -> SparkSession:
    """The session on :func:`shared_cluster`, created (once) through rowops' configuration path."""
    return sessions.use(shared_cluster)


@pytest.fixture(params=["local", "s3"])
def cluster_lake(request: pytest.FixtureRequest, tmp_path: Path) -> LakeTarget:
    """The lake of one test: a local directory every process of the machine sees, or a bucket on the
    S3 server."""
    if request.param == "s3":
        server: S3Server = request.getfixturevalue("cluster_s3")
        return LakeTarget(f"s3://{server.new_bucket()}/lake", server.options)
    return LakeTarget(str(tmp_path / "lake"))


@pytest.fixture()
def lake(cluster_lake: LakeTarget, cluster_spark: SparkSession) -> rowops.Lakehouse:
    """The test's lakehouse on the shared cluster."""
    return cluster_lake.open(cluster_spark)


@pytest.fixture(params=["copy-on-write", "position-delete", "equality-delete"])
def strategy(request: pytest.FixtureRequest) -> str:
    return str(request.param)
