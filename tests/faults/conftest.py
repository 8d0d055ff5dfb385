"""Fixtures of the fault-injection suite's Airflow tests: an isolated AIRFLOW_HOME
(migrated once) whose dags folder holds the example DAGs and af_fault_dags.py.
Reuses the environment builder of tests/airflow."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
AIRFLOW_TESTS = os.path.join(os.path.dirname(HERE), "airflow")


def _airflow_helpers():
    if AIRFLOW_TESTS not in sys.path:
        sys.path.insert(0, AIRFLOW_TESTS)
    import importlib.util

    spec = importlib.util.spec_from_file_location("_airflow_tests_conftest", os.path.join(AIRFLOW_TESTS, "conftest.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def fault_airflow_home(tmp_path_factory):
    """(env, dags folder, helpers module of tests/airflow)."""
    helpers = _airflow_helpers()
    root = tmp_path_factory.mktemp("fault_airflow")
    home, dags = str(root / "home"), str(root / "dags")
    os.makedirs(home)
    shutil.copytree(os.path.join(helpers.REPO, "dags"), dags, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(HERE, "af_fault_dags.py"), os.path.join(dags, "af_fault_dags.py"))
    env = helpers.airflow_env(home, dags)
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "airflow"), "db", "migrate"],
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return env, dags, helpers
