"""Workers that do not share the driver's disk: a clear error and an unchanged lake, never a silent
empty commit or a wrong result; with the lake on S3 no shared disk is needed at all.

The workers of :func:`private_cluster` run in their own user and mount namespaces (``unshare -rm``)
with a private tmpfs mounted over the lake's parent directory: their executors see an empty directory
where the driver sees the lake, and whatever they write there the driver never sees (as on a cluster
whose machines each have their own local disk).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import rowops
from rowops import errors
from tests.cluster.conftest import WORKERS, LakeTarget, Sessions
from tests.cluster.standalone import StandaloneCluster
from tests.readers import assert_readers_agree
from tests.spark.tables import COLUMNS, LAYOUTS, Oracle, fingerprint, frame, make_row

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@pytest.fixture(scope="module")
def unshared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory the private workers see as an empty tmpfs of their own."""
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs none /mnt"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"unshare -rm with a tmpfs mount is not allowed here: {probe.stderr!r}")
    return tmp_path_factory.mktemp("unshared")


@pytest.fixture(scope="module")
def private_cluster(
    tmp_path_factory: pytest.TempPathFactory, sessions: Sessions, unshared: Path
) -> Iterator[StandaloneCluster]:
    """A master and two workers whose executors see a private tmpfs at :func:`unshared`."""
    cluster = StandaloneCluster(tmp_path_factory.mktemp("private-cluster"))
    hide = ["unshare", "-rm", "sh", "-c", 'mount -t tmpfs none "$0" && exec "$@"', str(unshared)]
    try:
        cluster.start_master()
        for _ in range(WORKERS):
            cluster.start_worker(prefix=hide)
        cluster.wait_for_workers()
        yield cluster
    finally:
        sessions.release(cluster)
        cluster.stop()


def _rows(keys: range) -> list[tuple[object, ...]]:
    return [make_row(k) for k in keys]


def test_reading_files_the_executors_cannot_see_is_an_error(  # type: ignore[no-untyped-def]
    sessions, shared_cluster, private_cluster, unshared
) -> None:
    target = LakeTarget(str(unshared / "read"))
    shared = target.open(sessions.use(shared_cluster))
    created = shared.create_table(
        "db.t", frame(shared.spark, _rows(range(50))), partition_by=["bucket(4, k)"], identifier=["k"]
    )
    # the copy-on-write through the join reads the target first; rewritten by key, it writes the
    # source rows first, and that write is the error (below)
    created.set_properties(**{"rowops.rewrite.by-key.enabled": "false"})
    before = fingerprint(shared.root)

    lake = target.open(sessions.use(private_cluster))
    table = lake.table("db.t")
    source = frame(lake.spark, [make_row(k, 1) for k in range(0, 80, 2)])
    for strategy in ("copy-on-write", "position-delete"):
        with pytest.raises(errors.MissingFileError) as caught:
            rowops.merge(source, table, on=["k"], strategy=strategy)
        message = str(caught.value)
        print(f"{strategy}: {type(caught.value).__name__}: {message}")
        assert "does not exist" in message and "same path as the driver" in message, message
        assert fingerprint(lake.root) == before, "a failed MERGE changed the lake"
    with pytest.raises(Exception, match=r"(?i)(not exist|FileNotFound)"):  # a plain read fails in Spark
        table.to_df().collect()
    assert fingerprint(lake.root) == before
    shared.table("db.t").set_properties(**{"rowops.rewrite.by-key.enabled": "true"})
    before = fingerprint(shared.root)
    with pytest.raises(errors.WriteVerificationError, match="executors wrote where the driver cannot read"):
        rowops.merge(source, lake.table("db.t"), on=["k"], strategy="copy-on-write")
    assert fingerprint(lake.root) == before, "a failed MERGE changed the lake"


def test_a_write_the_driver_cannot_see_is_an_error_not_an_empty_commit(  # type: ignore[no-untyped-def]
    sessions, private_cluster, unshared
) -> None:
    lake = LakeTarget(str(unshared / "write")).open(sessions.use(private_cluster))
    before = fingerprint(lake.root)
    with pytest.raises(errors.WriteVerificationError) as caught:
        lake.create_table("db.t", frame(lake.spark, _rows(range(50))), identifier=["k"])
    message = str(caught.value)
    assert "Spark wrote 50 rows" in message and "hold 0" in message
    assert "shared" in message and "Help:" in message
    assert fingerprint(lake.root) == before, "the failed write changed the lake"
    with pytest.raises(errors.RowOpsError, match="does not exist"):
        lake.table("db.t")


def test_a_lake_on_s3_needs_no_shared_disk(sessions, private_cluster, cluster_s3) -> None:  # type: ignore[no-untyped-def]
    """Driver and executors share nothing but the S3 server: every operation works."""
    lake = LakeTarget(f"s3://{cluster_s3.new_bucket()}/lake", cluster_s3.options).open(
        sessions.use(private_cluster)
    )
    rows = _rows(range(50))
    table = lake.create_table(
        "db.t", frame(lake.spark, rows), partition_by=["bucket(4, k)"], identifier=["k"]
    )
    oracle = Oracle(LAYOUTS[2], rows)
    for version, strategy in enumerate(("copy-on-write", "position-delete", "equality-delete"), start=1):
        changes = [make_row(k, version) for k in range(version * 10, version * 10 + 30)]
        rowops.merge(frame(lake.spark, changes), table, on=["k"], strategy=strategy)
        oracle.upsert(changes)
    rowops.update(table, {"n": "n + 100"}, where="k < 5", strategy="position-delete")
    rowops.delete(table, where="k >= 70", strategy="copy-on-write")
    expected = [(*r[:-1], r[-1] + 100) if r[0] < 5 else r for r in oracle.values() if r[0] < 70]
    assert_readers_agree(table, expected, COLUMNS, None)
