"""ChainSubmitOperator.on_kill against a real spark-submit (what Airflow calls when a
running chain task is marked failed or its worker stops it): SIGTERM to the whole
process tree - spark-submit's JVM, the Python driver, the Python workers - then,
after the grace period, SIGKILL to what is left and the provider's own kill.
Nothing of the application may keep running."""

from __future__ import annotations

import threading
import time

import psutil
import pytest

from airflow_flinkchain.airflow import operators
from test_airflow_render import render
from af_pipelines import linear

pytestmark = [pytest.mark.airflow, pytest.mark.e2e]

# Stands in for a chain whose subtasks are still running: both partitions sleep.
SLOW_APP = """
import time
from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()


def slow(it):
    time.sleep(600)
    yield from it


spark.sparkContext.parallelize(range(2), 2).mapPartitions(slow).count()
"""


def _alive(pids):
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def _python_workers(root_pid):
    try:
        family = psutil.Process(root_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    out = []
    for p in family:
        try:
            if "pyspark.daemon" in " ".join(p.cmdline()) or "pyspark.worker" in " ".join(p.cmdline()):
                out.append(p.pid)
        except psutil.NoSuchProcess:
            pass
    return out


def test_on_kill_stops_spark_submit_and_every_child(spark, tmp_path, monkeypatch):
    """`spark`: a SparkSession's gateway JVM is also a SparkSubmit child of this process; on_kill
    must leave it alone (it stops only its own submission's spark-submit, found by the
    `--conf spark.flinkchain.submission=<id>` on its command line)."""
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type":"spark","host":"local[2]"}')
    monkeypatch.setattr(operators, "KILL_GRACE_SECONDS", 5)
    dag, _ = render(linear())
    op = dag.task_dict["linear.events"]
    app = tmp_path / "slow_app.py"
    app.write_text(SLOW_APP)
    op._hook = op._get_hook()  # what the provider's execute() does before submit()
    outcome = {}

    def submit():
        try:
            op._hook.submit(str(app))
            outcome["result"] = "finished"
        except Exception as exc:  # the provider raises on spark-submit's non-zero exit
            outcome["result"] = f"raised {type(exc).__name__}: {exc}"

    thread = threading.Thread(target=submit, daemon=True)
    thread.start()
    deadline = time.time() + 180
    proc = None
    while time.time() < deadline:
        found = operators.spark_submit_processes(op.submission_id)  # by its command line's --conf
        proc = found[0] if len(found) == 1 else None
        if proc is not None and len(_python_workers(proc.pid)) >= 1:
            break
        assert thread.is_alive(), f"spark-submit ended before the job ran: {outcome}"
        time.sleep(0.5)
    else:
        pytest.fail("the slow Spark job never started its Python workers")
    time.sleep(2)  # both partitions running
    family = [proc.pid] + [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
    assert len(family) >= 3  # spark-submit (JVM), the Python driver, Python worker(s)

    started = time.time()
    op.on_kill()
    thread.join(timeout=60)
    assert not thread.is_alive(), "submit() still waiting after on_kill"
    assert outcome["result"] != "finished", outcome
    wait_until = time.time() + 30
    while _alive(family) and time.time() < wait_until:
        time.sleep(0.5)
    assert _alive(family) == [], [psutil.Process(p).cmdline() for p in _alive(family)]
    assert time.time() - started < operators.KILL_GRACE_SECONDS + 40
    assert spark.range(3).count() == 3  # the session's JVM survived
