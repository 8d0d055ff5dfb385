"""Re-running a chain replaces its outputs (exchange, file sinks, SQL sink); file
sources with templated paths; the spark-submit entry point; Flink conformance."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conformance_cases import build_case, load_cases

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.io import CsvSink, FileSource, JsonLinesSink, ParquetSink, ParquetSource, SqlSink, SqlSource
from airflow_flinkchain.runtime.core.elements import Watermark
from airflow_flinkchain.runtime.exchange.dataset import merged_input, open_channel
from airflow_flinkchain.runtime.exchange.layout import ExchangeArea
from airflow_flinkchain.runtime.spark.local import execute_pipeline, render_overrides, template_context
from airflow_flinkchain.runtime.spark.plan_file import dump_plan
from airflow_flinkchain.runtime.spark.job import run_chain

pytestmark = pytest.mark.spark
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_rerun_of_a_chain_replaces_exchange_files_and_sql(spark, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    import sqlalchemy as sa

    src_dir = tmp_path / "in" / "2024-01-02"
    src_dir.mkdir(parents=True)
    pq.write_table(pa.table({"id": [1, 2, 3, 4], "name": list("abcd")}), str(src_dir / "data.parquet"))
    db = f"sqlite:///{tmp_path / 'db.sqlite'}"
    out = tmp_path / "out"
    p = StreamPipeline("idem", parallelism=2)
    rows = p.from_source(ParquetSource(str(tmp_path / "in" / "{{ ds }}")), name="src") \
        .map(lambda r: {**r, "id2": r["id"] * 2}).name("double")
    rows.sink_to(ParquetSink(str(out / "pq" / "{{ run_id }}"), output_type={
        "id": "int64", "name": "string", "id2": "int64"}), name="pq_sink")
    rows.sink_to(CsvSink(str(out / "csv")), name="csv_sink")
    rows.sink_to(JsonLinesSink(str(out / "json")), name="json_sink")
    rows.sink_to(SqlSink("results", url=db), name="sql_sink")
    rows.rebalance().map(lambda r: r["id"]).name("ids").collect("ids")
    job = p.plan()
    overrides = render_overrides(job, template_context("run1", "idem") | {"ds": "2024-01-02"})
    root = str(tmp_path / "exchange")
    head = job.chains[0].id
    first = run_chain(spark, job, head, "run1", root, overrides=overrides)
    second = run_chain(spark, job, head, "run1", root, overrides=overrides)  # a retry / cleared task
    assert first.metrics["state"] == second.metrics["state"] == "success"
    assert {o.get("sink") or o.get("edge"): o["records"] for o in second.outputs}["sql_sink"] == 4, json.dumps(second.metrics)

    area = ExchangeArea(root, "idem", "run1")
    edge = job.chains[0].out_edges[0]
    got = [x for k in range(2) for x in merged_input(open_channel(area.edge(edge), edge, k, 2))]
    assert sorted(r["id"] for r in got if not isinstance(r, Watermark)) == [1, 2, 3, 4]  # no duplicates
    assert sorted(spark.read.parquet(str(out / "pq" / "run1")).toPandas()["id2"]) == [2, 4, 6, 8]
    assert spark.read.option("header", True).csv(str(out / "csv")).count() == 4
    assert sorted(json.loads(line)["id"] for f in sorted(os.listdir(out / "json"))
                  for line in open(out / "json" / f)) == [1, 2, 3, 4]
    assert not [n for n in os.listdir(out) if n.startswith(".")]  # no staging leftovers
    engine = sa.create_engine(db)
    with engine.connect() as c:
        assert c.execute(sa.text("select count(*), count(distinct id) from results where _run_id='run1'")).one() == (4, 4)
    # another run id appends its own rows and leaves run1's alone; a SQL source reads them back
    q = StreamPipeline("sqlread", parallelism=1)
    q.from_source(SqlSource("select id from results where _run_id = :r", url=db, params={"r": "run1"}),
                  name="q").map(lambda r: r["id"]).name("id").collect("ids")
    assert sorted(execute_pipeline(q, spark=spark).output("ids")) == [1, 2, 3, 4]
    engine.dispose()


def test_file_source_csv_and_missing_path(spark, tmp_path):
    (tmp_path / "a.csv").write_text("k,v\nx,1\ny,2\n")
    p = StreamPipeline("csv", parallelism=2)
    p.from_source(FileSource(str(tmp_path / "a.csv"), "csv", options={"header": True}), name="src") \
        .map(lambda r: (r["k"], r["v"] + 1)).name("inc").collect("out")
    assert sorted(execute_pipeline(p, spark=spark).output("out")) == [("x", 2), ("y", 3)]
    missing = StreamPipeline("missing", parallelism=1)
    missing.from_source(ParquetSource(str(tmp_path / "nope")), name="src").collect("out")
    with pytest.raises(Exception, match="source 'src': source path .*nope.* does not exist"):
        execute_pipeline(missing, spark=spark)


def test_spark_submit_entry_point(tmp_path):
    """One real spark-submit: a lambda from an odd-named module, metrics file, failure exit."""
    dag = tmp_path / "dags" / "dag_file.py"
    dag.parent.mkdir()
    dag.write_text(
        "from airflow_flinkchain import StreamPipeline\n"
        "OFFSET = 100\n"
        "p = StreamPipeline('submitted', parallelism=1)\n"
        "p.from_collection([1, 2, 0]).name('src').map(lambda x: OFFSET // x).name('divide').collect('out')\n"
        "q = StreamPipeline('submitted_ok', parallelism=1)\n"
        "q.from_collection([1, 2, 4]).name('src').map(lambda x: OFFSET // x).name('divide').collect('out')\n")
    import importlib.util

    spec = importlib.util.spec_from_file_location("unusual_prefix_abc_dag_file", dag)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    try:
        spec.loader.exec_module(mod)
        for name in ("p", "q"):
            dump_plan(getattr(mod, name).plan(), str(tmp_path / f"{name}.pkl"))
        chain = mod.q.plan().chains[0].id
    finally:
        del sys.modules[spec.name]
    bin_dir = os.path.dirname(sys.executable)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    entry = os.path.join(REPO, "airflow_flinkchain", "runtime", "spark", "entry.py")
    root = str(tmp_path / "ex")

    def submit(plan):
        cmd = [os.path.join(bin_dir, "spark-submit"), "--master", "local[1]", "--conf", "spark.ui.enabled=false",
               entry, "--plan", str(tmp_path / plan), "--chain", chain, "--run-id", "manual__2024-01-01T00:00:00",
               "--exchange-root", root, "--dag-id", "d"]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=300)

    ok = submit("q.pkl")
    assert ok.returncode == 0, ok.stderr[-3000:]
    doc = json.loads(ok.stdout.strip().splitlines()[-1])
    area = ExchangeArea(root, "d", "manual__2024-01-01T00:00:00")
    assert json.loads(area.metrics(chain).read_text())["state"] == "success"
    assert doc["state"] == "success" and doc["spark_app_id"]
    assert [o["records"] for o in doc["outputs"] if o.get("sink")] == [3]
    assert {m["name"]: m["records_in"] for m in doc["operators"]}["divide"] == 3
    # where the attempt's time went (runtime/core/timings.py): the driver's and the subtask's marks, in order
    driver = doc["timings"]["driver"]
    order = ["submit_started", "driver_started", "imported", "plan_loaded", "session_ready", "chain_started",
             "job_prepared", "job_done", "chain_committed"]
    assert [driver[m] for m in order] == sorted(driver[m] for m in order)
    (subtask,) = doc["timings"]["subtasks"]
    assert subtask["worker_started"] <= subtask["partition_started"] <= subtask["plan_loaded"] <= subtask["subtask_done"]
    assert driver["job_prepared"] <= subtask["partition_started"] and subtask["subtask_done"] <= driver["job_done"]

    bad = submit("p.pkl")
    assert bad.returncode == 1
    last = bad.stdout.strip().splitlines()[-1]  # PythonRunner merges the driver's stderr into stdout
    assert "operator 'divide'" in last and "ZeroDivisionError" in last, last
    assert json.loads(area.metrics(chain).read_text())["state"] == "failed"


@pytest.mark.parametrize("case", load_cases(), ids=lambda c: c["name"])
def test_flink_conformance_outputs(spark, case):
    pipeline, _ = build_case(case)
    res = execute_pipeline(pipeline, spark=spark)
    for sink, expected in case["flink_outputs_batch"].items():
        assert sorted(res.output(sink)) == sorted(expected), sink


def test_names_over_the_file_system_limit_get_short_stable_paths(spark, tmp_path):
    """Operator names, collect() names and run ids longer than a file name may be
    (255 bytes) run: their path segments are shortened with a hash, all under the root."""
    p = StreamPipeline("long", parallelism=2, runtime_mode="batch")
    (p.from_collection([1, 2, 3, 4]).map(lambda x: x * 10).name("m" * 300)
     .key_by(lambda x: x % 2).reduce(lambda a, b: a + b).name("r" * 300)
     .collect("c" * 300))
    result = execute_pipeline(p, spark, exchange_root=str(tmp_path / "ex"), run_id="run" * 100, keep=True)
    assert result.output("c" * 300) == [100]
    files = [f for f in tmp_path.rglob("*")]
    assert files and all(f.resolve().is_relative_to(tmp_path / "ex") for f in files)
    assert max(len(part.encode()) for f in files for part in f.relative_to(tmp_path).parts) <= 255
