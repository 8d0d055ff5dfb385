# Two commands do all set-up on a fresh machine (Python 3.11 + Java 17):
#   make demo   - run an example pipeline end to end through Airflow + spark-submit
#                 (make demo DEMO_ARGS=stream: the stream-runs example, three slices and a drain;
#                  make demo DEMO_ARGS=cluster: the same on a standalone Spark cluster, every location on S3)
#   make test   - run the whole test suite
# Both create .venv and install what they need, idempotently.

PYTHON ?= python3
VENV := .venv
BIN := $(abspath $(VENV))/bin
STAMP := $(VENV)/.installed
PYSPARK_VERSION := $(shell sed -n 's/^pyspark==//p' requirements.txt)
export PATH := $(BIN):$(PATH)
export PYSPARK_PYTHON := $(BIN)/python
export PYSPARK_DRIVER_PYTHON := $(BIN)/python
BUILD := $(abspath build)
export AIRFLOW_HOME ?= $(BUILD)/airflow_home
export AIRFLOW__CORE__LOAD_EXAMPLES := False
export AIRFLOW__CORE__DAGS_FOLDER ?= $(abspath dags)
export AIRFLOW_CONN_SPARK_DEFAULT ?= {"conn_type":"spark","host":"local[2]"}

.PHONY: venv system-deps airflow-db nats test test-shared-nothing test-fast demo bench bench-airflow bench-flink-venv plan clean

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml setup.py airflow_flinkchain/runtime/core/_flatcheck.c
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -U pip wheel setuptools
	$(BIN)/pip install -q -r requirements.txt -r requirements-dev.txt
	# pyspark-client (pulled by the Spark provider) shares pyspark/: make pyspark's files win.
	$(BIN)/pip install -q --force-reinstall --no-deps pyspark==$(PYSPARK_VERSION)
	$(BIN)/pip install -q --no-deps --no-build-isolation -e .
	$(BIN)/python -m airflow_flinkchain.versions
	touch $(STAMP)

venv: $(STAMP)

# Debian packages the browser test and the CDC tests (initdb, pg_ctl) need (CI runs as root).
system-deps:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	@test -x /usr/lib/postgresql/15/bin/initdb || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 >/dev/null; }

airflow-db: venv
	mkdir -p $(AIRFLOW_HOME)
	$(BIN)/airflow db migrate >$(BUILD)/airflow-db-migrate.log 2>&1 || { tail -50 $(BUILD)/airflow-db-migrate.log; exit 1; }

# mkdocs without -q: --strict counts only the warnings it logs, and -q hides them.
# NATS JetStream for the connector tests (127.0.0.1:4222): started here only when nothing listens there.
nats:
	@$(BIN)/python -c "import socket; socket.create_connection(('127.0.0.1', 4222), 2)" 2>/dev/null || { \
	  command -v nats-server >/dev/null 2>&1 || { apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server >/dev/null; }; \
	  mkdir -p $(BUILD)/nats && nohup nats-server -js -a 127.0.0.1 -p 4222 -sd $(BUILD)/nats \
	    >$(BUILD)/nats.log 2>&1 & sleep 2; }

test: venv system-deps airflow-db nats
	$(BIN)/lint-imports  # layering contracts: pyproject.toml [tool.importlinter]
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -d $(BUILD)/site
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=25 tests

# Only the example DAGs on a Spark cluster whose machines share only an S3 server (root: mount
# namespaces); make test runs them too.
test-shared-nothing: venv system-deps airflow-db
	$(BIN)/python -m pytest -q -p no:cacheprovider -m shared_nothing tests/cluster

# Planner and rendering tests only: no Spark, no Airflow run, no cluster.
test-fast: venv
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q -m "not spark and not airflow and not e2e and not browser and not cluster" tests

demo: venv airflow-db
	$(BIN)/python -m airflow_flinkchain.demo $(DEMO_ARGS)

# make bench BENCH_ARGS="--quick --only runtime,parse --repeat 1": see python -m benchmarks.run --help
bench: venv airflow-db
	$(BIN)/python -m benchmarks.run $(BENCH_ARGS)

# PyFlink for `make bench`'s flink section, in its own venv (it pins its own pyarrow/pandas/beam).
bench-flink-venv:
	test -x .venv-flink/bin/python || $(PYTHON) -m venv .venv-flink
	.venv-flink/bin/pip install -q apache-flink==2.3.0

# Same 8-operator pipeline through Airflow, chained (2 tasks) vs unchained (8 tasks).
bench-airflow: venv airflow-db
	$(BIN)/python -m benchmarks.airflow_bench

clean:
	rm -rf build .pytest_cache
