"""Fixtures of the Airflow tests: an isolated AIRFLOW_HOME with a migrated metadata DB
and a dags folder holding the example DAGs and the test DAGs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
if HERE not in sys.path:  # af_* helper modules
    sys.path.insert(0, HERE)


def airflow_env(home: str, dags: str) -> dict:
    bin_dir = os.path.dirname(sys.executable)
    # Nothing Airflow- or store-related leaks in from the test process: other test packages'
    # conftests (e.g. tests/plugin) set AIRFLOW__* and FLINKCHAIN_STORE_URL in os.environ at
    # collection time, and the tasks would then record runs in their store, not this home's.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__", "AIRFLOW_CONN", "FLINKCHAIN_STORE_URL"))}
    env.update({
        "AIRFLOW_HOME": home,
        "AIRFLOW__CORE__DAGS_FOLDER": dags,
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__PARALLELISM": "2",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        "PYTHONPATH": os.pathsep.join([REPO, dags]),
    })
    if "AIRFLOW__FLINKCHAIN__JVM_ARCHIVE_DIR" in os.environ:  # the session's one archive (tests/conftest.py)
        env["AIRFLOW__FLINKCHAIN__JVM_ARCHIVE_DIR"] = os.environ["AIRFLOW__FLINKCHAIN__JVM_ARCHIVE_DIR"]
    return env


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory):
    """(env, dags folder): AIRFLOW_HOME migrated once per session."""
    root = tmp_path_factory.mktemp("airflow")
    home, dags = str(root / "home"), str(root / "dags")
    os.makedirs(home)
    shutil.copytree(os.path.join(REPO, "dags"), dags, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(HERE, "af_test_dags.py"), os.path.join(dags, "af_test_dags.py"))
    env = airflow_env(home, dags)
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "airflow"), "db", "migrate"],
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return env, dags


def run_dag(env: dict, dag_file: str, dag_id: str, timeout: int = 1200, conf: dict = None) -> dict:
    extra = [json.dumps(conf)] if conf is not None else []
    out = subprocess.run([sys.executable, os.path.join(HERE, "af_run_dag.py"), dag_file, dag_id, *extra],
                         env=env, capture_output=True, text=True, timeout=timeout)
    lines = [l for l in out.stdout.strip().splitlines() if l.startswith("{\"run_id\"")]
    assert lines, f"dag.test() of {dag_id} printed no result:\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}"
    result = json.loads(lines[-1])
    result["log"] = out.stdout + out.stderr
    return result
