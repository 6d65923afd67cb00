"""Every ``Help:`` line names a call or command that works as written (issue 43, item 8): the Python
calls every Help text in rowops names are executed against a real lake, and the Help lines of the
common errors (missing table, namespace, lake), in Python and on the command line, are run."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

import rowops
from rowops.cli import EXIT_BAD_INPUT, app
from rowops.errors import NoSuchNamespaceError, NoSuchTableError, RowOpsError

PACKAGE = Path(rowops.__file__).resolve().parent
CALL = re.compile(r"\b(?:rowops|lake|table)(?:\.\w+)+\([^()]*\)")
NOT_ROWOPS = {"table.transaction()"}  # PyIceberg's Table, named as such (UnsupportedTableFormatError)


def help_texts() -> list[tuple[str, str]]:
    """(module, text) of every string in a ``help=`` argument or a ``help =`` class attribute."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            values = [node.value] if isinstance(node, ast.keyword) and node.arg == "help" else []
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "help" for t in node.targets):
                values.append(node.value)
            for value in values:
                texts = [c.value for c in ast.walk(value) if isinstance(c, ast.Constant)]
                found += [(path.name, t) for t in texts if isinstance(t, str)]
    return found


def help_calls() -> list[str]:
    return sorted({call for _, text in help_texts() for call in CALL.findall(text)} - NOT_ROWOPS)


def _run_call(call: str, scope: dict[str, object]) -> object:
    """``call`` as written, its placeholders filled in as a user would (a table's ``name``: a branch)."""
    filled = {**scope, "name": "main"} if call.startswith("table.") else scope
    result = eval(call, dict(filled))
    if isinstance(result, rowops.Transaction):
        result.rollback()
    return result


def test_every_python_call_a_help_line_names_runs(lake: rowops.Lakehouse, tmp_path: Path) -> None:
    calls = help_calls()
    assert "lake.list_tables()" in calls and "table.snapshots()" in calls
    table = lake.create_table("db.t", lake.spark.createDataFrame([(1, "a")], "id long, v string"))
    scope = {
        "rowops": rowops,
        "lake": lake,
        "table": table,
        "name": "db.t",
        "path": str(tmp_path / "other"),
        "text": "SELECT * FROM db.t",
    }
    ran = []
    for call in sorted(calls, key=lambda c: "drop_table" in c):  # the drop last: the others read db.t
        try:
            _run_call(call, scope)
        except NameError:  # a placeholder no generic value fits (df, column, version...)
            continue
        ran.append(call)
    assert {"lake.list_tables()", "lake.history()", "table.snapshots()", "table.refs()"} <= set(ran)
    assert {
        "rowops.Lakehouse(path)",
        "lake.table(name)",
        "lake.drop_table(name)",
        "table.branch(name)",
    } <= set(ran)


def _help(exc: BaseException) -> str:
    return str(exc).split("\nHelp: ", 1)[1]


def test_the_help_of_a_missing_table_or_namespace_runs(lake: rowops.Lakehouse) -> None:
    lake.create_table("db.t", lake.spark.createDataFrame([(1, "a")], "id long, v string"))
    with pytest.raises(NoSuchTableError) as missing:
        lake.table("db.nope")
    with pytest.raises(NoSuchNamespaceError) as namespace:
        lake.list_tables("nope")
    for error in (missing.value, namespace.value):
        calls = CALL.findall(_help(error))
        assert "lake.list_tables()" in calls
        assert eval("lake.list_tables()", {"lake": lake}) == ["db.t"]
    cold = rowops.Lakehouse(lake.location, spark=lake.spark)
    assert cold.list_tables() == ["db.t"] and cold.list_tables("db") == ["db.t"]
    with cold.transaction() as tx:
        assert tx.list_tables() == ["db.t"]
    assert cold.at(version=cold.version).list_tables() == ["db.t"]


@pytest.mark.parametrize("command", [["describe", "db.nope"], ["history", "db.nope"], ["compact", "db.nope"]])
def test_the_command_line_help_of_a_missing_table_runs(lake: rowops.Lakehouse, command: list[str]) -> None:
    lake.create_table("db.t", lake.spark.createDataFrame([(1, "a")], "id long, v string"))
    runner = CliRunner()
    failed = runner.invoke(app, ["--lake", str(lake.root), *command])
    assert failed.exit_code == EXIT_BAD_INPUT, failed.output
    help_line = _help(failed.output)
    assert "lake.list_tables" not in help_line  # a command, not a Python call
    args = shlex.split(help_line.split("with: ", 1)[1])
    assert args[0] == "rowops"
    listed = runner.invoke(app, args[1:])
    assert listed.exit_code == 0 and listed.output.split() == ["db.t"], listed.output


def test_help_texts_are_found() -> None:
    """The scan above sees the Help texts of the errors package and of the raising modules."""
    modules = {module for module, _ in help_texts()}
    assert {"base.py", "commit.py", "runtime.py", "lakehouse.py", "table.py"} <= modules
    assert all(isinstance(getattr(cls, "help", ""), str) for cls in RowOpsError.__subclasses__())
