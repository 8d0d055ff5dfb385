"""The store's URL without Airflow: the Airflow side passes its config value in."""

from __future__ import annotations

import os
import subprocess
import sys

from airflow_flinkchain.store import resolve_store_url


def test_configured_value_sits_between_the_environment_and_the_default(monkeypatch):
    for env in ("FLINKCHAIN_STORE_URL", "AIRFLOW__FLINKCHAIN__STORE_URL"):
        monkeypatch.delenv(env, raising=False)
    assert resolve_store_url(configured="postgresql://cfg/db") == "postgresql://cfg/db"
    monkeypatch.setenv("AIRFLOW__FLINKCHAIN__STORE_URL", "postgresql://env/db")
    assert resolve_store_url(configured="postgresql://cfg/db") == "postgresql://env/db"
    monkeypatch.setenv("FLINKCHAIN_STORE_URL", "sqlite:///y.db")
    assert resolve_store_url(configured="postgresql://cfg/db") == "sqlite:///y.db"
    assert resolve_store_url("sqlite:///x.db", configured="postgresql://cfg/db") == "sqlite:///x.db"


def test_resolving_the_url_imports_no_airflow(tmp_path):
    env = {k: v for k, v in os.environ.items() if "STORE_URL" not in k}
    env["AIRFLOW_HOME"] = str(tmp_path)
    code = ("import sys; from airflow_flinkchain.store import resolve_store_url; resolve_store_url(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'airflow'))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
