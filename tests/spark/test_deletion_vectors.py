"""Format-v3 tables: metadata (row lineage), deletion vectors (one per data file), maintenance, and
tables whose deletion vectors Iceberg Java wrote."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from pyiceberg.manifest import DataFileContent, FileFormat, ManifestContent
from pyiceberg.table.deletion_vector import deletion_vectors_from_puffin_file
from pyiceberg.table.puffin import PuffinFile

import rowops
from rowops.errors import CommitConflictError, ConflictKind, InvalidInputError
from rowops.exec.reading import position_keys
from rowops.meta.paths import normalize_path
from rowops.meta.v3 import content_range, manifest_first_row_id, read_manifest_list, referenced_data_file
from tests.readers import assert_readers_agree
from tests.spark.tables import COLUMNS, Layout, Oracle, fingerprint, frame, make_row
from tests.spark.test_errors import assert_unchanged
from tests.spark.test_row_conflicts import Pinned


@pytest.fixture(autouse=True)
def _reads_by_row_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every read of these tests' small tables applies position deletes by row key
    (``exec/reading/position_keys.py``; by default only from 65 files under deletes), checked against
    the independent readers; ``test_reads.py`` covers the join by name."""
    monkeypatch.setattr(position_keys, "MIN_FILES", 1)


REPO = Path(__file__).resolve().parents[2]
UNPARTITIONED = Layout("unpartitioned", (), ("k",))


def _metadata(table) -> dict:  # type: ignore[no-untyped-def]
    return json.loads(Path(normalize_path(table.metadata_location)).read_text())


def _one_file_table(lake, rows: int = 40):  # type: ignore[no-untyped-def]
    data = [make_row(k) for k in range(rows)]
    table = lake.create_table("db.t", frame(lake.spark, data).coalesce(1), identifier=["k"], format_version=3)
    assert len(table.files().data) == 1
    return table, Oracle(UNPARTITIONED, data)


def test_v3_metadata_tracks_row_lineage(lake, java) -> None:  # type: ignore[no-untyped-def]
    table = lake.create_table(
        "db.t",
        frame(lake.spark, [make_row(k) for k in range(20)]),
        partition_by=["bucket(2, k)"],
        identifier=["k"],
        format_version=3,
    )
    table.append(frame(lake.spark, [make_row(k) for k in range(20, 25)]))
    rowops.merge(
        frame(lake.spark, [make_row(k, 1) for k in (1, 2, 30)]), table, on=["k"], strategy="position-delete"
    )
    meta = _metadata(table)
    assert meta["format-version"] == 3
    snapshots = meta["snapshots"]
    assert [s["first-row-id"] for s in snapshots][:2] == [0, 20]
    for before, after in itertools.pairwise(snapshots):
        assert after["first-row-id"] == before["first-row-id"] + before["added-rows"]
    assert meta["next-row-id"] == snapshots[-1]["first-row-id"] + snapshots[-1]["added-rows"]
    manifests = read_manifest_list(lake.catalog.io, snapshots[-1]["manifest-list"])
    ids = {m.manifest_path: manifest_first_row_id(m) for m in manifests}
    assert all((ids[m.manifest_path] is None) == (m.content == ManifestContent.DELETES) for m in manifests)
    assert len(set(ids.values()) - {None}) == sum(m.content == ManifestContent.DATA for m in manifests)
    expected = {k: make_row(k) for k in range(25)} | {k: make_row(k, 1) for k in (1, 2, 30)}
    assert_readers_agree(table, expected.values(), COLUMNS, java)


