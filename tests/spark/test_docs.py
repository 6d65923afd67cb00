"""Every code block of the guide pages runs as written: one empty directory, one lake and one Python
namespace per page, blocks in page order (``tests/docs_blocks.py`` says which blocks run). After a
page, its tables are read cold (a fresh ``Lakehouse``) and, where it says what a table holds, by DuckDB."""

from __future__ import annotations

import logging
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import rowops
from rowops.cli import app
from rowops.exec.spark.session import use_log_level
from tests.docs_blocks import GUIDE, ROOT, Block, blocks, rowops_commands
from tests.oracles.duckdb_reader import read_duckdb

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

Namespace = dict[str, Any]


def _orders_after_setup() -> dict[int, tuple[int, str]]:
    """The guide's ``db.orders`` as its setup block creates it: id -> (amount, status)."""
    return {i: (i % 7, "open") for i in range(1000)}


def _cold(lake_dir: Path, spark, name: str = "db.orders"):  # type: ignore[no-untyped-def]
    return rowops.Lakehouse(lake_dir, spark=spark).table(name)


def _rows(table) -> dict[int, tuple[int, str]]:  # type: ignore[no-untyped-def]
    return {r["id"]: (r["amount"], r["status"]) for r in table.to_df().collect()}


def _duckdb_rows(table) -> dict[int, tuple[int, str]]:  # type: ignore[no-untyped-def]
    """The same table read by DuckDB's ``iceberg_scan`` (an independent reader)."""
    got = read_duckdb(table.metadata_location).to_pylist()
    return {r["id"]: (r["amount"], r["status"]) for r in got}


def check_merge(ns: Namespace, lake_dir: Path, spark) -> None:  # type: ignore[no-untyped-def]
    assert ns["r"].rows_deleted is not None
    cold = _cold(lake_dir, spark)
    rows = _rows(cold)
    assert not [i for i in rows if i < 10]  # NOT MATCHED BY SOURCE AND t.id < 10: deleted
    assert 10 in rows and rows[14][1] == "late"  # amount 0 rows got status 'late'
    assert rows[995] == (99 + 99, "paid")  # odd id: updated s + t
    assert 996 not in rows  # even id: deleted by "s.op = 'D'"
    assert rows[990] == (99, "paid")  # deleted by key in the first block, inserted again (not matched)
    assert all(amount != 1 for amount, _ in rows.values())
    assert _duckdb_rows(cold) == rows
    assert cold.metadata.properties["rowops.read-weight"] == "10"


def check_transactions(ns: Namespace, lake_dir: Path, spark) -> None:  # type: ignore[no-untyped-def]
    lake = rowops.Lakehouse(lake_dir, spark=spark)
    orders = _rows(lake.table("db.orders"))
    zero = [i for i, (amount, _) in orders.items() if amount == 0]
    # rollback_to(version - 2) went back to before both transactions: 'late', not 'billed'
    assert zero and all(orders[i][1] == "late" for i in zero)
    assert lake.table("db.payments").to_df().count() == 1
    assert orders[10][0] == 2 * (10 % 7)  # the audited branch, fast-forwarded into main
    assert set(lake.table("db.orders").refs()) == {"main", "v1"}
    assert [c.transaction_id for c in lake.history()][-1]


def check_maintenance(ns: Namespace, lake_dir: Path, spark) -> None:  # type: ignore[no-untyped-def]
    expected = _orders_after_setup()
    expected.update({i: (99, "paid") for i in range(990, 1010)})
    expected.update({i: (0, "late") for i, (amount, _) in expected.items() if amount == 0})
    cold = _cold(lake_dir, spark)
    assert not cold.files().deletes  # compacted (python, then the rowops commands)
    assert _rows(cold) == expected and _duckdb_rows(cold) == expected
    assert rowops.Lakehouse(lake_dir, spark=spark).verify().ok


