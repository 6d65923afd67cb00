"""Required fields inside structs, lists and maps: enforced on every write path with the error of
top-level NOT NULL (the column path, e.g. ``s.c2``, and the row's key), nothing committed; a NULL
parent (struct, list, map) holds no required value and is fine."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import types as T

import rowops
from rowops.errors import NullValueError
from tests.spark.test_errors import assert_unchanged

PAIR = T.StructType([T.StructField("p", T.IntegerType(), False), T.StructField("q", T.StringType())])
S = T.StructType(
    [
        T.StructField("c1", T.IntegerType()),
        T.StructField("c2", T.StringType(), False),
        T.StructField("inner", T.StructType([T.StructField("x", T.DoubleType(), False)])),
    ]
)
SCHEMA = T.StructType(
    [
        T.StructField("k", T.LongType(), False),
        T.StructField("s", S),
        T.StructField("a", T.ArrayType(T.LongType(), False)),
        T.StructField("ls", T.ArrayType(PAIR)),
        T.StructField("m", T.MapType(T.StringType(), T.IntegerType(), False)),
    ]
)
GOOD: tuple[Any, ...] = (1, (1, "x", (1.0,)), [1, 2], [(1, "q")], {"a": 1})


def _loose(t: T.DataType) -> T.DataType:
    if isinstance(t, T.StructType):
        return T.StructType([T.StructField(f.name, _loose(f.dataType), True) for f in t.fields])
    if isinstance(t, T.ArrayType):
        return T.ArrayType(_loose(t.elementType), True)
    if isinstance(t, T.MapType):
        return T.MapType(t.keyType, _loose(t.valueType), True)
    return t


SOURCE = _loose(SCHEMA)  # the nullable form of SCHEMA: a source may hold the NULLs the table refuses
assert isinstance(SOURCE, T.StructType)


def _row(k: int, **changes: Any) -> tuple[Any, ...]:
    row = dict(zip(SOURCE.fieldNames(), GOOD, strict=True))
    row.update(k=k, **changes)
    return tuple(row.values())


BAD = [
    ("s.c2", {"s": (1, None, (1.0,))}),
    ("s.inner.x", {"s": (1, "x", (None,))}),
    ("a.element", {"a": [1, None]}),
    ("ls.element.p", {"ls": [(1, "q"), (None, "q")]}),
    ("m.value", {"m": {"a": None}}),
]


def _table(lake: Any) -> Any:
    rows = [_row(k) for k in range(4)] + [_row(9, s=(1, "x", None), a=None, ls=None, m=None), _row(8, s=None)]
    return lake.create_table("db.t", lake.spark.createDataFrame(rows, SCHEMA), identifier=["k"])


def test_nulls_in_required_nested_fields_are_rejected_on_append_and_merge(lake) -> None:  # type: ignore[no-untyped-def]
    table = _table(lake)
    assert table.to_df().count() == 6, "NULL parents of required nested fields were written"
    for path, change in BAD:
        source = lake.spark.createDataFrame([_row(100, **change), _row(2)], SOURCE)
        assert_unchanged(
            lake,
            lambda s=source: table.append(s),  # type: ignore[misc]
            NullValueError,
            f"column {path} is declared NOT NULL",
            "offending row: k=100",
            "Help:",
        )
    source = lake.spark.createDataFrame([_row(2), _row(101, **BAD[0][1])], SOURCE)
    for strategy in ("copy-on-write", "equality-delete"):
        assert_unchanged(
            lake,
            lambda s=strategy: rowops.merge(source, table, on=["k"], strategy=s),  # type: ignore[misc]
            NullValueError,
            "column s.c2",
            "k=101",
        )


@pytest.mark.parametrize("strategy", ["copy-on-write", "position-delete"])
def test_nulls_assigned_to_required_nested_fields_are_rejected(lake, strategy) -> None:  # type: ignore[no-untyped-def]
    table = _table(lake)
    assert_unchanged(
        lake,
        lambda: rowops.update(table, set={"s.c2": "CAST(NULL AS STRING)"}, where="k = 3", strategy=strategy),
        NullValueError,
        "column s.c2",
        "k=3",
    )
    assert_unchanged(
        lake,
        lambda: rowops.update(table, set={"a": "array(k, NULL)"}, where="k = 1", strategy=strategy),
        NullValueError,
        "column a.element",
        "k=1",
    )
    rowops.sql(lake, "UPDATE db.t SET s.c2 = 'y' WHERE k = 3", strategy=strategy)
    assert table.to_df().filter("k = 3").first()["s"]["c2"] == "y"
