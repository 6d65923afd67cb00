"""Executors without rowops on their Python path (a caller's own session): rowops ships itself, and a
missing dependency is a clear ``ExecutorEnvironmentError`` up front, not a ``ModuleNotFoundError``
in the middle of a MERGE.

Each case runs in its own process with its own SparkSession, whose executors start Python through a
wrapper: ``python -S`` (no site processing, so the venv's editable rowops install is not found) with
an explicit ``PYTHONPATH`` of the packages it may use.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.jvm_options import JAVA_OPTIONS

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = f"""
import sys

import rowops
from pyspark.sql import SparkSession

spark = (
    SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.driver.extraJavaOptions", {JAVA_OPTIONS!r}).getOrCreate()
)
try:
    lake = rowops.Lakehouse(sys.argv[1], spark=spark)
except rowops.errors.RowOpsError as exc:
    print("ROWOPS-ERROR", type(exc).__name__, str(exc).replace(chr(10), " | "))
    sys.exit(3)
t = lake.create_table(
    "db.t", spark.range(20).selectExpr("id AS k", "CAST(id AS STRING) AS s"),
    partition_by=["bucket(4, s)"], identifier=["k"],
)
source = spark.range(10, 30).selectExpr("id AS k", "CONCAT('v', id) AS s")
rowops.merge(source, t, on=["k"], strategy="position-delete")
print("ROWS", sorted(tuple(r) for r in t.to_df().collect()))
"""


def executor_python(tmp_path: Path, packages: list[str]) -> str:
    """A wrapper that starts the venv's Python for executors, seeing only ``packages`` (by symlink)."""
    site = Path(sysconfig.get_paths()["purelib"])
    visible = tmp_path / "executor-site"
    visible.mkdir()
    for name in packages:
        for entry in site.glob(name):
            (visible / entry.name).symlink_to(entry)
    wrapper = tmp_path / "executor-python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={visible} exec {sys.executable} -S "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def run_driver(tmp_path: Path, packages: list[str]) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYSPARK_PYTHON": executor_python(tmp_path, packages),
        "PYTHONPATH": str(ROOT),
    }
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    command = [sys.executable, "-c", SCRIPT, str(tmp_path / "lake")]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


def everything_but_rowops() -> list[str]:
    """Every installed package, without rowops' own (editable) install and ``.pth`` hooks."""
    site = Path(sysconfig.get_paths()["purelib"])
    skipped = ("__editable__", "rowops", "_virtualenv", "distutils-precedence")
    return [p.name for p in site.iterdir() if not p.name.startswith(skipped) and p.suffix != ".pth"]


@pytest.mark.slow  # `make test-cluster` ships rowops to executors of a standalone cluster too
def test_rowops_ships_itself_to_executors_without_it(tmp_path: Path) -> None:
    done = run_driver(tmp_path, everything_but_rowops())
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    rows = [(k, str(k)) for k in range(10)] + [(k, f"v{k}") for k in range(10, 30)]
    assert f"ROWS {rows}" in done.stdout


def test_missing_dependency_is_named_up_front(tmp_path: Path) -> None:
    done = run_driver(tmp_path, ["pyspark", "py4j"])
    assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-4000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("ROWOPS-ERROR"))
    assert (
        "ExecutorEnvironmentError" in line and "pyarrow" in line and "pyroaring" in line and "sqlglot" in line
    )
    assert "Help: " in line and "PYSPARK_PYTHON" in line
    assert not (tmp_path / "lake").exists() or not any((tmp_path / "lake").rglob("*.json"))
