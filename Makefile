# rowops — set-up, main job and tests. Everything installs into .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PYSPARK_PYTHON := $(abspath $(PY))
# pyspark 4.x (.venv4; also the Spark Connect server's Python: rowops' deps, NOT rowops itself, which
# its tests import from this checkout) and a thin Spark Connect client (.venv-connect: pyspark-client).
PYSPARK4 ?= 4.2.1
PYSPARK_CLIENT ?= 4.2.0
VENV4 := .venv4
PY4 := $(VENV4)/bin/python
STAMP4 := $(VENV4)/.installed
VENVC := .venv-connect
PYC := $(VENVC)/bin/python
STAMPC := $(VENVC)/.installed
SPARK4_ENV := PYTHONPATH=$(CURDIR) PYSPARK_PYTHON=$(abspath $(PY4)) ROWOPS_SKIP_JAVA=1
CONNECT_ENV := PYTHONPATH=$(CURDIR) ROWOPS_CONNECT_SERVER_PYTHON=$(abspath $(PY4))
# the pyspark 4.x subset of `make test` (the full 4.x suite is `make test-spark4`): the compat layer (but
# its round-trip count), three of the behaviour suite's position-delete cases on a local lake (an upsert, a
# conditional MERGE, an UPDATE; Connect covers every strategy), the SQL text smoke pass
# (tests/sql_smoke.py), a change feed (test_feed_columns_and_their_types) and the named Spark jobs
SPARK4_SUBSET ?= tests/spark/test_compat.py tests/spark/test_behaviour.py tests/spark/test_sql.py tests/spark/test_change_feed.py tests/spark/test_observability.py
SPARK4_K ?= (compat and not long_lists) or (position-delete and (test_upsert or conditional_merge or update_where) and not test_sql) or sql_smoke or test_feed_columns or named_grouped

.PHONY: install install4 install-connect run pipeline-demo test test-s3 test-spark4 test-connect test-slow test-crash test-cluster test-all lint bench bench-cases bench-cases-sf10 bench-log bench-changes bench-conflicts bench-manifests bench-metadata clean

install: $(STAMP)

$(STAMP): pyproject.toml tools/iceberg_jars.py tools/s3_jars.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test]" "pyspark>=3.5,<3.6"  # 3.5 here: the Iceberg Java oracle's jar
	$(PY) tools/iceberg_jars.py
	$(PY) tools/s3_jars.py
	touch $(STAMP)

install4: $(STAMP4)

$(STAMP4): pyproject.toml
	test -x $(PY4) || $(PYTHON) -m venv $(VENV4)
	$(PY4) -m pip install -q --upgrade pip
	$(PY4) -m pip install -q "pyspark[connect]==$(PYSPARK4)" -e ".[test]"
	$(PY4) -m pip uninstall -q -y rowops  # keep the deps only: Connect's server must not find rowops
	touch $(STAMP4)

install-connect: $(STAMPC)

$(STAMPC): pyproject.toml
	test -x $(PYC) || $(PYTHON) -m venv $(VENVC)
	$(PYC) -m pip install -q --upgrade pip
	$(PYC) -m pip install -q "pyspark-client==$(PYSPARK_CLIENT)" "pyiceberg[pyarrow]>=0.12,<0.13" \
		"pyiceberg-core>=0.11" "pyroaring>=1.0" "mmh3>=4" "sqlglot>=30,<31" "pyarrow>=16" "pandas>=2.0" "boto3>=1.35" pytest \
		pytest-timeout "moto[server]>=5.2,<5.3" "duckdb==1.5.5" "duckdb-extension-iceberg==1.5.5" \
		"duckdb-extension-avro==1.5.5" "duckdb-extension-httpfs==1.5.5"
	touch $(STAMPC)

run: install
	$(PY) -m spark_jobs.upsert_demo --lake lake --sf 0.1

# the example pipeline (conf/store_sales_pipeline.toml) over TPC-DS store_sales change batches: batch 1,
# batch 1 again (a no-op), batch 2, then describe and history (docs/guide/pipelines.md, "Your first pipeline")
pipeline-demo: install
	$(PY) -m spark_jobs.pipeline_demo --lake lake-pipeline --sf 0.1

lint: install
	$(VENV)/bin/ruff check rowops tests tpcds spark_jobs tools
	$(VENV)/bin/ruff format --check rowops tests tpcds spark_jobs tools
	$(VENV)/bin/mypy

# the fast suite runs in TEST_WORKERS processes (pytest-xdist), a test file per process at a time, in
# collection order (--no-loadscope-reorder): the longest files first (LONGEST_FILES, tests/conftest.py),
# then the Spark suites, the many quick unit tests and doctests last, where they fill in for whichever
# worker is done first (xdist's default order, most tests first, left one-test Spark files such as the
# lake model to the end, one worker idle)
TEST_WORKERS ?= 2
FAST_PYTEST := -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=40

