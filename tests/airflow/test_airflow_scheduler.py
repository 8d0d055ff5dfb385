"""DAG runs under the real scheduler (scheduler + dag-processor + api-server on a
free loopback port, LocalExecutor with parallelism 2), so chain tasks go through
the Task SDK path: supervisor, execution API, connections via the API server.
Two DAGs run side by side: af_orders and the example event-time DAG.

The same running stack then serves the plugin: the DAG's Chains tab is opened in
headless Debian chromium, both the plugin page and Airflow's own DAG page with the
tab, and checked against the counters the run recorded. Its screenshot is the one
docs/airflow.md shows (docs/chains-tab.png). The event-time DAG's tab is checked
against the watermarks its run recorded (screenshot docs/chains-tab-event-time.png,
shown by docs/event-time.md). Last, the stream-run DAG af_stream_runs is scheduled every
minute with files dropped between its runs, then drained, and its Chains tab's stream
table checked."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pytest

from airflow_flinkchain.demo_stream import sink_rows

pytestmark = [pytest.mark.e2e, pytest.mark.airflow]

# The orders pipeline of the docs: chains orders (orders -> parse -> valid -> flag_late),
# revenue_per_region (HASH exchange) and late_per_customer (side output "late", HASH).
DAG_ID = "af_orders"
CHAINS = ("orders", "revenue_per_region", "late_per_customer")
REPO = Path(__file__).resolve().parents[2]
SCREENSHOT = REPO / "docs" / "chains-tab.png"
# dags/flinkchain_event_time.py: chains readings (-> timestamps), minute_stats and overheat.
EVENT_TIME_DAG = "flinkchain_event_time"
EVENT_TIME_CHAINS = ("readings", "minute_stats", "overheat")
EVENT_TIME_SCREENSHOT = REPO / "docs" / "chains-tab-event-time.png"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def airflow(env, *args, timeout=180) -> subprocess.CompletedProcess:
    exe = os.path.join(os.path.dirname(sys.executable), "airflow")
    return subprocess.run([exe, *args], env=env, capture_output=True, text=True, timeout=timeout)


def stop_group(proc: subprocess.Popen, grace: float = 45) -> None:
    """SIGTERM the whole process group (components and their workers), SIGKILL what is
    still alive after `grace` seconds."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.time() + grace
    while time.time() < deadline:
        proc.poll()  # reap the bash leader
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(1)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.poll()


@contextlib.contextmanager
def airflow_stack(base_env: dict, tmp_path: Path, **env_overrides: str):
    """Airflow's api-server (on a free loopback port), scheduler and dag-processor, as one
    process group, with LocalExecutor; yields {"base", "env", "log" (path), "log_file"} and
    stops the group on exit. `env_overrides`: more AIRFLOW__* settings of this stack."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        **base_env,
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": base,
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base}/execution/",
        "AIRFLOW__API_AUTH__JWT_SECRET": "flinkchain-test-secret",
        "AIRFLOW__API__WORKERS": "1",
        # On a loaded machine (SQLite, other jobs) one execution-API call can take tens of seconds:
        # the default 5 s timeout made the supervisor give up on the task's first call.
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "90",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",  # only the DAGs run here get unpaused
        # Anyone who opens /auth/token/login is an admin: lets headless chromium sign in.
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        **env_overrides,
    }
    exe = os.path.join(os.path.dirname(sys.executable), "airflow")
    log_path = tmp_path / "airflow-components.log"
    log = open(log_path, "w")
    # One new session = one process group for all three components: stopped together below.
    group = subprocess.Popen(
        ["bash", "-c",
         # The API server first: workers report to it (execution API); then the scheduler and parser.
         f"'{exe}' api-server --port {port} & "
         f"for i in $(seq 180); do (echo > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; sleep 1; done; "
         f"'{exe}' scheduler & '{exe}' dag-processor & wait"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield {"base": base, "env": env, "log": log_path, "log_file": log}
    finally:
        stop_group(group)
        log.close()


def trigger_and_unpause(env, dag_id: str) -> None:
    deadline = time.time() + 300
    while True:  # the dag-processor must have serialized the DAG first
        trig = airflow(env, "dags", "trigger", dag_id, "-o", "json")
        if trig.returncode == 0 or time.time() > deadline:
            break
        time.sleep(5)
    assert trig.returncode == 0, trig.stdout[-3000:] + trig.stderr[-3000:]
    unpause = airflow(env, "dags", "unpause", dag_id)
    assert unpause.returncode == 0, unpause.stdout[-3000:] + unpause.stderr[-3000:]


def finished_run(env, dag_id: str, timeout: float = 900) -> tuple:
    """(state, run_id) of the DAG's latest run once it has finished; (None, None) on timeout."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        runs = airflow(env, "dags", "list-runs", dag_id, "-o", "json")
        listed = [l for l in runs.stdout.splitlines() if l.startswith("[")]  # warnings share stdout
        if runs.returncode == 0 and listed:
            latest = (json.loads(listed[-1]) or [{}])[0]
            if latest.get("state") in ("success", "failed"):
                return latest["state"], latest["run_id"]
        time.sleep(5)
    return None, None