def test_two_deletes_on_one_file_leave_one_deletion_vector(lake, java) -> None:  # type: ignore[no-untyped-def]
    table, oracle = _one_file_table(lake)
    (data,) = table.files().data
    first = [make_row(k, 1) for k in range(0, 40, 4)]
    rowops.merge(frame(lake.spark, first), table, on=["k"], strategy="position-delete")
    rowops.delete(table, where="k % 6 = 1", strategy="position-delete")
    oracle.upsert(first)
    oracle.rows = {key: r for key, r in oracle.rows.items() if r[0] % 6 != 1}
    files = table.files()
    vectors = [d for d in files.position_deletes if d.referenced_file == data.path]
    assert len(vectors) == 1 and not files.equality_deletes
    (dv,) = vectors
    df = dv.data_file
    assert (df.content, df.file_format) == (DataFileContent.POSITION_DELETES, FileFormat.PUFFIN)
    assert referenced_data_file(df) == data.data_file.file_path
    # the union of both deletes' positions (row k sits at position k of the one file)
    deleted = sorted({k for k in range(0, 40, 4)} | {k for k in range(40) if k % 6 == 1})
    assert df.record_count == len(deleted)
    (read,) = deletion_vectors_from_puffin_file(PuffinFile(Path(dv.file_key).read_bytes()))
    assert read.referenced_data_file == data.data_file.file_path
    assert read.to_vector().to_pylist() == deleted
    offset, length = content_range(df) or (0, 0)
    assert (offset, length) != (0, 0) and offset + length <= df.file_size_in_bytes
    assert all(p.file_key.endswith(".puffin") for p in files.position_deletes)  # v3: no delete files
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_equality_deletes_and_copy_on_write_on_v3(lake, java) -> None:  # type: ignore[no-untyped-def]
    """v3 forbids new position delete *files*, not equality deletes; copy-on-write drops the DV."""
    table, oracle = _one_file_table(lake)
    rowops.merge(
        frame(lake.spark, [make_row(k, 1) for k in (1, 2)]), table, on=["k"], strategy="position-delete"
    )
    rowops.merge(
        frame(lake.spark, [make_row(k, 2) for k in (3, 4)]), table, on=["k"], strategy="equality-delete"
    )
    assert table.files().equality_deletes
    rowops.merge(
        frame(lake.spark, [make_row(k, 3) for k in (5, 1)]), table, on=["k"], strategy="copy-on-write"
    )
    oracle.upsert([make_row(k, 1) for k in (1, 2)] + [make_row(k, 2) for k in (3, 4)])
    oracle.upsert([make_row(k, 3) for k in (5, 1)])
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_compact_and_expire_on_v3(lake, java) -> None:  # type: ignore[no-untyped-def]
    table, oracle = _one_file_table(lake)
    for version, keys in ((1, range(0, 40, 3)), (2, range(1, 40, 5))):
        changes = [make_row(k, version) for k in keys]
        rowops.merge(frame(lake.spark, changes), table, on=["k"], strategy="position-delete")
        oracle.upsert(changes)
    old_vectors = [d.file_key for d in table.files().position_deletes]
    assert old_vectors and all(p.endswith(".puffin") for p in old_vectors)
    assert table.compact_position_deletes().snapshot_id is None  # one vector per file: nothing to merge
    table.compact(target_file_size=1 << 30)
    files = table.files()
    assert not files.position_deletes and len(files.data) == 1
    assert_readers_agree(table, oracle.values(), COLUMNS, java)
    table.expire_snapshots(older_than=timedelta(0), retain_last=1)
    assert not any(Path(p).exists() for p in old_vectors)
    table.remove_orphans(older_than=timedelta(0))
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_concurrent_vectors_for_one_file_conflict(lake, java) -> None:  # type: ignore[no-untyped-def]
    """Disjoint position deletes of one data file rebase on v2 (two delete files); on v3 a second
    deletion vector for the file is forbidden: the loser conflicts and leaves the lake unchanged."""
    table, oracle = _one_file_table(lake)
    stale = Pinned(table)
    first = [make_row(k, 1) for k in (10, 11)]
    rowops.merge(frame(lake.spark, first), table, on=["k"], strategy="position-delete")
    oracle.upsert(first)
    before = fingerprint(lake)
    with pytest.raises(CommitConflictError) as caught:
        rowops.merge(
            frame(lake.spark, [make_row(k, 2) for k in (2, 3)]), stale, on=["k"], strategy="position-delete"
        )
    assert caught.value.kind == ConflictKind.CONCURRENT_DELETE_READ and "deletion vector" in str(caught.value)
    assert fingerprint(lake) == before
    assert len(table.files().position_deletes) == 1
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_v3_table_created_and_changed_in_a_transaction(lake, java) -> None:  # type: ignore[no-untyped-def]
    rows = [make_row(k) for k in range(30)]
    with lake.transaction() as tx:
        t = tx.create_table("db.t", frame(lake.spark, rows).coalesce(1), identifier=["k"], format_version=3)
        rowops.merge(
            frame(lake.spark, [make_row(k, 1) for k in (3, 4)]), t, on=["k"], strategy="position-delete"
        )
        tx.delete("db.t", where="k = 7", strategy="position-delete")
    table = lake.table("db.t")
    assert table.metadata.format_version == 3
    (dv,) = table.files().position_deletes
    assert dv.record_count == 3 and dv.file_key.endswith(".puffin")
    expected = {r[0]: r for r in rows} | {k: make_row(k, 1) for k in (3, 4)}
    expected.pop(7)
    assert_readers_agree(table, expected.values(), COLUMNS, java)


def test_format_version_is_checked(lake) -> None:  # type: ignore[no-untyped-def]
    df = frame(lake.spark, [make_row(1)])
    message = assert_unchanged(
        lake, lambda: lake.create_table("db.t", df, format_version=4), InvalidInputError
    )
    assert "format_version" in message and "\nHelp: " in message


@pytest.fixture(scope="module")
def java_dv_table(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A v3 table written by Iceberg Java (runtime jar, its own JVM), rows k < 40, with its own
    deletion vectors of k % 5 = 0 and then k % 7 = 0: its current ``vN.metadata.json``."""
    work = tmp_path_factory.mktemp("java-dv")
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYSPARK_PYTHON": sys.executable}
    writer = str(REPO / "tests" / "spark" / "hadoop_catalog_writer.py")
    done = subprocess.run(
        [sys.executable, writer, "--v3-deletes", f"file:{work}/warehouse", "40", "dv"],
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_deletion_vectors_of_iceberg_java_are_read_and_merged(lake, java, request) -> None:  # type: ignore[no-untyped-def]
    if java is None:
        pytest.skip("needs Iceberg's Java runtime (ROWOPS_SKIP_JAVA is set)")
    table = lake.register_table("db.t", request.getfixturevalue("java_dv_table"))
    assert table.metadata.format_version == 3
    vectors = table.files().position_deletes
    assert vectors and all(d.data_file.file_format == FileFormat.PUFFIN for d in vectors)
    rows = {k: (k, f"v{k}", k % 7) for k in range(40) if k % 5 and k % 7}
    assert_readers_agree(table, rows.values(), ["k", "v", "n"], java)
    source = lake.spark.createDataFrame([(k, f"w{k}", 1) for k in (1, 2, 3, 41)], "k long, v string, n int")
    rowops.merge(source, table, on=["k"], strategy="position-delete")
    rows |= {k: (k, f"w{k}", 1) for k in (1, 2, 3, 41)}
    by_file: dict[str, int] = {}
    for d in table.files().position_deletes:
        by_file[d.referenced_file or ""] = by_file.get(d.referenced_file or "", 0) + 1
    assert set(by_file.values()) == {1}  # rowops merged its positions into Java's vectors
    assert_readers_agree(table, rows.values(), ["k", "v", "n"], java)
