"""Shipping rowops to executors leaves no temp folder per process (issue 42 item 13): the zip is built
once per content of the package, in one folder of the temp directory, reused by later processes."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OPEN_TWICE = (
    "import rowops\n"
    "from rowops.exec.spark import session\n"
    "for _ in range(2):\n"
    "    rowops.Lakehouse(r'{lake}', spark=None)\n"
    "    session.package_zip.cache_clear()\n"
    "    print(session.package_zip())\n"
)


def _run(tmp: Path, lake: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)}
    done = subprocess.run(
        [sys.executable, "-c", OPEN_TWICE.format(lake=lake)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_processes_opening_a_lake_share_one_zip(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    first = _run(tmp, tmp_path / "lake").split()
    second = _run(tmp, tmp_path / "lake").split()
    assert len(set(first + second)) == 1  # two processes, two opens each: one zip
    assert [p.name for p in tmp.iterdir() if p.name.startswith("rowops-py-")] == [Path(first[0]).parent.name]
    with zipfile.ZipFile(first[0]) as archive:
        assert "rowops/exec/spark/session.py" in archive.namelist()
    assert not [p for p in Path(first[0]).parent.iterdir() if p.name != "rowops.zip"]  # no temp files left
