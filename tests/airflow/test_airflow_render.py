"""Rendering tests: pipelines -> Airflow tasks, without a scheduler, Spark or I/O."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pendulum
import pytest

from airflow.sdk import DAG

from airflow_flinkchain.airflow.lifecycle import PipelineSetupOperator, PipelineTeardownOperator
from airflow_flinkchain.airflow.operators import ChainSubmitOperator, _local_master
from airflow_flinkchain.airflow.paths import run_key
from airflow_flinkchain.airflow.run_context import PipelineRun
from airflow_flinkchain.airflow.spec import pipeline_spec
from af_pipelines import branching, linear

START = pendulum.datetime(2026, 1, 1, tz="UTC")


def make_dag(dag_id: str = "d", **kw) -> DAG:
    return DAG(dag_id, schedule=None, start_date=START, catchup=False, **kw)


def render(pipeline, **kw):
    with make_dag(kw.pop("dag_id", "d")) as dag:
        tasks = pipeline.to_airflow(**kw)
    return dag, tasks


def ups(dag, task_id):
    return sorted(dag.task_dict[task_id].upstream_task_ids)


def test_linear_tasks_ids_names_and_dependencies():
    dag, tasks = render(linear())
    assert sorted(dag.task_dict) == [
        "linear.events", "linear.per_user", "linear.pipeline_setup", "linear.pipeline_teardown"]
    assert dag.task_dict["linear.events"].task_display_name == "events -> parse -> valid"
    assert dag.task_dict["linear.per_user"].task_display_name == "per_user -> write"
    assert ups(dag, "linear.events") == ["linear.pipeline_setup"]
    assert ups(dag, "linear.per_user") == ["linear.events"]
    assert ups(dag, "linear.pipeline_teardown") == ["linear.per_user", "linear.pipeline_setup"]
    assert isinstance(tasks.setup, PipelineSetupOperator) and tasks.setup.is_setup
    assert isinstance(tasks.teardown, PipelineTeardownOperator) and tasks.teardown.is_teardown
    assert str(tasks.teardown.trigger_rule) in ("all_done_setup_success", "TriggerRule.ALL_DONE_SETUP_SUCCESS")
    assert set(tasks.chains) == {"events", "per_user"}
    assert all(isinstance(op, ChainSubmitOperator) for op in tasks.chains.values())


def test_doc_md_lists_operators_parallelism_and_edges():
    dag, _ = render(linear())
    doc = dag.task_dict["linear.events"].doc_md
    for text in ("| 1 | events | source | 2 | events |", "| 2 | parse | map | 2 |", "| 3 | valid | filter | 2 |",
                 "**Input edges**: none", "`valid__per_user`", "HASH", "parallelism **2**"):
        assert text in doc, text
    doc2 = dag.task_dict["linear.per_user"].doc_md
    assert "**Output edges**: none" in doc2 and "valid (chain `events`)" in doc2


def test_side_output_split_select_and_settings_merge():
    dag, tasks = render(branching())
    assert sorted(tasks.chains) == ["kind_b", "orders", "parse"]
    parse = dag.task_dict["orders.parse"]
    assert parse.task_display_name == "parse -> flag_late -> (late, route -> kind_a -> a)"
    assert ups(dag, "orders.parse") == ["orders.orders"]
    assert ups(dag, "orders.kind_b") == ["orders.parse"]
    # only the chain without out-edges feeds the teardown directly
    assert ups(dag, "orders.pipeline_teardown") == ["orders.kind_b", "orders.pipeline_setup"]
    assert "| `route__kind_b` | route (chain `parse`) | kind_b (chain `kind_b`) | HASH |  | b |" in parse.doc_md
    # pipeline < operator: executor_memory overridden, spark_conf merged, env kept
    assert parse._executor_memory == "2g"
    assert parse.conf["spark.sql.ansi.enabled"] == "true" and parse.conf["spark.task.cpus"] == "1"
    assert parse.conf["spark.default.parallelism"] == "2"
    assert parse.env_vars == {"TZ": "UTC"}
    other = dag.task_dict["orders.kind_b"]
    assert other._executor_memory == "1g" and "spark.task.cpus" not in other.conf
    assert dag.task_dict["orders.orders"].conf["spark.default.parallelism"] == "1"


def test_templated_fields_collected_from_sources_and_sinks():
    dag, _ = render(linear())
    events = dag.task_dict["linear.events"]
    assert events.templated_fields == {"events": {"path": "/data/in/{{ ds }}/"}}
    assert "templated_fields" in events.template_fields
    assert dag.task_dict["linear.per_user"].templated_fields == {"write": {"path": "/data/out/{{ run_key }}/per_user"}}


def test_templates_render_with_run_key(tmp_path):
    dag, _ = render(linear())
    op = dag.task_dict["linear.per_user"]
    rid = "manual__2026-01-02T03:04:05+00:00"
    ctx = {"run_id": rid, "ds": "2026-01-02", "dag": dag, "task": op}
    op.render_template_fields(ctx)
    assert op.templated_fields == {"write": {"path": f"/data/out/{run_key(rid)}/per_user"}}
    assert ":" not in run_key(rid)


def test_runtime_arguments(tmp_path):
    dag, tasks = render(linear(exchange_root=str(tmp_path)))
    op = tasks.chains["per_user"]
    ctx = {"run_id": "scheduled__2026-01-02", "dag": dag, "ti": None}
    run = PipelineRun.from_context(ctx, op.pipeline_spec)
    args = op._runtime_args(run)
    assert args[:10] == ["--plan", f"{tmp_path}/d/scheduled__2026-01-02/_plan/plan.pkl", "--chain", "per_user",
                         "--run-id", "scheduled__2026-01-02", "--exchange-root", str(tmp_path), "--dag-id", "d"]
    assert json.loads(args[args.index("--overrides") + 1]) == {"write": {"path": "/data/out/{{ run_key }}/per_user"}}


def test_overrides_reach_settings_and_task_kwargs():
    dag, tasks = render(linear(), conn_id="spark_cluster", driver_memory="3g", retries=2, keep_exchange=True)
    op = tasks.chains["events"]
    assert op._conn_id == "spark_cluster" and op._driver_memory == "3g" and op.retries == 2
    assert tasks.teardown.keep_exchange is True and tasks.setup.retries == 2


def test_unchained_strategy_gives_one_task_per_operator():
    dag, tasks = render(linear(), strategy="none")
    assert sorted(tasks.chains) == ["events", "parse", "per_user", "valid", "write"]
    assert ups(dag, "linear.valid") == ["linear.parse"]


def test_group_id_and_two_pipelines_in_one_dag():
    with make_dag() as dag:
        a = linear("first").to_airflow()
        b = linear("second").to_airflow(group_id="other")
    assert "first.events" in dag.task_dict and "other.events" in dag.task_dict
    assert a.chains["events"].area_suffix == "" and b.chains["events"].area_suffix == "__other"


def test_deterministic_spec_and_serializable_dag():
    spec1 = pipeline_spec(branching().plan(), branching().settings)
    spec2 = pipeline_spec(branching().plan(), branching().settings)
    assert spec1 == spec2
    dag, _ = render(branching())
    from airflow.serialization.serialized_objects import DagSerialization

    data = DagSerialization.to_dict(dag)
    restored = DagSerialization.from_dict(data)
    assert sorted(restored.task_dict) == sorted(dag.task_dict)
    assert restored.task_dict["orders.parse"].task_display_name == "parse -> flag_late -> (late, route -> kind_a -> a)"


def test_errors_name_the_pipeline_or_operator():
    with pytest.raises(ValueError, match="needs a DAG"):
        linear().to_airflow()
    p = linear()
    p2 = branching()
    with pytest.raises(ValueError, match="unknown Spark setting"):
        from airflow_flinkchain.airflow.spark_settings import SparkSettings

        SparkSettings.from_settings({"executor_memroy": "1g"}, owner="operator 'x'", strict=True)
    with pytest.raises(ValueError, match="not a Spark memory size"):
        render(linear(driver_memory="lots"))
    assert p and p2


def test_local_master_follows_parallelism():
    assert _local_master("local[4]", 2) == "local[2]"
    assert _local_master("local[2]", 8) == "local[2]"
    assert _local_master("local[*]", 1) == "local[1]"
    assert _local_master("local", 4) == "local"


def test_parse_has_no_side_effects(tmp_path):
    """Rendering a DAG creates no file, starts no Spark and imports no pyspark."""
    code = (
        "import sys, os\n"
        "from test_airflow_render import render\n"
        "from af_pipelines import branching, linear\n"
        f"render(linear(exchange_root={str(tmp_path / 'x')!r})); render(branching())\n"
        "print('pyspark' in sys.modules)\n"
    )
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "home")}
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.abspath(__file__)), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False"
    assert not (tmp_path / "x").exists()
    assert not (tmp_path / "home" / "flinkchain").exists()


def test_xcom_summary_has_every_counter_summed_over_subtasks(tmp_path, monkeypatch):
    """The task's XCom summary carries every counter of metrics_schema, `skipped` included."""
    from airflow_flinkchain.metrics_schema import COUNTER_NAMES
    from airflow_flinkchain.runtime.core.metrics import OperatorMetrics

    monkeypatch.setenv("FLINKCHAIN_STORE_URL", f"sqlite:///{tmp_path / 'store.db'}")
    dag, tasks = render(linear(exchange_root=str(tmp_path / "ex")))
    op = tasks.chains["events"]
    run = PipelineRun.from_context({"run_id": "scheduled__2026-01-02", "dag": dag, "ti": None}, op.pipeline_spec)
    subtasks = [OperatorMetrics(2, "parse", "parse", s, records_in=5, records_out=2, dead_lettered=1, skipped=1,
                                filtered=1, time_ms=0.5) for s in (0, 1)]
    doc = {"state": "success", "operators": [m.to_dict() for m in subtasks], "outputs": []}
    run.location(run.metrics_path("events")).write_text(json.dumps(doc))
    summary = op._after_submit(run, 0.0, "test")
    assert summary["operators"]["parse"] == {"records_in": 10, "records_out": 4, "dead_lettered": 2, "skipped": 2,
                                             "filtered": 2, "time_ms": 1.0}
    assert set(summary["operators"]["parse"]) == set(COUNTER_NAMES)


