"""The read path under deletes (``exec/scan.py``): which rows meet which delete machinery, and the
physical plan Spark runs for a read (no timings: shapes only; correctness is the behaviour suites')."""

from __future__ import annotations

from typing import Any

import pytest

import rowops
from rowops.exec import delete_cache, scan
from rowops.exec.compat import explain_text
from rowops.exec.delete_cache import MAX_ROWS_CONF
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
        if name == "InMemoryTableScanExec":  # cached delete keys (exec/delete_cache.py): the plan cached
            return walk(node.relation().cachedPlan(), under_join)
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
    side, so each delete file is scanned once per read: the keys are broadcast once and reused. (With
    the keys cached, ``exec/delete_cache.py``, AQE plans a stage per use of a cached relation and
    broadcasts the keys once per anti-join, from the cache.)"""
    with session_conf(lake.spark, {MAX_ROWS_CONF: "0"}):
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


def _equality_generations(lake: Any) -> tuple[Any, dict[int, int]]:
    """A table under two generations of equality deletes (two groups of delete files), and its rows."""
    table = _table(lake)
    for n, step in ((1, 3), (2, 4)):
        changed = [make_row(k, n) for k in range(0, ROWS, step)]
        rowops.merge(frame(lake.spark, changed), table, on=["k"], strategy="equality-delete")
    return table, {k: 2 if k % 4 == 0 else 1 if k % 3 == 0 else 0 for k in range(ROWS)}


def test_equality_delete_keys_are_served_from_the_cache_after_the_first_read(lake) -> None:  # type: ignore[no-untyped-def]
    """The keys of each group of equality-delete files are read once per session: later reads scan
    Spark's cache for them, with the same answer as a read with the cache off."""
    table, expected = _equality_generations(lake)
    assert {r["k"]: r["n"] for r in table.to_df().collect()} == expected
    again = table.to_df()
    assert "InMemoryTableScan" in explain_text(again, "formatted")
    assert {r["k"]: r["n"] for r in again.collect()} == expected
    with session_conf(lake.spark, {MAX_ROWS_CONF: "0"}):
        uncached = table.to_df()
        assert "InMemoryTableScan" not in explain_text(uncached, "formatted")
        assert {r["k"]: r["n"] for r in uncached.collect()} == expected


def test_cached_delete_keys_are_bounded_by_rows(lake) -> None:  # type: ignore[no-untyped-def]
    """Past ``rowops.scan.delete-cache.max-rows`` key rows the least recently used groups are evicted
    (and unpersisted); a group larger than the bound is read as before."""
    table, expected = _equality_generations(lake)
    groups = [d.record_count for d in table.files().equality_deletes]
    largest = max(sum(groups[i::2]) for i in range(2))  # bound: room for one group, not both
    with session_conf(lake.spark, {MAX_ROWS_CONF: str(largest)}):
        assert {r["k"]: r["n"] for r in table.to_df().collect()} == expected
        assert delete_cache.cached_groups() == 1
        kept = next(iter(delete_cache._ENTRIES.values())).keys
        assert kept.storageLevel.useMemory
    with session_conf(lake.spark, {MAX_ROWS_CONF: "1"}):
        assert {r["k"]: r["n"] for r in table.to_df().collect()} == expected
        assert delete_cache.cached_groups() == 0
        assert not kept.storageLevel.useMemory  # evicted: unpersisted
