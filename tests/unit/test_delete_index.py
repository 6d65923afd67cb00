"""The delete index answers exactly what the brute-force rule (``LiveFile.may_apply_to`` over every
pair of files) answers, for random files, deletes, sequence numbers, partitions and specs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.conversions import to_bytes
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestEntry, ManifestEntryStatus
from pyiceberg.schema import Schema
from pyiceberg.table.snapshots import Operation
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField

from rowops.commit.row_delta import RowDelta
from rowops.commit.write_set import find_write_conflict
from rowops.maintenance.index import covered_targets
from rowops.meta.delete_index import DeleteIndex, dangling_equality_deletes, delete_index
from rowops.meta.files import FILE_PATH_ID, LiveFile, TableFiles
from rowops.plan.cost import (
    DELETE_ROW_READ_BYTES,
    FILE_OPEN_BYTES,
    read_overhead,
    rewrite_cost,
    worth_merging,
)
from rowops.plan.debt import Debt, outside_paydown, read_debt

POS, EQ, DATA = DataFileContent.POSITION_DELETES, DataFileContent.EQUALITY_DELETES, DataFileContent.DATA
# (spec id, partition): spec 0 is unpartitioned (its deletes are global)
SCOPES = [(0, ()), (1, (0,)), (1, (1,)), (2, (0,))]
PATHS = [f"/lake/t/data/f{i}.parquet" for i in range(8)]


def live(
    path: str, content: DataFileContent, seq: int, scope: tuple[int, tuple[object, ...]], **stats: object
) -> LiveFile:
    spec_id, partition = scope
    data_file = DataFile.from_args(
        content=content,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(*partition),
        record_count=10,
        file_size_in_bytes=1000 + seq,
        spec_id=spec_id,
        equality_ids=[1] if content == EQ else None,
        **stats,
    )
    entry = ManifestEntry.from_args(
        status=ManifestEntryStatus.ADDED, snapshot_id=seq, sequence_number=seq, data_file=data_file
    )
    return LiveFile(entry, path, content, seq, spec_id, partition)


def pos_delete(
    path: str, seq: int, scope: tuple[int, tuple[object, ...]], bounds: tuple[str, str] | None
) -> LiveFile:
    stats = {}
    if bounds is not None:
        stats = {
            "lower_bounds": {FILE_PATH_ID: bounds[0].encode()},
            "upper_bounds": {FILE_PATH_ID: bounds[1].encode()},
        }
    return live(path, POS, seq, scope, **stats)


seqs = st.integers(1, 6)
scopes = st.sampled_from(SCOPES)
bounds = st.one_of(
    st.none(),
    st.sampled_from(PATHS).map(lambda p: (p, p)),  # file-scoped (maybe a path no live file has)
    st.lists(st.sampled_from(PATHS), min_size=2, max_size=2).map(lambda ps: (min(ps), max(ps))),
)


@st.composite
def snapshots(draw: st.DrawFn) -> TableFiles:
    data_paths = draw(st.lists(st.sampled_from(PATHS), max_size=len(PATHS), unique=True))
    data = tuple(live(p, DATA, draw(seqs), draw(scopes)) for p in data_paths)
    pos = tuple(
        pos_delete(f"/lake/t/pos{i}.parquet", draw(seqs), draw(scopes), draw(bounds))
        for i in range(draw(st.integers(0, 6)))
    )
    eq = tuple(
        live(f"/lake/t/eq{i}.parquet", EQ, draw(seqs), draw(scopes)) for i in range(draw(st.integers(0, 6)))
    )
    return TableFiles(1, 7, (), data, pos, eq)


def paths(files: list[LiveFile]) -> list[str]:
    return sorted(f.path for f in files)


@settings(max_examples=300, deadline=None)
@given(snapshots())
def test_index_matches_brute_force(files: TableFiles) -> None:
    index = DeleteIndex.of(files)
    for f in files.data:
        assert paths(index.position_deletes_of(f)) == paths(
            [d for d in files.position_deletes if d.may_apply_to(f)]
        )
        eq = [d for d in files.equality_deletes if d.may_apply_to(f)]
        assert paths(index.equality_deletes_of(f)) == paths(eq)
        assert index.equality_deletes_on(f) == len(eq)
        assert index.deletes_on(f) == sum(d.may_apply_to(f) for d in files.deletes)
    for f in files.data:
        brute = paths([d for d in files.position_deletes if d.may_apply_to(f)])
        assert paths(index.pos_by_data.get(f.path, [])) == brute
    for d in files.position_deletes:
        assert sorted(index.data_by_pos.get(d.path, [])) == sorted(
            f.path for f in files.data if d.may_apply_to(f)
        )


@settings(max_examples=300, deadline=None)
@given(snapshots(), st.data())
def test_union_of_applicable_deletes_and_dangling(files: TableFiles, data: st.DataObject) -> None:
    index = DeleteIndex.of(files)
    some = data.draw(
        st.lists(st.sampled_from(files.data), unique_by=lambda f: f.path) if files.data else st.just([])
    )
    assert paths(index.deletes_applying(some)) == paths(
        [d for d in files.deletes if any(d.may_apply_to(f) for f in some)]
    )
    removed = {f.path for f in some}
    kept = [f for f in files.data if f.path not in removed]
    assert dangling_equality_deletes(files, removed) == {
        d.path for d in files.equality_deletes if not any(d.may_apply_to(f) for f in kept)
    }


def brute_force_debt(files: TableFiles, candidates: list[LiveFile], read_weight: float) -> Debt:
    """``read_debt`` as it was: every delete file checked against every candidate."""
    pos = [any(d.may_apply_to(f) for d in files.position_deletes) for f in candidates]
    eq = [any(d.may_apply_to(f) for d in files.equality_deletes) for f in candidates]
    live_ = [d for d in files.deletes if any(d.may_apply_to(f) for f in candidates)]
    total = sum(map(read_overhead, [f.size for f in candidates], pos, eq))
    eq_files = sum(1 for d in live_ if d.equality_ids)
    merged = sum(worth_merging(f.size, read_weight) for f in candidates)
    total += FILE_OPEN_BYTES * (eq_files + merged)
    total += DELETE_ROW_READ_BYTES * sum(d.record_count for d in live_)
    return Debt(
        file_opens=sum(pos) + eq_files + merged,
        bytes=total,
        pos_deleted_bytes=sum(f.size for f, d in zip(candidates, pos, strict=True) if d),
        eq_deleted_bytes=sum(f.size for f, d in zip(candidates, eq, strict=True) if d),
        generations=len({d.seq for d in live_}),
        deleted_bytes=sum(f.size for f, p, e in zip(candidates, pos, eq, strict=True) if p or e),
        newest=max((d.seq for d in live_), default=0),
    )


@settings(max_examples=200, deadline=None)
@given(snapshots(), st.data())
def test_read_debt_matches_brute_force(files: TableFiles, data: st.DataObject) -> None:
    some = data.draw(
        st.lists(st.sampled_from(files.data), unique_by=lambda f: f.path) if files.data else st.just([])
    )
    assert read_debt(files, some, 1.0) == brute_force_debt(files, some, 1.0)


@settings(max_examples=200, deadline=None)
@given(snapshots(), st.data(), st.sampled_from([0.0, 0.01, 1.0, 1000.0]))
def test_outside_paydown_matches_brute_force(files: TableFiles, data: st.DataObject, weight: float) -> None:
    """Per partition no candidate is in, the files deletes apply to are paid down together when
    reads have paid their debt since the newest of those deletes (one read per commit up to the
    snapshot's sequence number, times the weight) at least as much as rewriting them costs; a
    partition with a file that cannot be rewritten is left alone, and so is every partition of a
    table with global equality deletes."""
    candidates = data.draw(
        st.lists(st.sampled_from(files.data), unique_by=lambda f: f.path) if files.data else st.just([])
    )
    blocked = data.draw(st.sets(st.sampled_from(PATHS)))
    inside = {(f.spec_id, f.partition) for f in candidates}
    expected: set[str] = set()
    scopes = {(f.spec_id, f.partition) for f in files.data} - inside
    if any(d.is_global for d in files.equality_deletes):  # left to compact (not linear per partition)
        scopes = set()
    for scope in scopes:
        group = [
            f
            for f in files.data
            if (f.spec_id, f.partition) == scope and any(d.may_apply_to(f) for d in files.deletes)
        ]
        if not group or any(f.path in blocked for f in group):
            continue
        debt = brute_force_debt(files, group, weight)
        cost = rewrite_cost(debt.deleted_bytes, 0.0, debt.eq_deleted_bytes)
        newest = max(d.seq for d in files.deletes if any(d.may_apply_to(f) for f in group))
        paid = debt.bytes * weight * (files.sequence_number - newest + 1)
        if debt.bytes > 0 and paid >= cost:
            expected |= {f.path for f in group}
    found = outside_paydown(
        files, candidates, lambda group: all(f.path not in blocked for f in group), weight
    )
    assert sorted(f.path for f in found.files) == sorted(expected)
    assert (found.rewrite_bytes > 0) == bool(expected) and (found.paid_bytes >= found.rewrite_bytes)


def test_scoping_rules() -> None:
    """A file-scoped position delete applies to its file whatever its partition; a partition-scoped
    one only within its partition (or everywhere when unpartitioned), and not to newer files."""
    a = live(PATHS[0], DATA, 1, SCOPES[1])
    b = live(PATHS[1], DATA, 1, SCOPES[2])
    c = live(PATHS[2], DATA, 3, SCOPES[1])
    named = pos_delete("/lake/t/p0.parquet", 2, SCOPES[3], (PATHS[0], PATHS[0]))
    ranged = pos_delete("/lake/t/p1.parquet", 2, SCOPES[1], (PATHS[0], PATHS[2]))
    unknown = pos_delete("/lake/t/p2.parquet", 2, SCOPES[0], None)
    index = DeleteIndex([a, b, c], [named, ranged, unknown], [])
    assert paths(index.position_deletes_of(a)) == paths([named, ranged, unknown])
    assert paths(index.position_deletes_of(b)) == paths([unknown])  # ranged: another partition
    assert index.position_deletes_of(c) == []  # newer than every delete
    assert covered_targets(index, {PATHS[1]}) == (
        {PATHS[0], PATHS[1]},
        {unknown.path, named.path, ranged.path},
    )


def test_index_is_shared_per_snapshot() -> None:
    files = TableFiles(1, 1, (), (live(PATHS[0], DATA, 1, SCOPES[0]),), (), ())
    assert delete_index(files) is delete_index(files)
    other = TableFiles(1, 1, (), files.data, (), ())
    assert delete_index(other) is not delete_index(files)


def test_write_conflicts_through_new_position_deletes() -> None:
    """An equality-delete write of keys 3..4 conflicts with a concurrent position delete on the file
    holding keys 1..5, not with one on the file holding keys 10..20 (``find_write_conflict``)."""
    schema = Schema(NestedField(1, "k", LongType(), required=True))

    def keyed(path: str, content: DataFileContent, lo: int, hi: int) -> LiveFile:
        stats = {"lower_bounds": {1: to_bytes(LongType(), lo)}, "upper_bounds": {1: to_bytes(LongType(), hi)}}
        return live(path, content, 1, SCOPES[1], **stats)

    a, b = keyed(PATHS[0], DATA, 1, 5), keyed(PATHS[1], DATA, 10, 20)
    ours = keyed("/lake/t/ours.parquet", EQ, 3, 4).data_file
    delta = RowDelta(Operation.OVERWRITE, added_deletes=(ours,))
    base = TableFiles(1, 1, (), (a, b), (), ())
    for target, conflict in ((a, True), (b, False)):
        theirs = pos_delete("/lake/t/theirs.parquet", 2, SCOPES[1], (target.path, target.path))
        current = TableFiles(2, 2, (), (a, b), (theirs,), ())
        found = find_write_conflict(delta, base, current, schema)
        assert (found is not None and found.files == (target.path,)) if conflict else found is None
