"""What ``lake.cleanup()`` and ``table.remove_orphans()`` may delete (issue 42 item 4).

Only files below the ``data/`` and ``metadata/`` folders of tables the lake itself created (any lake
version ever held them), never another catalog's pointer files (``version-hint.text``), never a
folder the lake never owned (an unregistered table, a landing folder, a backup copy), and nothing in
the location of a table registered from another catalog. Foreign files are planted three days and
more old, the age at which cleanup removes orphans.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from typer.testing import CliRunner

import rowops
from rowops.cli import app
from rowops.errors import ForeignFilesError
from rowops.meta.paths import normalize_path
from tests.spark.tables import fingerprint

OLD = time.time() - 4 * 24 * 3600


def _plant(path: Path, text: str = "foreign") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (OLD, OLD))
    return path


def _age_everything(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (OLD, OLD))


def _table(lake: rowops.Lakehouse, name: str = "db.t") -> rowops.Table:
    df = lake.spark.createDataFrame([(1, "a"), (2, "b")], "k long, v string")
    table = lake.create_table(name, df, identifier=["k"])
    table.update({"v": "'c'"}, where="k = 2", strategy="copy-on-write")
    return table


def _no_sidecars(paths: tuple[str, ...]) -> list[str]:
    """``paths`` without Spark's ``_SUCCESS`` and ``.crc`` files (orphans too: no manifest lists them)."""
    return sorted(p for p in paths if Path(p).name != "_SUCCESS" and not p.endswith(".crc"))


def _rows(lake: rowops.Lakehouse, name: str) -> list[tuple[object, ...]]:
    cold = rowops.Lakehouse(lake.location, spark=lake.spark)  # no metadata cache of the writer
    return sorted(tuple(r) for r in cold.table(name).to_df().collect())


def test_cleanup_deletes_only_orphans_of_the_lakes_own_tables(lake: rowops.Lakehouse) -> None:
    _table(lake)
    root = lake.root
    foreign = [
        _plant(root / "other" / "t" / "data" / "00000-0-x.parquet"),  # an unregistered table
        _plant(root / "other" / "t" / "metadata" / "v1.metadata.json", "{}"),
        _plant(root / "other" / "t" / "metadata" / "version-hint.text", "1"),
        _plant(root / "landing" / "data" / "batch.csv"),  # a landing folder
        _plant(root / "backup" / "db" / "t" / "metadata" / "snap-1.avro"),  # a backup copy
        _plant(root / "db" / "t" / "metadata" / "version-hint.text", "1"),  # another catalog's pointer
        _plant(root / "db" / "t" / "notes" / "data" / "readme.txt"),  # beside the table's folders
    ]
    orphans = [
        _plant(root / "db" / "t" / "data" / "crashed" / "part-0.parquet"),
        _plant(root / "db" / "t" / "metadata" / "00009-lost.metadata.json", "{}"),
    ]
    _age_everything(root / "db" / "t")  # committed files old too: they stay because referenced
    before = fingerprint(root)
    planned = lake.cleanup(dry_run=True)
    assert planned.dry_run and _no_sidecars(planned.removed) == sorted(
        str(p.relative_to(root)) for p in orphans
    )
    assert fingerprint(root) == before  # a dry run deletes nothing
    done = lake.cleanup()
    assert sorted(done.removed) == sorted(planned.removed) and not done.dry_run
    assert all(p.exists() for p in foreign) and not any(p.exists() for p in orphans)
    assert _rows(lake, "db.t") == [(1, "a"), (2, "c")]
    assert rowops.Lakehouse(lake.location, spark=lake.spark).cleanup().removed == ()


