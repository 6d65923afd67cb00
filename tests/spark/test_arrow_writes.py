"""New data and equality-delete files written by pyarrow in Spark tasks (``exec/writing/arrow_writes.py``):
which tables take that way, and that the files read back as Spark's writer's would, through every
reader."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from pyspark.sql import types as T

import rowops
from rowops.exec.writing import equality_writes
from tests.conftest import make_lake
from tests.readers import assert_readers_agree, assert_same_rows, rowops_rows
from tests.spark.tables import COLUMNS, SCHEMA, Layout, Oracle, frame, make_row

PLAIN = ["k", "g", "s", "amt", "d", "x", "flag", "n"]  # no timestamp: every column written by pyarrow
PLAIN_SCHEMA = T.StructType([f for f in SCHEMA.fields if f.name in PLAIN])


def plain(k: int, version: int = 0) -> tuple[object, ...]:
    """``make_row(k, version)``'s values of the :data:`PLAIN` columns."""
    return tuple(v for v, c in zip(make_row(k, version), COLUMNS, strict=True) if c in PLAIN)


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def lake(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """Executors write the key files through pyarrow's file system: local disk and S3."""
    return make_lake(request.param, request)


@pytest.mark.parametrize(
    ("layout", "arrow"),
    [
        (Layout("bucket", ("bucket(4, k)",), ("k",)), True),
        (Layout("identity", ("g",), ("g", "k")), True),
        (Layout("unpartitioned", (), ("k",)), False),  # and a row count the write does not know
        (Layout("days", ("days(d)",), ("d", "k")), True),
        (Layout("hours", ("hours(ts)",), ("ts", "k")), False),  # a timestamp key: Spark's writer
    ],
    ids=lambda v: v.name if isinstance(v, Layout) else str(v),
)
def test_equality_delete_files_by_key_type(lake, java, layout, arrow) -> None:  # type: ignore[no-untyped-def]
    rows = [make_row(k) for k in range(60)]
    table = lake.create_table(
        "db.t", frame(lake.spark, rows), partition_by=list(layout.partition_by), identifier=list(layout.keys)
    )
    oracle = Oracle(layout, rows)
    before = {f.path for f in table.files().data}
    changes = [make_row(k, 1) for k in (*range(0, 60, 4), 100, 101)]
    result = rowops.merge(frame(lake.spark, changes), table, on=list(layout.keys), strategy="equality-delete")
    oracle.upsert(changes)
    files = table.files()
    deletes, new = files.equality_deletes, [f for f in files.data if f.path not in before]
    assert result.delete_files_added == len(deletes) > 0 and new
    assert all(("/eq-arrow-" in d.path) == arrow for d in deletes)
    assert not any("/new-arrow-" in f.path for f in new)  # the rows have a timestamp: Spark's writer
    assert sum(d.record_count for d in deletes) == len(changes)
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


@pytest.mark.parametrize("enabled", ["true", "false"])
def test_string_keys_in_truncated_partitions(lake, java, enabled) -> None:  # type: ignore[no-untyped-def]
    """String keys, partitioned by a truncation of the key: one file per partition, its partition
    value parsed from Spark's; ``rowops.rewrite.arrow.enabled=false`` leaves them to Spark's writer."""
    schema = T.StructType([T.StructField("id", T.StringType(), False), T.StructField("v", T.LongType())])
    rows = {f"{c}{i}": i for c in "ab%é" for i in range(10)}
    df = lake.spark.createDataFrame(sorted(rows.items()), schema)
    table = lake.create_table("db.t", df, partition_by=["truncate(1, id)"], identifier=["id"])
    table.set_properties(**{"rowops.rewrite.arrow.enabled": enabled})
    changes = {"a1": 100, "%2": 100, "é3": 100, "z9": 100}
    rowops.merge(
        lake.spark.createDataFrame(sorted(changes.items()), schema),
        table,
        on=["id"],
        strategy="equality-delete",
    )
    rows.update(changes)
    deletes = table.files().equality_deletes
    assert sorted(d.partition for d in deletes) == [("%",), ("a",), ("z",), ("é",)]
    assert all(("/eq-arrow-" in d.path) == (enabled == "true") for d in deletes)
    assert_readers_agree(table, sorted(rows.items()), ["id", "v"], java)


@pytest.mark.parametrize("partition_by", [["bucket(4, k)"], ["truncate(10, k)"]], ids=["bucket", "truncate"])
def test_new_rows_of_plain_columns_are_written_in_arrow(lake, java, partition_by) -> None:  # type: ignore[no-untyped-def]
    """A table of columns whose Arrow form Spark and Iceberg agree on (no timestamp): the new rows of
    every encoding's MERGE are written by pyarrow, one file per partition, and read back the same
    through every reader."""
    columns, schema = PLAIN, PLAIN_SCHEMA
    first = [plain(k) for k in range(40)]
    table = lake.create_table(
        "db.t", lake.spark.createDataFrame(first, schema), partition_by=partition_by, identifier=["k"]
    )
    expected = {r[0]: r for r in first}
    for strategy, version in (("equality-delete", 1), ("copy-on-write", 2), ("position-delete", 3)):
        before = {f.path for f in table.files().data}
        rows = [plain(k, version) for k in (*range(version, 40, 6), 100 + version)]
        rowops.merge(lake.spark.createDataFrame(rows, schema), table, on=["k"], strategy=strategy)
        expected.update({r[0]: r for r in rows})
        new = [f.path for f in table.files().data if f.path not in before]
        assert any("/new-arrow-" in p for p in new), (strategy, new)
        assert_readers_agree(table, expected.values(), columns, java)


@pytest.mark.parametrize("strategy", ["equality-delete", "position-delete", "copy-on-write"])
def test_new_rows_and_keys_are_ordered_by_the_identifier_within_a_file(lake, java, strategy) -> None:  # type: ignore[no-untyped-def]
    """A MERGE's source in no order (here descending, in several partitions): each new data file
    and key file pyarrow writes holds its rows ordered by the table's identifier, in its declared
    order (``arrow_writes.identifier_order``), as Iceberg's are out of its sort-merge join."""
    columns, schema = PLAIN, PLAIN_SCHEMA
    table = lake.create_table(
        "db.t",
        lake.spark.createDataFrame([plain(k) for k in range(60)], schema),
        partition_by=["bucket(2, g)"],
        identifier=["g", "k"],
    )
    before = {f.path for f in table.files().data}
    rows = [plain(k, 1) for k in (*range(0, 60, 2), *range(100, 160, 7))][::-1]
    source = lake.spark.createDataFrame(rows, schema).repartition(3)
    rowops.merge(source, table, on=["g", "k"], strategy=strategy)
    files = table.files()
    new = [f for f in [*files.data, *files.equality_deletes] if f.path not in before]
    written = [f for f in new if "/new-arrow-" in f.path or "/eq-arrow-" in f.path]  # not a rewrite's
    assert written and sum(f.record_count for f in written if "/new-" in f.path) >= 9
    for f in written:
        got = pq.read_table(table.lake.catalog.io.new_input(f.path).open(), columns=["g", "k"]).to_pylist()
        assert [(r["g"], r["k"]) for r in got] == sorted((r["g"], r["k"]) for r in got), f.path
    data = pq.ParquetFile(
        table.lake.catalog.io.new_input(max(written, key=lambda f: f.record_count).path).open()
    )
    chunks = data.metadata.row_group(0)
    encodings = {
        chunks.column(i).path_in_schema: chunks.column(i).encodings for i in range(chunks.num_columns)
    }
    # a dictionary where it pays (parquet-mr's rule, ``parquet_dictionary.py``): 3 values of g, not unique keys
    assert "RLE_DICTIONARY" in encodings["g"] and "RLE_DICTIONARY" not in encodings["k"], encodings
    # no copy of the Arrow schema in the footer (``arrow_files.writer_options``): the readers below
    # take the types from the Parquet schema
    assert b"ARROW:schema" not in (data.metadata.metadata or {}), data.metadata.metadata
    expected = {r[0]: r for r in [plain(k) for k in range(60)]} | {r[0]: r for r in rows}
    assert_readers_agree(table, expected.values(), columns, java)


@pytest.mark.parametrize("evolved", [False, True], ids=["one-spec", "evolved"])
def test_an_upserts_rows_and_keys_come_from_the_same_tasks(lake, java, monkeypatch, evolved) -> None:  # type: ignore[no-untyped-def]
    """An upsert by equality deletes into a table pyarrow writes: each partition's data file and key
    file are written by the same tasks (one pass over the source), the same rows in each. After
    partition evolution the keys are partitioned by the older spec of the live files, the new rows
    by the current one: two writes."""
    columns, schema = PLAIN, PLAIN_SCHEMA
    table = lake.create_table(
        "db.t",
        lake.spark.createDataFrame([plain(k) for k in range(40)], schema),
        partition_by=["bucket(4, k)"],
        identifier=["k"],
    )
    if evolved:
        table.replace_partition_field("bucket(4, k)", "bucket(2, k)")
    paired = []
    write = equality_writes.write_rows_and_keys
    monkeypatch.setattr(equality_writes, "write_rows_and_keys", lambda *a: paired.append(1) or write(*a))
    expected = {k: plain(k) for k in range(40)}
    before = {f.path for f in table.files().data}
    rows = [plain(k, 1) for k in (*range(0, 40, 3), 100, 101)]
    result = rowops.merge(
        lake.spark.createDataFrame(rows, schema), table, on=["k"], strategy="equality-delete"
    )
    expected.update({r[0]: r for r in rows})
    files = table.files()
    new = {f.partition: f for f in files.data if f.path not in before}
    deletes = files.equality_deletes
    assert len(paired) == (0 if evolved else 1) and result.delete_files_added == len(deletes)
    assert all("/new-arrow-" in f.path for f in new.values()) and all("/eq-arrow-" in d.path for d in deletes)
    if not evolved:  # the same partitions, the same rows
        assert sorted((d.partition, d.record_count) for d in deletes) == sorted(
            (p, f.record_count) for p, f in new.items()
        )
    assert sum(f.record_count for f in new.values()) == len(rows)
    if not evolved:
        assert_readers_agree(table, expected.values(), columns, java)
        return
    # DuckDB 1.5.5 stops on equality deletes of another spec than the files' (test_partition_evolution)
    names = table.to_df().columns
    ours = [tuple(r[names.index(c)] for c in columns) for r in rowops_rows(table, None)]
    assert_same_rows(list(expected.values()), ours, columns, "rowops")
    if java is not None:
        assert_same_rows(list(expected.values()), java.read(table.metadata_location), columns, "iceberg-java")
