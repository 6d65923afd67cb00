"""Opening a pipeline's lake and its target tables: never created by a run, named in the error if missing."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from rowops.errors import NoSuchLakeError, NoSuchTableError, PipelineConfigError
from rowops.exec.spark.session import create_session
from rowops.lakehouse import Lakehouse
from rowops.meta.fileio import s3a_conf
from rowops.pipeline.config import PipelineConfig
from rowops.table import Table

if TYPE_CHECKING:
    from rowops.exec.spark.frames import SparkSession


class PipelineLake(Lakehouse):
    """A lakehouse whose Spark session, created on first use, carries the pipeline's ``[spark]`` settings.

    Nothing starts Spark before it is needed: a run whose batch was committed before never does.
    """

    spark_conf: dict[str, str]

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            self._spark = create_session(hadoop_conf={**s3a_conf(self.storage_options), **self.spark_conf})
        return self._spark


def lake_for(
    config: PipelineConfig, lake: str | None = None, storage_options: dict[str, str] | None = None
) -> Lakehouse:
    """Open the pipeline's lake (``lake`` argument, else ``ROWOPS_LAKE``, else the config's)."""
    location = lake or os.environ.get("ROWOPS_LAKE") or config.lake
    if not location:
        raise PipelineConfigError(
            f"{config.path}: no lake: set [pipeline].lake, pass --lake or set ROWOPS_LAKE",
        )
    options = {**config.storage_options, **(storage_options or {})}
    try:  # never create a lake: a run needs its target tables, and a failed run must leave nothing
        opened = PipelineLake(location, storage_options=options, create=False)
    except NoSuchLakeError as exc:
        raise NoSuchLakeError(f"no lake at {location}", help=_create_help(config, location)) from exc
    opened.spark_conf = dict(config.spark)
    return opened


def _create_help(config: PipelineConfig, location: str) -> str:
    """What to run to create the target tables a pipeline writes into (Python calls, one per target)."""
    calls = "; ".join(
        f"rowops.Lakehouse({location!r}).create_table({t.table!r}, df, identifier={list(t.keys)!r})"
        for t in config.targets
    )
    example = (
        " For conf/store_sales_pipeline.toml, make pipeline-demo creates db.store_sales and its change batches."
        if any(t.table == "db.store_sales" for t in config.targets)
        else ""
    )
    return (
        "A pipeline writes into existing tables and never creates a lake or a table: create them first, in "
        f"Python: {calls} with df a DataFrame of the table's columns.{example} Nothing was written."
    )


def target_tables(lake: Lakehouse, config: PipelineConfig) -> dict[str, Table]:
    """Each target table of the pipeline; a missing one names what to run to create it."""
    tables = {}
    for target in config.targets:
        try:
            tables[target.table] = lake.table(target.table)
        except NoSuchTableError as exc:
            raise NoSuchTableError(
                f"the pipeline's target table {target.table} does not exist in lake {lake.location}",
                help=_create_help(config, lake.location),
            ) from exc
    return tables


def batch_of(config: PipelineConfig, batch_id: str | None) -> str:
    """The batch id of a run: the argument, else the config's ``batch_id``."""
    chosen = batch_id or config.batch_id
    if not chosen:
        raise PipelineConfigError(f"{config.path}: no batch id: set [pipeline].batch_id or pass --batch-id")
    return chosen
