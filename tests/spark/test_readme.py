"""The README's Python examples run as written (in a scratch directory), so the docs stay true."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import rowops
from rowops.cli import EXIT_BAD_INPUT, app
from rowops.exec.spark.session import use_log_level
from spark_jobs import pipeline_demo, upsert_demo

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAKEFILE = ROOT / "Makefile"
TINY_SF = "0.01"  # 28,810 store_sales rows


def test_readme_examples_run(spark, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 4
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    for block in blocks[:4]:  # quick start, the MERGE builder, transactions, planning and tuning
        exec(compile(block, str(README), "exec"), namespace)
    t, r = namespace["t"], namespace["r"]
    assert r.rows_deleted is not None  # type: ignore[attr-defined]
    rows = {row["id"]: row for row in t.to_df().collect()}  # type: ignore[attr-defined]
    assert not [i for i in rows if i < 10]  # NOT MATCHED BY SOURCE AND t.id < 10: deleted
    assert 10 in rows and rows[14]["status"] == "late"  # amount 0 rows got status 'late'
    assert rows[995]["status"] == "paid" and rows[995]["amount"] == 99 + 99  # odd id: updated s + t
    lake = namespace["lake"]
    assert "db.payments" in lake.list_tables("db")  # type: ignore[attr-defined]
    assert lake.history()[-1].transaction_id  # type: ignore[attr-defined]
    assert 996 not in rows  # even id: deleted by "s.op = 'D'"
    assert all(row["amount"] != 1 for row in rows.values())
    # maintenance, then schema evolution, on the quick start's table
    maintenance = next(block for block in blocks if "table.compact(" in block)
    exec(compile(maintenance, str(README), "exec"), namespace)
    assert not t.files().deletes and rows == {r["id"]: r for r in t.to_df().collect()}  # type: ignore[attr-defined]
    exec(compile(next(block for block in blocks if "add_columns" in block), str(README), "exec"), namespace)
    assert t.schema.column_names == ["id", "amount", "state", "discount"]  # type: ignore[attr-defined]
    assert t.to_df(snapshot_id=namespace["before"]).columns == ["id", "amount", "status"]  # type: ignore[attr-defined]
    # column defaults (format v3) on a table of their own
    exec(compile(next(block for block in blocks if "set_default" in block), str(README), "exec"), namespace)
    got = {
        r["id"]: (r["amount"], r["channel"], str(r["discount"])) for r in namespace["t3"].to_df().collect()
    }  # type: ignore[attr-defined]
    assert got == {1: (10, "store", "0.00"), 2: (21, "store", "0.00"), 3: (30, "store", "0.00")}
    # partition and sort order evolution on the same table
    exec(
        compile(next(block for block in blocks if "add_partition_field" in block), str(README), "exec"),
        namespace,
    )
    assert [f.name for f in t.metadata.spec().fields] == ["id_bucket_4", "st"]  # type: ignore[attr-defined]
    assert not t.metadata.sort_order().fields and t.metadata.default_spec_id == 2  # type: ignore[attr-defined]
    assert t.to_df().where("id = 12").first()["amount"] == rows[12]["amount"] + 1  # type: ignore[attr-defined]
    # branches and tags: write-audit-publish on the same table
    exec(compile(next(block for block in blocks if "create_branch" in block), str(README), "exec"), namespace)
    assert set(t.refs()) == {"main", "v1"}  # type: ignore[attr-defined]
    assert t.refs()["v1"]["snapshot_id"] == t.current_snapshot_id  # type: ignore[attr-defined]
    assert t.to_df().where("id = 10").first()["amount"] == 2 * rows[10]["amount"]  # type: ignore[attr-defined]
    # SQL text (its own table): MERGE / UPDATE / DELETE / EXPLAIN / a transaction, then queries
    sql = next(block for block in blocks if "lake.sql(" in block)
    exec(compile(sql, str(README), "exec"), namespace)
    accounts = {r["id"]: (r["balance"], r["state"]) for r in namespace["accounts"].to_df().collect()}  # type: ignore[attr-defined]
    assert accounts == {3: (37, "big"), 4: (0, "big")}


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
    """ "Scheduled pipelines" on a fresh clone: ``make pipeline-demo`` first (at a tiny scale factor),
    then every ``$ rowops ...`` command the README shows, as written."""
    section = README.read_text().split("## Scheduled pipelines", 1)[1].split("\n## ", 1)[0]
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
        "store_sales_changes/batch-0002",
    ]
