"""Iceberg's standard snapshot summary keys (issue 46, part 4) with the values Iceberg Java's
``SnapshotSummary`` / ``SnapshotProducer`` give the same change.

The change of each snapshot is read by Iceberg Java itself: its ``entries`` metadata table as of the
snapshot (entries ADDED or DELETED by it) and its ``files`` table (the live files, for the ``total-*``
keys). From them the expected summary follows Java's rules: a change count only when above zero, a
deletion vector counted in ``added-dvs`` / ``removed-dvs`` with its blob's size, the ``total-*``
counts always, ``changed-partition-count`` the partitions of added and removed files.
"""

from __future__ import annotations

from typing import Any

import pytest

import rowops
from tests.spark.tables import written_in_every_encoding

pytestmark = pytest.mark.java
ROWOPS_KEYS = ("rowops.", "operation")
ADDED, DELETED = 1, 2
DATA, POSITION, EQUALITY = 0, 1, 2


def _size(f: dict[str, Any]) -> int:
    dv = f["file_format"] == "PUFFIN"
    return int(f["content_size_in_bytes"] if dv else f["file_size_in_bytes"])


def expected_summary(table: Any, java: Any, snapshot_id: int) -> dict[str, str]:
    """The standard keys Iceberg Java writes for ``snapshot_id``'s change, from Java's own reading."""
    location = table.metadata_location
    entries = java.read(f"{location}#entries", snapshot_id=snapshot_id).to_pylist()
    mine = [e for e in entries if e["snapshot_id"] == snapshot_id and e["status"] in (ADDED, DELETED)]
    counts: dict[str, int] = {}

    def count(key: str, value: int) -> None:
        counts[key] = counts.get(key, 0) + value

    specs = table.metadata.specs()
    partitions = set()
    for e in mine:
        f, added = e["data_file"], e["status"] == ADDED
        names = [p.name for p in specs[f["spec_id"]].fields]
        partitions.add(tuple((n, (f.get("partition") or {}).get(n)) for n in names))
        count("added-files-size" if added else "removed-files-size", _size(f))
        if f["content"] == DATA:
            count("added-data-files" if added else "deleted-data-files", 1)
            count("added-records" if added else "deleted-records", f["record_count"])
            continue
        count("added-delete-files" if added else "removed-delete-files", 1)
        kind = "position" if f["content"] == POSITION else "equality"
        count(f"{'added' if added else 'removed'}-{kind}-deletes", f["record_count"])
        if f["file_format"] == "PUFFIN":
            count("added-dvs" if added else "removed-dvs", 1)
        else:
            count(f"{'added' if added else 'removed'}-{kind}-delete-files", 1)
    summary = {k: str(v) for k, v in counts.items() if v > 0}
    summary["changed-partition-count"] = str(len(partitions))
    files = java.read(f"{location}#files", snapshot_id=snapshot_id).to_pylist()
    data = [f for f in files if f["content"] == DATA]
    summary |= {
        "total-records": str(sum(f["record_count"] for f in data)),
        "total-files-size": str(sum(_size(f) for f in files)),
        "total-data-files": str(len(data)),
        "total-delete-files": str(len(files) - len(data)),
        "total-position-deletes": str(sum(f["record_count"] for f in files if f["content"] == POSITION)),
        "total-equality-deletes": str(sum(f["record_count"] for f in files if f["content"] == EQUALITY)),
    }
    return summary


def assert_summaries_as_java(table: Any, java: Any) -> int:
    checked = 0
    for snapshot in table.snapshots():
        ours = {k: v for k, v in snapshot["summary"].items() if not k.startswith(ROWOPS_KEYS)}
        assert ours == expected_summary(table, java, snapshot["snapshot_id"]), snapshot["summary"]
        checked += 1
    return checked


def test_summaries_of_every_encoding_and_maintenance(lake, java) -> None:  # type: ignore[no-untyped-def]
    if java is None:
        pytest.skip("needs Iceberg's Java reader")
    spark = lake.spark
    table = written_in_every_encoding(lake)
    rowops.update(table, {"s": "'u'"}, where="k < 4", strategy="copy-on-write")
    with lake.transaction() as tx:  # two statements, one snapshot
        tx.delete("db.t", "k = 6", "position-delete")
        tx.append("db.t", spark.range(30, 33).selectExpr("id AS k", "'n' AS s"))
    table.compact_position_deletes()
    table.convert_equality_deletes()
    table.compact()
    assert assert_summaries_as_java(table, java) >= 8


def test_summaries_with_deletion_vectors(lake, java) -> None:  # type: ignore[no-untyped-def]
    if java is None:
        pytest.skip("needs Iceberg's Java reader")
    spark = lake.spark
    rows = spark.range(20).selectExpr("id AS k", "CAST(id AS STRING) AS s").coalesce(1)
    table = lake.create_table("db.v3", rows, identifier=["k"], format_version=3)
    rowops.delete(table, where="k < 3", strategy="position-delete")
    rowops.delete(table, where="k = 7", strategy="position-delete")  # replaces the vector: removed-dvs
    assert "removed-dvs" in table.snapshots()[-1]["summary"]
    assert assert_summaries_as_java(table, java) == 3
