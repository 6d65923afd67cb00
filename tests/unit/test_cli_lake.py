"""The command line never creates a lake by accident, its help says what it prints, storage options
are checked, and SQL that does not parse says where without the parser's internals (issue 43, items
5-10). None of these start Spark: every check fails before a session is needed."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from sqlglot.errors import SqlglotError
from typer.testing import CliRunner

import rowops
from rowops.cli import EXIT_BAD_INPUT, app
from rowops.errors import NoSuchLakeError, SqlSyntaxError, UnknownStorageOptionError

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = (
    '[pipeline]\nid = "p"\nlake = "{lake}"\n[source]\nformat = "parquet"\npath = "{src}/{{batch_id}}"\n'
    '[[targets]]\ntable = "db.t"\nkeys = ["id"]\n'
)


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def _help_command(output: str) -> list[str]:
    """The command of an error's ``Help:`` line (after "run:" or "with:"), as arguments."""
    line = next(line for line in output.splitlines() if line.startswith("Help: "))
    return shlex.split(line.split(": ", 2)[-1])


@pytest.mark.parametrize(
    "command", [["tables"], ["history"], ["describe", "db.t"], ["history", "db.t"], ["compact", "db.t"]]
)
def test_commands_on_a_missing_lake_create_nothing(tmp_path: Path, command: list[str]) -> None:
    typo = tmp_path / "typo"
    code, output = _invoke("--lake", str(typo), *command)
    assert code == EXIT_BAD_INPUT, output
    assert f"no lake at {typo}" in output
    assert not typo.exists()
    assert f"rowops --lake {typo} init" in output  # the explicit way to create one


def test_init_creates_the_lake_its_help_line_names(tmp_path: Path) -> None:
    typo = tmp_path / "new lake"
    code, output = _invoke("--lake", str(typo), "tables")
    assert code == EXIT_BAD_INPUT and not typo.exists()
    args = _help_command(output)
    assert args[0] == "rowops"
    code, output = _invoke(*args[1:])  # the Help line's command, as written
    assert code == 0, output
    assert typo.is_dir() and "version 0, 0 tables" in output
    assert _invoke("--lake", str(typo), "tables") == (0, "")
    assert _invoke("--lake", str(typo), "init")[0] == 0  # an existing lake is kept


def test_python_lakes_open_or_create_as_asked(tmp_path: Path) -> None:
    rowops.Lakehouse(tmp_path / "made")  # the default creates it, as before
    assert (tmp_path / "made").is_dir()
    rowops.Lakehouse(tmp_path / "made", create=False)
    with pytest.raises(NoSuchLakeError, match="no lake at") as error:
        rowops.Lakehouse(tmp_path / "missing", create=False)
    assert not (tmp_path / "missing").exists()
    call = str(error.value).split("Help: Check the path; ")[1].split(" (create=True")[0]
    eval(call, {"rowops": rowops})  # the Help line's call, as written
    assert (tmp_path / "missing").is_dir()


def test_a_failed_pipeline_run_leaves_no_lake_behind(tmp_path: Path) -> None:
    lake = tmp_path / "lake-typo"
    config = tmp_path / "p.toml"
    config.write_text(PIPELINE.format(lake=lake, src=tmp_path / "src"))
    for command in (["pipeline", "run"], ["pipeline", "validate"], ["explain"]):
        code, output = _invoke(*command, str(config), "--batch-id", "b1")
        assert code == EXIT_BAD_INPUT, output
        assert f"no lake at {lake}" in output
        assert f"rowops.Lakehouse('{lake}').create_table('db.t', df, identifier=['id'])" in output
        assert not lake.exists()


def test_a_pipeline_on_a_fresh_lake_names_what_creates_its_target(tmp_path: Path) -> None:
    """The documented pipeline (docs/guide/pipelines.md) on a lake without its table: the error says what to run (make
    pipeline-demo for the shipped config), and nothing is written."""
    lake = tmp_path / "lake-pipeline"
    rowops.Lakehouse(lake)
    config = str(ROOT / "conf" / "store_sales_pipeline.toml")
    code, output = _invoke("--lake", str(lake), "pipeline", "run", config, "--batch-id", "batch-0001")
    assert code == EXIT_BAD_INPUT, output
    assert "target table db.store_sales does not exist" in output
    assert "make pipeline-demo creates db.store_sales" in output
    assert "create_table('db.store_sales', df, identifier=['ss_ticket_number', 'ss_item_sk'])" in output
    assert rowops.Lakehouse(lake).version == 0


def test_tables_help_promises_what_it_prints() -> None:
    code, output = _invoke("tables", "--help")
    assert code == 0
    assert "with its current snapshot" not in output  # it prints names only
    assert "names of the lake's tables" in output


def test_a_misspelled_storage_option_is_named(tmp_path: Path) -> None:
    with pytest.raises(UnknownStorageOptionError, match=r"did you mean 's3\.endpoint'"):
        rowops.Lakehouse(tmp_path / "l", storage_options={"s3.endpont": "http://127.0.0.1:1"})
    assert not (tmp_path / "l").exists()
    code, output = _invoke("-o", "s3.endpont=http://127.0.0.1:1", "--lake", "s3://bucket/lake", "tables")
    assert code == EXIT_BAD_INPUT and "unknown storage option 's3.endpont'" in output, output
    assert "did you mean 's3.endpoint'" in output
    config = tmp_path / "p.toml"
    text = PIPELINE.format(lake=tmp_path / "l", src=tmp_path)
    config.write_text(text.replace("\n[source]", '\nstorage_options = { "s3.regoin" = "eu" }\n[source]'))
    code, output = _invoke("pipeline", "run", str(config), "--batch-id", "b1")
    assert code == EXIT_BAD_INPUT and "did you mean 's3.region'" in output, output
    rowops.Lakehouse(
        tmp_path / "ok", storage_options={"s3.region": "eu-west-1", "s3.path-style-access": "true"}
    )


@pytest.mark.parametrize(
    "text",
    [
        "MERGE INTO db.t USING db.s ON",
        "UPDATE db.t SET v = WHERE id = 1",
        "DELETE FROM db.t WHERE ((",
        "SELECT * FROM db.t WHERE id = = 1",
        "UPDATE db.t SET v = 'abc WHERE id = 1",
    ],
)
def test_sql_that_does_not_parse_says_where_in_plain_words(tmp_path: Path, text: str) -> None:
    lake = rowops.Lakehouse(tmp_path / "lake")
    with pytest.raises(SqlSyntaxError) as error:
        lake.sql(text)
    message = str(error.value)
    assert "sqlglot" not in message and "<class" not in message and "Required keyword" not in message
    assert "SQL does not parse: " in message
    assert isinstance(error.value.__cause__, SqlglotError)  # the parser's details stay in the chain
