"""Shared fixtures: one local SparkSession for the whole run, a fresh lakehouse per test."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
from pyspark.sql import SparkSession

from tests.oracles.java_reader import java_oracle_available
from tests.oracles.s3_server import S3Server, s3_server
from tools import s3_jars

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that read through Iceberg's Java runtime are skipped under pyspark 4.x (jar for 3.5)."""
    if java_oracle_available():
        return
    skip = pytest.mark.skip(reason="Iceberg's Java oracle needs Spark 3.5 (its jar); pyspark 4.x runs here")
    for item in items:
        if "java" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A plain local SparkSession (no Iceberg jars), configured by rowops.

    Hadoop's S3A connector jars (test-only, ``tools/s3_jars.py``) are on its class path when they are
    extracted, so that S3 lakes can be tested; rowops itself adds no jars.
    """
    from rowops.exec.session import configure

    builder = SparkSession.builder
    for key, value in s3_jars.session_conf(pyspark.__version__).items():
        builder = builder.config(key, value)
    session = (
        builder.master("local[2]")
        .appName("rowops-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield configure(session)
    session.stop()


@pytest.fixture()
def local_lake(spark: SparkSession, tmp_path: Path):  # type: ignore[no-untyped-def]
    import rowops

    return rowops.Lakehouse(tmp_path / "lake", spark=spark)


@pytest.fixture()
def lake(local_lake):  # type: ignore[no-untyped-def]
    """A fresh local lake (suites that run on both storages override it with ``make_lake``)."""
    return local_lake


@pytest.fixture(scope="session")
def s3(spark: SparkSession) -> Iterator[S3Server]:
    """A moto S3 server on loopback; the test session's Spark reaches it through S3A."""
    from rowops.meta.fileio import s3a_conf

    if not s3_jars.available():
        pytest.fail("S3A jars are missing: run `python tools/s3_jars.py` (make install does)")
    with s3_server() as server:
        for key, value in s3a_conf(server.options).items():  # the caller's session carries the settings
            spark.conf.set(key.removeprefix("spark.hadoop."), value)
        yield server


@pytest.fixture()
def s3_lake(spark: SparkSession, s3: S3Server):  # type: ignore[no-untyped-def]
    """A fresh lake in its own bucket on the S3 server."""
    import rowops

    return rowops.Lakehouse(f"s3://{s3.new_bucket()}/lake", spark=spark, storage_options=s3.options)


def make_lake(kind: str, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """The ``lake`` (local) or ``s3_lake`` fixture, by name: for suites run on both storages."""
    return request.getfixturevalue("s3_lake" if kind == "s3" else "local_lake")
