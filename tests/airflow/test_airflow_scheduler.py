"""One DAG run under the real scheduler (scheduler + dag-processor + api-server on a
free loopback port, LocalExecutor with parallelism 2), so chain tasks go through
the Task SDK path: supervisor, execution API, connections via the API server.

The same running stack then serves the plugin: the DAG's Chains tab is opened in
headless Debian chromium, both the plugin page and Airflow's own DAG page with the
tab, and checked against the counters the run recorded. Its screenshot is the one
README shows (docs/chains-tab.png)."""

from __future__ import annotations

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
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.airflow]

# The orders pipeline of the README: chains orders (orders -> parse -> valid -> flag_late),
# revenue_per_region (HASH exchange) and late_per_customer (side output "late", HASH).
DAG_ID = "af_orders"
CHAINS = ("orders", "revenue_per_region", "late_per_customer")
REPO = Path(__file__).resolve().parents[2]
SCREENSHOT = REPO / "docs" / "chains-tab.png"
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


@pytest.fixture(scope="module")
def stack(airflow_home, tmp_path_factory):
    """The running stack after one run of DAG_ID: {base, env, state, run_id, log}."""
    base_env, _ = airflow_home
    tmp_path = tmp_path_factory.mktemp("scheduler")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        **base_env,
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "2",
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
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",  # only DAG_ID gets unpaused
        # Anyone who opens /auth/token/login is an admin: lets headless chromium sign in.
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
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
        deadline = time.time() + 300
        while True:  # the dag-processor must have serialized the DAG first
            trig = airflow(env, "dags", "trigger", DAG_ID, "-o", "json")
            if trig.returncode == 0 or time.time() > deadline:
                break
            time.sleep(5)
        assert trig.returncode == 0, trig.stdout[-3000:] + trig.stderr[-3000:]
        unpause = airflow(env, "dags", "unpause", DAG_ID)
        assert unpause.returncode == 0, unpause.stdout[-3000:] + unpause.stderr[-3000:]
        state = run_id = None
        deadline = time.time() + 900
        while time.time() < deadline:
            runs = airflow(env, "dags", "list-runs", DAG_ID, "-o", "json")
            listed = [l for l in runs.stdout.splitlines() if l.startswith("[")]  # warnings share stdout
            if runs.returncode == 0 and listed:
                latest = (json.loads(listed[-1]) or [{}])[0]
                if latest.get("state") in ("success", "failed"):
                    state, run_id = latest["state"], latest["run_id"]
                    break
            time.sleep(5)
        log.flush()
        yield {"base": base, "env": env, "state": state, "run_id": run_id, "log": log_path}
    finally:
        stop_group(group)
        log.close()


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


def _run_json(base: str, run_id: str) -> dict:
    """What the run store recorded for the run, through the plugin's JSON API (same auth)."""
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("GET", "/auth/token/login")
    login = conn.getresponse()
    login.read()
    token = re.search(r"_token=([^;]+)", login.getheader("set-cookie") or "")
    assert token, (login.status, login.getheaders())
    request = urllib.request.Request(
        f"{base}/flinkchain/api/pipelines/{DAG_ID}/runs/{urllib.request.quote(run_id, safe='')}",
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
