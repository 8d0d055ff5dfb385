"""Sinks as Airflow Assets and OpenLineage, under the real scheduler (the harness of
test_airflow_scheduler.py): af_assets (one chain: a JSON-lines file source, a typed
Parquet sink and a SQL table sink) runs with OpenLineage's file transport on; the
asset events it emitted, the OpenLineage events of its chain task and the run of
af_assets_downstream (scheduled on the Parquet sink) are checked. The same stack
serves Airflow's asset view of the example DAGs for docs/data-awareness.md
(docs/assets-graph.png), after a run of flinkchain_orders and the report it triggers."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from test_airflow_scheduler import (CHROMIUM, _chromium, _signed_in, airflow, finished_run, free_port, stop_group,
                                    trigger_and_unpause)

pytestmark = [pytest.mark.e2e, pytest.mark.airflow]

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCREENSHOT = REPO / "docs" / "assets-graph.png"
CHAIN_TASK = "assets.orders"
SINK_OPERATORS = {"orders_parquet", "orders_table"}
ORDERS = 300  # dags/sample_data.order_rows()


@pytest.fixture(scope="module")
def asset_stack(airflow_home, tmp_path_factory):
    base_env, _ = airflow_home
    tmp = tmp_path_factory.mktemp("assets")
    # the example DAGs and this test's only: the asset view of the examples shows no other producer
    dags = str(tmp / "dags")
    shutil.copytree(REPO / "dags", dags, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(HERE / "af_asset_dags.py", os.path.join(dags, "af_asset_dags.py"))
    lineage = tmp / "openlineage.jsonl"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        **base_env,
        "AIRFLOW__CORE__DAGS_FOLDER": dags,
        "PYTHONPATH": os.pathsep.join([str(REPO), dags]),
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": base,
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base}/execution/",
        "AIRFLOW__API_AUTH__JWT_SECRET": "flinkchain-test-secret",
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "90",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(lineage),
                                                       "append": True}),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "flinkchain-test",
    }
    exe = os.path.join(os.path.dirname(sys.executable), "airflow")
    log_path = tmp / "airflow-components.log"
    log = open(log_path, "w")
    group = subprocess.Popen(
        ["bash", "-c",
         f"'{exe}' api-server --port {port} & "
         f"for i in $(seq 180); do (echo > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; sleep 1; done; "
         f"'{exe}' scheduler & '{exe}' dag-processor & wait"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # the downstream DAG first: an asset event only queues runs of unpaused DAGs
        _unpause_when_parsed(env, "af_assets_downstream")
        trigger_and_unpause(env, "af_assets")
        state, run_id = finished_run(env, "af_assets")
        down_state, down_run = finished_run(env, "af_assets_downstream", timeout=300)
        log.flush()
        yield {"base": base, "env": env, "state": state, "run_id": run_id, "log": log_path, "lineage": lineage,
               "downstream": (down_state, down_run)}
    finally:
        stop_group(group)
        log.close()


def _unpause_when_parsed(env, dag_id: str) -> None:
    deadline = time.time() + 300
    while time.time() < deadline:  # exits 0 with "No paused DAGs were found" until the DAG is parsed
        out = airflow(env, "dags", "unpause", dag_id, "-o", "json")
        if out.returncode == 0 and dag_id in out.stdout:
            return
        time.sleep(5)
    pytest.fail(f"{dag_id} was never parsed")


def _log(stack) -> str:
    return stack["log"].read_text()[-6000:]


def test_sink_asset_events_carry_what_was_committed(asset_stack):
    assert asset_stack["state"] == "success", _log(asset_stack)
    from airflow_flinkchain.airflow.paths import run_key

    con = sqlite3.connect(os.path.join(asset_stack["env"]["AIRFLOW_HOME"], "airflow.db"))
    rows = con.execute(
        "select a.uri, a.name, e.extra, e.source_task_id from asset_event e join asset a on a.id = e.asset_id "
        "where e.source_dag_id = 'af_assets' and e.source_run_id = ?", (asset_stack["run_id"],)).fetchall()
    con.close()
    events = {name: (uri, json.loads(extra), task) for uri, name, extra, task in rows}
    key = run_key(asset_stack["run_id"])
    parquet = next(v for k, v in events.items() if k.endswith("/output/assets/*/orders"))
    assert parquet[0].startswith("file:///") and parquet[2] == CHAIN_TASK
    assert events["asset_orders"][0].startswith("sqlite:/") and events["asset_orders"][0].endswith("/asset_orders")
    assert len(events) == 2, events  # the source is an inlet: no event
    for uri, extra, _ in events.values():
        assert extra["records_written"] == ORDERS, extra
        assert (extra["run_key"], extra["pipeline"], extra["chain"]) == (key, "assets", "orders"), extra
    assert {e[1]["operator"] for e in events.values()} == SINK_OPERATORS
    assert key in parquet[1]["path"]  # the rendered directory of this run


def test_the_run_store_plan_names_the_assets(asset_stack):
    # what the Chains tab reads to link sources and sinks to Airflow's asset pages
    run = urllib.parse.quote(asset_stack["run_id"], safe="")
    plan = _api(asset_stack["base"], f"/flinkchain/api/pipelines/af_assets/runs/{run}")["plan"]
    assets = {a["operator"]: (a["role"], a["uri"]) for a in plan["assets"]}
    assert set(assets) == {"orders", *SINK_OPERATORS}
    assert assets["orders"][0] == "source" and assets["orders"][1].endswith("/flinkchain/sample/orders")


def test_downstream_dag_runs_when_the_sink_is_committed(asset_stack):
    state, run_id = asset_stack["downstream"]
    assert state == "success", _log(asset_stack)
    assert run_id.startswith("asset_triggered__"), run_id
    home = asset_stack["env"]["AIRFLOW_HOME"]
    with open(os.path.join(home, "flinkchain", "output", "assets", "triggered.jsonl")) as f:
        seen = [json.loads(line) for line in f]
    mine = [s for s in seen if s["source_run_id"] == asset_stack["run_id"]]
    assert len(mine) == 1, seen
    assert mine[0]["uri"].endswith("/output/assets/*/orders")
    assert mine[0]["extra"]["records_written"] == ORDERS and mine[0]["extra"]["operator"] == "orders_parquet"


def test_openlineage_events_of_the_chain_task(asset_stack):
    events = [json.loads(line) for line in asset_stack["lineage"].read_text().splitlines() if line.strip()]
    task_events = {e["eventType"]: e for e in events if e.get("job", {}).get("name") == f"af_assets.{CHAIN_TASK}"}
    assert {"START", "COMPLETE"} <= set(task_events), [(e["eventType"], e.get("job")) for e in events]
    for kind in ("START", "COMPLETE"):
        e = task_events[kind]
        assert e["job"]["namespace"] == "flinkchain-test"
        [source] = e["inputs"]
        assert source["namespace"] == "file" and source["name"].endswith("/flinkchain/sample/orders"), source
        outputs = {o["namespace"]: o for o in e["outputs"]}
        assert set(outputs) == {"file", next(n for n in outputs if n.startswith("sqlite://"))}, outputs
        assert outputs["file"]["name"].endswith("/output/assets/*/orders")
        schema = outputs["file"]["facets"]["schema"]["fields"]
        assert [(f["name"], f["type"]) for f in schema] == [("order_id", "int64"), ("region", "string"),
                                                             ("amount", "double")]
        facet = e["job"]["facets"]["flinkchain_chain"]
        assert (facet["pipeline"], facet["chain"]) == ("assets", "orders")
        assert [o["name"] for o in facet["operators"]] == ["orders", "amount", "orders_parquet", "orders_table"]
    done = task_events["COMPLETE"]
    assert {o["outputFacets"]["outputStatistics"]["rowCount"] for o in done["outputs"]} == {ORDERS}


# ---- Airflow's asset view of the example DAGs (docs/data-awareness.md) ------------------


def _api(base: str, path: str) -> dict:
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("GET", "/auth/token/login")  # sets the `_token` cookie, then redirects: not followed
    login = conn.getresponse()
    login.read()
    token = re.search(r"_token=([^;]+)", login.getheader("set-cookie") or "")
    assert token, (login.status, login.getheaders())
    request = urllib.request.Request(f"{base}{path}", headers={"Authorization": f"Bearer {token.group(1)}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)


@pytest.mark.browser
def test_screenshot_of_the_example_asset_graph(asset_stack):
    if not os.path.exists(CHROMIUM):
        pytest.skip("chromium not installed (make system-deps installs it)")
    # the example DAGs run as a user's would: the revenue report waits on the revenue table,
    # flinkchain_orders writes it (an asset event), which triggers the report
    env = asset_stack["env"]
    _unpause_when_parsed(env, "flinkchain_revenue_report")
    trigger_and_unpause(env, "flinkchain_orders")
    assert finished_run(env, "flinkchain_orders", timeout=1800)[0] == "success", _log(asset_stack)
    assets = _api(asset_stack["base"], "/api/v2/assets?name_pattern=orders.revenue_per_region")["assets"]
    [asset] = [a for a in assets if a["name"] == "orders.revenue_per_region"]
    assert asset["uri"].endswith("/flinkchain/examples.db/revenue_per_region"), asset
    assert {r["dag_id"] for r in asset["scheduled_dags"]} == {"flinkchain_revenue_report"}
    # (af_orders of test_airflow_scheduler.py writes it too when that ran first in this session)
    assert ("flinkchain_orders", "orders.revenue_per_region") in {
        (r["dag_id"], r["task_id"]) for r in asset["producing_tasks"]}
    events = _api(asset_stack["base"], f"/api/v2/assets/events?asset_id={asset['id']}")
    assert events["total_entries"] >= 1, events  # the page shows the run's event, not "0 Asset Events"
    shot = SCREENSHOT.with_suffix(".tmp.png")
    graph = {"dag:flinkchain_orders", f"asset:{asset['id']}", "dag:flinkchain_revenue_report"}
    for _ in range(3):  # the graph is laid out asynchronously: now and then it is not drawn in time
        done = _chromium(f"--screenshot={shot}", "--dump-dom", "--window-size=1280,720",
                         _signed_in(asset_stack["base"], f"/assets/{asset['id']}"))
        nodes = re.findall(r'class="react-flow__node [^"]*"[^>]*data-id="([^"]+)"', done.stdout)
        if graph <= set(nodes):
            break
    # the producing DAG, the asset and the DAG scheduled on it, drawn in the same render as the screenshot;
    # the example's sinks by their asset names, not by paths of this test's AIRFLOW_HOME
    assert graph <= set(nodes), nodes
    assert env["AIRFLOW_HOME"] not in done.stdout, "a path of the test's AIRFLOW_HOME is on the page"
    assert shot.exists() and shot.stat().st_size > 10_000, done.stderr[-2000:]
    shot.replace(SCREENSHOT)
