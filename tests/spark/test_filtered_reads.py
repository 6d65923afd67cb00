"""``Table.to_df(where=...)``: the rows of ``to_df().where(...)``, with manifests and data files pruned by
partition summaries, partition values and column bounds before Spark reads anything (``rowops/run/read.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from pyiceberg.conversions import from_bytes
from pyiceberg.types import IntegerType
from pyspark.sql import types as T

from rowops.errors import InvalidExpressionError
from rowops.meta.manifests import CACHE
from rowops.meta.paths import normalize_path
from tests.spark.tables import fingerprint
from tools.direct_appends import append_rows

SCHEMA = T.StructType(
    [
        T.StructField("k", T.LongType()),
        T.StructField("g", T.IntegerType()),
        T.StructField("v", T.StringType()),
    ]
)


def _table(lake: Any, strategy: str) -> Any:
    """Partitioned by g, one manifest per commit (no merging), rows with NULL v, deletes of the strategy."""
    props = {"commit.manifest-merge.enabled": "false"}
    table = lake.create_table("db.t", SCHEMA, partition_by=["g"], identifier=["g", "k"], properties=props)
    for k in range(12):
        v = None if k % 4 == 0 else f"v{k}"
        append_rows(table, [{"k": k, "g": k % 3, "v": v}, {"k": k + 100, "g": k % 3, "v": "w"}], (k % 3,))
    source = lake.spark.createDataFrame([(1, 1, "b"), (4, 1, None), (2, 2, "b")], SCHEMA)
    table.merge(source, on=["g", "k"]).when_matched().update_all().when_not_matched().insert_all().execute(
        strategy
    )
    gone = lake.spark.createDataFrame([(7, 1, "x"), (104, 1, "x")], SCHEMA)
    table.merge(gone, on=["g", "k"]).when_matched().delete().execute(strategy)
    return table


def _g_range(manifest: Any) -> range:
    """The values of g a manifest's partition summary admits."""
    summary = manifest.partitions[0]
    low, high = (from_bytes(IntegerType(), b) for b in (summary.lower_bound, summary.upper_bound))
    return range(int(low), int(high) + 1)


def _rows(df: Any) -> list[tuple[object, ...]]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


def _read_files(df: Any, table: Any) -> set[str]:
    """The table's data files Spark reads for ``df`` (delete files left out)."""
    data = {f.path for f in table.files().data}
    return {normalize_path(p) for p in df.inputFiles()} & data


WHERES = [
    "g = 1",
    "G = 1 AND k < 100",  # names resolve ignoring case, as Spark does by default
    "g = 1 AND v <> 'w'",  # SQL: NULL <> 'w' is not true, those rows are not returned
    "v IS NULL",
    "k >= 100 OR g = 2",  # no translatable conjunct: nothing pruned, Spark filters
]


def test_filtered_read_returns_what_spark_filter_returns(lake, strategy) -> None:  # type: ignore[no-untyped-def]
    table = _table(lake, strategy)
    everything = table.to_df()
    for where in WHERES:
        assert _rows(table.to_df(where=where)) == _rows(everything.where(where)), where


def test_filter_on_partition_opens_only_its_manifests_and_files(lake, strategy) -> None:  # type: ignore[no-untyped-def]
    table = _table(lake, strategy)
    manifests = table.files().manifests
    CACHE.clear()
    df = table.to_df(where="g = 1")
    opened = CACHE.misses
    excluded = [m for m in manifests if 1 not in _g_range(m)]  # summaries of partitions 0 and 2 only
    assert len(excluded) >= 4 and opened == len(manifests) - len(excluded), (opened, len(manifests))
    everything = _read_files(table.to_df(), table)
    only = _read_files(df, table)
    in_g1 = {f.path for f in table.files().data if f.partition == (1,)}
    assert only == in_g1 and len(only) < len(everything)


def test_filter_on_column_bounds_skips_files(lake, strategy) -> None:  # type: ignore[no-untyped-def]
    """Keys >= 100 live in the second row of every appended file: ``k < 3`` excludes files by bounds."""
    table = _table(lake, strategy)
    df = table.to_df(where="k < 3")
    assert len(_read_files(df, table)) < len(_read_files(table.to_df(), table))
    assert _rows(df) == _rows(table.to_df().where("k < 3"))


def test_invalid_filter_is_a_clear_error(lake) -> None:  # type: ignore[no-untyped-def]
    table = _table(lake, "position-delete")
    before = fingerprint(lake)
    with pytest.raises(InvalidExpressionError, match="to_df"):
        table.to_df(where="nope = 1")
    with pytest.raises(InvalidExpressionError):
        table.to_df(where="rand() > 0.5")
    assert fingerprint(lake) == before
