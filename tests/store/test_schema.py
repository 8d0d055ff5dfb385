from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest
from sqlalchemy import inspect, text

from airflow_flinkchain.store import LATEST_VERSION, RunStore, SchemaTooNewError, resolve_store_url
from airflow_flinkchain.store.engine import _create, dispose_engines
from airflow_flinkchain.store.migrations import upgrade


def test_schema_is_created_on_first_connect(store_url):
    engine = RunStore(store_url).engine
    names = set(inspect(engine).get_table_names())
    assert {"flinkchain_schema_version", "flinkchain_runs", "flinkchain_operator_metrics"} <= names
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version FROM flinkchain_schema_version")).scalar() == LATEST_VERSION
    assert upgrade(engine) == LATEST_VERSION  # already there: nothing to do


def test_concurrent_first_connects_upgrade_once(store_url):
    """Many chain tasks start at once against an empty store."""
    engines = [_create(store_url) for _ in range(8)]
    found, errors = [], []

    def connect(engine):
        try:
            found.append(upgrade(engine))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=connect, args=(e,)) for e in engines]
    [t.start() for t in threads]
    [t.join() for t in threads]
    [e.dispose() for e in engines]
    assert not errors
    assert found.count(0) == 1 and found.count(LATEST_VERSION) == 7


def test_a_newer_schema_is_refused(store_url):
    engine = RunStore(store_url).engine
    with engine.begin() as conn:
        conn.execute(text("UPDATE flinkchain_schema_version SET version = 999"))
    dispose_engines()
    with pytest.raises(SchemaTooNewError, match="upgrade the airflow-flinkchain package"):
        RunStore(store_url)


def test_store_url_resolution(monkeypatch, tmp_path):
    for env in ("FLINKCHAIN_STORE_URL", "AIRFLOW__FLINKCHAIN__STORE_URL"):
        monkeypatch.delenv(env, raising=False)
    assert resolve_store_url("sqlite:///x.db") == "sqlite:///x.db"
    monkeypatch.setenv("AIRFLOW__FLINKCHAIN__STORE_URL", "postgresql://a/b")
    assert resolve_store_url() == "postgresql://a/b"
    monkeypatch.setenv("FLINKCHAIN_STORE_URL", "sqlite:///y.db")
    assert resolve_store_url() == "sqlite:///y.db"


def test_default_is_sqlite_under_airflow_home(tmp_path):
    env = {k: v for k, v in os.environ.items() if "STORE_URL" not in k}
    env["AIRFLOW_HOME"] = str(tmp_path)
    code = "from airflow_flinkchain.store import resolve_store_url; print(resolve_store_url())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"sqlite:///{tmp_path}/flinkchain_store.db"


def test_importing_the_store_imports_neither_airflow_nor_spark():
    code = ("import sys, airflow_flinkchain.store; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('airflow', 'pyspark')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_v1_store_gets_the_watermark_column(store_url):
    """Version 2 adds the gauge columns (the watermark) to a store created before them, and
    metrics recorded then carry the watermark."""
    from tests.store.sample import metrics, plan

    engine = RunStore(store_url).engine
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE flinkchain_operator_metrics DROP COLUMN watermark"))
        conn.execute(text("UPDATE flinkchain_schema_version SET version = 1"))
    dispose_engines()
    store = RunStore(store_url)
    columns = {c["name"] for c in inspect(store.engine).get_columns("flinkchain_operator_metrics")}
    assert "watermark" in columns
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT version FROM flinkchain_schema_version")).scalar() == LATEST_VERSION == 5
    store.start_run("orders_dag", "run_1", plan=plan(), started_at="2025-01-01T10:00:00Z")
    store.record_attempt(metrics(chain="by_customer"), try_number=1)
    chains = store.get_run_metrics("orders_dag", "run_1")["chains"]
    assert [c["watermark"] for c in chains if c["chain_id"] == "by_customer"] == [1200]


def test_a_v2_store_keeps_operator_time_below_a_millisecond(store_url):
    """Version 3 keeps the operator time's fraction: a store whose time column was an integer
    (PostgreSQL rounded 0.25 ms to 0) is upgraded and then keeps microseconds."""
    from tests.store.sample import metrics, plan

    engine = RunStore(store_url).engine
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("ALTER TABLE flinkchain_operator_metrics ALTER COLUMN time_ms TYPE BIGINT"))
        conn.execute(text("UPDATE flinkchain_schema_version SET version = 2"))
    dispose_engines()
    store = RunStore(store_url)
    store.start_run("orders_dag", "run_1", plan=plan(), started_at="2025-01-01T10:00:00Z")
    doc = metrics(chain="by_customer")
    for op in doc["operators"]:
        op["time_ms"] = 0.125
    store.record_attempt(doc, try_number=1)
    [chain] = [c for c in store.get_run_metrics("orders_dag", "run_1")["chains"] if c["chain_id"] == "by_customer"]
    subtasks = {o["key"]: o["subtasks"] for o in chain["operators"]}
    assert {o["key"]: o["time_ms"] for o in chain["operators"]} == {k: 0.125 * n for k, n in subtasks.items()}


def test_a_v4_store_gets_the_run_error_column(store_url):
    """Version 5 adds the runs' error (a refused stream run's reason) to a store created before it."""
    engine = RunStore(store_url).engine
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE flinkchain_runs DROP COLUMN error"))
        conn.execute(text("UPDATE flinkchain_schema_version SET version = 4"))
    dispose_engines()
    store = RunStore(store_url)
    assert "error" in {c["name"] for c in inspect(store.engine).get_columns("flinkchain_runs")}
    store.refuse_run("orders_dag", "run_1", "refused")
    assert store.get_run_metrics("orders_dag", "run_1")["error"] == "refused"
