"""End to end: example DAGs through Airflow (dag.test()) with real spark-submit in local mode.

Few runs on purpose (each spark-submit costs 10-60 s on a shared 2-core machine)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections import Counter

import pyarrow.parquet as pq
import pytest

from conftest import run_dag

pytestmark = [pytest.mark.e2e, pytest.mark.airflow]


def rows(path: str) -> Counter:
    table = pq.read_table(path)
    return Counter(tuple(sorted(r.items())) for r in table.to_pylist())


def sql_rows(db: str, table: str, run_column: str = "_run_id") -> dict:
    con = sqlite3.connect(db)
    try:
        cur = con.execute(f"select * from {table}")
        names = [d[0] for d in cur.description]
        by_run: dict = {}
        for r in cur.fetchall():
            rec = dict(zip(names, r))
            rec.pop("_dag_id", None)  # the DAG (or pipeline) that wrote the row
            by_run.setdefault(rec.pop(run_column), Counter())[tuple(sorted(rec.items()))] += 1
        return by_run
    finally:
        con.close()


def test_orders_dag_matches_execute_and_chain_rerun_is_idempotent(airflow_home, spark, tmp_path):
    env, dags = airflow_home
    result = run_dag(env, os.path.join(dags, "af_test_dags.py"), "af_orders_keep")
    assert result["state"] == "success", result["log"][-6000:]
    assert set(result["tasks"].values()) == {"success"}, result["tasks"]
    assert sorted(result["tasks"]) == ["orders.late_per_customer", "orders.orders", "orders.pipeline_setup",
                                       "orders.pipeline_teardown", "orders.revenue_per_region"]

    from airflow_flinkchain.airflow.paths import run_key

    home = env["AIRFLOW_HOME"]
    key = run_key(result["run_id"])
    out = os.path.join(home, "flinkchain", "output", "orders", key)
    db = os.path.join(home, "flinkchain", "examples.db")

    # The same pipeline through execute() (in-process Spark), other output dir and database.
    sys.path.insert(0, dags)
    from flinkchain_orders import orders_pipeline

    sample = os.path.join(home, "flinkchain", "sample")
    ref_db = tmp_path / "ref.db"
    ref = orders_pipeline(sample, str(tmp_path / "out"), f"sqlite:///{ref_db}")
    ref.execute(spark=spark, run_id="ref", context={"run_key": "ref"}, exchange_root=str(tmp_path / "ex"))
    for name in ("revenue_per_region", "late_per_customer"):
        assert rows(os.path.join(out, name)) == rows(str(tmp_path / "out" / "orders" / "ref" / name)), name
    airflow_sql = sql_rows(db, "revenue_per_region")
    assert airflow_sql[key] == sql_rows(str(ref_db), "revenue_per_region")["ref"]

    # keep_exchange=True: the exchange area survives the teardown.
    area = os.path.join(home, "flinkchain", "exchange", "af_orders_keep", key)
    assert os.path.isdir(os.path.join(area, "flag_late__revenue_per_region"))

    # The run store saw the run and every chain attempt.
    from airflow_flinkchain.store import RunStore

    store = RunStore(f"sqlite:///{os.path.join(home, 'flinkchain_store.db')}")
    runs = store.list_runs("af_orders_keep")
    assert [r["state"] for r in runs if r["run_id"] == result["run_id"]] == ["success"]

    # Re-run one chain of the finished run (what a retry or a clear does): same output, no duplicates.
    before = rows(os.path.join(out, "revenue_per_region"))
    rerun = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "airflow"), "tasks", "test", "af_orders_keep",
         "orders.revenue_per_region", result["run_id"]],
        env=env, capture_output=True, text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stdout[-4000:] + rerun.stderr[-4000:]
    assert rows(os.path.join(out, "revenue_per_region")) == before
    assert sql_rows(db, "revenue_per_region")[key] == airflow_sql[key]


def test_failing_chain_fails_the_run_and_teardown_still_runs(airflow_home):
    env, dags = airflow_home
    result = run_dag(env, os.path.join(dags, "af_test_dags.py"), "af_failing")
    assert result["state"] == "failed"
    assert result["tasks"]["failing.numbers"] == "failed"
    assert result["tasks"]["failing.total"] == "upstream_failed"
    assert result["tasks"]["failing.pipeline_setup"] == "success"
    assert result["tasks"]["failing.pipeline_teardown"] == "success"
    assert "seven is not allowed" in result["log"]
    assert os.path.exists(os.path.join(env["AIRFLOW_HOME"], "flinkchain", "output", "failing.disposed"))
    from airflow_flinkchain.store import RunStore

    store = RunStore(f"sqlite:///{os.path.join(env['AIRFLOW_HOME'], 'flinkchain_store.db')}")
    assert [r["state"] for r in store.list_runs("af_failing") if r["run_id"] == result["run_id"]] == ["failed"]
