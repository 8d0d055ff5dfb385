"""Issue 6, "killed processes" (runtime side): a Python worker SIGKILLed in the
middle of writing its subtask's outputs fails the chain attempt (Spark does not
silently finish it), nothing of it becomes visible, and the retry of the chain
gives exactly the output of a clean run. The spark-submit kill + Airflow retry
is in test_airflow_faults.py."""

from __future__ import annotations

import os
import signal

import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.functions import MapFunction
from airflow_flinkchain.io import ParquetSink, SqlSink
from airflow_flinkchain.runtime.exchange.dataset import read_records
from airflow_flinkchain.runtime.exchange.layout import ExchangeArea
from airflow_flinkchain.runtime.spark.local import execute_pipeline, render_overrides, template_context
from airflow_flinkchain.runtime.spark.job import ChainRunError, run_chain

from .helpers import multiset, parquet_rows, sql_rows, table_exists, tree

pytestmark = pytest.mark.spark


class KillWorkerOnce(MapFunction):
    """Identity; in close() of subtask 1, after the sinks before it wrote their files,
    SIGKILLs its own Python worker while `marker` exists (removing it first)."""

    def __init__(self, marker):
        self.marker = marker

    def open(self, ctx):
        self.k = ctx.get_index_of_this_subtask()

    def map(self, value):
        return value

    def close(self):
        if self.k == 1 and os.path.exists(self.marker):
            os.remove(self.marker)
            os.kill(os.getpid(), signal.SIGKILL)


def pipeline(tmp, marker):
    p = StreamPipeline("worker_kill", parallelism=2, runtime_mode="batch")
    rows = p.from_collection([{"n": i} for i in range(200)]).name("numbers").rebalance() \
        .map(lambda r: {"n": r["n"], "sq": r["n"] ** 2}).name("work")
    rows.sink_to(ParquetSink(str(tmp / "out" / "{{ run_id }}")), name="files")
    rows.sink_to(SqlSink("rows", url=f"sqlite:///{tmp / 'db.sqlite'}"), name="table")
    rows.key_by(lambda r: r["n"] % 4).reduce(lambda a, b: {"n": a["n"] + b["n"], "sq": a["sq"] + b["sq"]}) \
        .name("sum").collect("sums")
    rows.map(KillWorkerOnce(str(marker))).name("killer").filter(lambda r: False).name("drop").collect("none")
    return p


def test_python_worker_killed_mid_write_then_retry(spark, tmp_path):
    marker = tmp_path / "kill.marker"
    marker.touch()
    p = pipeline(tmp_path, marker)
    job = p.plan()
    root = str(tmp_path / "ex")
    with pytest.raises(ChainRunError) as info:
        execute_pipeline(p, spark=spark, exchange_root=root, run_id="r1")
    assert not marker.exists()
    work = job.chains[1]
    assert work.name.startswith("work")
    assert f"chain {work.id!r}" in str(info.value) or "Python worker" in str(info.value) or "crashed" in str(info.value)
    area = ExchangeArea(root, p.name, "r1")
    assert not area.edge(work.out_edges[0]).exists()
    assert not area.run.join("_attempts").exists()
    assert [f for f in tree(str(tmp_path / "out")) if os.path.isfile(tmp_path / "out" / f)] == [] \
        if (tmp_path / "out").exists() else True
    assert not table_exists(str(tmp_path / "db.sqlite"), "rows")

    overrides = render_overrides(job, template_context("r1", job.pipeline))
    for chain in job.chains[1:]:  # the retry of the killed chain, then downstream
        run_chain(spark, job, chain.id, "r1", root, overrides=overrides)
    execute_pipeline(p, spark=spark, exchange_root=root, run_id="clean")
    assert parquet_rows(str(tmp_path / "out" / "r1")) == parquet_rows(str(tmp_path / "out" / "clean"))
    assert sum(parquet_rows(str(tmp_path / "out" / "r1")).values()) == 200
    assert sql_rows(str(tmp_path / "db.sqlite"), "rows", "r1") == sql_rows(str(tmp_path / "db.sqlite"), "rows", "clean")
    assert multiset(read_records(area.collect("sums"), "collect:sums")) == \
        multiset(read_records(ExchangeArea(root, p.name, "clean").collect("sums"), "collect:sums"))
