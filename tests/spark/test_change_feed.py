"""The change feed (``Table.changes``, issue 45) against a model: the difference of the table's states.

Each lake version's rows are kept in a dict by key; the feed of every commit must equal the difference
of the states before and after it (deletes, inserts, and updates as pre/post images), and ``net=True``
the difference of the range's first and last states, in every encoding. A transaction is one commit,
maintenance rewrites are none, a rollback is the change that undoes.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T
from typer.testing import CliRunner

import rowops
from rowops.cli import EXIT_BAD_INPUT, app
from rowops.errors import InvalidInputError, SnapshotExpiredError

SCHEMA = T.StructType(
    [
        T.StructField("k", T.LongType(), False),
        T.StructField("v", T.StringType()),
        T.StructField("p", T.LongType()),
    ]
)
Rows = dict[int, tuple[str | None, int]]
Change = tuple[str, int, str | None, int]


@pytest.fixture(
    params=[
        "copy-on-write",
        "position-delete",
        "equality-delete",
        pytest.param("hybrid", marks=pytest.mark.slow),
    ]
)
def strategy(request: pytest.FixtureRequest) -> str:
    """Every encoding, and hybrid commits (files rewritten and files given position deletes at once;
    make test-slow: both halves run in make test alone)."""
    return str(request.param)


def frame(spark: SparkSession, rows: Rows) -> Any:
    return spark.createDataFrame([(k, v, p) for k, (v, p) in sorted(rows.items())], SCHEMA)


def diff(before: Rows, after: Rows) -> Counter[Change]:
    """The model's changes from ``before`` to ``after``, by key."""
    out: Counter[Change] = Counter()
    for k in before.keys() | after.keys():
        old, new = before.get(k), after.get(k)
        if old == new:
            continue
        if old is None:
            out[("insert", k, *new)] += 1  # type: ignore[misc]
        elif new is None:
            out[("delete", k, *old)] += 1
        else:
            out[("update_preimage", k, *old)] += 1
            out[("update_postimage", k, *new)] += 1
    return out


def feed(df: Any) -> dict[int, Counter[Change]]:
    """The feed's changes per commit version."""
    out: dict[int, Counter[Change]] = {}
    for r in df.collect():
        out.setdefault(r["_commit_version"], Counter())[(r["_change_type"], r["k"], r["v"], r["p"])] += 1
    return out


def test_feed_equals_the_difference_of_states(lake: rowops.Lakehouse, strategy: str) -> None:
    spark = lake.spark
    state: Rows = {k: (f"v{k}", k % 3) for k in range(1, 13)}
    table = lake.create_table("db.t", frame(spark, state), partition_by=["bucket(4, k)"], identifier=["k"])
    states = {lake.version: dict(state)}

    def merge(rows: Rows, **clauses: Any) -> None:
        rowops.merge(frame(spark, rows), table, on=["k"], strategy=strategy, **clauses)

    changed = {
        2: ("two", 2),
        5: ("five", 2),
        40: ("forty", 1),
    }  # two updates, an insert
    merge(changed)
    state.update(changed)
    states[lake.version] = dict(state)
    gone = {3: state[3], 7: state[7]}
    merge(gone, when_matched="delete", when_not_matched=None)
    for k in gone:
        del state[k]
    states[lake.version] = dict(state)
    table.append(frame(spark, {50: ("fifty", 0)}))
    state[50] = ("fifty", 0)
    states[lake.version] = dict(state)
    with lake.transaction() as tx:  # one commit of two statements
        in_tx = tx.table("db.t")
        rowops.merge(frame(spark, {8: ("eight", 2)}), in_tx, on=["k"], strategy=strategy)
        rowops.merge(frame(spark, {8: ("EIGHT", 2), 60: ("sixty", 0)}), in_tx, on=["k"], strategy=strategy)
    state.update({8: ("EIGHT", 2), 60: ("sixty", 0)})
    states[lake.version] = dict(state)
    table.compact()  # no row changes: no commit in the feed
    compacted = lake.version
    states[compacted] = dict(state)
    before_rollback = table.snapshots()[2]["snapshot_id"]
    table.rollback_to(before_rollback)  # back to the state after the first merge
    state = dict(states[3])
    states[lake.version] = dict(state)

    versions = sorted(states)
    by_commit = feed(table.changes())
    expected = {  # the creating commit (from no table) inserts every row
        v: diff(states.get(prev, {}), states[v]) for prev, v in zip([0, *versions], versions, strict=False)
    }
    expected = {v: c for v, c in expected.items() if c}
    assert compacted not in by_commit
    assert by_commit == expected
    for start, end in [(0, versions[-1]), (versions[1], versions[4]), (versions[2], versions[-1])]:
        net = table.changes(start=start, end=end, net=True)
        got: Counter[Change] = Counter()
        for r in net.collect():
            got[(r["_change_type"], r["k"], r["v"], r["p"])] += 1
            assert r["_commit_version"] == end
        assert got == diff(states.get(start, {}), states[end]), (start, end)
    middle = feed(table.changes(start=versions[1], end=versions[3]))
    assert middle == {v: expected[v] for v in versions[2:4] if v in expected}


