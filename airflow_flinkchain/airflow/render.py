"""render_pipeline: a StreamPipeline becomes Airflow tasks.

    with DAG("orders", ...) as dag:
        p = StreamPipeline("orders", parallelism=2, conn_id="spark_default")
        ...
        p.to_airflow()            # == render_pipeline(p)

Inside a TaskGroup named after the pipeline: `pipeline_setup` (as_setup) >>
one ChainSubmitOperator per chain, wired like the chain edges >>
`pipeline_teardown` (as_teardown of the setup, so it runs even when a chain
failed). A pipeline with a `checkpoint_dir` (stream runs) also gets a
`stream_commit` task after every chain (airflow/stream_runs.py). The plan -> specs step is `spec.pipeline_spec` (pure data); this module
only instantiates operators. Parse time: no I/O, no Spark.
"""

from __future__ import annotations

import contextlib

from dataclasses import dataclass, field
from typing import Any, Optional

from airflow_flinkchain.airflow.assets import chain_asset_refs
from airflow_flinkchain.airflow.compat import TaskGroup, current_dag
from airflow_flinkchain.airflow.lifecycle import PipelineSetupOperator, PipelineTeardownOperator, StreamCommitOperator
from airflow_flinkchain.airflow.operators import ChainSubmitOperator
from airflow_flinkchain.airflow.spark_settings import SparkSettings
from airflow_flinkchain.airflow.spec import LIFECYCLE_KEYS, PipelineSpec, pipeline_spec

#: Attribute on the DAG listing the pipelines rendered into it (exchange areas must not collide).
_DAG_PIPELINES_ATTR = "_flinkchain_pipelines"


@dataclass
class PipelineTasks:
    """What render_pipeline created. `group` can be used in dependencies:
    `extract >> tasks.group >> report`."""

    spec: PipelineSpec
    group: Any
    setup: Any
    teardown: Any
    chains: dict[str, Any] = field(default_factory=dict)
    commit: Any = None  # stream runs: the commit task

    def __rshift__(self, other):
        return self.group >> other

    def __lshift__(self, other):
        return self.group << other

    def __rrshift__(self, other):
        return other >> self.group

    def __rlshift__(self, other):
        return other << self.group


