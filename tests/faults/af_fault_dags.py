"""DAGs of the fault-injection suite (copied into the test's dags folder).

af_fault_kill: chain `work` SIGKILLs its own spark-submit (the SparkSubmit JVM)
on its first attempt while its subtasks are writing; Airflow retries it.
af_conc_a / af_conc_b: tiny two-chain pipelines run concurrently, sharing the
exchange root, the run store and one SQL table."""

import os
import signal
from datetime import timedelta

import pendulum
from airflow.sdk import DAG

import sample_data
from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.functions import MapFunction
from airflow_flinkchain.io import CsvSink, JsonLinesSink, ParquetSink, SqlSink

START = pendulum.datetime(2026, 1, 1, tz="UTC")
RETRY = {"retries": 1, "retry_delay": timedelta(seconds=1)}


def kill_marker() -> str:
    return os.path.join(sample_data.output_dir(), "kill-spark-submit.marker")


class KillSparkSubmitOnce(MapFunction):
    """Identity; in close() of subtask 1 (after the sinks before it flushed their
    files), while the marker exists: remove it and SIGKILL the SparkSubmit JVM."""

    def open(self, ctx):
        self.k = ctx.get_index_of_this_subtask()

    def map(self, value):
        return value

    def close(self):
        marker = kill_marker()
        if self.k != 1 or not os.path.exists(marker):
            return
        os.remove(marker)
        import psutil

        proc = psutil.Process(os.getpid())
        while proc is not None:
            if any("org.apache.spark.deploy.SparkSubmit" in part for part in proc.cmdline()):
                os.kill(proc.pid, signal.SIGKILL)
                return
            proc = proc.parent()
        raise RuntimeError("no SparkSubmit process above this worker")


def kill_pipeline(output_dir: str, db_url: str, name: str = "killed") -> StreamPipeline:
    p = StreamPipeline(name, parallelism=2, runtime_mode="batch")  # totals per key
    rows = p.from_collection([{"n": i, "tag": f"t{i % 4}"} for i in range(300)]).name("numbers") \
        .rebalance().map(lambda r: {**r, "sq": r["n"] * r["n"]}).name("work")
    out = os.path.join(output_dir, name, "{{ run_key }}")
    rows.sink_to(ParquetSink(os.path.join(out, "pq")), name="pq_sink")
    rows.sink_to(CsvSink(os.path.join(out, "csv")), name="csv_sink")
    rows.sink_to(JsonLinesSink(os.path.join(out, "json")), name="json_sink")
    rows.sink_to(SqlSink("killed_rows", url=db_url), name="sql_sink")
    totals = rows.key_by(lambda r: r["tag"]).reduce(lambda a, b: {**a, "n": a["n"] + b["n"], "sq": a["sq"] + b["sq"]}) \
        .name("per_tag")
    totals.sink_to(ParquetSink(os.path.join(out, "per_tag")), name="per_tag_sink")
    rows.map(KillSparkSubmitOnce()).name("killer").filter(lambda r: False).name("drop").collect("nothing")
    return p


with DAG("af_fault_kill", schedule=None, start_date=START, catchup=False, default_args=RETRY) as fault_kill:
    kill_pipeline(sample_data.output_dir(), sample_data.sqlite_url()).to_airflow()


def conc_pipeline(name: str, factor: int) -> StreamPipeline:
    p = StreamPipeline(name, parallelism=2, runtime_mode="batch")  # totals per key
    s = p.from_collection(range(100)).name("numbers").map(lambda x: {"v": x * factor}).name("scale")
    s.sink_to(SqlSink("conc_rows", url=sample_data.sqlite_url()), name="rows")
    s.key_by(lambda r: r["v"] % 5).reduce(lambda a, b: {"v": a["v"] + b["v"]}).name("sum").sink_to(
        ParquetSink(os.path.join(sample_data.output_dir(), name, "{{ run_key }}")), name="sums")
    return p


with DAG("af_conc_a", schedule=None, start_date=START, catchup=False) as conc_a:
    conc_pipeline("conc_a", 2).to_airflow()

with DAG("af_conc_b", schedule=None, start_date=START, catchup=False) as conc_b:
    conc_pipeline("conc_b", 3).to_airflow()
