"""The cleanup reference scan is linear (issue 42 item 6): each immutable file is parsed once per
process, and a later cleanup parses only what the versions since added. Counted, not timed."""

from __future__ import annotations

import json
from pathlib import Path

from rowops.catalog import cleanup
from tpcds import cleanup_scale


def test_each_file_is_parsed_once_and_later_scans_read_only_new_versions(tmp_path: Path) -> None:
    builder = cleanup_scale.LakeBuilder(tmp_path / "lake", per_table=10)
    builder.add_versions(30)
    cleanup.SCANNER = cleanup.ReferenceScanner()
    _, first, referenced = cleanup_scale.scan(builder)
    assert first == {"version": 30, "metadata": 30, "manifest-list": 30, "manifest": 30}  # one per version
    assert referenced == 4 * 30  # metadata, manifest list, manifest, data file of every version
    _, again, _ = cleanup_scale.scan(builder)
    assert again == {"version": 0, "metadata": 0, "manifest-list": 0, "manifest": 0}
    builder.add_versions(5)
    _, later, _ = cleanup_scale.scan(builder)
    assert later == {"version": 5, "metadata": 5, "manifest-list": 5, "manifest": 5}


def test_cleanup_scale_smoke(tmp_path: Path) -> None:
    assert cleanup_scale.main(["--smoke", "--out", str(tmp_path), "--work", str(tmp_path / "work")]) == 0
    report = json.loads((tmp_path / "cleanup-scale-smoke.json").read_text())
    assert [p["versions"] for p in report["points"]] == list(cleanup_scale.SMOKE)
    for p in report["points"]:
        assert p["cold_parsed"]["metadata"] == p["versions"]
        assert p["warm_parsed"]["metadata"] == p["warm_added_versions"]
    assert "| versions |" in (tmp_path / "cleanup-scale-smoke.md").read_text()
