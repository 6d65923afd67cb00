"""The read path under deletes (``exec/scan.py``): which rows meet which delete machinery, and the
physical plan Spark runs for a read (no timings: shapes only; correctness is the behaviour suites')."""

from __future__ import annotations

from typing import Any

import rowops
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
