"""The maintenance commands and the pipeline's ``mode = "run"`` policy, end to end (the table
maintenance API: ``Table.compact``, ``expire_snapshots``, ``remove_orphans``, ``compact_position_deletes``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rowops
from rowops.pipeline import parse_config, runner
from tests.spark.test_cli import rowops_cli

ROOT = Path(__file__).resolve().parents[2]
EVENTS = "op string, id long, v string, seq long"


def _rows(table: rowops.Table) -> list[tuple[object, ...]]:
    return sorted(tuple(r) for r in table.to_df().collect())


def _with_deletes(lake: rowops.Lakehouse) -> rowops.Table:
    df = lake.spark.createDataFrame([(i, f"v{i}", 0) for i in range(40)], "id long, v string, seq long")
    table = lake.create_table("db.t", df.repartition(4), identifier=["id"])
    for n in range(3):
        table.delete(f"id % 7 = {n}", strategy="position-delete")
    return table


def test_maintenance_runs_when_the_debt_crosses_a_threshold(lake: rowops.Lakehouse, tmp_path: Path) -> None:
    table = _with_deletes(lake)
    lake.spark.createDataFrame([("U", 1, "a", 1)], EVENTS).write.parquet(str(tmp_path / "src" / "b1"))
    lake.spark.createDataFrame([("U", 2, "b", 1)], EVENTS).write.parquet(str(tmp_path / "src" / "b2"))
    text = (
        f'[pipeline]\nid = "m"\n[source]\nformat = "parquet"\npath = "{tmp_path}/src/{{batch_id}}"\n'
        '[source.cdc]\nop_column = "op"\norder_by = "seq"\n[[targets]]\ntable = "db.t"\nkeys = ["id"]\n'
        'strategy = "position-delete"\n[maintenance]\nmode = "run"\nactions = ["compact_position_deletes", "compact"]\n'
    )
    high = runner.run(lake, parse_config(text + "thresholds = { delete_files = 1000 }\n"), "b1")
    assert high.maintenance == []  # below the threshold: nothing runs
    rows = _rows(table)
    low = runner.run(lake, parse_config(text + "thresholds = { delete_files = 1 }\n"), "b2")
    assert [step["action"] for step in low.maintenance] == ["compact_position_deletes", "compact"]
    assert all(step["mode"] == "run" and "delete_files" in step["exceeded"] for step in low.maintenance)
    assert low.debt_after_maintenance["db.t"]["delete_files"] == 0 < low.debt_after["db.t"]["delete_files"]
    assert _rows(table) == sorted({*rows, (2, "b", 1)} - {r for r in rows if r[0] == 2})


@pytest.mark.slow  # the in-process tests cover the commands; this runs each as its own process
def test_maintenance_commands_in_processes(lake: rowops.Lakehouse) -> None:
    table = _with_deletes(lake)
    rows = _rows(table)
    root = str(lake.root)
    compact = rowops_cli("--lake", root, "--json", "compact", "db.t")
    assert compact.returncode == 0, compact.stderr
    assert json.loads(compact.stdout)["table"] == "db.t"
    assert _rows(table) == rows and not table.files().deletes
    expire = rowops_cli("--lake", root, "--json", "expire-snapshots", "db.t", "--older-than", "0s")
    assert expire.returncode == 0, expire.stderr
    assert len(table.snapshots()) == 1
    orphans = rowops_cli("--lake", root, "remove-orphans", "db.t", "--older-than", "0s")
    assert orphans.returncode == 0, orphans.stderr
    assert _rows(table) == rows
    described = rowops_cli("--lake", root, "describe", "db.t")
    assert "delete_files 0" in described.stdout
