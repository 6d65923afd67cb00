"""A pipeline whose source cannot be read fails with the clean message only (issue 43, item 10): the
command line keeps Spark's log of the failed task (a Java stack trace, logged at ERROR) off stderr,
and the Spark error stays in the exception chain."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

import rowops
from rowops.cli import EXIT_BAD_INPUT, app
from rowops.errors import PipelineSourceError
from rowops.exec.spark.session import use_log_level
from rowops.pipeline import parse_config, runner
from tests.spark.tables import fingerprint


def _log_level(spark: SparkSession) -> str:
    return str(spark._jvm.org.apache.logging.log4j.LogManager.getRootLogger().getLevel().toString())  # type: ignore[union-attr]


@pytest.fixture()
def broken_source(lake: rowops.Lakehouse, tmp_path: Path) -> Path:
    lake.create_table("db.t", lake.spark.createDataFrame([(1, "a")], "id long, v string"), identifier=["id"])
    (tmp_path / "src" / "b1").mkdir(parents=True)
    (tmp_path / "src" / "b1" / "part-0.parquet").write_text("not parquet")
    config = tmp_path / "p.toml"
    config.write_text(
        f'[pipeline]\nid = "p"\n[source]\nformat = "parquet"\npath = "{tmp_path}/src/{{batch_id}}"\n'
        '[[targets]]\ntable = "db.t"\nkeys = ["id"]\n'
    )
    return config


def test_an_unreadable_source_fails_cleanly_with_spark_quiet(
    lake: rowops.Lakehouse, broken_source: Path
) -> None:
    before = fingerprint(lake)
    try:
        result = CliRunner().invoke(
            app, ["--lake", str(lake.root), "pipeline", "run", str(broken_source), "--batch-id", "b1"]
        )
        assert result.exit_code == EXIT_BAD_INPUT, result.output
        assert "cannot be read as parquet" in result.output and "part-0.parquet" in result.output
        assert "\tat org.apache" not in result.output
        assert _log_level(lake.spark) == "FATAL"  # a failed task's trace (logged at ERROR) is not printed
    finally:
        use_log_level("ERROR")
        lake.spark.sparkContext.setLogLevel("ERROR")
    assert fingerprint(rowops.Lakehouse(lake.location, spark=lake.spark)) == before
    with pytest.raises(PipelineSourceError) as error:
        runner.validate(lake, parse_config(broken_source.read_text()), "b1")
    assert error.value.__cause__ is not None  # Spark's error kept in the chain