JAVA_TYPES = {
    "insert": "INSERT",
    "delete": "DELETE",
    "update_preimage": "DELETE",
    "update_postimage": "INSERT",
}


def without_carry_over(changes: Counter[tuple[Any, ...]]) -> Counter[tuple[Any, ...]]:
    """Iceberg's changelog less its carry-over rows: a row a commit deleted and inserted unchanged (a
    copy-on-write rewrite copies it), as ``create_changelog_view`` removes them by default."""
    out = Counter(changes)
    for (snapshot, ordinal, kind, *row), n in changes.items():
        twin = (snapshot, ordinal, "INSERT", *row)
        if kind == "DELETE" and twin in changes:
            carried = min(n, changes[twin])
            out[(snapshot, ordinal, kind, *row)] -= carried
            out[twin] -= carried
    return +out


def test_feed_equals_iceberg_javas_changelog(lake: rowops.Lakehouse, java: Any) -> None:
    """Iceberg Java's changelog scan (the ``changes`` table that ``create_changelog_view`` reads) over the
    same snapshots: the same rows, commits and ordinals, update images as its delete and insert. On a
    copy-on-write table: Iceberg 1.10's changelog scan refuses delete files ("Delete files are currently
    not supported in changelog scans"), which is what the other encodings write."""
    strategy = "copy-on-write"
    if java is None:
        pytest.skip("needs Iceberg's Java reader")
    spark = lake.spark
    rows: Rows = {k: (f"v{k}", k % 3) for k in range(1, 13)}
    table = lake.create_table("db.t", frame(spark, rows), partition_by=["bucket(4, k)"], identifier=["k"])
    first = table.current_snapshot_id
    rowops.merge(frame(spark, {2: ("two", 2), 40: ("forty", 1)}), table, on=["k"], strategy=strategy)
    table.append(frame(spark, {50: ("fifty", 0)}))
    table.compact()  # a rewrite: no change in either changelog
    table.update({"v": "'u'"}, where="p = 1", strategy=strategy)
    table.delete("k IN (3, 50)", strategy=strategy)
    ours: Counter[tuple[Any, ...]] = Counter()
    for r in table.changes(start_snapshot_id=first).collect():
        kind = JAVA_TYPES[r["_change_type"]]
        ours[(r["_commit_snapshot_id"], r["_change_ordinal"], kind, r["k"], r["v"], r["p"])] += 1
    options = {"start-snapshot-id": str(first), "end-snapshot-id": str(table.current_snapshot_id)}
    theirs: Counter[tuple[Any, ...]] = Counter()
    for r in java.read(table.metadata_location + "#changes", read_options=options).to_pylist():
        theirs[
            (r["_commit_snapshot_id"], r["_change_ordinal"], r["_change_type"], r["k"], r["v"], r["p"])
        ] += 1
    assert len({c[0] for c in ours}) == 4  # merge, append, update, delete; not the compaction
    assert sorted(ours.items()) == sorted(without_carry_over(theirs).items())


def test_feed_columns_and_their_types(lake: rowops.Lakehouse) -> None:
    spark = lake.spark
    table = lake.create_table("db.t", frame(spark, {1: ("a", 0)}), identifier=["k"])
    rowops.merge(frame(spark, {1: ("b", 0)}), table, on=["k"], strategy="position-delete")
    df = table.changes(start=1)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("k", "bigint"),
        ("v", "string"),
        ("p", "bigint"),
        ("_change_type", "string"),
        ("_commit_version", "bigint"),
        ("_commit_snapshot_id", "bigint"),
        ("_commit_timestamp", "timestamp"),
        ("_change_ordinal", "int"),
    ]
    rows = sorted(df.collect(), key=lambda r: r["_change_type"])
    assert [r["_change_type"] for r in rows] == ["update_postimage", "update_preimage"]
    assert {r["_commit_snapshot_id"] for r in rows} == {table.current_snapshot_id}
    assert {r["_change_ordinal"] for r in rows} == {0}
    assert rows[0]["_commit_version"] == 2 and isinstance(rows[0]["_commit_timestamp"], datetime)
    assert table.changes(start=2).count() == 0  # an empty range has the same columns
    assert table.changes(start=2).columns == df.columns


