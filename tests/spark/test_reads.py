"""The read path under deletes (``exec/reading/scan.py``): which rows meet which delete machinery, and the
physical plan Spark runs for a read (no timings: shapes only; correctness is the behaviour suites')."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import rowops
from rowops.exec.reading import (
    block_masks,
    delete_positions,
    driver_deletes,
    equality_deletes,
    packed_keys,
    position_keys,
    scan,
)
from rowops.exec.reading.packed_keys import packed_key
from rowops.exec.rewriting.arrow_deletes import KeyCodec
from rowops.exec.spark.listing import spark_name
from rowops.exec.spark.session import session_conf
from rowops.exec.spark.stats import BROADCAST_CAP_CONF
from rowops.meta.paths import normalize_path
from tests.readers import assert_readers_agree
from tests.spark.tables import COLUMNS, frame, make_row

ROWS = 400


def _scans(df: Any) -> list[tuple[set[str], bool]]:
    """Each file scan of ``df``'s executed plan: the files it reads and whether deletes are applied
    above it (a join, or the filter on row keys of ``driver_deletes``)."""
    found: list[tuple[set[str], bool]] = []

    def walk(node: Any, under_join: bool) -> None:
        name = node.getClass().getSimpleName()
        if name == "AdaptiveSparkPlanExec":
            return walk(node.executedPlan(), under_join)
        if name.endswith("QueryStageExec"):  # a stage of an executed adaptive plan (a reused one too)
            return walk(node.plan(), under_join)
        if name == "ReusedExchangeExec":  # the exchange it reuses is walked where it is defined
            return None
        if name.endswith("JoinExec") or (name == "FilterExec" and "row_index" in str(node.condition())):
            under_join = True
        if name == "FileSourceScanExec":
            files = {normalize_path(str(p)) for p in node.relation().location().inputFiles()}
            found.append((files, under_join))
        children = node.children().iterator()
        while children.hasNext():
            walk(children.next(), under_join)

    walk(df._jdf.queryExecution().executedPlan(), False)
    return found


def _table(lake: Any, format_version: int = 2) -> Any:
    rows = [make_row(k) for k in range(ROWS)]
    return lake.create_table(
        "db.t",
        frame(lake.spark, rows),
        partition_by=["bucket(4, k)"],
        identifier=["k"],
        format_version=format_version,
    )


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


def test_a_read_loads_the_table_metadata_once(lake, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """``to_df`` validates its arguments and reads on one load of the table's ``metadata.json``:
    parsing it is the read's largest driver cost on a table with a long history, and a second load
    could see a newer version than the one checked."""
    table = _table(lake)
    rowops.merge(frame(lake.spark, [make_row(1, 1)]), table, on=["k"], strategy="equality-delete")
    first = table.current_snapshot_id
    rowops.merge(frame(lake.spark, [make_row(2, 2)]), table, on=["k"], strategy="equality-delete")
    loads: list[str] = []
    read_metadata = lake.catalog.read_metadata

    def counted(location: str) -> Any:
        loads.append(location)
        return read_metadata(location)

    monkeypatch.setattr(lake.catalog, "read_metadata", counted)
    current = table.to_df()
    assert len(loads) == 1, loads
    past = table.to_df(snapshot_id=first)
    assert len(loads) == 2, loads
    assert {r["k"]: r["n"] for r in current.collect()}[2] == 2
    assert {r["k"]: r["n"] for r in past.collect()}[2] == 0


def test_equality_delete_keys_are_read_once_for_every_generation(lake) -> None:  # type: ignore[no-untyped-def]
    """Data files of four sequence numbers, three of them under three generations of equality
    deletes: two anti-joins (the files older than every delete, the newer ones) with the same build
    side, so each delete file is scanned once per read: the keys are broadcast once and reused. The
    three generations are read in one scan, each key tagged with its file's sequence number."""
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
    assert scanned == [deletes], scanned  # one scan of every generation's delete files


