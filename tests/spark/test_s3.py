"""Lakes on S3-compatible object storage: the log's put-if-absent, races, credentials, cleanup.

Everything runs against a real S3 server on loopback (moto, started by the ``s3`` fixture): boto3's
conditional ``PutObject`` for the log, pyarrow's S3 file system for every other read and write, and
Spark through Hadoop's S3A connector. The behaviour and concurrency suites also run on S3 lakes
(``lake`` parametrized in ``test_behaviour.py`` and ``test_concurrency.py``, marker ``s3``, ``make
test-s3``); this module is the quick S3 check that ``make test`` runs.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from datetime import timedelta

import botocore.exceptions
import pytest

import rowops
from rowops.catalog.log import LakeLog
from rowops.catalog.object_store import PROBE_PREFIX, S3Storage, check_put_if_absent
from rowops.catalog.storage import AlreadyExists
from rowops.catalog.trie import TableEntry
from rowops.errors import (
    CommitStateUnknownError,
    NoSuchLakeError,
    PutIfAbsentUnsupportedError,
    StorageAccessError,
)
from rowops.meta.fileio import make_io
from tests.readers import assert_readers_agree
from tests.spark.tables import COLUMNS, LAYOUTS, Oracle, frame, make_row
from tests.spark.test_change_feed import Rows
from tests.spark.test_change_feed import diff as state_diff
from tests.spark.test_change_feed import feed as feed_by_commit
from tests.spark.test_change_feed import frame as feed_frame


def storage(s3, root: str | None = None) -> S3Storage:  # type: ignore[no-untyped-def]
    root = root or f"s3://{s3.new_bucket()}/lake"
    return S3Storage(root, make_io(s3.options), s3.options)


def test_put_if_absent_refuses_an_existing_key(s3) -> None:  # type: ignore[no-untyped-def]
    store = storage(s3)
    store.put_if_absent("_rowops/log/1.json", b"first")
    with pytest.raises(AlreadyExists):
        store.put_if_absent("_rowops/log/1.json", b"second")
    assert store.read("_rowops/log/1.json") == b"first"
    assert store.list("_rowops/log/") == ["_rowops/log/1.json"]


class _IgnoresIfNoneMatch(S3Storage):
    """A real S3 client that sends its conditional puts without the header, as a store that ignores
    ``If-None-Match: *`` (older MinIO, some Ceph releases) treats them."""

    def put_if_absent(self, key: str, data: bytes) -> None:
        self._client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)


def test_a_store_ignoring_if_none_match_is_refused_at_open(s3) -> None:  # type: ignore[no-untyped-def]
    root = f"s3://{s3.new_bucket()}/lake"
    broken = _IgnoresIfNoneMatch(root, make_io(s3.options), s3.options)
    with pytest.raises(PutIfAbsentUnsupportedError, match="If-None-Match"):
        check_put_if_absent(broken, root)
    assert broken.list(PROBE_PREFIX) == []  # the probe key is deleted
    lake = rowops.Lakehouse(root, storage_options=s3.options)  # moto honours the header: it opens
    assert lake.version == 0 and storage(s3, root).list(PROBE_PREFIX) == []


def test_racing_puts_exactly_one_wins(s3) -> None:  # type: ignore[no-untyped-def]
    store = storage(s3)
    outcomes: list[str] = []
    barrier = threading.Barrier(8)

    def put(i: int) -> None:
        barrier.wait()
        try:
            store.put_if_absent("k", str(i).encode())
            outcomes.append(f"won-{i}")
        except AlreadyExists:
            outcomes.append("lost")

    threads = [threading.Thread(target=put, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [o for o in outcomes if o.startswith("won")]
    assert len(winners) == 1 and outcomes.count("lost") == 7
    assert store.read("k") == winners[0].split("-")[1].encode()


def test_concurrent_log_commits_are_serialized(s3) -> None:  # type: ignore[no-untyped-def]
    """Threads commit through the real LakeLog on S3; every commit lands exactly once, in order."""
    root = f"s3://{s3.new_bucket()}/lake"
    per_thread, threads = 5, 4

    def commit_all(worker: int) -> None:
        log = LakeLog(root, storage(s3, root))
        for i in range(per_thread):
            while True:
                base = log.latest()
                entry = TableEntry(f"s3://x/{worker}-{i}.metadata.json", str(uuid.uuid4()))
                txn = {"id": f"{worker}-{i}", "commits": []}
                try:
                    log.commit(base, {f"db.t{worker}": entry}, txn)
                    break
                except rowops.catalog.log.VersionTaken:
                    continue

    failures: list[BaseException] = []

    def run(worker: int) -> None:
        try:
            commit_all(worker)
        except BaseException as exc:  # a thread's error must fail the test, not only warn
            failures.append(exc)

    workers = [threading.Thread(target=run, args=(w,)) for w in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert not failures, failures
    log = LakeLog(root, storage(s3, root))
    assert log.versions() == list(range(1, per_thread * threads + 1))
    ids = [log.read(v).transaction["id"] for v in log.versions()]
    assert sorted(ids) == sorted(f"{w}-{i}" for w in range(threads) for i in range(per_thread))
    for w in range(threads):  # each thread's commits in its own order
        mine = [i for i in ids if i.startswith(f"{w}-")]
        assert mine == [f"{w}-{i}" for i in range(per_thread)]


def test_a_read_broken_off_mid_stream_is_sent_again(s3, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A GET whose body breaks off (as moto's did once under CI load: ``INTERNAL_FAILURE ... Failed to
    flush response stream``) is retried; a missing key is not."""
    store = storage(s3)
    store.put_if_absent("_rowops/log/1.json", b"first")
    real = rowops.catalog.object_store.filesystem
    broken: list[str] = []

    class BreaksOnce:
        def __init__(self, fs: object) -> None:
            self.fs = fs

        def open_input_stream(self, path: str) -> object:
            if not broken:
                broken.append(path)
                raise OSError("AWS Error INTERNAL_FAILURE during GetObject operation: Failed to flush")
            return self.fs.open_input_stream(path)  # type: ignore[attr-defined]

    def breaking(io: object, key: str) -> tuple[object, str]:
        fs, path = real(io, key)  # type: ignore[arg-type]
        return BreaksOnce(fs), path

    monkeypatch.setattr(rowops.catalog.object_store, "filesystem", breaking)
    assert store.read("_rowops/log/1.json") == b"first" and len(broken) == 1
    with pytest.raises(FileNotFoundError):
        store.read("_rowops/log/2.json")


