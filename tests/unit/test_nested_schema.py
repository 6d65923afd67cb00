"""Nested Spark schemas <-> Iceberg schemas: ids at every level (as Iceberg assigns them), nullability
kept, field ids on every StructField; the table metadata of a nested schema carries a name mapping."""

from __future__ import annotations

import pytest
from pyiceberg.types import IntegerType, ListType, MapType, StringType, StructType
from pyspark.sql import types as T

from rowops.errors import InvalidInputError, InvalidPartitionSpecError
from rowops.exec.spark.types import FIELD_ID_KEY, to_iceberg_schema, to_spark_schema, writable
from rowops.meta.tables import NAME_MAPPING, new_metadata
from rowops.request.partitioning import parse_partition_by
from rowops.request.sorting import parse_sort_by

SPARK = T.StructType(
    [
        T.StructField("k", T.LongType(), False),
        T.StructField(
            "s",
            T.StructType([T.StructField("c1", T.IntegerType()), T.StructField("c2", T.StringType(), False)]),
        ),
        T.StructField("a", T.ArrayType(T.ShortType(), False)),
        T.StructField("m", T.MapType(T.StringType(), T.ArrayType(T.IntegerType()))),
    ]
)


def test_ids_are_fresh_and_iceberg_ordered_and_nullability_is_kept() -> None:
    metadata = new_metadata(to_iceberg_schema(SPARK), [], ["k"], "/lake/t")
    schema = metadata.schema()
    assert [f.field_id for f in schema.fields] == [1, 2, 3, 4]
    s, a, m = (schema.find_field(n).field_type for n in ("s", "a", "m"))
    assert isinstance(s, StructType) and [(f.field_id, f.required) for f in s.fields] == [
        (5, False),
        (6, True),
    ]
    assert isinstance(a, ListType) and (a.element_id, a.element_required, a.element_type) == (
        7,
        True,
        IntegerType(),
    )
    assert isinstance(m, MapType) and (m.key_id, m.value_id, m.key_type) == (8, 9, StringType())
    assert isinstance(m.value_type, ListType) and m.value_type.element_id == 10 and not m.value_required
    assert metadata.name_mapping() is not None and NAME_MAPPING in metadata.properties
    assert (
        NAME_MAPPING
        not in new_metadata(to_iceberg_schema(T.StructType([SPARK["k"]])), [], [], "/lake/u").properties
    )


def test_spark_schema_carries_ids_on_every_struct_field() -> None:
    schema = new_metadata(to_iceberg_schema(SPARK), [], [], "/lake/t").schema()
    spark = to_spark_schema(schema)
    s = spark["s"].dataType
    assert isinstance(s, T.StructType)
    assert [f.metadata[FIELD_ID_KEY] for f in s.fields] == [5, 6] and not s["c2"].nullable
    assert spark["a"].dataType == T.ArrayType(T.IntegerType(), False)
    relaxed = writable(s)
    assert (
        isinstance(relaxed, T.StructType)
        and relaxed["c2"].nullable
        and relaxed["c2"].metadata == {FIELD_ID_KEY: 6}
    )


@pytest.mark.parametrize("column", ["s", "a", "m"])
def test_nested_columns_cannot_be_keys_or_partitions(column: str) -> None:
    schema = to_iceberg_schema(SPARK)
    with pytest.raises(InvalidInputError, match="nested type") as caught:
        new_metadata(schema, [], [column], "/lake/t")
    assert "Help:" in str(caught.value)
    with pytest.raises(InvalidPartitionSpecError, match="nested type"):
        new_metadata(schema, parse_partition_by([column]), [], "/lake/t")


@pytest.mark.parametrize("source", ["a.element", "m.key", "m.value.element"])
def test_no_partition_or_sort_source_inside_lists_or_maps(source: str) -> None:
    schema = to_iceberg_schema(SPARK)
    with pytest.raises(InvalidPartitionSpecError, match="inside a list or a map") as caught:
        new_metadata(schema, parse_partition_by([f"bucket(4, {source})"]), [], "/lake/t")
    assert "Help:" in str(caught.value)
    with pytest.raises(InvalidInputError, match="inside a list or a map"):
        new_metadata(schema, [], [], "/lake/t", sort_fields=parse_sort_by([source]))


def test_struct_fields_partition_and_sort() -> None:
    """Iceberg allows a primitive of a struct as a source: ids point at the nested field, names are
    Avro-safe."""
    schema = to_iceberg_schema(SPARK)
    spec = ["s.c1", "bucket(4, s.c2)"]
    metadata = new_metadata(
        schema, parse_partition_by(spec), [], "/lake/t", sort_fields=parse_sort_by(["s.c1 DESC"])
    )
    c1, c2 = (metadata.schema().find_field(n).field_id for n in ("s.c1", "s.c2"))
    assert [(f.name, f.source_id) for f in metadata.spec().fields] == [("s_c1", c1), ("s_c2_bucket", c2)]
    assert [f.source_id for f in metadata.sort_order().fields] == [c1]
