"""One DAG run under the real scheduler (scheduler + dag-processor + api-server on a
free loopback port, LocalExecutor with parallelism 2), so chain tasks go through
the Task SDK path: supervisor, execution API, connections via the API server."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.airflow]

DAG_ID = "af_tiny"


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


def test_tiny_dag_succeeds_under_the_scheduler(airflow_home, tmp_path):
    base_env, _ = airflow_home
    port = free_port()
    env = {
        **base_env,
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "2",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__API_AUTH__JWT_SECRET": "flinkchain-test-secret",
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",  # only af_tiny gets unpaused
    }
    exe = os.path.join(os.path.dirname(sys.executable), "airflow")
    log = open(tmp_path / "airflow-components.log", "w")
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
        state = None
        deadline = time.time() + 900
        while time.time() < deadline:
            runs = airflow(env, "dags", "list-runs", DAG_ID, "-o", "json")
            listed = [l for l in runs.stdout.splitlines() if l.startswith("[")]  # warnings share stdout
            if runs.returncode == 0 and listed:
                states = [r["state"] for r in json.loads(listed[-1])]
                if states and states[0] in ("success", "failed"):
                    state = states[0]
                    break
            time.sleep(5)
        log.flush()
        assert state == "success", (tmp_path / "airflow-components.log").read_text()[-6000:]
    finally:
        stop_group(group)
        log.close()