def test_without_identifier_columns_updates_are_a_delete_and_an_insert(lake: rowops.Lakehouse) -> None:
    spark = lake.spark
    table = lake.create_table("db.t", frame(spark, {1: ("a", 0), 2: ("b", 0)}))
    table.update({"v": "'c'"}, where="k = 1", strategy="copy-on-write")
    got = Counter((r["_change_type"], r["k"], r["v"]) for r in table.changes(start=1).collect())
    assert got == Counter({("delete", 1, "a"): 1, ("insert", 1, "c"): 1})  # the copied row 2 is no change


def test_snapshot_id_ranges(lake: rowops.Lakehouse) -> None:
    spark = lake.spark
    table = lake.create_table("db.t", frame(spark, {1: ("a", 0)}), identifier=["k"])
    first = table.current_snapshot_id
    table.append(frame(spark, {2: ("b", 0)}))
    table.delete("k = 1", strategy="position-delete")
    rows = table.changes(start_snapshot_id=first).collect()
    assert Counter((r["_change_type"], r["k"], r["_change_ordinal"]) for r in rows) == Counter(
        {("insert", 2, 0): 1, ("delete", 1, 1): 1}
    )
    assert {r["_commit_version"] for r in rows} == {None}


def test_bad_ranges_are_refused(lake: rowops.Lakehouse) -> None:
    spark = lake.spark
    table = lake.create_table("db.t", frame(spark, {1: ("a", 0)}), identifier=["k"])
    table.append(frame(spark, {2: ("b", 0)}))
    for call in (
        lambda: table.changes(start=2, end=1),
        lambda: table.changes(end=99),
        lambda: table.changes(start=-1),
        lambda: table.changes(start="1"),  # type: ignore[arg-type]
        lambda: table.changes(start=1, start_snapshot_id=table.current_snapshot_id),
        lambda: table.changes(
            start_snapshot_id=table.current_snapshot_id, end_snapshot_id=table.snapshots()[0]["snapshot_id"]
        ),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidInputError, match="Help:"):
            call()
    with pytest.raises(SnapshotExpiredError):
        table.changes(start_snapshot_id=12345)
    assert table.changes(start=datetime(2000, 1, 1, tzinfo=timezone.utc)).count() == 2


def test_incremental_read_returns_the_rows_appended_in_a_range(lake: rowops.Lakehouse, java: Any) -> None:
    """``to_df(start=, end=)`` equals Iceberg Java's incremental append scan over the same snapshots."""
    spark = lake.spark
    table = lake.create_table("db.t", frame(spark, {1: ("a", 0)}), identifier=["k"])
    start_version, start_snapshot = lake.version, table.current_snapshot_id
    table.append(frame(spark, {2: ("b", 1), 3: ("c", 0)}))
    with lake.transaction() as tx:  # a transaction of two appends is one commit with both
        tx.table("db.t").append(frame(spark, {4: ("d", 0)}))
        tx.table("db.t").append(frame(spark, {5: ("e", 1)}))
    table.compact()  # a rewrite is no commit of the feed, and no append either
    appended = [(2, "b", 1), (3, "c", 0), (4, "d", 0), (5, "e", 1)]
    got = sorted(tuple(r) for r in table.to_df(start=start_version).collect())
    assert got == appended
    by_snapshot = table.to_df(start_snapshot_id=start_snapshot, where="p = 1").collect()
    assert sorted(tuple(r) for r in by_snapshot) == [(2, "b", 1), (5, "e", 1)]
    if java is not None:
        options = {
            "start-snapshot-id": str(start_snapshot),
            "end-snapshot-id": str(table.current_snapshot_id),
        }
        rows = java.read(table.metadata_location, read_options=options).to_pylist()
        assert sorted((r["k"], r["v"], r["p"]) for r in rows) == appended
    table.delete("k = 2", strategy="position-delete")
    with pytest.raises(InvalidInputError, match="changes"):
        table.to_df(start=start_version)
    with pytest.raises(InvalidInputError, match="Help:"):
        table.to_df(snapshot_id=start_snapshot, start=start_version)
    with pytest.raises(InvalidInputError):
        table.to_df(start=start_version, end=start_version + 2, where="no_such_column = 1")


