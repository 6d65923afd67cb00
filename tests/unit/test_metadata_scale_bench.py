"""The metadata-scale benchmark's synthetic table is a valid Iceberg table (no timing claims)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.table import StaticTable

from rowops.meta.files import live_files
from tpcds import metadata_scale


def test_synthetic_table_reads_back(tmp_path: Path) -> None:
    location = tmp_path / "warehouse" / "db" / "t"
    path = metadata_scale.build_table(location, files=30, commits=7)
    assert (location / "metadata" / "version-hint.text").read_text() == "1"
    table = StaticTable.from_metadata(path)
    assert len(table.metadata.snapshots) == 7
    files = live_files(table.metadata, PyArrowFileIO())
    assert (len(files.data), len(files.position_deletes), len(files.manifests)) == (30, 30, 14)
    assert {f.seq for f in files.data} == set(range(1, 8))  # inherited from each commit's manifests
    # every file's first row is deleted by its position delete file (same commit, same sequence number)
    rows = table.scan().to_arrow()
    assert rows.num_rows == 30 * (metadata_scale.ROWS_PER_FILE - 1)
    assert 0 not in rows.column("k").to_pylist() and 5 in rows.column("k").to_pylist()
    data = pq.read_table(files.data[0].path)
    assert data.schema.field("k").metadata == {b"PARQUET:field_id": b"1"}
    assert len(metadata_scale.merge_keys(30)) == metadata_scale.TOUCHED


def test_plot_of_a_report(tmp_path: Path) -> None:
    medians = {s: 0.1 for s in metadata_scale.STEPS}
    report = {
        "commits": 3, "runs": 1, "cores": 2,
        "sizes": [{"files": n, "rowops": {"median": medians}, "iceberg": {"median": medians}} for n in (10, 100)],
    }  # fmt: skip
    metadata_scale.plot(report, tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 0
    json.dumps(report)