def test_own_version_after_an_ambiguous_put_counts_as_committed(s3) -> None:  # type: ignore[no-untyped-def]
    """A retried PUT whose first attempt landed answers 412: the writer reads the version back."""
    root = f"s3://{s3.new_bucket()}/lake"
    log = LakeLog(root, storage(s3, root))
    txn = {"id": "mine", "commits": []}
    changes = {"db.t": TableEntry("s3://x/m.json", "u")}
    landed = LakeLog(root, storage(s3, root)).commit(log.latest(), changes, txn)  # the "lost" response
    again = log.commit(rowops.catalog.log.EMPTY, changes, txn)  # the retry sees 412 on version 1
    assert again == landed and log.latest().version == 1
    with pytest.raises(rowops.catalog.log.VersionTaken):  # someone else's version 1: a lost race
        log.commit(rowops.catalog.log.EMPTY, changes, {"id": "other", "commits": []})


def test_failed_response_after_the_put_is_commit_state_unknown(s3) -> None:  # type: ignore[no-untyped-def]
    """The PUT lands but its response is lost: the outcome is unknown and nothing is removed."""
    root = f"s3://{s3.new_bucket()}/lake"
    store = storage(s3, root)

    def lose_response(**_: object) -> None:
        raise botocore.exceptions.ReadTimeoutError(endpoint_url=s3.endpoint)

    store._client.meta.events.register("after-call.s3.PutObject", lose_response)
    log = LakeLog(root, store)
    with pytest.raises(CommitStateUnknownError):
        log.commit(log.latest(), {"db.t": TableEntry("s3://x/m.json", "u")}, {"id": "t", "commits": []})
    assert LakeLog(root, storage(s3, root)).latest().version == 1  # it did land, and stays


def test_table_on_s3_reads_back_everywhere_and_keeps_credentials_out(s3_lake, s3, java) -> None:  # type: ignore[no-untyped-def]
    rows = [make_row(k) for k in range(30)]
    table = s3_lake.create_table("db.t", frame(s3_lake.spark, rows), identifier=["k"])
    source = frame(s3_lake.spark, [make_row(k, 1) for k in range(20, 40)])
    rowops.merge(source, table, on=["k"], strategy="position-delete")
    oracle = Oracle(LAYOUTS[0], rows)
    oracle.upsert([make_row(k, 1) for k in range(20, 40)])
    assert table.metadata_location.startswith("s3://")
    assert_readers_agree(table, oracle.values(), COLUMNS, java)
    secret = s3.options["s3.secret-access-key"]
    bucket = s3_lake.location[len("s3://") :].split("/")[0]
    client = s3.client()
    for key in s3.keys(bucket):
        assert secret.encode() not in client.get_object(Bucket=bucket, Key=key)["Body"].read(), key
    assert secret not in repr(s3_lake) and secret not in repr(table)
    assert rowops.Lakehouse(
        "s3a://" + s3_lake.location[5:], spark=s3_lake.spark, storage_options=s3.options
    ).version