def test_changes_on_the_command_line(lake: rowops.Lakehouse, tmp_path: Any) -> None:
    spark = lake.spark
    table = lake.create_table("db.t", frame(spark, {1: ("a", 0), 2: ("b", 0)}), identifier=["k"])
    rowops.merge(frame(spark, {2: ("B", 0), 3: ("c", 0)}), table, on=["k"], strategy="position-delete")
    runner = CliRunner()
    base = ["--lake", str(lake.root)]
    listed = runner.invoke(app, [*base, "changes", "db.t", "--from", "1"])
    assert listed.exit_code == 0, listed.output
    assert sorted(listed.output.splitlines()) == [
        "v2 insert           k=3, v='c', p=0",
        "v2 update_postimage k=2, v='B', p=0",
        "v2 update_preimage  k=2, v='b', p=0",
    ]
    as_json = runner.invoke(app, [*base, "changes", "db.t", "--format", "json"])
    rows = json.loads(as_json.output)
    assert Counter((r["_commit_version"], r["_change_type"], r["k"]) for r in rows) == Counter(
        {(1, "insert", 1): 1, (1, "insert", 2): 1, (2, "insert", 3): 1}
        | {(2, "update_preimage", 2): 1, (2, "update_postimage", 2): 1}
    )
    assert all(datetime.fromisoformat(r["_commit_timestamp"]) for r in rows)
    out = tmp_path / "feed"
    written = runner.invoke(
        app, [*base, "changes", "db.t", "--from", "1", "--net", "--format", "parquet", "--out", str(out)]
    )
    assert written.exit_code == 0, written.output
    assert spark.read.parquet(str(out)).count() == 3
    bad = runner.invoke(app, [*base, "changes", "db.t", "--from", "5"])
    assert bad.exit_code == EXIT_BAD_INPUT and "Help:" in bad.output


@pytest.mark.parametrize(  # make test keeps position deletes (the bug was in re-deleted files)
    "strategy",
    [
        pytest.param("copy-on-write", marks=pytest.mark.slow),
        "position-delete",
        pytest.param("equality-delete", marks=pytest.mark.slow),
        pytest.param("hybrid", marks=pytest.mark.slow),
    ],
)
def test_a_rollback_brings_deleted_and_updated_rows_back(lake: rowops.Lakehouse, strategy: str) -> None:
    """A table rollback and a lake rollback over deletes (positions, vectors, equality keys or
    rewritten files) are the changes that undo them: the rows come back."""
    spark = lake.spark
    state: Rows = {k: (f"v{k}", k % 2) for k in range(1, 9)}
    table = lake.create_table("db.t", frame(spark, state), identifier=["k"])
    start, first = lake.version, table.current_snapshot_id
    delete = dict(on=["k"], strategy=strategy, when_matched="delete", when_not_matched=None)
    rowops.merge(frame(spark, {2: state[2]}), table, **delete)  # type: ignore[arg-type]
    rowops.merge(frame(spark, {3: ("three", 1)}), table, on=["k"], strategy=strategy)
    table.rollback_to(first)
    undone = lake.version
    expected = Counter({("insert", 2, "v2", 0): 1, ("update_preimage", 3, "three", 1): 1})
    expected[("update_postimage", 3, "v3", 1)] += 1
    assert feed(table.changes(start=undone - 1, end=undone)) == {undone: expected}
    rowops.merge(frame(spark, {4: state[4], 5: state[5]}), table, **delete)  # type: ignore[arg-type]
    lake.rollback_to(undone)
    back = Counter({("insert", 4, "v4", 0): 1, ("insert", 5, "v5", 1): 1})
    assert feed(table.changes(start=lake.version - 1)) == {lake.version: back}
    assert table.changes(start=start, net=True).count() == 0  # every change undone


