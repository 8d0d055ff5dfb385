"""The default runtime mode: Flink's STREAMING, or the deployment's `[flinkchain] runtime_mode`
(environment variable or airflow.cfg, as Flink's `execution.runtime-mode`); a pipeline's own
mode wins. `flinkchain plan` and the plan document show the mode in force. The same for the
auto watermark interval (Flink's `pipeline.auto-watermark-interval`)."""

from __future__ import annotations

import json

import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.cli import main
from airflow_flinkchain.graph.errors import PlanningError

ENV = "AIRFLOW__FLINKCHAIN__RUNTIME_MODE"


@pytest.fixture
def deployment(tmp_path, monkeypatch):
    """A deployment of its own: an empty AIRFLOW_HOME and no runtime mode in the environment."""
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.delenv("AIRFLOW_CONFIG", raising=False)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    return tmp_path


def write_cfg(path, mode):
    path.write_text(f"[core]\ndags_folder = /dags\nfernet_key = a%b\n\n[flinkchain]\nruntime_mode = {mode}\n")
    return path


def rolling_counts(p):
    """A keyed reduce: rolling in STREAMING mode, one result per key in BATCH mode."""
    p.from_collection(["a", "b", "a"]).map(lambda w: (w, 1)).key_by(lambda t: t[0]) \
        .reduce(lambda x, y: (x[0], x[1] + y[1])).collect("counts")
    return sorted(p.execute_local().output("counts"))


def test_flinks_default_is_streaming(deployment):
    p = StreamPipeline("d")
    assert rolling_counts(p) == [("a", 1), ("a", 2), ("b", 1)]
    assert p.runtime_mode == "streaming" and p.stream_graph().runtime_mode == "streaming"


def test_the_environment_variable_sets_the_deployments_default(deployment, monkeypatch):
    monkeypatch.setenv(ENV, "BATCH")
    assert StreamPipeline("d").runtime_mode == "batch"
    assert rolling_counts(StreamPipeline("d")) == [("a", 2), ("b", 1)]
    monkeypatch.setenv(ENV, "automatic")  # every source here is bounded: BATCH, as Flink picks
    assert StreamPipeline("d").runtime_mode == "batch"


def test_airflow_cfg_of_airflow_home_and_of_airflow_config(deployment, monkeypatch, tmp_path):
    write_cfg(deployment / "airflow.cfg", "batch")
    assert StreamPipeline("d").runtime_mode == "batch"
    other = write_cfg(tmp_path / "elsewhere.cfg", "streaming")
    monkeypatch.setenv("AIRFLOW_CONFIG", str(other))  # Airflow reads this file instead
    assert StreamPipeline("d").runtime_mode == "streaming"
    write_cfg(other, "batch")  # a changed file is read again
    assert StreamPipeline("d").runtime_mode == "batch"


def test_a_cfg_without_the_option_keeps_flinks_default(deployment):
    (deployment / "airflow.cfg").write_text("[core]\nload_examples = False\n")
    assert StreamPipeline("d").runtime_mode == "streaming"


def test_the_environment_variable_wins_over_the_file_and_the_pipeline_over_both(deployment, monkeypatch):
    write_cfg(deployment / "airflow.cfg", "batch")
    monkeypatch.setenv(ENV, "streaming")
    assert StreamPipeline("d").runtime_mode == "streaming"
    assert StreamPipeline("d", runtime_mode="batch").runtime_mode == "batch"
    monkeypatch.setenv(ENV, "batch")
    assert StreamPipeline("d", runtime_mode="streaming").runtime_mode == "streaming"
    assert StreamPipeline("d").set_runtime_mode("streaming").runtime_mode == "streaming"


def test_a_bad_deployment_value_names_where_it_was_set(deployment, monkeypatch):
    monkeypatch.setenv(ENV, "fast")
    with pytest.raises(PlanningError, match=f"environment variable {ENV}: runtime mode must be .* got 'fast'"):
        StreamPipeline("d")
    monkeypatch.delenv(ENV)
    cfg = write_cfg(deployment / "airflow.cfg", "eventually")
    with pytest.raises(PlanningError, match=rf"\[flinkchain\] runtime_mode in {cfg}: runtime mode must be"):
        StreamPipeline("d")


def test_the_auto_watermark_interval_has_a_deployment_default_too(deployment, monkeypatch):
    """Flink's pipeline.auto-watermark-interval: 0 emits no watermark until the input ends."""
    assert StreamPipeline("d").get_config().get_auto_watermark_interval() == 200
    (deployment / "airflow.cfg").write_text("[flinkchain]\nauto_watermark_interval = 0\n")
    assert StreamPipeline("d").get_config().get_auto_watermark_interval() == 0
    monkeypatch.setenv("AIRFLOW__FLINKCHAIN__AUTO_WATERMARK_INTERVAL", "50")
    p = StreamPipeline("d")
    assert p.get_config().get_auto_watermark_interval() == 50
    assert p.get_config().set_auto_watermark_interval(0).get_auto_watermark_interval() == 0
    monkeypatch.setenv("AIRFLOW__FLINKCHAIN__AUTO_WATERMARK_INTERVAL", "-1")
    with pytest.raises(PlanningError, match="AUTO_WATERMARK_INTERVAL: the auto watermark interval must be an int"):
        StreamPipeline("d")


def plan_output(capsys, dag_file):
    code = main(["plan", str(dag_file)])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_flinkchain_plan_prints_the_mode_in_force(deployment, monkeypatch, tmp_path, capsys):
    dag_file = tmp_path / "two.py"
    dag_file.write_text("from airflow_flinkchain import StreamPipeline\n"
                        "default = StreamPipeline('default')\n"
                        "default.from_collection([1]).collect('out')\n"
                        "pinned = StreamPipeline('pinned', runtime_mode='batch')\n"
                        "pinned.from_collection([1]).collect('out')\n")
    out = plan_output(capsys, dag_file)
    assert "pipeline 'default': 1 chain, 0 edges (chaining: flink; runtime mode: STREAMING)" in out
    assert "pipeline 'pinned': 1 chain, 0 edges (chaining: flink; runtime mode: BATCH)" in out
    write_cfg(deployment / "airflow.cfg", "batch")
    assert "pipeline 'default': 1 chain, 0 edges (chaining: flink; runtime mode: BATCH)" in plan_output(capsys, dag_file)
    monkeypatch.setenv(ENV, "streaming")
    assert main(["plan", str(dag_file), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(p["pipeline"], p["runtime_mode"]) for p in doc["pipelines"]] == [("default", "streaming"),
                                                                             ("pinned", "batch")]
