"""`StreamPipeline.execute()`: every chain of a pipeline, in topological order,
in one SparkSession, with the same runtime code as the Airflow tasks.

The exchange lives in a temporary directory (deleted afterwards unless
`keep=True` or an `exchange_root` is given). Templated source/sink paths are
rendered here with jinja2 and a small context - `run_id`, `ds` (today,
YYYY-MM-DD), `ds_nodash`, `ts` (now, ISO), `dag_id` - as the Airflow task
does with its own context.
"""

from __future__ import annotations

import datetime
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any, Optional

from airflow_flinkchain.graph.model import OperatorKind
from airflow_flinkchain.io.sinks import CollectSink
from airflow_flinkchain.runtime.exchange import read_records
from airflow_flinkchain.runtime.exchange_fs import ExchangeArea
from airflow_flinkchain.runtime.serialize import dumps_plan
from airflow_flinkchain.runtime.spark_job import run_chain


@dataclass
class PipelineResult:
    pipeline: str
    run_id: str
    exchange_root: Optional[str]
    outputs: dict = field(default_factory=dict)  # collect name -> records
    metrics: dict = field(default_factory=dict)  # chain id -> metrics document

    def output(self, name: str) -> list:
        """The records of `collect(name)`, in subtask order."""
        if name not in self.outputs:
            raise KeyError(f"pipeline {self.pipeline!r} has no collect({name!r}) sink; "
                           f"collect sinks: {sorted(self.outputs)}")
        return self.outputs[name]

    def operator_metrics(self, key: str) -> list[dict]:
        """Per-subtask counters of one operator (by key or name)."""
        return [m for doc in self.metrics.values() for m in doc["operators"] if key in (m["key"], m["name"])]


def topological_chains(job) -> list:
    """Chains in an order where every chain comes after the chains it reads from
    (ties in plan order)."""
    pending = list(job.chains)
    done: set[str] = set()
    ordered = []
    while pending:
        for chain in pending:
            if all(job.edge(e).source in done for e in chain.in_edges):
                break
        else:
            raise ValueError(f"pipeline {job.pipeline!r}: the chains form a cycle: {[c.id for c in pending]}")
        pending.remove(chain)
        done.add(chain.id)
        ordered.append(chain)
    return ordered


def template_context(run_id: str, dag_id: str, now: Optional[datetime.datetime] = None) -> dict:
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return {"run_id": run_id, "dag_id": dag_id, "ds": now.strftime("%Y-%m-%d"),
            "ds_nodash": now.strftime("%Y%m%d"), "ts": now.isoformat()}


def render_overrides(job, context: dict) -> dict:
    """{node_key: {"path": rendered}} for every source/sink whose path is a template."""
    import jinja2

    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    overrides = {}
    for node in job.stream_graph.nodes:
        path = getattr(node.function, "path", None)
        if isinstance(path, str) and ("{{" in path or "{%" in path):
            try:
                overrides[node.key] = {"path": env.from_string(path).render(**context)}
            except jinja2.TemplateError as exc:
                raise ValueError(f"operator {node.name!r}: path template {path!r} cannot be rendered ({exc}); "
                                 f"available: {sorted(context)}") from None
    return overrides


def execute_pipeline(pipeline, spark=None, exchange_root: Optional[str] = None, run_id: Optional[str] = None,
                     keep: bool = False, context: Optional[dict] = None) -> PipelineResult:
    from airflow_flinkchain.runtime.session import get_or_create_spark

    job = pipeline.plan()
    spark = spark or get_or_create_spark()
    run_id = run_id or "local__" + datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S%f")
    temporary = exchange_root is None
    root = exchange_root or tempfile.mkdtemp(prefix="flinkchain-exchange-")
    dag_id = job.pipeline
    overrides = render_overrides(job, {**template_context(run_id, dag_id), **(context or {})})
    result = PipelineResult(job.pipeline, run_id, root if (keep or not temporary) else None)
    plan_bytes = dumps_plan(job)
    try:
        for chain in topological_chains(job):
            run = run_chain(spark, job, chain.id, run_id, root, dag_id=dag_id, overrides=overrides,
                            plan_bytes=plan_bytes)
            result.metrics[chain.id] = run.metrics
        area = ExchangeArea(root, dag_id, run_id)
        for node in job.stream_graph.nodes:
            if node.kind is OperatorKind.SINK and isinstance(node.function, CollectSink):
                name = node.function.name
                result.outputs[name] = read_records(area.collect(name), f"collect:{name}")
    finally:
        if temporary and not keep:
            shutil.rmtree(root, ignore_errors=True)
    return result