@pytest.mark.parametrize("dag_id, run_id", [
    ("café", "manual__2026-01-02T03:04:05+00:00"),  # a unicode DAG id: Airflow allows \w
    ("d", "r" * 300),  # a run id over the file system's limit
])
def test_airflow_tasks_and_runtime_compute_the_same_paths(tmp_path, dag_id, run_id):
    """The chain task passes the runtime --exchange-root/--dag-id/--run-id; both sides must
    then agree on the plan, metrics and exchange paths (the task checks them, the runtime writes them)."""
    from airflow_flinkchain.path_names import MAX_SEGMENT_LENGTH
    from airflow_flinkchain.runtime.exchange.layout import ExchangeArea

    p = linear(exchange_root=str(tmp_path))
    p.from_collection([1]).map(lambda x: x).name("m" * 200).map(lambda x: x).name("n" * 200).set_parallelism(1) \
        .collect("long")
    dag, tasks = render(p, dag_id=dag_id)
    for chain_id, op in tasks.chains.items():
        run = PipelineRun.from_context({"run_id": run_id, "dag": dag, "ti": None}, op.pipeline_spec)
        args = op._runtime_args(run)
        runtime = ExchangeArea(args[args.index("--exchange-root") + 1], args[args.index("--dag-id") + 1],
                               args[args.index("--run-id") + 1])
        assert args[args.index("--plan") + 1] == run.plan_path == runtime.plan().uri
        assert run.metrics_path(chain_id) == runtime.metrics(chain_id).uri
        assert run.area == runtime.run.uri
        for edge in op.chain_spec.in_edges + op.chain_spec.out_edges:
            assert run.edge_path(edge.id) == runtime.edge(edge.id).uri
        assert all(len(part) <= MAX_SEGMENT_LENGTH + len(".json")
                   for part in run.metrics_path(chain_id)[len(str(tmp_path)):].split("/"))


