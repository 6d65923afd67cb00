"""The behaviour suite (``test_behaviour.py``) on format-v3 tables, whose position deletes are
deletion vectors: every final table read back by rowops, DuckDB (its iceberg extension reads v3
deletion vectors), PyIceberg and Iceberg's Java reader (1.10), for every strategy."""

from __future__ import annotations

import pytest

from tests.conftest import make_lake
from tests.spark import test_behaviour as behaviour
from tests.spark.conftest import STRATEGIES
from tests.spark.tables import Layout, Oracle, frame, make_row


def create_v3(lake, layout: Layout, rows=None):  # type: ignore[no-untyped-def]
    rows = rows if rows is not None else [make_row(k) for k in range(behaviour.N)]
    table = lake.create_table(
        "db.t",
        frame(lake.spark, rows),
        partition_by=list(layout.partition_by),
        identifier=list(layout.keys),
        format_version=3,
    )
    assert table.metadata.format_version == 3
    return table, Oracle(layout, rows)


@pytest.fixture(
    params=[pytest.param(s, marks=() if s == "position-delete" else pytest.mark.slow) for s in STRATEGIES]
)
def strategy(request: pytest.FixtureRequest) -> str:
    """Deletion vectors are what v3 changes: `make test` runs the position-delete cases, `make test-slow`
    copy-on-write and equality deletes on v3 too."""
    return str(request.param)


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def lake(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The behaviour suite's lakes, its tables created with ``format_version=3``."""
    monkeypatch.setattr(behaviour, "create", create_v3)
    return make_lake(request.param, request)


test_upsert = behaviour.test_upsert
test_delete_by_key = behaviour.test_delete_by_key
test_conditional_merge_builder = behaviour.test_conditional_merge_builder
test_update_where = behaviour.test_update_where
test_delete_where_with_nulls = behaviour.test_delete_where_with_nulls
test_mixed_strategies_in_sequence = behaviour.test_mixed_strategies_in_sequence
