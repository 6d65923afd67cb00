"""The README's quick start, `make run` and the first pipeline of docs/guide/pipelines.md run as written
(in a scratch directory), so the docs stay true. The guide pages' examples: test_docs.py."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import rowops
from rowops.cli import EXIT_BAD_INPUT, app
from rowops.exec.spark.session import use_log_level
from spark_jobs import pipeline_demo, upsert_demo
from tests.docs_blocks import README, blocks
from tests.oracles.duckdb_reader import read_duckdb

ROOT = Path(__file__).resolve().parents[2]
PIPELINES = ROOT / "docs" / "guide" / "pipelines.md"
MAKEFILE = ROOT / "Makefile"
TINY_SF = "0.01"  # 28,810 store_sales rows


def test_readme_examples_run(spark, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The quick start, as written, in an empty directory; its table read cold and by DuckDB."""
    runnable = [b for b in blocks(README) if b.reason_not_run is None]
    assert [b.language for b in runnable] == ["python"]  # the quick start (the guides: test_docs.py)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(runnable[0].code, runnable[0].where, "exec"), namespace)
    assert namespace["r"].snapshot_id  # type: ignore[attr-defined]
    expected = {i: (i % 7, "open") for i in range(1000)}
    expected.update({i: (99, "paid") for i in range(990, 1010)})  # the upsert
    for i in range(990, 995):  # the delete by key
        del expected[i]
    expected = {i: (a, "billed" if a == 0 else s) for i, (a, s) in expected.items() if a != 1}
    del expected[3]  # the SQL DELETE
    cold = rowops.Lakehouse(tmp_path / "lake", spark=spark).table("db.orders")
    assert {r["id"]: (r["amount"], r["status"]) for r in cold.to_df().collect()} == expected
    duck = read_duckdb(cold.metadata_location).to_pylist()  # an independent reader
    assert {r["id"]: (r["amount"], r["status"]) for r in duck} == expected


def _recipe(target: str) -> list[str]:
    """The ``python -m MODULE ARGS`` line of a Makefile target, as [MODULE, *ARGS]."""
    text = MAKEFILE.read_text()
    recipe = text.split(f"\n{target}:", 1)[1].split("\n\t", 1)[1].split("\n", 1)[0]
    words = shlex.split(recipe)
    return words[words.index("-m") + 1 :]


def _scaled(args: list[str], data: Path) -> list[str]:
    """The recipe's arguments at a tiny scale factor, its TPC-DS data under ``data``."""
    sf = args.index("--sf")
    return [*args[:sf], "--sf", TINY_SF, *args[sf + 2 :], "--data", str(data)]


@pytest.fixture()
def fresh_clone(spark, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """A scratch directory with the checkout's conf/, the working directory of the README's commands;
    the session settings and Spark log level the commands change are put back afterwards."""
    shutil.copytree(ROOT / "conf", tmp_path / "conf")
    monkeypatch.chdir(tmp_path)
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    yield tmp_path
    spark.conf.set("spark.sql.shuffle.partitions", partitions)
    use_log_level("ERROR")


def test_readme_make_run_steps_run(fresh_clone: Path) -> None:
    """``make run`` (after ``install``): the upsert demo it runs, at a tiny scale factor."""
    module, *args = _recipe("run")
    assert module == "spark_jobs.upsert_demo" and "--lake" in args
    assert upsert_demo.main(_scaled(args, fresh_clone / "data")) == 0
    lake = rowops.Lakehouse(fresh_clone / args[args.index("--lake") + 1])  # cold
    assert lake.list_tables() == ["db.store_sales"]


def test_readme_first_pipeline_runs_as_written(fresh_clone: Path) -> None:
    """ "Your first pipeline" on a fresh clone: ``make pipeline-demo`` first (at a tiny scale factor),
    then every ``$ rowops ...`` command docs/guide/pipelines.md shows, as written."""
    section = PIPELINES.read_text().split("## Your first pipeline", 1)[1].split("\n## ", 1)[0]
    assert "run `make pipeline-demo` first" in section
    commands = [shlex.split(line[2:]) for line in section.splitlines() if line.startswith("$ rowops ")]
    assert len(commands) >= 3 and commands[0][-4:-2] == ["run", "conf/store_sales_pipeline.toml"]
    runner = CliRunner()
    before = runner.invoke(app, commands[0][1:])  # before the demo: no lake, and the error says so
    assert before.exit_code == EXIT_BAD_INPUT and "make pipeline-demo" in before.output, before.output
    assert not (fresh_clone / "lake-pipeline").exists()

    module, *args = _recipe("pipeline-demo")
    assert module == "spark_jobs.pipeline_demo"
    assert pipeline_demo.main(_scaled(args, fresh_clone / "data" / "tpcds")) == 0
    for command in commands:
        result = runner.invoke(app, command[1:])
        assert result.exit_code == 0, (command, result.output)
    lake = rowops.Lakehouse(fresh_clone / "lake-pipeline", create=False)  # cold
    assert [c.batch for c in lake.history() if c.batch] == [
        "store_sales_changes/batch-0001",
        "store_sales_gold/gold-0001",
        "store_sales_changes/batch-0002",
        "store_sales_gold/gold-0002",
    ]
    chained = PIPELINES.read_text().split("## Chained pipelines", 1)[1].split("\n## ", 1)[0]
    for line in chained.splitlines():
        if line.startswith("$ rowops "):
            result = runner.invoke(app, shlex.split(line[2:])[1:])
            assert result.exit_code == 0, (line, result.output)
