"""OpenLineage run events (issue 46, part 6) through openlineage-python's own file transport, configured
by its environment variables as a user would: START then COMPLETE per operation with the table's
snapshots and row counts, FAIL with the error, a pipeline batch as the parent of its MERGE, and nothing
at all when OpenLineage is turned off."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import rowops
from rowops.errors import InvalidExpressionError
from rowops.pipeline import parse_config, runner


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture()
def events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "lineage.jsonl"
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", "file")
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__LOG_FILE_PATH", str(path))
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__APPEND", "true")
    return path


def _version(dataset: dict[str, Any]) -> str | None:
    return dataset["facets"].get("version", {}).get("datasetVersion")


def test_operations_emit_start_and_complete_or_fail(lake, events, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    spark = lake.spark
    t = lake.create_table("db.t", spark.range(10).selectExpr("id AS k", "'a' AS s"), identifier=["k"])
    created = t.snapshots()[-1]["snapshot_id"]
    source = spark.range(8, 12).selectExpr("id AS k", "'b' AS s")
    merged = rowops.merge(source, t, on=["k"], strategy="position-delete").snapshot_id
    with pytest.raises(InvalidExpressionError):
        rowops.delete(t, where="k = 5 or")
    t.append(spark.range(20, 23).selectExpr("id AS k", "'c' AS s"))
    got = _events(events)
    assert [(e["eventType"], e["job"]["name"]) for e in got] == [
        ("START", "rowops.merge.db.t"),
        ("COMPLETE", "rowops.merge.db.t"),
        ("START", "rowops.delete.db.t"),
        ("FAIL", "rowops.delete.db.t"),
        ("START", "rowops.append.db.t"),
        ("COMPLETE", "rowops.append.db.t"),
    ]
    assert len({e["run"]["runId"] for e in got}) == 3  # a run id per operation, kept from START to end
    complete = got[1]
    (read,), (written,) = complete["inputs"], complete["outputs"]
    assert read["name"] == written["name"] == "db.t" and read["namespace"] == "file://" + str(lake.location)
    assert (_version(read), _version(written)) == (str(created), str(merged))
    assert written["outputFacets"]["outputStatistics"]["rowCount"] == 4  # 2 updated, 2 inserted
    error = got[3]["run"]["facets"]["errorMessage"]
    assert "k = 5 or" in error["message"] and error["programmingLanguage"] == "python"
    assert got[5]["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 3
    monkeypatch.setenv("OPENLINEAGE_DISABLED", "true")  # configured, but turned off: nothing is sent
    rowops.delete(t, where="k = 1")
    assert len(_events(events)) == 6


def test_a_pipeline_batch_is_the_parent_of_its_merge(lake, events, tmp_path) -> None:  # type: ignore[no-untyped-def]
    spark = lake.spark
    lake.create_table("db.t", spark.range(4).selectExpr("id", "'a' AS v"), identifier=["id"])
    spark.createDataFrame([(1, "x"), (9, "y")], "id long, v string").write.parquet(
        str(tmp_path / "src" / "b1")
    )
    text = (
        f'[pipeline]\nid = "p"\n[source]\nformat = "parquet"\npath = "{tmp_path}/src/{{batch_id}}"\n'
        '[[targets]]\ntable = "db.t"\nkeys = ["id"]\nstrategy = "copy-on-write"\n'
    )
    runner.run(lake, parse_config(text, "t.toml"), "b1")
    got = _events(events)
    batch = [e for e in got if e["job"]["name"] == "rowops.pipeline.p"]
    merge = [e for e in got if e["job"]["name"] == "rowops.merge.db.t"]
    assert [e["eventType"] for e in batch] == ["START", "COMPLETE"]
    assert [e["eventType"] for e in merge] == ["START", "COMPLETE"]
    assert batch[0]["inputs"] == [
        {"namespace": "file", "name": f"{tmp_path}/src/b1", "facets": {}, "inputFacets": {}}
    ]
    assert batch[1]["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 2
    parent = merge[0]["run"]["facets"]["parent"]
    assert parent["run"]["runId"] == batch[0]["run"]["runId"] and parent["job"]["name"] == "rowops.pipeline.p"
    assert got.index(batch[1]) == len(got) - 1  # the batch completes after its transaction committed


def test_maintenance_operations_are_runs_too(lake, events) -> None:  # type: ignore[no-untyped-def]
    """Compaction, delete compaction, manifest rewrite, expiry and orphan removal each send START and
    COMPLETE with the table as input and output (the snapshot committed, where one is)."""
    spark = lake.spark
    t = lake.create_table("db.t", spark.range(10).selectExpr("id AS k", "'a' AS s"), identifier=["k"])
    rowops.delete(t, where="k < 3", strategy="position-delete")
    compacted = t.compact().snapshot_id
    t.rewrite_manifests()
    t.expire_snapshots(older_than=timedelta(0))
    t.remove_orphans(older_than=timedelta(0), dry_run=True)
    got = [e for e in _events(events) if not e["job"]["name"].startswith("rowops.delete")]
    names = ["compact", "rewrite_manifests", "expire_snapshots", "remove_orphans"]
    assert [(e["eventType"], e["job"]["name"]) for e in got] == [
        (kind, f"rowops.{name}.db.t") for name in names for kind in ("START", "COMPLETE")
    ]
    (written,) = got[1]["outputs"]
    assert written["name"] == "db.t" and _version(written) == str(compacted)
