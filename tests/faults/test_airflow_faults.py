"""Issue 6 through real Airflow runs (dag.test() with real spark-submit, local mode):
* killed processes + retries: the first attempt of a chain SIGKILLs its own
  spark-submit while its subtasks write; Airflow's retry gives exactly the
  output of a clean run (exchange-fed downstream chain, Parquet/CSV/JSON files,
  SQL table), and no leftovers remain that a later run could trip over;
* concurrency: two runs of one DAG and a run of another DAG at once, sharing
  the exchange root, the run store and a SQL table, do not interfere.
Few spark-submit runs on purpose (each costs 10+ s on a shared 2-core machine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pyarrow.parquet as pq
import pytest

from .helpers import csv_rows, json_rows, multiset, parquet_rows, sql_rows

pytestmark = [pytest.mark.e2e, pytest.mark.airflow]
HERE = os.path.dirname(os.path.abspath(__file__))


def run_dag(env, dags, dag_id, logical_date=None, timeout=1200) -> dict:
    cmd = [sys.executable, os.path.join(HERE, "af_run_fault_dag.py"), os.path.join(dags, "af_fault_dags.py"), dag_id]
    if logical_date:
        cmd.append(logical_date)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    lines = [l for l in out.stdout.strip().splitlines() if l.startswith("{\"run_id\"")]
    assert lines, f"dag.test() of {dag_id} printed no result:\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}"
    result = json.loads(lines[-1])
    result["log"] = out.stdout + out.stderr
    return result


def _sql(db, table, dag_id, key):
    rows = sql_rows(db, table, key)  # drops _run_id
    from collections import Counter

    out = Counter()
    for row, n in rows.items():
        d = dict(row)
        if d.pop("_dag_id") == dag_id:
            out[tuple(sorted(d.items()))] += n
    return out


def test_spark_submit_killed_mid_write_then_retry_gives_clean_output(fault_airflow_home, spark, tmp_path):
    env, dags, _ = fault_airflow_home
    home = env["AIRFLOW_HOME"]
    out_root = os.path.join(home, "flinkchain", "output")
    os.makedirs(out_root, exist_ok=True)
    marker = os.path.join(out_root, "kill-spark-submit.marker")
    open(marker, "w").close()

    result = run_dag(env, dags, "af_fault_kill")
    tasks = result["tasks"]
    assert result["state"] == "success", (tasks, result["log"][-8000:])
    assert not os.path.exists(marker), "the first attempt did not reach the kill"
    assert tasks["killed.work"] == ["success", 2], tasks  # attempt 1 was killed, attempt 2 retried it
    assert all(state == "success" for state, _ in tasks.values()), tasks

    from airflow_flinkchain.airflow.paths import run_key

    key = run_key(result["run_id"])
    out = os.path.join(out_root, "killed", key)
    db = os.path.join(home, "flinkchain", "examples.db")

    # The clean run: the same pipeline through execute() (no marker: nothing is killed).
    sys.path.insert(0, dags)
    from af_fault_dags import kill_pipeline

    ref_db = tmp_path / "ref.db"
    ref = kill_pipeline(str(tmp_path / "out"), f"sqlite:///{ref_db}", name="killed")
    ref.execute(spark=spark, run_id="ref", context={"run_key": "ref"}, exchange_root=str(tmp_path / "ex"))
    ref_out = tmp_path / "out" / "killed" / "ref"
    assert parquet_rows(os.path.join(out, "pq")) == parquet_rows(str(ref_out / "pq"))
    assert sum(parquet_rows(os.path.join(out, "pq")).values()) == 300
    assert csv_rows(os.path.join(out, "csv")) == csv_rows(str(ref_out / "csv"))
    assert json_rows(os.path.join(out, "json")) == json_rows(str(ref_out / "json"))
    assert parquet_rows(os.path.join(out, "per_tag")) == parquet_rows(str(ref_out / "per_tag"))  # via the exchange
    assert _sql(db, "killed_rows", "af_fault_kill", key) == _sql(str(ref_db), "killed_rows", "killed", "ref")
    assert sum(_sql(db, "killed_rows", "af_fault_kill", key).values()) == 300

    # Leftovers: the teardown dropped the run's exchange area (attempt dirs included); next to
    # the file sinks only hidden staging dirs of the killed attempt may remain, which readers
    # (Spark, pyarrow, this runtime) ignore.
    area = os.path.join(home, "flinkchain", "exchange", "af_fault_kill", key)
    assert not os.path.exists(area), os.listdir(area)
    visible = sorted(n for n in os.listdir(out) if not n.startswith((".", "_")))
    assert visible == ["csv", "json", "per_tag", "pq"], os.listdir(out)
    for name in visible:
        assert all(not f.startswith(".") or f.endswith(".crc") for f in os.listdir(os.path.join(out, name)))
    hidden = sorted(n for n in os.listdir(out) if n.startswith("."))
    assert all(".flinkchain-1" in n for n in hidden), hidden  # only the killed attempt's staging

    from airflow_flinkchain.store import RunStore

    store = RunStore(f"sqlite:///{os.path.join(home, 'flinkchain_store.db')}")
    metrics = store.get_run_metrics("af_fault_kill", result["run_id"])
    assert metrics["state"] == "success"
    ops = {o["name"]: o for c in metrics["chains"] for o in c["operators"]}
    assert ops["work"]["records_in"] == 300 and ops["per_tag"]["records_out"] == 4


def test_concurrent_runs_of_one_dag_and_another_dag(fault_airflow_home):
    env, dags, _ = fault_airflow_home
    home = env["AIRFLOW_HOME"]
    runs = [("af_conc_a", "2026-02-01T00:00:00+00:00"), ("af_conc_a", "2026-02-02T00:00:00+00:00"),
            ("af_conc_b", "2026-02-01T00:00:00+00:00")]
    with ThreadPoolExecutor(len(runs)) as pool:
        results = list(pool.map(lambda r: run_dag(env, dags, *r), runs))
    run_ids = [r["run_id"] for r in results]
    assert run_ids[0] != run_ids[1]  # two runs of af_conc_a at once (a shared run id across DAGs:
    # see test_types_exchange_concurrency.py, dag.test() derives manual run ids from the clock)
    from airflow_flinkchain.airflow.paths import run_key
    from airflow_flinkchain.store import RunStore

    store = RunStore(f"sqlite:///{os.path.join(home, 'flinkchain_store.db')}")
    db = os.path.join(home, "flinkchain", "examples.db")
    for (dag_id, _), result in zip(runs, results):
        assert result["state"] == "success", (dag_id, result["tasks"], result["log"][-6000:])
        factor = 2 if dag_id == "af_conc_a" else 3
        values = [x * factor for x in range(100)]
        key = run_key(result["run_id"])
        sums = pq.read_table(os.path.join(home, "flinkchain", "output", dag_id[3:], key)).to_pylist()
        assert multiset(sums) == multiset({"v": sum(v for v in values if v % 5 == k)} for k in range(5)), dag_id
        assert _sql(db, "conc_rows", dag_id, key) == multiset({"v": v} for v in values), dag_id
        metrics = store.get_run_metrics(dag_id, result["run_id"])
        assert metrics["state"] == "success"
        assert {o["name"]: o["records_in"] for c in metrics["chains"] for o in c["operators"]}["scale"] == 100
        assert not os.path.exists(os.path.join(home, "flinkchain", "exchange", dag_id, key))