@pytest.fixture(scope="module")
def stack(airflow_home, tmp_path_factory):
    """The running stack after one run of DAG_ID: {base, env, state, run_id, log}. A run of
    EVENT_TIME_DAG is under way or done by then (see `event_time_run`)."""
    base_env, _ = airflow_home
    with airflow_stack(base_env, tmp_path_factory.mktemp("scheduler"), AIRFLOW__CORE__PARALLELISM="2") as running:
        env = running["env"]
        trigger_and_unpause(env, DAG_ID)
        # Right behind it: its small chains share the two executor slots with af_orders'.
        trigger_and_unpause(env, EVENT_TIME_DAG)
        state, run_id = finished_run(env, DAG_ID)
        running["log_file"].flush()
        yield {"base": running["base"], "env": env, "state": state, "run_id": run_id, "log": running["log"]}


def test_orders_dag_succeeds_under_the_scheduler(stack):
    assert stack["state"] == "success", stack["log"].read_text()[-6000:]


# ---- the Chains tab of that run, in headless chromium ---------------------------------


def _chromium(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="flinkchain-chromium-") as profile:
        return subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
             f"--user-data-dir={profile}", "--virtual-time-budget=20000", *args],
            capture_output=True, text=True, timeout=timeout)


def _signed_in(base: str, path: str) -> str:
    """A URL that signs the browser in (sets Airflow's `_token` cookie) and then opens `path`."""
    return f"{base}/auth/token/login?next={path}"


