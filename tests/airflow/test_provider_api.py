"""The chain task on the provider's public API: its hook is built from constructor
arguments and sizes a local master through `get_connection`; Airflow connections of
SQL sources/sinks are resolved by the task and reach the runtime in spark-submit's
environment (not in the plan file); the runtime never imports Airflow."""

from __future__ import annotations

import os
import subprocess
import sys

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.airflow.operators import ChainSubmitHook
from airflow_flinkchain.io import SqlSink, SqlSource
from airflow_flinkchain.runtime.connectors.sql import conn_url_env, resolve_url
from airflow_flinkchain.runtime.spark.plan_file import dump_plan
from test_airflow_render import render

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _sql_pipeline():
    p = StreamPipeline("sqlconn", parallelism=1)
    p.from_source(SqlSource("SELECT 1 AS a", conn_id="warehouse"), name="read") \
        .map(lambda r: r).name("copy").sink_to(SqlSink("t", conn_id="warehouse"), name="write")
    return p


def test_sql_connection_is_handed_over_in_the_environment_not_the_plan(tmp_path, monkeypatch):
    url = "postgresql://etl:s3cret@dbhost:5432/sales"  # resolve_url checks its driver: one installed here
    monkeypatch.setenv("AIRFLOW_CONN_WAREHOUSE", url)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type":"spark","host":"local[2]"}')
    p = _sql_pipeline()
    dag, _ = render(p)
    op = next(t for t in dag.tasks if getattr(t, "chain_spec", None) is not None)
    assert op.chain_spec.conn_ids == ("warehouse",)
    urls = op._connection_urls()
    assert urls == {conn_url_env("warehouse"): url}
    assert "SECRET" in conn_url_env("warehouse")  # the provider masks it in the commands it logs
    monkeypatch.setenv(conn_url_env("warehouse"), url)
    assert resolve_url(None, "warehouse", "source 'read'") == url
    plan = tmp_path / "plan.pkl"
    dump_plan(p.plan(), str(plan))
    assert b"s3cret" not in plan.read_bytes()


def test_runtime_without_the_handed_over_url_says_what_to_set(monkeypatch):
    monkeypatch.delenv(conn_url_env("warehouse"), raising=False)
    try:
        resolve_url(None, "warehouse", "sink 'write'")
    except RuntimeError as exc:
        assert "sink 'write'" in str(exc) and conn_url_env("warehouse") in str(exc) and "url=" in str(exc)
    else:
        raise AssertionError("no error")


def test_hook_is_the_providers_with_a_local_master_sized_to_the_chain(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type":"spark","host":"local[2]"}')
    dag, _ = render(_sql_pipeline())
    op = next(t for t in dag.tasks if getattr(t, "chain_spec", None) is not None)
    monkeypatch.setenv("AIRFLOW_CONN_WAREHOUSE", "mysql://etl:s3cret@dbhost:3306/sales")
    spark_home = os.environ.get("SPARK_HOME")
    hook = op._get_hook()
    assert isinstance(hook, ChainSubmitHook)
    assert hook.get_connection("spark_default").host == "local[1]"  # parallelism 1 of a local[2] budget
    assert os.environ.get("SPARK_HOME") == spark_home  # the worker's environment is left alone


def test_runtime_and_store_import_no_airflow():
    code = ("import sys, airflow_flinkchain.runtime.spark.job, airflow_flinkchain.runtime.spark.local, "
            "airflow_flinkchain.runtime.spark.entry, airflow_flinkchain.runtime.connectors, airflow_flinkchain.store; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'airflow'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": REPO})
    assert out.stdout.strip() == "[]"


def _spark_submit_conf(op) -> dict:
    cmd = op._get_hook()._build_spark_submit_command("app.py")
    return dict(cmd[i + 1].split("=", 1) for i, a in enumerate(cmd) if a == "--conf")


def test_a_chain_on_a_standalone_master_takes_as_many_cores_as_its_parallelism(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type":"spark","host":"spark://127.0.0.1","port":7077,'
                                                     '"extra":{"deploy-mode":"client"}}')
    p = StreamPipeline("cores", parallelism=3)
    p.from_collection(range(3)).map(lambda x: x).name("m").collect("out")
    dag, _ = render(p)
    ops = [t for t in dag.tasks if getattr(t, "chain_spec", None) is not None]
    assert [_spark_submit_conf(op)["spark.cores.max"] for op in ops] == [str(op.chain_spec.parallelism) for op in ops]
    assert 3 in [op.chain_spec.parallelism for op in ops]
    q = StreamPipeline("cores_set", parallelism=3, total_executor_cores=5)
    q.from_collection(range(3)).map(lambda x: x).name("m").collect("out")
    dag, _ = render(q)
    op = [t for t in dag.tasks if getattr(t, "chain_spec", None) is not None][-1]
    assert "spark.cores.max" not in _spark_submit_conf(op)  # --total-executor-cores 5 says it
    assert op._get_hook()._build_spark_submit_command("app.py").count("--total-executor-cores") == 1
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type":"spark","host":"local[2]"}')
    assert "spark.cores.max" not in _spark_submit_conf(op)
