"""The checks of the stateful lake test (``test_lake_model.py``): what the lake serves, read cold,
against the model (``lake_model.py``)."""

from __future__ import annotations

from typing import Any

import pytest

import rowops
from rowops.errors import SnapshotExpiredError
from tests.oracles.incremental import incremental_append_rows
from tests.spark import lake_model as m
from tests.spark.lake_ops import collect


def check_table(model: m.LakeModel, lake: rowops.Lakehouse, name: str) -> None:
    """The head, the refs and the rows at each ref equal the model."""
    table, state = lake.table(name), model.tables[name]
    assert collect(table.to_df()) == (state.columns, model.rows(name)), f"head of {name}"
    refs = {n: r["snapshot_id"] for n, r in table.refs().items() if n != "main"}
    assert refs == dict(state.refs), f"refs of {name}"
    for ref, sid in state.refs:
        columns, rows = collect(table.to_df(snapshot_id=sid))
        assert rows == m.widen(model.snapshots[name][sid], len(columns)), f"{ref} of {name}"


def check_version(model: m.LakeModel, lake: rowops.Lakehouse, version: int) -> None:
    """Every table of lake ``version`` equals the model, or is refused because an expiry removed it."""
    view = lake.at(version=version)
    for name, state in model.versions[version].items():
        if model.is_expired(name, state.head):
            with pytest.raises(SnapshotExpiredError):
                view.table(name).to_df().collect()
            continue
        got = collect(view.table(name).to_df())
        assert got == (state.columns, model.rows_at(name, state, state.head)), f"{name} at v{version}"


def check_java(model: m.LakeModel, lake: rowops.Lakehouse, java: Any, name: str, skip_squashed: bool) -> None:
    """Iceberg Java reads the head as the model, and its incremental append scan since the window's
    start returns exactly the rows appended since."""
    table, state = lake.table(name), model.tables[name]
    got = java.read(table.metadata_location)
    java_rows = m.rows_of(zip(*(got.column(c).to_pylist() for c in state.columns), strict=True))
    assert java_rows == model.rows(name), f"Iceberg Java reads the head of {name}"
    window = model.windows.get(name)
    if window is None or window.start is None or not window.rows or window.start == state.head:
        return
    if window.squashed and skip_squashed:
        return
    appended = incremental_append_rows(java, table.metadata_location, window.start, list(state.columns))
    assert m.rows_of(appended) == m.widen(window.rows, len(state.columns)), f"incremental scan of {name}"
