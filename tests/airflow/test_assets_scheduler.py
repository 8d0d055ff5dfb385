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
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from test_airflow_scheduler import (CHROMIUM, _chromium, _signed_in, airflow, airflow_stack, finished_run,
                                    trigger_and_unpause)

pytestmark = [pytest.mark.e2e, pytest.mark.airflow]

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCREENSHOT = REPO / "docs" / "assets-graph.png"
CHAIN_TASK = "assets.orders"
SINK_OPERATORS = {"orders_parquet", "orders_table"}
ORDERS = 300  # dags/sample_data.order_rows()
STREAM_DAG = "af_assets_stream"  # a stream-run pipeline: its sink's event comes from its commit task
STREAM_COMMIT = "assets_stream.stream_commit"


@pytest.fixture(scope="module")
def asset_stack(airflow_home, tmp_path_factory):
    base_env, _ = airflow_home
    tmp = tmp_path_factory.mktemp("assets")
    # the example DAGs and this test's only: the asset view of the examples shows no other producer
    dags = str(tmp / "dags")
    shutil.copytree(REPO / "dags", dags, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(HERE / "af_asset_dags.py", os.path.join(dags, "af_asset_dags.py"))
    lineage = tmp / "openlineage.jsonl"
    with airflow_stack(
            base_env, tmp, AIRFLOW__CORE__DAGS_FOLDER=dags, PYTHONPATH=os.pathsep.join([str(REPO), dags]),
            AIRFLOW__OPENLINEAGE__TRANSPORT=json.dumps({"type": "file", "log_file_path": str(lineage),
                                                        "append": True}),
            AIRFLOW__OPENLINEAGE__NAMESPACE="flinkchain-test") as running:
        env = running["env"]
        # the downstream DAGs first: an asset event only queues runs of unpaused DAGs
        _unpause_when_parsed(env, "af_assets_downstream")
        _unpause_when_parsed(env, "af_assets_stream_downstream")
        trigger_and_unpause(env, "af_assets")
        trigger_and_unpause(env, STREAM_DAG)
        state, run_id = finished_run(env, "af_assets")
        down_state, down_run = finished_run(env, "af_assets_downstream", timeout=300)
        stream_state, stream_run = finished_run(env, STREAM_DAG)
        stream_down = finished_run(env, "af_assets_stream_downstream", timeout=300)
        running["log_file"].flush()
        yield {"base": running["base"], "env": env, "state": state, "run_id": run_id, "log": running["log"],
               "lineage": lineage, "downstream": (down_state, down_run), "stream": (stream_state, stream_run),
               "stream_downstream": stream_down}


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


# ---- a stream run: its sink is published by the commit task ----------------------------


def _airflow_db(stack, query: str, *args) -> list:
    con = sqlite3.connect(os.path.join(stack["env"]["AIRFLOW_HOME"], "airflow.db"))
    try:
        return con.execute(query, args).fetchall()
    finally:
        con.close()


def _published(stack) -> tuple[str, list]:
    """The stream sink's directory and the part files of the run (its only run: checkpoint 1)."""
    out = Path(stack["env"]["AIRFLOW_HOME"]) / "flinkchain" / "output" / "assets" / "stream_orders"
    return str(out), sorted(str(p) for p in out.iterdir())


def test_stream_sink_event_comes_from_the_commit_with_the_published_files(asset_stack):
    state, run_id = asset_stack["stream"]
    assert state == "success", _log(asset_stack)
    events = _airflow_db(
        asset_stack, "select a.uri, e.extra, e.source_task_id, e.timestamp from asset_event e "
        "join asset a on a.id = e.asset_id where e.source_dag_id = ? and e.source_run_id = ?", STREAM_DAG, run_id)
    assert len(events) == 1, events  # from the commit task only: no chain task announces staged data
    uri, extra, task, emitted = events[0]
    extra = json.loads(extra)
    assert task == STREAM_COMMIT and uri.endswith("/output/assets/stream_orders"), events
    # emitted after the commit task started, so after every chain task finished
    tasks = dict(_airflow_db(asset_stack, "select task_id, start_date from task_instance where dag_id = ? "
                                          "and run_id = ?", STREAM_DAG, run_id))
    assert emitted >= tasks[STREAM_COMMIT], (emitted, tasks)
    ends = _airflow_db(asset_stack, "select max(end_date) from task_instance where dag_id = ? and run_id = ? and "
                                    "task_id not in (?, ?)", STREAM_DAG, run_id, STREAM_COMMIT,
                       "assets_stream.pipeline_teardown")
    assert ends[0][0] <= emitted
    path, files = _published(asset_stack)
    assert extra["path"] == path and extra["files"] == files and files, (extra, files)
    assert all(os.path.basename(f).startswith("part-000001-") for f in files)
    assert "_runs" not in json.dumps(extra) and "_attempts" not in json.dumps(extra)
    latest = json.loads((Path(asset_stack["env"]["AIRFLOW_HOME"]) / "flinkchain" / "output" / "assets" /
                         "stream_checkpoints" / "_latest.json").read_text())
    assert (extra["checkpoint"], extra["seq"], extra["records_written"]) == (latest["checkpoint"], 1, ORDERS)
    assert extra["operator"] == "orders_published" and extra["run_id"] == run_id


def test_downstream_of_a_stream_sink_reads_exactly_the_published_files(asset_stack):
    _, run_id = asset_stack["stream"]
    state, down_run = asset_stack["stream_downstream"]
    assert state == "success", _log(asset_stack)
    queued = _airflow_db(asset_stack, "select queued_at from dag_run where dag_id = 'af_assets_stream_downstream' "
                                      "and run_id = ?", down_run)[0][0]
    committed = _airflow_db(asset_stack, "select end_date from task_instance where dag_id = ? and run_id = ? and "
                                         "task_id = ?", STREAM_DAG, run_id, STREAM_COMMIT)[0][0]
    assert queued >= committed, (queued, committed)  # triggered only once the commit published the files
    read = Path(asset_stack["env"]["AIRFLOW_HOME"]) / "flinkchain" / "output" / "assets" / "stream_read.jsonl"
    [seen] = [json.loads(line) for line in read.read_text().splitlines() if json.loads(line)["source_run_id"] == run_id]
    assert seen["files"] == _published(asset_stack)[1] and seen["rows"] == ORDERS, seen


def test_stream_run_lineage_and_run_store_name_the_published_location(asset_stack):
    _, run_id = asset_stack["stream"]
    path, files = _published(asset_stack)
    events = [json.loads(line) for line in asset_stack["lineage"].read_text().splitlines() if line.strip()]
    of = {e.get("job", {}).get("name"): e for e in events if e["eventType"] == "COMPLETE"}
    [output] = of[f"{STREAM_DAG}.{STREAM_COMMIT}"]["outputs"]
    assert (output["namespace"], output["name"]) == ("file", path), output
    publication = output["outputFacets"]["flinkchain_publication"]
    assert (publication["path"], publication["files"]) == (path, files), publication
    assert output["outputFacets"]["outputStatistics"] == {**output["outputFacets"]["outputStatistics"],
                                                          "rowCount": ORDERS, "fileCount": len(files)}
    chain_task = of[f"{STREAM_DAG}.assets_stream.stream_orders_in"]
    assert chain_task["outputs"] == [] and chain_task["inputs"], chain_task  # its sink is staged only
    # the Chains tab's sources-and-sinks table: the run store's record of the sink
    run = urllib.parse.quote(run_id, safe="")
    chains = _api(asset_stack["base"], f"/flinkchain/api/pipelines/{STREAM_DAG}/runs/{run}")["run"]["chains"]
    sinks = [o for c in chains for o in c["outputs"] if o.get("sink") == "orders_published"]
    assert [(o["path"], o["records"]) for o in sinks] == [(path, ORDERS)], chains


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
