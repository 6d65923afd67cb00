"""Fixtures of the behaviour suite: strategy and layout parameters (the Java oracle: tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.spark.tables import LAYOUTS, Layout, wide_rows

STRATEGIES = ["copy-on-write", "position-delete", "equality-delete"]


@pytest.fixture(params=STRATEGIES)
def strategy(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=LAYOUTS, ids=[layout.name for layout in LAYOUTS])
def layout(request: pytest.FixtureRequest) -> Layout:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture()
def big(lake):  # type: ignore[no-untyped-def]
    """A table in ``bucket(8, k)`` with wide-ish rows, so target bytes dwarf the source's."""
    return lake.create_table("db.big", wide_rows(lake.spark), partition_by=["bucket(8, k)"], identifier=["k"])
