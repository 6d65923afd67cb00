"""The read path under deletes (``exec/scan.py``): which rows meet which delete machinery, and the
physical plan Spark runs for a read (no timings: shapes only; correctness is the behaviour suites')."""

from __future__ import annotations

from typing import Any

import pytest

import rowops
from rowops.exec import scan
from rowops.exec.session import session_conf
from rowops.exec.stats import BROADCAST_CAP_CONF
from rowops.meta.paths import normalize_path
from tests.spark.tables import frame, make_row

ROWS = 400


def _scans(df: Any) -> list[tuple[set[str], bool]]:
    """Each file scan of ``df``'s executed plan: the files it reads and whether a join sits above it."""
    found: list[tuple[set[str], bool]] = []

    def walk(node: Any, under_join: bool) -> None:
        name = node.getClass().getSimpleName()
        if name == "AdaptiveSparkPlanExec":
            return walk(node.executedPlan(), under_join)
        if name.endswith("QueryStageExec"):  # a stage of an executed adaptive plan (a reused one too)
            return walk(node.plan(), under_join)
        if name == "ReusedExchangeExec":  # the exchange it reuses is walked where it is defined
            return None
        if name.endswith("JoinExec"):
            under_join = True
        if name == "FileSourceScanExec":
            files = {normalize_path(str(p)) for p in node.relation().location().inputFiles()}
            found.append((files, under_join))
        children = node.children().iterator()
        while children.hasNext():
            walk(children.next(), under_join)

    walk(df._jdf.queryExecution().executedPlan(), False)
    return found


def _table(lake: Any) -> Any:
    rows = [make_row(k) for k in range(ROWS)]
    return lake.create_table("db.t", frame(lake.spark, rows), partition_by=["bucket(4, k)"], identifier=["k"])


def test_files_no_delete_applies_to_never_meet_a_join(lake, strategy) -> None:  # type: ignore[no-untyped-def]
    table = _table(lake)
    assert len({f.partition for f in table.files().data}) == 4
    changed = [make_row(k, 1) for k in range(ROWS) if k % 7 == 0][:1]  # one key: one bucket touched
    rowops.merge(frame(lake.spark, changed), table, on=["k"], strategy=strategy)
    files = table.files()
    data = {f.path for f in files.data}
    df = table.to_df()
    scans = _scans(df)
    read = set().union(*(s for s, _ in scans)) & data
    assert read == data
    joined = set().union(*(s for s, j in scans if j)) & data
    if strategy == "copy-on-write":
        assert joined == set()
    else:  # only the file of the changed key's bucket (the new file holds no older rows)
        assert len(joined) == 1, joined
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "file_modification_time" not in plan  # no read asks for all of Spark's _metadata fields
    got = {r["k"]: r["n"] for r in df.collect()}
    assert got == {k: (1 if k == 0 else 0) for k in range(ROWS)}


def test_equality_delete_keys_are_read_once_for_every_generation(lake) -> None:  # type: ignore[no-untyped-def]
    """Data files of four sequence numbers, three of them under three generations of equality
    deletes: two anti-joins (the files older than every delete, the newer ones) with the same build
    side, so each delete file is scanned once per read: the keys are broadcast once and reused."""
    table = _table(lake)
    for n in (1, 2, 3):
        changed = [make_row(k, n) for k in range(0, ROWS, 5)]
        rowops.merge(frame(lake.spark, changed), table, on=["k"], strategy="equality-delete")
    files = table.files()
    assert len({f.seq for f in files.data}) == 4 and len({f.seq for f in files.equality_deletes}) == 3
    deletes = {f.path for f in files.equality_deletes}
    df = table.to_df()
    got = {r["k"]: r["n"] for r in df.collect()}  # executed: the final adaptive plan is walked
    assert got == {k: (3 if k % 5 == 0 else 0) for k in range(ROWS)}
    scanned = [s & deletes for s, _ in _scans(df) if s & deletes]
    assert sorted(len(s) for s in scanned) == [4, 4, 4], scanned  # one scan per delete generation
    assert set().union(*scanned) == deletes


def _joins(df: Any) -> list[str]:
    """The class names of the joins in ``df``'s executed plan (run first)."""
    df.collect()
    plan = df._jdf.queryExecution().executedPlan().toString()
    return [name for name in ("BroadcastHashJoin", "SortMergeJoin", "ShuffledHashJoin") if name in plan]


def _both_kinds(lake: Any) -> tuple[Any, dict[int, int]]:
    """A table under one generation of position deletes and one of equality deletes, and its rows."""
    table = _table(lake)
    rowops.merge(
        frame(lake.spark, [make_row(k, 1) for k in range(0, ROWS, 3)]),
        table,
        on=["k"],
        strategy="position-delete",
    )
    rowops.merge(
        frame(lake.spark, [make_row(k, 2) for k in range(0, ROWS, 4)]),
        table,
        on=["k"],
        strategy="equality-delete",
    )
    assert table.files().position_deletes and table.files().equality_deletes
    return table, {k: 2 if k % 4 == 0 else 1 if k % 3 == 0 else 0 for k in range(ROWS)}


def test_delete_sets_are_broadcast_when_their_counted_size_fits(lake) -> None:  # type: ignore[no-untyped-def]
    """Deletes are joined by broadcast on their manifests' row counts, not on Spark's file-size
    threshold (here turned off: Spark alone would shuffle both sides); above
    ``rowops.broadcast.max-bytes`` Spark decides again."""
    table, expected = _both_kinds(lake)
    with session_conf(lake.spark, {"spark.sql.autoBroadcastJoinThreshold": "-1"}):
        df = table.to_df()
        assert _joins(df) == ["BroadcastHashJoin"]
        assert {r["k"]: r["n"] for r in df.collect()} == expected
        with session_conf(lake.spark, {BROADCAST_CAP_CONF: "1"}):
            df = table.to_df()
            assert "SortMergeJoin" in _joins(df)
            assert {r["k"]: r["n"] for r in df.collect()} == expected


@pytest.mark.parametrize("keyed_by_position", [True, False])
def test_position_deletes_remove_their_file_rows_only(lake, monkeypatch, keyed_by_position) -> None:  # type: ignore[no-untyped-def]
    """Every file of the table has rows at the positions deleted in the others: only the named file's
    row goes, whether the anti-join hashes positions (names compared in its residual) or pairs."""
    monkeypatch.setattr(scan, "MAX_FILES_KEYED_BY_POSITION", 64 if keyed_by_position else 0)
    table = _table(lake)
    changed = [make_row(k, 1) for k in range(ROWS) if k % 13 == 0]
    rowops.merge(frame(lake.spark, changed), table, on=["k"], strategy="position-delete")
    assert len({f.path for f in table.files().data if f.seq == 1}) == 4  # all four base files touched
    df = table.to_df()
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert ("_delete_file" in plan) is keyed_by_position
    assert {r["k"]: r["n"] for r in df.collect()} == {k: 1 if k % 13 == 0 else 0 for k in range(ROWS)}