def test_cleanup_removes_orphans_on_s3(s3_lake, s3) -> None:  # type: ignore[no-untyped-def]
    table = s3_lake.create_table(
        "db.t", frame(s3_lake.spark, [make_row(k) for k in range(10)]), identifier=["k"]
    )
    bucket, prefix = s3_lake.location[len("s3://") :].split("/", 1)
    orphan = f"{prefix}/db/t/data/19700101-dead/data-1/part-0.parquet"
    s3.client().put_object(Bucket=bucket, Key=orphan, Body=b"not referenced")
    before = set(s3.keys(bucket))
    result = s3_lake.cleanup(older_than=timedelta(0))
    assert "db/t/data/19700101-dead/data-1/part-0.parquet" in result.removed
    after = set(s3.keys(bucket))
    assert orphan not in after and all(k.endswith("_SUCCESS") for k in before - after - {orphan})
    assert table.to_df().count() == 10


def test_missing_bucket_or_bad_credentials_are_clear_errors(s3, spark) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(StorageAccessError, match="does not exist") as caught:
        rowops.Lakehouse("s3://no-such-bucket-here/lake", spark=spark, storage_options=s3.options)
    assert "\nHelp: " in str(caught.value)
    wrong = {**s3.options, "s3.endpoint": "http://127.0.0.1:9"}  # nothing listens there
    with pytest.raises(StorageAccessError, match="cannot be reached") as caught:
        rowops.Lakehouse(f"s3://{s3.new_bucket()}/lake", spark=spark, storage_options=wrong)
    assert s3.options["s3.secret-access-key"] not in str(caught.value)


def test_a_missing_s3_lake_is_not_opened_without_create(s3, s3_lake) -> None:  # type: ignore[no-untyped-def]
    """``create=False`` (every ``rowops`` command but ``init``): a prefix holding nothing is no lake."""
    bucket = s3_lake.location.split("/")[2]
    with pytest.raises(NoSuchLakeError, match="no lake at s3://"):
        rowops.Lakehouse(f"s3://{bucket}/typo", spark=s3_lake.spark, storage_options=s3.options, create=False)
    s3_lake.create_table("db.t", frame(s3_lake.spark, [make_row(1)]))
    opened = rowops.Lakehouse(s3_lake.location, spark=s3_lake.spark, storage_options=s3.options, create=False)
    assert opened.list_tables() == ["db.t"]


@pytest.mark.parametrize("concurrent", ["position-delete", "equality-delete"])
def test_row_level_rebase_reads_concurrent_deletes_through_the_lakes_store(  # type: ignore[no-untyped-def]
    s3_lake, concurrent
) -> None:
    """A transaction's MERGE of key 2 loses the race to a MERGE of keys 1 and 3 in the same data file:
    the rebase compares rows, reading the concurrent delete file (positions, or the keys of an equality
    delete whose bounds cover 2) through the lake's FileIO, with the S3 server's endpoint and credentials
    (pyarrow's own S3 resolution would ask AWS), and commits both."""
    rows = [make_row(k) for k in range(10)]
    s3_lake.create_table("db.t", frame(s3_lake.spark, rows).coalesce(1), identifier=["k"])
    with s3_lake.transaction(isolation="snapshot") as tx:
        rowops.merge(
            frame(s3_lake.spark, [make_row(2, 1)]), tx.table("db.t"), on=["k"], strategy="position-delete"
        )
        theirs = [make_row(1, 2), make_row(3, 2)]
        rowops.merge(
            frame(s3_lake.spark, theirs).coalesce(1), s3_lake.table("db.t"), on=["k"], strategy=concurrent
        )
    oracle = Oracle(LAYOUTS[0], rows)
    oracle.upsert([make_row(2, 1), *theirs])
    assert_readers_agree(s3_lake.table("db.t"), oracle.values(), COLUMNS, None)


@pytest.mark.s3  # make test-s3 (the Connect smoke's feed also reads an S3 lake)
def test_change_feed_of_every_encoding_on_s3(s3_lake) -> None:  # type: ignore[no-untyped-def]
    """``table.changes()`` and ``lake.changes()`` on an S3 lake: a MERGE in each encoding and a rollback,
    each commit's feed the difference of the model's states (delete files and data read through S3A)."""
    spark = s3_lake.spark
    state: Rows = {k: (f"v{k}", k % 2) for k in range(1, 9)}
    table = s3_lake.create_table("db.t", feed_frame(spark, state), identifier=["k"])
    states = {s3_lake.version: dict(state)}
    for strategy, k in [("copy-on-write", 1), ("position-delete", 2), ("equality-delete", 3)]:
        changed = {k: (f"new{k}", 0), 10 + k: ("added", 1)}
        rowops.merge(feed_frame(spark, changed), table, on=["k"], strategy=strategy)
        state.update(changed)
        states[s3_lake.version] = dict(state)
    versions_merged = sorted(states)[1:]
    table.rollback_to(table.snapshots()[1]["snapshot_id"])  # back to after the copy-on-write merge
    states[s3_lake.version] = dict(states[versions_merged[0]])
    versions = sorted(states)
    expected = {v: state_diff(states[p], states[v]) for p, v in itertools.pairwise(versions)}
    assert feed_by_commit(table.changes(start=versions[0])) == expected
    whole = s3_lake.changes(start=versions[0])
    assert list(whole) == ["db.t"] and feed_by_commit(whole["db.t"]) == expected
