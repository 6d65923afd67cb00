"""Leases (issue 42 item 3): what a running transaction or a pinned view reads, in this process or
another, is kept from ``expire_snapshots`` until it ends; then the next expiry removes it.

The expiries run through other handles (``cold``) with ``older_than=0``: the shortest age there is.
The reader in another process is plain Python (the catalog layer and PyIceberg, no Spark): what it
reads after the expiry is read by PyIceberg, an independent reader, from the files on disk.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path
from typing import Any

import rowops
from rowops.catalog.leases import LEASE_PREFIX, Holder, live_leases
from rowops.catalog.log import LakeLog
from tests.readers import assert_readers_agree
from tests.spark.tables import COLUMNS, frame
from tests.spark.test_retention_rules import cold, rows

NOW = timedelta(0)
ROOT = Path(__file__).resolve().parents[2]


def _create(lake: Any) -> None:
    lake.create_table("db.t", frame(lake.spark, rows(range(4))), identifier=["k"])


def _rewrite(lake: Any) -> None:
    """Every row rewritten (copy-on-write): the first snapshot's data file is live only there."""
    rowops.merge(
        frame(lake.spark, rows(range(4), 1)), cold(lake).table("db.t"), on=["k"], strategy="copy-on-write"
    )


def test_running_transaction_keeps_what_it_reads(lake) -> None:  # type: ignore[no-untyped-def]
    _create(lake)
    tx = lake.begin()
    assert sorted(r[0] for r in tx.table("db.t").to_df().collect()) == [0, 1, 2, 3]
    _rewrite(lake)
    assert cold(lake).table("db.t").expire_snapshots(older_than=NOW).snapshots_expired == 0
    assert_readers_agree(tx.table("db.t"), rows(range(4)), COLUMNS, None)  # its files are all there
    tx.rollback()
    assert cold(lake).table("db.t").expire_snapshots(older_than=NOW).snapshots_expired == 1
    assert_readers_agree(cold(lake).table("db.t"), rows(range(4), 1), COLUMNS, None)


def test_pinned_view_keeps_what_it_reads_until_closed(lake) -> None:  # type: ignore[no-untyped-def]
    _create(lake)
    past = lake.at(version=lake.version)
    _rewrite(lake)
    assert cold(lake).table("db.t").expire_snapshots(older_than=NOW).snapshots_expired == 0
    assert_readers_agree(past.table("db.t"), rows(range(4)), COLUMNS, None)
    past.close()
    assert cold(lake).table("db.t").expire_snapshots(older_than=NOW).snapshots_expired == 1


READER = textwrap.dedent(
    """
    import sys
    from pyiceberg.table import StaticTable
    from rowops.catalog.tables import TableCatalog
    from rowops.catalog.transactions import LakeTransaction
    from rowops.request.identifiers import TableIdentifier

    tx = LakeTransaction(TableCatalog(sys.argv[1]))
    loaded = tx.load(TableIdentifier.parse("db.t"))
    print("ready", flush=True)
    sys.stdin.readline()  # the other process expires meanwhile
    keys = StaticTable.from_metadata(loaded.metadata_location).scan().to_arrow().column("k").to_pylist()
    print(sorted(keys), flush=True)
    """
)


def test_transaction_of_another_process_keeps_what_it_reads(lake) -> None:  # type: ignore[no-untyped-def]
    _create(lake)
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, lake.location],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    try:
        assert reader.stdout is not None and reader.stdin is not None
        assert reader.stdout.readline().strip() == "ready"
        _rewrite(lake)
        assert cold(lake).table("db.t").expire_snapshots(older_than=NOW).snapshots_expired == 0
        reader.stdin.write("go\n")
        reader.stdin.flush()
        assert reader.stdout.readline().strip() == "[0, 1, 2, 3]"
        assert reader.wait(timeout=60) == 0
    finally:
        reader.kill()
    # its transaction never ended, but the process exited: its lease went with it (a process killed
    # outright leaves its lease to lapse: test_lapsed_leases_keep_nothing_and_are_swept)
    assert not LakeLog(lake.location).storage.list(LEASE_PREFIX)
    assert cold(lake).table("db.t").expire_snapshots(older_than=NOW).snapshots_expired == 1


def test_lapsed_leases_keep_nothing_and_are_swept(tmp_path: Path) -> None:
    log = LakeLog(tmp_path)
    held = Holder(log, 3)
    lapsed = Holder(log, 4, ttl_ms=-1)  # written already lapsed
    assert live_leases(log).versions == {3}
    assert live_leases(log, now_ms=lapsed.written_ms + 2 * 24 * 3600 * 1000).lapsed == (
        tuple(sorted([held.key, lapsed.key]))
    )
    held.release()
    held.release()  # idempotent
    held.touch()  # a released lease is not written again
    assert live_leases(log).versions == frozenset()
