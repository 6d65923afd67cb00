"""Struct, list and map columns: created with Iceberg field ids at every level, written with Parquet
field ids and the table's name mapping, merged / updated / deleted under every strategy (``SET s.c1``
included), read back by rowops, DuckDB, PyIceberg and Iceberg's Java reader; metrics as Iceberg."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyiceberg.io.pyarrow import (
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
)
from pyiceberg.table import StaticTable
from pyiceberg.types import ListType, MapType, StructType
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

import rowops
from rowops.errors import InvalidInputError, SchemaMismatchError, UnsupportedStrategyError
from rowops.meta.paths import normalize_path
from tests.oracles.duckdb_reader import read_duckdb
from tests.oracles.java_reader import JavaIcebergReader
from tests.oracles.pyiceberg_reader import EqualityDeletesUnsupportedError, read_pyiceberg
from tests.spark.test_errors import assert_unchanged

Row = tuple[Any, ...]
INNER = T.StructType([T.StructField("x", T.DoubleType())])
S = T.StructType(
    [
        T.StructField("c1", T.IntegerType()),
        T.StructField("c2", T.StringType(), False),  # a required nested field
        T.StructField("inner", INNER),
    ]
)
PAIR = T.StructType([T.StructField("p", T.IntegerType()), T.StructField("q", T.StringType())])
VALUE = T.StructType([T.StructField("v", T.LongType()), T.StructField("w", T.StringType())])
SCHEMA = T.StructType(
    [
        T.StructField("k", T.LongType(), False),
        T.StructField("s", S),
        T.StructField("a", T.ArrayType(T.LongType(), False)),  # required elements
        T.StructField("ls", T.ArrayType(PAIR)),
        T.StructField("m", T.MapType(T.StringType(), T.IntegerType())),
        T.StructField("ms", T.MapType(T.StringType(), VALUE)),
        T.StructField("n", T.IntegerType()),
    ]
)
COLUMNS = [f.name for f in SCHEMA.fields]
N = 24


def make_row(k: int, version: int = 0) -> Row:
    """Row ``k``; some nested values NULL or empty, so every reader sees NULL structs, lists and maps."""
    s = None if k % 7 == 3 else (k * 10 + version, f"c{k}-{version}", None if k % 5 == 0 else (k / 4,))
    a = None if k % 6 == 1 else [k + i + version for i in range(k % 4)]
    ls = [(k + version, f"q{k}"), (None, None)] if k % 3 else []
    m = None if k % 8 == 2 else {f"m{k}": k + version, "z": None}
    ms = {f"v{k}": (k * 100 + version, None if k % 2 else f"w{k}")} if k % 4 else {}
    return (k, s, a, ls, m, ms, k + version)


def frame(spark: SparkSession, rows: Iterable[Row], schema: T.StructType = SCHEMA) -> DataFrame:
    return spark.createDataFrame(list(rows), schema)


def canon(value: Any, t: T.DataType) -> Any:
    """One reader-independent form: structs as tuples (from Rows or dicts), lists as tuples, maps as
    sorted (key, value) tuples (from dicts or Arrow's lists of pairs), floats as they are."""
    if value is None:
        return None
    if isinstance(t, T.StructType):
        values = [value[f.name] for f in t.fields] if isinstance(value, dict) else list(value)
        return tuple(canon(v, f.dataType) for v, f in zip(values, t.fields, strict=True))
    if isinstance(t, T.ArrayType):
        return tuple(canon(v, t.elementType) for v in value)
    if isinstance(t, T.MapType):
        pairs = value.items() if isinstance(value, dict) else value
        return tuple(sorted((k, canon(v, t.valueType)) for k, v in pairs))
    return value


def canon_rows(rows: Iterable[Any]) -> list[Row]:
    """Rows (tuples or dicts by column) in canonical form, sorted by key."""
    out = []
    for row in rows:
        values = [row[c] for c in COLUMNS] if isinstance(row, dict) else list(row)
        out.append(tuple(canon(v, f.dataType) for v, f in zip(values, SCHEMA.fields, strict=True)))
    return sorted(out, key=lambda r: r[0])


def assert_readers_agree(table: Any, expected: Iterable[Row], java: JavaIcebergReader | None) -> None:
    """rowops, DuckDB, PyIceberg (unless equality deletes) and Iceberg Java read exactly ``expected``."""
    want = canon_rows(expected)
    location, options = table.metadata_location, dict(table.lake.storage_options)
    got = {"rowops": canon_rows(r.asDict() for r in table.to_df().select(*COLUMNS).collect())}
    got["duckdb"] = canon_rows(read_duckdb(location, None, options).select(COLUMNS).to_pylist())
    with contextlib.suppress(EqualityDeletesUnsupportedError):
        got["pyiceberg"] = canon_rows(read_pyiceberg(location, None, options).select(COLUMNS).to_pylist())
    if java is not None:
        got["iceberg-java"] = canon_rows(java.read(location, None, options).select(COLUMNS).to_pylist())
    for reader, rows in got.items():
        assert rows == want, f"{reader} reads other rows: {_diff(want, rows)}"


def _diff(want: list[Row], got: list[Row]) -> str:
    missing = [r for r in want if r not in got][:3]
    extra = [r for r in got if r not in want][:3]
    return f"missing {missing}, extra {extra} (of {len(want)} expected, {len(got)} read)"


class Oracle:
    """The expected rows by key."""

    def __init__(self, rows: Iterable[Row]) -> None:
        self.rows = {r[0]: r for r in rows}

    def upsert(self, rows: Iterable[Row]) -> None:
        self.rows.update((r[0], r) for r in rows)

    def delete(self, keys: Iterable[int]) -> None:
        for k in keys:
            self.rows.pop(k, None)

    def change(self, keys: Iterable[int], edit: Callable[[list[Any]], None]) -> None:
        for k in keys:
            if k in self.rows:
                row = list(self.rows[k])
                edit(row)
                self.rows[k] = tuple(row)


def create(lake: Any, rows: Iterable[Row] | None = None) -> tuple[Any, Oracle]:
    rows = list(rows if rows is not None else [make_row(k) for k in range(N)])
    table = lake.create_table(
        "db.t", frame(lake.spark, rows), partition_by=["bucket(2, k)"], identifier=["k"]
    )
    return table, Oracle(rows)


def _ids(t: Any) -> list[int]:
    """Every field id inside an Iceberg type (struct fields, list elements, map keys and values)."""
    if isinstance(t, StructType):
        return [i for f in t.fields for i in (f.field_id, *_ids(f.field_type))]
    if isinstance(t, ListType):
        return [t.element_id, *_ids(t.element_type)]
    if isinstance(t, MapType):
        return [t.key_id, t.value_id, *_ids(t.key_type), *_ids(t.value_type)]
    return []


def _id(field: Any) -> int:
    return int(field.metadata[b"PARQUET:field_id"])


def _data_files(table: Any) -> list[Any]:
    static = StaticTable.from_metadata(table.metadata_location)
    return [task.file for task in static.scan().plan_files()]


def test_create_with_nested_columns_keeps_ids_nullability_and_name_mapping(lake, java) -> None:  # type: ignore[no-untyped-def]
    table, oracle = create(lake)
    schema = table.schema
    assert sorted(_ids(schema.as_struct())) == list(range(1, schema.highest_field_id + 1))
    assert [f.field_id for f in schema.fields] == list(range(1, len(COLUMNS) + 1))  # Iceberg's order
    s = schema.find_field("s").field_type
    assert isinstance(s, StructType) and [f.required for f in s.fields] == [False, True, False]
    a = schema.find_field("a").field_type
    assert isinstance(a, ListType) and a.element_required
    m = schema.find_field("ms").field_type
    assert isinstance(m, MapType) and not m.value_required
    assert "schema.name-mapping.default" in table.metadata.properties
    static = StaticTable.from_metadata(table.metadata_location)
    assert static.schema() == schema and static.name_mapping() is not None
    # every nested field has its id in the data files: struct fields (Spark writes those), list
    # elements and map keys and values (added by rowops' pyarrow pass: Spark writes none there)
    arrow = pq.read_schema(normalize_path(_data_files(table)[0].file_path))
    s_type = arrow.field("s").type
    assert [_id(s_type.field(i)) for i in range(s_type.num_fields)] == [f.field_id for f in s.fields]
    assert _id(arrow.field("a").type.value_field) == a.element_id
    ms_type = arrow.field("ms").type
    assert (_id(ms_type.key_field), _id(ms_type.item_field)) == (m.key_id, m.value_id)
    value = m.value_type
    assert isinstance(value, StructType) and _id(ms_type.item_field.type.field(0)) == value.fields[0].field_id
    assert_readers_agree(table, oracle.rows.values(), java)
    # without lists and maps Spark's own files carry every id (no pyarrow pass)
    structs = lake.create_table(
        "db.st", lake.spark.createDataFrame([(1, (2, "x", (0.5,)))], f"k long, s {S.simpleString()}")
    )
    path = normalize_path(_data_files(structs)[0].file_path)
    assert "/ids-" not in path
    inner = structs.schema.find_field("s.inner.x").field_id
    assert _id(pq.read_schema(path).field("s").type.field(2).type.field(0)) == inner


def test_upsert_and_delete_by_key_carry_nested_values(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    table, oracle = create(lake)
    changes = [make_row(k, 1) for k in range(0, N, 3)] + [make_row(k, 1) for k in range(N, N + 4)]
    rowops.merge(frame(lake.spark, changes), table, on=["k"], strategy=strategy)
    oracle.upsert(changes)
    assert_readers_agree(table, oracle.rows.values(), java)
    gone = [make_row(k) for k in (1, 2, 9, N + 1)]
    rowops.merge(
        frame(lake.spark, gone),
        table,
        on=["k"],
        when_matched="delete",
        when_not_matched=None,
        strategy=strategy,
    )
    oracle.delete(r[0] for r in gone)
    assert_readers_agree(table, oracle.rows.values(), java)


def test_update_delete_and_set_nested_fields(lake, strategy, java) -> None:  # type: ignore[no-untyped-def]
    table, oracle = create(lake)
    if strategy == "equality-delete":
        with pytest.raises(UnsupportedStrategyError):
            rowops.update(table, set={"s.c1": "-1"}, where="k < 3", strategy=strategy)
        return
    rowops.update(table, set={"s.c1": "s.c1 + 1000", "n": "0"}, where="k < 8", strategy=strategy)

    def bump(row: list[Any]) -> None:
        if row[1] is not None:
            row[1] = (row[1][0] + 1000, row[1][1], row[1][2])
        row[6] = 0

    oracle.change(range(8), bump)
    rowops.delete(table, where="size(a) = 2 OR (m IS NOT NULL AND k > 20)", strategy=strategy)
    oracle.delete(
        [
            k
            for k, r in oracle.rows.items()
            if (r[2] is not None and len(r[2]) == 2) or (r[4] is not None and k > 20)
        ]
    )
    assert_readers_agree(table, oracle.rows.values(), java)

    keys = (4, 10, 11, 50)  # 10 was deleted above: inserted again
    inserted = [make_row(k, 5) for k in keys if k not in oracle.rows]
    (
        table.merge(frame(lake.spark, [make_row(k, 5) for k in keys]), on=["k"])
        .when_matched("t.k = 11")
        .update({"s.inner.x": "s.n * 1.5", "ls": "s.ls"})
        .when_matched()
        .update({"s.c2": "concat(t.s.c2, '!')"})
        .when_not_matched()
        .insert_all()
        .execute(strategy=strategy)
    )

    def inner(row: list[Any]) -> None:
        if row[1] is not None:
            row[1] = (row[1][0], row[1][1], None if row[1][2] is None else (16 * 1.5,))
        row[3] = make_row(11, 5)[3]

    def exclaim(row: list[Any]) -> None:
        if row[1] is not None:
            row[1] = (row[1][0], row[1][1] + "!", row[1][2])

    oracle.change([11], inner)
    oracle.change([k for k in keys if k != 11], exclaim)
    oracle.upsert(inserted)
    assert_readers_agree(table, oracle.rows.values(), java)

    result = lake.sql("UPDATE db.t SET s.c1 = 5, t.n = n + 1 WHERE k = 12", strategy=strategy)
    assert result.rows_updated == 1

    def five(row: list[Any]) -> None:
        row[1] = None if row[1] is None else (5, row[1][1], row[1][2])
        row[6] += 1

    oracle.change([12], five)
    assert_readers_agree(table, oracle.rows.values(), java)


def test_struct_fields_are_matched_by_name(lake, java) -> None:  # type: ignore[no-untyped-def]
    table, oracle = create(lake)
    swapped = T.StructType([S.fields[2], S.fields[0], S.fields[1]])  # the source's struct in another order
    schema = T.StructType([SCHEMA.fields[0], T.StructField("s", swapped), *SCHEMA.fields[2:]])
    rows = [make_row(k, 3) for k in (5, 6, 100)]
    shuffled = [(r[0], None if r[1] is None else (r[1][2], r[1][0], r[1][1]), *r[2:]) for r in rows]
    rowops.merge(lake.spark.createDataFrame(shuffled, schema), table, on=["k"])
    oracle.upsert(rows)
    assert_readers_agree(table, oracle.rows.values(), java)


def test_nested_key_columns_are_rejected(lake) -> None:  # type: ignore[no-untyped-def]
    table, _ = create(lake)
    source = frame(lake.spark, [make_row(1, 1)])
    assert_unchanged(
        lake, lambda: rowops.merge(source, table, on=["s"]), InvalidInputError, "'s'", "nested", "Help:"
    )
    assert_unchanged(
        lake, lambda: rowops.merge(source, table, on=["s.c1"]), InvalidInputError, "'s.c1'", "Help:"
    )
    assert_unchanged(
        lake,
        lambda: lake.create_table("db.u", SCHEMA, identifier=["ms"]),
        InvalidInputError,
        "'ms'",
        "Help:",
    )
    assert_unchanged(
        lake,
        lambda: rowops.update(table, set={"a.element": "1"}),
        InvalidInputError,
        "a is a list",
        "Help:",
    )


def test_mismatched_nested_source_names_the_nested_path(lake) -> None:  # type: ignore[no-untyped-def]
    table, _ = create(lake)
    other_s = T.StructType(
        [
            T.StructField("c1", T.StringType()),
            T.StructField("inner", INNER),
            T.StructField("extra", T.IntegerType()),
        ]
    )
    other_ms = T.MapType(T.StringType(), T.StructType([T.StructField("v", T.BinaryType()), VALUE.fields[1]]))
    schema = T.StructType(
        [
            SCHEMA.fields[0],
            T.StructField("s", other_s),
            *SCHEMA.fields[2:5],
            T.StructField("ms", other_ms),
            SCHEMA.fields[6],
        ]
    )
    source = lake.spark.createDataFrame([(1, ("x", None, 1), None, None, None, None, 1)], schema)
    message = assert_unchanged(
        lake,
        lambda: rowops.merge(source, table, on=["k"]),
        SchemaMismatchError,
        "s.c2",  # missing
        "s.extra",  # extra
        "s.c1 (string -> int)",
        "ms.value.v (binary -> bigint)",
        "Help:",
    )
    assert "F.struct" in message
    assert_unchanged(
        lake,
        lambda: rowops.update(table, set={"s.inner": "'text'"}),
        SchemaMismatchError,
        "s.inner",
    )


def test_metrics_of_nested_leaves_follow_iceberg(lake) -> None:  # type: ignore[no-untyped-def]
    """Sizes and counts for every leaf as pyiceberg computes them; bounds for primitive leaves reached
    through structs only (as Iceberg Java's ``footerMetrics``), none inside lists or maps."""
    table, oracle = create(lake)
    schema = table.schema
    struct_leaves = {schema.find_field(n).field_id for n in ("s.c1", "s.c2", "s.inner.x")}
    in_lists_or_maps = {
        schema.find_field(n).field_id for n in ("a.element", "ls.element.p", "m.value", "ms.value.v")
    }
    c1_values: list[int] = []
    for data in _data_files(table):
        footer = pq.read_metadata(normalize_path(data.file_path))
        ours = {
            "column_sizes": data.column_sizes,
            "value_counts": data.value_counts,
            "null_value_counts": data.null_value_counts,
        }
        stats = data_file_statistics_from_parquet_metadata(
            footer,
            compute_statistics_plan(schema, dict(table.metadata.properties)),
            parquet_path_to_id_mapping(schema),
        ).to_serialized_dict()
        for name, value in ours.items():
            assert value == stats[name], name
        assert in_lists_or_maps <= set(data.value_counts)
        assert not in_lists_or_maps & set(data.lower_bounds), "no bounds inside lists or maps"
        assert struct_leaves - {schema.find_field("s.inner.x").field_id} <= set(data.lower_bounds)
        assert set(stats["lower_bounds"]) < set(data.lower_bounds)  # pyiceberg alone drops struct bounds
        assert {i: data.lower_bounds[i] for i in stats["lower_bounds"]} == stats["lower_bounds"]
        c1 = schema.find_field("s.c1").field_id
        c1_values += [
            int.from_bytes(data.lower_bounds[c1], "little"),
            int.from_bytes(data.upper_bounds[c1], "little"),
        ]
    expected = [r[1][0] for r in oracle.rows.values() if r[1] is not None]
    assert (min(c1_values), max(c1_values)) == (min(expected), max(expected))
    # bounds of a struct field prune: a filter on s.c1 reads only what can match
    assert sorted(r.k for r in table.to_df(where="s.c1 = 50").collect()) == [5]
