"""The ``rowops`` command line end to end: real processes on a real lake (few Spark start-ups: the
commands that need no Spark start none), plus the in-process checks of output and exit codes."""

from __future__ import annotations

import importlib
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import rowops
from rowops.catalog.log import LakeLog
from rowops.cli import EXIT_BAD_INPUT, EXIT_CONFLICT, EXIT_FAILURE, app, exit_code, parse_duration
from rowops.errors import CommitConflictError, CommitStateUnknownError, NoSuchTableError, PipelineConfigError
from tests.spark.tables import fingerprint

ROOT = Path(__file__).resolve().parents[2]
cli_app = importlib.import_module("rowops.cli.app")  # the module (``rowops.cli.app`` is also the Typer)
EVENTS = "op string, id long, v string, seq long"


def rowops_cli(*args: str, lake: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m rowops ARGS`` in a fresh process (this checkout's rowops), output captured."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable}
    env.pop("ROWOPS_FAULT", None)
    if lake is not None:
        env["ROWOPS_LAKE"] = str(lake)
    return subprocess.run(
        [sys.executable, "-m", "rowops", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )


def _pipeline(tmp_path: Path, lake: rowops.Lakehouse) -> Path:
    lake.create_table(
        "db.t",
        lake.spark.createDataFrame([(i, f"v{i}", 0) for i in range(6)], "id long, v string, seq long"),
        identifier=["id"],
    )
    source = tmp_path / "src"
    events = [("U", 1, "a", 1), ("D", 2, None, 1), ("I", 9, "n", 1), ("I", 9, "n", 1)]
    lake.spark.createDataFrame(events, EVENTS).write.parquet(str(source / "b1"))
    lake.spark.createDataFrame([("U", 1, "a", 1), ("X", 3, "b", 1)], EVENTS).write.parquet(
        str(source / "bad")
    )
    config = tmp_path / "p.toml"
    config.write_text(
        f'[pipeline]\nid = "cli"\n[source]\nformat = "parquet"\npath = "{source}/{{batch_id}}"\n'
        '[source.cdc]\nop_column = "op"\norder_by = "seq"\n'
        '[[targets]]\ntable = "db.t"\nkeys = ["id"]\n'
        '[maintenance]\nmode = "advise"\nthresholds = { data_files = 0 }\n'
        '[spark]\n"spark.ui.enabled" = false\n"spark.sql.shuffle.partitions" = 2\n'
    )
    return config


@pytest.mark.slow  # the in-process tests cover the commands; this runs each as its own process
def test_pipeline_commands_in_processes(lake: rowops.Lakehouse, tmp_path: Path) -> None:
    config = _pipeline(tmp_path, lake)
    root = lake.root
    before = fingerprint(lake)

    bad = rowops_cli("pipeline", "validate", str(config), "--batch-id", "bad", lake=root)
    assert bad.returncode == EXIT_BAD_INPUT, bad.stderr
    assert "operation code(s) 'X' in column 'op'" in bad.stderr
    assert fingerprint(lake) == before

    run = rowops_cli("--json", "pipeline", "run", str(config), "--batch-id", "b1", lake=root)
    assert run.returncode == 0, run.stderr
    metrics = json.loads(run.stdout)
    assert (metrics["status"], metrics["pipeline"], metrics["batch_id"]) == ("committed", "cli", "b1")
    assert metrics["rows_read"] == 4 and metrics["changes"] == {"update": 1, "delete": 1, "insert": 2}
    assert metrics["totals"]["rows_inserted"] == 1 and metrics["totals"]["rows_deleted"] == 1
    assert metrics["targets"][0]["strategy_reason"]
    assert {"check", "read", "merge", "commit"} <= set(metrics["phases_s"])
    assert metrics["debt_before"]["db.t"]["data_files"] >= 1 and "db.t" in metrics["debt_after"]
    assert metrics["maintenance"] == [
        {
            "table": "db.t",
            "mode": "advise",
            "action": "compact_position_deletes, convert_equality_deletes, compact",
            "exceeded": {"data_files": metrics["debt_after"]["db.t"]["data_files"]},
        }
    ]
    assert "pipeline cli batch b1: committed" in run.stderr  # the log lines (stderr is not a terminal)

    again = rowops_cli("pipeline", "run", str(config), "--batch-id", "b1", lake=root)
    assert again.returncode == 0, again.stderr
    assert "skipped" in again.stdout and "was committed before" in again.stdout
    assert "pipeline cli batch b1" in run.stderr
    assert "Setting default log level" in run.stderr and "Setting default log level" not in again.stderr

    history = rowops_cli("--json", "history", lake=root)
    entries = json.loads(history.stdout)
    assert [e["batch"] for e in entries] == [None, "cli/b1"]
    assert list(entries[-1]["tables"]) == ["db.t"]
    rows = (entries[-1]["rows_inserted"], entries[-1]["rows_updated"], entries[-1]["rows_deleted"])
    assert rows == (1, 1, 1)  # the MERGE's counts reach the lake history

    text = rowops_cli("describe", "db.t", lake=root)
    assert text.returncode == 0, text.stderr
    for needle in (
        "table db.t",
        "1 id: long NOT NULL",
        "identifier: id",
        "partitioning: unpartitioned",
        "debt: ",
    ):
        assert needle in text.stdout, text.stdout
    tables = rowops_cli("--lake", str(root), "tables")
    assert tables.stdout.split() == ["db.t"]


def test_bad_input_exit_codes_in_processes(tmp_path: Path) -> None:
    """No Spark starts for these: the config and the table name are checked first."""
    config = tmp_path / "p.toml"
    config.write_text('[pipeline]\nid = "x"\nbatch = 3\n')
    bad = rowops_cli("--json", "pipeline", "run", str(config), lake=tmp_path / "lake")
    assert bad.returncode == EXIT_BAD_INPUT
    error = json.loads(bad.stdout)
    assert error["error"] == "PipelineConfigError" and "unknown key [pipeline].batch" in error["message"]
    assert error["exit_code"] == EXIT_BAD_INPUT
    nothing = rowops_cli("describe", "db.nope", lake=tmp_path / "lake")
    assert nothing.returncode == EXIT_BAD_INPUT and "no lake at" in nothing.stderr
    assert not (tmp_path / "lake").exists()  # never created by a read-only command
    (tmp_path / "lake").mkdir()
    missing = rowops_cli("describe", "db.nope", lake=tmp_path / "lake")
    assert missing.returncode == EXIT_BAD_INPUT and "db.nope" in missing.stderr
    assert f"Help: List the lake's tables with: rowops --lake {tmp_path / 'lake'} tables" in missing.stderr
    usage = rowops_cli("expire-snapshots", "db.t", "--older-than", "soon", lake=tmp_path / "lake")
    assert usage.returncode == 2 and "not a duration" in usage.stderr
    nolake = rowops_cli("tables")
    assert nolake.returncode == EXIT_BAD_INPUT and "--lake" in nolake.stderr


def test_exit_codes_of_conflicts_bad_input_and_failures() -> None:
    assert exit_code(CommitConflictError("raced", retry_safe=True)) == EXIT_CONFLICT == 3
    assert exit_code(CommitConflictError("dropped", retry_safe=False)) == EXIT_CONFLICT  # JSON: retry_safe
    assert exit_code(PipelineConfigError("bad")) == exit_code(NoSuchTableError("no")) == EXIT_BAD_INPUT == 2
    assert exit_code(CommitStateUnknownError("maybe")) == EXIT_FAILURE == 1


def test_validate_and_explain_in_process(lake: rowops.Lakehouse, tmp_path: Path) -> None:
    config = _pipeline(tmp_path, lake)
    text = config.read_text().split("[spark]")[0]  # keep the shared test session's settings
    config.write_text(text)
    before = fingerprint(lake)
    runner = CliRunner()
    valid = runner.invoke(
        app, ["--lake", str(lake.root), "pipeline", "validate", str(config), "--batch-id", "b1"]
    )
    assert valid.exit_code == 0, valid.output
    assert f"{config}: valid" in valid.output
    explained = runner.invoke(
        app, ["--lake", str(lake.root), "--json", "explain", str(config), "--batch-id", "b1"]
    )
    assert explained.exit_code == 0, explained.output
    plan = json.loads(explained.output)["db.t"]
    assert "== rowops plan ==" in plan and "strategy: " in plan
    assert fingerprint(lake) == before


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("30m", 1800), ("1.5h", 5400), ("7d", 604800)])
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text).total_seconds() == seconds