def test_lake_changes_gives_each_changed_tables_feed(lake: rowops.Lakehouse) -> None:
    spark = lake.spark
    one = lake.create_table("db.one", frame(spark, {1: ("a", 0)}), identifier=["k"])
    lake.create_table("db.two", frame(spark, {1: ("a", 0)}), identifier=["k"])
    lake.create_table("db.still", frame(spark, {1: ("a", 0)}), identifier=["k"])
    start = lake.version
    one.delete("k = 1", strategy="position-delete")
    with lake.transaction() as tx:  # one commit in both tables' feeds
        tx.append("db.one", frame(spark, {2: ("b", 0)}))
        tx.merge(frame(spark, {1: ("z", 0)}), "db.two", on=["k"])
        inside = tx.changes(start=start)  # as the transaction reads: up to its pinned version
    feeds = lake.changes(start=start)
    assert sorted(feeds) == ["db.one", "db.two"]  # db.still did not change
    assert feed(feeds["db.one"]) == {
        start + 1: Counter({("delete", 1, "a", 0): 1}),
        tx.version: Counter({("insert", 2, "b", 0): 1}),
    }
    assert feed(feeds["db.two"]) == {
        tx.version: Counter({("update_preimage", 1, "a", 0): 1, ("update_postimage", 1, "z", 0): 1})
    }
    assert sorted(inside) == ["db.one"] and feed(inside["db.one"]) == {
        start + 1: Counter({("delete", 1, "a", 0): 1})
    }
    net = lake.changes(start=start, net=True, tables=["db.one", "db.still"])
    assert sorted(net) == ["db.one"]
    assert Counter((r["_change_type"], r["k"]) for r in net["db.one"].collect()) == Counter(
        {("delete", 1): 1, ("insert", 2): 1}
    )
    with pytest.raises(InvalidInputError, match=r"no table db\.nope"):
        lake.changes(start=start, tables=["db.nope"])
    with pytest.raises(InvalidInputError, match="Help:"):
        lake.changes(start=lake.version, end=start)


def test_v3_updates_are_paired_by_the_row_ids_iceberg_java_reads(lake: rowops.Lakehouse, java: Any) -> None:
    """A format v3 table without identifier columns: an UPDATE's old and new row versions are one
    update (pre- and post-image) because they have one ``_row_id``, which Iceberg Java reads at the
    snapshots before and after (copy-on-write, and deletion vectors); a delete stays a delete."""
    if java is None:
        pytest.skip("the Java oracle is not available")
    spark = lake.spark
    rows = {k: (f"v{k}", 0) for k in range(1, 6)}
    table = lake.create_table("db.t", frame(spark, rows).coalesce(1), format_version=3)
    start, snapshots = lake.version, [table.current_snapshot_id]
    table.update({"v": "'one'"}, where="k = 1", strategy="copy-on-write")
    snapshots.append(table.current_snapshot_id)
    table.update({"v": "'two'"}, where="k = 2", strategy="position-delete")
    snapshots.append(table.current_snapshot_id)
    table.delete("k = 3", strategy="position-delete")
    assert feed(table.changes(start=start)) == {
        start + 1: Counter({("update_preimage", 1, "v1", 0): 1, ("update_postimage", 1, "one", 0): 1}),
        start + 2: Counter({("update_preimage", 2, "v2", 0): 1, ("update_postimage", 2, "two", 0): 1}),
        start + 3: Counter({("delete", 3, "v3", 0): 1}),
    }

    def row_ids(snapshot_id: int | None) -> dict[int, int]:
        read = java.read(table.metadata_location, snapshot_id=snapshot_id, columns=["k", "_row_id"])
        return {r["k"]: r["_row_id"] for r in read.to_pylist()}

    for before, after, k in [(snapshots[0], snapshots[1], 1), (snapshots[1], snapshots[2], 2)]:
        old, new = row_ids(before), row_ids(after)
        assert old[k] == new[k] and len(set(new.values())) == len(new)  # one row, one id: the pair


def test_a_column_added_since_the_last_commit_is_in_the_feed(lake: rowops.Lakehouse) -> None:
    """A net feed reads its last state as ``to_df`` does: a column added after the last snapshot (a
    metadata-only change) is a column of the feed, NULL (found by the lake model's lake-wide rule).
    A per-commit feed has the columns of its last commit's state."""
    table = lake.create_table("db.t", frame(lake.spark, {1: ("a", 0)}), identifier=["k"])
    table.add_columns({"w": "long"})
    for df in (table.changes(start=0, net=True), lake.changes(start=0, net=True)["db.t"]):
        assert df.columns[:4] == table.to_df().columns == ["k", "v", "p", "w"]
        assert [(r["k"], r["w"], r["_change_type"]) for r in df.collect()] == [(1, None, "insert")]
