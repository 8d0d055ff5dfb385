"""Stream runs with every location on an S3 server (moto): N runs plus a drain, each
SIGKILLed at a random record and retried, equal one STREAMING run; two runs committing at
once: one commits, the other is refused."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from airflow_flinkchain.runtime import stream_run
from airflow_flinkchain.runtime.exchange.checkpoints import CheckpointArea
from airflow_flinkchain.runtime.stream_run import StreamRunError, begin_stream_run, commit_stream_run
from tests.objectstore.s3_pipelines import EVENTS, read_json_dir, stream_pipeline, write_events
from tests.streamruns.cases import FailOn, as_multiset, slices

pytestmark = [pytest.mark.s3]
REPO = Path(__file__).resolve().parents[2]

KILLED_RUN = """
import os, signal, sys
sys.path.insert(0, {repo!r})
if {where!r} == "before-pointer":  # the checkpoint is copied into place, the pointer not written
    from airflow_flinkchain.runtime import stream_run
    stream_run._point_at = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
from tests.objectstore.s3_pipelines import stream_pipeline
from tests.streamruns.cases import FailOn
stream_pipeline({source!r}, {sink!r}, {ckpt!r}, fail=FailOn({marker!r}, {value!r}, kill=True)).execute_local(
    run_id={run_id!r}, drain={drain!r})
"""


@pytest.mark.parametrize("where", ["running", "before-pointer"])
def test_stream_runs_on_s3_killed_and_retried_equal_one_streaming_run(s3_server, tmp_path, where):
    """Each run SIGKILLed (at a random record, or after its checkpoint was copied into place
    and before the pointer), then retried."""
    bucket = f"s3://{s3_server.new_bucket()}"
    source, sink, ckpt = f"{bucket}/in", f"{bucket}/out", f"{bucket}/checkpoints"
    marker = tmp_path / "kill-marker"
    rng = random.Random(30)
    pieces = slices(EVENTS, 3)
    collected = []
    for k, part in enumerate(pieces):
        drain = k == len(pieces) - 1
        write_events(source, k, part)
        marker.write_text("")
        script = KILLED_RUN.format(repo=str(REPO), where=where, source=source, sink=sink, ckpt=ckpt, marker=str(marker),
                                   value=rng.choice(part)[1] if where == "running" else -1, run_id=f"r{k}",
                                   drain=drain)
        proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, timeout=600)
        assert proc.returncode == -9, proc.stderr.decode()[-3000:]
        marker.unlink()
        res = stream_pipeline(source, sink, ckpt, fail=FailOn(str(marker), -1)).execute_local(
            run_id=f"r{k}", drain=drain)
        collected.extend(res.output("windows"))
    local = tmp_path / "local"
    write_events(str(local / "in"), 0, EVENTS)
    one = stream_pipeline(str(local / "in"), str(local / "out"), str(local / "ckpt")).execute_local(
        run_id="one", drain=True)
    assert as_multiset(collected) == as_multiset(one.output("windows"))
    assert read_json_dir(sink) == read_json_dir(str(local / "out"))
    assert CheckpointArea(ckpt).read_latest()["run_id"] == "r2"


def test_two_concurrent_stream_runs_on_s3_one_commits_the_other_is_refused(s3_server, monkeypatch):
    bucket = f"s3://{s3_server.new_bucket()}"
    source, sink, ckpt = f"{bucket}/in", f"{bucket}/out", f"{bucket}/checkpoints"
    write_events(source, 0, EVENTS[:20])
    stream_pipeline(source, sink, ckpt).execute_local(run_id="first")
    write_events(source, 1, EVENTS[20:40])
    job = stream_pipeline(source, sink, ckpt).plan()
    runs = [begin_stream_run(job, ckpt, name) for name in ("a", "b")]
    assert runs[0].expected_latest == runs[1].expected_latest == 1
    for run in runs:  # both stage every chain (as their chain tasks would)
        _stage_chains(job, run)
    # both commits read the pointer and pass its check before either claims checkpoint 2
    both_checked = threading.Barrier(2, timeout=120)
    real_claim = stream_run._claim

    def claim_together(area, run, n):
        both_checked.wait()
        return real_claim(area, run, n)

    monkeypatch.setattr(stream_run, "_claim", claim_together)
    outcomes = {}

    def commit(run):
        try:
            outcomes[run.run_id] = commit_stream_run(job, run)["checkpoint"]
        except StreamRunError as exc:
            outcomes[run.run_id] = exc

    threads = [threading.Thread(target=commit, args=(run,)) for run in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    committed = [r for r, o in outcomes.items() if o == 2]
    refused = [o for o in outcomes.values() if isinstance(o, StreamRunError)]
    assert len(committed) == 1 and len(refused) == 1, outcomes
    loser = ({"a", "b"} - set(committed)).pop()
    assert f"stream run {loser!r} of the stream in {ckpt!r}" in str(refused[0])
    assert "concurrent runs of one stream are refused" in str(refused[0])
    latest = CheckpointArea(ckpt).read_latest()
    assert latest["run_id"] == committed[0] and latest["checkpoint"] == 2
    assert CheckpointArea(ckpt).manifest(2)["run_id"] == committed[0]


def _stage_chains(job, run) -> None:
    from airflow_flinkchain.runtime.core.serialize import dumps_plan
    from airflow_flinkchain.runtime.local.exchange import MemoryExchange
    from airflow_flinkchain.runtime.local.runner import LocalChainRun
    from airflow_flinkchain.runtime.pipeline_run import render_overrides, template_context, topological_chains

    overrides = render_overrides(job, template_context(run.run_id, job.pipeline))
    exchange, plan_bytes = MemoryExchange(), dumps_plan(job)
    for chain in topological_chains(job):
        LocalChainRun(job, chain.id, run.run_id, plan_bytes, exchange, overrides, run).run()


@pytest.mark.spark
def test_stream_runs_on_spark_with_everything_on_s3_equal_one_streaming_run(s3_server, spark, tmp_path):
    """The same stream on Spark (execute()): exchange root, checkpoints, source and sink on S3."""
    bucket = f"s3://{s3_server.new_bucket()}"
    source, sink, ckpt = f"{bucket}/in", f"{bucket}/out", f"{bucket}/checkpoints"
    collected = []
    for k, part in enumerate(slices(EVENTS, 2)):
        write_events(source, k, part)
        res = stream_pipeline(source, sink, ckpt).execute(spark=spark, exchange_root=f"{bucket}/exchange",
                                                          run_id=f"r{k}", drain=k == 1)
        collected.extend(res.output("windows"))
    local = tmp_path / "local"
    write_events(str(local / "in"), 0, EVENTS)
    one = stream_pipeline(str(local / "in"), str(local / "out"), str(local / "ckpt")).execute_local(
        run_id="one", drain=True)
    assert as_multiset(collected) == as_multiset(one.output("windows"))
    assert read_json_dir(sink) == read_json_dir(str(local / "out"))
