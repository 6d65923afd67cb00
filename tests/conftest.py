"""Shared fixtures: one local SparkSession for the whole run, a fresh lakehouse per test."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A plain local SparkSession (no Iceberg jars), configured by rowops."""
    from rowops.exec.session import configure

    session = (
        SparkSession.builder.master("local[2]")
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
def lake(spark: SparkSession, tmp_path: Path):  # type: ignore[no-untyped-def]
    import rowops

    return rowops.Lakehouse(tmp_path / "lake", spark=spark)