@pytest.mark.parametrize(("files_per_scan", "scans"), [(512, [4, 8]), (4, [4, 4, 4])])
def test_equality_deletes_of_many_generations_are_read_in_chunks(
    lake, monkeypatch, files_per_scan, scans
) -> None:  # type: ignore[no-untyped-def]
    """More sequence numbers than one scan tags (``SEQUENCES_PER_SCAN``, here 2): the delete files are
    read in scans of at most that many generations (and ``FILES_PER_TAGGED_SCAN`` files, unless one
    generation has more), each key still with its own sequence number (a key of generation 3 deletes
    the rows of generation 2, not those it inserted itself)."""
    monkeypatch.setattr(equality_deletes, "SEQUENCES_PER_SCAN", 2)
    monkeypatch.setattr(equality_deletes, "FILES_PER_TAGGED_SCAN", files_per_scan)
    table = _table(lake)
    for n in (1, 2, 3):
        changed = [make_row(k, n) for k in range(0, ROWS, 2 + n)]
        rowops.merge(frame(lake.spark, changed), table, on=["k"], strategy="equality-delete")
    deletes = {f.path for f in table.files().equality_deletes}
    df = table.to_df()
    expected = {k: next((n for n in (3, 2, 1) if k % (2 + n) == 0), 0) for k in range(ROWS)}
    assert {r["k"]: r["n"] for r in df.collect()} == expected
    scanned = [s & deletes for s, _ in _scans(df) if s & deletes]
    assert sorted(len(s) for s in scanned) == scans, scanned
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


@pytest.mark.parametrize(
    "join", ["few", "driver keys", "row key", "row key by positions", "position", "pair"]
)
def test_position_deletes_remove_their_file_rows_only(lake, monkeypatch, join) -> None:  # type: ignore[no-untyped-def]
    """Every file of the table has rows at the positions deleted in the others: only the named file's
    row goes, whether the driver reads the deletes (``driver_deletes``) and a few filter each row's key
    (no join) or more are anti-joined as masks of 64-row blocks (``block_masks``), or executors read them and the anti-join hashes one
    long per row (``position_keys``: from enough files, or enough deleted positions in few files), or by
    name: positions (names compared in its residual) or (name, position) pairs."""
    driver = join in ("few", "driver keys")
    monkeypatch.setattr(driver_deletes, "MAX_POSITIONS", driver_deletes.MAX_POSITIONS if driver else 0)
    monkeypatch.setattr(driver_deletes, "MAX_LISTED", driver_deletes.MAX_LISTED if join == "few" else 0)
    monkeypatch.setattr(position_keys, "MIN_FILES", 1 if join == "row key" else 4097)
    monkeypatch.setattr(position_keys, "MIN_DELETED_ROWS", 1 if join == "row key by positions" else 1 << 62)
    monkeypatch.setattr(scan, "MAX_FILES_KEYED_BY_POSITION", 64 if join == "position" else 0)
    table = _table(lake)
    changed = [make_row(k, 1) for k in range(ROWS) if k % 13 == 0]
    rowops.merge(frame(lake.spark, changed), table, on=["k"], strategy="position-delete")
    assert len({f.path for f in table.files().data if f.seq == 1}) == 4  # all four base files touched
    df = table.to_df()
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert ("_delete_file" in plan) is (join == "position")
    assert ("Join" in plan) is (join != "few")
    assert (position_keys.KEY in plan) is join.startswith("row key")
    assert ("_rowops_mask" in plan) is (join == "driver keys")
    assert {r["k"]: r["n"] for r in df.collect()} == {k: 1 if k % 13 == 0 else 0 for k in range(ROWS)}


@pytest.mark.parametrize("format_version", [2, 3])
def test_deletes_are_read_on_the_driver_within_their_bounds(lake, monkeypatch, format_version) -> None:  # type: ignore[no-untyped-def]
    """Up to ``driver_deletes.MAX_POSITIONS`` positions in ``MAX_BYTES`` of delete files (position delete
    files on v2, deletion vector blobs on v3) are read by the driver, with no Spark job while the read
    is built: up to ``MAX_LISTED`` keys filter the rows with no join, more are broadcast and joined.
    Past either bound executors read them (a join too). The rows are the same either way."""
    table = _table(lake, format_version)
    changed = [make_row(k, 1) for k in range(ROWS) if k % 13 == 0]
    rowops.merge(frame(lake.spark, changed), table, on=["k"], strategy="position-delete")
    deletes = table.files().position_deletes
    assert deletes and sum(d.record_count for d in deletes) == len(changed)
    expected = {k: 1 if k % 13 == 0 else 0 for k in range(ROWS)}
    jobs = lake.spark.sparkContext.statusTracker()
    for bound, joined in [(None, False), ("MAX_LISTED", True), ("MAX_POSITIONS", True), ("MAX_BYTES", True)]:
        if bound is not None:
            monkeypatch.setattr(driver_deletes, bound, 0)
        group = f"driver-deletes-{format_version}-{bound}"
        lake.spark.sparkContext.setJobGroup(group, "building a read")
        df = table.to_df()
        assert not jobs.getJobIdsForGroup(group), "building the read ran a Spark job"
        plan = df._jdf.queryExecution().executedPlan().toString()
        assert ("Join" in plan) is joined, plan
        assert {r["k"]: r["n"] for r in df.collect()} == expected
        monkeypatch.undo()
    lake.spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)