def test_remove_orphans_dry_run_lists_and_keeps(lake: rowops.Lakehouse) -> None:
    table = _table(lake)
    orphan = _plant(lake.root / "db" / "t" / "data" / "crashed" / "part-0.parquet")
    hint = _plant(lake.root / "db" / "t" / "metadata" / "version-hint.text", "1")
    before = fingerprint(lake.root)
    planned = table.remove_orphans(older_than=timedelta(0), dry_run=True)
    assert planned.dry_run and [Path(p).name for p in _no_sidecars(planned.paths)] == ["part-0.parquet"]
    assert fingerprint(lake.root) == before
    done = table.remove_orphans(older_than=timedelta(0))
    assert done.paths == planned.paths and not orphan.exists() and hint.exists()
    assert _rows(lake, "db.t") == [(1, "a"), (2, "c")]


def _foreign_table(tmp_path: Path) -> tuple[str, Path]:
    """A table of another catalog (PyIceberg's SQL catalog) with a Hadoop-style ``version-hint.text``."""
    catalog = SqlCatalog("other", uri=f"sqlite:///{tmp_path}/other.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("src")
    data = pa.table({"k": pa.array([1, 2], pa.int64()), "v": pa.array(["a", "b"])})
    table = catalog.create_table("src.t", data.schema)
    table.append(data)
    location = Path(table.metadata.location.removeprefix("file://"))
    (location / "metadata" / "version-hint.text").write_text("2")
    return table.metadata_location, location


def test_registered_tables_are_not_the_lakes_to_clean(lake: rowops.Lakehouse, tmp_path: Path) -> None:
    metadata_location, location = _foreign_table(tmp_path)
    table = lake.register_table("db.r", metadata_location)
    table.update({"v": "'c'"}, where="k = 2", strategy="copy-on-write")
    _plant(location / "data" / "other-writer-in-flight.parquet")  # the other catalog's, unreferenced here
    _age_everything(location)
    before = fingerprint(location)
    with pytest.raises(ForeignFilesError, match="registered") as err:
        table.remove_orphans(older_than=timedelta(0))
    assert "Help:" in str(err.value)
    assert lake.cleanup(older_than=timedelta(0)).removed == ()
    assert fingerprint(location) == before
    assert (location / "metadata" / "version-hint.text").read_text() == "2"
    assert _rows(lake, "db.r") == [(1, "a"), (2, "c")]


def test_cli_remove_orphans_and_cleanup_dry_run(lake: rowops.Lakehouse) -> None:
    _table(lake)
    orphan = _plant(lake.root / "db" / "t" / "data" / "crashed" / "part-0.parquet")
    before = fingerprint(lake.root)
    runner = CliRunner()
    listed = runner.invoke(app, ["--lake", str(lake.root), "remove-orphans", "db.t", "--dry-run"])
    assert listed.exit_code == 0, listed.output
    assert "part-0.parquet" in listed.output
    whole = runner.invoke(app, ["--lake", str(lake.root), "cleanup", "--dry-run"])
    assert whole.exit_code == 0, whole.output
    assert "db/t/data/crashed/part-0.parquet" in whole.output
    assert fingerprint(lake.root) == before and orphan.exists()
    removed = runner.invoke(app, ["--lake", str(lake.root), "cleanup"])
    assert removed.exit_code == 0, removed.output
    assert not orphan.exists()


def test_cleanup_skips_tables_whose_gc_is_disabled(lake: rowops.Lakehouse) -> None:
    """``gc.enabled=false`` (Iceberg's property: the table's files may be shared with another table):
    lake cleanup deletes none of its files, as Iceberg's DeleteOrphanFiles refuses; others are cleaned."""
    shared, other = _table(lake, "db.shared"), _table(lake, "db.other")
    shared.set_properties(**{"gc.enabled": "false"})
    orphans = [
        _plant(Path(normalize_path(t.load().metadata.location)) / "data" / "x.parquet")
        for t in (shared, other)
    ]
    _age_everything(Path(lake.location))
    result = lake.cleanup()
    assert orphans[0].exists() and not orphans[1].exists()
    assert not any("shared" in p for p in result.removed)
    assert _rows(lake, "db.shared") == [(1, "a"), (2, "c")]
