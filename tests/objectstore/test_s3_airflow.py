"""Through Airflow (dag.test(), real spark-submit in local mode): a batch pipeline with its
exchange root, source and sink on S3 and the credentials and endpoint only in an Airflow
`aws` connection named by `storage_conn_id`. The output equals the local run's, and the
secret is in neither the task logs, the plan file, the run store nor anything on S3."""

from __future__ import annotations

import json
import os

import pytest

from tests.objectstore.s3_pipelines import read_json_dir, totals_pipeline, write_orders
from tests.s3_server import ACCESS_KEY, REGION, SECRET_KEY

pytestmark = [pytest.mark.s3, pytest.mark.airflow, pytest.mark.e2e]

DAG_FILE = """
import os, sys
import pendulum
from airflow.sdk import DAG
sys.path.insert(0, {repo!r})
from tests.objectstore.s3_pipelines import totals_pipeline

with DAG("s3_totals_dag", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False) as dag:
    totals_pipeline({bucket!r} + "/in", {bucket!r} + "/out", exchange_root={bucket!r} + "/exchange",
                    storage_conn_id="lake", keep_exchange=True).to_airflow()
"""


def test_an_s3_pipeline_under_airflow_with_a_storage_connection(s3_server, spark, tmp_path):
    import subprocess
    import sys

    from tests.airflow.conftest import REPO, airflow_env, run_dag

    bucket = f"s3://{s3_server.new_bucket()}"
    write_orders(f"{bucket}/in")
    home, dags = tmp_path / "home", tmp_path / "dags"
    home.mkdir()
    dags.mkdir()
    (dags / "s3_dag.py").write_text(DAG_FILE.format(repo=REPO, bucket=bucket))
    env = {k: v for k, v in airflow_env(str(home), str(dags)).items() if not k.startswith("AWS_")}
    env["AIRFLOW_CONN_LAKE"] = json.dumps({"conn_type": "aws", "login": ACCESS_KEY, "password": SECRET_KEY,
                                           "extra": {"region_name": REGION, "endpoint_url": s3_server.endpoint}})
    env["FLINKCHAIN_STORE_URL"] = f"sqlite:///{tmp_path / 'store.db'}"
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "airflow"), "db", "migrate"], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    result = run_dag(env, str(dags / "s3_dag.py"), "s3_totals_dag")
    assert result["state"] == "success", result["log"][-6000:]

    write_orders(str(tmp_path / "in"))
    totals_pipeline(str(tmp_path / "in"), str(tmp_path / "out")).execute(spark=spark,
                                                                         exchange_root=str(tmp_path / "x"))
    assert read_json_dir(f"{bucket}/out") == read_json_dir(str(tmp_path / "out"))

    assert SECRET_KEY not in result["log"]
    logs = [p for p in home.rglob("*") if p.is_file() and p.suffix in (".log", ".json", "")]
    assert not [p for p in logs if SECRET_KEY.encode() in p.read_bytes()]
    assert SECRET_KEY.encode() not in (tmp_path / "store.db").read_bytes()
    client = s3_server.client()
    for key in s3_server.keys(bucket[5:]):  # the plan, metrics, exchange data, outputs
        assert SECRET_KEY.encode() not in client.get_object(Bucket=bucket[5:], Key=key)["Body"].read(), key
    assert any(k.endswith("_plan/plan.pkl") for k in s3_server.keys(bucket[5:]))
