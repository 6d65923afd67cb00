"""``lake.verify()`` and ``rowops verify``: a clean lake verifies clean; a file removed by hand is
reported as exactly that problem (issue 42, the integrity check)."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

from typer.testing import CliRunner

import rowops
from rowops.cli import app
from rowops.meta.paths import normalize_path


def _lake_with_history(lake: rowops.Lakehouse) -> rowops.Table:
    table = lake.create_table(
        "db.t", lake.spark.createDataFrame([(k, 0) for k in range(1, 5)], "k long, v long")
    )
    table.delete("k = 2", strategy="position-delete")
    table.update({"v": "9"}, "k = 3", strategy="copy-on-write")
    table.create_tag("t1")
    table.append(lake.spark.createDataFrame([(5, 0)], "k long, v long"))
    src = lake.spark.createDataFrame([(1, 1), (2, 2)], "k long, v long")
    other = lake.create_table("db.u", src, identifier=["k"])
    gone = lake.spark.createDataFrame([(1, 1)], "k long, v long")
    rowops.merge(
        gone, other, on=["k"], when_matched="delete", when_not_matched=None, strategy="equality-delete"
    )
    return table


def test_a_clean_lake_verifies_clean(lake: rowops.Lakehouse) -> None:
    table = _lake_with_history(lake)
    table.expire_snapshots(
        timedelta(0), retain_last=1
    )  # older versions now name expired states: refused, not broken
    result = rowops.Lakehouse(lake.root, spark=lake.spark).verify()
    assert result.ok, result.lines()
    assert result.versions == lake.version and result.snapshots >= 4
    assert result.refused  # the expired states of older versions
    out = CliRunner().invoke(app, ["--lake", str(lake.root), "--json", "verify"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["ok"] is True


def test_a_data_file_removed_by_hand_is_reported(lake: rowops.Lakehouse) -> None:
    table = _lake_with_history(lake)
    victim = normalize_path(table.files().data[0].path)
    os.remove(victim)
    result = rowops.Lakehouse(lake.root, spark=lake.spark).verify()
    assert not result.ok
    assert {(p.table, p.file, p.what) for p in result.problems} == {("db.t", victim, "data file is missing")}
    assert result.problems[0].lake_version == lake.version
    out = CliRunner().invoke(app, ["--lake", str(lake.root), "verify"])
    assert out.exit_code == 1 and "data file is missing" in out.output and victim in out.output


def test_a_manifest_list_removed_by_hand_is_reported(lake: rowops.Lakehouse) -> None:
    table = _lake_with_history(lake)
    manifest_list = normalize_path(table.metadata.current_snapshot().manifest_list)  # type: ignore[union-attr]
    os.remove(manifest_list)
    result = rowops.Lakehouse(lake.root, spark=lake.spark).verify()
    assert [(p.table, p.ref.split(" (")[0], p.file, p.what) for p in result.problems] == [
        ("db.t", "branch main", manifest_list, "manifest list is missing or unreadable")
    ]


def test_a_ref_to_a_snapshot_the_metadata_lacks_and_a_wrong_size(lake: rowops.Lakehouse) -> None:
    table = _lake_with_history(lake)
    victim = normalize_path(table.files().data[0].path)
    with open(victim, "ab") as handle:
        handle.write(b"x")
    result = rowops.Lakehouse(lake.root, spark=lake.spark).verify()
    assert {p.what.split(" has ")[0] for p in result.problems} == {"data file"}
    assert all(p.file == victim for p in result.problems)
    # a metadata file whose tag names a snapshot it does not list (hand-edited)
    location = Path(normalize_path(table.metadata_location))
    body = json.loads(location.read_text())
    body["refs"]["t1"]["snapshot-id"] = 12345
    location.write_text(json.dumps(body))
    problems = rowops.Lakehouse(lake.root, spark=lake.spark).verify().problems
    assert any(p.ref == "tag t1" and "12345" in p.what for p in problems)
