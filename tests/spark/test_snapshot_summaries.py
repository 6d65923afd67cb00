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
ROWOPS_KEYS = ("rowops.", "operation", "spark.merge-into.")  # the last: Spark 4.1 + Iceberg only
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


def expected_manifest_counts(table: Any, java: Any, snapshot: dict[str, Any]) -> dict[str, str]:
    """``BaseRewriteManifests``' keys of a manifest rewrite, from Java's ``manifests`` table of it and
    of its parent: created (added by it), kept, replaced (the parent's, gone), and the live entries of
    the replaced ones."""
    location, snapshot_id = table.metadata_location, snapshot["snapshot_id"]
    after = java.read(f"{location}#manifests", snapshot_id=snapshot_id).to_pylist()
    before = java.read(f"{location}#manifests", snapshot_id=snapshot["parent_id"]).to_pylist()
    paths = {m["path"] for m in after}
    replaced = [m for m in before if m["path"] not in paths]
    created = sum(m["added_snapshot_id"] == snapshot_id for m in after)
    live = ("added_data_files_count", "existing_data_files_count", "added_delete_files_count")
    entries = sum(m[k] for m in replaced for k in (*live, "existing_delete_files_count"))
    return {
        "manifests-created": str(created),
        "manifests-kept": str(len(after) - created),
        "manifests-replaced": str(len(replaced)),
        "entries-processed": str(entries),
    }


def assert_summaries_as_java(table: Any, java: Any) -> int:
    checked = 0
    for snapshot in table.snapshots():
        ours = {k: v for k, v in snapshot["summary"].items() if not k.startswith(ROWOPS_KEYS)}
        expected = expected_summary(table, java, snapshot["snapshot_id"])
        if snapshot["summary"].get("rowops.operation") == "rewrite_manifests":
            expected |= expected_manifest_counts(table, java, snapshot)
        assert ours == expected, snapshot["summary"]
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
    table.rewrite_manifests()
    assert "manifests-replaced" in table.snapshots()[-1]["summary"]
    assert assert_summaries_as_java(table, java) >= 9


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


def test_merge_row_counts_under_spark_41_keys(lake) -> None:  # type: ignore[no-untyped-def]
    """A MERGE with every kind of clause writes Spark 4.1's ``MergeSummary`` under the keys Iceberg's
    Spark 4.1 integration uses, with the counts Iceberg's ``TestMergeMetrics`` expects: copied rows are
    the unchanged rows of rewritten files (copy-on-write) or none (position deletes). Equality deletes
    never learn which keys existed and write none of the keys."""
    spark = lake.spark
    target = spark.range(100).selectExpr("id AS k", "'t' AS s").coalesce(1)  # one data file
    source = spark.createDataFrame([(k, "s") for k in (0, 1, 2, 3, 4, 200, 201)], "k long, s string")
    expected = {
        "inserted": 2,  # 200, 201
        "matched-updated": 3,  # 2, 3, 4
        "matched-deleted": 2,  # 0, 1
        "not-matched-by-source-updated": 1,  # 7
        "not-matched-by-source-deleted": 2,  # 8, 9
        "updated": 4,
        "deleted": 4,
    }
    for strategy, copied in (("copy-on-write", 92), ("position-delete", 0), ("equality-delete", None)):
        name = f"db.{strategy.replace('-', '_')}"
        table = lake.create_table(name, target, identifier=["k"])
        if strategy == "equality-delete":
            rowops.merge(source, table, on=["k"], strategy=strategy)
        else:
            (
                table.merge(source, on=["k"])
                .when_matched("t.k < 2")
                .delete()
                .when_matched()
                .update_all()
                .when_not_matched()
                .insert_all()
                .when_not_matched_by_source("t.k IN (8, 9)")
                .delete()
                .when_not_matched_by_source("t.k = 7")
                .update({"s": "'gone'"})
                .execute(strategy)
            )
        summary = table.snapshots()[-1]["summary"]
        merge_keys = {
            k.removeprefix("spark.merge-into.num-target-rows-"): int(v)
            for k, v in summary.items()
            if k.startswith("spark.merge-into.")
        }
        if copied is None:
            assert merge_keys == {}, summary
        else:
            assert merge_keys == expected | {"copied": copied}, (strategy, sorted(summary.items()))
        # table.history(): Delta's DESCRIBE HISTORY, newest first, the same counts as operationMetrics
        merge, create = table.history().collect()
        assert (merge["operation"], merge["version"], merge["parent_id"]) == (
            "MERGE",
            2,
            create["snapshot_id"],
        )
        assert dict(merge["operationParameters"]) == {"strategy": strategy} and not merge["isBlindAppend"]
        metrics = dict(merge["operationMetrics"])
        assert metrics["numOutputRows"] == summary["added-records"]
        assert metrics["numAddedFiles"] == summary["added-data-files"]
        if copied is not None:
            assert metrics["numTargetRowsCopied"] == str(copied) and metrics["numTargetRowsInserted"] == "2"
        assert dict(merge["summary"]) == summary
        assert create["isBlindAppend"] and create["version"] == 1 and create["parent_id"] is None
