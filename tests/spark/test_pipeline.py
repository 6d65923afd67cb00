"""Pipelines on real Spark and real files: change feeds (late and duplicate events) against a Python
oracle, exactly-once batches, failures that leave nothing behind, several targets in one lake version,
and bad sources named in their errors."""

from __future__ import annotations

import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

import rowops
from rowops.catalog.leases import LEASE_PREFIX
from rowops.errors import (
    BatchAlreadyCommittedError,
    InvalidExpressionError,
    PipelineSourceError,
    UnsupportedStrategyError,
)
from rowops.faults import InjectedFault
from rowops.pipeline import parse_config, runner
from tests.readers import assert_readers_agree
from tests.spark.tables import fingerprint

SCHEMA = "id long, v string, seq long"
EVENTS = "op string, id long, v string, seq long"


def _config(
    source: Path, strategy: str = "auto", targets: tuple[str, ...] = ("db.t",), cdc: bool = True
) -> Any:
    feed = (
        '[source.cdc]\nop_column = "op"\norder_by = "seq"\ninsert = ["I"]\nupdate = ["U"]\ndelete = ["D"]\n'
    )
    blocks = "".join(f'[[targets]]\ntable = "{t}"\nkeys = ["id"]\nstrategy = "{strategy}"\n' for t in targets)
    text = f'[pipeline]\nid = "p"\n[source]\nformat = "parquet"\npath = "{source}/{{batch_id}}"\n'
    return parse_config(text + (feed if cdc else "") + blocks, "test.toml")


def _table(lake: rowops.Lakehouse, name: str = "db.t", rows: int = 8) -> rowops.Table:
    df = lake.spark.createDataFrame([(i, f"v{i}", 0) for i in range(rows)], SCHEMA)
    return lake.create_table(name, df, identifier=["id"])


def _write(
    spark: SparkSession, source: Path, batch: str, events: list[tuple[Any, ...]], schema: str = EVENTS
) -> None:
    spark.createDataFrame(events, schema).repartition(3).write.parquet(str(source / batch))


def _rows(table: rowops.Table) -> dict[int, tuple[str, int]]:
    return {r["id"]: (r["v"], r["seq"]) for r in table.to_df().collect()}


def oracle(state: dict[int, tuple[str, int]], events: list[tuple[Any, ...]]) -> dict[int, tuple[str, int]]:
    """The newest event per key (ties: delete > update > insert) applied unless older than the row."""
    rank = {"D": 3, "U": 2, "I": 1}
    newest: dict[int, tuple[Any, ...]] = {}
    for event in events:
        op, key, _, seq = event
        best = newest.get(key)
        if best is None or (seq, rank[op]) > (best[3], rank[best[0]]):
            newest[key] = event
    out = dict(state)
    for key, (op, _, value, seq) in newest.items():
        if key in out and seq < out[key][1]:
            continue  # late: the table holds a newer change
        if op == "D":
            out.pop(key, None)
        else:
            out[key] = (value, seq)
    return out


def _random_events(rng: random.Random, keys: int, seqs: range) -> list[tuple[Any, ...]]:
    events = []
    for _ in range(40):
        op = rng.choice("IUD")
        key, seq = rng.randrange(keys), rng.choice(seqs)
        events.append((op, key, f"{op}{key}@{seq}", seq))
    events += events[:6]  # exact duplicates, delivered twice
    rng.shuffle(events)  # out of order within the batch
    return events


def test_change_feed_applies_the_newest_change_per_key(
    lake: rowops.Lakehouse, tmp_path: Path, strategy: str
) -> None:
    table = _table(lake)
    rng = random.Random(11)
    batches = [_random_events(rng, 14, range(1, 6)), _random_events(rng, 14, range(3, 9))]
    batches.append([("U", k, f"late{k}", 2) for k in range(14)] + [("D", 100, None, 9)])  # late, missing key
    expected = _rows(table)
    config = _config(tmp_path / "src", strategy)
    for number, events in enumerate(batches):
        _write(lake.spark, tmp_path / "src", f"b{number}", events)
        if strategy == "equality-delete":  # conditional clauses: not expressible without a scan
            before = fingerprint(lake)
            with pytest.raises(UnsupportedStrategyError):
                runner.run(lake, config, f"b{number}")
            assert fingerprint(lake) == before
            return
        metrics = runner.run(lake, config, f"b{number}")
        expected = oracle(expected, events)
        assert metrics.status == "committed"
        assert _rows(table) == expected, f"batch {number}"
        assert metrics.rows_read == len(events)
        assert sum(metrics.changes.values()) == len(events)
        assert metrics.targets[0].strategy in ("copy-on-write", "position-delete", "hybrid")


