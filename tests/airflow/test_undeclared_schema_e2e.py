"""An Airflow run over a Parquet source that declares no schema, its path a template: the setup
task renders the path, reads the files' schema into the run's plan, and the source's exchange
edge is typed Parquet columns (what the vectorized aggregation's chain reads as batches)."""

from __future__ import annotations

import os
import textwrap
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import run_dag

pytestmark = [pytest.mark.e2e, pytest.mark.airflow]

DAG_FILE = '''
import pendulum
from airflow.sdk import DAG
from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.io import ParquetSink, ParquetSource

with DAG("af_undeclared_schema", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
         catchup=False) as dag:
    p = StreamPipeline("undeclared", parallelism=2, runtime_mode="batch")
    (p.from_source(ParquetSource({data!r} + "/{{{{ dag.dag_id }}}}"), name="src")
        .key_by(lambda r: r["k"]).sum("v").name("total")
        .sink_to(ParquetSink({out!r} + "/{{{{ run_key }}}}"), name="totals"))
    p.to_airflow(keep_exchange=True)
'''


def test_setup_reads_the_schema_of_a_templated_undeclared_source(airflow_home, tmp_path):
    env, dags = airflow_home
    data, out = tmp_path / "data", tmp_path / "out"
    (data / "af_undeclared_schema").mkdir(parents=True)
    rows = [{"k": f"k{i % 3}", "v": i, "note": None if i % 2 else "x"} for i in range(30)]
    pq.write_table(pa.Table.from_pylist(rows), data / "af_undeclared_schema" / "a.parquet")
    dag_file = os.path.join(dags, "af_undeclared_schema.py")
    with open(dag_file, "w") as f:
        f.write(textwrap.dedent(DAG_FILE.format(data=str(data), out=str(out))))
    result = run_dag(env, dag_file, "af_undeclared_schema")
    assert result["state"] == "success", result["log"][-6000:]

    from airflow_flinkchain.airflow.paths import run_key
    from airflow_flinkchain.planner.vectorized import runs_vectorized
    from airflow_flinkchain.runtime.exchange.dataset import open_channel
    from airflow_flinkchain.runtime.exchange.layout import ExchangeArea
    from airflow_flinkchain.runtime.spark.plan_file import load_plan

    key = run_key(result["run_id"])
    written = pq.read_table(str(out / key)).to_pylist()
    assert Counter((r["k"], r["v"]) for r in written) == Counter(
        {(f"k{k}", sum(range(k, 30, 3))) for k in range(3)})
    area = ExchangeArea(os.path.join(env["AIRFLOW_HOME"], "flinkchain", "exchange"), "af_undeclared_schema", key)
    job = load_plan(area.plan().uri)
    g = job.stream_graph
    src, total = (next(n for n in g.nodes if n.name == name) for name in ("src", "total"))
    assert g.inferred_types[src.id].names == ["k", "v", "note"] and runs_vectorized(g, total)
    (edge,) = job.chain_of(total.id).in_edges
    files = [f for ch in range(2) for f in open_channel(area.edge(edge), edge, ch, 2)]
    assert {f.format for f in files} == {"typed"}
