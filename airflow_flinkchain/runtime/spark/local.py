"""`StreamPipeline.execute()`: every chain of a pipeline, in topological order,
in one SparkSession, with the same runtime code as the Airflow tasks.

The exchange lives in a temporary directory (deleted afterwards unless
`keep=True` or an `exchange_root` is given). Templated source/sink paths are
rendered here (see `runtime.pipeline_run.template_context`), as the Airflow
task does with its own context.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Optional

from airflow_flinkchain.graph.model import OperatorKind
from airflow_flinkchain.io.sinks import CollectSink
from airflow_flinkchain.runtime.connectors.inferred_types import with_inferred_types
from airflow_flinkchain.runtime.exchange.dataset import read_records
from airflow_flinkchain.runtime.exchange.layout import ExchangeArea
from airflow_flinkchain.runtime.core.serialize import loads_plan
from airflow_flinkchain.runtime.pipeline_run import (PipelineResult, run_id_for, deliver_collected,
                                                     render_overrides, template_context, topological_chains)
from airflow_flinkchain.runtime.spark.job import run_chain
from airflow_flinkchain.runtime.spark.plan_file import ship_plan
from airflow_flinkchain.runtime.stream_run import begin_stream_run, commit_stream_run, stream_result


def execute_pipeline(pipeline, spark=None, exchange_root: Optional[str] = None, run_id: Optional[str] = None,
                     keep: bool = False, context: Optional[dict] = None, drain: bool = False) -> PipelineResult:
    from airflow_flinkchain.runtime.spark.session import get_or_create_spark

    job = pipeline.plan()
    run_id = run_id_for(job.pipeline, run_id)
    spark = spark or get_or_create_spark()
    temporary = exchange_root is None
    root = exchange_root or tempfile.mkdtemp(prefix="flinkchain-exchange-")
    dag_id = job.pipeline
    overrides = render_overrides(job, {**template_context(run_id, dag_id), **(context or {})})
    job = with_inferred_types(job, overrides)  # undeclared Parquet sources: their files' schema
    result = PipelineResult(job.pipeline, run_id, root if (keep or not temporary) else None)
    area = ExchangeArea(root, dag_id, run_id)
    collections = area.run.join("_plan", "collections")  # the plan's data, dropped after the run
    stream = None
    try:
        if pipeline.checkpoint_dir is not None:
            stream = begin_stream_run(job, pipeline.checkpoint_dir, run_id, drain=drain,
                                      allow_non_restored_state=pipeline.allow_non_restored_state)
        elif drain:
            raise ValueError(f"pipeline {job.pipeline!r}: drain=True needs a checkpoint_dir (a stream run)")
        plan_bytes = ship_plan(job, collections)
        shipped = loads_plan(plan_bytes)  # collections are references to their data files now
        plan_broadcast = spark.sparkContext.broadcast(plan_bytes)  # one for every chain
        for chain in topological_chains(shipped):
            run = run_chain(spark, shipped, chain.id, run_id, root, dag_id=dag_id, overrides=overrides,
                            plan_bytes=plan_bytes, stream_run=stream, plan_broadcast=plan_broadcast)
            result.metrics[chain.id] = run.metrics
        if stream is not None:
            result.stream = stream_result(commit_stream_run(job, stream))
        for node in job.stream_graph.nodes:
            if node.kind is OperatorKind.SINK and isinstance(node.function, CollectSink):
                name = node.function.name
                result.outputs[name] = read_records(area.collect(name), f"collect:{name}")
        deliver_collected(job, result)
    finally:
        if collections.exists():
            collections.delete()
        if collections.parent().exists() and not collections.parent().list_files():
            collections.parent().delete()
        if temporary and not keep:
            shutil.rmtree(root, ignore_errors=True)
    return result
