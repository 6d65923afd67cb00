"""Fixtures of the behaviour suite: strategy and layout parameters, the Java oracle."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.oracles.java_reader import JavaIcebergReader, java_oracle_available
from tests.spark.tables import LAYOUTS, Layout, wide_rows

STRATEGIES = ["copy-on-write", "position-delete", "equality-delete"]


@pytest.fixture(params=STRATEGIES)
def strategy(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=LAYOUTS, ids=[layout.name for layout in LAYOUTS])
def layout(request: pytest.FixtureRequest) -> Layout:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def java() -> Iterator[JavaIcebergReader | None]:
    """Iceberg's Java reader in its own JVM; ROWOPS_SKIP_JAVA=1 turns it off for quick local runs, and
    it is off under pyspark 4.x (the Iceberg jar is for Spark 3.5; DuckDB and PyIceberg still read)."""
    if os.environ.get("ROWOPS_SKIP_JAVA") or not java_oracle_available():
        yield None
        return
    with JavaIcebergReader() as reader:
        yield reader


@pytest.fixture()
def big(lake):  # type: ignore[no-untyped-def]
    """A table in ``bucket(8, k)`` with wide-ish rows, so target bytes dwarf the source's."""
    return lake.create_table("db.big", wide_rows(lake.spark), partition_by=["bucket(8, k)"], identifier=["k"])
