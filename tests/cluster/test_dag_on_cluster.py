"""An example DAG through Airflow (dag.test(), real spark-submit per chain task) with the
Spark connection pointed at the standalone cluster, client deploy mode; outputs equal
local execute(). Plus the chain operator's refusal of cluster deploy mode on standalone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from pipelines import expected_word_counts

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
RUN_DAG = os.path.join(REPO, "tests", "airflow", "af_run_dag.py")


def _airflow_env(home: str, dags: str, exchange_root: str, cluster) -> dict:
    env = {k: v for k, v in cluster.env.items() if not k.startswith(("AIRFLOW__", "AIRFLOW_CONN", "FLINKCHAIN_STORE_URL"))}
    env.update({
        "AIRFLOW_HOME": home,
        "AIRFLOW__CORE__DAGS_FOLDER": dags,
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "spark://127.0.0.1",
                                                  "port": cluster.port, "extra": {"deploy-mode": "client"}}),
        "FLINKCHAIN_TEST_EXCHANGE_ROOT": exchange_root,
        "FLINKCHAIN_PACKAGE_CACHE_DIR": os.path.join(home, "packages"),
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
        "PYTHONPATH": os.pathsep.join([REPO, dags]),
    })
    return env


@pytest.mark.cluster
@pytest.mark.airflow
@pytest.mark.timeout(900)
def test_example_dag_on_standalone_cluster_equals_local(standalone_cluster, spark, tmp_path):
    home, dags, root = str(tmp_path / "home"), str(tmp_path / "dags"), str(tmp_path / "exchange")
    os.makedirs(home)
    os.makedirs(dags)
    for f in ("cluster_dags.py", "pipelines.py"):
        shutil.copy(os.path.join(HERE, f), dags)
    env = _airflow_env(home, dags, root, standalone_cluster)
    airflow = os.path.join(os.path.dirname(sys.executable), "airflow")
    out = subprocess.run([airflow, "db", "migrate"], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]

    out = subprocess.run([sys.executable, RUN_DAG, os.path.join(dags, "cluster_dags.py"), "cluster_words"],
                         env=env, capture_output=True, text=True, timeout=900)
    lines = [l for l in out.stdout.splitlines() if l.startswith('{"run_id"')]
    assert lines, out.stdout[-4000:] + out.stderr[-4000:]
    result = json.loads(lines[-1])
    log = out.stdout + out.stderr
    assert result["state"] == "success", log[-6000:]
    assert set(result["tasks"].values()) == {"success"}, result["tasks"]

    # The chains ran as applications of the standalone master, with the shipped package.
    names = standalone_cluster.app_names()
    assert sum(1 for n in names if "cluster_words" in n) >= 2, names
    # package_archive() zips, one per package content (the source tree may change between tasks when
    # developed in place), never one per task: fewer zips than chain tasks.
    shipped = os.listdir(os.path.join(home, "packages"))
    assert 1 <= len(shipped) <= 2 and all(s.startswith("airflow_flinkchain-") and s.endswith(".zip") for s in shipped), shipped

    from airflow_flinkchain.airflow.paths import run_key
    from airflow_flinkchain.runtime.exchange.dataset import read_records
    from airflow_flinkchain.runtime.exchange.layout import ExchangeArea

    area = ExchangeArea(root, "cluster_words", run_key(result["run_id"]))
    metrics = {p.name: json.loads(p.read_text()) for p in (tmp_path / "exchange").rglob("_metrics/*.json")}
    assert metrics and all(m["state"] == "success" and m["spark_app_id"].startswith("app-") for m in metrics.values())
    expected = expected_word_counts()
    totals = sorted(tuple(r) for r in read_records(area.collect("totals"), "collect:totals"))
    odd = sorted(tuple(r) for r in read_records(area.collect("odd"), "collect:odd"))
    assert totals == expected["totals"]
    assert odd == expected["odd"]
    from pipelines import word_counts

    local = word_counts().execute(spark=spark)
    assert totals == sorted(tuple(r) for r in local.output("totals"))
    assert odd == sorted(tuple(r) for r in local.output("odd"))


@pytest.mark.airflow
def test_chain_operator_refuses_cluster_mode_on_standalone(monkeypatch):
    """No cluster needed: the operator fails before spark-submit, with Spark's reason and what to do."""
    from airflow_flinkchain import StreamPipeline
    from airflow_flinkchain.cluster import STANDALONE_PYTHON_CLUSTER_MODE_ERROR

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(
        {"conn_type": "spark", "host": "spark://127.0.0.1", "port": 7077, "extra": {"deploy-mode": "cluster"}}))
    import pendulum
    from airflow.sdk import DAG

    from airflow_flinkchain.airflow.operators import ChainSubmitOperator

    with DAG("cluster_mode_refused", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
        p = StreamPipeline("cm", parallelism=1)
        p.from_collection(range(3)).map(lambda x: x).name("m").collect("out")
        p.to_airflow()
    (op,) = [t for t in dag.tasks if isinstance(t, ChainSubmitOperator)]
    with pytest.raises(Exception) as err:
        op._get_hook()
    msg = str(err.value)
    assert STANDALONE_PYTHON_CLUSTER_MODE_ERROR in msg and "deploy_mode='client'" in msg, msg
