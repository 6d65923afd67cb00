# rowops — set-up, main job and tests. Everything installs into .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PYSPARK_PYTHON := $(abspath $(PY))

.PHONY: install run test test-s3 test-slow test-crash test-cluster test-all lint bench bench-log bench-conflicts clean

install: $(STAMP)

$(STAMP): pyproject.toml tools/iceberg_jars.py tools/s3_jars.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test]"
	$(PY) tools/iceberg_jars.py
	$(PY) tools/s3_jars.py
	touch $(STAMP)

run: install
	$(PY) -m spark_jobs.upsert_demo --lake lake --sf 0.1

lint: install
	$(VENV)/bin/ruff check rowops tests tpcds spark_jobs tools
	$(VENV)/bin/ruff format --check rowops tests tpcds spark_jobs tools
	$(VENV)/bin/mypy

test: install lint
	$(PY) -m pytest -q -m "not slow and not s3"

# the behaviour and concurrency suites again, on lakes on an S3 server (moto on loopback)
test-s3: install
	$(PY) -m pytest -q -m "s3 and not slow" tests/spark/test_behaviour.py tests/spark/test_concurrency.py tests/spark/test_s3.py

test-slow: install
	$(PY) -m pytest -q -m slow

# multi-process transaction suites (also part of test-slow): concurrent transfers, SIGKILL crashes
test-crash: install
	$(PY) -m pytest -q -rP -m crash tests/spark/test_transaction_processes.py

# a Spark standalone master and two workers on loopback (also part of test-slow; run it alone: one
# SparkContext per process): MERGE/UPDATE/DELETE on executors that get rowops only from the driver
test-cluster: install
	$(PY) -m pytest -v -m cluster tests/cluster

test-all: install lint
	$(PY) -m pytest -q

bench: install
	$(PY) -m tpcds.bench --sf 1 --out tpcds/results

# Lake log scale: commit/open latency at 1/1,000/10,000 tables x 1,000/100,000 versions (minutes).
# On a contended disk, build and time the 100,000-version logs elsewhere:
#   make bench-log LOG_BENCH_ARGS="--big-work /dev/shm/rowops-log-scale"
LOG_BENCH_ARGS ?=
bench-log: install
	$(PY) -m tpcds.log_scale --out tpcds/results $(LOG_BENCH_ARGS)

# false aborts of row- vs file-level conflict detection on racing updates (tpcds/false_aborts.py)
bench-conflicts: install
	$(PY) -m tpcds.false_aborts --ops 11 --races 2 --out tpcds/results

clean:
	rm -rf lake spark-warehouse .pytest_cache .mypy_cache .ruff_cache
