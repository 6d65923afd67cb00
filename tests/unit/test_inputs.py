"""Argument checks of the public API (pure)."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from rowops.errors import CorruptLakeError, InvalidArgumentError, RowOpsError
from rowops.exec.spark.transforms import parse_partition_dirs
from rowops.exec.spark.types import to_iceberg_schema
from rowops.meta.tables import build_partition_spec
from rowops.request.inputs import checked_call, merge_on, name_list, sql_text
from rowops.request.partitioning import parse_partition_by


@checked_call
def sample(target: str, where: str | None = None, strategy: str = "auto") -> str:
    return f"{target}:{where}:{strategy}"


def test_checked_call_passes_good_calls_through() -> None:
    assert sample("t", where="k = 1") == "t:k = 1:auto"
    assert sample.__name__ == "sample"


def test_checked_call_names_the_close_match() -> None:
    with pytest.raises(InvalidArgumentError, match="did you mean 'where' for 'wher'") as caught:
        sample("t", wher="k = 1")  # type: ignore[call-arg]
    assert "Help: sample takes target, where, strategy" in str(caught.value)
    with pytest.raises(InvalidArgumentError, match="missing"):
        sample()  # type: ignore[call-arg]


@pytest.mark.parametrize("value", [5, ["k"], b"k > 1"])
def test_sql_text_rejects_non_strings(value: object) -> None:
    with pytest.raises(InvalidArgumentError, match="Spark SQL text"):
        sql_text(value, "where=")


@pytest.mark.parametrize("value", [5, [], [1], None])
def test_merge_on_rejects_non_names(value: object) -> None:
    with pytest.raises(InvalidArgumentError, match="on="):
        merge_on(value)


def test_unexpected_partition_directory_is_a_rowops_error() -> None:
    schema = to_iceberg_schema(T.StructType([T.StructField("k", T.LongType())]))
    spec = build_partition_spec(schema, parse_partition_by(["bucket(4, k)"]))
    assert parse_partition_dirs("k_bucket_part=v3", spec, schema) == (3,)
    for bad in ("", "k_bucket_part=vx"):
        with pytest.raises(CorruptLakeError) as caught:
            parse_partition_dirs(bad, spec, schema)
        assert isinstance(caught.value, RowOpsError) and "Help:" in str(caught.value)


def test_name_lists() -> None:
    assert name_list("bucket(4, k)", "partition_by") == ["bucket(4, k)"]
    with pytest.raises(InvalidArgumentError, match="partition_by takes a list of strings"):
        name_list([1], "partition_by")
