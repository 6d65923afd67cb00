"""Reading exactly the snapshot's files when Spark lists their directories (``exec/spark/listing.py``).

From ``rowops.scan.directory-listing-min-files`` files on, rowops hands Spark the files' directories
and keeps the named files by ``_metadata.file_path``; here the threshold is 1, so every read lists
directories, and an orphan Parquet file with the table's schema (a copy of a live file) sits next to
the live files: reading it would duplicate rows.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import DataFrame, SparkSession

import rowops
from rowops import errors
from rowops.exec.spark.listing import DISCOVERY_CONF, MIN_FILES, MIN_FILES_CONF, min_files
from rowops.exec.spark.session import session_conf
from rowops.exec.spark.stats import physical_plan
from rowops.meta.paths import parent, to_uri
from tests.conftest import make_lake
from tests.readers import assert_readers_agree
from tests.spark.spark_metrics import stages_run
from tests.spark.tables import COLUMNS, Layout, Oracle, frame, make_row


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def lake(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    return make_lake(request.param, request)


@pytest.fixture()
def listing(spark: SparkSession) -> Iterator[None]:
    """Every read of this test lists directories (threshold 1), restored afterwards."""
    with session_conf(spark, {MIN_FILES_CONF: "1"}):
        yield


def plant_orphans(table) -> list[str]:  # type: ignore[no-untyped-def]
    """A copy of a live data file next to every live data file's directory, named like Spark's files."""
    io = table.lake.catalog.io
    planted = []
    for directory in sorted({parent(f.path) for f in table.files().data}):
        live = next(f.path for f in table.files().data if parent(f.path) == directory)
        with io.new_input(to_uri(live)).open() as source:
            data = source.read()
        orphan = f"{directory}/part-99999-0000-orphan.c000.parquet"
        with io.new_output(to_uri(orphan)).create(overwrite=True) as out:
            out.write(data)
        planted.append(orphan)
    return planted


def key_versions(rows: DataFrame | Oracle) -> list[tuple[object, ...]]:
    """(k, every other column as text) of each row, sorted: duplicates (an orphan read) show."""
    values = rows.values() if isinstance(rows, Oracle) else [tuple(r) for r in rows.collect()]
    return sorted((v[0], repr(v[1:3]), v[-1]) for v in values)


def test_orphans_next_to_live_files_are_never_read(lake, listing, strategy, java) -> None:  # type: ignore[no-untyped-def]
    layout = Layout("bucket", ("bucket(4, k)",), ("k",))
    rows = [make_row(k) for k in range(60)]
    table = lake.create_table(
        "db.t", frame(lake.spark, rows), partition_by=["bucket(4, k)"], identifier=["k"]
    )
    oracle = Oracle(layout, rows)
    assert len(plant_orphans(table)) == 4
    df = table.to_df()
    plan = physical_plan(df)
    assert ".file_path IN (" in plan and "part-99999" not in plan  # directories listed, files kept
    assert key_versions(df) == key_versions(oracle)
    for version, keys in enumerate([range(0, 70, 4), range(1, 60, 9)], start=1):
        changes = [make_row(k, version) for k in keys]
        rowops.merge(frame(lake.spark, changes), table, on=["k"], strategy=strategy)
        oracle.upsert(changes)
        plant_orphans(table)  # also next to the files (and deletes) this merge wrote
        assert key_versions(table.to_df()) == key_versions(oracle)
    rowops.delete(table, where="k % 5 = 0", strategy=strategy if strategy != "equality-delete" else "auto")
    oracle.delete_keys([r for r in oracle.values() if r[0] % 5 == 0])
    assert_readers_agree(table, oracle.values(), COLUMNS, java)


def test_a_threshold_that_is_not_a_number_is_refused(local_lake, spark) -> None:  # type: ignore[no-untyped-def]
    table = local_lake.create_table("db.t", spark.range(10).toDF("k"))
    with (
        session_conf(spark, {MIN_FILES_CONF: "-3"}),
        pytest.raises(errors.InvalidInputError, match="directory-listing-min-files"),
    ):
        table.to_df()


def test_directories_are_listed_by_default_on_object_storage_only(spark) -> None:  # type: ignore[no-untyped-def]
    assert spark.conf.get(MIN_FILES_CONF, None) is None
    assert (min_files(spark, remote=True), min_files(spark, remote=False)) == (MIN_FILES, 0)


def test_reads_resolve_files_on_the_driver_in_any_session(lake, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A user's session keeps Spark's parallel-discovery threshold (32): a read of more files than that
    must not start a listing job (one per DataFrame, up to 10,000 tasks)."""
    spark = lake.spark
    rows = spark.range(40).selectExpr("id", "CAST(id AS INT) AS g")
    table = lake.create_table("db.t", rows, partition_by=["g"])  # 40 files in 40 directories
    assert len(table.files().data) == 40
    with session_conf(spark, {DISCOVERY_CONF: "32"}):
        before = stages_run(spark)
        table.to_df()
        assert stages_run(spark) == before, "a Spark job ran while creating the DataFrame"
        assert spark.conf.get(DISCOVERY_CONF) == "32"  # restored
        assert sorted(r.id for r in table.to_df().collect()) == list(range(40))