@pytest.mark.parametrize("run_id", [".", "..", "a/../..", "/tmp/abs"])
def test_run_ids_that_are_paths_fail_the_task_and_touch_nothing(tmp_path, monkeypatch, run_id):
    """The teardown drops the run's exchange area: with run id '..' that was the DAG's
    directory (every run of it). Now every task refuses such a run id first."""
    from airflow_flinkchain.path_names import UnsafeNameError

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    root = tmp_path / "ex"
    for rel in ("d/other_run/_metrics/events.json", "other_dag/r/x", "keep"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text('{"state": "success"}')
    before = sorted(str(x) for x in tmp_path.rglob("*"))
    dag, tasks = render(linear(exchange_root=str(root)))
    ctx = {"run_id": run_id, "dag": dag, "ti": None}
    for task in (tasks.teardown, tasks.setup):
        with pytest.raises(UnsafeNameError, match="Airflow run id"):
            task.execute(ctx)
    with pytest.raises(UnsafeNameError, match="Airflow run id"):
        tasks.chains["events"].execute(ctx)
    assert sorted(str(x) for x in tmp_path.rglob("*")) == before


def test_xcom_summary_has_the_lowest_watermark_of_the_subtasks_that_have_one():
    """A gauge is not summed: the operator's watermark is its slowest subtask's; an operator
    without a watermark has no `watermark` key (see metrics_schema.GAUGES)."""
    from airflow_flinkchain.airflow.run_context import operator_totals

    ops = [{"name": "win", "subtask": s, "records_in": 1, "watermark": wm} for s, wm in enumerate((2999, 1999, None))]
    ops.append({"name": "src", "subtask": 0, "records_in": 0, "watermark": None})
    totals = operator_totals(ops)
    assert totals["win"]["watermark"] == 1999 and totals["win"]["records_in"] == 3
    assert "watermark" not in totals["src"]


def test_two_input_chain_depends_on_both_upstream_chains():
    from tests.two_input.pipelines import enrich_pipeline

    dag, _ = render(enrich_pipeline(name="enrich"))
    assert ups(dag, "enrich.levels") == ["enrich.customers", "enrich.orders"]
    assert ups(dag, "enrich.convert") == ["enrich.levels", "enrich.rates"]
    doc = dag.task_dict["enrich.convert"].doc_md
    assert "`levels__convert`" in doc and "`rates__convert`" in doc
    assert "convert input 1 (chain `convert`)" in doc and "convert input 2 (chain `convert`)" in doc