def test_a_plain_upsert_with_column_mapping(lake: rowops.Lakehouse, tmp_path: Path, strategy: str) -> None:
    table = _table(lake)
    _write(lake.spark, tmp_path / "src", "b1", [(1, "x", 5), (20, "y", 6)], "id long, value string, seq long")
    head = f'[pipeline]\nid = "p"\n[source]\nformat = "parquet"\npath = "{tmp_path}/src/{{batch_id}}"\n'
    target = f'[[targets]]\ntable = "db.t"\nkeys = ["id"]\nstrategy = "{strategy}"\ncolumns = {{ v = "upper(value)" }}\n'
    config = parse_config(head + target, "t.toml")
    metrics = runner.run(lake, config, "b1")
    rows = _rows(table)
    assert rows[1] == ("X", 5) and rows[20] == ("Y", 6) and rows[2] == ("v2", 0)
    assert metrics.totals()["rows_inserted"] in (1, None)  # equality deletes cannot tell inserts apart
    assert metrics.targets[0].strategy_reason


def test_rerunning_a_committed_batch_is_a_noop(lake: rowops.Lakehouse, tmp_path: Path) -> None:
    table = _table(lake)
    _write(lake.spark, tmp_path / "src", "b1", [("U", 1, "a", 1), ("I", 50, "n", 1)])
    config = _config(tmp_path / "src")
    first = runner.run(lake, config, "b1")
    assert first.status == "committed"
    rows, version = _rows(table), lake.version
    assert lake.history()[-1].batch == "p/b1"
    again = runner.run(lake, config, "b1")
    assert (again.status, again.committed_version) == ("skipped", first.committed_version)
    assert "was committed before" in again.message and again.targets == []
    assert (_rows(table), lake.version) == (rows, version)
    # the index is only a cache: without it, the lake log still says the batch is done
    for path in sorted((lake.root / "_rowops" / "batches").rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    assert runner.run(lake, config, "b1").status == "skipped"


def test_a_failure_mid_batch_leaves_nothing_and_the_batch_reruns(
    lake: rowops.Lakehouse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = _table(lake, "db.t"), _table(lake, "db.u")
    _write(lake.spark, tmp_path / "src", "b1", [("U", 1, "a", 1), ("D", 2, None, 1), ("I", 50, "n", 1)])
    config = _config(tmp_path / "src", targets=("db.t", "db.u"))
    before = fingerprint(lake)
    monkeypatch.setenv("ROWOPS_FAULT", "before-commit")  # both targets written, the version not yet put
    with pytest.raises(InjectedFault):
        runner.run(lake, config, "b1")
    assert fingerprint(lake) == before
    monkeypatch.delenv("ROWOPS_FAULT")
    metrics = runner.run(lake, config, "b1")
    assert metrics.status == "committed"
    assert _rows(first) == _rows(second) and 2 not in _rows(first) and _rows(first)[50] == ("n", 1)


def test_several_targets_commit_as_one_lake_version(lake: rowops.Lakehouse, tmp_path: Path) -> None:
    _table(lake, "db.t"), _table(lake, "db.u")
    _write(lake.spark, tmp_path / "src", "b1", [("U", 1, "a", 1), ("I", 50, "n", 1)])
    start = lake.version
    metrics = runner.run(lake, _config(tmp_path / "src", targets=("db.t", "db.u")), "b1")
    assert lake.version == start + 1 == metrics.committed_version
    entry = lake.history()[-1]
    assert sorted(entry.tables) == ["db.t", "db.u"] and entry.batch == "p/b1"
    assert [t.table for t in metrics.targets] == ["db.t", "db.u"]
    assert set(metrics.debt_before) == set(metrics.debt_after) == {"db.t", "db.u"}
    assert {"check", "read", "merge", "commit"} <= set(metrics.phases_s)


def test_the_same_batch_committed_concurrently_wins_once(lake: rowops.Lakehouse) -> None:
    """Two runs of one batch racing: the later commit finds the batch in the versions it must rebase over."""
    table = _table(lake)
    one, two = lake.transaction(), lake.transaction()
    for number, tx in enumerate((one, two)):
        tx.mark_batch("p", "b1")
        tx.append("db.t", lake.spark.createDataFrame([(100 + number, "x", 1)], SCHEMA))
    assert two.commit() is not None
    before = fingerprint(lake)
    with pytest.raises(BatchAlreadyCommittedError, match="was committed by transaction") as caught:
        one.commit()
    assert caught.value.version == lake.version
    after = fingerprint(lake)
    assert set(after) < set(before), "the losing run left files behind"
    gone = set(before) - set(after)  # its staged files, removed, and its lease (catalog/leases.py), released
    assert all(key.startswith(("db/t/", LEASE_PREFIX)) for key in gone)
    assert not [key for key in after if key.startswith(LEASE_PREFIX)]
    assert sorted(_rows(table))[-1] == 101


def test_bad_sources_are_named_and_nothing_is_written(lake: rowops.Lakehouse, tmp_path: Path) -> None:
    _table(lake)
    src = tmp_path / "src"
    _write(lake.spark, src, "codes", [("U", 1, "a", 1), ("X", 2, "b", 1), ("Z", 3, "c", 1)])
    _write(lake.spark, src, "columns", [("U", 1, 1)], "op string, id long, seq long")
    _write(lake.spark, src, "broken", [("U", 1, "a", 1)])
    bad = sorted((src / "broken").glob("*.parquet"))[-1]
    bad.write_bytes(b"not a parquet file at all")
    config = _config(src)
    before = fingerprint(lake)
    cases = {
        "codes": ["operation code(s) 'X', 'Z' in column 'op'", "'I' (insert)"],
        "columns": ["the source has no column 'v' for table db.t"],
        "broken": [f"source file {bad}"],
        "missing": ["source", "missing", "cannot be read"],
    }
    for batch, needles in cases.items():
        with pytest.raises(PipelineSourceError) as caught:
            runner.run(lake, config, batch)
        for needle in needles:
            assert needle in str(caught.value), str(caught.value)
        assert "\nHelp: " in str(caught.value)
    assert fingerprint(lake) == before


def test_a_table_source_filtered_by_batch(lake: rowops.Lakehouse) -> None:
    table = _table(lake)
    staging = [("b1", "U", 1, "a", 1), ("b1", "I", 30, "n", 1), ("b2", "D", 3, None, 1)]
    lake.create_table("db.staging", lake.spark.createDataFrame(staging, "batch string, " + EVENTS))
    config = parse_config(
        '[pipeline]\nid = "staged"\n[source]\nformat = "table"\ntable = "db.staging"\n'
        "where = \"batch = '{batch_id}'\"\n"
        '[source.cdc]\nop_column = "op"\norder_by = "seq"\n[[targets]]\ntable = "db.t"\nkeys = ["id"]\n',
        "staged.toml",
    )
    metrics = runner.run(lake, config, "b1")
    assert (metrics.rows_read, metrics.changes) == (2, {"update": 1, "insert": 1})
    rows = _rows(table)
    assert rows[1] == ("a", 1) and rows[30] == ("n", 1) and 3 in rows  # b2's delete is not part of b1


def test_add_columns_evolves_the_target_in_the_batch_transaction(
    lake: rowops.Lakehouse, tmp_path: Path, java: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``schema_evolution = "add-columns"``: a new source column is added with the batch (rows written
    before read NULL, every reader agrees); a failed batch adds nothing; without the option the column
    is ignored (as Delta's MERGE without schema evolution)."""
    table = _table(lake, rows=4)
    events = [("U", 1, "a", 1, "1.50"), ("I", 9, "n", 1, "2.25")]
    _write(lake.spark, tmp_path / "src", "b1", events, EVENTS + ", price string")
    feed = _config(tmp_path / "src")
    ignored = runner.validate(lake, feed, "b1")
    assert ignored.columns_added == {} and [f.name for f in table.schema.fields] == ["id", "v", "seq"]
    evolving = parse_config(
        f'[pipeline]\nid = "p"\n[source]\nformat = "parquet"\npath = "{tmp_path}/src/{{batch_id}}"\n'
        '[source.cdc]\nop_column = "op"\norder_by = "seq"\ninsert = ["I"]\nupdate = ["U"]\ndelete = ["D"]\n'
        '[[targets]]\ntable = "db.t"\nkeys = ["id"]\nschema_evolution = "add-columns"\n'
        'columns = { price = "CAST(price AS DECIMAL(12,2))" }\n',
        "test.toml",
    )
    assert runner.validate(lake, evolving, "b1").columns_added == {"db.t": {"price": "decimal(12,2)"}}
    before = fingerprint(lake)
    monkeypatch.setenv("ROWOPS_FAULT", "before-commit")
    with pytest.raises(InjectedFault):
        runner.run(lake, evolving, "b1")
    assert fingerprint(lake) == before  # neither the column nor the rows
    monkeypatch.delenv("ROWOPS_FAULT")
    metrics = runner.run(lake, evolving, "b1")
    assert metrics.status == "committed" and metrics.columns_added == {"db.t": {"price": "decimal(12,2)"}}
    evolved = lake.table("db.t")
    assert [f.name for f in evolved.schema.fields] == ["id", "v", "seq", "price"]
    assert len(lake.history()) == 2  # create + the batch (columns and rows in one lake version)
    expected = [(0, "v0", 0, None), (1, "a", 1, Decimal("1.50")), (2, "v2", 0, None), (3, "v3", 0, None)]
    expected.append((9, "n", 1, Decimal("2.25")))
    assert_readers_agree(evolved, expected, ["id", "v", "seq", "price"], java)


def test_trailing_words_in_pipeline_expressions_are_refused(lake: rowops.Lakehouse) -> None:
    """Issue 43.1: ``where`` and ``columns`` of a pipeline are one expression each (no alias)."""
    _table(lake)
    lake.create_table(
        "db.staging", lake.spark.createDataFrame([("b1", "U", 1, "a", 1)], "batch string, " + EVENTS)
    )
    head = '[pipeline]\nid = "p"\n[source]\nformat = "table"\ntable = "db.staging"\n'
    feed = '[source.cdc]\nop_column = "op"\norder_by = "seq"\n'
    target = '[[targets]]\ntable = "db.t"\nkeys = ["id"]\n'
    before = fingerprint(lake)
    for text, config in (
        ("batch = '{batch_id}' bogus", f"{head}where = \"batch = '{{batch_id}}' bogus\"\n{feed}{target}"),
        ("upper(v) bogus", f'{head}{feed}{target}columns = {{ v = "upper(v) bogus" }}\n'),
        ("id > 0 or", f'{head}{feed}{target}where = "id > 0 or"\n'),
    ):
        with pytest.raises(InvalidExpressionError) as caught:
            runner.run(lake, parse_config(config, "p.toml"), "b1")
        assert text.replace("{batch_id}", "b1") in str(caught.value) and "\nHelp: " in str(caught.value)
    assert fingerprint(lake) == before


def test_a_batch_undone_by_a_lake_rollback_runs_again(lake: rowops.Lakehouse, tmp_path: Path) -> None:
    """The batch record is part of the lake state (as Delta's transaction identifiers are part of
    the table state): after ``lake.rollback_to`` a version before the batch, the batch runs again."""
    table = _table(lake)
    _write(lake.spark, tmp_path / "src", "b1", [("U", 1, "a", 1), ("I", 50, "n", 1)])
    config = _config(tmp_path / "src")
    before, rows_before = lake.version, _rows(table)
    assert runner.run(lake, config, "b1").status == "committed"
    rows_after = _rows(table)
    lake.rollback_to(before)
    assert _rows(table) == rows_before
    assert runner.validate(lake, config, "b1").message == ""  # a run would apply it
    again = runner.run(lake, config, "b1")
    assert again.status == "committed" and again.committed_version == lake.version
    cold = rowops.Lakehouse(lake.root, spark=lake.spark)
    assert _rows(cold.table("db.t")) == rows_after
    third = runner.run(lake, config, "b1")  # committed again: skipped from now on
    assert third.status == "skipped" and third.committed_version == again.committed_version
    lake.rollback_to(again.committed_version)  # a rollback to a version holding the batch keeps it
    assert runner.run(lake, config, "b1").status == "skipped"