def render_pipeline(
    pipeline: Any,
    dag: Any = None,
    group_id: Optional[str] = None,
    strategy: Any = None,
    **overrides: Any,
) -> PipelineTasks:
    """Add the pipeline's tasks to `dag` (default: the enclosing `with DAG(...)`).

    `overrides`: pipeline settings (conn_id, spark_conf, driver_memory, ...,
    exchange_root, keep_exchange) override the pipeline's; anything else
    (retries, pool, execution_timeout, ...) is passed to every task.
    `strategy`: the planner's chaining strategy ("flink" default, "none")."""
    dag = dag or current_dag()
    if dag is None:
        raise ValueError(
            f"pipeline {pipeline.name!r}: to_airflow() needs a DAG: call it inside `with DAG(...):` or pass dag="
        )
    setting_keys = set(SparkSettings.keys()) | set(LIFECYCLE_KEYS)
    settings = {**pipeline.settings, **{k: v for k, v in overrides.items() if k in setting_keys}}
    task_kwargs = {k: v for k, v in overrides.items() if k not in setting_keys}
    job_graph = pipeline.plan(strategy)
    spec = pipeline_spec(job_graph, settings, group_id=group_id,
                         checkpoint_dir=getattr(pipeline, "checkpoint_dir", None))
    if spec.checkpoint_dir:
        from airflow_flinkchain.airflow.stream_runs import prepare_dag

        prepare_dag(dag, spec)

    # Two pipelines in one DAG get separate exchange areas (edge ids may coincide).
    rendered = getattr(dag, _DAG_PIPELINES_ATTR, None)
    if rendered is None:
        rendered = []
        object.__setattr__(dag, _DAG_PIPELINES_ATTR, rendered)
    area_suffix = "" if not rendered else f"__{spec.group_id or len(rendered)}"
    rendered.append(spec.pipeline)

    common = {"pipeline_spec": spec, "area_suffix": area_suffix, **task_kwargs}
    group = TaskGroup(
        group_id=spec.group_id,
        dag=dag,
        tooltip=f"flinkchain pipeline {spec.pipeline!r}: {len(spec.chains)} chain(s)",
    ) if spec.group_id else None
    with group if group is not None else contextlib.nullcontext():
        setup = PipelineSetupOperator(
            task_id=spec.setup_task_id,
            task_display_name=f"setup {spec.pipeline}",
            doc_md=_lifecycle_doc(spec, "setup"),
            pipeline=pipeline,
            strategy=strategy,
            dag=dag,
            **common,
        )
        chains: dict[str, Any] = {}
        refs = {c.chain_id: chain_asset_refs(job_graph, c.chain_id) for c in spec.chains}
        # a stream run's sinks are published by its commit: their events come from that task
        published = tuple(r for c in spec.chains for r in refs[c.chain_id] if r.role == "sink") \
            if spec.checkpoint_dir else ()
        for c in spec.chains:
            op = ChainSubmitOperator(
                task_id=c.task_id,
                task_display_name=c.display_name,
                doc_md=c.doc_md,
                chain_spec=c,
                asset_refs=tuple(r for r in refs[c.chain_id] if r not in published),
                dag=dag,
                **common,
            )
            chains[c.chain_id] = op
            upstream = [chains[_chain_of(spec, t)] for t in c.upstream_task_ids]
            for u in upstream or [setup]:
                u >> op
        teardown = PipelineTeardownOperator(
            task_id=spec.teardown_task_id,
            task_display_name=f"teardown {spec.pipeline}",
            doc_md=_lifecycle_doc(spec, "teardown"),
            pipeline=pipeline,
            keep_exchange=spec.keep_exchange,
            dag=dag,
            **common,
        )
        sinks = [op for cid, op in chains.items() if not spec.chain(cid).out_edges]
        for op in sinks:
            op >> teardown
        commit = None
        if spec.checkpoint_dir:  # all_success: no commit after a failed chain
            commit = StreamCommitOperator(
                task_id=spec.commit_task_id,
                task_display_name=f"commit {spec.pipeline}",
                doc_md=_lifecycle_doc(spec, "commit"),
                pipeline=pipeline,
                strategy=strategy,
                asset_refs=published,
                dag=dag,
                **common,
            )
            list(chains.values()) >> commit >> teardown
        teardown.as_teardown(setups=setup)
    return PipelineTasks(spec=spec, group=group, setup=setup, teardown=teardown, chains=chains, commit=commit)


def _chain_of(spec: PipelineSpec, task_id: str) -> str:
    for c in spec.chains:
        if c.task_id == task_id:
            return c.chain_id
    raise KeyError(task_id)


def _lifecycle_doc(spec: PipelineSpec, which: str) -> str:
    chains = ", ".join(f"`{c.chain_id}`" for c in spec.chains)
    if which == "setup":
        return (
            f"### Setup of pipeline `{spec.pipeline}`\n\nCreates the run's exchange area, serializes the "
            f"plan ({len(spec.chains)} chains: {chains}) with the DAG file's user functions, records the run "
            "in the flinkchain run store and runs the pipeline's `on_setup` hooks."
            + (f" Begins the stream run from the latest checkpoint in `{spec.checkpoint_dir}` (param "
               "`drain`: the last run)." if spec.checkpoint_dir else "")
        )
    if which == "commit":
        return (
            f"### Commit of stream run of pipeline `{spec.pipeline}`\n\nRuns once every chain succeeded: the "
            f"run's snapshot becomes the latest checkpoint in `{spec.checkpoint_dir}` and its file sink outputs "
            "are published (docs/stream-runs.md); then the sinks' asset events are emitted, naming the "
            "published files."
        )
    keep = "kept (keep_exchange=True)" if spec.keep_exchange else "dropped once every chain succeeded"
    return (
        f"### Teardown of pipeline `{spec.pipeline}`\n\nRuns even when a chain failed: calls the pipeline's "
        f"`on_dispose` hooks, finalizes the run record; the run's exchange data is {keep}."
    )