@pytest.mark.parametrize("format_version", [2, 3])
def test_the_driver_reads_each_delete_file_once(lake, monkeypatch, format_version) -> None:  # type: ignore[no-untyped-def]
    """Delete files never change, so the driver keeps their rows (``delete_positions``): a read
    after a write reads only the delete files the table did not hold before, the next read none, and
    their rows are those of a read that keeps nothing."""
    monkeypatch.setattr(delete_positions, "CACHE", delete_positions.MaskCache())
    reads: list[str] = []

    def counted(read: Any) -> Any:
        return lambda io, key, *rest: reads.append(key) or read(io, key, *rest)

    monkeypatch.setattr(delete_positions, "_read_file", counted(delete_positions._read_file))
    monkeypatch.setattr(delete_positions, "_read_blob", counted(delete_positions._read_blob))
    table = _table(lake, format_version)
    expected, seen = {k: 0 for k in range(ROWS)}, set()
    for step in range(3):
        keys = [k for k in range(ROWS) if k % (11 + step) == 0]
        rowops.merge(
            frame(lake.spark, [make_row(k, step + 1) for k in keys]),
            table,
            on=["k"],
            strategy="position-delete",
        )
        expected.update(dict.fromkeys(keys, step + 1))
        start = len(reads)
        assert {r["k"]: r["n"] for r in table.to_df().collect()} == expected
        live = {d.file_key for d in table.files().position_deletes}
        assert set(reads[start:]) == live - seen, "a kept delete file was read again, or a new one not"
        seen |= live
        start = len(reads)
        assert {r["k"]: r["n"] for r in table.to_df().collect()} == expected
        assert not reads[start:], "the next read read delete files again"
    monkeypatch.setattr(delete_positions, "CACHE", delete_positions.MaskCache(limit=0))
    assert {r["k"]: r["n"] for r in table.to_df().collect()} == expected


_PLAN_KEYS = position_keys.plan_keys


def _named_plan(files: Any, **options: Any) -> position_keys.KeyPlan | None:
    """A key plan as for files that all share one size: each recognised by name."""
    plan = _PLAN_KEYS(files, **options)
    if plan is None:
        return None
    top = max(f.size for f in files)
    slots = {f.path: top + 1 + i for i, f in enumerate(files)}
    named = {spark_name(f.path): slots[f.path] for f in files}
    return position_keys.KeyPlan(plan.files, plan.stride, slots, named)