def test_version_quiet_and_progress_with_spark_tasks(
    lake: rowops.Lakehouse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``--version``; ``--quiet`` prints nothing on success; without a terminal, progress is log lines
    that show Spark's running tasks, repeated while a step runs (issue 46)."""
    runner = CliRunner()
    shown = runner.invoke(app, ["--version"])
    assert shown.exit_code == 0 and shown.output.startswith("rowops "), shown.output
    config = _pipeline(tmp_path, lake)
    config.write_text(config.read_text().split("[spark]")[0])  # keep the shared test session's settings
    monkeypatch.setattr(cli_app, "LOG_EVERY_S", 0.05)
    with caplog.at_level(logging.INFO, logger="rowops.cli"):
        ran = runner.invoke(
            app, ["--lake", str(lake.root), "pipeline", "run", str(config), "--batch-id", "b1"]
        )
    assert ran.exit_code == 0, ran.output
    lines = [r.getMessage() for r in caplog.records if r.name == "rowops.cli"]
    assert any(line.startswith("still ") and "(Spark: " in line and " tasks, " in line for line in lines), (
        lines
    )
    quiet = runner.invoke(
        app, ["--lake", str(lake.root), "--quiet", "pipeline", "run", str(config), "--batch-id", "b1"]
    )
    assert quiet.exit_code == 0 and quiet.output == "", quiet.output  # already committed: skipped, silently


def test_a_conflict_exits_3_and_its_json_says_whether_a_retry_is_safe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rowops.Lakehouse(tmp_path / "lake")  # an empty lake; no Spark session is started
    for safe in (True, False):

        def raced(*args: object, safe: bool = safe) -> None:
            raise CommitConflictError("another writer committed first", retry_safe=safe)

        monkeypatch.setattr(LakeLog, "latest", raced)
        result = CliRunner().invoke(app, ["--lake", str(tmp_path / "lake"), "--json", "tables"])
        assert result.exit_code == EXIT_CONFLICT
        error = json.loads(result.stdout)
        assert (error["error"], error["retry_safe"], error["exit_code"]) == ("CommitConflictError", safe, 3)
