"""Rendering of a stream-run pipeline (a streaming pipeline with a checkpoint_dir): no
scheduler, no Spark. The runs themselves: test_airflow_scheduler.py (the real scheduler)."""

from __future__ import annotations

import os
import sys

import pendulum
import pytest

from airflow.sdk import DAG

from airflow_flinkchain.airflow.lifecycle import StreamCommitOperator
from airflow_flinkchain.airflow.run_context import PipelineRun
from airflow_flinkchain.airflow.stream_runs import drain_requested

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "dags"))
from flinkchain_stream_runs import stream_runs_pipeline  # noqa: E402

START = pendulum.datetime(2026, 1, 1, tz="UTC")


def pipeline(checkpoint_dir="/ckpt/clicks", **kw):
    return stream_runs_pipeline("/in/clicks", "/out", checkpoint_dir, **kw)


def render(p, dag_id="s", **dag_kw):
    with DAG(dag_id, schedule=None, start_date=START, catchup=False, **dag_kw) as dag:
        tasks = p.to_airflow()
    return dag, tasks


def ups(dag, task_id):
    return sorted(dag.task_dict[task_id].upstream_task_ids)


def test_commit_task_after_every_chain_before_the_teardown():
    dag, tasks = render(pipeline())
    g = "stream_runs"
    assert sorted(dag.task_dict) == sorted(f"{g}.{t}" for t in (
        "pipeline_setup", "clicks", "page_views", "sessions", "stream_commit", "pipeline_teardown"))
    assert ups(dag, f"{g}.stream_commit") == [f"{g}.clicks", f"{g}.page_views", f"{g}.sessions"]
    assert f"{g}.stream_commit" in ups(dag, f"{g}.pipeline_teardown")
    commit = dag.task_dict[f"{g}.stream_commit"]
    assert isinstance(commit, StreamCommitOperator) and tasks.commit is commit
    # not after a failed (or upstream-failed) chain; the teardown still runs
    assert str(commit.trigger_rule) in ("all_success", "TriggerRule.ALL_SUCCESS")
    assert not commit.is_setup and not commit.is_teardown
    assert tasks.teardown.is_teardown


def test_the_sinks_are_outlets_of_the_commit_not_of_the_chains():
    """A stream run's chain tasks only stage their sinks: the asset events come from the commit."""
    dag, tasks = render(pipeline())
    assert {a.uri for a in tasks.commit.outlets} == {"file:///out/page_views", "file:///out/sessions"}
    assert [r.operator for r in tasks.commit.asset_refs] == ["page_views_json", "sessions_json"]
    assert all(t.outlets == [] for t in tasks.chains.values())
    assert {a.uri for a in tasks.chains["clicks"].inlets} == {"file:///in/clicks"}  # sources stay inlets


def test_dag_runs_one_run_at_a_time_and_has_the_drain_param():
    dag, _ = render(pipeline())
    assert dag.max_active_runs == 1
    assert dag.params["drain"] is False
    dag1, _ = render(pipeline(), dag_id="s1", max_active_runs=1)
    assert dag1.max_active_runs == 1
    with pytest.raises(ValueError, match=r"max_active_runs=3.*one run at a time"):
        render(pipeline(), dag_id="s3", max_active_runs=3)


def test_a_plain_pipeline_keeps_its_dag_settings():
    dag, tasks = render(stream_runs_pipeline("/in/clicks", "/out", None), max_active_runs=3)
    assert dag.max_active_runs == 3 and "drain" not in dag.params and tasks.commit is None
    assert not any(t.endswith("stream_commit") for t in dag.task_dict)


def test_chain_tasks_get_the_checkpoint_dir(tmp_path):
    dag, tasks = render(pipeline("s3a://lake/clicks"))
    op = tasks.chains["sessions"]
    run = PipelineRun.from_context({"run_id": "scheduled__2026-01-02", "dag": dag, "ti": None}, op.pipeline_spec)
    args = op._runtime_args(run)
    assert args[args.index("--checkpoint-dir") + 1] == "s3a://lake/clicks"
    assert args[args.index("--run-id") + 1] == run.run_key  # the stream run's id, as the setup began it


def test_templated_or_relative_checkpoint_dir_is_refused():
    with pytest.raises(Exception, match="template"):
        pipeline("/ckpt/{{ ds }}")
    with pytest.raises(ValueError, match="relative path"):
        render(pipeline("ckpt/clicks"))


class _Run:
    def __init__(self, conf):
        self.conf = conf


@pytest.mark.parametrize("params, conf, want", [
    ({"drain": False}, {}, False), ({"drain": True}, {}, True), ({"drain": False}, {"drain": True}, True),
    ({}, {"drain": "true"}, True), ({"drain": True}, {"drain": False}, False),
])
def test_drain_comes_from_the_param_or_the_trigger_conf(params, conf, want):
    assert drain_requested({"params": params, "dag_run": _Run(conf)}) is want


class _TI:
    dag_id = "s"

    def __init__(self, running):
        self.running = running

    def get_dr_count(self, dag_id, states=None):
        assert dag_id == "s" and states == ["running"]
        return self.running