# The pyspark 4.x and Spark Connect venvs install (network and disk) while the fast suite runs (CPU);
# their log is printed if they fail. The pyspark 4.x subset and the Connect smoke then run side by side
# (each keeps about one core busy), the subset's log printed after.
test: install lint
	( $(MAKE) --no-print-directory install4 install-connect > .install-extra.log 2>&1; echo $$? > .install-extra.rc ) & \
	$(PY) -m pytest $(FAST_PYTEST) -m "not slow and not s3 and not connect"; suite=$$?; wait; \
	if [ "$$(cat .install-extra.rc)" != 0 ]; then cat .install-extra.log; exit 1; fi; exit $$suite
	( $(SPARK4_ENV) $(PY4) -m pytest -q -p no:cacheprovider -m "not slow and not s3 and not connect" \
		-k "$(SPARK4_K)" $(SPARK4_SUBSET) > .spark4-subset.log 2>&1; echo $$? > .spark4-subset.rc ) & \
	$(CONNECT_ENV) $(PYC) -m pytest -q -p no:cacheprovider -m connect tests/connect -k "smoke and not s3"; \
	connect=$$?; wait; cat .spark4-subset.log; [ "$$(cat .spark4-subset.rc)" = 0 ] && [ $$connect = 0 ]

# the behaviour suites (v2, and v3 with deletion vectors), the concurrency suite and auto's paydown
# rewrites again, on lakes on an S3 server (moto on loopback)
test-s3: install
	$(PY) -m pytest -q -m "s3 and not slow" tests/spark/test_behaviour.py tests/spark/test_behaviour_v3.py \
		tests/spark/test_concurrency.py tests/spark/test_s3.py tests/spark/test_optimizations.py

# the fast suite and the S3 suites on pyspark 4.x (classic); the Java oracle is skipped (its Iceberg jar
# is for 3.5)
test-spark4: install install4
	$(SPARK4_ENV) $(PY4) -m pytest -q -p no:cacheprovider -m "not slow and not connect"

# rowops from a thin Spark Connect client against a Spark Connect server (pyspark 4.x) on loopback
test-connect: install install4 install-connect
	$(CONNECT_ENV) $(PYC) -m pytest -q -p no:cacheprovider -rs -m connect tests/connect

# the long suites: property tests, the stateful lake model of issue 42 (3 seeds x 200 steps), stress
test-slow: install
	$(PY) -m pytest -q -m slow

# multi-process suites (also part of test-slow): concurrent transfers, SIGKILL crashes; writers with
# maintenance beside them, any process SIGKILLed at random (ROWOPS_CRASH_SEED, ROWOPS_LAKE_CRASH_*)
test-crash: install
	$(PY) -m pytest -q -rP -m crash tests/spark/test_transaction_processes.py tests/spark/test_lake_processes.py

# a Spark standalone master and two workers on loopback (also part of test-slow; run it alone: one
# SparkContext per process): MERGE/UPDATE/DELETE on executors that get rowops only from the driver
test-cluster: install
	$(PY) -m pytest -v -m cluster tests/cluster

test-all: install lint
	$(PY) -m pytest -q -m "not connect"

bench: install
	$(PY) -m tpcds.bench --sf 1 --out tpcds/results

# The paper's Cases 1-4 side by side with Iceberg + the tiny-table point (tpcds/bench_cases.py): SF 1,
# every engine, 2 runs; then SF 10, only what the SF 10 ratios need (1 run; reads cases-sf1.json for the
# best Iceberg mode per case and the SF 10 / SF 1 rows, so run bench-cases first). On an idle machine.
CASES_ARGS ?=
bench-cases: install
	$(PY) -m tpcds.bench_cases --sf 1 --out tpcds/results $(CASES_ARGS)

bench-cases-sf10: install
	$(PY) -m tpcds.bench_cases --sf 10 --sf10-subset --tiny-runs 0 --no-baseline --out tpcds/results $(CASES_ARGS)

# Lake log scale: commit/open latency at 1/1,000/10,000 tables x 1,000/100,000 versions (minutes).
# On a contended disk, build and time the 100,000-version logs elsewhere:
#   make bench-log LOG_BENCH_ARGS="--big-work /dev/shm/rowops-log-scale"
LOG_BENCH_ARGS ?=
bench-log: install
	$(PY) -m tpcds.log_scale --out tpcds/results $(LOG_BENCH_ARGS)

# planning/commit time vs file count (1,000 / 10,000 files, 1,000 commits), rowops vs Iceberg 1.10.2;
#   make bench-metadata METADATA_BENCH_ARGS="--files 1000,10000,100000"
METADATA_BENCH_ARGS ?=
bench-metadata: install
	$(PY) -m tpcds.metadata_scale --out tpcds/results $(METADATA_BENCH_ARGS)

# the change feed of one Case 2 batch per encoding vs the naive diff and the touched files (issue 45)
bench-changes: install
	$(PY) -m tpcds.bench_changes --sf 1 --out tpcds/results

# false aborts of row- vs file-level conflict detection on racing updates (tpcds/false_aborts.py)
bench-conflicts: install
	$(PY) -m tpcds.false_aborts --ops 11 --races 2 --out tpcds/results

# manifest paths vs commits: commit and live_files time at 1..1,000 small appends, merging on/off (minutes)
bench-manifests: install
	$(PY) -m tpcds.manifest_bench --out tpcds/results --label merge-cache

clean:
	rm -rf lake lake-pipeline data/pipeline spark-warehouse .pytest_cache .mypy_cache .ruff_cache
