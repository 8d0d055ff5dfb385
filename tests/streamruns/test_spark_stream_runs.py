"""Stream runs on Spark (`execute()`): the same guarantee, with the parallelism changed
between runs and a file sink published per committed run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.airflow.paths import spark_entry_path
from airflow_flinkchain.runtime.exchange.dataset import read_records
from airflow_flinkchain.runtime.exchange.layout import ExchangeArea
from airflow_flinkchain.runtime.pipeline_run import topological_chains
from airflow_flinkchain.runtime.spark.job import run_chain
from airflow_flinkchain.runtime.spark.plan_file import dump_plan
from airflow_flinkchain.runtime.stream_run import StreamRun, begin_stream_run, commit_stream_run
from tests.conformance_cases import (WithTimestamp, as_multiset, first_field, sum_values, watermark_strategy,
                                     window_assigner)
from tests.streamruns.cases import (KillSparkSubmit, build, collected, differences, make_records, reference,
                                    slices)
from tests.streamruns.partitioned_log import PartitionedLog, append

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.spark

SINKS = ("tumbling", "session", "bucket")


def test_stream_runs_on_spark_equal_one_streaming_run(spark, tmp_path):
    records = make_records(n=120, seed=13)
    want = reference(tmp_path, records, SINKS)
    log, ckpt, out = str(tmp_path / "log"), str(tmp_path / "ckpt"), tmp_path / "files"
    results = []
    for k, part in enumerate(slices(records, 2)):
        append(log, "p0", part)
        p = build("spark-stream", log, ckpt, parallelism=(2, 3)[k], sinks=SINKS, file_sink=str(out))
        results.append(p.execute(spark=spark, run_id=f"r{k}"))
    p = build("spark-stream", log, ckpt, parallelism=2, sinks=SINKS, file_sink=str(out))
    results.append(p.execute(spark=spark, run_id="drain", drain=True))
    assert differences(collected(results, SINKS), want) == []
    assert [r.stream["seq"] for r in results] == [1, 2, 3]
    rows = [tuple(json.loads(line)) for f in sorted(out.glob("*.json")) for line in f.read_text().splitlines()]
    assert as_multiset(rows) == as_multiset([v for v, _ts in want["tumbling"].elements()])


def kill_pipeline(log: str, ckpt: str, marker: str, value: int):
    p = StreamPipeline("killed-stream", runtime_mode="streaming", checkpoint_dir=ckpt)
    s = p.from_source(PartitionedLog(directory=log), name="log").uid("log")
    s = s.assign_timestamps_and_watermarks(watermark_strategy({"bounded": 500})).uid("wm")
    s.key_by(first_field).map(KillSparkSubmit(marker, value)).name("killer").set_parallelism(2).key_by(
        first_field).window(window_assigner(["tumbling", 1000])).reduce(sum_values).uid("win").set_parallelism(
        2).process(WithTimestamp()).name("stamp").collect("out")
    return p


@pytest.mark.e2e
def test_spark_submit_killed_mid_run_then_retried(spark, tmp_path):
    """A stream run whose chain task's spark-submit is SIGKILLed mid-way: nothing commits;
    the retried chain restarts from the run's base checkpoint and the run commits once.
    Only the killed chain goes through spark-submit (twice); the run's other chains run
    in this process with `run_chain`, runs 1 and 3 with execute_local(): the checkpoints
    are the same for every runner."""
    records = make_records(n=90, seed=17)
    whole = str(tmp_path / "whole")
    append(whole, "p0", records)
    want = as_multiset(kill_pipeline(whole, None, "", -1).execute_local().output("out"))
    log, ckpt, marker = str(tmp_path / "log"), str(tmp_path / "ckpt"), str(tmp_path / "kill.marker")
    parts = slices(records, 3)
    value = parts[1][len(parts[1]) // 2][1]
    outputs = []
    append(log, "p0", parts[0])
    outputs += kill_pipeline(log, ckpt, marker, value).execute_local(run_id="r0").output("out")

    append(log, "p0", parts[1])
    open(marker, "w").close()
    p = kill_pipeline(log, ckpt, marker, value)
    job = p.plan()
    run_id, root = "r1", str(tmp_path / "exchange")
    begin_stream_run(job, ckpt, run_id)
    plan_path = str(tmp_path / "plan.pkl")
    dump_plan(job, plan_path)
    bin_dir = os.path.dirname(sys.executable)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "PYTHONPATH": str(REPO),
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}

    def submit(chain_id):
        cmd = [os.path.join(bin_dir, "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
               spark_entry_path(), "--plan", plan_path, "--chain", chain_id, "--run-id", run_id,
               "--exchange-root", root, "--dag-id", job.pipeline, "--checkpoint-dir", ckpt]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300)

    chains = [c.id for c in topological_chains(job)]
    assert chains[:2] == ["log", "killer"]  # the killer heads the second chain task
    def in_process(chain_id):
        run_chain(spark, job, chain_id, run_id, root, dag_id=job.pipeline, stream_run=StreamRun.open(ckpt, run_id))

    in_process(chains[0])
    killed = submit(chains[1])
    assert killed.returncode != 0 and not os.path.exists(marker), killed.stdout[-2000:]
    assert json.loads((tmp_path / "ckpt" / "_latest.json").read_text())["checkpoint"] == 1
    retried = submit(chains[1])
    assert retried.returncode == 0, retried.stdout[-3000:]
    for chain_id in chains[2:]:
        in_process(chain_id)
    commit_stream_run(job, StreamRun.open(ckpt, run_id))
    outputs += read_records(ExchangeArea(root, job.pipeline, run_id).collect("out"), "collect:out")

    append(log, "p0", parts[2])
    outputs += kill_pipeline(log, ckpt, marker, value).execute_local(run_id="r2", drain=True).output("out")
    assert as_multiset(outputs) == want