def _run_json(base: str, run_id: str, dag_id: str = DAG_ID) -> dict:
    """What the run store recorded for the run, through the plugin's JSON API (same auth)."""
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("GET", "/auth/token/login")
    login = conn.getresponse()
    login.read()
    token = re.search(r"_token=([^;]+)", login.getheader("set-cookie") or "")
    assert token, (login.status, login.getheaders())
    request = urllib.request.Request(
        f"{base}/flinkchain/api/pipelines/{dag_id}/runs/{urllib.request.quote(run_id, safe='')}",
        headers={"Authorization": f"Bearer {token.group(1)}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)


@pytest.fixture(scope="module")
def browser(stack):
    if not os.path.exists(CHROMIUM):
        pytest.skip("chromium not installed (make system-deps installs it)")
    if stack["state"] != "success":
        pytest.fail("the DAG run did not succeed (see test_orders_dag_succeeds_under_the_scheduler)")
    return stack


def _operator_html(dom: str, key: str) -> str:
    start = dom.index(f'data-key="{key}"')
    end = dom.find("data-key=", start + 10)
    return dom[start:end if end != -1 else len(dom)]


@pytest.mark.browser
def test_chains_tab_shows_the_real_run(browser):
    base, run_id = browser["base"], browser["run_id"]
    recorded = _run_json(base, run_id)["run"]
    assert sorted(c["chain_id"] for c in recorded["chains"]) == sorted(CHAINS)
    dom = _chromium("--dump-dom", _signed_in(base, f"/flinkchain/ui/dag/{DAG_ID}")).stdout
    assert 'data-ready="true"' in dom, dom[-3000:]
    assert run_id in dom  # the run picker shows the run
    for chain in CHAINS:
        assert f'id="chain-{chain}"' in dom, chain
    for chain in recorded["chains"]:
        assert chain["state"] == "success", chain
        for op in chain["operators"]:
            html = _operator_html(dom, op["key"])
            assert f">{op['name']}<" in html
            moved = max(op["records_in"], op["records_out"])
            assert moved > 0, op  # every operator of the real run saw records
            assert f">{moved:,}<" in html, (op, html[:1500])
    # Edge labels: the two exchanges are hash-partitioned, one is fed by the side output.
    assert dom.count('class="partitioner">HASH<') == 2, dom[-3000:]
    assert "side output “late”" in dom
    assert re.search(r'class="records">[1-9][\d,]* records<', dom)  # records through an exchange
    assert "flag slow" in dom and "flag lossy" in dom


@pytest.mark.browser
def test_airflow_dag_page_has_the_chains_tab(browser):
    # Airflow's own UI (React): the DAG page routes plugin/<url_route> to the external view in an iframe.
    dom = _chromium("--dump-dom", _signed_in(browser["base"], f"/dags/{DAG_ID}/plugin/chains")).stdout
    assert "Chains" in dom, dom[-3000:]
    assert re.search(rf'<iframe[^>]+src="[^"]*/flinkchain/ui/dag/{DAG_ID}[^"]*"', dom), dom[-3000:]


@pytest.mark.browser
def test_a_dag_without_pipeline_shows_the_note(browser):
    dom = _chromium("--dump-dom", _signed_in(browser["base"], "/flinkchain/ui/dag/plain_dag")).stdout
    assert "No chains here" in dom


@pytest.mark.browser
def test_screenshot_of_the_chains_tab(browser):
    SCREENSHOT.parent.mkdir(exist_ok=True)
    shot = SCREENSHOT.with_suffix(".tmp.png")
    done = _chromium(f"--screenshot={shot}", "--window-size=1280,720",
                     _signed_in(browser["base"], f"/flinkchain/ui/dag/{DAG_ID}"))
    assert shot.exists() and shot.stat().st_size > 10_000, done.stderr[-2000:]
    shot.replace(SCREENSHOT)


# ---- the event-time DAG's run: watermarks per chain -----------------------------------


@pytest.fixture(scope="module")
def event_time_run(stack):
    if not os.path.exists(CHROMIUM):
        pytest.skip("chromium not installed (make system-deps installs it)")
    state, run_id = finished_run(stack["env"], EVENT_TIME_DAG)
    assert state == "success", stack["log"].read_text()[-6000:]
    return {**stack, "run_id": run_id}


def _watermark_text(ms: int) -> str:
    """The Chains tab's text for a watermark (chains.js gaugeText): a UTC time with milliseconds,
    "end of stream" for Flink's MAX watermark."""
    if ms >= 8.64e15:
        return "end of stream"
    if abs(ms) < 1e11:
        return f"{ms:,}"
    at = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return f"{at:%Y-%m-%d %H:%M:%S}.{ms % 1000:03d} UTC"


def _text(html: str) -> str:
    """An element's text: the tab wraps a UTC time between date and time of day in spans."""
    return re.sub(r"<[^>]+>", "", html)


def _event_time_page(run_id: str) -> str:
    # `next` is decoded once by the login route: the run id (with "+" and ":") stays encoded.
    path = f"/flinkchain/ui/dag/{EVENT_TIME_DAG}?run_id={urllib.parse.quote(run_id, safe='')}"
    return urllib.parse.quote(path, safe="/")


@pytest.mark.browser
def test_chains_tab_shows_the_event_time_watermarks(event_time_run):
    base, run_id = event_time_run["base"], event_time_run["run_id"]
    recorded = _run_json(base, run_id, EVENT_TIME_DAG)["run"]
    assert sorted(c["chain_id"] for c in recorded["chains"]) == sorted(EVENT_TIME_CHAINS)
    dom = _chromium("--dump-dom", _signed_in(base, _event_time_page(run_id))).stdout
    assert 'data-ready="true"' in dom, dom[-3000:]
    assert f"<b>{run_id}</b>" in dom  # the page shows this run
    for chain in recorded["chains"]:
        assert chain["state"] == "success", chain
        assert chain["watermark"] is not None, chain  # every chain saw event time
        start = dom.index(f'id="chain-{chain["chain_id"]}"')
        box = dom[start:dom.find("</footer>", start)]
        # The chain's watermark, in its footer ...
        footer = box[box.index("<footer>"):]
        assert f"watermark {_watermark_text(chain['watermark'])}" in _text(footer), (chain, footer)
        # ... and each operator's, next to its counters.
        for op in chain["operators"]:
            if op.get("watermark") is not None:
                html = _operator_html(dom, op["key"])
                at = html.index('watermark <span class="n">')
                value = html[at:html.index("</span></span>", at)]
                assert _text(value) == f'watermark {_watermark_text(op["watermark"])}', (op, html[:1500])


@pytest.mark.browser
def test_screenshot_of_the_event_time_chains_tab(event_time_run):
    shot = EVENT_TIME_SCREENSHOT.with_suffix(".tmp.png")
    done = _chromium(f"--screenshot={shot}", "--window-size=1280,960",  # all three chains
                     _signed_in(event_time_run["base"], _event_time_page(event_time_run["run_id"])))
    assert shot.exists() and shot.stat().st_size > 10_000, done.stderr[-2000:]
    shot.replace(EVENT_TIME_SCREENSHOT)


# ---- stream runs: a DAG scheduled every minute, files dropped between its runs ----------

STREAM_DAG = "af_stream_runs"  # af_test_dags.py: dags/flinkchain_stream_runs.py's pipeline


def _runs(env, dag_id: str) -> list:
    out = airflow(env, "dags", "list-runs", dag_id, "-o", "json")
    listed = [l for l in out.stdout.splitlines() if l.startswith("[")]
    return json.loads(listed[-1]) if out.returncode == 0 and listed else []


def one_streaming_run(module, slices, tmp_path) -> Counter:
    """The reference: the same pipeline, no checkpoint_dir, all files, one run (in process)."""
    ref_in, ref_out = str(tmp_path / "ref_in"), str(tmp_path / "ref_out")
    for k, part in enumerate(slices):
        module.drop_slice(ref_in, k, part)
    module.stream_runs_pipeline(ref_in, ref_out, None).execute_local(run_id="reference")
    return sink_rows(ref_out)


def test_stream_runs_under_the_scheduler_equal_one_streaming_run(stack, tmp_path):
    """Three (or more) scheduled runs, a slice of files dropped after each, then a run
    triggered with {"drain": true}: the published outputs equal one STREAMING run over all
    the files, without duplicates, and every run after the first continued the stream."""
    env = stack["env"]
    sys.path.insert(0, str(REPO / "dags"))
    import flinkchain_stream_runs as example

    root = Path(env["AIRFLOW_HOME"]) / "flinkchain" / "af_stream"
    incoming, output = str(root / "incoming"), str(root / "output")
    slices = example.click_slices(n_slices=4, per_slice=40)
    example.drop_slice(incoming, 0, slices[0])
    unpause = airflow(env, "dags", "unpause", STREAM_DAG)
    deadline = time.time() + 300
    while unpause.returncode != 0 and time.time() < deadline:  # not parsed yet
        time.sleep(5)
        unpause = airflow(env, "dags", "unpause", STREAM_DAG)
    assert unpause.returncode == 0, unpause.stdout[-3000:] + unpause.stderr[-3000:]
    dropped, drain_id, deadline = 1, None, time.time() + 1500
    while time.time() < deadline:
        runs = _runs(env, STREAM_DAG)
        assert not [r for r in runs if r["state"] == "failed"], (runs, stack["log"].read_text()[-6000:])
        assert sum(r["state"] == "running" for r in runs) <= 1, runs  # max_active_runs=1
        scheduled = [r for r in runs if r["run_id"].startswith("scheduled__") and r["state"] == "success"]
        if dropped < len(slices) and len(scheduled) >= dropped:
            example.drop_slice(incoming, dropped, slices[dropped])  # arrives between two runs
            dropped += 1
        if drain_id is None and len(scheduled) >= 3 and dropped == len(slices):
            drain_id = "manual__drain"
            trig = airflow(env, "dags", "trigger", STREAM_DAG, "-r", drain_id, "-c", json.dumps({"drain": True}))
            assert trig.returncode == 0, trig.stdout[-3000:] + trig.stderr[-3000:]
        if drain_id is not None and any(r["run_id"] == drain_id and r["state"] == "success" for r in runs):
            break
        time.sleep(3)
    else:
        pytest.fail(f"no drained run in time: {_runs(env, STREAM_DAG)}")
    airflow(env, "dags", "pause", STREAM_DAG)
    latest = json.loads((root / "checkpoints" / "_latest.json").read_text())
    assert latest["seq"] >= 4
    want = one_streaming_run(example, slices, tmp_path)
    got = sink_rows(output)
    assert got == want, (sorted((got - want).elements())[:5], sorted((want - got).elements())[:5])
    assert max(got.values()) == 1  # no duplicates

    # The Chains tab of the first run: what it read (slice 0's file), its state and watermark.
    first = [r["run_id"] for r in _runs(env, STREAM_DAG) if r["run_id"].startswith("scheduled__")][-1]
    chains = {c["chain_id"]: c for c in _run_json(stack["base"], first, STREAM_DAG)["run"]["chains"]}
    stream = {cid: c["stream"] for cid, c in chains.items()}
    assert [r[0].rsplit("/", 1)[-1] for r in stream["clicks"]["read"]["clicks"]] == ["clicks-0000.json"]
    sessions = stream["sessions"]["operators"]["sessions"]
    assert sessions["stateful"] and sessions["bytes"] > 0 and sessions["watermark"] is not None
    # the sinks' path in the run store: where the commit published, not the chain's staging
    sinks = {o["sink"]: o["path"] for c in chains.values() for o in c["outputs"] if o.get("sink")}
    assert sinks == {"page_views_json": os.path.join(output, "page_views"),
                     "sessions_json": os.path.join(output, "sessions")}, sinks
    if os.path.exists(CHROMIUM):
        path = urllib.parse.quote(f"/flinkchain/ui/dag/{STREAM_DAG}?run_id={urllib.parse.quote(first, safe='')}",
                                  safe="/")
        dom = _chromium("--dump-dom", _signed_in(stack["base"], path)).stdout
        assert 'data-ready="true"' in dom, dom[-3000:]
        box = dom[dom.index('id="stream-run"'):]
        box = box[:box.index("</section>")]
        assert "hidden" not in box[:80], box[:500]
        state = sum(o["bytes"] for o in stream["sessions"]["operators"].values())
        assert f'data-bytes="{state}"' in box and ">clicks: 1 file<" in box, box[:3000]