def test_a_second_running_run_and_a_chain_of_a_discarded_run_fail_clearly(tmp_path):
    import logging

    from airflow_flinkchain.airflow.compat import AirflowFailException
    from airflow_flinkchain.airflow.stream_runs import begin, check_begun

    p = pipeline(str(tmp_path / "ckpt"))
    dag, tasks = render(p)
    spec, job = tasks.spec, p.plan()
    run = PipelineRun.from_context({"run_id": "scheduled__2026-01-02", "dag": dag, "ti": None}, spec)
    with pytest.raises(AirflowFailException, match="2 runs of DAG 's' are running.*one run at a time"):
        begin(job, spec, run, {"ti": _TI(2), "params": {}}, False, logging.getLogger("t"))
    with pytest.raises(AirflowFailException, match="was not begun.*clear the whole run"):
        check_begun(spec, run, "chain 'sessions'")
    begun = begin(job, spec, run, {"ti": _TI(1), "params": {"drain": True}}, False, logging.getLogger("t"))
    assert begun == {"checkpoint_dir": spec.checkpoint_dir, "base": None, "seq": 1, "drain": True}
    check_begun(spec, run, "chain 'sessions'")


def test_re_running_a_run_that_is_not_the_latest_is_refused(tmp_path, monkeypatch):
    """Clearing an older run of a stream DAG would fork the stream: its setup task refuses,
    as a failure Airflow does not retry, and records the refusal in the run store (the run's
    first try left it "success" there); re-running the latest run is allowed."""
    import logging
    from types import SimpleNamespace

    from airflow_flinkchain.store import RunStore

    from airflow_flinkchain.airflow.compat import AirflowFailException
    from airflow_flinkchain.airflow.spec import pipeline_spec
    from airflow_flinkchain.airflow.stream_runs import begin
    from flinkchain_stream_runs import click_slices, drop_slice

    where = {"input_dir": str(tmp_path / "in"), "output_dir": str(tmp_path / "out"),
             "checkpoint_dir": str(tmp_path / "ckpt")}
    for k, part in enumerate(click_slices(n_slices=2, per_slice=10)):
        drop_slice(where["input_dir"], k, part)
        stream_runs_pipeline(**where).execute_local(run_id=f"r{k + 1}")
    p = stream_runs_pipeline(**where)
    job = p.plan()
    spec = pipeline_spec(job, p.settings, checkpoint_dir=p.checkpoint_dir)
    log = logging.getLogger("test")

    def run(run_id):
        return SimpleNamespace(dag_id="clicks", run_id=run_id, run_key=run_id)

    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    monkeypatch.setenv("FLINKCHAIN_STORE_URL", store_url)
    store = RunStore(store_url)
    store.start_run("clicks", "r1", plan=job.to_dict())
    store.finish_run("clicks", "r1", state="success")
    with pytest.raises(AirflowFailException, match="only the latest run can be re-run"):
        begin(job, spec, run("r1"), {"params": {"drain": False}}, False, log)
    recorded = store.get_run_metrics("clicks", "r1")
    assert recorded["state"] == "failed" and "only the latest run can be re-run" in recorded["error"], recorded
    assert begin(job, spec, run("r2"), {"params": {"drain": False}}, False, log)["seq"] == 2


@pytest.mark.parametrize("begun", [False, True])
def test_the_setup_task_verifies_what_the_run_restores_before_any_chain(tmp_path, begun):
    """A truncated shared key-group file of the base checkpoint: the setup task fails (no
    retry) naming the key group, the operator and the way out, before any chain task runs,
    also when it re-runs for a run begun already (a cleared chain clears its setup)."""
    import json
    import logging
    from types import SimpleNamespace

    from airflow_flinkchain.airflow.compat import AirflowFailException
    from airflow_flinkchain.airflow.spec import pipeline_spec
    from airflow_flinkchain.airflow.stream_runs import begin
    from flinkchain_stream_runs import click_slices, drop_slice

    where = {"input_dir": str(tmp_path / "in"), "output_dir": str(tmp_path / "out"),
             "checkpoint_dir": str(tmp_path / "ckpt")}
    for k, part in enumerate(click_slices(n_slices=2, per_slice=10)):
        drop_slice(where["input_dir"], k, part)
        stream_runs_pipeline(**where).execute_local(run_id=f"r{k + 1}")
    p = stream_runs_pipeline(**where)
    job = p.plan()
    spec = pipeline_spec(job, p.settings, checkpoint_dir=p.checkpoint_dir)
    run = SimpleNamespace(dag_id="clicks", run_id="r3", run_key="r3")
    log = logging.getLogger("test")
    if begun:
        begin(job, spec, run, {"params": {"drain": False}}, False, log)
    with open(tmp_path / "ckpt" / "chk-000002" / "_manifest.json") as f:  # a key group the run restores
        key_group = min(p for op in json.load(f)["operators"].values() for p in op["shared"])
    with open(key_group, "r+b") as f:
        f.truncate(3)
    operator = os.path.basename(os.path.dirname(key_group))
    with pytest.raises(AirflowFailException,
                       match=rf"run 'r3': key group \d+ of operator '{operator}' \(shared file of chk-000002\) "
                             rf"{key_group} is damaged \(3 bytes where the manifest says \d+\): restore an earlier "
                             r"checkpoint"):
        begin(job, spec, run, {"params": {"drain": False}}, False, log)
    assert os.path.exists(tmp_path / "ckpt" / "_runs" / "r3") == begun  # nothing staged by a chain
