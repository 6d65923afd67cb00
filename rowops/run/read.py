"""Reading a table: the rows of a snapshot, optionally only those matching a filter.

``Table.to_df(where=...)`` prunes before Spark sees a file. The filter's simple conjuncts
(``plan/predicates.py``: comparisons of a column with a literal, SQL NULL rules) are projected onto
the partition specs, so manifests whose partition summaries exclude them are never opened
(``live_files(partition_filter=)``, ``meta/manifests.py``), and data files whose partition values or
column bounds cannot match are not read (pyiceberg's inclusive evaluators). Spark then filters the
rows of the files that remain, so the result is exactly ``to_df().where(where)``.

Pruning binds column names to the table's current schema: a snapshot written with another schema
(time travel across schema changes) is filtered by Spark only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyiceberg.expressions import AlwaysTrue

from rowops.exec.checks.expressions import case_sensitive, check_condition
from rowops.exec.reading.scan import scan
from rowops.exec.spark.types import to_spark_schema
from rowops.meta.files import live_files
from rowops.meta.stored_schema import schema_of
from rowops.plan.predicates import candidates, translate

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata

    from rowops.exec.spark.frames import DataFrame
    from rowops.run.target import TableTarget


def read_table(
    table: TableTarget, metadata: TableMetadata, snapshot_id: int | None, where: str | None
) -> DataFrame:
    """The rows of ``table`` at ``snapshot_id`` (current: None) matching ``where`` (all: None).

    ``metadata`` is the table's metadata as the caller loaded (and validated ``snapshot_id`` against)
    it: the read uses that same version, and does not read and parse ``metadata.json`` a second time.
    """
    io, spark = table.lake.catalog.io, table.lake.spark
    schema = schema_of(metadata, snapshot_id)
    if where is None:
        return scan(spark, schema, live_files(metadata, io, snapshot_id), io=io)
    where = check_condition(spark.createDataFrame([], to_spark_schema(schema)), where, "to_df(where=...)")
    sensitive = case_sensitive(spark)
    predicate = translate(where, schema, sensitive)
    if schema.schema_id != metadata.current_schema_id or isinstance(predicate.expression, AlwaysTrue):
        return scan(spark, schema, live_files(metadata, io, snapshot_id), io=io).where(where)
    files = live_files(metadata, io, snapshot_id, partition_filter=predicate.expression)
    kept, _ = candidates(where, files.data, metadata, sensitive)
    return scan(spark, schema, files, kept, io=io).where(where)
