"""The Chains tab in a real browser: `airflow api-server` with the plugin on a
loopback port, a seeded run store, headless Debian chromium. Saves the
screenshot the README shows (docs/chains-tab.png).

The store is seeded through the store API with a realistic plan and metrics;
the end-to-end harness (airflow/) replaces this with a real DAG run."""

from __future__ import annotations

import os
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

from tests.store.sample import metrics, plan

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
SCREENSHOT = REPO / "docs" / "chains-tab.png"
DAG = "orders_dag"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def api_server(airflow_env, tmp_path_factory):
    if not os.path.exists(CHROMIUM):
        pytest.skip("chromium not installed (make system-deps installs it)")
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**airflow_env,
           "AIRFLOW__API__BASE_URL": base,
           # Anyone who opens /auth/token/login is an admin: lets headless chromium sign in.
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True"}
    log_path = tmp_path_factory.mktemp("api-server") / "api-server.log"
    log = log_path.open("w")
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "airflow"), "api-server", "--host", "127.0.0.1", "--port", str(port)],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)  # own process group
    try:
        _wait_until_up(f"{base}/flinkchain/static/chains.css", server, log_path)
        yield base
    finally:
        try:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        except ProcessLookupError:
            pass
        log.close()


def _wait_until_up(url: str, server: subprocess.Popen, log_path: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"api-server exited with {server.returncode}:\n{log_path.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(f"api-server not up after {timeout}s:\n{log_path.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def seeded_store(airflow_env):
    from airflow_flinkchain.store import RunStore

    store = RunStore()
    store.start_run(DAG, "scheduled__2025-01-01T00:00:00+00:00", plan=plan(), started_at="2025-01-01T00:00:05Z")
    for chain in ("read_orders", "by_customer", "write_rejects"):
        store.record_attempt(metrics(run_id="scheduled__2025-01-01T00:00:00+00:00", chain=chain, scale=3))
    store.finish_run(DAG, "scheduled__2025-01-01T00:00:00+00:00", ended_at="2025-01-01T00:00:42Z")
    run_id = "manual__2025-01-02T09:30:00+00:00"
    store.start_run(DAG, run_id, plan=plan(), started_at="2025-01-02T09:30:02Z")
    store.record_attempt(metrics(run_id=run_id, chain="read_orders", attempt=1, state="failed"), try_number=1)
    for chain in ("read_orders", "by_customer", "write_rejects"):
        store.record_attempt(metrics(run_id=run_id, chain=chain, attempt=2), try_number=2)
    store.finish_run(DAG, run_id, ended_at="2025-01-02T09:31:10Z")
    return store


def _chromium(*args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="flinkchain-chromium-") as profile:
        return subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
             f"--user-data-dir={profile}", "--virtual-time-budget=15000", *args],
            capture_output=True, text=True, timeout=timeout)


def _signed_in(base: str, path: str) -> str:
    """A URL that signs the browser in (sets Airflow's `_token` cookie) and then opens `path`."""
    return f"{base}/auth/token/login?next={path}"


def test_chains_tab_shows_chains_operators_edges_and_counts(api_server, seeded_store):
    dom = _chromium("--dump-dom", _signed_in(api_server, f"/flinkchain/ui/dag/{DAG}")).stdout
    assert 'data-ready="true"' in dom, dom[-2000:]
    for chain in ("read_orders", "by_customer", "write_rejects"):
        assert f'id="chain-{chain}"' in dom
    for operator in ("parse", "valid", "write_totals"):
        assert f'data-key="{operator}"' in dom
    assert ">HASH<" in dom and ">REBALANCE<" in dom and "side output “rejects”" in dom  # edge labels
    assert ">1,000<" in dom and ">960<" in dom  # parse: records in / out of the latest run
    assert "flag slow" in dom and "flag lossy" in dom
    assert "2 attempts" in dom  # the latest run retried read_orders


def test_a_dag_without_pipeline_shows_the_note(api_server, seeded_store):
    dom = _chromium("--dump-dom", _signed_in(api_server, "/flinkchain/ui/dag/plain_dag")).stdout
    assert "No chains here" in dom


def test_screenshot_of_the_chains_tab(api_server, seeded_store):
    SCREENSHOT.parent.mkdir(exist_ok=True)
    shot = SCREENSHOT.with_suffix(".tmp.png")
    done = _chromium(f"--screenshot={shot}", "--window-size=1280,580",
                     _signed_in(api_server, f"/flinkchain/ui/dag/{DAG}"))
    assert shot.exists() and shot.stat().st_size > 10_000, done.stderr[-2000:]
    shot.replace(SCREENSHOT)