def check_evolution(ns: Namespace, lake_dir: Path, spark) -> None:  # type: ignore[no-untyped-def]
    t = _cold(lake_dir, spark)
    assert t.schema.column_names == ["id", "amount", "state", "discount"]
    assert t.to_df(snapshot_id=ns["before"]).columns == ["id", "amount", "status"]
    t3 = _cold(lake_dir, spark, "db.orders3")
    got = {r["id"]: (r["amount"], r["channel"], str(r["discount"])) for r in t3.to_df().collect()}
    assert got == {1: (10, "store", "0.00"), 2: (21, "store", "0.00"), 3: (30, "store", "0.00")}
    assert [f.name for f in t.metadata.spec().fields] == ["id_bucket_4", "st"]
    assert not t.metadata.sort_order().fields and t.metadata.default_spec_id == 2
    assert t.to_df().where("id = 12").first()["amount"] == 12 % 7 + 1


def check_sql(ns: Namespace, lake_dir: Path, spark) -> None:  # type: ignore[no-untyped-def]
    accounts = _cold(lake_dir, spark, "db.accounts")
    assert {r["id"]: (r["balance"], r["state"]) for r in accounts.to_df().collect()} == {
        3: (37, "big"),
        4: (0, "big"),
    }


def check_changes(ns: Namespace, lake_dir: Path, spark) -> None:  # type: ignore[no-untyped-def]
    orders = _cold(lake_dir, spark)
    expected = {2: "paid", 3: "paid", 4: "open", 5: "open", 6: "open"}
    assert {r["id"]: r["status"] for r in orders.to_df().collect()} == expected
    payments = _cold(lake_dir, spark, "db.payments")  # written by lake.changes()'s transaction
    assert sorted(tuple(r) for r in payments.to_df().collect()) == [(2, 10), (3, 25)]
    assert {r["id"]: r["status"] for r in read_duckdb(orders.metadata_location).to_pylist()} == expected
    assert (lake_dir.parent / "feed").is_dir()  # the parquet written by `rowops changes --format parquet`


def check_observability(ns: Namespace, lake_dir: Path, spark) -> None:  # type: ignore[no-untyped-def]
    orders = _cold(lake_dir, spark)
    assert {r["id"]: r["status"] for r in orders.to_df().collect()} == {1: "open", 2: "paid"}
    assert logging.getLogger("rowops.operations").isEnabledFor(logging.INFO)


CHECKS: dict[str, Callable[[Namespace, Path, Any], None]] = {
    "changes.md": check_changes,
    "merge.md": check_merge,
    "transactions.md": check_transactions,
    "maintenance.md": check_maintenance,
    "evolution.md": check_evolution,
    "sql.md": check_sql,
    "observability.md": check_observability,
}
RUN_PAGES = sorted(p.name for p in GUIDE.glob("*.md") if any(b.reason_not_run is None for b in blocks(p)))


def _run(block: Block, namespace: Namespace) -> None:
    if block.language == "python":
        exec(compile(block.code, block.where, "exec"), namespace)
    elif block.language == "bash":
        for command in rowops_commands(block):
            result = CliRunner().invoke(app, shlex.split(command)[1:])
            assert result.exit_code == 0, (block.where, command, result.output)
    elif block.language == "toml":  # the config file the page shows, comments aside
        shown = tomllib.loads(block.code)
        assert any(tomllib.loads(f.read_text()) == shown for f in (ROOT / "conf").glob("*.toml")), block.where


@pytest.fixture()
def page_dir(spark, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """An empty working directory; the session settings and log level the CLI changes are put back."""
    monkeypatch.chdir(tmp_path)
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    root, rowops_logger = logging.getLogger(), logging.getLogger("rowops")
    handlers, level = list(root.handlers), root.level  # a page may configure logging
    yield tmp_path
    root.handlers[:], root.level = handlers, level
    rowops_logger.setLevel(logging.NOTSET)
    spark.conf.set("spark.sql.shuffle.partitions", partitions)
    use_log_level("ERROR")


def test_every_page_with_code_has_its_checks() -> None:
    python_pages = {p for p in RUN_PAGES if any(b.language == "python" for b in blocks(GUIDE / p))}
    assert python_pages - {"errors.md"} <= set(CHECKS), (
        "a page whose examples write tables says what they hold"
    )


@pytest.mark.parametrize("page", RUN_PAGES)
def test_guide_page_runs_as_written(page: str, spark, page_dir: Path) -> None:  # type: ignore[no-untyped-def]
    namespace: Namespace = {}
    for block in blocks(GUIDE / page):
        if block.reason_not_run is None:
            _run(block, namespace)
    if page in CHECKS:
        CHECKS[page](namespace, page_dir / "lake", spark)
