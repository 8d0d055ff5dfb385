"""End to end: example DAGs through Airflow (dag.test()) with real spark-submit in local mode.

Few runs on purpose (each spark-submit costs 10-60 s on a shared 2-core machine)."""

from __future__ import annotations

import json
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

    # Each sink is an asset: one event per sink, emitted by the chain task that committed it.
    con = sqlite3.connect(os.path.join(home, "airflow.db"))
    events = con.execute("select e.source_task_id, e.extra from asset_event e where e.source_dag_id = "
                         "'af_orders_keep' and e.source_run_id = ?", (result["run_id"],)).fetchall()
    con.close()
    by_operator = {json.loads(extra)["operator"]: (task, json.loads(extra)) for task, extra in events}
    assert sorted(by_operator) == ["late_parquet", "region_parquet", "region_table"], events
    assert by_operator["region_table"][0] == "orders.revenue_per_region"
    assert by_operator["region_table"][1]["records_written"] == sum(airflow_sql[key].values())
    assert by_operator["late_parquet"][1]["records_written"] == sum(rows(os.path.join(out, "late_per_customer")).values())

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
    # The failed chain attempt is recorded with the runtime's error (the Chains tab shows it).
    chains = {c["chain_id"]: c for c in store.get_run_metrics("af_failing", result["run_id"])["chains"]}
    assert list(chains) == ["numbers"], chains
    numbers = chains["numbers"]
    assert numbers["state"] == "failed" and "seven is not allowed" in numbers["error"], numbers
    assert "explode" in numbers["error"] and numbers["spark_app_id"], numbers
    assert (numbers["attempt"], numbers["attempts"]) == ("1", 1), numbers


def test_event_time_example_dag_matches_execute_local_and_shows_watermarks(airflow_home, tmp_path):
    """dags/flinkchain_event_time.py (windows with lateness and a late side output, a
    KeyedProcessFunction with state and timers, STREAMING) through Airflow: the outputs equal the
    same pipeline's under execute_local(); the run store has each chain's watermark."""
    import glob
    import json

    env, dags = airflow_home
    result = run_dag(env, os.path.join(dags, "flinkchain_event_time.py"), "flinkchain_event_time")
    assert result["state"] == "success", result["log"][-6000:]
    assert sorted(result["tasks"]) == ["event_time.minute_stats", "event_time.overheat", "event_time.pipeline_setup",
                                       "event_time.pipeline_teardown", "event_time.readings"]

    from airflow_flinkchain.airflow.paths import run_key

    home = env["AIRFLOW_HOME"]
    out = os.path.join(home, "flinkchain", "output", "event_time", run_key(result["run_id"]))
    sys.path.insert(0, dags)
    import sample_data
    from flinkchain_event_time import event_time_pipeline

    event_time_pipeline(str(tmp_path / "out")).execute_local(context={"run_key": "ref"})
    ref = tmp_path / "out" / "event_time" / "ref"

    def json_lines(path) -> Counter:
        return Counter(json.dumps(json.loads(line), sort_keys=True)
                       for f in sorted(glob.glob(os.path.join(path, "*.json*"))) for line in open(f) if line.strip())

    for name in ("minute_stats", "alerts"):
        assert rows(os.path.join(out, name)) == rows(str(ref / name)), name
    assert json_lines(os.path.join(out, "late_readings")) == json_lines(str(ref / "late_readings"))
    # What the sample data makes happen: two overheat alerts of s02 (one hot spell is cut short by
    # a normal reading, its timer deleted), late firings (a minute twice), too-late readings.
    alerts = pq.read_table(os.path.join(out, "alerts")).to_pylist()
    start = sample_data.SENSOR_START_MS
    assert sorted((a["sensor"], a["alert_at"] - start) for a in alerts) == [("s02", 203837), ("s02", 285184)]
    minutes = Counter((r["sensor"], r["window_start"]) for r in pq.read_table(os.path.join(out, "minute_stats")).to_pylist())
    assert max(minutes.values()) >= 2 and len(minutes) == 3 * 8  # late firings: a minute again
    assert sum(json_lines(os.path.join(out, "late_readings")).values()) > 0

    # Chains tab data: every chain's watermark is the last one before the end of input.
    from airflow_flinkchain.store import RunStore

    store = RunStore(f"sqlite:///{os.path.join(home, 'flinkchain_store.db')}")
    chains = store.get_run_metrics("flinkchain_event_time", result["run_id"])["chains"]
    last = max(r["ts"] for r in sample_data.sensor_readings()) - 5000 - 1
    assert {c["chain_id"]: c["watermark"] for c in chains} == {"readings": last, "minute_stats": last, "overheat": last}


def json_rows(directory: str) -> Counter:
    import glob
    import json

    found = Counter()
    for path in glob.glob(os.path.join(directory, "*.json")):
        with open(path) as fh:
            found.update(tuple(sorted(json.loads(line).items())) for line in fh if line.strip())
    return found


def test_enrichment_dag_joins_orders_with_customer_versions_and_broadcast_rules(airflow_home):
    """dags/flinkchain_enrichment.py: KeyedCoProcessFunction (keyed list state, event-time
    timers) and BroadcastProcessFunction (broadcast map state) through Airflow and spark-submit;
    the outputs equal what the sample data says, computed here without the runtime."""
    env, dags = airflow_home
    result = run_dag(env, os.path.join(dags, "flinkchain_enrichment.py"), "flinkchain_enrichment")
    assert result["state"] == "success", result["log"][-6000:]
    assert set(result["tasks"].values()) == {"success"}, result["tasks"]
    chains = sorted(t for t in result["tasks"] if not t.endswith(("pipeline_setup", "pipeline_teardown")))
    assert len(chains) == 5, chains  # three sources, and each two-input operator heads its own chain

    sys.path.insert(0, dags)
    import sample_data
    from flinkchain_enrichment import priced

    from airflow_flinkchain.airflow.paths import run_key

    versions: dict = {}
    for v in sample_data.enrichment_customers():
        versions.setdefault(v["customer"], []).append((v["valid_from"], v["tier"]))
    rules: dict = {}
    for rule in sample_data.ENRICHMENT_RULES:  # the broadcast side is read first; the last write wins
        rules[rule["name"]] = rule["value"]
    expected = Counter()
    for o in sample_data.enrichment_orders():
        valid = sorted(v for v in versions.get(o["customer"], []) if v[0] <= o["ts"])
        enriched = {"order_id": o["order_id"], "customer": o["customer"], "amount": o["amount"], "ts": o["ts"],
                    "tier": valid[-1][1] if valid else "unknown"}
        expected[tuple(sorted(priced(enriched, rules).items()))] += 1
    assert {dict(r)["tier"] for r in expected} >= {"unknown", "gold", "silver", "bronze"}
    assert any(dict(r)["review"] for r in expected) and any(dict(r)["discount"] == 0.04 for r in expected)

    out = os.path.join(env["AIRFLOW_HOME"], "flinkchain", "output", "enrichment", run_key(result["run_id"]))
    assert json_rows(os.path.join(out, "enriched")) == expected
    assert json_rows(os.path.join(out, "review")) == Counter({r: n for r, n in expected.items() if dict(r)["review"]})
