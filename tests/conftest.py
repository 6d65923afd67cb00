"""Shared fixtures: one local SparkSession for the whole run, a fresh lakehouse per test."""

from __future__ import annotations

import os
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
from pyspark.sql import SparkSession

from rowops.plan.strategy import COPY_ON_WRITE, EQUALITY_DELETE, POSITION_DELETE
from tests.jvm_options import spark_conf as jvm_conf
from tests.oracles.java_reader import JavaIcebergReader, hadoop_s3_conf, java_oracle_available
from tests.oracles.s3_server import S3Server, s3_server
from tests.slow_tests import SLOW_FUNCTIONS, SLOW_IN_MAKE_TEST
from tools import s3_jars

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("ROWOPS_CHECK_METADATA_CACHE", "1")  # every written metadata must parse back equal


STRATEGY_NAMES = (COPY_ON_WRITE, POSITION_DELETE, EQUALITY_DELETE)
FULL_MATRIX_FILES = {"test_behaviour.py", "test_behaviour_v3.py"}  # every strategy in the fast suite
# The fast suite's longest files, longest first (measured with --durations; update from make test's
# list): they run first, so that no pytest-xdist worker starts one of them last while the other has
# nothing left to do (``--dist loadfile`` hands out whole files; the quick unit tests come last).
LONGEST_FILES = (
    "test_behaviour.py",
    "test_schema_evolution.py",
    "test_readme.py",
    "test_transforms.py",
    "test_lake_model.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that read through Iceberg's Java runtime are skipped under pyspark 4.x (jar for 3.5);
    outside the behaviour suites, a test run once per write strategy runs one of them in the fast
    suite (:func:`rotate_strategies`)."""
    for item in items:  # first: the rotations then keep one of the other variants
        if item.nodeid in SLOW_IN_MAKE_TEST or item.nodeid.split("[", 1)[0] in SLOW_FUNCTIONS:
            item.add_marker(pytest.mark.slow)
    rotate_strategies(items)
    rotate_families(items)
    longest_first(items)
    if java_oracle_available():
        return
    skip = pytest.mark.skip(reason="Iceberg's Java oracle needs Spark 3.5 (its jar); pyspark 4.x runs here")
    for item in items:
        if item.get_closest_marker("java"):
            item.add_marker(skip)


def longest_first(items: list[pytest.Item]) -> None:
    """Move the tests of :data:`LONGEST_FILES` to the front, in that order; each file's tests, and every
    other file, keep their order (pytest-xdist's ``--dist loadfile`` schedules files in this order
    when run with ``--no-loadscope-reorder``, as ``make test`` does)."""
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


# Test families whose variants repeat one path at a high cost (measured: junit durations of the fast
# suite): ``make test`` runs one variant of each (by a hash of the family's name, the same on every run),
# ``make test-slow`` the others. In the behaviour suite a family is one test and one strategy: every
# strategy still runs, on one of the table layouts.
ROTATED_FAMILIES = {
    "tests/spark/test_behaviour.py::test_upsert",
    "tests/spark/test_behaviour_v3.py::test_upsert",
    "tests/spark/test_concurrency.py::test_upserts_of_the_same_new_key_serializable",
    "tests/spark/test_predicate_pruning.py::test_nulls_never_match_a_comparison",
    "tests/spark/test_arrow_writes.py::test_equality_delete_files_by_key_type",
    "tests/spark/test_optimizations.py::test_requested_copy_on_write_of_an_upsert_is_rewritten_by_key",
    "tests/spark/test_optimizations.py::test_auto_paydown_clears_the_read_debt_of_every_candidate",
    "tests/spark/test_optimizations.py::test_auto_copy_on_write_clears_paid_off_debt_of_partitions_it_does_not_touch",
    "tests/spark/test_transactions.py::test_two_transactions_inserting_the_same_new_key",
    "tests/spark/test_arrow_writes.py::test_new_rows_of_plain_columns_are_written_in_arrow",
    "tests/spark/test_column_defaults.py::test_merge_fills_write_defaults_and_keeps_initial_defaults",
    "tests/spark/test_partition_evolution.py::test_bad_spec_changes_leave_the_lake_unchanged",
    "tests/spark/test_nested_layout.py::test_sources_inside_lists_and_maps_are_refused",
    "tests/spark/test_arrow_rewrite.py::test_copy_on_write_rewrites_in_arrow_unless_disabled",
    "tests/spark/test_arrow_writes.py::test_string_keys_in_truncated_partitions",
    "tests/spark/test_reads.py::test_equality_deletes_of_many_generations_are_read_in_chunks",
}


# Markers are read with get_closest_marker, never `in item.keywords`: keywords hold the names of the
# parent directories too, so a checkout in a directory named "slow" or "s3" would match every test.


def rotate_families(items: list[pytest.Item]) -> None:
    """Mark ``slow`` all but one variant of each family of :data:`ROTATED_FAMILIES`."""
    families: dict[str, list[pytest.Item]] = {}
    for item in items:
        function = item.nodeid.split("[", 1)[0]
        if function in ROTATED_FAMILIES and not item.get_closest_marker("slow"):
            strategy = _strategy_of(item) if item.path.name in FULL_MATRIX_FILES else None
            storage = "s3" if item.get_closest_marker("s3") else "local"  # test-s3 keeps its own variant
            families.setdefault(f"{function}/{strategy}/{storage}", []).append(item)
    for family, members in families.items():
        function, strategy, _ = family.rsplit("/", 2)
        spread = STRATEGY_NAMES.index(strategy) if strategy in STRATEGY_NAMES else 0  # a layout each
        kept = sorted(m.nodeid for m in members)[(zlib.crc32(function.encode()) + spread) % len(members)]
        for item in members:
            if item.nodeid != kept:
                item.add_marker(pytest.mark.slow)


def _strategy_of(item: pytest.Item) -> str | None:
    """The one write strategy ``item`` is parametrized with (None: none, or several)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    found = [v for v in params.values() if isinstance(v, str) and v in STRATEGY_NAMES]
    return found[0] if len(found) == 1 else None


def rotate_strategies(items: list[pytest.Item]) -> None:
    """Mark ``slow`` all but one strategy of each test run once per write strategy.

    The behaviour suites (:data:`FULL_MATRIX_FILES`) run every strategy in ``make test``; other tests
    run one of them, chosen by a hash of the test's name so that each strategy keeps about a third
    of those tests, and the same one on every run; variants a test file marks slow itself are not
    candidates (else a test could lose every fast variant). ``make test-slow`` / ``make test-all`` run the rest
    (half of the fast suite's time went to such repetitions).
    """
    families: dict[str, list[tuple[pytest.Item, str]]] = {}
    for item in items:
        strategy = _strategy_of(item)
        already_slow = item.get_closest_marker("slow") is not None  # the file's own choice: never kept
        if strategy is not None and item.path.name not in FULL_MATRIX_FILES and not already_slow:
            families.setdefault(item.nodeid.replace(strategy, "*"), []).append((item, strategy))
    for family, members in families.items():
        present = sorted({strategy for _, strategy in members})
        kept = present[zlib.crc32(family.encode()) % len(present)]
        for item, strategy in members:
            if strategy != kept:
                item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A plain local SparkSession (no Iceberg jars), configured by rowops.

    Hadoop's S3A connector jars (test-only, ``tools/s3_jars.py``) are on its class path when they are
    extracted, so that S3 lakes can be tested; rowops itself adds no jars.
    """
    from rowops.exec.spark.session import configure

    builder = SparkSession.builder
    for key, value in {**s3_jars.session_conf(pyspark.__version__), **jvm_conf()}.items():
        builder = builder.config(key, value)
    session = (
        builder.master("local[2]")
        .appName("rowops-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield configure(session)
    session.stop()


@pytest.fixture()
def local_lake(spark: SparkSession, tmp_path: Path):  # type: ignore[no-untyped-def]
    import rowops

    return rowops.Lakehouse(tmp_path / "lake", spark=spark)


@pytest.fixture()
def lake(local_lake):  # type: ignore[no-untyped-def]
    """A fresh local lake (suites that run on both storages override it with ``make_lake``)."""
    return local_lake


@pytest.fixture(scope="session")
def s3(spark: SparkSession) -> Iterator[S3Server]:
    """A moto S3 server on loopback; the test session's Spark reaches it through S3A."""
    from rowops.meta.fileio import s3a_conf

    if not s3_jars.available():
        pytest.fail("S3A jars are missing: run `python tools/s3_jars.py` (make install does)")
    with s3_server() as server:
        for key, value in s3a_conf(server.options).items():  # the caller's session carries the settings
            spark.conf.set(key.removeprefix("spark.hadoop."), value)
        yield server


@pytest.fixture()
def s3_lake(spark: SparkSession, s3: S3Server):  # type: ignore[no-untyped-def]
    """A fresh lake in its own bucket on the S3 server."""
    import rowops

    return rowops.Lakehouse(f"s3://{s3.new_bucket()}/lake", spark=spark, storage_options=s3.options)


@pytest.fixture(scope="session")
def java(request: pytest.FixtureRequest) -> Iterator[JavaIcebergReader | None]:
    """Iceberg's Java reader in its own JVM, one per test process (the oracle suite shares it);
    ROWOPS_SKIP_JAVA=1 turns it off for quick local runs, and it is off under pyspark 4.x (the Iceberg
    jar is for Spark 3.5; DuckDB and PyIceberg still read).

    When the run selected S3 tests (marker or fixture) and the S3A jars are present it can read S3
    lakes too: it starts after the test S3 server, with its settings (Iceberg's path-based tables keep
    the Hadoop configuration of their first load). Runs without S3 tests start no S3 server for it.
    """
    if os.environ.get("ROWOPS_SKIP_JAVA") or not java_oracle_available():
        yield None
        return
    wants_s3 = s3_jars.available() and any(map(_uses_s3, request.session.items))
    hadoop = hadoop_s3_conf(request.getfixturevalue("s3").options) if wants_s3 else {}
    with JavaIcebergReader(hadoop_conf=hadoop, spark_conf=jvm_conf()) as reader:
        yield reader


def _uses_s3(item: pytest.Item) -> bool:
    """``item`` runs on the S3 server: marked ``s3``, or asks for the ``s3`` fixture (test_s3.py)."""
    return item.get_closest_marker("s3") is not None or "s3" in getattr(item, "fixturenames", ())


def make_lake(kind: str, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """The ``lake`` (local) or ``s3_lake`` fixture, by name: for suites run on both storages."""
    return request.getfixturevalue("s3_lake" if kind == "s3" else "local_lake")
