"""The lake-log scale benchmark runs end to end at tiny sizes (no timing claims)."""

from __future__ import annotations

import json
from pathlib import Path

from tpcds import log_scale


def test_log_scale_smoke(tmp_path: Path) -> None:
    assert log_scale.main(["--smoke", "--out", str(tmp_path), "--work", str(tmp_path / "work")]) == 0
    report = json.loads((tmp_path / "log-scale-smoke.json").read_text())
    points = report["points"]
    assert {(p["design"], p["tables"], p["versions"]) for p in points} == {
        (d, t, v) for d in log_scale.DESIGNS for t in (1, 80) for v in (5, 20)
    }
    for p in points:
        assert p["commit_ms"]["n"] == p["open_ms"]["n"] == 2 and p["commit_ms"]["median"] > 0
    big_trie = next(p for p in points if p["design"] == "trie" and p["tables"] == 80 and p["versions"] == 20)
    big_map = next(
        p for p in points if p["design"] == "full-map" and p["tables"] == 80 and p["versions"] == 20
    )
    assert big_trie["node_files"] > 0 and big_map["node_files"] == 0
    assert big_trie["newest_version_file_bytes"] < big_map["newest_version_file_bytes"]
    assert (tmp_path / "log-scale-smoke.png").stat().st_size > 0
    assert not any((tmp_path / "work").iterdir())  # the built logs are removed