def test_row_keys_of_files_sharing_a_size_use_their_names(lake, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Files whose sizes are not distinct are keyed by name (their rows' key ranges past the largest
    size): the deletes still remove exactly their rows."""
    monkeypatch.setattr(position_keys, "MIN_FILES", 1)
    monkeypatch.setattr(position_keys, "plan_keys", _named_plan)
    table = _table(lake)
    changed = [make_row(k, 1) for k in range(ROWS) if k % 13 == 0]
    rowops.merge(frame(lake.spark, changed), table, on=["k"], strategy="position-delete")
    df = table.to_df()
    assert {r["k"]: r["n"] for r in df.collect()} == {k: 1 if k % 13 == 0 else 0 for k in range(ROWS)}
    named = _named_plan(table.files().data[:2])
    assert named is not None and "_metadata.file_path = " in str(position_keys.row_key(named))


def test_a_file_larger_than_its_manifest_says_fails_the_read(lake, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Row keys come from the manifests' file sizes: a file whose size differs (metadata that breaks
    the spec) fails the read with a Help line instead of keeping the rows its deletes remove."""
    table = _table(lake)
    rowops.merge(frame(lake.spark, [make_row(0, 1)]), table, on=["k"], strategy="position-delete")
    real = position_keys.plan_keys

    def off_by_one(files: Any, **options: Any) -> position_keys.KeyPlan | None:
        plan = real(files, **options)
        assert plan is not None and not plan.named
        slots = {path: size + 1 for path, size in plan.slots.items()}
        return position_keys.KeyPlan(plan.files, plan.stride, slots, {})

    monkeypatch.setattr(position_keys, "MIN_FILES", 1)
    monkeypatch.setattr(position_keys, "plan_keys", off_by_one)
    with pytest.raises(Exception, match="differs from its manifest's file_size_in_bytes"):
        table.to_df().collect()


_PLAN_BLOCKS = block_masks.plan_blocks


@pytest.mark.parametrize("shape", ["named", "sized wrong"])
def test_block_masks_find_files_by_size_or_name(lake, monkeypatch, shape) -> None:  # type: ignore[no-untyped-def]
    """Block masks (``block_masks``: more positions than a filter lists) find a row's file by its size
    or, for files sharing a size, by name: the deletes remove exactly their rows. A file whose size
    differs from its manifest's fails the read with a Help line."""

    def planned(files: Any) -> block_masks.BlockPlan | None:
        plan = _PLAN_BLOCKS(files)
        assert plan is not None and not plan.named
        if shape == "named":
            named = {spark_name(f.path): plan.bases[f.path] for f in files}
            return block_masks.BlockPlan(plan.files, plan.bases, {}, named)
        return block_masks.BlockPlan(plan.files, plan.bases, {s + 1: b for s, b in plan.sized.items()}, {})

    monkeypatch.setattr(driver_deletes, "MAX_LISTED", 0)
    monkeypatch.setattr(block_masks, "plan_blocks", planned)
    table = _table(lake)
    changed = [make_row(k, 1) for k in range(ROWS) if k % 13 == 0]
    rowops.merge(frame(lake.spark, changed), table, on=["k"], strategy="position-delete")
    if shape == "sized wrong":
        with pytest.raises(Exception, match="differs from its manifest's file_size_in_bytes"):
            table.to_df().collect()
        return
    df = table.to_df()
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "_rowops_mask" in plan and all(
        spark_name(f.path) in plan for f in table.files().data if f.seq == 1
    )
    assert {r["k"]: r["n"] for r in df.collect()} == {k: 1 if k % 13 == 0 else 0 for k in range(ROWS)}


def _hash_keys(df: Any) -> list[str]:
    """The build-side key lists of the hash joins in ``df``'s executed plan (run first)."""
    df.collect()
    plan = df._jdf.queryExecution().executedPlan().toString()
    return re.findall(r"HashedRelationBroadcastMode\(List\(([^)]*)\)", plan)


def test_integer_equality_keys_are_joined_as_one_long(lake) -> None:  # type: ignore[no-untyped-def]
    """Integer keys of equality deletes are packed into one long on both sides of the anti-join
    (Spark looks a single long up in its own hash map, far faster than a row of columns); a string
    key keeps a key column per equality column."""
    table = _table(lake)
    rowops.merge(
        frame(lake.spark, [make_row(k, 1) for k in range(0, ROWS, 5)]),
        table,
        on=["k"],
        strategy="equality-delete",
    )
    df = table.to_df()
    assert {keys.count("input[") for keys in _hash_keys(df)} == {1}
    assert "_eq_code" in df._jdf.queryExecution().executedPlan().toString()
    assert {r["k"]: r["n"] for r in df.collect()} == {k: 1 if k % 5 == 0 else 0 for k in range(ROWS)}
    by_name = lake.create_table(
        "db.s",
        frame(lake.spark, [make_row(k) for k in range(ROWS) if k % 11]),
        partition_by=["bucket(4, k)"],
        identifier=["k", "s"],
    )
    changed = [(*make_row(k)[:-1], 1) for k in range(0, ROWS, 7) if k % 11]  # same keys, n = 1
    rowops.merge(frame(lake.spark, changed), by_name, on=["k", "s"], strategy="equality-delete")
    df = by_name.to_df()
    assert {keys.count("input[") for keys in _hash_keys(df)} == {2}
    assert {r["k"]: r["n"] for r in df.collect()} == {
        k: 1 if k % 7 == 0 else 0 for k in range(ROWS) if k % 11
    }


def test_packed_keys_are_the_codec_codes(spark) -> None:  # type: ignore[no-untyped-def]
    """``packed_key`` computes ``KeyCodec.encode`` in Spark: NULL has its slot, a value outside
    the range gives NULL (it can match no delete), or an error for a delete key (``strict``)."""
    codec = KeyCodec((1, 2), (-5, 10), (12, 7))  # a: -5..5, b: 10..15, each plus a NULL slot
    rows = [(a, b) for a in (None, -6, -5, 0, 5, 6) for b in (None, 9, 10, 15, 16)]
    df = spark.createDataFrame(rows, "a int, b long")
    got = [r[0] for r in df.select(packed_key(codec, ["a", "b"], strict=False)).collect()]
    values = [np.array([0 if r[i] is None else r[i] for r in rows]) for i in (0, 1)]
    nulls = [np.array([r[i] is None for r in rows]) for i in (0, 1)]
    assert got == [None if c < 0 else int(c) for c in codec.encode(values, nulls)]
    assert len({c for c in got if c is not None}) == 4 * 3
    with pytest.raises(Exception, match="outside the bounds in its file metrics"):
        df.select(packed_key(codec, ["a", "b"], strict=True)).collect()


def test_prefix_slots_are_the_codec_slots(spark) -> None:  # type: ignore[no-untyped-def]
    """A row's prefix slot (``prefix_slot``, from its column) is the slot ``prefix_of_code`` takes out
    of the packed code of a delete key with the same value: NULL has slot 0 on both sides, a value
    outside the codec's range has none (it can be in no delete)."""
    codec = KeyCodec((1, 2, 3), (-5, 10, 0), (12, 7, 4))
    rows = [(a, b, c) for a in (None, -5, 5) for b in (None, 9, 10, 15, 16) for c in (None, 0, 2)]
    df = spark.createDataFrame(rows, "a int, b long, c int")
    coded = df.select("*", packed_key(codec, ["a", "b", "c"], strict=False).alias("code"))
    for index in range(3):
        got = coded.select(
            packed_keys.prefix_slot(codec, ["a", "b", "c"], index),
            packed_keys.prefix_of_code(codec, index, "code"),
        ).collect()
        for (slot, from_code), row in zip(got, rows, strict=True):
            if from_code is not None:  # the row's whole key is in the codec's range
                assert slot == from_code, (row, index)
            value = row[index]
            in_range = (
                value is None or codec.lows[index] <= value <= codec.lows[index] + codec.widths[index] - 2
            )
            assert slot == (0 if value is None else value - codec.lows[index] + 1 if in_range else None)


def test_wide_keys_probe_their_widest_column_first(lake, java, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """With the prefix probe on (thresholds lowered for test-sized tables), reads and rewrites under
    equality deletes on two integer columns probe the wider column's slots first and return what the
    independent readers return: older files, newer files compared by sequence number, and a
    copy-on-write that drops the deleted rows of a file by position."""
    monkeypatch.setattr(packed_keys, "PREFIX_MIN_KEYS", 1)
    monkeypatch.setattr(packed_keys, "PREFIX_MIN_ROWS_PER_KEY", 0)
    table = lake.create_table(
        "db.w",
        frame(lake.spark, [make_row(k) for k in range(ROWS)]),
        partition_by=["bucket(4, k)"],
        identifier=["k", "g"],
    )
    expected = {k: make_row(k) for k in range(ROWS)}
    batches = [
        ([k for k in range(0, ROWS, 5)] + list(range(ROWS, ROWS + 20)), 1),
        ([k for k in range(0, ROWS + 20, 7)], 2),
    ]
    for keys, version in batches:
        changed = [make_row(k, version) for k in keys]
        rowops.merge(frame(lake.spark, changed), table, on=["k", "g"], strategy="equality-delete")
        expected.update({r[0]: r for r in changed})
    df = table.to_df()
    assert "_eq_prefix" in df._jdf.queryExecution().executedPlan().toString()
    assert_readers_agree(table, expected.values(), COLUMNS, java)
    changed = [make_row(k, 3) for k in range(3, ROWS, 9)]
    rowops.merge(frame(lake.spark, changed), table, on=["k", "g"], strategy="copy-on-write")
    expected.update({r[0]: r for r in changed})
    assert_readers_agree(table, expected.values(), COLUMNS, java)
