"""Fixtures of the behaviour suite: strategy and layout parameters, the Java oracle."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.oracles.java_reader import JavaIcebergReader, hadoop_s3_conf, java_oracle_available
from tests.spark.tables import LAYOUTS, Layout, wide_rows
from tools import s3_jars

STRATEGIES = ["copy-on-write", "position-delete", "equality-delete"]


@pytest.fixture(params=STRATEGIES)
def strategy(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=LAYOUTS, ids=[layout.name for layout in LAYOUTS])
def layout(request: pytest.FixtureRequest) -> Layout:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def java(request: pytest.FixtureRequest) -> Iterator[JavaIcebergReader | None]:
    """Iceberg's Java reader in its own JVM; ROWOPS_SKIP_JAVA=1 turns it off for quick local runs, and
    it is off under pyspark 4.x (the Iceberg jar is for Spark 3.5; DuckDB and PyIceberg still read).

    With the S3A jars present it can read S3 lakes too: it starts after the test S3 server, with its
    settings (Iceberg's path-based tables keep the Hadoop configuration of their first load).
    """
    if os.environ.get("ROWOPS_SKIP_JAVA") or not java_oracle_available():
        yield None
        return
    hadoop = hadoop_s3_conf(request.getfixturevalue("s3").options) if s3_jars.available() else {}
    with JavaIcebergReader(hadoop_conf=hadoop) as reader:
        yield reader


@pytest.fixture()
def big(lake):  # type: ignore[no-untyped-def]
    """A table in ``bucket(8, k)`` with wide-ish rows, so target bytes dwarf the source's."""
    return lake.create_table("db.big", wide_rows(lake.spark), partition_by=["bucket(8, k)"], identifier=["k"])
